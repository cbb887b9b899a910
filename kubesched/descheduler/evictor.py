"""The eviction limiter and the per-profile evictor strategies call.

`PodEvictor` is upstream's `evictions.PodEvictor`: one per descheduler, shared by every plugin of every
profile, so `maxNoOfPodsToEvictPerNode`, `maxNoOfPodsToEvictPerNamespace` and `maxNoOfPodsToEvictTotal`
hold across the whole cycle. Limits are checked in upstream's order (total, node, namespace) and a
refusal raises `EvictionLimitError`. An eviction that passes the limits goes to the API server through
the client's Eviction verb at once: the server decides (a PodDisruptionBudget that allows no disruption
answers 429, which counts as a failed eviction, not against the limits). In dry-run the request is a
server-side dry run: answered the same way, nothing persisted. Each eviction is recorded (pod, node,
profile, plugin, reason).

An evicted pod is not evicted a second time in the cycle. With the one-shot command's default (a
server that does not enforce PDBs and a dry run, as upstream's plugin tests and its dry-run mode see the
cluster) evicted pods stay as they were for the rest of the cycle; a real eviction makes them terminate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kubesched.api.objects import Pod
from kubesched.client.interface import ApiError, Client
from kubesched.cluster.events import Cause
from kubesched.descheduler.framework import EvictionLimitError, EvictOptions, EvictorPlugin, SortPlugin


@dataclass(slots=True)
class EvictionRecord:
    pod: Pod
    node: str
    profile: str
    plugin: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"pod": self.pod.key, "node": self.node, "profile": self.profile, "plugin": self.plugin,
                "reason": self.reason}


class PodEvictor:
    """Global eviction limits, the eviction requests, and the record of the cycle's evictions."""

    def __init__(self, client: Client, *, max_pods_to_evict_per_node: int | None = None,
                 max_pods_to_evict_per_namespace: int | None = None, max_pods_to_evict_total: int | None = None,
                 dry_run: bool = True, grace_period_seconds: int | None = None) -> None:
        self.client = client
        self.max_per_node = max_pods_to_evict_per_node
        self.max_per_namespace = max_pods_to_evict_per_namespace
        self.max_total = max_pods_to_evict_total
        self.dry_run = dry_run
        self.grace_period_seconds = grace_period_seconds
        self.records: list[EvictionRecord] = []
        self.failures: list[tuple[str, str]] = []
        self.node_pod_count: dict[str, int] = {}
        self.namespace_pod_count: dict[str, int] = {}
        self.total_pod_count = 0
        self.evicted_keys: set[str] = set()
        self._evicted_ids: set[int] = set()

    def reset_counters(self) -> None:
        """A new cycle: counters and the record start empty. Each cycle's result keeps its own evictions, so
        a descheduler that runs for days (the simulator, live mode) holds no evicted pod past its cycle."""
        self.records = []
        self.failures = []
        self.node_pod_count = {}
        self.namespace_pod_count = {}
        self.total_pod_count = 0
        self.evicted_keys = set()
        self._evicted_ids = set()

    def node_evicted(self, node_name: str) -> int:
        return self.node_pod_count.get(node_name, 0)

    def total_evicted(self) -> int:
        return self.total_pod_count

    def was_evicted(self, pod: Pod) -> bool:
        # Object identity (cheap; pods are not replaced during a cycle). evict_pod also checks the key.
        return id(pod) in self._evicted_ids

    def evict_pod(self, pod: Pod, opts: EvictOptions, admit: Callable[[Pod], bool] | None = None) -> bool:
        """EvictPod: check the limits (total, node, namespace), then ask the API server. False on failure.

        `admit` is the profile's last check right before the eviction (kubesched's scheduler node fit
        re-asks the scheduler there, as earlier evictions may have taken the room it found)."""
        if pod.key in self.evicted_keys:
            self.failures.append((pod.key, "already evicted in this cycle"))
            return False
        if self.max_total is not None and self.total_pod_count + 1 > self.max_total:
            raise EvictionLimitError("total", f"maximum number of evicted pods per cycle reached ({self.max_total})")
        node = pod.node_name
        if node and self.max_per_node is not None and self.node_pod_count.get(node, 0) + 1 > self.max_per_node:
            raise EvictionLimitError("node", f"maximum number of evicted pods per node {node!r} reached "
                                             f"({self.max_per_node})")
        ns = pod.namespace
        if self.max_per_namespace is not None and self.namespace_pod_count.get(ns, 0) + 1 > self.max_per_namespace:
            raise EvictionLimitError("namespace", f"maximum number of evicted pods per namespace {ns!r} reached "
                                                  f"({self.max_per_namespace})")
        if admit is not None and not admit(pod):
            self.failures.append((pod.key, "refused right before eviction by the profile's evictor"))
            return False
        try:
            self.client.evict(pod, grace_period_seconds=self.grace_period_seconds, dry_run=self.dry_run,
                              cause=Cause.DESCHEDULER)
        except ApiError as e:
            self.failures.append((pod.key, e.message))
            return False
        if node:
            self.node_pod_count[node] = self.node_pod_count.get(node, 0) + 1
        self.namespace_pod_count[ns] = self.namespace_pod_count.get(ns, 0) + 1
        self.total_pod_count += 1
        self.evicted_keys.add(pod.key)
        self._evicted_ids.add(id(pod))
        self.records.append(EvictionRecord(pod, node, opts.profile, opts.plugin, opts.reason or opts.plugin or "NotSet"))
        return True


class ProfileEvictor:
    """The Evictor a profile's strategies see: its filters, its sorters, and the shared PodEvictor."""

    def __init__(self, profile: str, pod_evictor: PodEvictor, filters: Sequence[EvictorPlugin] = (),
                 pre_eviction_filters: Sequence[EvictorPlugin] = (), sorters: Sequence[SortPlugin] = ()) -> None:
        self.profile = profile
        self.pod_evictor = pod_evictor
        self.filters = list(filters)
        self.pre_eviction_filters = list(pre_eviction_filters)
        self.sorters = list(sorters)
        # The strategy running now (set by the descheduler), reported when a strategy leaves opts.plugin empty.
        self.current_plugin = ""
        self.on_evicted: list[Callable[[Pod], None]] = []

    def filter(self, pod: Pod) -> bool:
        if id(pod) in self.pod_evictor._evicted_ids:
            return False
        for f in self.filters:
            if not f.filter(pod):
                return False
        return True

    @property
    def filters_read_only_the_pod(self) -> bool:
        """Whether every filter's verdict on a pod stays while other pods are evicted (each plugin says so
        with a true `filter_reads_only_the_pod`; one that does not say is assumed to read other pods)."""
        return all(getattr(f, "filter_reads_only_the_pod", False) for f in self.filters)

    def pre_eviction_filter(self, pod: Pod) -> bool:
        for f in self.pre_eviction_filters:
            if not f.pre_eviction_filter(pod):
                return False
        return True

    def _admit(self, pod: Pod) -> bool:
        return all(f.evicting(pod) for f in self.pre_eviction_filters)

    @property
    def has_sorters(self) -> bool:
        return bool(self.sorters)

    def sort(self, pods: list[Pod]) -> list[Pod]:
        """The profile's sorters, the first listed being the primary key (each should sort stably).

        Without sorters the order is left as the strategy made it (upstream's order).
        """
        out = list(pods)
        for s in reversed(self.sorters):
            out = s.sort(out)
        return out

    def evict(self, pod: Pod, opts: EvictOptions) -> bool:
        full = EvictOptions(reason=opts.reason, profile=self.profile, plugin=opts.plugin or self.current_plugin)
        ok = self.pod_evictor.evict_pod(pod, full, admit=self._admit)
        if ok:
            for f in self.pre_eviction_filters:
                f.evicted(pod)
            for cb in self.on_evicted:
                cb(pod)
        return ok

    def node_evicted(self, node_name: str) -> int:
        return self.pod_evictor.node_evicted(node_name)

    def total_evicted(self) -> int:
        return self.pod_evictor.total_evicted()
