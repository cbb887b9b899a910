"""Ranking pods for eviction and the eviction message (pkg/kubelet/eviction/helpers.go).

memory: pods whose working set exceeds their memory request first, then lower priority, then the larger
working set minus request. Disk (bytes or inodes): the same three keys over the usage the filesystem
layout says the pressured filesystem holds (container rootfs, logs, local volumes). PIDs: lower priority,
then more processes. A pod without stats sorts first on every usage key. The chain is a stable sort, as
Go's insertion sort is on the small lists the kubelet ranks; each comparator becomes a sort key
computed once per pod.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from kubesched.api.objects import Container, Pod
from kubesched.api.qos import is_pod_level_requests_set, is_pod_level_resources_set
from kubesched.api.resources import is_supported_pod_level_resource, pod_requests
from kubesched.kubelet.quantities import GoQuantity, binary, parse_go_quantity
from kubesched.kubelet.signals import FsStats, PodStats
from kubesched.kubelet.thresholds import (
    ALLOCATABLE_MEMORY_AVAILABLE,
    CONTAINERFS_AVAILABLE,
    CONTAINERFS_INODES_FREE,
    IMAGEFS_AVAILABLE,
    IMAGEFS_INODES_FREE,
    MEMORY_AVAILABLE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    PID_AVAILABLE,
    RESOURCE_EPHEMERAL_STORAGE,
    RESOURCE_INODES,
    RESOURCE_MEMORY,
    SIGNAL_TO_RESOURCE,
    Observation,
    Threshold,
    threshold_quantity,
)

StatsFunc = Callable[[Pod], PodStats | None]
RankFunc = Callable[[Sequence[Pod], StatsFunc], list[Pod]]

# fsStatsType: which parts of a pod's disk usage a filesystem holds.
FS_ROOT = "root"
FS_LOGS = "logs"
FS_LOCAL_VOLUME = "localVolumeSource"
FS_IMAGES = "images"

NODE_LOW_MESSAGE = "The node was low on resource: {}. "
THRESHOLD_MET_MESSAGE = "Threshold quantity: {}, available: {}. "
CONTAINER_MESSAGE = "Container {} was using {}, request is {}, has larger consumption of {}. "
POD_MESSAGE = "Pod {} was using {}, request is {}, has larger consumption of {}. "


# ---------------------------------------------------------------- usage


def disk_usage(fs: FsStats | None) -> int:
    return fs.used_bytes if fs is not None and fs.used_bytes is not None else 0


def inode_usage(fs: FsStats | None) -> int:
    return fs.inodes_used if fs is not None and fs.inodes_used is not None else 0


def memory_usage(stats: PodStats) -> int:
    m = stats.memory
    return m.working_set_bytes if m is not None and m.working_set_bytes is not None else 0


def process_usage(stats: PodStats) -> int:
    return stats.process_count or 0


def is_local_ephemeral_volume(volume: Mapping[str, Any]) -> bool:
    """volumeutils.IsLocalEphemeralVolume: gitRepo, a disk-backed emptyDir, configMap."""
    empty_dir = volume.get("emptyDir")
    return (volume.get("gitRepo") is not None or volume.get("configMap") is not None
            or (isinstance(empty_dir, dict) and not empty_dir.get("medium")))


def local_volume_names(pod: Pod) -> list[str]:
    return [str(v.get("name")) for v in pod.volumes if v.get("hostPath") is not None or is_local_ephemeral_volume(v)]


def pod_disk_usage(stats: PodStats, pod: Pod, measure: Sequence[str]) -> dict[str, int]:
    """podDiskUsage: bytes and inodes over the measured parts."""
    disk = inodes = 0
    for c in stats.containers:
        if FS_ROOT in measure:
            disk += disk_usage(c.rootfs)
            inodes += inode_usage(c.rootfs)
        if FS_LOGS in measure:
            disk += disk_usage(c.logs)
            inodes += inode_usage(c.logs)
    if FS_LOCAL_VOLUME in measure:
        for name in local_volume_names(pod):
            for v in stats.volumes:
                if v.name == name:
                    disk += disk_usage(v.fs)
                    inodes += inode_usage(v.fs)
                    break
    return {RESOURCE_EPHEMERAL_STORAGE: disk, RESOURCE_INODES: inodes}


def request_quantity(pod: Pod, resource: str) -> Fraction:
    """v1resource.GetResourceRequestQuantity: the pod's effective request (pod-level resources replace
    container-level ones), plus overhead when the request is non-zero."""
    key = ("kubelet_request", resource)
    cached = pod.cache.get(key)
    if cached is not None:
        return Fraction(cached)
    overhead = pod.overhead.get(resource, Fraction(0))
    if is_pod_level_resources_set(pod):
        q = Fraction(0)
        if is_pod_level_requests_set(pod) and is_supported_pod_level_resource(resource):
            q = (pod.pod_requests or {}).get(resource, Fraction(0))
    else:
        q = pod_requests(pod).get(resource, Fraction(0)) - overhead
    if overhead and q != 0:
        q += overhead
    pod.cache[key] = q
    return q


# ---------------------------------------------------------------- ranking
#
# Upstream sorts with a chain of comparators; each one is a key here, computed once per pod. A
# usage key is (0, 0) for a pod without stats, which sorts it first and ties it with other such pods
# (cmpBool(!p1Found, !p2Found)); otherwise (1, value).

_NO_STATS = (0, 0)


def _stats_key(value: Fraction | int) -> tuple[int, Fraction | int]:
    return (1, value)


def rank_memory_pressure(pods: Sequence[Pod], stats: StatsFunc) -> list[Pod]:
    """Working set above the memory request first, then lower priority, then more memory above request."""
    def key(p: Pod) -> tuple[Any, ...]:
        s = stats(p)
        if s is None:
            return (_NO_STATS, p.effective_priority, _NO_STATS)
        use = memory_usage(s)
        req = request_quantity(p, RESOURCE_MEMORY)
        return (_stats_key(0 if use > req else 1), p.effective_priority, _stats_key(req - use))
    return sorted(pods, key=key)


def rank_pid_pressure(pods: Sequence[Pod], stats: StatsFunc) -> list[Pod]:
    """Lower priority first, then more processes."""
    def key(p: Pod) -> tuple[Any, ...]:
        s = stats(p)
        return (p.effective_priority, _NO_STATS if s is None else _stats_key(-process_usage(s)))
    return sorted(pods, key=key)


def rank_disk_pressure_func(measure: Sequence[str], resource: str) -> RankFunc:
    """Usage above the request first, then lower priority, then more usage above the ephemeral-storage
    request (upstream subtracts that request for inode ranking too)."""
    def rank(pods: Sequence[Pod], stats: StatsFunc) -> list[Pod]:
        def key(p: Pod) -> tuple[Any, ...]:
            s = stats(p)
            if s is None:
                return (_NO_STATS, p.effective_priority, _NO_STATS)
            use = pod_disk_usage(s, p, measure)[resource]
            exceeds = use > request_quantity(p, resource)
            return (_stats_key(0 if exceeds else 1), p.effective_priority,
                    _stats_key(request_quantity(p, RESOURCE_EPHEMERAL_STORAGE) - use))
        return sorted(pods, key=key)
    return rank


def build_signal_to_rank_func(dedicated_image_fs: bool, split_container_fs: bool) -> dict[str, RankFunc]:
    """buildSignalToRankFunc: what each filesystem signal measures depends on the disk layout."""
    out: dict[str, RankFunc] = {MEMORY_AVAILABLE: rank_memory_pressure, ALLOCATABLE_MEMORY_AVAILABLE: rank_memory_pressure,
                                PID_AVAILABLE: rank_pid_pressure}
    node: tuple[str, ...]
    image: tuple[str, ...]
    container: tuple[str, ...]
    if dedicated_image_fs and not split_container_fs:
        # nodefs holds logs and volumes; the imagefs holds images and writable layers.
        node = (FS_LOGS, FS_LOCAL_VOLUME)
        image = (FS_ROOT, FS_IMAGES)
        container = image
    elif dedicated_image_fs and split_container_fs:
        # writable layers live on nodefs (containerfs); the imagefs only holds images.
        node = (FS_LOGS, FS_LOCAL_VOLUME, FS_ROOT)
        image = (FS_IMAGES,)
        container = node
    else:
        node = image = container = (FS_IMAGES, FS_ROOT, FS_LOGS, FS_LOCAL_VOLUME)
    for sig_bytes, sig_inodes, measure in ((NODEFS_AVAILABLE, NODEFS_INODES_FREE, node),
                                           (IMAGEFS_AVAILABLE, IMAGEFS_INODES_FREE, image),
                                           (CONTAINERFS_AVAILABLE, CONTAINERFS_INODES_FREE, container)):
        out[sig_bytes] = rank_disk_pressure_func(measure, RESOURCE_EPHEMERAL_STORAGE)
        out[sig_inodes] = rank_disk_pressure_func(measure, RESOURCE_INODES)
    return out


# ---------------------------------------------------------------- the eviction message


def _raw_quantity(resources: Any, section: str, resource: str) -> GoQuantity:
    """A request as Go prints it: in the format of the stored string; a missing one prints "0"."""
    if isinstance(resources, dict):
        values = resources.get(section)
        if isinstance(values, dict) and resource in values:
            try:
                return parse_go_quantity(values[resource])
            except ValueError:
                pass
    return GoQuantity(Fraction(0))


def container_request(container: Container, resource: str) -> GoQuantity:
    return _raw_quantity(container.raw.get("resources"), "requests", resource)


def threshold_met_info(resource: str, thresholds: Sequence[Threshold],
                       observations: Mapping[str, Observation]) -> tuple[GoQuantity, GoQuantity] | None:
    """getThresholdMetInfo: the first threshold on the starved resource with an observation."""
    for t in thresholds:
        if SIGNAL_TO_RESOURCE.get(t.signal) == resource:
            obs = observations.get(t.signal)
            if obs is not None:
                return threshold_quantity(t.value, obs.capacity), obs.available
    return None


def eviction_message(resource: str, pod: Pod, stats: StatsFunc, thresholds: Sequence[Threshold],
                     observations: Mapping[str, Observation], pod_level_resources: bool = True) -> str:
    """evictionMessage: the starved resource, the threshold and what was available, then every
    container whose usage of that resource is above its request."""
    message = NODE_LOW_MESSAGE.format(resource)
    info = threshold_met_info(resource, thresholds, observations)
    if info is not None:
        message += THRESHOLD_MET_MESSAGE.format(info[0], info[1])
    ps = stats(pod)
    if ps is None:
        return message
    if resource == RESOURCE_MEMORY and pod_level_resources and is_pod_level_resources_set(pod):
        spec = pod.raw.get("spec") or {}
        requests = (spec.get("resources") or {}).get("requests") or {}
        if RESOURCE_MEMORY in requests and ps.memory is not None:
            req = _raw_quantity(spec.get("resources"), "requests", RESOURCE_MEMORY)
            message += POD_MESSAGE.format(pod.name, binary(memory_usage(ps)), req, resource)
    containers = [*pod.containers, *pod.init_containers]
    for cs in ps.containers:
        for c in containers:
            if c.name != cs.name:
                continue
            req = container_request(c, resource)
            usage: GoQuantity | None = None
            if resource == RESOURCE_EPHEMERAL_STORAGE:
                if cs.rootfs is not None and cs.rootfs.used_bytes is not None and cs.logs is not None \
                        and cs.logs.used_bytes is not None:
                    usage = binary(cs.rootfs.used_bytes + cs.logs.used_bytes)
            elif resource == RESOURCE_MEMORY:
                if cs.memory is not None and cs.memory.working_set_bytes is not None:
                    usage = binary(cs.memory.working_set_bytes)
            if usage is not None and usage.value > req.value:
                message += CONTAINER_MESSAGE.format(c.name, usage, req, resource)
            break
    return message
