"""The pod garbage collector: terminated pods beyond the threshold, and the pods of a deleted node.

kube-controller-manager's PodGC deletes terminated (Succeeded/Failed) pods, oldest first, once there are
more than `--terminated-pod-gc-threshold` (12,500) of them, and force-deletes the pods bound to a node
that no longer exists (here at once, upstream within its 20 s period).
"""

from __future__ import annotations

from collections import deque

from kubesched.cluster.events import Cause, Event, EventType
from kubesched.sim.context import Sim
from kubesched.sim.pods import SimPod

TERMINATED_POD_GC_THRESHOLD = 12500


class PodGC:
    def __init__(self, sim: Sim, threshold: int = TERMINATED_POD_GC_THRESHOLD) -> None:
        self.sim = sim
        self.threshold = threshold
        self._terminated: deque[str] = deque()

    def pod_changed(self, sp: SimPod, ev: Event) -> None:
        if ev.type is not EventType.UPDATED or ev.old is None:
            return
        if ev.obj.is_terminal and not ev.old.is_terminal:
            self._terminated.append(sp.key)
            self._collect()

    def _collect(self) -> None:
        pods = self.sim.pods
        while len(self._terminated) > self.threshold:
            key = self._terminated.popleft()
            sp = pods.get(key)
            if sp is not None and pods.current(sp):
                self.sim.server.delete_pod(sp.pod, grace_period_seconds=0, cause=Cause.POD_GC)

    def on_event(self, ev: Event) -> None:
        """gcOrphaned: the pods of a deleted node go with it."""
        if ev.kind != "Node" or ev.type is not EventType.DELETED:
            return
        name = ev.obj.name
        sim = self.sim
        for sp in sim.pods.on_node(name):
            sim.rec.event(sim.t, "podDeletedWithNode", pod=sp.key, node=name)
            sim.server.delete_pod(sp.pod, grace_period_seconds=0, cause=Cause.POD_GC)
