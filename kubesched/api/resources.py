"""Effective pod requests and limits, and the scheduler's integer resource units.

`pod_requests` follows component-helpers' `resource.PodRequests`: the sum of regular containers and
sidecars (restartable init containers), against the peak of each classic init container plus the
sidecars started before it, then pod-level resources (cpu, memory, hugepages) when set, plus overhead.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from kubesched.api.objects import Container, Pod, ResourceList
from kubesched.api.quantity import milli_value_of, value_of

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

# schedutil.DefaultMilliCPURequest and DefaultMemoryRequest: what scoring assumes for a container
# that sets no request.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

NON_MISSING_DEFAULTS: dict[str, Fraction] = {
    CPU: Fraction(DEFAULT_MILLI_CPU_REQUEST, 1000),
    MEMORY: Fraction(DEFAULT_MEMORY_REQUEST),
}


def is_supported_pod_level_resource(name: str) -> bool:
    return name in (CPU, MEMORY) or name.startswith("hugepages-")


def is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    return not is_native_resource(name) and not name.startswith("requests.")


def is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def is_scalar_resource(name: str) -> bool:
    """schedutil.IsScalarResourceName: extended, hugepages, prefixed native, attachable volumes."""
    return (is_extended_resource(name) or is_hugepages(name) or "kubernetes.io/" in name
            or name.startswith("attachable-volumes-"))


def _add(into: ResourceList, add: Mapping[str, Fraction]) -> None:
    for k, v in add.items():
        into[k] = into.get(k, Fraction(0)) + v


def _max(into: ResourceList, other: Mapping[str, Fraction]) -> None:
    for k, v in other.items():
        cur = into.get(k)
        if cur is None or v > cur:
            into[k] = v


def _container_values(c: Container, limits: bool, non_missing: Mapping[str, Fraction] | None) -> ResourceList:
    values = dict(c.limits if limits else c.requests)
    if non_missing:
        for k, v in non_missing.items():
            if k not in values:
                values[k] = v
    return values


def _aggregate(pod: Pod, limits: bool, non_missing: Mapping[str, Fraction] | None,
               pod_level: bool = True, overhead: bool = True) -> ResourceList:
    total: ResourceList = {}
    for c in pod.containers:
        _add(total, _container_values(c, limits, non_missing))
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for c in pod.init_containers:
        values = _container_values(c, limits, non_missing)
        if c.is_sidecar:
            _add(total, values)
            _add(sidecars, values)
            step = dict(sidecars)
        else:
            step = dict(values)
            _add(step, sidecars)
        _max(init_peak, step)
    _max(total, init_peak)
    level = pod.pod_limits if limits else pod.pod_requests
    if pod_level and level:
        for k, v in level.items():
            if is_supported_pod_level_resource(k):
                total[k] = v
    if overhead and pod.overhead:
        _add(total, pod.overhead)
    return total


def pod_requests(pod: Pod, non_missing: Mapping[str, Fraction] | None = None) -> ResourceList:
    """resource.PodRequests (exact quantities)."""
    return _aggregate(pod, False, non_missing)


def pod_limits(pod: Pod) -> ResourceList:
    """resource.PodLimits (exact quantities): the same shape as requests, over limits."""
    return _aggregate(pod, True, None)


def to_units(name: str, q: Fraction) -> int:
    """The scheduler's integer unit for a resource: millicores for cpu, Value() for everything else."""
    return milli_value_of(q) if name == CPU else value_of(q)


def scheduler_request(pod: Pod) -> dict[str, int]:
    """framework.Resource of a pod's requests in scheduler units (cpu in millicores, others rounded up).

    Resources the scheduler does not track (a bare unprefixed name other than cpu, memory and
    ephemeral-storage) are dropped, as `Resource.Add` drops them.
    """
    cached = pod.cache.get("sched_request")
    if cached is None:
        cached = {}
        for k, v in pod_requests(pod).items():
            if k in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar_resource(k):
                cached[k] = to_units(k, v)
        pod.cache["sched_request"] = cached
    return cached


def non_zero_request(pod: Pod) -> tuple[int, int]:
    """(milli-cpu, memory bytes) with the scoring defaults for containers that set no request."""
    cached = pod.cache.get("non_zero")
    if cached is None:
        reqs = pod_requests(pod, NON_MISSING_DEFAULTS)
        cached = (milli_value_of(reqs.get(CPU, Fraction(0))), value_of(reqs.get(MEMORY, Fraction(0))))
        pod.cache["non_zero"] = cached
    return cached


def node_allocatable_units(allocatable: Mapping[str, Fraction]) -> dict[str, int]:
    """framework.NewResource over a node's allocatable: the tracked resources in scheduler units."""
    out: dict[str, int] = {}
    for k, v in allocatable.items():
        if k in (CPU, MEMORY, EPHEMERAL_STORAGE, PODS) or is_scalar_resource(k):
            out[k] = to_units(k, v)
    return out
