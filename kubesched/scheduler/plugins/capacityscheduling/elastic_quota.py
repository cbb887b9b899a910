"""ElasticQuotaInfo: one namespace's min, max and what its assigned pods use, in framework.Resource units.

Mirrors kubernetes-sigs/scheduler-plugins `pkg/capacityscheduling/elasticquota.go`. A quota without
`min` guarantees nothing (cpu, memory, ephemeral-storage 0); without `max` it is unbounded (MaxInt64).
Comparisons (`cmp2`) go resource by resource: cpu, memory, ephemeral-storage, pods, then each scalar
resource the left side has — a scalar the bound does not name compares against 0 for min and MaxInt64
for max. A resource missing from a given `max` is 0 (so a quota whose max names only cpu refuses pods
requesting memory), as upstream.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from kubesched.api.objects import Pod
from kubesched.scheduler.plugins.framework_resource import Resource

UPPER_BOUND_OF_MAX = 2**63 - 1
LOWER_BOUND_OF_MIN = 0


def pod_request(pod: Pod) -> Resource:
    """computePodResourceRequest: Σ containers, then the max with each init container, plus overhead."""
    cached = pod.cache.get("eq_request")
    if cached is None:
        r = Resource()
        for c in pod.containers:
            r.add(c.requests)
        for c in pod.init_containers:
            r.set_max(c.requests)
        if pod.overhead:
            r.add(pod.overhead)
        cached = r
        pod.cache["eq_request"] = r
    return cached.clone()


def _bound(bound: int) -> Resource:
    return Resource(bound, bound, bound, 0)


def cmp2(x1: Resource, x2: Resource, y: Resource, bound: int) -> bool:
    """Whether x1 + x2 exceeds y in any resource."""
    if x1.milli_cpu + x2.milli_cpu > y.milli_cpu:
        return True
    if x1.memory + x2.memory > y.memory:
        return True
    if x1.ephemeral_storage + x2.ephemeral_storage > y.ephemeral_storage:
        return True
    if x1.allowed_pod_number + x2.allowed_pod_number > y.allowed_pod_number:
        return True
    for name, q in x1.scalar.items():
        yq = y.scalar.get(name, bound)
        if q + x2.scalar.get(name, 0) > yq:
            return True
    return False


class ElasticQuotaInfo:
    __slots__ = ("namespace", "pods", "min", "max", "used")

    def __init__(self, namespace: str, min_rl: Mapping[str, Fraction] | None, max_rl: Mapping[str, Fraction] | None,
                 used: Resource | None = None) -> None:
        self.namespace = namespace
        self.pods: set[str] = set()
        self.min = Resource.of(min_rl) if min_rl is not None else _bound(LOWER_BOUND_OF_MIN)
        self.max = Resource.of(max_rl) if max_rl is not None else _bound(UPPER_BOUND_OF_MAX)
        self.used = used if used is not None else Resource()

    def clone(self) -> ElasticQuotaInfo:
        out = ElasticQuotaInfo.__new__(ElasticQuotaInfo)
        out.namespace = self.namespace
        out.pods = set(self.pods)
        out.min = self.min.clone()
        out.max = self.max.clone()
        out.used = self.used.clone()
        return out

    def used_over_min_with(self, request: Resource) -> bool:
        return cmp2(request, self.used, self.min, LOWER_BOUND_OF_MIN)

    def used_over_max_with(self, request: Resource) -> bool:
        return cmp2(request, self.used, self.max, UPPER_BOUND_OF_MAX)

    def used_over_min(self) -> bool:
        return cmp2(self.used, Resource(), self.min, LOWER_BOUND_OF_MIN)

    def add_pod_if_not_present(self, pod: Pod) -> None:
        if pod.key in self.pods:
            return
        self.pods.add(pod.key)
        self.used.add_resource(pod_request(pod))

    def delete_pod_if_present(self, pod: Pod) -> None:
        if pod.key not in self.pods:
            return
        self.pods.discard(pod.key)
        self.used.sub_resource(pod_request(pod))


class ElasticQuotaInfos(dict[str, ElasticQuotaInfo]):
    """Namespace → its quota (one ElasticQuota per namespace)."""

    def clone(self) -> ElasticQuotaInfos:
        return ElasticQuotaInfos({ns: info.clone() for ns, info in self.items()})

    def aggregated_used_over_min_with(self, request: Resource) -> bool:
        used = Resource()
        minimum = Resource()
        for info in self.values():
            used.add_resource(info.used)
            minimum.add_resource(info.min)
        used.add_resource(request)
        return cmp2(used, Resource(), minimum, LOWER_BOUND_OF_MIN)
