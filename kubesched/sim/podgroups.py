"""The PodGroup controller: keeps each PodGroup's status (phase, running, succeeded, failed, occupiedBy).

Mirrors kubernetes-sigs/scheduler-plugins `pkg/controllers/podgroup_controller.go` (Reconcile): a new group
becomes Pending; a Pending group with at least minMember pods becomes Scheduling (and records the owners
of its first pod in occupiedBy); afterwards the counts follow the pods' phases — fewer pods than minMember:
Pending; running + succeeded below minMember: Scheduling; at least minMember: Running; failed pods that
complete minMember: Failed; minMember succeeded: Finished (final, as Failed). Like upstream, the pods of a
group are found by the label alone, in every namespace. Each status patch triggers the next reconcile, so
one event runs reconciles until the status stops changing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from kubesched.api.objects import Pod
from kubesched.api.scheduling import (
    PHASE_FAILED,
    PHASE_FINISHED,
    PHASE_PENDING,
    PHASE_RUNNING,
    PHASE_SCHEDULING,
    PodGroup,
    PodGroupStatus,
    pod_group_name,
)
from kubesched.cluster.events import Cause, Event, EventType
from kubesched.cluster.state import ClusterState

_MAX_ROUNDS = 8  # a reconcile moves one phase at a time; a few rounds always settle


class PodGroupController:
    def __init__(self, cluster: ClusterState, on_change: Callable[[PodGroup, PodGroupStatus], None] | None = None) -> None:
        self.cluster = cluster
        self.on_change = on_change
        self._by_label: dict[str, set[str]] = {}
        self._label_of: dict[str, str] = {}
        for pod in cluster.pods.values():
            self._index(pod)
        cluster.subscribe(self._index_event, index=True, kinds=("Pod",))
        cluster.subscribe(self._on_event, kinds=("Pod", "PodGroup"))
        for obj in list(cluster.others.values()):
            if isinstance(obj, PodGroup):
                self.reconcile(obj.meta.namespace, obj.meta.name)

    def _index(self, pod: Pod) -> None:
        name = pod_group_name(pod)
        if name:
            self._by_label.setdefault(name, set()).add(pod.key)
            self._label_of[pod.key] = name

    def _unindex(self, key: str) -> None:
        name = self._label_of.pop(key, None)
        if name is not None:
            self._by_label.get(name, set()).discard(key)

    def _index_event(self, ev: Event) -> None:
        """The pod lister's index (by group label); kept in step with the state."""
        if ev.kind != "Pod":
            return
        old = ev.old
        if old is not None and ev.type is not EventType.DELETED and old.meta.labels is ev.obj.meta.labels:
            return  # a binding or a status change: the group label is where it was
        self._unindex(ev.obj.key)
        if ev.type is not EventType.DELETED:
            self._index(ev.obj)

    def _on_event(self, ev: Event) -> None:
        """The controller's watches: a change of a labelled pod reconciles its group; so does a new group."""
        if ev.kind == "Pod":
            name = pod_group_name(ev.obj)
            if name:
                # podToPodGroup: the pod's namespace and its group's name.
                self.reconcile(ev.obj.namespace, name)
        elif ev.kind == "PodGroup" and ev.type is EventType.ADDED:
            self.reconcile(ev.obj.meta.namespace, ev.obj.meta.name)

    def pods_of(self, name: str) -> list[Pod]:
        return [p for key in sorted(self._by_label.get(name, ())) if (p := self.cluster.pods.get(key)) is not None]

    def reconcile(self, namespace: str, name: str) -> None:
        for _ in range(_MAX_ROUNDS):
            pg = self.cluster.others.get(f"PodGroup/{namespace}/{name}")
            if not isinstance(pg, PodGroup):
                return
            new = self._next_status(pg)
            if new == pg.status:
                return
            raw = dict(pg.raw)
            raw["status"] = {**(pg.raw.get("status") or {}), **new.to_dict()}
            updated = dataclasses.replace(pg, status=new, raw=raw)
            self.cluster.update(updated, cause=Cause.CONTROLLER)
            if self.on_change is not None:
                self.on_change(updated, pg.status)

    def _next_status(self, pg: PodGroup) -> PodGroupStatus:
        st = pg.status
        if st.phase in (PHASE_FINISHED, PHASE_FAILED):
            return st
        pods = self.pods_of(pg.meta.name)
        if st.phase == "":
            return dataclasses.replace(st, phase=PHASE_PENDING)
        if st.phase == PHASE_PENDING:
            if len(pods) < pg.min_member:
                return st
            occupied_by = st.occupied_by
            if pods:
                refs = sorted(f"{pods[0].namespace}/{o.name}" for o in pods[0].meta.owner_references)
                if refs:
                    occupied_by = ",".join(refs)
            return dataclasses.replace(st, phase=PHASE_SCHEDULING, occupied_by=occupied_by)
        running = sum(1 for p in pods if p.phase == "Running")
        succeeded = sum(1 for p in pods if p.phase == "Succeeded")
        failed = sum(1 for p in pods if p.phase == "Failed")
        phase = st.phase
        if len(pods) < pg.min_member:
            phase = PHASE_PENDING
        else:
            if succeeded + running < pg.min_member:
                phase = PHASE_SCHEDULING
            if succeeded + running >= pg.min_member:
                phase = PHASE_RUNNING
            if failed and failed + running + succeeded >= pg.min_member:
                phase = PHASE_FAILED
            if succeeded >= pg.min_member:
                phase = PHASE_FINISHED
        return dataclasses.replace(st, phase=phase, running=running, succeeded=succeeded, failed=failed)
