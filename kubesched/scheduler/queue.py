"""The scheduling queue: activeQ ordered by the QueueSort plugin, backoffQ, and the unschedulable pods.

Follows kube-scheduler's PriorityQueue: a pod that fails goes to the unschedulable pool (or to backoff
when a move request came during its cycle); cluster events that one of the rejecting plugins registered
for move it back (to backoffQ while its backoff lasts, else activeQ); pods left unschedulable for
`max_in_unschedulable` seconds (5 minutes) are flushed back; backoff starts at
podInitialBackoffSeconds and doubles up to podMaxBackoffSeconds. Pods a PreEnqueue plugin rejects
(scheduling gates) wait outside activeQ until an update lets them in.

The unschedulable pods are also grouped by what rejected them (profile and rejecting plugins): a cluster
event asks each group once whether it may help (the plugins' registered events) and moves only the
pods of the groups it may help, in the order they became unschedulable — what walking every
unschedulable pod would do, at the cost of the groups and the pods moved.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable
from typing import Any

from kubesched.api.objects import Pod
from kubesched.scheduler.framework import QueuedPodInfo
from kubesched.scheduler.runtime import Framework

DEFAULT_MAX_IN_UNSCHEDULABLE = 300.0


class SchedulingQueue:
    def __init__(self, frameworks: dict[str, Framework], clock: Callable[[], float],
                 initial_backoff: float = 1.0, max_backoff: float = 10.0,
                 max_in_unschedulable: float = DEFAULT_MAX_IN_UNSCHEDULABLE) -> None:
        self.frameworks = frameworks
        self.clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_in_unschedulable = max_in_unschedulable
        self._active: list[tuple[Any, int, str]] = []
        self._backoff: list[tuple[float, int, str]] = []
        self.infos: dict[str, QueuedPodInfo] = {}
        self.where: dict[str, str] = {}  # pod key -> active | backoff | unschedulable | gated | inflight
        self.unschedulable_since: dict[str, float] = {}
        # The unschedulable pool by (schedulerName, rejecting plugins): pod key -> when it joined (a counter).
        self._groups: dict[tuple[str, frozenset[str]], dict[str, int]] = {}
        self._group_of: dict[str, tuple[str, frozenset[str]]] = {}
        self._joined = 0
        self._interest: dict[tuple[tuple[str, frozenset[str]], str, str], bool] = {}
        self._seq = 0
        self.scheduling_cycle = 0
        self.move_request_cycle = -1
        first = next(iter(frameworks.values()), None)
        sort_plugin = first.queue_sort if first is not None else None
        self._less = sort_plugin.less if sort_plugin is not None else None
        self._sort_key = sort_plugin.sort_key if sort_plugin is not None else None

    # ------------------------------------------------------------ ordering

    def _key(self, qpi: QueuedPodInfo) -> Any:
        if self._sort_key is not None:
            k = self._sort_key(qpi)
            if k is not None:
                return k
        less_fn = self._less
        assert less_fn is not None
        less: Callable[[QueuedPodInfo, QueuedPodInfo], bool] = less_fn

        @functools.total_ordering
        class _K:
            def __init__(self, q: QueuedPodInfo) -> None:
                self.q = q

            def __lt__(self, other: _K) -> bool:
                return less(self.q, other.q)

            def __eq__(self, other: object) -> bool:
                return isinstance(other, _K) and not less(self.q, other.q) and not less(other.q, self.q)

        return _K(qpi)

    def _push_active(self, qpi: QueuedPodInfo) -> None:
        if qpi.initial_attempt_timestamp is None:
            # moveToActiveQ: set when the pod first enters activeQ (Coscheduling's QueueSort reads it).
            qpi.initial_attempt_timestamp = self.clock()
        self._seq += 1
        heapq.heappush(self._active, (self._key(qpi), self._seq, qpi.pod.key))
        self.where[qpi.pod.key] = "active"

    def _push_backoff(self, qpi: QueuedPodInfo) -> None:
        self._seq += 1
        heapq.heappush(self._backoff, (self.backoff_expiry(qpi), self._seq, qpi.pod.key))
        self.where[qpi.pod.key] = "backoff"

    # ------------------------------------------------------------ backoff

    def backoff_duration(self, qpi: QueuedPodInfo) -> float:
        duration = self.initial_backoff
        for _ in range(1, qpi.attempts):
            if duration > self.max_backoff - duration:
                return self.max_backoff
            duration += duration
        return duration

    def backoff_expiry(self, qpi: QueuedPodInfo) -> float:
        return qpi.timestamp + self.backoff_duration(qpi)

    def is_backing_off(self, qpi: QueuedPodInfo) -> bool:
        return qpi.attempts > 0 and self.backoff_expiry(qpi) > self.clock()

    # ------------------------------------------------------------ adding

    def add(self, pod: Pod) -> None:
        now = self.clock()
        qpi = QueuedPodInfo(pod=pod, timestamp=now, initial_attempt_timestamp=None)
        self.infos[pod.key] = qpi
        self._enqueue_new(qpi)

    def _enqueue_new(self, qpi: QueuedPodInfo) -> None:
        fwk = self.frameworks.get(qpi.pod.scheduler_name)
        if fwk is not None:
            st = fwk.run_pre_enqueue(qpi.pod)
            if not st.is_success:
                qpi.gated = True
                qpi.unschedulable_plugins = {st.plugin}
                self.where[qpi.pod.key] = "gated"
                return
        qpi.gated = False
        self._push_active(qpi)

    def update(self, pod: Pod, spec_changed: bool = True) -> None:
        """A pending pod changed (e.g. a scheduling gate removed). A status-only change (`spec_changed`
        False, e.g. a nomination) updates the pod where it is; another change may make an unschedulable
        pod schedulable, so it moves (upstream's isPodUpdated)."""
        qpi = self.infos.get(pod.key)
        if qpi is None:
            self.add(pod)
            return
        qpi.pod = pod
        where = self.where.get(pod.key)
        if where == "gated":
            self._enqueue_new(qpi)
        elif where == "unschedulable" and spec_changed:
            self._move(qpi)

    def delete(self, pod: Pod) -> None:
        self.infos.pop(pod.key, None)
        self.where.pop(pod.key, None)
        self._pool_remove(pod.key)

    def _pool_add(self, qpi: QueuedPodInfo) -> None:
        """The pod joins the unschedulable pool (at the end: insertion order is time order)."""
        key = qpi.pod.key
        self._pool_remove(key)
        self.unschedulable_since[key] = qpi.timestamp
        group = (qpi.pod.scheduler_name, frozenset(qpi.unschedulable_plugins))
        self._joined += 1
        members = self._groups.get(group)
        if members is None:
            members = self._groups[group] = {}
        members[key] = self._joined
        self._group_of[key] = group

    def _pool_remove(self, key: str) -> None:
        self.unschedulable_since.pop(key, None)
        group = self._group_of.pop(key, None)
        if group is not None:
            members = self._groups[group]
            members.pop(key, None)
            if not members:
                del self._groups[group]

    # ------------------------------------------------------------ popping

    def flush_backoff_completed(self) -> None:
        now = self.clock()
        while self._backoff and self._backoff[0][0] <= now:
            _, _, key = heapq.heappop(self._backoff)
            qpi = self.infos.get(key)
            if qpi is not None and self.where.get(key) == "backoff":
                self._push_active(qpi)

    def flush_unschedulable_leftover(self) -> None:
        """Pods unschedulable for longer than max_in_unschedulable go back (upstream's periodic flush)."""
        now = self.clock()
        since_of = self.unschedulable_since
        # Insertion order is time order (a re-added pod moves to the end), so the oldest entry comes first.
        if not since_of or now - next(iter(since_of.values())) <= self.max_in_unschedulable:
            return
        for key, since in list(since_of.items()):
            if now - since <= self.max_in_unschedulable:
                break
            qpi = self.infos.get(key)
            if qpi is not None:
                self._move(qpi)
            else:
                self._pool_remove(key)

    def pop(self) -> QueuedPodInfo | None:
        if self._backoff:
            self.flush_backoff_completed()
        if self.unschedulable_since:
            self.flush_unschedulable_leftover()
        while self._active:
            _, _, key = heapq.heappop(self._active)
            qpi = self.infos.get(key)
            if qpi is None or self.where.get(key) != "active":
                continue
            self.where[key] = "inflight"
            qpi.attempts += 1
            if qpi.initial_attempt_timestamp is None:
                qpi.initial_attempt_timestamp = self.clock()
            self.scheduling_cycle += 1
            return qpi
        return None

    def next_backoff_expiry(self) -> float | None:
        live = [t for t, _, k in self._backoff if self.where.get(k) == "backoff"]
        return min(live) if live else None

    def done(self, pod: Pod) -> None:
        """The pod was bound: it leaves the queue."""
        self.delete(pod)

    def add_unschedulable(self, qpi: QueuedPodInfo, cycle: int, error: bool = False) -> None:
        """AddUnschedulableIfNotPresent after a failed attempt in scheduling cycle `cycle`."""
        qpi.timestamp = self.clock()
        key = qpi.pod.key
        self.infos[key] = qpi
        if error or self.move_request_cycle >= cycle:
            self._push_backoff(qpi)
            return
        self.where[key] = "unschedulable"
        self._pool_add(qpi)

    def activate(self, pods: dict[str, Pod]) -> None:
        """Activate: pods in the unschedulable pool or backoffQ move to activeQ at once (backoff ignored).

        A pod that failed at this very instant stays where it is: scheduling takes no virtual time, and a
        group whose pods activate each other would otherwise be retried for ever without the clock moving
        (upstream retries it within milliseconds, which is what the pod's backoff stands for here)."""
        now = self.clock()
        for key in pods:
            qpi = self.infos.get(key)
            where = self.where.get(key)
            if qpi is None or where not in ("unschedulable", "backoff", "gated"):
                continue
            if where != "gated" and qpi.attempts and qpi.timestamp >= now:
                continue
            self._pool_remove(key)
            if where == "gated":
                self._enqueue_new(qpi)
            else:
                self._push_active(qpi)

    # ------------------------------------------------------------ cluster events

    def _move(self, qpi: QueuedPodInfo) -> None:
        key = qpi.pod.key
        self._pool_remove(key)
        if self.is_backing_off(qpi):
            self._push_backoff(qpi)
        else:
            self._push_active(qpi)

    def on_cluster_event(self, resource: str, action: str, exclude: str | None = None) -> None:
        """MoveAllToActiveOrBackoffQueue for the pods whose rejecting plugins registered this event
        (`exclude`: a pod key left where it is)."""
        self.move_request_cycle = self.scheduling_cycle
        if not self.unschedulable_since:
            return
        moving: list[tuple[str, int]] = []
        groups = 0
        for group, members in self._groups.items():
            if self._group_interested(group, resource, action):
                moving.extend(members.items())
                groups += 1
        if groups > 1:
            moving.sort(key=lambda kv: kv[1])  # the order the pods became unschedulable
        infos = self.infos
        for key, _ in moving:
            if key != exclude:
                self._move(infos[key])

    def _group_interested(self, group: tuple[str, frozenset[str]], resource: str, action: str) -> bool:
        """Whether the event may help pods that these plugins rejected (asked once per group and event)."""
        k = (group, resource, action)
        ok = self._interest.get(k)
        if ok is None:
            fwk = self.frameworks.get(group[0])
            ok = fwk is not None and self._interested(fwk, group[1], resource, action)
            self._interest[k] = ok
        return ok

    @staticmethod
    def _interested(fwk: Framework, plugins: frozenset[str] | set[str], resource: str, action: str) -> bool:
        if not plugins:
            return True
        for name in plugins:
            pl = fwk.plugins.get(name)
            if pl is None:
                return True
            for ev in pl.events_to_register():
                if ev.resource == resource and action in ev.actions:
                    return True
        return False

    # ------------------------------------------------------------ reading

    def pending(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for key, where in self.where.items():
            out.setdefault(where, []).append(key)
        return out

    def __len__(self) -> int:
        return len(self.infos)
