"""Eviction thresholds (pkg/kubelet/eviction/api and helpers.go): parsing and the met/held/grace logic.

A threshold is `<signal> LessThan <quantity or percentage of capacity>`, hard (grace period 0) or soft.
It is met when the observed available amount is strictly below it; once met it stays met until the
available amount reaches threshold + minimum reclaim. Percentages are float32 as upstream, and the
threshold in bytes is `int64(float64(capacity) * float64(float32 percentage))`, truncated.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from kubesched.api.duration import DurationError, format_go_duration, parse_go_duration
from kubesched.errors import InputError
from kubesched.kubelet.quantities import GoQuantity, binary, parse_go_quantity

# ---------------------------------------------------------------- signals

MEMORY_AVAILABLE = "memory.available"
ALLOCATABLE_MEMORY_AVAILABLE = "allocatableMemory.available"
NODEFS_AVAILABLE = "nodefs.available"
NODEFS_INODES_FREE = "nodefs.inodesFree"
IMAGEFS_AVAILABLE = "imagefs.available"
IMAGEFS_INODES_FREE = "imagefs.inodesFree"
CONTAINERFS_AVAILABLE = "containerfs.available"
CONTAINERFS_INODES_FREE = "containerfs.inodesFree"
PID_AVAILABLE = "pid.available"

OP_LESS_THAN = "LessThan"

MEMORY_PRESSURE = "MemoryPressure"
DISK_PRESSURE = "DiskPressure"
PID_PRESSURE = "PIDPressure"
CONDITION_ORDER = (MEMORY_PRESSURE, DISK_PRESSURE, PID_PRESSURE)

RESOURCE_MEMORY = "memory"
RESOURCE_EPHEMERAL_STORAGE = "ephemeral-storage"
RESOURCE_INODES = "inodes"
RESOURCE_PIDS = "pids"

SIGNAL_TO_CONDITION: dict[str, str] = {
    MEMORY_AVAILABLE: MEMORY_PRESSURE,
    ALLOCATABLE_MEMORY_AVAILABLE: MEMORY_PRESSURE,
    IMAGEFS_AVAILABLE: DISK_PRESSURE,
    CONTAINERFS_AVAILABLE: DISK_PRESSURE,
    NODEFS_AVAILABLE: DISK_PRESSURE,
    IMAGEFS_INODES_FREE: DISK_PRESSURE,
    NODEFS_INODES_FREE: DISK_PRESSURE,
    CONTAINERFS_INODES_FREE: DISK_PRESSURE,
    PID_AVAILABLE: PID_PRESSURE,
}

SIGNAL_TO_RESOURCE: dict[str, str] = {
    MEMORY_AVAILABLE: RESOURCE_MEMORY,
    ALLOCATABLE_MEMORY_AVAILABLE: RESOURCE_MEMORY,
    IMAGEFS_AVAILABLE: RESOURCE_EPHEMERAL_STORAGE,
    IMAGEFS_INODES_FREE: RESOURCE_INODES,
    CONTAINERFS_AVAILABLE: RESOURCE_EPHEMERAL_STORAGE,
    CONTAINERFS_INODES_FREE: RESOURCE_INODES,
    NODEFS_AVAILABLE: RESOURCE_EPHEMERAL_STORAGE,
    NODEFS_INODES_FREE: RESOURCE_INODES,
    PID_AVAILABLE: RESOURCE_PIDS,
}

SIGNALS = tuple(SIGNAL_TO_RESOURCE)

# enforceNodeAllocatable key that makes hard memory thresholds also apply to the pods cgroup.
NODE_ALLOCATABLE_ENFORCEMENT_KEY = "pods"


def valid_signal(signal: str) -> bool:
    return signal in SIGNAL_TO_RESOURCE


# ---------------------------------------------------------------- thresholds


@dataclass(frozen=True, slots=True)
class ThresholdValue:
    """Either a quantity or a float32 fraction of the signal's capacity (the topmost non-zero is used)."""

    quantity: GoQuantity | None = None
    percentage: float = 0.0

    def to_dict(self) -> dict[str, object]:
        if self.quantity is not None:
            return {"quantity": str(self.quantity)}
        return {"percentage": self.percentage}

    def __str__(self) -> str:
        if self.quantity is not None:
            return str(self.quantity)
        return f"{float(np.float32(self.percentage) * np.float32(100)):g}%"


@dataclass(frozen=True, slots=True)
class Threshold:
    signal: str
    operator: str
    value: ThresholdValue
    grace_period_ns: int = 0
    min_reclaim: ThresholdValue | None = None

    @property
    def grace_period(self) -> float:
        return self.grace_period_ns / 1e9

    @property
    def is_hard(self) -> bool:
        """isHardEvictionThreshold: no grace period."""
        return self.grace_period_ns == 0

    def to_dict(self) -> dict[str, object]:
        return {"signal": self.signal, "operator": self.operator, "value": self.value.to_dict(),
                "gracePeriod": format_go_duration(self.grace_period_ns),
                "minReclaim": None if self.min_reclaim is None else self.min_reclaim.to_dict()}

    def __str__(self) -> str:
        text = f"{self.signal}<{self.value}"
        if not self.is_hard:
            text += f" for {format_go_duration(self.grace_period_ns)}"
        if self.min_reclaim is not None:
            text += f" (min reclaim {self.min_reclaim})"
        return text


def _parse_percentage(val: str, field: str) -> float:
    """parsePercentage: strconv.ParseFloat(TrimRight(val, "%"), 32) / 100, in float32."""
    text = val.rstrip("%")
    if not re.fullmatch(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", text):
        raise InputError(f"expected a percentage such as 10% or 7.5%, got {val!r}", field=field)
    with np.errstate(over="ignore"):
        value = np.float32(float(text))
        pct = np.float32(value / np.float32(100))
    if not math.isfinite(float(pct)):
        raise InputError(f"percentage out of range: {val!r}", field=field)
    return float(pct)


def _parse_quantity(val: str, field: str) -> GoQuantity:
    try:
        return parse_go_quantity(val)
    except ValueError as e:
        raise InputError(str(e), field=field) from None


def _check_string_map(raw: Mapping[str, object], field: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in raw.items():
        if not isinstance(v, str):
            raise InputError(f"expected a string value such as \"100Mi\" or \"10%\", got {v!r}", field=f"{field}.{k}")
        out[str(k)] = v
    return out


def parse_threshold_statement(signal: str, val: str, field: str) -> Threshold | None:
    """parseThresholdStatement: a threshold, or None for an ignored 0% / 100%."""
    if not valid_signal(signal):
        raise InputError(f"unsupported eviction signal {signal!r}; expected one of {', '.join(SIGNALS)}",
                         field=field)
    if val.endswith("%"):
        if val in ("0%", "100%"):
            return None
        pct = _parse_percentage(val, field)
        if pct < 0:
            raise InputError(f"eviction percentage threshold {signal} must be >= 0%: {val}", field=field)
        if pct > 1:
            raise InputError(f"eviction percentage threshold {signal} must be <= 100%: {val}", field=field)
        return Threshold(signal, OP_LESS_THAN, ThresholdValue(percentage=pct))
    q = _parse_quantity(val, field)
    if q.value <= 0:
        raise InputError(f"eviction threshold {signal} must be positive: {q}", field=field)
    return Threshold(signal, OP_LESS_THAN, ThresholdValue(quantity=q))


def parse_threshold_config(allocatable_config: Iterable[str], eviction_hard: Mapping[str, object],
                           eviction_soft: Mapping[str, object], eviction_soft_grace_period: Mapping[str, object],
                           eviction_minimum_reclaim: Mapping[str, object]) -> list[Threshold]:
    """ParseThresholdConfig: hard thresholds, then soft ones with their grace periods, minimum reclaims,
    and a hard allocatableMemory.available copy of each hard memory.available threshold when node
    allocatable is enforced on pods."""
    hard_raw = _check_string_map(eviction_hard, "evictionHard")
    soft_raw = _check_string_map(eviction_soft, "evictionSoft")
    grace_raw = _check_string_map(eviction_soft_grace_period, "evictionSoftGracePeriod")
    reclaim_raw = _check_string_map(eviction_minimum_reclaim, "evictionMinimumReclaim")
    results: list[Threshold] = []
    for signal, val in hard_raw.items():
        t = parse_threshold_statement(signal, val, f"evictionHard.{signal}")
        if t is not None:
            results.append(t)
    soft: list[Threshold] = []
    for signal, val in soft_raw.items():
        t = parse_threshold_statement(signal, val, f"evictionSoft.{signal}")
        if t is not None:
            soft.append(t)
    grace: dict[str, int] = {}
    for signal, val in grace_raw.items():
        field = f"evictionSoftGracePeriod.{signal}"
        if not valid_signal(signal):
            raise InputError(f"unsupported eviction signal {signal!r}; expected one of {', '.join(SIGNALS)}",
                             field=field)
        try:
            ns = parse_go_duration(val)
        except DurationError as e:
            raise InputError(str(e), field=field) from None
        if ns < 0:
            raise InputError(f"invalid eviction grace period specified: {val}, must be a positive value", field=field)
        grace[signal] = ns
    reclaims: dict[str, ThresholdValue] = {}
    for signal, val in reclaim_raw.items():
        field = f"evictionMinimumReclaim.{signal}"
        if not valid_signal(signal):
            raise InputError(f"unsupported eviction signal {signal!r}; expected one of {', '.join(SIGNALS)}",
                             field=field)
        if val.endswith("%"):
            pct = _parse_percentage(val, field)
            if pct <= 0:
                raise InputError(f"eviction percentage minimum reclaim {signal} must be positive: {val}", field=field)
            reclaims[signal] = ThresholdValue(percentage=pct)
            continue
        q = _parse_quantity(val, field)
        if q.value < 0:
            raise InputError(f"negative eviction minimum reclaim specified for {signal}", field=field)
        reclaims[signal] = ThresholdValue(quantity=q)
    for t in soft:
        if t.signal not in grace:
            raise InputError(f"grace period must be specified for the soft eviction threshold {t.signal}",
                             field=f"evictionSoftGracePeriod.{t.signal}")
        results.append(Threshold(t.signal, t.operator, t.value, grace[t.signal]))
    results = [Threshold(t.signal, t.operator, t.value, t.grace_period_ns, reclaims.get(t.signal)) for t in results]
    if NODE_ALLOCATABLE_ENFORCEMENT_KEY in list(allocatable_config):
        results = add_allocatable_thresholds(results)
    return results


def add_allocatable_thresholds(thresholds: list[Threshold]) -> list[Threshold]:
    """Every hard memory.available threshold again on allocatableMemory.available (the pods cgroup)."""
    extra = [Threshold(ALLOCATABLE_MEMORY_AVAILABLE, t.operator, t.value, 0, t.min_reclaim)
             for t in thresholds if t.signal == MEMORY_AVAILABLE and t.is_hard]
    return [*thresholds, *extra]


_EMPTY = Threshold("", "", ThresholdValue())


def update_container_fs_thresholds(thresholds: list[Threshold], image_fs: bool,
                                   split_container_fs: bool) -> list[Threshold]:
    """UpdateContainerFsThresholds: containerfs.* thresholds become copies of the nodefs ones (one
    filesystem, or images split from containers) or of the imagefs ones (a dedicated imagefs holding
    the writable layers). User-given containerfs thresholds are overridden in place; missing ones are
    appended, even as empty thresholds that can never be met, exactly as upstream does."""
    out = list(thresholds)
    found: dict[tuple[str, bool], Threshold] = {}
    index: dict[tuple[str, bool], int] = {}
    for i, t in enumerate(out):
        if t.signal in (IMAGEFS_AVAILABLE, IMAGEFS_INODES_FREE, NODEFS_AVAILABLE, NODEFS_INODES_FREE):
            found[(t.signal, t.is_hard)] = t
        if t.signal in (CONTAINERFS_AVAILABLE, CONTAINERFS_INODES_FREE):
            index[(t.signal, t.is_hard)] = i
    if image_fs == split_container_fs:
        disk_source, inode_source = NODEFS_AVAILABLE, NODEFS_INODES_FREE
    elif image_fs:  # dedicated imagefs holding images and writable layers
        disk_source, inode_source = IMAGEFS_AVAILABLE, IMAGEFS_INODES_FREE
    else:  # writable layers split off without an imagefs: upstream synthesizes nothing
        return out
    for target, source in ((CONTAINERFS_AVAILABLE, disk_source), (CONTAINERFS_INODES_FREE, inode_source)):
        for hard in (True, False):
            src = found.get((source, hard), _EMPTY)
            grace = 0 if hard else src.grace_period_ns
            copy = Threshold(target, src.operator, src.value, grace, src.min_reclaim)
            if (target, hard) in index:
                out[index[(target, hard)]] = copy
            else:
                out.append(copy)
    return out


# ---------------------------------------------------------------- evaluation


@dataclass(frozen=True, slots=True)
class Observation:
    """One signal: what is available, the capacity percentages are taken of, when it was measured."""

    available: GoQuantity
    capacity: GoQuantity
    time: float | None = None  # seconds since the epoch; None: a zero time (always fresh)


def threshold_quantity(value: ThresholdValue, capacity: GoQuantity) -> GoQuantity:
    """GetThresholdQuantity."""
    if value.quantity is not None:
        return value.quantity
    cap = int(capacity.value)
    return binary(int(float(cap) * float(np.float32(value.percentage))))


def thresholds_met(thresholds: Iterable[Threshold], observations: Mapping[str, Observation],
                   enforce_min_reclaim: bool) -> list[Threshold]:
    """thresholdsMet: the thresholds whose signal is strictly below them (below threshold + minimum
    reclaim when enforce_min_reclaim). A signal without an observation never meets a threshold."""
    out: list[Threshold] = []
    for t in thresholds:
        obs = observations.get(t.signal)
        if obs is None:
            continue
        quantity = threshold_quantity(t.value, obs.capacity).value
        if enforce_min_reclaim and t.min_reclaim is not None:
            quantity += threshold_quantity(t.min_reclaim, obs.capacity).value
        if t.operator == OP_LESS_THAN and quantity > obs.available.value:
            out.append(t)
    return out


def _same_threshold(a: Threshold, b: Threshold) -> bool:
    """hasThreshold's comparison: grace period, operator, signal and value (not the minimum reclaim)."""
    if a.grace_period_ns != b.grace_period_ns or a.operator != b.operator or a.signal != b.signal:
        return False
    if a.value.quantity is not None or b.value.quantity is not None:
        return a.value.quantity is not None and b.value.quantity is not None \
            and a.value.quantity.value == b.value.quantity.value
    return a.value.percentage == b.value.percentage


def merge_thresholds(a: list[Threshold], b: Iterable[Threshold]) -> list[Threshold]:
    out = list(a)
    for t in b:
        if not any(_same_threshold(x, t) for x in out):
            out.append(t)
    return out


def thresholds_first_observed_at(thresholds: Iterable[Threshold], last: Mapping[Threshold, float],
                                 now: float) -> dict[Threshold, float]:
    return {t: last.get(t, now) for t in thresholds}


def thresholds_met_grace_period(observed_at: Mapping[Threshold, float], now: float) -> list[Threshold]:
    return [t for t, at in observed_at.items() if not (now - at) < t.grace_period]


def node_conditions(thresholds: Iterable[Threshold]) -> list[str]:
    out: list[str] = []
    for t in thresholds:
        c = SIGNAL_TO_CONDITION.get(t.signal)
        if c is not None and c not in out:
            out.append(c)
    return out


def node_conditions_last_observed_at(conditions: Iterable[str], last: Mapping[str, float],
                                     now: float) -> dict[str, float]:
    out = {c: now for c in conditions}
    for c, at in last.items():
        out.setdefault(c, at)
    return out


def node_conditions_observed_since(observed_at: Mapping[str, float], period: float, now: float) -> list[str]:
    """Conditions observed within the pressure transition period (strictly)."""
    held = {c for c, at in observed_at.items() if (now - at) < period}
    return [c for c in CONDITION_ORDER if c in held] + sorted(held - set(CONDITION_ORDER))


def thresholds_updated_stats(thresholds: Iterable[Threshold], observations: Mapping[str, Observation],
                             last: Mapping[str, Observation]) -> list[Threshold]:
    """Thresholds whose signal was measured again since the last sync (a zero time always counts)."""
    out: list[Threshold] = []
    for t in thresholds:
        obs = observations.get(t.signal)
        if obs is None:
            continue
        prev = last.get(t.signal)
        if prev is None or obs.time is None or obs.time > (prev.time if prev.time is not None else -math.inf):
            out.append(t)
    return out


def by_eviction_priority(thresholds: list[Threshold]) -> list[Threshold]:
    """byEvictionPriority: memory signals first, thresholds without a resource to reclaim last. Upstream's
    sort is unstable over an unordered map; here ties keep configuration order (hard before soft)."""
    def rank(t: Threshold) -> int:
        if t.signal in (MEMORY_AVAILABLE, ALLOCATABLE_MEMORY_AVAILABLE):
            return 0
        return 1 if t.signal in SIGNAL_TO_RESOURCE else 2
    return sorted(thresholds, key=rank)
