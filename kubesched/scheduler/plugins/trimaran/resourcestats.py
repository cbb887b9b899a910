"""Trimaran's resource statistics (`pkg/trimaran/resourcestats.go`) and Go's float semantics they need.

Pod requests and limits here are Trimaran's own "effective resource": the sum over regular containers
(each rounded up to millicores / bytes first, as `framework.Resource.Add` does), then the max with each
init container alone, plus overhead — not component-helpers' PodRequests (no sidecar accounting).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from kubesched.api.objects import Container, Node, Pod, ResourceList
from kubesched.api.quantity import milli_value_of, value_of

# MegaFactor: memory is handled in MiB as floats.
MEGA_FACTOR = 1.0 / 1024.0 / 1024.0


# ---------------------------------------------------------------- Go float semantics


def go_min(a: float, b: float) -> float:
    """Go's built-in min over floats: NaN if either is NaN."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return a if a < b else b


def go_max(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return a if a > b else b


def go_fdiv(a: float, b: float) -> float:
    """IEEE division as Go does it: x/0 is ±Inf, 0/0 is NaN (Python raises)."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * (math.copysign(1.0, b))
    return a / b


def go_pow(x: float, y: float) -> float:
    """math.Pow for the exponents Trimaran uses (Go special-cases 0.5 as Sqrt, ±Inf as limits)."""
    if y == 0.5:
        return math.sqrt(x) if x >= 0 else math.nan
    if y == 1:
        return x
    if math.isinf(y):
        if x == 1 or x == -1:
            return 1.0
        if (abs(x) < 1) == (y > 0):
            return 0.0
        return math.inf
    try:
        return math.pow(x, y)
    except (OverflowError, ValueError):
        return math.inf if abs(x) > 1 else math.nan


# ---------------------------------------------------------------- pod resources


@dataclass(slots=True)
class Resource:
    """framework.Resource restricted to what Trimaran reads."""

    milli_cpu: int = 0
    memory: int = 0


def _add(r: Resource, rl: ResourceList) -> None:
    for name, q in rl.items():
        if name == "cpu":
            r.milli_cpu += milli_value_of(q)
        elif name == "memory":
            r.memory += value_of(q)


def effective_resource(pod: Pod, limits: bool) -> Resource:
    """GetEffectiveResource over requests (limits=False) or limits."""
    key = ("trimaran_effective", limits)
    cached = pod.cache.get(key)
    if cached is not None:
        return Resource(cached.milli_cpu, cached.memory)

    def of(c: Container) -> ResourceList:
        return c.limits if limits else c.requests

    result = Resource()
    for c in pod.containers:
        _add(result, of(c))
    for c in pod.init_containers:
        rl = of(c)
        if "cpu" in rl:
            result.milli_cpu = max(result.milli_cpu, milli_value_of(rl["cpu"]))
        if "memory" in rl:
            result.memory = max(result.memory, value_of(rl["memory"]))
    if pod.overhead:
        _add(result, pod.overhead)
    pod.cache[key] = Resource(result.milli_cpu, result.memory)
    return result


def requests_and_limits(pod: Pod) -> tuple[Resource, Resource]:
    """The pod's requests and its limits raised to at least the requests (SetMaxLimits)."""
    req = effective_resource(pod, limits=False)
    lim = effective_resource(pod, limits=True)
    lim.milli_cpu = max(lim.milli_cpu, req.milli_cpu)
    lim.memory = max(lim.memory, req.memory)
    return req, lim


def allocatable_units(node: Node) -> tuple[int, int]:
    """(milli-cpu, memory bytes) of the node's allocatable (0 when absent)."""
    a = node.allocatable
    return (milli_value_of(a["cpu"]) if "cpu" in a else 0, value_of(a["memory"]) if "memory" in a else 0)


def capacity_units(node: Node) -> dict[str, int]:
    c = node.capacity
    out = {}
    if "cpu" in c:
        out["cpu"] = milli_value_of(c["cpu"])
    if "memory" in c:
        out["memory"] = value_of(c["memory"])
    return out


@dataclass(slots=True)
class NodeRequestsAndLimits:
    request: Resource
    limit: Resource
    request_minus_pod: Resource
    limit_minus_pod: Resource
    capacity: Resource


def node_requests_and_limits(pods_on_node: Iterable[Pod], node: Node, pod_requests: Resource,
                             pod_limits: Resource) -> NodeRequestsAndLimits:
    """GetNodeRequestsAndLimits: totals over the node's pods and the pending pod; requests capped at capacity."""
    cap_cpu, cap_mem = allocatable_units(node)
    req, lim = Resource(), Resource()
    for p in pods_on_node:
        r, li = requests_and_limits(p)
        req.milli_cpu += r.milli_cpu
        req.memory += r.memory
        lim.milli_cpu += li.milli_cpu
        lim.memory += li.memory
    req_minus = Resource(req.milli_cpu, req.memory)
    lim_minus = Resource(lim.milli_cpu, lim.memory)
    req.milli_cpu += pod_requests.milli_cpu
    req.memory += pod_requests.memory
    lim.milli_cpu += pod_limits.milli_cpu
    lim.memory += pod_limits.memory
    req.milli_cpu = min(req.milli_cpu, cap_cpu)
    req.memory = min(req.memory, cap_mem)
    req_minus.milli_cpu = min(req_minus.milli_cpu, cap_cpu)
    req_minus.memory = min(req_minus.memory, cap_mem)
    return NodeRequestsAndLimits(req, lim, req_minus, lim_minus, Resource(cap_cpu, cap_mem))


# ---------------------------------------------------------------- statistics


@dataclass(slots=True)
class ResourceStats:
    used_avg: float
    used_stdev: float
    req: float
    capacity: float


def create_resource_stats(avg_pct: float, std_pct: float, alloc_units: int, req_units: int,
                          resource: str) -> ResourceStats:
    """CreateResourceStats from percentages: capacity = allocatable (memory in MiB), absolute avg/stdev."""
    if resource == "cpu":
        capacity = float(alloc_units)
        req = float(req_units)
    else:
        capacity = float(alloc_units) * MEGA_FACTOR
        req = float(req_units) * MEGA_FACTOR
    return ResourceStats(avg_pct * capacity / 100, std_pct * capacity / 100, req, capacity)


def mu_sigma(rs: ResourceStats) -> tuple[float, float]:
    """GetMuSigma: (avg + req) / capacity and stdev / capacity, each clamped to [0, 1]."""
    if rs.capacity <= 0:
        return 0.0, 0.0
    mu = go_max(go_min((rs.used_avg + rs.req) / rs.capacity, 1), 0)
    sigma = go_max(go_min(rs.used_stdev / rs.capacity, 1), 0)
    return mu, sigma


def mu_sigma_array(avg: np.ndarray, std: np.ndarray, req: np.ndarray, cap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """mu_sigma over arrays (rows with capacity <= 0 give 0, 0)."""
    ok = cap > 0
    safe = np.where(ok, cap, 1.0)
    mu = np.clip((avg + req) / safe, 0, 1)
    sigma = np.clip(std / safe, 0, 1)
    return np.where(ok, mu, 0.0), np.where(ok, sigma, 0.0)
