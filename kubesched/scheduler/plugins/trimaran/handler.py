"""Trimaran's PodAssignEventHandler: pods bound recently, whose load the metrics cannot show yet.

Upstream watches assigned pods and stamps each with the time it saw the assignment; TargetLoadPacking
adds the predicted usage of a node's stamped pods when the stamp is after the metrics window's end, or
within `metricsAgentReportingIntervalSeconds` (60 s) before it. Every 5 minutes a cleanup drops stamps
older than 60 seconds.

Here the stamp of a pod bound during the run is the scheduler's clock at binding. A pod that is already
bound in the snapshot is stamped with its PodScheduled condition's lastTransitionTime when it has one;
without it the pod is taken to be reflected in the metrics already. (Upstream stamps every existing pod
with its own start time, so for its first minutes it counts the whole cluster's pods twice.) The cleanup
runs at every 5-minute mark of the clock since the handler started, which makes it deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from kubesched.api.objects import Pod, parse_time
from kubesched.cluster.events import Event, EventType
from kubesched.cluster.state import ClusterState

CACHE_CLEANUP_INTERVAL_SECONDS = 5 * 60
METRICS_AGENT_REPORTING_INTERVAL_SECONDS = 60


def pod_scheduled_time(pod: Pod) -> float | None:
    """The PodScheduled=True condition's lastTransitionTime, as unix seconds."""
    for c in pod.status.get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == "PodScheduled" and c.get("status") == "True":
            try:
                t = parse_time(c.get("lastTransitionTime"), "status.conditions.lastTransitionTime")
            except Exception:  # an unreadable stamp is as good as none
                return None
            return t.timestamp() if t is not None else None
    return None


@dataclass(slots=True)
class PodInfo:
    timestamp: float
    pod: Pod


class PodAssignEventHandler:
    """node name → [(stamp, pod)] in stamp order, kept current by the cluster's events."""

    def __init__(self, cluster: ClusterState, now: Callable[[], float]) -> None:
        self.now = now
        self.started = now()
        self._last_cleanup = self.started
        self.scheduled: dict[str, list[PodInfo]] = {}
        self._node_of: dict[str, str] = {}
        seeded = []
        for pod in cluster.pods.values():
            if pod.node_name and not pod.is_terminal:
                t = pod_scheduled_time(pod)
                if t is not None:
                    seeded.append((t, pod))
        for t, pod in sorted(seeded, key=lambda x: x[0]):
            self._append(pod.node_name, t, pod)
        cluster.subscribe(self._on_event, index=True)

    def _append(self, node: str, t: float, pod: Pod) -> None:
        self.scheduled.setdefault(node, []).append(PodInfo(t, pod))
        self._node_of[pod.key] = node

    def _remove(self, pod: Pod) -> None:
        node = self._node_of.pop(pod.key, None)
        if node is None:
            return
        infos = self.scheduled.get(node, [])
        for i, info in enumerate(infos):
            if info.pod.uid == pod.uid and info.pod.key == pod.key:
                del infos[i]
                break
        if not infos:
            self.scheduled.pop(node, None)

    def _on_event(self, ev: Event) -> None:
        """PodAssignEventHandler: pods seen bound through the API (OnAdd, OnUpdate with a new node), and
        deleted. The scheduler's own assumption is not an informer event, so it is not seen here."""
        if ev.kind != "Pod":
            return
        obj = ev.obj
        t = ev.type
        if t is EventType.DELETED or t is EventType.UNBOUND:
            self._remove(obj)
        elif t is EventType.BOUND:
            if self._node_of.get(obj.key) != ev.node:
                self._append(ev.node, self.now(), obj)
        elif t is EventType.ADDED and obj.node_name:
            ts = pod_scheduled_time(obj)
            self._append(obj.node_name, ts if ts is not None else self.now(), obj)
        elif t is EventType.UPDATED and obj.node_name and (ev.old is None or ev.old.node_name != obj.node_name):
            # OnUpdate only when the node name changed (a status update is not a new assignment).
            self._append(obj.node_name, self.now(), obj)

    def _cleanup(self) -> None:
        t = self.now()
        ticks = math.floor((t - self.started) / CACHE_CLEANUP_INTERVAL_SECONDS)
        tick = self.started + ticks * CACHE_CLEANUP_INTERVAL_SECONDS
        if ticks <= 0 or tick <= self._last_cleanup:
            return
        self._last_cleanup = tick
        for node in list(self.scheduled):
            keep = [i for i in self.scheduled[node] if i.timestamp + METRICS_AGENT_REPORTING_INTERVAL_SECONDS > tick]
            for i in self.scheduled[node]:
                if i.timestamp + METRICS_AGENT_REPORTING_INTERVAL_SECONDS <= tick:
                    self._node_of.pop(i.pod.key, None)
            if keep:
                self.scheduled[node] = keep
            else:
                del self.scheduled[node]

    def recent(self, node: str) -> list[PodInfo]:
        self._cleanup()
        return self.scheduled.get(node, [])

    def nodes(self) -> list[str]:
        self._cleanup()
        return list(self.scheduled)


def is_missing(stamp: float, window_end: float) -> bool:
    """Whether a stamped pod's usage is missing from metrics whose window ends at `window_end`."""
    ts = math.floor(stamp)  # time.Unix(): whole seconds
    end = int(window_end)
    return ts > end or (ts <= end and end - ts < METRICS_AGENT_REPORTING_INTERVAL_SECONDS)
