"""oom_score_adj per container (pkg/kubelet/qos/policy.go GetContainerOOMScoreAdjust).

Node-critical and Guaranteed pods get -997, BestEffort 1000. A Burstable container gets
1000 - 1000 × memoryRequest / machineMemory (Go integer division), clamped to [3, 999] so it stays
between the other two classes. With pod-level requests, the part of the pod's memory request that no
container claims is shared equally among all containers. A sidecar (restartable init container) never
scores above the smallest regular container.
"""

from __future__ import annotations

from fractions import Fraction

from kubesched.api.objects import Container, Pod
from kubesched.api.qos import BEST_EFFORT, GUARANTEED, is_pod_level_requests_set, qos_class
from kubesched.api.quantity import value_of
from kubesched.api.resources import MEMORY
from kubesched.kubelet.critical import is_node_critical_pod
from kubesched.scheduler.plugins.gomath import go_div

GUARANTEED_OOM_SCORE_ADJ = -997
BEST_EFFORT_OOM_SCORE_ADJ = 1000
KUBELET_OOM_SCORE_ADJ = -999
KUBE_PROXY_OOM_SCORE_ADJ = -999


def _memory_request(c: Container) -> int:
    """container.Resources.Requests.Memory().Value(): rounded up, 0 when unset."""
    return value_of(c.requests.get(MEMORY, Fraction(0)))


def _is_sidecar(pod: Pod, container: Container) -> bool:
    return container.is_sidecar and any(c.name == container.name for c in pod.init_containers)


def _min_regular_container_memory(pod: Pod) -> int:
    return min((_memory_request(c) for c in pod.containers), default=0)


def _aggregate_container_memory_request(pod: Pod) -> int:
    """AggregateContainerRequests for memory: regular containers and sidecars, against the peak of each
    classic init container together with the sidecars started before it."""
    total = sum(_memory_request(c) for c in pod.containers)
    sidecars = 0
    init_peak = 0
    for c in pod.init_containers:
        r = _memory_request(c)
        if c.is_sidecar:
            total += r
            sidecars += r
            init_peak = max(init_peak, sidecars)
        else:
            init_peak = max(init_peak, r + sidecars)
    return max(total, init_peak)


def _remaining_pod_mem_req_per_container(pod: Pod) -> int:
    """remainingPodMemReqPerContainer: the pod-level memory request no container claims, per container."""
    pod_request = value_of((pod.pod_requests or {}).get(MEMORY, Fraction(0)))
    if pod_request == 0:
        return 0
    n = len(pod.containers) + len(pod.init_containers)
    if n == 0:
        return 0
    return go_div(pod_request - _aggregate_container_memory_request(pod), n)


def container_oom_score_adjust(pod: Pod, container: Container, memory_capacity: int,
                               pod_level_resources: bool = True) -> int:
    """GetContainerOOMScoreAdjust(pod, container, memoryCapacity)."""
    if is_node_critical_pod(pod):
        return GUARANTEED_OOM_SCORE_ADJ
    qos = qos_class(pod, pod_level_resources)
    if qos == GUARANTEED:
        return GUARANTEED_OOM_SCORE_ADJ
    if qos == BEST_EFFORT:
        return BEST_EFFORT_OOM_SCORE_ADJ
    if memory_capacity <= 0:
        raise ValueError("machine memory capacity is needed for a Burstable container")
    pod_level = pod_level_resources and is_pod_level_requests_set(pod)
    remaining = _remaining_pod_mem_req_per_container(pod) if pod_level else 0
    memory_request = _memory_request(container) + remaining
    adj = 1000 - go_div(1000 * memory_request, memory_capacity)
    if _is_sidecar(pod, container):
        min_request = _min_regular_container_memory(pod) + remaining
        adj = min(adj, 1000 - go_div(1000 * min_request, memory_capacity))
    if adj < 1000 + GUARANTEED_OOM_SCORE_ADJ:
        return 1000 + GUARANTEED_OOM_SCORE_ADJ
    if adj == BEST_EFFORT_OOM_SCORE_ADJ:
        return adj - 1
    return adj


def pod_oom_score_adjust(pod: Pod, memory_capacity: int | None) -> dict[str, int | None]:
    """oom_score_adj of every init and regular container (None for a Burstable pod when the machine's
    memory is unknown)."""
    out: dict[str, int | None] = {}
    for c in [*pod.init_containers, *pod.containers]:
        try:
            out[c.name] = container_oom_score_adjust(pod, c, memory_capacity or 0)
        except ValueError:
            out[c.name] = None
    return out
