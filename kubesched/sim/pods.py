"""The simulator's record of each pod: which workload it belongs to, its usage identity and lineage.

The cluster state holds the pod objects; the registry holds what only the simulation knows about them —
the controller that owns a pod, the usage identity (`<workload>#<ordinal>`) it inherits from the pod it
replaces, its lineage (`replaces`, which the loop detector follows), its usage slot while it runs — and
keeps each record's view of the object current from the state's events.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubesched.api.objects import Pod
from kubesched.cluster.events import Event, EventType

if TYPE_CHECKING:
    from kubesched.sim.context import Sim
    from kubesched.sim.controllers import Controller


@dataclass(slots=True, eq=False)
class SimPod:
    """The simulator's record of one pod object."""

    key: str
    pod: Pod
    owner: Controller | None
    workload: str  # the top-level workload (Deployment/ns/name, ...)
    identity: str  # usage identity
    ordinal: int
    created: float
    serial: int = 0  # tells apart successive pod objects of one name
    replaces: str | None = None
    node: str = ""
    bound_at: float | None = None
    started_at: float | None = None
    phase: str = "Pending"
    terminating: bool = False
    deletion_at: float | None = None
    gone: bool = False
    restarts: int = 0
    slot: int = -1
    usage_row: int = -1
    run_seconds: float = 0.0  # Job pods: how long they must run to succeed

    @property
    def uid(self) -> str:
        return self.pod.uid


class PodRegistry:
    """Pod key → SimPod for the pods that exist, kept in step with the cluster state's events."""

    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self.pods: dict[str, SimPod] = {}
        self._serial = 0
        # The simulator's drivers, told of the changes they watch to a recorded pod (after the record is
        # updated) and of each new record, in the order they were added.
        self._watchers: dict[EventType, list[Callable[[SimPod, Event], None]]] = {t: [] for t in EventType}
        self.on_register: list[Callable[[SimPod], None]] = []
        # The records on each node (sp.node), so a node's pods are found without walking every record.
        self._on_node: dict[str, dict[str, SimPod]] = {}
        # Records of pods deleted at the current instant (a report may still need their workload).
        self._tombstones: dict[str, SimPod] = {}
        self._tombstone_t = -1.0

    def __contains__(self, key: str) -> bool:
        return key in self.pods

    def __getitem__(self, key: str) -> SimPod:
        return self.pods[key]

    def get(self, key: str) -> SimPod | None:
        return self.pods.get(key)

    def values(self) -> list[SimPod]:
        return list(self.pods.values())

    def register(self, pod: Pod, owner: Controller | None, identity: str, ordinal: int, replaces: str | None,
                 workload: str) -> SimPod:
        self._serial += 1
        sp = SimPod(key=pod.key, pod=pod, owner=owner, workload=workload, identity=identity, ordinal=ordinal,
                    created=self.sim.t, serial=self._serial, replaces=replaces, phase=pod.phase or "Pending",
                    terminating=pod.is_terminating)
        self.pods[pod.key] = sp
        rec = self.sim.rec
        rec.created_pods += 1
        if replaces:
            rec.replaces[sp.key] = replaces
        for fn in self.on_register:
            fn(sp)
        return sp

    def set_node(self, sp: SimPod, node: str) -> None:
        """The record's node (bound, created bound, or unbound with "")."""
        if sp.node:
            on = self._on_node.get(sp.node)
            if on is not None and on.get(sp.key) is sp:
                del on[sp.key]
                if not on:
                    del self._on_node[sp.node]
        sp.node = node
        if node:
            self._on_node.setdefault(node, {})[sp.key] = sp

    def on_node(self, node: str) -> list[SimPod]:
        """The current records on a node, in the registry's order (records are registered in serial order)."""
        on = self._on_node.get(node)
        if not on:
            return []
        pods = self.pods
        return sorted((sp for sp in on.values() if pods.get(sp.key) is sp), key=lambda sp: sp.serial)

    def refresh(self, sp: SimPod) -> None:
        """Bring a record up to date at once after a change whose event may still be queued (a change
        made from an event handler is announced after the one being handled)."""
        cur = self.sim.cluster.pods.get(sp.key)
        if cur is None or cur.uid != sp.pod.uid:
            sp.gone = True  # the DELETED event still reaches the watchers
            return
        sp.pod = cur
        self._set_state(sp, cur)

    def last(self, key: str) -> SimPod | None:
        """The record of the pod of that name, or of one deleted at this instant."""
        sp = self.pods.get(key)
        if sp is None and self._tombstone_t == self.sim.t:
            sp = self._tombstones.get(key)
        return sp

    def current(self, sp: SimPod) -> bool:
        """Whether the record still describes a pod object that exists."""
        return not sp.gone and self.pods.get(sp.key) is sp

    def on_event(self, ev: Event) -> None:
        if ev.kind != "Pod":
            return
        obj: Pod = ev.obj
        sp = self.pods.get(obj.key)
        if sp is None or sp.pod.uid != obj.uid:
            return
        t = ev.type
        if t is EventType.DELETED:
            sp.gone = True
            del self.pods[obj.key]
            on = self._on_node.get(sp.node)
            if on is not None and on.get(sp.key) is sp:
                del on[sp.key]
                if not on:
                    del self._on_node[sp.node]
            if self._tombstone_t != self.sim.t:
                self._tombstones = {}
                self._tombstone_t = self.sim.t
            self._tombstones[obj.key] = sp
        else:
            self._update(sp, ev)
        for fn in self._watchers[t]:
            fn(sp, ev)

    def watch(self, fn: Callable[[SimPod, Event], None], *types: EventType) -> None:
        """Call fn(sim_pod, event) for the changes of these types (every type when none is named)."""
        for t in types or tuple(EventType):
            self._watchers[t].append(fn)

    def _update(self, sp: SimPod, ev: Event) -> None:
        obj = ev.obj
        t = ev.type
        sp.pod = obj
        if t is EventType.BOUND:
            self.set_node(sp, ev.node)
            sp.bound_at = self.sim.t
        elif t is EventType.UNBOUND:
            self.set_node(sp, "")
            sp.bound_at = None
        elif t is EventType.UPDATED:
            self._set_state(sp, obj)

    def _set_state(self, sp: SimPod, obj: Pod) -> None:
        """The record's phase and terminating mark from the object; the owner's active index follows."""
        phase = obj.phase or sp.phase
        terminating = obj.is_terminating and not sp.terminating
        if phase == sp.phase and not terminating:
            return
        sp.phase = phase
        if terminating:
            sp.terminating = True
            sp.deletion_at = self.sim.t
        if sp.owner is not None:
            sp.owner.pod_state_changed(sp)

    def by_workload(self, workload: str) -> list[SimPod]:
        return [sp for sp in self.pods.values() if sp.workload == workload]
