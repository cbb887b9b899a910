"""Node helpers of the descheduler: readiness, upstream's NodeFit, available resources, utilization.

Mirrors kubernetes-sigs/descheduler's `pkg/descheduler/node` and the predicates in `pkg/utils`. NodeFit is
the descheduler's own approximation of the scheduler (selector/affinity, NoSchedule/NoExecute taints,
unschedulable, the pod's required anti-affinity, requests against allocatable); kubesched's
`scheduler_fit` asks the real scheduler framework instead when a profile opts in.

Quantities are kept exact (Fractions) and compared the way upstream compares them: MilliValue for the
request check, Value/MilliValue differences for what a node has left.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction

from kubesched.api.objects import Node, Pod, Taint, Toleration
from kubesched.api.quantity import milli_value_of, value_of
from kubesched.api.selectors import NodeSelector
from kubesched.cluster.state import ClusterState
from kubesched.descheduler.podutil import group_by_namespace, pod_request_quantities

CPU, MEMORY, PODS = "cpu", "memory", "pods"
NODE_FIT_EFFECTS = ("NoSchedule", "NoExecute")

PodUtilization = Callable[[Pod], Mapping[str, Fraction]]


# ---------------------------------------------------------------- readiness


def is_ready(node: Node) -> bool:
    """nodeutil.IsReady: ready unless a Ready condition says otherwise (no conditions at all is ready)."""
    status = node.conditions.get("Ready")
    return status is None or status == "True"


def ready_nodes(nodes: Iterable[Node]) -> list[Node]:
    return [n for n in nodes if is_ready(n)]


def is_node_unschedulable(node: Node) -> bool:
    return node.unschedulable


# ---------------------------------------------------------------- predicates


def pod_match_node_selector(pod: Pod, node: Node) -> bool:
    """nodeaffinity.GetRequiredNodeAffinity(pod).Match(node): spec.nodeSelector and required node affinity."""
    labels = node.labels
    for k, v in pod.node_selector.items():
        if labels.get(k) != v:
            return False
    required: NodeSelector | None = pod.affinity.node_required
    if required is not None and not required.matches(labels, node.name):
        return False
    return True


def tolerations_tolerate_taint(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


def tolerations_tolerate_taints_with_filter(tolerations: Iterable[Toleration], taints: Iterable[Taint],
                                            apply_filter: Callable[[Taint], bool] | None = None) -> bool:
    tols = list(tolerations)
    for taint in taints:
        if apply_filter is not None and not apply_filter(taint):
            continue
        if not tolerations_tolerate_taint(tols, taint):
            return False
    return True


def pod_tolerates_node_taints(pod: Pod, node: Node) -> bool:
    """NodeFit's taint check: every NoSchedule and NoExecute taint is tolerated."""
    return tolerations_tolerate_taints_with_filter(pod.tolerations, node.taints,
                                                   lambda t: t.effect in NODE_FIT_EFFECTS)


def pod_tolerates_taints(pod: Pod, taints_of_nodes: Mapping[str, Iterable[Taint]]) -> bool:
    """utils.PodToleratesTaints: the pod tolerates every taint (any effect) of at least one of the nodes.

    Upstream first skips a node with more taints than the pod has tolerations; kept for fidelity.
    """
    for taints in taints_of_nodes.values():
        taint_list = list(taints)
        if len(pod.tolerations) >= len(taint_list) and \
                tolerations_tolerate_taints_with_filter(pod.tolerations, taint_list, None):
            return True
    return False


def pod_matches_inter_pod_anti_affinity(cluster: ClusterState, pod: Pod, node: Node) -> bool:
    """Whether a non-terminal pod on the node matches one of the pod's required anti-affinity terms
    (namespaces from the term or the pod's own; namespaceSelector is not considered upstream)."""
    terms = pod.affinity.pod_anti_affinity_required
    if not terms:
        return False
    by_ns = group_by_namespace(cluster.pods_on(node.name))
    for term in terms:
        namespaces = set(term.namespaces) if term.namespaces else {pod.namespace}
        for ns in namespaces:
            for assigned in by_ns.get(ns, ()):
                if assigned.name == pod.name or not term.label_selector.matches(assigned.labels):
                    continue
                if term.topology_key in node.labels:
                    return True
    return False


# ---------------------------------------------------------------- utilization and what is left


def node_utilization(pods: Iterable[Pod], resource_names: Iterable[str],
                     pod_utilization: PodUtilization | None = None) -> dict[str, Fraction]:
    """nodeutil.NodeUtilization: per resource the sum over the pods (requests by default); `pods` counts them."""
    pod_list = list(pods)
    names = list(resource_names)
    total: dict[str, Fraction] = {n: Fraction(len(pod_list)) if n == PODS else Fraction(0) for n in names}
    util = pod_utilization or pod_request_quantities
    for p in pod_list:
        used = util(p)
        for n in names:
            if n != PODS:
                q = used.get(n)
                if q is not None:
                    total[n] += q
    return total


# Exact per-node sums of requests over every resource, memoised per NodeInfo generation.
_NODE_TOTALS: weakref.WeakKeyDictionary[ClusterState, dict[str, tuple[int, int, dict[str, Fraction], int]]] = \
    weakref.WeakKeyDictionary()


def _node_request_totals(cluster: ClusterState, node_name: str) -> tuple[dict[str, Fraction], int]:
    info = cluster.node_info_by_name.get(node_name)
    if info is None:
        return {}, 0
    per = _NODE_TOTALS.setdefault(cluster, {})
    cached = per.get(node_name)
    if cached is not None and cached[0] == info.generation and cached[1] == id(info):
        return cached[2], cached[3]
    totals: dict[str, Fraction] = {}
    for p in info.pods.values():
        for k, v in pod_request_quantities(p).items():
            totals[k] = totals.get(k, Fraction(0)) + v
    per[node_name] = (info.generation, id(info), totals, len(info.pods))
    return totals, len(info.pods)


def _allocatable_value(node: Node, name: str) -> Fraction:
    return node.allocatable.get(name, Fraction(0))


def node_available_resources(cluster: ClusterState, node: Node, resource_names: Iterable[str]) -> dict[str, Fraction]:
    """nodeAvailableResources: allocatable minus the requests of the node's non-terminal pods.

    cpu is computed in millicores, memory, pods and other resources in whole units, as upstream does
    (`MilliValue()` / `Value()` differences); a resource the node does not list has nothing left.
    """
    totals, count = _node_request_totals(cluster, node.name)
    out: dict[str, Fraction] = {}
    for name in resource_names:
        used = totals.get(name, Fraction(0))
        if name == CPU:
            out[name] = Fraction(milli_value_of(_allocatable_value(node, CPU)) - milli_value_of(used), 1000)
        elif name == MEMORY:
            out[name] = Fraction(value_of(_allocatable_value(node, MEMORY)) - value_of(used))
        elif name == PODS:
            out[name] = Fraction(value_of(_allocatable_value(node, PODS)) - count)
        elif name in node.allocatable:
            out[name] = Fraction(value_of(node.allocatable[name]) - value_of(used))
        else:
            out[name] = Fraction(0)
    return out


def fits_request(cluster: ClusterState, pod: Pod, node: Node) -> tuple[bool, str | None]:
    """fitsRequest: every request (and one more pod) fits what the node has left."""
    requests = pod_request_quantities(pod)
    names = [PODS] + sorted(n for n in requests if n != PODS)
    available = node_available_resources(cluster, node, names)
    for name in names:
        want = requests.get(name, Fraction(0))
        if milli_value_of(want) > milli_value_of(available[name]):
            return False, f"insufficient {name}"
    if milli_value_of(available[PODS]) <= 0:
        return False, f"insufficient {PODS}"
    return True, None


# ---------------------------------------------------------------- NodeFit


def pod_fits_node(cluster: ClusterState, pod: Pod, node: Node) -> tuple[bool, list[str]]:
    """nodeutil.NodeFit: (fits, [the first reason it does not]).

    The request check is skipped for the node the pod already runs on (its requests are counted there).
    """
    if is_node_unschedulable(node):
        return False, ["node is not schedulable"]
    if not pod_match_node_selector(pod, node):
        return False, ["pod node selector does not match the node label"]
    if not pod_tolerates_node_taints(pod, node):
        return False, ["pod does not tolerate taints on the node"]
    if pod_matches_inter_pod_anti_affinity(cluster, pod, node):
        return False, ["pod matches inter-pod anti-affinity rule of other pod on node"]
    if not pod.node_name or pod.node_name != node.name:
        ok, why = fits_request(cluster, pod, node)
        if not ok:
            return False, [why or "insufficient resources"]
    return True, []


def _pod_fits_nodes(cluster: ClusterState, pod: Pod, nodes: Iterable[Node],
                    exclude: Callable[[Pod, Node], bool] | None) -> bool:
    for node in nodes:
        if exclude is not None and exclude(pod, node):
            continue
        if pod_fits_node(cluster, pod, node)[0]:
            return True
    return False


def pod_fits_any_other_node(cluster: ClusterState, pod: Pod, nodes: Iterable[Node]) -> bool:
    """PodFitsAnyOtherNode: some node other than the pod's own passes NodeFit."""
    return _pod_fits_nodes(cluster, pod, nodes, lambda p, n: p.node_name == n.name)


def pod_fits_any_node(cluster: ClusterState, pod: Pod, nodes: Iterable[Node]) -> bool:
    """PodFitsAnyNode: some node (the pod's own included) passes NodeFit."""
    return _pod_fits_nodes(cluster, pod, nodes, None)


def pod_fits_current_node(cluster: ClusterState, pod: Pod, node: Node) -> bool:
    return pod_fits_node(cluster, pod, node)[0]


# ---------------------------------------------------------------- preferred node affinity


def get_node_weight_given_pod_preferred_affinity(pod: Pod, node: Node) -> int:
    """Sum of the weights of the pod's preferred node-affinity terms the node matches."""
    total = 0
    for pref in pod.affinity.node_preferred:
        if pref.preference.matches(node.labels, node.name):
            total += pref.weight
    return total


def get_best_node_weight_given_pod_preferred_affinity(pod: Pod, nodes: Iterable[Node]) -> int:
    best = 0
    for node in nodes:
        w = get_node_weight_given_pod_preferred_affinity(pod, node)
        if w > best:
            best = w
    return best


def is_basic_resource(name: str) -> bool:
    return name in (CPU, MEMORY, PODS)
