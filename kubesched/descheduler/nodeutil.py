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
from typing import Any

import numpy as np

from kubesched.api.objects import Node, Pod, Taint, Toleration
from kubesched.api.quantity import milli_value_of, value_of
from kubesched.api.resources import EPHEMERAL_STORAGE, is_scalar_resource, memo_by_shape
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


# ---------------------------------------------------------------- requests on a node, exact

Units = int | Fraction  # cpu in millicores, every other resource in base units; int when whole


def _tracked(name: str) -> bool:
    """A resource NodeInfo's integer sums hold (Resource.Add keeps these and drops bare unprefixed names)."""
    return name in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar_resource(name)


def _whole_requests(pod: Pod) -> bool:
    """Whether NodeInfo.requested holds this pod's exact requests: each one a whole number of millicores
    (cpu) or base units (the rest), of a resource NodeInfo tracks. Memoised per resource shape."""
    def compute() -> bool:
        for name, q in pod_request_quantities(pod).items():
            if not _tracked(name) or (q * 1000 if name == CPU else q).denominator != 1:
                return False
        return True

    return bool(memo_by_shape(pod, "desched_whole_requests", compute))


# Per node: (NodeInfo identity, its generation) -> the exact sums of its pods' requests, and its pod count.
_NODE_UNITS: weakref.WeakKeyDictionary[ClusterState, dict[str, tuple[int, int, dict[str, Units], int]]] = \
    weakref.WeakKeyDictionary()


def node_requested_units(cluster: ClusterState, node_name: str) -> tuple[dict[str, Units], int]:
    """nodeutil.NodeUtilization's exact sums over the node's non-terminal pods (cpu in millicores, the
    rest in base units) and how many pods there are; memoised per NodeInfo generation.

    When every pod's requests are whole in those units (the usual case) the sums are NodeInfo's integer
    columns, which the cluster keeps current; otherwise the exact quantities are added up.
    """
    info = cluster.node_info_by_name.get(node_name)
    if info is None:
        return {}, 0
    per = _NODE_UNITS.get(cluster)
    if per is None:
        per = _NODE_UNITS[cluster] = {}
    cached = per.get(node_name)
    if cached is not None and cached[0] == info.generation and cached[1] == id(info):
        return cached[2], cached[3]
    pods = info.pods.values()
    totals: dict[str, Units]
    whole = True
    for p in pods:
        w = p.cache.get("desched_whole_requests")  # memo_by_shape's entry, read inline: this runs per pod
        if not (w if w is not None else _whole_requests(p)):
            whole = False
            break
    if whole:
        totals = dict(info.requested)
    else:
        exact: dict[str, Fraction] = {}
        for p in pods:
            for k, v in pod_request_quantities(p).items():
                exact[k] = exact.get(k, Fraction(0)) + (v * 1000 if k == CPU else v)
        totals = {k: (v.numerator if v.denominator == 1 else v) for k, v in exact.items()}
    per[node_name] = (info.generation, id(info), totals, len(info.pods))
    return totals, len(info.pods)


def _ceil_units(v: Units) -> int:
    """Quantity.Value() of a sum in units (MilliValue() for cpu, already in millicores)."""
    return v if isinstance(v, int) else value_of(v)


def _allocatable_units(node: Node, name: str) -> int | None:
    """The node's allocatable in units (MilliValue for cpu, Value otherwise); None when not listed."""
    q = node.allocatable.get(name)
    if q is None:
        return None
    if q.denominator == 1:
        return q.numerator * 1000 if name == CPU else q.numerator
    return milli_value_of(q) if name == CPU else value_of(q)


def node_available_milli(cluster: ClusterState, node: Node, resource_names: Iterable[str]) -> dict[str, int]:
    """nodeAvailableResources, each as its MilliValue: allocatable minus the requests of the node's
    non-terminal pods, cpu in millicores and memory, pods and other resources in whole units (upstream's
    `MilliValue()` / `Value()` differences); a resource the node does not list has nothing left."""
    used, count = node_requested_units(cluster, node.name)
    out: dict[str, int] = {}
    for name in resource_names:
        alloc = _allocatable_units(node, name)
        if name == CPU:
            out[name] = (alloc or 0) - _ceil_units(used.get(CPU, 0))
        elif name == PODS:
            out[name] = ((alloc or 0) - count) * 1000
        elif name == MEMORY or alloc is not None:
            out[name] = ((alloc or 0) - _ceil_units(used.get(name, 0))) * 1000
        else:
            out[name] = 0
    return out


def node_available_resources(cluster: ClusterState, node: Node, resource_names: Iterable[str]) -> dict[str, Fraction]:
    """nodeAvailableResources: allocatable minus the requests of the node's non-terminal pods.

    cpu is computed in millicores, memory, pods and other resources in whole units, as upstream does
    (`MilliValue()` / `Value()` differences); a resource the node does not list has nothing left.
    """
    return {k: Fraction(v, 1000) for k, v in node_available_milli(cluster, node, resource_names).items()}


def _request_milli(pod: Pod) -> tuple[list[str], dict[str, int]]:
    """The names fitsRequest checks (pods first, then the requests by name) and each request's MilliValue.
    Memoised per resource shape (the same object for every pod of the shape)."""
    def compute() -> tuple[list[str], dict[str, int]]:
        requests = pod_request_quantities(pod)
        names = [PODS] + sorted(n for n in requests if n != PODS)
        return names, {n: milli_value_of(requests.get(n, Fraction(0))) for n in names}

    return memo_by_shape(pod, "desched_fit_requests", compute)  # type: ignore[no-any-return]


def fits_request(cluster: ClusterState, pod: Pod, node: Node) -> tuple[bool, str | None]:
    """fitsRequest: every request (and one more pod) fits what the node has left."""
    names, want = _request_milli(pod)
    available = node_available_milli(cluster, node, names)
    for name in names:
        if want[name] > available[name]:
            return False, f"insufficient {name}"
    if available[PODS] <= 0:
        return False, f"insufficient {PODS}"
    return True, None


class NodeFitColumns:
    """koordinator's NodeFit (node selector and required affinity, NoSchedule/NoExecute taints, requests,
    schedulable: what LowNodeLoad's `_node_fit` asks of one node) over a fixed list of nodes at once.

    `mask(pod)` is `[fits(pod, node) for node in nodes]` as a boolean array. Placement (selector, affinity,
    taints) is computed once per placement shape, nodes with the same taints together; the request check
    compares the pod's MilliValues with one column per resource of what each node has left
    (`node_available_milli`), once per resource shape. The node objects are the ones given (the cycle's);
    what their pods request is the cluster's: the columns follow the rows the NodeTable logs as changed,
    so evictions (or bindings) during the cycle are seen as the per-node check sees them.

    What a node has left is worked out when a node is first asked about (it reads every pod on the node),
    in blocks of nodes: `candidates(pod)` is the mask with every node not yet worked out counted as
    fitting (exact at the nodes that are), `known(i)` says which, `learn(i)` works node i out. A caller that
    wants the first node that fits walks the candidates in order, learning the unknown nodes it reaches
    (and asking `candidates` again), so only those nodes' pods are read.
    """

    BLOCK = 32  # nodes worked out together when the walk reaches one not yet known

    def __init__(self, cluster: ClusterState, nodes: list[Node]) -> None:
        self.cluster = cluster
        self.nodes = nodes
        self.schedulable = np.array([not is_node_unschedulable(n) for n in nodes], dtype=bool)
        self._placement: dict[Any, np.ndarray] = {}
        self._taint_groups: dict[tuple[Taint, ...], list[int]] = {}
        for i, n in enumerate(nodes):
            self._taint_groups.setdefault(n.taints, []).append(i)
        # What each known node has left, per resource (valid where `_known`).
        self._available: dict[str, np.ndarray] = {}
        self._known = np.zeros(len(nodes), dtype=bool)
        self._unknown = len(nodes)
        # Bumped whenever a node's row is (re)computed: request masks made before are stale.
        self._version = 0
        # Keyed by id() of the memoised request shape, which is kept alive here (ids are never reused):
        # (shape, version, the mask with unknown nodes counted as fitting).
        self._requests: dict[int, tuple[Any, int, np.ndarray]] = {}
        # Placement & requests & schedulable, by the identities of the two masks (kept alive in the entry).
        self._combined: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._follow()

    # ------------------------------------------------------------ following the cluster

    def _follow(self) -> None:
        table = self.cluster.table
        self._table = table
        self._epoch = table.changes_epoch
        self._seen = len(table.changed_rows)
        self._positions: dict[int, list[int]] = {}
        for i, n in enumerate(self.nodes):
            info = self.cluster.node_info_by_name.get(n.name)
            if info is not None:
                self._positions.setdefault(info.index, []).append(i)

    def _forget(self) -> None:
        self._requests.clear()
        self._combined.clear()
        self._version += 1

    def _catch_up(self) -> None:
        table = self.cluster.table
        if table is not self._table or table.changes_epoch != self._epoch:
            self._available.clear()
            self._known[:] = False
            self._unknown = len(self.nodes)
            self._forget()
            self._follow()
            return
        log = table.changed_rows
        if len(log) == self._seen:
            return
        changed = {i for row in set(log[self._seen:]) for i in self._positions.get(row, ())}
        self._seen = len(log)
        known = [i for i in changed if self._known[i]]
        if not known:
            return
        self._fill(sorted(known), list(self._available))
        self._forget()

    # ------------------------------------------------------------ what nodes have left

    def _fill(self, rows: list[int], names: list[str]) -> None:
        """Work out these resources' columns at these rows."""
        if not rows or not names:
            return
        values = [node_available_milli(self.cluster, self.nodes[i], names) for i in rows]
        for name in names:
            column = self._available[name]
            new = [v[name] for v in values]
            if column.dtype != object:
                try:
                    column[rows] = np.array(new, dtype=np.int64)
                    continue
                except OverflowError:
                    column = self._available[name] = column.astype(object)
            for i, v in zip(rows, new, strict=True):
                column[i] = v

    def _columns(self, names: list[str]) -> None:
        """Make the columns of these resources (with pods, cpu and memory, which nearly every pod asks for)."""
        missing = [n for n in dict.fromkeys([PODS, CPU, MEMORY, *names]) if n not in self._available]
        if not missing:
            return
        for name in missing:
            self._available[name] = np.zeros(len(self.nodes), dtype=np.int64)
        self._fill(np.flatnonzero(self._known).tolist(), missing)

    def _learn(self, rows: list[int]) -> None:
        """Work out every column at these rows (nodes not known yet)."""
        if not rows:
            return
        self._columns([])
        self._fill(rows, list(self._available))
        self._known[rows] = True
        self._unknown -= len(rows)
        self._forget()

    # ------------------------------------------------------------ masks

    def _request_mask(self, shape: tuple[list[str], dict[str, int]]) -> np.ndarray:
        """fitsRequest at the known nodes, True at the others (read-only)."""
        hit = self._requests.get(id(shape))
        if hit is not None and hit[1] == self._version:
            return hit[2]
        names, want = shape
        self._columns(names)
        available = self._available
        mask = available[PODS] > 0
        for name in names:
            mask &= available[name] >= want[name]
        if self._unknown:
            mask |= ~self._known
        self._requests[id(shape)] = (shape, self._version, mask)
        return mask

    def requests(self, pod: Pod) -> np.ndarray:
        """fitsRequest(pod, node) for every node (read-only)."""
        self._catch_up()
        if self._unknown:
            self._learn(np.flatnonzero(~self._known).tolist())
        return self._request_mask(_request_milli(pod))

    def placement(self, pod: Pod) -> np.ndarray:
        """PodMatchNodeSelector and the NoSchedule/NoExecute taints tolerated, for every node (read-only)."""
        key = pod.cache.get("desched_placement_key")
        if key is None:
            key = (tuple(sorted(pod.node_selector.items())), pod.affinity.node_required, pod.tolerations)
            pod.cache["desched_placement_key"] = key
        mask = self._placement.get(key)
        if mask is None:
            mask = np.zeros(len(self.nodes), dtype=bool)
            selects = bool(pod.node_selector) or pod.affinity.node_required is not None
            for taints, positions in self._taint_groups.items():
                if not tolerations_tolerate_taints_with_filter(pod.tolerations, taints,
                                                               lambda t: t.effect in NODE_FIT_EFFECTS):
                    continue
                if not selects:
                    mask[positions] = True
                    continue
                for i in positions:
                    if pod_match_node_selector(pod, self.nodes[i]):
                        mask[i] = True
            self._placement[key] = mask
        return mask

    def _combine(self, placement: np.ndarray, requests: np.ndarray) -> np.ndarray:
        key = (id(placement), id(requests))
        hit = self._combined.get(key)
        if hit is None or hit[0] is not placement or hit[1] is not requests:
            hit = self._combined[key] = (placement, requests, placement & requests & self.schedulable)
        return hit[2]

    def mask(self, pod: Pod) -> np.ndarray:
        """The whole NodeFit for every node (read-only)."""
        requests = self.requests(pod)  # first: it catches up with the cluster
        return self._combine(self.placement(pod), requests)

    def candidates(self, pod: Pod) -> np.ndarray:
        """`mask(pod)` with the nodes not worked out yet counted as passing the request check (read-only):
        a superset of the nodes that fit; `fits` decides each."""
        self._catch_up()
        requests = self._request_mask(_request_milli(pod))
        return self._combine(self.placement(pod), requests)

    def known(self, i: int) -> bool:
        """Whether node i is worked out (then `candidates` is exact there)."""
        return bool(self._known[i])

    def learn(self, i: int) -> None:
        """Work out node i (not known yet) and the next unknown nodes after it, up to a block."""
        ahead = np.flatnonzero(~self._known[i:i + 4 * self.BLOCK])[:self.BLOCK] + i
        self._learn(ahead.tolist())


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
