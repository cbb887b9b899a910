"""The disruption controller: each PodDisruptionBudget's status from the pods it selects.

For a PDB, the expected pods are its pods that are neither terminal nor terminating, the healthy ones
those of them that run, and (policy/v1) minAvailable, or expected − maxUnavailable, rounded up when a
percentage, is the desired number; disruptionsAllowed = max(0, healthy − desired). A pod the eviction
handler recorded in `disruptedPods` does not count as healthy until it is being deleted or two minutes
have passed (DeletionTimeout), and such entries are dropped then, as upstream's buildDisruptedPodMap does.

The status is brought up to date before anything that evicts reads it (a descheduler cycle, a drain); only
the PDBs of namespaces whose pods changed since are recomputed, each over the pods its selector matched
(kept per PDB from the pod records of its namespace, so a sync costs what changed, not PDBs × pods).
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from kubesched.api.objects import PodDisruptionBudget
from kubesched.api.selectors import LabelSelector
from kubesched.cluster.events import Cause, Event, EventType
from kubesched.sim.context import Sim
from kubesched.sim.pods import SimPod

DELETION_TIMEOUT = timedelta(minutes=2)


class DisruptionController:
    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self._dirty: set[str] = set()
        self._all_dirty = True
        # The pod records by namespace, in the registry's order (the pods a PDB may select).
        self._by_ns: dict[str, dict[str, SimPod]] = {}
        # PDB key → (its selector, the records it matches in the registry's order); built on first use.
        self._matched: dict[str, tuple[LabelSelector, dict[str, SimPod]]] = {}
        self._matched_in_ns: dict[str, list[str]] = {}

    def pod_changed(self, sp: SimPod, ev: Event) -> None:
        ns = sp.pod.namespace
        self._dirty.add(ns)
        if ev.type is EventType.DELETED:
            pods = self._by_ns.get(ns)
            if pods is not None and pods.get(sp.key) is sp:
                del pods[sp.key]
                for key in self._matched_in_ns.get(ns, ()):
                    m = self._matched.get(key)
                    if m is not None and m[1].get(sp.key) is sp:
                        del m[1][sp.key]
        elif ev.old is not None and ev.obj.labels is not ev.old.labels and ev.obj.labels != ev.old.labels:
            # Relabelled: the namespace's PDBs match afresh (in the registry's order).
            self._forget_ns(ns)

    def pod_registered(self, sp: SimPod) -> None:
        ns = sp.pod.namespace
        self._dirty.add(ns)
        pods = self._by_ns.setdefault(ns, {})
        known = sp.key in pods
        pods[sp.key] = sp
        if known:
            # A record replaced under its key keeps the key's place: match the namespace afresh.
            self._forget_ns(ns)
            return
        labels = sp.pod.labels
        for key in self._matched_in_ns.get(ns, ()):
            m = self._matched.get(key)
            if m is not None and m[0].matches(labels):
                m[1][sp.key] = sp

    def _forget_ns(self, ns: str) -> None:
        for key in self._matched_in_ns.pop(ns, ()):
            self._matched.pop(key, None)

    def on_event(self, ev: Event) -> None:
        if ev.kind == "PodDisruptionBudget" and ev.cause is not Cause.DISRUPTION:
            self._dirty.add(ev.obj.meta.namespace)

    def matched(self, pdb: PodDisruptionBudget) -> dict[str, SimPod]:
        """The pod records the PDB's selector matches, in the registry's order."""
        key = pdb.meta.key
        m = self._matched.get(key)
        if m is not None and (m[0] is pdb.selector or m[0] == pdb.selector):
            return m[1]
        ns = pdb.meta.namespace
        sel = pdb.selector
        pods = {k: sp for k, sp in self._by_ns.get(ns, {}).items() if sel.matches(sp.pod.labels)}
        self._matched[key] = (sel, pods)
        keys = self._matched_in_ns.setdefault(ns, [])
        if key not in keys:
            keys.append(key)
        return pods

    def sync(self) -> None:
        cluster = self.sim.cluster
        if not cluster.pdbs or (not self._dirty and not self._all_dirty):
            return
        namespaces = {p.meta.namespace for p in cluster.pdbs.values()}
        if not self._all_dirty:
            namespaces &= self._dirty
        now = self.sim.now_dt()
        for pdb in list(cluster.pdbs.values()):
            if pdb.meta.namespace in namespaces:
                pods = [sp for sp in self.matched(pdb).values() if sp.phase not in ("Succeeded", "Failed")]
                self._sync_one(pdb, pods, now)
        for ns, keys in list(self._matched_in_ns.items()):
            # PDBs deleted since: their matches go.
            kept = [k for k in keys if k in cluster.pdbs]
            if len(kept) != len(keys):
                for k in keys:
                    if k not in cluster.pdbs:
                        self._matched.pop(k, None)
                self._matched_in_ns[ns] = kept
        self._dirty.clear()
        self._all_dirty = False

    def _sync_one(self, pdb: PodDisruptionBudget, pods: list[SimPod], now: datetime) -> None:
        disrupted = {}
        for sp in pods:
            at = pdb.disrupted_pods.get(sp.pod.name)
            if sp.pod.name in pdb.disrupted_pods and not sp.terminating and (at is None or at + DELETION_TIMEOUT >= now):
                disrupted[sp.pod.name] = at
        expected = len([p for p in pods if not p.terminating])
        healthy = len([p for p in pods if p.phase == "Running" and not p.terminating and p.pod.name not in disrupted])
        if pdb.min_available is not None:
            desired = _int_or_percent(pdb.min_available, expected)
        elif pdb.max_unavailable is not None:
            desired = max(0, expected - _int_or_percent(pdb.max_unavailable, expected))
        else:
            desired = expected
        allowed = max(0, healthy - desired)
        self.sim.server.update_pdb_status(pdb, disruptions_allowed=allowed, current_healthy=healthy,
                                          desired_healthy=desired, expected_pods=expected,
                                          disrupted_pods=disrupted, cause=Cause.DISRUPTION)


def _int_or_percent(v: int | str, total: int) -> int:
    """An int, or a percentage of `total` rounded up (GetScaledValueFromIntOrPercent, roundUp)."""
    if isinstance(v, int):
        return v
    return math.ceil(int(v.rstrip("%")) * total / 100)
