"""The disruption controller: each PodDisruptionBudget's status from the pods it selects.

For a PDB, the expected pods are its pods that are neither terminal nor terminating, the healthy ones
those of them that run, and (policy/v1) minAvailable, or expected − maxUnavailable, rounded up when a
percentage, is the desired number; disruptionsAllowed = max(0, healthy − desired). A pod the eviction
handler recorded in `disruptedPods` does not count as healthy until it is being deleted or two minutes
have passed (DeletionTimeout), and such entries are dropped then, as upstream's buildDisruptedPodMap does.

The status is brought up to date before anything that evicts reads it (a descheduler cycle, a drain); only
the PDBs of namespaces whose pods changed since are recomputed.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from kubesched.api.objects import PodDisruptionBudget
from kubesched.cluster.events import Cause, Event
from kubesched.sim.context import Sim
from kubesched.sim.pods import SimPod

DELETION_TIMEOUT = timedelta(minutes=2)


class DisruptionController:
    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self._dirty: set[str] = set()
        self._all_dirty = True

    def pod_changed(self, sp: SimPod, ev: Event) -> None:
        self._dirty.add(sp.pod.namespace)

    def pod_registered(self, sp: SimPod) -> None:
        self._dirty.add(sp.pod.namespace)

    def on_event(self, ev: Event) -> None:
        if ev.kind == "PodDisruptionBudget" and ev.cause is not Cause.DISRUPTION:
            self._dirty.add(ev.obj.meta.namespace)

    def sync(self) -> None:
        cluster = self.sim.cluster
        if not cluster.pdbs or (not self._dirty and not self._all_dirty):
            return
        by_ns: dict[str, list[SimPod]] = {}
        namespaces = {p.meta.namespace for p in cluster.pdbs.values()}
        if not self._all_dirty:
            namespaces &= self._dirty
        for sp in self.sim.pods.values():
            ns = sp.pod.namespace
            if ns in namespaces and sp.phase not in ("Succeeded", "Failed"):
                by_ns.setdefault(ns, []).append(sp)
        now = self.sim.now_dt()
        for pdb in list(cluster.pdbs.values()):
            if pdb.meta.namespace in namespaces:
                self._sync_one(pdb, by_ns.get(pdb.meta.namespace, []), now)
        self._dirty.clear()
        self._all_dirty = False

    def _sync_one(self, pdb: PodDisruptionBudget, candidates: list[SimPod], now: datetime) -> None:
        pods = [sp for sp in candidates if pdb.selector.matches(sp.pod.labels)]
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
