"""The kubelet's node-pressure eviction manager (pkg/kubelet/eviction/eviction_manager.go), one per node.

`EvictionManager(config, clock).synchronize(now, stats, pods)` is one housekeeping pass: observe the
signals in a Summary, decide which thresholds are met (held until threshold + minimum reclaim), which
have outlasted their grace period, which pressure conditions to report (held for the pressure
transition period), evict pods over their local-storage limits, and otherwise reclaim node-level
resources and evict at most one pod ranked for the starved resource. The manager keeps its state
between passes; it never changes the pods it is given (the caller applies the evictions).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from kubesched.api.objects import Node, Pod, Taint
from kubesched.api.quantity import value_of
from kubesched.errors import InputError
from kubesched.kubelet.admission import REASON, AdmitResult, admit, pressure_taints
from kubesched.kubelet.critical import is_critical_pod
from kubesched.kubelet.kubelet_config import KubeletEvictionConfig
from kubesched.kubelet.quantities import GoQuantity, binary, parse_go_quantity
from kubesched.kubelet.ranking import (
    RankFunc,
    StatsFunc,
    build_signal_to_rank_func,
    disk_usage,
    eviction_message,
)
from kubesched.kubelet.signals import PodStats, PodStatsIndex, Summary, make_signal_observations
from kubesched.kubelet.thresholds import (
    CONTAINERFS_AVAILABLE,
    CONTAINERFS_INODES_FREE,
    IMAGEFS_AVAILABLE,
    IMAGEFS_INODES_FREE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    SIGNAL_TO_RESOURCE,
    Observation,
    Threshold,
    by_eviction_priority,
    merge_thresholds,
    node_conditions,
    node_conditions_last_observed_at,
    node_conditions_observed_since,
    thresholds_first_observed_at,
    thresholds_met,
    thresholds_met_grace_period,
    thresholds_updated_stats,
    update_container_fs_thresholds,
)

# How long an evicted pod gets to stop under a hard threshold (0 would mean "the pod's own period").
IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS = 1

# Node-level reclaim actions (the container and image garbage collectors).
DELETE_ALL_UNUSED_CONTAINERS = "DeleteAllUnusedContainers"
DELETE_UNUSED_IMAGES = "DeleteUnusedImages"

# Signals of local-storage limit evictions (metrics labels upstream).
SIGNAL_EMPTY_DIR_FS_LIMIT = "emptydirfs.limit"
SIGNAL_EPHEMERAL_POD_FS_LIMIT = "ephemeralpodfs.limit"
SIGNAL_EPHEMERAL_CONTAINER_FS_LIMIT = "ephemeralcontainerfs.limit"

CONTAINER_EPHEMERAL_STORAGE_MESSAGE = 'Container {} exceeded its local ephemeral storage limit "{}". '
POD_EPHEMERAL_STORAGE_MESSAGE = "Pod ephemeral local storage usage exceeds the total limit of containers {}. "
EMPTY_DIR_MESSAGE = 'Usage of EmptyDir volume "{}" exceeds the limit "{}". '

DISRUPTION_TARGET = "DisruptionTarget"
TERMINATION_BY_KUBELET = "TerminationByKubelet"

# Given the reclaim actions to run, return the Summary observed afterwards (None: nothing changed).
NodeReclaimFunc = Callable[[Sequence[str]], Summary | None]


@dataclass(frozen=True, slots=True)
class DiskLayout:
    """Where images and writable layers live: on nodefs, on a dedicated imagefs, or split between them
    (upstream asks cAdvisor and the runtime once, at the first housekeeping)."""

    dedicated_image_fs: bool = False
    split_container_fs: bool = False


@dataclass(slots=True)
class Eviction:
    """One pod the manager kills: the grace period it passes to the pod killer and the status it writes."""

    pod: Pod
    grace_period_seconds: int
    signal: str
    message: str
    conditions: list[dict[str, str]] = field(default_factory=list)

    def status(self) -> dict[str, Any]:
        return {"phase": "Failed", "reason": REASON, "message": self.message, "conditions": list(self.conditions)}


@dataclass(slots=True)
class NodeReclaimResult:
    signal: str
    actions: tuple[str, ...]
    resolved: bool  # no threshold is met any more (with minimum reclaim): no pod is evicted


@dataclass(slots=True)
class SyncResult:
    """What one housekeeping pass observed and did."""

    at: float
    observations: dict[str, Observation] = field(default_factory=dict)
    thresholds_met: list[Threshold] = field(default_factory=list)  # met and past their grace period
    conditions: list[str] = field(default_factory=list)
    taints: list[Taint] = field(default_factory=list)
    threshold_to_reclaim: Threshold | None = None
    starved_resource: str | None = None
    node_reclaim: NodeReclaimResult | None = None
    rank_order: list[Pod] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    skipped_critical: list[Pod] = field(default_factory=list)

    @property
    def evicted(self) -> list[Pod]:
        return [e.pod for e in self.evictions]


def build_signal_to_node_reclaim_funcs(dedicated_image_fs: bool, split_container_fs: bool) -> dict[str, tuple[str, ...]]:
    """buildSignalToNodeReclaimFuncs: which garbage collectors can relieve which filesystem."""
    both = (DELETE_ALL_UNUSED_CONTAINERS, DELETE_UNUSED_IMAGES)
    if dedicated_image_fs and not split_container_fs:
        node: tuple[str, ...] = ()
        image: tuple[str, ...] = both
        container: tuple[str, ...] = both
    elif dedicated_image_fs and split_container_fs:
        node = container = (DELETE_ALL_UNUSED_CONTAINERS,)
        image = (DELETE_UNUSED_IMAGES,)
    else:
        node = image = container = both
    return {NODEFS_AVAILABLE: node, NODEFS_INODES_FREE: node, IMAGEFS_AVAILABLE: image, IMAGEFS_INODES_FREE: image,
            CONTAINERFS_AVAILABLE: container, CONTAINERFS_INODES_FREE: container}


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _limit(container_raw: dict[str, Any], resource: str, where: str) -> GoQuantity | None:
    res = container_raw.get("resources")
    limits = res.get("limits") if isinstance(res, dict) else None
    if not isinstance(limits, dict) or resource not in limits:
        return None
    try:
        return parse_go_quantity(limits[resource])
    except ValueError as e:  # pragma: no cover - pod parsing already validated the quantity
        raise InputError(str(e), field=f"{where}.resources.limits.{resource}") from None


def _max(a: GoQuantity | None, b: GoQuantity | None) -> GoQuantity | None:
    if a is None:
        return b
    if b is None:
        return a
    return b if b.value > a.value else a


def pod_ephemeral_storage_limit(pod: Pod) -> GoQuantity | None:
    """resourcehelper.PodLimits for ephemeral-storage (None when no container sets the limit)."""
    total: GoQuantity | None = None
    for c in pod.containers:
        q = _limit(c.raw, "ephemeral-storage", f"spec.containers[{c.name}]")
        if q is not None:
            total = q if total is None else total + q
    sidecars: GoQuantity | None = None
    init_peak: GoQuantity | None = None
    for c in pod.init_containers:
        q = _limit(c.raw, "ephemeral-storage", f"spec.initContainers[{c.name}]")
        if c.is_sidecar:
            if q is not None:
                total = q if total is None else total + q
                sidecars = q if sidecars is None else sidecars + q
            step = sidecars
        else:
            step = q
            if sidecars is not None:
                step = sidecars if step is None else step + sidecars
        init_peak = _max(init_peak, step)
    total = _max(total, init_peak)
    overhead = pod.overhead.get("ephemeral-storage")
    if total is not None and overhead is not None:
        total = total + GoQuantity(overhead, total.format)
    return total


class EvictionManager:
    """One node's eviction manager. Feed it one Summary per housekeeping interval."""

    def __init__(self, config: KubeletEvictionConfig, clock: Callable[[], float] | None = None,
                 disk_layout: DiskLayout | None = None) -> None:
        self.config = config
        self.clock = clock or time.time
        self.disk_layout = disk_layout or DiskLayout()
        self.thresholds: list[Threshold] = list(config.thresholds)
        self.pod_level_resources = config.feature_enabled("PodLevelResources")
        self.memory_backed_volume_resize = config.feature_enabled("InPlacePodVerticalScalingMemoryBackedVolumes")
        self.node_conditions: list[str] = []
        self.thresholds_first_observed_at: dict[Threshold, float] = {}
        self.node_conditions_last_observed_at: dict[str, float] = {}
        self.thresholds_met: list[Threshold] = []
        self.last_observations: dict[str, Observation] = {}
        self._initialized = False
        self._rank_funcs: dict[str, RankFunc] = {}
        self._reclaim_funcs: dict[str, tuple[str, ...]] = {}

    # ------------------------------------------------------------ the public surface

    @property
    def taints(self) -> list[Taint]:
        return pressure_taints(self.node_conditions)

    def admit(self, pod: Pod) -> AdmitResult:
        """The admission handler: may this pod start on the node under the current conditions?"""
        return admit(self.node_conditions, pod, self.pod_level_resources)

    def synchronize(self, now: float | None, stats: Summary, pods: Sequence[Pod], node: Node | None = None,
                    reclaim: NodeReclaimFunc | None = None) -> SyncResult:
        """One housekeeping pass at `now` (seconds since the epoch; None: the injected clock).

        `pods` are the node's active pods (with `node`, only pods bound to it count); `reclaim` runs the
        container and image garbage collectors and returns the Summary observed afterwards.
        """
        now = self.clock() if now is None else now
        result = SyncResult(at=now)
        if not self.thresholds and not self.config.local_storage_capacity_isolation:
            return self._finish(result)
        configured = len(self.thresholds)
        first_pass = not self._initialized
        self._initialize()
        # Upstream's first pass evaluates the thresholds as they were before the containerfs copies were
        # appended (a shadowed variable): replaced entries are seen, appended ones only from the next pass.
        thresholds = self.thresholds[:configured] if first_pass else self.thresholds
        active = [p for p in pods if not p.is_terminal and (node is None or p.node_name == node.name)]
        observations = make_signal_observations(stats)
        stats_fn: StatsFunc = PodStatsIndex(stats)
        result.observations = observations

        met = thresholds_met(thresholds, observations, False)
        if self.thresholds_met:
            met = merge_thresholds(met, thresholds_met(self.thresholds_met, observations, True))
        first_observed = thresholds_first_observed_at(met, self.thresholds_first_observed_at, now)
        last_observed = node_conditions_last_observed_at(node_conditions(met), self.node_conditions_last_observed_at, now)
        self.node_conditions = node_conditions_observed_since(last_observed, self.config.pressure_transition_period, now)
        self.thresholds_first_observed_at = first_observed
        self.node_conditions_last_observed_at = last_observed
        self.thresholds_met = thresholds_met_grace_period(first_observed, now)
        result.thresholds_met = list(self.thresholds_met)
        updated = thresholds_updated_stats(self.thresholds_met, observations, self.last_observations)
        self.last_observations = observations

        if self.config.local_storage_capacity_isolation:
            result.evictions = self._local_storage_eviction(active, stats_fn, result)
            if result.evictions:
                return self._finish(result)
        if not updated:
            return self._finish(result)
        ordered = by_eviction_priority(updated)
        to_reclaim = next((t for t in ordered if t.signal in SIGNAL_TO_RESOURCE), None)
        if to_reclaim is None:
            return self._finish(result)
        resource = SIGNAL_TO_RESOURCE[to_reclaim.signal]
        result.threshold_to_reclaim = to_reclaim
        result.starved_resource = resource
        if self._reclaim_node_level_resources(to_reclaim.signal, stats, reclaim, result):
            return self._finish(result)
        rank = self._rank_funcs.get(to_reclaim.signal)
        if rank is None or not active:
            return self._finish(result)
        ranked = rank(active, stats_fn)
        result.rank_order = ranked
        for pod in ranked:
            grace = IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS
            if not to_reclaim.is_hard:
                grace = self.config.max_pod_grace_period_seconds
                if pod.termination_grace_period_seconds is not None:
                    grace = min(grace, pod.termination_grace_period_seconds)
            if is_critical_pod(pod):
                result.skipped_critical.append(pod)
                continue
            message = eviction_message(resource, pod, stats_fn, ordered, observations, self.pod_level_resources)
            condition = {"type": DISRUPTION_TARGET, "status": "True", "reason": TERMINATION_BY_KUBELET,
                         "message": message, "lastTransitionTime": _rfc3339(now)}
            result.evictions.append(Eviction(pod, grace, to_reclaim.signal, message, [condition]))
            break
        return self._finish(result)

    # ------------------------------------------------------------ internals

    def _finish(self, result: SyncResult) -> SyncResult:
        result.conditions = list(self.node_conditions)
        result.taints = self.taints
        return result

    def _initialize(self) -> None:
        """The first housekeeping: the disk layout decides containerfs thresholds, rankings and reclaim."""
        if self._initialized:
            return
        layout = self.disk_layout
        if layout.split_container_fs and not self.config.feature_enabled("KubeletSeparateDiskGC"):
            raise InputError("KubeletSeparateDiskGC is turned off but the writable layers are on a split filesystem",
                             field="featureGates.KubeletSeparateDiskGC")
        self.thresholds = update_container_fs_thresholds(self.thresholds, layout.dedicated_image_fs,
                                                         layout.split_container_fs)
        self._rank_funcs = build_signal_to_rank_func(layout.dedicated_image_fs, layout.split_container_fs)
        self._reclaim_funcs = build_signal_to_node_reclaim_funcs(layout.dedicated_image_fs, layout.split_container_fs)
        self._initialized = True

    def _reclaim_node_level_resources(self, signal: str, stats: Summary, reclaim: NodeReclaimFunc | None,
                                      result: SyncResult) -> bool:
        """reclaimNodeLevelResources: run the garbage collectors for the signal, observe again, and report
        whether every threshold (with minimum reclaim) is now clear."""
        actions = self._reclaim_funcs.get(signal, ())
        if not actions:
            return False
        after = reclaim(actions) if reclaim is not None else None
        observations = make_signal_observations(after if after is not None else stats)
        resolved = not thresholds_met(self.thresholds, observations, True)
        result.node_reclaim = NodeReclaimResult(signal, actions, resolved)
        return resolved

    def _local_storage_eviction(self, pods: Sequence[Pod], stats_fn: StatsFunc, result: SyncResult) -> list[Eviction]:
        """localStorageEviction: every pod over an emptyDir sizeLimit, its pod ephemeral-storage limit or a
        container's limit is evicted in the same pass (the one-pod rule is for threshold evictions)."""
        out: list[Eviction] = []
        for pod in pods:
            ps = stats_fn(pod)
            if ps is None:
                continue
            found = (self._empty_dir_violation(ps, pod) or self._pod_ephemeral_violation(ps, pod)
                     or self._container_ephemeral_violation(ps, pod))
            if found is None:
                continue
            if is_critical_pod(pod):
                result.skipped_critical.append(pod)
                continue
            signal, message = found
            out.append(Eviction(pod, IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS, signal, message, []))
        return out

    def _empty_dir_violation(self, ps: PodStats, pod: Pod) -> tuple[str, str] | None:
        used = {v.name: v.fs.used_bytes for v in ps.volumes if v.fs.used_bytes is not None}
        capacity = {v.name: v.fs.capacity_bytes for v in ps.volumes if v.fs.capacity_bytes is not None}
        for i, vol in enumerate(pod.volumes):
            empty_dir = vol.get("emptyDir")
            if not isinstance(empty_dir, dict):
                continue
            name = str(vol.get("name"))
            size: GoQuantity | None = None
            if empty_dir.get("sizeLimit") is not None:
                try:
                    size = parse_go_quantity(empty_dir["sizeLimit"])
                except ValueError as e:
                    raise InputError(str(e), obj=f"Pod {pod.key}",
                                     field=f"spec.volumes[{i}].emptyDir.sizeLimit") from None
            if self.memory_backed_volume_resize and empty_dir.get("medium") == "Memory":
                # A resizable memory-backed emptyDir is held to the size the volume really has; while its
                # stats lack a capacity it is not judged at all.
                if name not in capacity:
                    continue
                size = binary(capacity[name])
            u = used.get(name)
            if u is not None and size is not None and size.value > 0 and u > size.value:
                return SIGNAL_EMPTY_DIR_FS_LIMIT, EMPTY_DIR_MESSAGE.format(vol.get("name"), size)
        return None

    def _pod_ephemeral_violation(self, ps: PodStats, pod: Pod) -> tuple[str, str] | None:
        limit = pod_ephemeral_storage_limit(pod)
        if limit is None:
            return None
        usage = disk_usage(ps.ephemeral_storage)
        if usage > limit.value:
            return SIGNAL_EPHEMERAL_POD_FS_LIMIT, POD_EPHEMERAL_STORAGE_MESSAGE.format(limit)
        return None

    def _container_ephemeral_violation(self, ps: PodStats, pod: Pod) -> tuple[str, str] | None:
        limits: dict[str, GoQuantity] = {}
        for c in [*pod.containers, *(c for c in pod.init_containers if c.is_sidecar)]:
            q = _limit(c.raw, "ephemeral-storage", f"container {c.name}")
            if q is not None and value_of(q.value) != 0:
                limits[c.name] = q
        for cs in ps.containers:
            used = Fraction(disk_usage(cs.logs))
            if not self.disk_layout.dedicated_image_fs:
                used += disk_usage(cs.rootfs)
            limit = limits.get(cs.name)
            if limit is not None and limit.value < used:
                return SIGNAL_EPHEMERAL_CONTAINER_FS_LIMIT, CONTAINER_EPHEMERAL_STORAGE_MESSAGE.format(cs.name, limit)
        return None
