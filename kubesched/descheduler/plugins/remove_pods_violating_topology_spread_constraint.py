"""RemovePodsViolatingTopologySpreadConstraint (Balance): rebalance pods whose topology spread is skewed.

Constraints (with `whenUnsatisfiable` among the plugin's `constraints`) are collected per namespace from
the pods carrying them, each including the carrier's node affinity/tolerations as its node inclusion
policies require. For each constraint the matching pods are counted per topology domain; when the
largest and smallest domains differ by more than maxSkew, pods are moved (marked for eviction) from
domains above the average to domains below it, two pointers walking the domains sorted by size, at most
min(ceil(above - avg), ceil(avg - below), ceil((skew - maxSkew) / 2)) at a time. With
`topologyBalanceNodeFit` (default) a pod is only marked when it fits a node of a below-average domain.

Upstream: kubernetes-sigs/descheduler, pkg/framework/plugins/removepodsviolatingtopologyspreadconstraint/
topologyspreadconstraint.go. Its listing (the nodes in the order given, each node's pods by name, grouped by
namespace) decides the order of namespaces, of constraints and of the pods within each domain, hence which pods
are evicted and in what order. Rather than walking every pod each cycle, the plugin reads the cluster's
`NamespacedPods` index (the counted pods by namespace, their carriers and label values, kept current from
events): it counts each constraint's pods per domain unordered, and sorts into listing order only the pods of
constraints that are out of balance. `constraints_from_scratch` is the walk itself (used for a node list that
names a node twice; the tests' reference).
"""

from __future__ import annotations

import itertools
import math
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from kubesched.api.objects import Node, Pod, Toleration, find_untolerated_taint
from kubesched.api.resources import CPU, EPHEMERAL_STORAGE, MEMORY, is_scalar_resource, scheduler_request
from kubesched.api.selectors import LabelSelector, NodeSelector, Requirement
from kubesched.cluster.state import ClusterState
from kubesched.config.plugin_args import PluginArgs
from kubesched.descheduler import nodeutil, podutil
from kubesched.descheduler.framework import BalancePlugin, Handle, Status
from kubesched.descheduler.namespaced_pods import NamespacePods, namespaced_pods_for
from kubesched.descheduler.plugins._common import (
    NODE_LIMIT,
    TOTAL_LIMIT,
    IncludeExclude,
    all_of,
    evict,
    has_node_selector_or_affinity,
    label_selector,
    namespace_label_filter,
    namespaces,
    optional_strings,
    strategy_fields,
)
from kubesched.descheduler.plugins._gosort import go_sort_slice

PLUGIN_NAME = "RemovePodsViolatingTopologySpreadConstraint"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR, IGNORE = "Honor", "Ignore"
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class RemovePodsViolatingTopologySpreadConstraintArgs(PluginArgs):
    """RemovePodsViolatingTopologySpreadConstraintArgs (types.go) with its defaults (constraints DoNotSchedule,
    topologyBalanceNodeFit true) and ValidateRemovePodsViolatingTopologySpreadConstraintArgs."""

    constraints: tuple[str, ...] = (DO_NOT_SCHEDULE,)
    topology_balance_node_fit: bool = True
    namespaces: IncludeExclude | None = None
    label_selector: LabelSelector | None = None

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None,
                 field: str = "") -> RemovePodsViolatingTopologySpreadConstraintArgs:
        a = strategy_fields(PLUGIN_NAME, raw, field, ("namespaces", "labelSelector", "constraints",
                                                      "topologyBalanceNodeFit"))
        ns = namespaces(a)
        selector = label_selector(a)
        constraints = optional_strings(a, "constraints") or []
        for i, c in enumerate(constraints):
            if c not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
                raise a.error(f"constraints[{i}]", f"constraint {c} is not one of [{DO_NOT_SCHEDULE} {SCHEDULE_ANYWAY}]")
        return cls(
            constraints=tuple(constraints) or (DO_NOT_SCHEDULE,),  # an empty list defaults too
            topology_balance_node_fit=a.boolean("topologyBalanceNodeFit", True),
            namespaces=ns,
            label_selector=selector,
        )


@dataclass(frozen=True, slots=True)
class Inclusion:
    """Which nodes count as domains: the carrier's node selection (Honor) and tolerations (Honor)."""

    node_selector: tuple[tuple[str, str], ...] | None  # None: nodeAffinityPolicy Ignore
    node_required: NodeSelector | None
    tolerations: tuple[Toleration, ...] | None  # None: nodeTaintsPolicy Ignore

    def matches(self, node: Node) -> bool:
        """matchNodeInclusionPolicies."""
        if self.node_selector is not None:
            labels = node.labels
            for k, v in self.node_selector:
                if labels.get(k) != v:
                    return False
            if self.node_required is not None and not self.node_required.matches(labels, node.name):
                return False
        if self.tolerations is not None:
            if find_untolerated_taint(node.taints, self.tolerations, ("NoSchedule", "NoExecute")) is not None:
                return False
        return True

    @property
    def everything(self) -> bool:
        return (self.node_selector is None or (not self.node_selector and self.node_required is None)) \
            and self.tolerations is None


_EVERY_NODE = Inclusion(None, None, None)


@dataclass(frozen=True, slots=True, weakref_slot=True)
class SpreadConstraint:
    """topologySpreadConstraint: a pod's constraint as the plugin compares and applies it."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    inclusion: Inclusion
    # Equal constraints come from every replica of a workload; their hash is computed once.
    hash_value: int = field(default=0, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "hash_value", hash((self.max_skew, self.topology_key, self.selector, self.inclusion)))

    def __hash__(self) -> int:
        return self.hash_value


class RemovePodsViolatingTopologySpreadConstraint(BalancePlugin):
    name: ClassVar[str] = PLUGIN_NAME
    Args = RemovePodsViolatingTopologySpreadConstraintArgs
    args: RemovePodsViolatingTopologySpreadConstraintArgs

    def __init__(self, args: RemovePodsViolatingTopologySpreadConstraintArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        # Upstream lists with the evictor's Filter only; PreEvictionFilter runs just before evicting.
        self.pod_filter = all_of(namespace_label_filter(self.args.namespaces, self.args.label_selector),
                                 handle.evictor.filter) \
            if self.args.namespaces is not None or self.args.label_selector is not None else handle.evictor.filter
        # The counted pods by namespace, kept current from the cluster's events. Built now, not in a cycle,
        # with what the cycles will ask of it: the carriers' constraints (parsed once per pod object) and
        # the label values their selectors look up.
        self.namespaced_pods = namespaced_pods_for(handle.cluster)
        for ns in list(self.namespaced_pods.carrier_namespaces.values()):
            selectors = {tsc.selector for pod in ns.carriers.values() for _, tsc in _pod_constraints(pod)}
            for selector in selectors:
                ns.candidates(selector)

    # ------------------------------------------------------------ balance

    def balance(self, nodes: list[Node]) -> Status:
        allowed = frozenset(self.args.constraints)
        marked: dict[int, Pod] = {}  # podsForEviction (by id), in the order pods were marked
        domains_cache: dict[tuple[str, Inclusion], dict[str, list[Node]]] = {}
        node_values: dict[str, dict[str, str | None]] = {}  # topology key -> node name -> value
        passes: dict[int, bool] = {}  # the pod filter, memoised by pod identity

        def ok(pod: Pod) -> bool:
            v = passes.get(id(pod))
            if v is None:
                v = self.pod_filter(pod)
                passes[id(pod)] = v
            return v

        position = {n.name: i for i, n in enumerate(nodes)}
        listing, indexed = self._listing(nodes, position, allowed, ok)

        def listing_order(pod: Pod) -> tuple[int, str]:
            return position[pod.node_name], pod.meta.name

        for tsc, pods in listing:
            key = (tsc.topology_key, tsc.inclusion)
            domain_nodes = domains_cache.get(key)
            if domain_nodes is None:
                domain_nodes = _node_domains(nodes, tsc)
                domains_cache[key] = domain_nodes
            values = node_values.get(tsc.topology_key)
            if values is None:
                values = {n.name: n.labels.get(tsc.topology_key) for n in nodes}
                node_values[tsc.topology_key] = values
            if indexed:
                grouped = _unordered_domains(pods, values, domain_nodes, tsc.max_skew, listing_order)
                if grouped is None:
                    continue
                domains = grouped
            else:
                domains = _listed_domains(pods, values, domain_nodes)
                if _is_balanced(domains, tsc.max_skew):
                    continue
            sum_pods = sum(len(lst) for lst in domains.values())
            self._balance_domains(marked, tsc, domains, sum_pods, domain_nodes)

        node_limit_exceeded: set[str] = set()
        pre_eviction_filter = self.handle.evictor.pre_eviction_filter
        for pod in marked.values():
            if pod.node_name in node_limit_exceeded:
                continue
            if not ok(pod) or not pre_eviction_filter(pod):
                continue
            outcome = evict(self.handle, pod, PLUGIN_NAME)
            if outcome == NODE_LIMIT:
                node_limit_exceeded.add(pod.node_name)
            elif outcome == TOTAL_LIMIT:
                return Status()
        return Status()

    def _listing(self, nodes: list[Node], position: dict[str, int], allowed: frozenset[str],
                 ok: Callable[[Pod], bool]) -> tuple[Iterator[tuple[SpreadConstraint, list[Pod]]], bool]:
        """The cycle's constraints with the pods each counts, and whether they come from the index (pods in no
        particular order) rather than from a walk over the nodes' pods (pods in listing order). The index
        keys pods by node name, so a node list naming a node twice (its pods listed twice) is walked."""
        if len(position) == len(nodes):
            return self._indexed_constraints(nodes, position, allowed, ok), True
        return constraints_from_scratch(self.handle.cluster, nodes, allowed, ok), False

    def _indexed_constraints(self, nodes: list[Node], position: dict[str, int], allowed: frozenset[str],
                             ok: Callable[[Pod], bool]) -> Iterator[tuple[SpreadConstraint, list[Pod]]]:
        """What `constraints_from_scratch` yields, from the index: for each namespace with a carrier on the
        nodes (in the order the listing walk meets its first carrier), its distinct constraints in upstream's
        order, each with the pods it counts (passing the pod filter, not terminating, matching its selector,
        on one of the nodes) in no particular order."""
        found: list[tuple[int, NamespacePods, dict[SpreadConstraint, tuple[int, str, int]]]] = []
        for ns in self.namespaced_pods.carrier_namespaces.values():
            if not self._namespace_allowed(ns.name):
                continue  # every pod fails the pod filter: no constraint
            first = -1  # the node position of the namespace's first carrier
            # Upstream's order of the constraints: by their first carrier (passing the pod filter) in listing
            # order, then by their place among its constraints.
            firsts: dict[SpreadConstraint, tuple[int, str, int]] = {}
            for pod in ns.carriers.values():
                p = position.get(pod.node_name)
                if p is None:
                    continue
                j = -1
                for when, tsc in _pod_constraints(pod):
                    if when not in allowed:
                        continue
                    j += 1
                    if j == 0:
                        if first < 0 or p < first:
                            first = p
                        if not ok(pod):
                            break
                    cur = firsts.get(tsc)
                    if cur is None or p < cur[0] or (p == cur[0] and (pod.meta.name, j) < cur[1:]):
                        firsts[tsc] = (p, pod.meta.name, j)
            if first >= 0:
                found.append((first, ns, firsts))
        for ns, firsts in self._in_walk_order(nodes, found, allowed):
            for tsc in sorted(firsts, key=firsts.__getitem__):
                selector = tsc.selector
                candidates, exact = ns.candidates(selector)
                yield tsc, [p for p in candidates
                            if p.node_name in position and (exact or selector.matches(p.meta.labels))
                            and p.meta.deletion_timestamp is None and ok(p)]

    def _in_walk_order(self, nodes: list[Node], found: list[tuple[int, NamespacePods, _T]],
                       allowed: frozenset[str]) -> list[tuple[NamespacePods, _T]]:
        """The namespaces (with what was found for each) in the order the listing walk (nodes in order, each
        node's pods as the node holds them) meets their first carrier: by that carrier's node, then, for
        namespaces whose first carriers share a node, by the node's own order of its pods."""
        found.sort(key=lambda f: f[0])
        out: list[tuple[NamespacePods, _T]] = []
        i = 0
        while i < len(found):
            j = i + 1
            while j < len(found) and found[j][0] == found[i][0]:
                j += 1
            group = found[i:j]
            if len(group) > 1:
                rank: dict[str, int] = {}
                for pod in self.handle.cluster.pods_on(nodes[group[0][0]].name):
                    if pod.meta.namespace not in rank and _carries(pod, allowed):
                        rank[pod.meta.namespace] = len(rank)
                group.sort(key=lambda f: rank[f[1].name])
            out.extend((f[1], f[2]) for f in group)
            i = j
        return out

    def _namespace_allowed(self, namespace: str) -> bool:
        """Whether pods of the namespace can pass the args' namespaces (the pod filter's first test)."""
        ns = self.args.namespaces
        if ns is None:
            return True
        if ns.include and namespace not in ns.include:
            return False
        return not (ns.exclude and namespace in ns.exclude)

    def _balance_domains(self, marked: dict[int, Pod], tsc: SpreadConstraint, domains: dict[str, list[Pod]],
                         sum_pods: int, domain_nodes: dict[str, list[Node]]) -> None:
        """balanceDomains: two pointers over the domains sorted by size, moving pods from the big end."""
        ideal_avg = sum_pods / len(domains)
        sorted_domains = _sort_domains(domains)
        node_fit = self.args.topology_balance_node_fit
        cluster = self.handle.cluster

        # filterNodesBelowIdealAvg: eligible nodes of the domains below the average (at the start).
        below = [domain_nodes[d.value] for d in sorted_domains if len(d.pods) < ideal_avg and d.value in domain_nodes]
        fits = _FitsBelow(cluster, below, self.handle.node_fit)

        i, j = 0, len(sorted_domains) - 1
        while i < j:
            if sorted_domains[j].size() <= ideal_avg:
                j -= 1
            big, small = sorted_domains[j], sorted_domains[i]
            skew = big.size() - small.size()
            if skew <= tsc.max_skew:
                i += 1
                continue
            above_avg = math.ceil(big.size() - ideal_avg)
            below_avg = math.ceil(ideal_avg - small.size())
            half_skew = math.ceil((skew - tsc.max_skew) / 2)
            move = min(above_avg, below_avg, half_skew)
            if move <= 0:
                i += 1
                continue
            for pod in big.take(move, fits):
                if node_fit and not fits(pod):
                    continue
                marked.setdefault(id(pod), pod)
            small.extra += move


def _carries(pod: Pod, allowed: frozenset[str]) -> bool:
    """The pod carries a constraint whose whenUnsatisfiable the plugin balances."""
    for c in pod.topology_spread_constraints:
        if c.when_unsatisfiable in allowed:
            return True
    return False


def _listed_domains(pods: list[Pod], values: Mapping[str, str | None],
                    domain_nodes: Mapping[str, list[Node]]) -> dict[str, list[Pod]]:
    """The constraint's domains (those of its nodes first, in node order, then those only its pods show, as
    they appear) with their pods, from the pods in listing order."""
    domains: dict[str, list[Pod]] = {value: [] for value in domain_nodes}
    for pod in pods:
        value = values.get(pod.node_name)
        if value is None:
            continue  # not on one of the nodes, or the node lacks the key
        # A pod on a node outside the inclusion policy still adds its domain, as upstream's map does.
        lst = domains.get(value)
        if lst is None:
            domains[value] = lst = []
        lst.append(pod)
    return domains


def _unordered_domains(pods: list[Pod], values: Mapping[str, str | None], domain_nodes: Mapping[str, list[Node]],
                       max_skew: int, order: Callable[[Pod], Any]) -> dict[str, list[Pod]] | None:
    """What `_listed_domains` makes of the pods in listing order, from the pods in any order; None when the
    domains are balanced (topologyIsBalanced), which their sizes decide before anything is sorted."""
    groups: dict[str, list[Pod]] = {}
    for pod in pods:
        value = values.get(pod.node_name)
        if value is not None:
            lst = groups.get(value)
            if lst is None:
                groups[value] = [pod]
            else:
                lst.append(pod)
    if not groups:
        return None  # every domain is empty, or there is none
    largest = max(len(lst) for lst in groups.values())
    # A domain of the nodes that no pod shows is empty.
    smallest = 0 if sum(1 for v in groups if v in domain_nodes) < len(domain_nodes) \
        else min(len(lst) for lst in groups.values())
    if largest - smallest <= max_skew:
        return None
    domains: dict[str, list[Pod]] = {}
    for value in domain_nodes:
        lst = groups.pop(value, None)
        if lst is None:
            domains[value] = []
        else:
            lst.sort(key=order)
            domains[value] = lst
    if groups:
        # Domains only pods on nodes outside the inclusion policy show: in the order of their first pod.
        for lst in groups.values():
            lst.sort(key=order)
        for value, lst in sorted(groups.items(), key=lambda kv: order(kv[1][0])):
            domains[value] = lst
    return domains


# ---------------------------------------------------------------- the listing walked from scratch


def constraints_from_scratch(cluster: ClusterState, nodes: list[Node], allowed: frozenset[str],
                             ok: Callable[[Pod], bool]) -> Iterator[tuple[SpreadConstraint, list[Pod]]]:
    """The listing upstream walks, made from the nodes' pods at every call: for each namespace with a carrier
    (in the order the walk meets its first one), its constraints with the pods each counts, in listing order.
    Used when the node list names a node twice, and by the tests as the reference of the indexed path."""
    for ns_pods in _pods_by_namespace(cluster, nodes, allowed):
        yield from _namespace_constraints(ns_pods, allowed, ok)


def _pods_by_namespace(cluster: ClusterState, nodes: list[Node], allowed: frozenset[str]) -> list[list[Pod]]:
    """ListPodsOnNodes (node order, each node's pods by name) grouped by namespace, before the pod filter,
    for the namespaces where some pod carries an allowed constraint: elsewhere there is nothing to balance."""
    raw: dict[str, list[tuple[int, str, Pod]]] = {}
    carriers: dict[str, None] = {}  # in order of first appearance
    for idx, node in enumerate(nodes):
        for pod in cluster.pods_on(node.name):
            meta = pod.meta
            ns = meta.namespace
            lst = raw.get(ns)
            if lst is None:
                raw[ns] = lst = []
            lst.append((idx, meta.name, pod))
            if pod.topology_spread_constraints and ns not in carriers and _carries(pod, allowed):
                carriers[ns] = None
    out = []
    for ns in carriers:
        entries = raw[ns]
        entries.sort()  # (node index, name) is unique in a namespace; nearly sorted already
        out.append([e[2] for e in entries])
    return out


def _namespace_constraints(ns_pods: list[Pod], allowed: frozenset[str], ok: Callable[[Pod], bool]) \
        -> list[tuple[SpreadConstraint, list[Pod]]]:
    """The namespace's distinct constraints, from the pods passing the pod filter, in upstream's order, each
    with the pods it counts (passing the filter, not terminating, matching its selector) in listing order.
    Only carriers and pods some carrier's selector matches go through the filter."""
    constraints: list[SpreadConstraint] = []
    seen: set[SpreadConstraint] = set()
    for pod in ns_pods:
        if not pod.topology_spread_constraints:
            continue
        mine = [tsc for when, tsc in _pod_constraints(pod) if when in allowed]
        if not mine or not ok(pod):
            continue
        for tsc in mine:
            if tsc not in seen:
                seen.add(tsc)
                constraints.append(tsc)
    index = _LabelIndex(ns_pods)
    out = []
    for tsc in constraints:
        selector = tsc.selector
        candidates, exact = index.candidates(selector)
        pods = [p for p in candidates
                if (exact or selector.matches(p.labels)) and p.meta.deletion_timestamp is None and ok(p)]
        out.append((tsc, pods))
    return out


def _pod_constraints(pod: Pod) -> list[tuple[str, SpreadConstraint]]:
    """The pod's constraints as the plugin applies them, with their whenUnsatisfiable. Memoised on the pod."""
    cached = pod.cache.get("desched_spread_constraints")
    if cached is None:
        cached = [(c.when_unsatisfiable, _interned(_new_constraint(c, pod))) for c in pod.topology_spread_constraints]
        pod.cache["desched_spread_constraints"] = cached
    return cached  # type: ignore[no-any-return]


# Equal constraints (every replica of a workload carries one) as one object, so that a cycle's lookups by
# constraint match by identity instead of comparing fields; kept while some pod's constraints hold it.
_CONSTRAINTS: weakref.WeakValueDictionary[tuple[Any, ...], SpreadConstraint] = weakref.WeakValueDictionary()


def _interned(tsc: SpreadConstraint) -> SpreadConstraint:
    key = (tsc.max_skew, tsc.topology_key, tsc.selector, tsc.inclusion)
    same = _CONSTRAINTS.get(key)
    if same is None:
        _CONSTRAINTS[key] = same = tsc
    return same


class _LabelIndex:
    """The pods of a namespace by label value, built per label key on first use, so that a constraint's
    pods are found without testing its selector against every pod of the namespace. Lists keep the
    listing order."""

    def __init__(self, pods: list[Pod]) -> None:
        self.pods = pods
        self.by_key: dict[str, dict[str, list[Pod]]] = {}

    def candidates(self, selector: LabelSelector) -> tuple[list[Pod], bool]:
        """A superset of the pods the selector matches (in listing order), and whether it is exact."""
        if selector.nothing:
            return [], True
        for r in selector.requirements:
            if r.operator == "In" and len(r.values) == 1:
                by_value = self.by_key.get(r.key)
                if by_value is None:
                    by_value = {}
                    key = r.key
                    for p in self.pods:
                        v = p.meta.labels.get(key)
                        if v is not None:
                            lst = by_value.get(v)
                            if lst is None:
                                by_value[v] = lst = []
                            lst.append(p)
                    self.by_key[r.key] = by_value
                return by_value.get(r.values[0], []), len(selector.requirements) == 1
        return self.pods, not selector.requirements


class _Domain:
    """One topology domain while balancing: its pods in sortDomains order (those still counted here) and
    how many pods were moved into it."""

    __slots__ = ("value", "pods", "extra", "_sorted")

    def __init__(self, value: str, pods: list[Pod]) -> None:
        self.value = value
        self.pods = pods
        self.extra = 0
        self._sorted = False

    def size(self) -> int:
        return len(self.pods) + self.extra

    def take(self, move: int, fits: Callable[[Pod], bool]) -> list[Pod]:
        """The last `move` pods after upstream's stable sort putting pods that fit a below-average domain
        last; they leave this domain. Only a domain pods leave needs its order, so it is sorted here."""
        if not self._sorted:
            self.pods = _sort_evict_order(self.pods)
            self._sorted = True
        pods = self.pods
        # A stable partition (not fitting, then fitting) taken from the end: walk back collecting fitting
        # pods; fall back to the last non-fitting ones when too few fit. Fit is only computed where needed.
        taken_fit: list[int] = []
        idx = len(pods) - 1
        while idx >= 0 and len(taken_fit) < move:
            if fits(pods[idx]):
                taken_fit.append(idx)
            idx -= 1
        taken = set(taken_fit)
        if len(taken_fit) < move:
            need = move - len(taken_fit)
            not_fit = [k for k in range(len(pods)) if k not in taken]
            chosen_not_fit = not_fit[len(not_fit) - need:]
            out = [pods[k] for k in chosen_not_fit] + [pods[k] for k in sorted(taken_fit)]
            taken.update(chosen_not_fit)
        else:
            out = [pods[k] for k in sorted(taken_fit)]
        self.pods = [p for k, p in enumerate(pods) if k not in taken]
        return out


class _FitsBelow:
    """PodFitsAnyOtherNode over the nodes of the below-average domains, memoised.

    NodeFit reads only the pod's requests, node selection, tolerations and required anti-affinity (and
    its name when it has anti-affinity), and the nodes are fixed for the call; so the first node found
    fitting a pod of one such shape serves every pod of that shape not running on it.
    """

    def __init__(self, cluster: Any, node_lists: list[list[Node]],
                 node_fit: Callable[[Pod, list[Node]], bool] | None) -> None:
        self.cluster = cluster
        self.node_lists = node_lists
        self._flat: list[Node] | None = None
        self.node_fit = node_fit  # the scheduler's own fit, when the profile's evictor asks for it
        self.by_pod: dict[int, bool] = {}
        self.fitting_node: dict[Any, str] = {}

    def __call__(self, pod: Pod) -> bool:
        v = self.by_pod.get(id(pod))
        if v is None:
            v = self._compute(pod)
            self.by_pod[id(pod)] = v
        return v

    def _compute(self, pod: Pod) -> bool:
        if self.node_fit is not None:
            if self._flat is None:
                self._flat = [n for lst in self.node_lists for n in lst]
            return self.node_fit(pod, self._flat)
        shape = _fit_shape(pod)
        known = self.fitting_node.get(shape)
        if known is not None and known != pod.node_name:
            return True
        for node in itertools.chain.from_iterable(self.node_lists):
            if node.name == pod.node_name:
                continue
            if nodeutil.pod_fits_node(self.cluster, pod, node)[0]:
                self.fitting_node.setdefault(shape, node.name)
                return True
        return False


def _tracked(resource: str) -> bool:
    return resource in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar_resource(resource)


def _fit_shape(pod: Pod) -> Any:
    shape = pod.cache.get("desched_fit_shape")
    if shape is None:
        aff = pod.affinity
        # The scheduler's integer requests (already computed for every assigned pod) stand for the exact
        # ones NodeFit compares, unless the pod requests a resource the scheduler does not track.
        if any(not _tracked(k) for c in itertools.chain(pod.containers, pod.init_containers) for k in c.requests) \
                or pod.overhead or pod.pod_requests:
            requests: Any = tuple(sorted(podutil.pod_request_quantities(pod).items()))
        else:
            requests = tuple(sorted(scheduler_request(pod).items()))
        anti = aff.pod_anti_affinity_required
        who = (pod.namespace, pod.name) if anti else None
        shape = (requests, tuple(sorted(pod.node_selector.items())), aff.node_required, pod.tolerations, anti, who)
        pod.cache["desched_fit_shape"] = shape
    return shape


# A pod as sortDomains compares it: (has a node selector or node affinity, priority or None, the pod).
_Keyed = tuple[bool, int | None, Pod]


def _evict_order_less(a: _Keyed, b: _Keyed) -> bool:
    """sortDomains' comparator on two evictable pods: pods with a node selector or node affinity first, then
    by priority ascending, pods without priority first; equal priorities compare "less" both ways, as
    upstream's comparator does (its order then follows Go's sort algorithm)."""
    sa, sb = a[0], b[0]
    if sa == sb:
        pa, pb = a[1], b[1]
        if pa is not None and pb is not None:
            return not pa > pb
        if pa is not None:
            return False
        return pb is not None
    return sa and not sb


def _sort_evict_order(pods: list[Pod]) -> list[Pod]:
    keyed: list[_Keyed] = [(_has_node_selection(p), p.priority, p) for p in pods]
    first = keyed[0][:2] if keyed else None
    if first is not None and first[1] is None and all(k[0] == first[0] and k[1] is None for k in keyed):
        return pods  # all equal and never "less": Go's sort leaves the order as it is
    go_sort_slice(keyed, _evict_order_less)
    return [k[2] for k in keyed]


def _has_node_selection(pod: Pod) -> bool:
    """has_node_selector_or_affinity, memoised on the pod (it reads the stored spec)."""
    v = pod.cache.get("desched_has_node_selection")
    if v is None:
        v = pod.cache["desched_has_node_selection"] = has_node_selector_or_affinity(pod)
    return v  # type: ignore[no-any-return]


def _sort_domains(domains: dict[str, list[Pod]]) -> list[_Domain]:
    """sortDomains: domains by ascending size (Go's unstable sort over the domains in discovery order)."""
    out = [_Domain(value, pods) for value, pods in domains.items()]
    go_sort_slice(out, lambda a, b: len(a.pods) < len(b.pods))
    return out


def _is_balanced(domains: dict[str, list[Pod]], max_skew: int) -> bool:
    """topologyIsBalanced: the largest and smallest domains differ by at most maxSkew."""
    if not domains:
        return True
    sizes = [len(p) for p in domains.values()]
    return max(sizes) - min(sizes) <= max_skew


def _node_domains(nodes: list[Node], tsc: SpreadConstraint) -> dict[str, list[Node]]:
    """The domains the constraint's nodes form, each with its eligible nodes (filterEligibleNodes: nodes
    passing the inclusion policies), in node order."""
    inclusion = tsc.inclusion
    key = tsc.topology_key
    everything = inclusion.everything
    out: dict[str, list[Node]] = {}
    for n in nodes:
        v = n.labels.get(key)
        if v is not None and (everything or inclusion.matches(n)):
            out.setdefault(v, []).append(n)
    return out


def _new_constraint(c: Any, pod: Pod) -> SpreadConstraint:
    """newTopologySpreadConstraint: the selector (with matchLabelKeys merged) and the inclusion policies."""
    selector: LabelSelector = c.label_selector
    if c.match_label_keys and pod.labels:
        extra = [Requirement(k, "In", (pod.labels[k],)) for k in c.match_label_keys if k in pod.labels]
        if extra and not selector.nothing:
            selector = LabelSelector(tuple(sorted(selector.requirements + tuple(extra), key=lambda r: r.key)))
    affinity_policy = c.node_affinity_policy or HONOR
    taints_policy = c.node_taints_policy or IGNORE
    if taints_policy == IGNORE and (affinity_policy == IGNORE or (
            not pod.node_selector and pod.affinity.node_required is None)):
        return SpreadConstraint(c.max_skew, c.topology_key, selector, _EVERY_NODE)
    if affinity_policy == HONOR:
        node_selector: tuple[tuple[str, str], ...] | None = tuple(sorted(pod.node_selector.items()))
        node_required = pod.affinity.node_required
    else:
        node_selector, node_required = None, None
    tolerations = tuple(pod.tolerations) if taints_policy == HONOR else None
    return SpreadConstraint(c.max_skew, c.topology_key, selector, Inclusion(node_selector, node_required, tolerations))
