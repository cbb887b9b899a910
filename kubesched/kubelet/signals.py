"""Eviction signals from a kubelet Summary API document (`/stats/summary`, stats/v1alpha1).

makeSignalObservations: memory.available from node.memory (capacity = available + working set),
allocatableMemory.available from the `pods` system container, nodefs.* from node.fs, imagefs.* and
containerfs.* from node.runtime, pid.available = rlimit.maxpid - rlimit.curproc. A signal whose fields
are missing has no observation, so its thresholds never fire. Pod stats are found by pod UID.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubesched.api import fields
from kubesched.api.objects import Pod, parse_time
from kubesched.kubelet.quantities import binary, decimal
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
    Observation,
)

SYSTEM_CONTAINER_PODS = "pods"


@dataclass(frozen=True, slots=True)
class MemoryStats:
    time: float | None = None
    available_bytes: int | None = None
    working_set_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class FsStats:
    time: float | None = None
    available_bytes: int | None = None
    capacity_bytes: int | None = None
    used_bytes: int | None = None
    inodes_free: int | None = None
    inodes: int | None = None
    inodes_used: int | None = None


@dataclass(frozen=True, slots=True)
class ContainerStats:
    name: str
    memory: MemoryStats | None = None
    rootfs: FsStats | None = None
    logs: FsStats | None = None


@dataclass(frozen=True, slots=True)
class VolumeStats:
    name: str
    fs: FsStats


@dataclass(frozen=True, slots=True)
class PodStats:
    name: str
    namespace: str
    uid: str
    containers: tuple[ContainerStats, ...] = ()
    memory: MemoryStats | None = None
    volumes: tuple[VolumeStats, ...] = ()
    ephemeral_storage: FsStats | None = None
    process_count: int | None = None


@dataclass(frozen=True, slots=True)
class RlimitStats:
    time: float | None = None
    max_pid: int | None = None
    running_processes: int | None = None


@dataclass(frozen=True, slots=True)
class NodeStats:
    node_name: str = ""
    memory: MemoryStats | None = None
    system_containers: tuple[ContainerStats, ...] = ()
    fs: FsStats | None = None
    image_fs: FsStats | None = None
    container_fs: FsStats | None = None
    rlimit: RlimitStats | None = None


@dataclass(frozen=True, slots=True)
class Summary:
    """The parts of a Summary API document the eviction manager reads."""

    node: NodeStats = field(default_factory=NodeStats)
    pods: tuple[PodStats, ...] = ()


# ---------------------------------------------------------------- parsing


def _obj(raw: Any, where: str) -> dict[str, Any] | None:
    """An optional object of the Summary (None when absent)."""
    return None if raw is None else fields.mapping(raw, where)


def _uint(raw: dict[str, Any], key: str, where: str) -> int | None:
    """An optional `*uint64` of the Summary."""
    return fields.optional_integer(raw.get(key), fields.join(where, key), lo=0, what="a non-negative integer",
                                   whole_floats=True)


def _time(raw: dict[str, Any], where: str) -> float | None:
    t = parse_time(raw.get("time"), f"{where}.time")
    if t is None or t.year <= 1:
        return None  # metav1.Time zero value: always fresh
    return t.timestamp()


def _memory(raw: Any, where: str) -> MemoryStats | None:
    d = _obj(raw, where)
    if d is None:
        return None
    return MemoryStats(_time(d, where), _uint(d, "availableBytes", where), _uint(d, "workingSetBytes", where))


def _fs(raw: Any, where: str) -> FsStats | None:
    d = _obj(raw, where)
    if d is None:
        return None
    return FsStats(_time(d, where), _uint(d, "availableBytes", where), _uint(d, "capacityBytes", where),
                   _uint(d, "usedBytes", where), _uint(d, "inodesFree", where), _uint(d, "inodes", where),
                   _uint(d, "inodesUsed", where))


def _container(raw: Any, where: str) -> ContainerStats:
    d = _obj(raw, where) or {}
    return ContainerStats(str(d.get("name") or ""), _memory(d.get("memory"), f"{where}.memory"),
                          _fs(d.get("rootfs"), f"{where}.rootfs"), _fs(d.get("logs"), f"{where}.logs"))


def _pod(raw: Any, where: str) -> PodStats:
    d = _obj(raw, where) or {}
    ref = _obj(d.get("podRef"), f"{where}.podRef") or {}
    volumes = []
    for i, v in enumerate(fields.sequence(d.get("volume"), f"{where}.volume")):
        vw = f"{where}.volume[{i}]"
        vd = _obj(v, vw) or {}
        volumes.append(VolumeStats(str(vd.get("name") or ""), _fs(vd, vw) or FsStats()))
    proc = _obj(d.get("process_stats"), f"{where}.process_stats")
    return PodStats(
        name=str(ref.get("name") or ""),
        namespace=str(ref.get("namespace") or ""),
        uid=str(ref.get("uid") or ""),
        containers=tuple(_container(c, f"{where}.containers[{i}]")
                         for i, c in enumerate(fields.sequence(d.get("containers"), f"{where}.containers"))),
        memory=_memory(d.get("memory"), f"{where}.memory"),
        volumes=tuple(volumes),
        ephemeral_storage=_fs(d.get("ephemeral-storage"), f"{where}.ephemeral-storage"),
        process_count=None if proc is None else _uint(proc, "process_count", f"{where}.process_stats"),
    )


def parse_summary(raw: Any, where: str = "stats") -> Summary:
    """A Summary API document (what `kubectl get --raw /api/v1/nodes/N/proxy/stats/summary` prints)."""
    d = _obj(raw, where)
    if d is None:
        return Summary()
    node = _obj(d.get("node"), f"{where}.node") or {}
    nw = f"{where}.node"
    runtime = _obj(node.get("runtime"), f"{nw}.runtime") or {}
    rl = _obj(node.get("rlimit"), f"{nw}.rlimit")
    rlimit = None if rl is None else RlimitStats(_time(rl, f"{nw}.rlimit"), _uint(rl, "maxpid", f"{nw}.rlimit"),
                                                 _uint(rl, "curproc", f"{nw}.rlimit"))
    node_stats = NodeStats(
        node_name=str(node.get("nodeName") or ""),
        memory=_memory(node.get("memory"), f"{nw}.memory"),
        system_containers=tuple(_container(c, f"{nw}.systemContainers[{i}]")
                                for i, c in enumerate(fields.sequence(node.get("systemContainers"), f"{nw}.systemContainers"))),
        fs=_fs(node.get("fs"), f"{nw}.fs"),
        image_fs=_fs(runtime.get("imageFs"), f"{nw}.runtime.imageFs"),
        container_fs=_fs(runtime.get("containerFs"), f"{nw}.runtime.containerFs"),
        rlimit=rlimit,
    )
    pods = tuple(_pod(p, f"{where}.pods[{i}]") for i, p in enumerate(fields.sequence(d.get("pods"), f"{where}.pods")))
    return Summary(node_stats, pods)


# ---------------------------------------------------------------- observations


def _fs_observations(out: dict[str, Observation], fs: FsStats | None, available: str, inodes_free: str) -> None:
    if fs is None:
        return
    if fs.available_bytes is not None and fs.capacity_bytes is not None:
        out[available] = Observation(binary(fs.available_bytes), binary(fs.capacity_bytes), fs.time)
    if fs.inodes_free is not None and fs.inodes is not None:
        out[inodes_free] = Observation(decimal(fs.inodes_free), decimal(fs.inodes), fs.time)


def make_signal_observations(summary: Summary) -> dict[str, Observation]:
    """makeSignalObservations (without swap): one Observation per signal the Summary can answer."""
    out: dict[str, Observation] = {}
    node = summary.node
    m = node.memory
    if m is not None and m.available_bytes is not None and m.working_set_bytes is not None:
        out[MEMORY_AVAILABLE] = Observation(binary(m.available_bytes), binary(m.available_bytes + m.working_set_bytes),
                                            m.time)
    pods_container = next((c for c in node.system_containers if c.name == SYSTEM_CONTAINER_PODS), None)
    pm = pods_container.memory if pods_container is not None else None
    if pm is not None and pm.available_bytes is not None and pm.working_set_bytes is not None:
        out[ALLOCATABLE_MEMORY_AVAILABLE] = Observation(binary(pm.available_bytes),
                                                        binary(pm.available_bytes + pm.working_set_bytes), pm.time)
    _fs_observations(out, node.fs, NODEFS_AVAILABLE, NODEFS_INODES_FREE)
    _fs_observations(out, node.image_fs, IMAGEFS_AVAILABLE, IMAGEFS_INODES_FREE)
    _fs_observations(out, node.container_fs, CONTAINERFS_AVAILABLE, CONTAINERFS_INODES_FREE)
    rl = node.rlimit
    if rl is not None and rl.running_processes is not None and rl.max_pid is not None:
        out[PID_AVAILABLE] = Observation(decimal(rl.max_pid - rl.running_processes), decimal(rl.max_pid), rl.time)
    return out


class PodStatsIndex:
    """cachedStatsFunc: a pod's stats by UID (a snapshot pod without metadata.uid matches by name)."""

    def __init__(self, summary: Summary) -> None:
        self.by_uid: dict[str, PodStats] = {}
        self.by_name: dict[tuple[str, str], PodStats] = {}
        for p in summary.pods:
            self.by_uid[p.uid] = p
            self.by_name[(p.namespace or "default", p.name)] = p

    def __call__(self, pod: Pod) -> PodStats | None:
        meta = pod.raw.get("metadata")
        if isinstance(meta, Mapping) and meta.get("uid"):
            return self.by_uid.get(pod.uid)
        return self.by_name.get((pod.namespace, pod.name))
