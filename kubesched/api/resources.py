"""Effective pod requests and limits, and the scheduler's integer resource units.

`pod_requests` follows component-helpers' `resource.PodRequests`: the sum of regular containers and
sidecars (restartable init containers), against the peak of each classic init container plus the
sidecars started before it, then pod-level resources (cpu, memory, hugepages) when set, plus overhead.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from fractions import Fraction
from typing import Any

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


def _rl_key(r: ResourceList | None) -> tuple[Any, ...] | None:
    return None if not r else tuple((k, v.numerator, v.denominator) for k, v in r.items())


def _container_key(c: Container) -> tuple[Any, ...]:
    # The written (name, value) pairs, kept by the parser (reading `raw` would decode a lazily loaded pod).
    req_key, lim_key = c.resources_key
    if len(req_key) != len(c.requests) or len(lim_key) != len(c.limits):
        # Not what was written (a container built or changed in code): key by the parsed values.
        req_key, lim_key = _rl_key(c.requests) or (), _rl_key(c.limits) or ()
        return ("parsed", req_key, lim_key, c.restart_policy)
    return (req_key, lim_key, c.restart_policy)


def resource_shape(pod: Pod) -> tuple[Any, ...]:
    """Everything a pod's effective requests and limits depend on, as a hashable key.

    Pods of one template share it, so derived numbers (exact Fraction sums, which are slow) are
    computed once per shape rather than once per pod. Containers are keyed by their written
    quantities (the parsed values are a function of them, and hashing strings is far cheaper than
    Fraction.__hash__); the rarer fields by (numerator, denominator).
    """
    key = pod.cache.get("resource_shape")
    if key is None:
        containers = tuple([_container_key(c) for c in pod.containers])
        if pod.init_containers or pod.overhead or pod.pod_requests or pod.pod_limits:
            key = (containers, tuple([_container_key(c) for c in pod.init_containers]),
                   _rl_key(pod.overhead), _rl_key(pod.pod_requests), _rl_key(pod.pod_limits))
        else:
            key = (containers,)
        pod.cache["resource_shape"] = key
    return key


# Per resource shape, the values derived from it (what → value), shared by every pod of the shape.
_BY_SHAPE: dict[tuple[Any, ...], dict[Hashable, Any]] = {}
_BY_SHAPE_LIMIT = 16384
RESOURCE_SHAPE_VALUES = "resource_shape_values"


def memo_by_shape(pod: Pod, what: Hashable, compute: Callable[[], Any]) -> Any:
    """A value derived only from the pod's resources, cached on the pod and shared by pods of its shape.

    A pod's first look-up copies every value its shape already has into its memo (pods of one template
    ask the same few questions, so the later ones are answered from the pod's own memo).
    Callers must treat the value as read-only: other pods receive the same object.
    """
    cache = pod.cache
    cached = cache.get(what)
    if cached is None:
        values = cache.get(RESOURCE_SHAPE_VALUES)
        if values is None:
            shape = resource_shape(pod)
            values = _BY_SHAPE.get(shape)
            if values is None:
                if len(_BY_SHAPE) >= _BY_SHAPE_LIMIT:
                    _BY_SHAPE.clear()  # pods keep their own shape's dict: a clear only stops sharing
                values = _BY_SHAPE[shape] = {}
            else:
                cache.update(values)
            cache[RESOURCE_SHAPE_VALUES] = values
            cached = cache.get(what)
        if cached is None:
            cached = values.get(what)
            if cached is None:
                cached = values[what] = compute()
            cache[what] = cached
    return cached


def scheduler_request(pod: Pod) -> dict[str, int]:
    """framework.Resource of a pod's requests in scheduler units (cpu in millicores, others rounded up).

    Resources the scheduler does not track (a bare unprefixed name other than cpu, memory and
    ephemeral-storage) are dropped, as `Resource.Add` drops them. Read-only (shared by pods of one shape).
    """
    cached = pod.cache.get("sched_request")
    if cached is None:
        def compute() -> dict[str, int]:
            out = {}
            for k, v in pod_requests(pod).items():
                if k in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar_resource(k):
                    out[k] = to_units(k, v)
            return out

        cached = memo_by_shape(pod, "sched_request", compute)
    return cached


def non_zero_request(pod: Pod) -> tuple[int, int]:
    """(milli-cpu, memory bytes) with the scoring defaults for containers that set no request."""
    cached = pod.cache.get("non_zero")
    if cached is None:
        def compute() -> tuple[int, int]:
            reqs = pod_requests(pod, NON_MISSING_DEFAULTS)
            return (milli_value_of(reqs.get(CPU, Fraction(0))), value_of(reqs.get(MEMORY, Fraction(0))))

        cached = memo_by_shape(pod, "non_zero", compute)
    return cached


def node_allocatable_units(allocatable: Mapping[str, Fraction]) -> dict[str, int]:
    """framework.NewResource over a node's allocatable: the tracked resources in scheduler units."""
    out: dict[str, int] = {}
    for k, v in allocatable.items():
        if k in (CPU, MEMORY, EPHEMERAL_STORAGE, PODS) or is_scalar_resource(k):
            out[k] = to_units(k, v)
    return out
