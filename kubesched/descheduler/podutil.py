"""Pod helpers of the descheduler: kinds of pods, owners, listing, and the eviction order.

Mirrors kubernetes-sigs/descheduler's `pkg/descheduler/pod` and `pkg/utils/pod.go`. Upstream sorts with
Go's unstable `sort.Slice`; kubesched sorts stably, which is one of the orders upstream may produce.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import Any

from kubesched.api.objects import EVICTION_ORDER_KEY, OwnerReference, Pod
from kubesched.api.qos import BEST_EFFORT, BURSTABLE, GUARANTEED, qos_class
from kubesched.api.resources import pod_requests
from kubesched.cluster.state import ClusterState

MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"
EVICT_POD_ANNOTATION = "descheduler.alpha.kubernetes.io/evict"
PREFER_NO_EVICTION_ANNOTATION = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
SYSTEM_CRITICAL_PRIORITY = 2 * 1_000_000_000

_QOS_RANK = {BEST_EFFORT: 0, BURSTABLE: 1, GUARANTEED: 2}
# qos_class's memo key on the pod (read inline: the sort asks it of every pod of a node).
_QOS_CLASS_KEY = ("qos_class", True)

PodFilter = Callable[[Pod], bool]


# ---------------------------------------------------------------- kinds of pods


def is_mirror_pod(pod: Pod) -> bool:
    return MIRROR_POD_ANNOTATION in pod.meta.annotations


def is_static_pod(pod: Pod) -> bool:
    """utils.IsStaticPod: a config source annotation other than `api`."""
    source = pod.meta.annotations.get(CONFIG_SOURCE_ANNOTATION)
    return source is not None and source != "api"


def is_pod_terminating(pod: Pod) -> bool:
    return pod.meta.deletion_timestamp is not None


def is_critical_priority_pod(pod: Pod) -> bool:
    return pod.priority is not None and pod.priority >= SYSTEM_CRITICAL_PRIORITY


def is_daemonset_pod(owner_refs: Iterable[OwnerReference]) -> bool:
    return any(o.kind == "DaemonSet" for o in owner_refs)


def is_pod_with_local_storage(pod: Pod) -> bool:
    return any(v.get("hostPath") is not None or v.get("emptyDir") is not None for v in pod.volumes)


def is_pod_with_pvc(pod: Pod) -> bool:
    return any(v.get("persistentVolumeClaim") is not None for v in pod.volumes)


def is_pod_with_resource_claims(pod: Pod) -> bool:
    spec = pod.raw.get("spec")
    return isinstance(spec, dict) and bool(spec.get("resourceClaims"))


def have_evict_annotation(pod: Pod) -> bool:
    return EVICT_POD_ANNOTATION in pod.meta.annotations


def have_no_eviction_annotation(pod: Pod) -> bool:
    return PREFER_NO_EVICTION_ANNOTATION in pod.meta.annotations


def pod_priority_or_none(pod: Pod) -> int | None:
    return pod.priority


def is_pod_evictable_based_on_priority(pod: Pod, priority: int) -> bool:
    """defaultevictor.IsPodEvictableBasedOnPriority: no priority, or strictly below the threshold."""
    return pod.priority is None or pod.priority < priority


# ---------------------------------------------------------------- owners


def owner_ref(pod: Pod) -> list[OwnerReference]:
    return pod.meta.owner_references


def owner_ref_uids(pod: Pod) -> list[str]:
    return [o.uid for o in pod.meta.owner_references]


# ---------------------------------------------------------------- QoS


def is_best_effort_pod(pod: Pod) -> bool:
    return qos_class(pod) == BEST_EFFORT


def is_burstable_pod(pod: Pod) -> bool:
    return qos_class(pod) == BURSTABLE


def is_guaranteed_pod(pod: Pod) -> bool:
    return qos_class(pod) == GUARANTEED


# ---------------------------------------------------------------- ordering


def priority_qos_key(pod: Pod) -> tuple[int, int, int, int]:
    """The key of SortPodsBasedOnPriorityLowToHigh: pods without priority first, then lower priority,
    then BestEffort < Burstable < Guaranteed, then pods without the prefer-no-eviction annotation."""
    prio = pod.priority
    return (0 if prio is None else 1, prio or 0, _QOS_RANK.get(qos_class(pod), 1), int(have_no_eviction_annotation(pod)))


def sort_pods_based_on_priority_low_to_high(pods: list[Pod]) -> list[Pod]:
    """Sorts in place (and returns the list): the order upstream evicts in.

    The keys are `priority_qos_key`'s, made in one pass (a strategy sorts the pods of every source node,
    and most of the cost is asking each pod its QoS class for the first time)."""
    qos_key = _QOS_CLASS_KEY
    rank = _QOS_RANK
    keys = []
    for p in pods:
        # Kept per pod object (pods of a hot node are sorted again each cycle): dropped when the status or
        # the annotations change, as the QoS class and the annotation it reads would.
        cache = p.cache
        key = cache.get(EVICTION_ORDER_KEY)
        if key is None:
            prio = p.priority
            q = cache.get(qos_key)
            key = cache[EVICTION_ORDER_KEY] = (
                0 if prio is None else 1, prio or 0, rank.get(q if q is not None else qos_class(p), 1),
                1 if PREFER_NO_EVICTION_ANNOTATION in p.meta.annotations else 0)
        keys.append(key)
    order = sorted(range(len(pods)), key=keys.__getitem__)
    pods[:] = [pods[i] for i in order]
    return pods


def sort_pods_based_on_age(pods: list[Pod]) -> list[Pod]:
    """Oldest first (creationTimestamp); pods without one sort first, as a zero time does upstream."""
    pods.sort(key=lambda p: p.meta.creation_timestamp.timestamp() if p.meta.creation_timestamp else float("-inf"))
    return pods


# ---------------------------------------------------------------- listing


def wrap_filter_funcs(*filters: PodFilter | None) -> PodFilter:
    fs = [f for f in filters if f is not None]

    def combined(pod: Pod) -> bool:
        return all(f(pod) for f in fs)

    return combined


def build_filter_func(*, filter: PodFilter | None = None, included_namespaces: Iterable[str] | None = None,
                      excluded_namespaces: Iterable[str] | None = None,
                      label_selector: Any = None) -> PodFilter:
    """podutil.Options.BuildFilterFunc: namespaces, then the label selector, then the filter."""
    inc = set(included_namespaces or ())
    exc = set(excluded_namespaces or ())

    def f(pod: Pod) -> bool:
        if inc and pod.namespace not in inc:
            return False
        if exc and pod.namespace in exc:
            return False
        if label_selector is not None and not label_selector.matches(pod.labels):
            return False
        return filter is None or filter(pod)

    return f


# Every pod by node name, terminal ones included (the pod informer's nodeName index).
_ALL_BY_NODE: weakref.WeakKeyDictionary[ClusterState, tuple[tuple[int, int], dict[str, list[Pod]]]] = \
    weakref.WeakKeyDictionary()


def _all_pods_by_node(cluster: ClusterState) -> dict[str, list[Pod]]:
    stamp = (cluster.pod_generation, len(cluster.pods))
    cached = _ALL_BY_NODE.get(cluster)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    index: dict[str, list[Pod]] = {}
    for p in cluster.pods.values():
        if p.node_name:
            index.setdefault(p.node_name, []).append(p)
    _ALL_BY_NODE[cluster] = (stamp, index)
    return index


def list_all_pods_on_a_node(cluster: ClusterState, node_name: str, filter: PodFilter | None = None) -> list[Pod]:
    """Every pod assigned to the node, terminal (Succeeded/Failed) ones included."""
    pods = _all_pods_by_node(cluster).get(node_name, [])
    return [p for p in pods if filter(p)] if filter is not None else list(pods)


def list_pods_on_a_node(cluster: ClusterState, node_name: str, filter: PodFilter | None = None) -> list[Pod]:
    """podutil.ListPodsOnANode: pods assigned to the node that are neither Succeeded nor Failed."""
    pods = cluster.pods_on(node_name)
    if filter is None:
        return list(pods)
    return [p for p in pods if filter(p)]


def list_pods_on_nodes(cluster: ClusterState, node_names: Iterable[str], filter: PodFilter | None = None) -> list[Pod]:
    out: list[Pod] = []
    for n in node_names:
        out.extend(list_pods_on_a_node(cluster, n, filter))
    return out


def group_by_namespace(pods: Iterable[Pod]) -> dict[str, list[Pod]]:
    out: dict[str, list[Pod]] = {}
    for p in pods:
        out.setdefault(p.namespace, []).append(p)
    return out


def group_by_node_name(pods: Iterable[Pod]) -> dict[str, list[Pod]]:
    out: dict[str, list[Pod]] = {}
    for p in pods:
        out.setdefault(p.node_name, []).append(p)
    return out


def container_statuses(pod: Pod, init: bool = False) -> list[dict[str, Any]]:
    raw = pod.status.get("initContainerStatuses" if init else "containerStatuses")
    return [c for c in raw if isinstance(c, dict)] if isinstance(raw, list) else []


def has_matching_container_waiting_state(statuses: list[dict[str, Any]], states: set[str]) -> bool:
    for cs in statuses:
        waiting = (cs.get("state") or {}).get("waiting") if isinstance(cs.get("state"), dict) else None
        if isinstance(waiting, dict) and waiting.get("reason") in states:
            return True
    return False


def has_matching_container_terminated_state(statuses: list[dict[str, Any]], states: set[str]) -> bool:
    for cs in statuses:
        term = (cs.get("state") or {}).get("terminated") if isinstance(cs.get("state"), dict) else None
        if isinstance(term, dict) and term.get("reason") in states:
            return True
    return False


# ---------------------------------------------------------------- requests


def pod_request_quantities(pod: Pod) -> dict[str, Fraction]:
    """utils.PodRequestsAndLimits requests: resourcehelper.PodRequests with default options (exact)."""
    cached = pod.cache.get("desched_requests")
    if cached is None:
        cached = pod_requests(pod)
        pod.cache["desched_requests"] = cached
    return cached  # type: ignore[no-any-return]


def is_pod_covered_by_pdb(cluster: ClusterState, pod: Pod) -> bool:
    """utils.IsPodCoveredByPDB: some PDB in the pod's namespace selects it."""
    for pdb in cluster.pdbs.values():
        if pdb.meta.namespace == pod.namespace and pdb.selector.matches(pod.labels):
            return True
    return False
