"""PodTopologySpread: spread matching pods evenly over topology domains.

Constraints come from the pod, or — for a pod without any — from the args' defaults (`defaultingType:
List`) or the system defaults (`System`: hostname maxSkew 3 and zone maxSkew 5, ScheduleAnyway), which
apply only to pods that a Service, ReplicationController, ReplicaSet or StatefulSet selects (their
selectors, merged, become the constraints' selector). matchLabelKeys are merged into the selector.

Filter (DoNotSchedule constraints): counting only nodes that carry every constraint's topology key and
pass the constraint's nodeAffinityPolicy (Honor by default) and nodeTaintsPolicy (Ignore by default), a
node passes when `matching pods in its domain + 1 if the pod matches itself - global minimum <= maxSkew`;
the global minimum is 0 while fewer than minDomains domains exist. Score (ScheduleAnyway constraints):
`count * log(topologySize + 2) + maxSkew - 1` per constraint, rounded, then reversed so the emptiest
domain scores 100.

Counts per domain come from the shared ClusterIndex (topology codes per node row, pod counts per row),
so both forms — per node and vectorised over rows — read the same numbers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubesched.api import fields
from kubesched.api.objects import Pod, TopologySpreadConstraint
from kubesched.api.selectors import NOTHING, LabelSelector, Requirement
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.config.plugin_args import PluginArgs
from kubesched.errors import InputError
from kubesched.scheduler.framework import (
    MAX_NODE_SCORE,
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    FilterPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
    ShapeCache,
    Status,
    error,
    skip,
)
from kubesched.scheduler.plugins.gomath import go_round, go_round_nonnegative
from kubesched.scheduler.plugins.topology_index import (
    HOSTNAME_LABEL,
    ZONE_LABEL,
    ClusterIndex,
    PodMatcher,
    Topology,
    index_for,
    required_node_affinity_matches,
    tolerates_node_taints,
)

PRE_FILTER_KEY = "PreFilterPodTopologySpread"
PRE_SCORE_KEY = "PreScorePodTopologySpread"
# The pod's part of the memo key of what the default constraints give (see `constraints`).
_DEFAULTS_POD_KEY = "pod_topology_spread_defaults_of"
ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"
MAX_INT32 = 2**31 - 1

SYSTEM_DEFAULT_CONSTRAINTS = (
    TopologySpreadConstraint(3, HOSTNAME_LABEL, SCHEDULE_ANYWAY, NOTHING, None, None, None, ()),
    TopologySpreadConstraint(5, ZONE_LABEL, SCHEDULE_ANYWAY, NOTHING, None, None, None, ()),
)
CONSTRAINT_FIELDS = {"maxSkew", "topologyKey", "whenUnsatisfiable", "labelSelector", "minDomains",
                     "nodeAffinityPolicy", "nodeTaintsPolicy", "matchLabelKeys"}
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True, slots=True)
class Constraint:
    """topologySpreadConstraint: a constraint with its selector parsed and its defaults applied."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int
    node_affinity_honor: bool
    node_taints_honor: bool


def filter_constraints(constraints: tuple[TopologySpreadConstraint, ...] | list[TopologySpreadConstraint],
                       pod_labels: dict[str, str], action: str) -> tuple[Constraint, ...]:
    """filterTopologySpreadConstraints: the constraints with `action`, matchLabelKeys merged in."""
    out = []
    for c in constraints:
        if c.when_unsatisfiable != action:
            continue
        sel = c.label_selector
        if c.match_label_keys:
            match = {k: pod_labels[k] for k in c.match_label_keys if k in pod_labels}
            if match:
                sel = sel.with_requirements(Requirement(k, "In", (v,)) for k, v in match.items())
        out.append(Constraint(c.max_skew, c.topology_key, sel, 1 if c.min_domains is None else c.min_domains,
                              c.node_affinity_policy != "Ignore", c.node_taints_policy == "Honor"))
    return tuple(out)


# ---------------------------------------------------------------- cycle state


@dataclass
class PreFilterState:
    """Per constraint: matching pods per domain, which domains exist (have an eligible node), their minimum."""

    constraints: tuple[Constraint, ...]
    topologies: tuple[Topology, ...]
    counts: list[np.ndarray]
    present: list[np.ndarray]
    min_match: list[int]
    self_match: tuple[bool, ...]

    # minMatchNum per constraint, cached for the per-node Filter (None: recompute).
    global_mins: list[int] | None = None

    def clone(self) -> PreFilterState:
        return PreFilterState(self.constraints, self.topologies, [c.copy() for c in self.counts],
                              [p.copy() for p in self.present], list(self.min_match), self.self_match)

    def global_min(self, i: int) -> int:
        """minMatchNum: 0 while fewer than minDomains domains exist."""
        if self.global_mins is None:
            self.global_mins = [0 if int(p.sum()) < c.min_domains else m
                                for c, p, m in zip(self.constraints, self.present, self.min_match, strict=True)]
        return self.global_mins[i]

    def recompute_min(self, i: int) -> None:
        p = self.present[i]
        self.min_match[i] = int(self.counts[i][p].min()) if p.any() else MAX_INT32
        self.global_mins = None


@dataclass
class PreScoreState:
    constraints: tuple[Constraint, ...]
    topologies: tuple[Topology, ...]
    # Per constraint: pods per domain id (hostname constraints count per node at Score: None).
    domain_counts: list[np.ndarray | None]
    # Domain id per table row: the code, or the id of "" for rows without the label (system defaulting
    # keeps such nodes, and upstream reads their value as "").
    domain_ids: list[np.ndarray]
    weights: list[float]
    ignored_rows: frozenset[int]
    matchers: tuple[PodMatcher | None, ...]
    # The rows PreScore scored and, per constraint, their domain ids (None: not gathered): Score over the
    # same rows reads them instead of gathering them again.
    scored_rows: np.ndarray | None = None
    row_domains: list[np.ndarray | None] = field(default_factory=list)

    def clone(self) -> PreScoreState:
        return self


# ---------------------------------------------------------------- the plugin


@dataclass(frozen=True, slots=True)
class PodTopologySpreadArgs(PluginArgs):
    """PodTopologySpreadArgs (v1 default: System defaulting) with ValidatePodTopologySpreadArgs."""

    default_constraints: tuple[TopologySpreadConstraint, ...] = ()
    defaulting_type: str = SYSTEM_DEFAULTING

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> PodTopologySpreadArgs:
        a = fields.Fields(raw, field, allowed={"defaultConstraints", "defaultingType"})
        defaulting = a.string("defaultingType") or SYSTEM_DEFAULTING
        constraints = a.sequence("defaultConstraints")
        if defaulting not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
            raise a.error("defaultingType", f'Unsupported value: "{defaulting}": supported values: "List", "System"')
        if defaulting == SYSTEM_DEFAULTING and constraints:
            raise a.error("defaultingType", 'Invalid value: "System": when .defaultConstraints are not empty')
        return cls(tuple(_parse_default_constraints(constraints, a.path("defaultConstraints"))), defaulting)


class PodTopologySpread(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, PreFilterExtensions):
    # Raw scores are >= 0; NormalizeScore maps [min, max] onto [0, 100] and ignored nodes to 0.
    scores_in_range = True
    name = "PodTopologySpread"
    Args = PodTopologySpreadArgs
    args: PodTopologySpreadArgs

    def __init__(self, args: PodTopologySpreadArgs, handle: Any) -> None:
        super().__init__(args, handle)
        self.system_defaulted = args.defaulting_type == SYSTEM_DEFAULTING
        # System defaulting uses the built-in constraints (buildDefaultConstraints).
        self.default_constraints = SYSTEM_DEFAULT_CONSTRAINTS if self.system_defaulted else args.default_constraints
        self._node_masks = ShapeCache()
        self._default_memo: dict[Any, tuple[Constraint, ...]] = {}
        self._matchers: dict[tuple[str, int], tuple[Constraint, PodMatcher]] = {}

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", ("add", "update", "delete")), ClusterEvent("Node", ("add", "update", "delete"))]

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self

    # ------------------------------------------------------------ constraints

    def constraints(self, pod: Pod, action: str, cluster: ClusterState) -> tuple[Constraint, ...]:
        """getConstraints: the pod's own constraints with `action`, else the defaults with the pod's selector."""
        if pod.topology_spread_constraints:
            key = ("pod_topology_spread_constraints", action)
            cached = pod.cache.get(key)
            if cached is None:
                cached = pod.cache[key] = filter_constraints(pod.topology_spread_constraints, pod.labels, action)
            return cached  # type: ignore[no-any-return]
        if not self.default_constraints:
            return ()
        idx = index_for(cluster)
        # What the defaults give depends on the pod's labels, namespace and owner and on the workloads:
        # pods of one workload share it (kept per index and workload generation, like default_selector).
        # The pod's part of the key, once per pod object (namespace, labels and owners never change in the
        # copies that share a pod's memo).
        own = pod.cache.get(_DEFAULTS_POD_KEY)
        if own is None:
            owner = pod.controller_ref()
            own = pod.cache[_DEFAULTS_POD_KEY] = (
                pod.namespace, frozenset(pod.labels.items()),
                None if owner is None else (owner.kind, owner.api_version, owner.name))
        memo_key = (action, id(idx), idx.workload_generation, own)
        cached = self._default_memo.get(memo_key)
        if cached is not None:
            return cached
        defaults = filter_constraints(self.default_constraints, pod.labels, action)
        out: tuple[Constraint, ...] = ()
        if defaults:
            selector = idx.default_selector(pod)
            if not selector.empty:
                out = tuple(Constraint(c.max_skew, c.topology_key, selector, c.min_domains, c.node_affinity_honor,
                                       c.node_taints_honor) for c in defaults)
        if len(self._default_memo) > 1024:
            self._default_memo.clear()
        self._default_memo[memo_key] = out
        return out

    def _eligible_rows(self, cluster: ClusterState, pod: Pod, c: Constraint) -> np.ndarray | None:
        """Rows passing the constraint's node inclusion policies (None: every row)."""
        mask: np.ndarray | None = None
        if c.node_affinity_honor and (pod.node_selector or pod.affinity.node_required is not None):
            key = (id(cluster), "affinity", tuple(sorted(pod.node_selector.items())), pod.affinity.node_required)
            mask = self._policy_mask(cluster, key, lambda info: required_node_affinity_matches(pod, info.node))
        if c.node_taints_honor:
            key2 = (id(cluster), "taints", pod.tolerations)
            tmask = self._policy_mask(cluster, key2, lambda info: tolerates_node_taints(pod, info.node))
            if tmask is not None:
                mask = tmask if mask is None else mask & tmask
        return mask

    def _policy_mask(self, cluster: ClusterState, key: Any, passes: Any) -> np.ndarray | None:
        """A node-static mask memoised per pod shape (rows of changed nodes recomputed); None when every
        node passes (no filtering needed)."""
        def compute() -> np.ndarray:
            return np.fromiter((passes(i) for i in cluster.node_infos), dtype=bool, count=cluster.num_nodes)
        e = self._node_masks.entry(cluster, key, compute, passes)
        if e.every is None:
            e.every = bool(e.value.all())
        return None if e.every else e.value  # type: ignore[no-any-return]

    def _matcher(self, pod: Pod, c: Constraint) -> PodMatcher | None:
        """countPodsMatchSelector's pods: same namespace, selector matches, not terminating; an empty
        selector counts nothing."""
        if c.selector.empty or c.selector.nothing:
            return None
        # One matcher per namespace and constraint object (the pods of a workload share their constraints):
        # building one hashes its selector, and the index finds the same object again by identity.
        key = (pod.namespace, id(c))
        hit = self._matchers.get(key)
        if hit is not None and hit[0] is c:
            return hit[1]
        m = PodMatcher(((frozenset((pod.namespace,)), c.selector),), skip_terminating=True)
        if len(self._matchers) > 4096:
            self._matchers.clear()
        self._matchers[key] = (c, m)
        return m

    @staticmethod
    def _row_counts(idx: ClusterIndex, matcher: PodMatcher | None) -> np.ndarray:
        return idx.counts(matcher) if matcher is not None else np.zeros(idx.cluster.num_nodes, dtype=np.int64)

    # ------------------------------------------------------------ PreFilter

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> tuple[PreFilterResult | None, Status]:
        constraints = self.constraints(pod, DO_NOT_SCHEDULE, cluster)
        if not constraints:
            return None, skip()
        idx = index_for(cluster)
        topologies = tuple(idx.topology(c.topology_key) for c in constraints)
        has_all = _has_all_keys(topologies, cluster.num_nodes)
        counts, present, mins = [], [], []
        for c, topo in zip(constraints, topologies, strict=True):
            elig = has_all
            policy = self._eligible_rows(cluster, pod, c)
            if policy is not None:
                elig = policy if elig is None else elig & policy
            m = self._matcher(pod, c)
            if m is None:
                cnt = np.zeros(topo.size, dtype=np.int64)
            elif elig is None:
                cnt = idx.domain_counts(m, topo).copy()  # AddPod/RemovePod change the state's copy
            else:
                cnt = topo.domain_sum(idx.counts(m), elig)
            pres = topo.domains_of(elig)
            counts.append(cnt)
            present.append(pres)
            mins.append(int(cnt[pres].min()) if pres.any() else MAX_INT32)
        s = PreFilterState(constraints, topologies, counts, present, mins,
                           tuple(c.selector.matches(pod.labels) for c in constraints))
        state.write(PRE_FILTER_KEY, s)
        return None, SUCCESS

    # ------------------------------------------------------------ AddPod / RemovePod

    def add_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_add: Pod, node_info: NodeInfo) -> Status:
        return self._update_with_pod(state, pod_to_add, pod_to_schedule, node_info, 1)

    def remove_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_remove: Pod, node_info: NodeInfo) -> Status:
        return self._update_with_pod(state, pod_to_remove, pod_to_schedule, node_info, -1)

    def _update_with_pod(self, state: CycleState, updated: Pod, preemptor: Pod, node_info: NodeInfo,
                         delta: int) -> Status:
        s = state.read(PRE_FILTER_KEY)
        if s is None:
            return error(f'reading "{PRE_FILTER_KEY}" from cycleState: not found')
        if updated.namespace != preemptor.namespace:
            return SUCCESS
        node = node_info.node
        labels = node.labels
        if any(c.topology_key not in labels for c in s.constraints):
            return SUCCESS
        for i, c in enumerate(s.constraints):
            if not c.selector.matches(updated.labels):
                continue
            if c.node_affinity_honor and not required_node_affinity_matches(preemptor, node):
                continue
            if c.node_taints_honor and not tolerates_node_taints(preemptor, node):
                continue
            code = s.topologies[i].code_of(labels)
            if code is None:
                continue
            s.counts[i][code] += delta
            s.present[i][code] = True
            s.recompute_min(i)
        return SUCCESS

    # ------------------------------------------------------------ Filter

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        s = state.read(PRE_FILTER_KEY)
        if s is None:
            return error(f'reading "{PRE_FILTER_KEY}" from cycleState: not found')
        labels = node_info.node.labels
        for i, c in enumerate(s.constraints):
            if c.topology_key not in labels:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_NODE_LABEL_NOT_MATCH])
            code = s.topologies[i].code_of(labels)
            match_num = int(s.counts[i][code]) if code is not None else 0
            if match_num + s.self_match[i] - s.global_min(i) > c.max_skew:
                return Status(Code.UNSCHEDULABLE, [ERR_REASON_CONSTRAINTS_NOT_MATCH])
        return SUCCESS

    def filter_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray | None:
        s = state.read(PRE_FILTER_KEY)
        if s is None or any(len(t.codes) != cluster.num_nodes for t in s.topologies):
            return None
        ok = np.ones(len(rows), dtype=bool)
        for i, c in enumerate(s.constraints):
            topo = s.topologies[i]
            ok &= topo.codes[rows] >= 0
            match_num = topo.per_row(s.counts[i], rows)
            ok &= match_num + int(s.self_match[i]) - s.global_min(i) <= c.max_skew
        return ok

    # ------------------------------------------------------------ PreScore / Score

    def pre_score(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> Status:
        if cluster.num_nodes == 0:
            return skip()
        constraints = self.constraints(pod, SCHEDULE_ANYWAY, cluster)
        if not constraints:
            return skip()
        idx = index_for(cluster)
        # Only non-system-default rules require nodes to have every topology key: nodes without a zone
        # label still get hostname spreading under the system defaults.
        require_all = bool(pod.topology_spread_constraints) or not self.system_defaulted
        topologies = tuple(idx.topology(c.topology_key) for c in constraints)
        has_all = _has_all_keys(topologies, cluster.num_nodes)  # None: every node has every key
        rows = np.asarray(rows, dtype=np.int64)
        if require_all and has_all is not None:
            ignored = rows[~has_all[rows]]
            scored = rows[has_all[rows]]
        else:
            ignored = rows[:0]
            scored = rows
        domain_counts: list[np.ndarray | None] = []
        domain_ids: list[np.ndarray] = []
        row_domains: list[np.ndarray | None] = []
        weights: list[float] = []
        matchers = tuple(self._matcher(pod, c) for c in constraints)
        for c, topo, m in zip(constraints, topologies, matchers, strict=True):
            ids = topo.ids
            domain_ids.append(ids)
            if c.topology_key == HOSTNAME_LABEL:
                # Per-node counts are read at Score; the topology size is the number of scored nodes.
                domain_counts.append(None)
                row_domains.append(None)
                weights.append(math.log(len(rows) - len(ignored) + 2))
                continue
            # Domains of the scored nodes: only their pods are counted.
            scored_domains = ids[scored]
            row_domains.append(scored_domains)
            candidate = np.zeros(topo.size + 1, dtype=bool)
            candidate[scored_domains] = True
            weights.append(math.log(int(np.count_nonzero(candidate)) + 2))
            policy = self._eligible_rows(cluster, pod, c)
            cnt = np.zeros(topo.size + 1, dtype=np.int64)
            if m is None:
                pass  # a selector that matches nothing: no pods counted
            elif topo.complete and policy is None and (has_all is None or not require_all):
                # Every node of a candidate domain is eligible: the index's per-domain totals, kept by events
                # (the per-row sum below, without a pass over every node).
                np.copyto(cnt[:-1], idx.domain_counts(m, topo), where=candidate[:-1])
            else:
                elig = candidate[ids]
                if require_all and has_all is not None:
                    elig &= has_all
                if policy is not None:
                    elig &= policy
                sel = ids[elig]
                if len(sel):
                    cnt = np.bincount(sel, weights=idx.counts(m)[elig], minlength=topo.size + 1).round().astype(np.int64)
            domain_counts.append(cnt)
        state.write(PRE_SCORE_KEY, PreScoreState(constraints, topologies, domain_counts, domain_ids, weights,
                                                 frozenset(ignored.tolist()) if len(ignored) else frozenset(),
                                                 matchers, scored, row_domains))
        return SUCCESS

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        s = state.read(PRE_SCORE_KEY)
        if s is None:
            return 0, error(f'reading "{PRE_SCORE_KEY}" from cycleState: not found')
        if node_info.index in s.ignored_rows:
            return 0, SUCCESS
        labels = node_info.node.labels
        total = 0.0
        for i, c in enumerate(s.constraints):
            if c.topology_key not in labels:
                continue
            dc = s.domain_counts[i]
            if dc is None:
                cnt = _count_pods_match(node_info, c.selector, pod.namespace)
            else:
                code = s.topologies[i].code_of(labels)
                cnt = int(dc[code]) if code is not None else 0
            total += cnt * s.weights[i] + float(c.max_skew - 1)
        return go_round(total), SUCCESS

    def score_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray | None:
        s = state.read(PRE_SCORE_KEY)
        if s is None or any(len(t.codes) != cluster.num_nodes for t in s.topologies):
            return None
        rows = np.asarray(rows, dtype=np.int64)
        idx = index_for(cluster)
        same_rows = s.scored_rows is rows
        total: np.ndarray | None = None
        for i, c in enumerate(s.constraints):
            topo = s.topologies[i]
            dc = s.domain_counts[i]
            skew = float(c.max_skew - 1)
            if dc is None:
                # int64 * float: NumPy converts the counts to float64 first (as astype would), in one pass.
                term = self._row_counts(idx, s.matchers[i])[rows] * s.weights[i]
                term += skew
            else:
                # The term of each domain once, then gathered per row: the same float operations on the same
                # numbers as per row.
                domains = s.row_domains[i] if same_rows else None
                if domains is None:
                    domains = s.domain_ids[i][rows]
                term = (dc.astype(np.float64) * s.weights[i] + skew)[domains]
            # Same float operations in the same order as the per-node form (nodes without the key add
            # nothing); the first term is the sum so far (0.0 + x is x: no term is -0.0). Every term is a new
            # array, so the sum is kept in the first.
            if total is None:
                total = term if topo.complete else np.where(topo.codes[rows] >= 0, term, 0.0)
            elif topo.complete:
                total += term
            else:
                total = np.where(topo.codes[rows] >= 0, total + term, total)
        if total is None:
            total = np.zeros(len(rows), dtype=np.float64)
        # Counts, log weights and maxSkew - 1 are all >= 0.
        out = go_round_nonnegative(total, out=total).astype(np.int64)
        if s.ignored_rows:
            out[np.isin(rows, np.fromiter(s.ignored_rows, dtype=np.int64))] = 0
        return out

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray, rows: np.ndarray) -> Status | None:
        s = state.read(PRE_SCORE_KEY)
        if s is None:
            return error(f'reading "{PRE_SCORE_KEY}" from cycleState: not found')
        if not len(scores):
            return SUCCESS
        ignored: np.ndarray | None = None
        kept = scores
        if s.ignored_rows:
            ignored = np.isin(np.asarray(rows, dtype=np.int64), np.fromiter(s.ignored_rows, dtype=np.int64))
            kept = scores[~ignored]
            if not len(kept):
                scores[:] = 0
                return SUCCESS
        min_score = int(kept.min())
        max_score = max(int(kept.max()), 0)
        if max_score == 0:
            scores[:] = MAX_NODE_SCORE
        else:
            # Non-negative operands: Go's truncating division equals floor division here (in place: the
            # scores are the framework's int64 array).
            np.subtract(max_score + min_score, scores, out=scores)
            scores *= MAX_NODE_SCORE
            scores //= max_score
        if ignored is not None:
            scores[ignored] = 0
        return SUCCESS


def _has_all_keys(topologies: tuple[Topology, ...], n: int) -> np.ndarray | None:
    """Rows whose node has every topology key (None: every row, the common case)."""
    if all(t.complete for t in topologies):
        return None
    mask = np.ones(n, dtype=bool)
    for t in topologies:
        mask &= t.codes >= 0
    return mask


def _count_pods_match(node_info: NodeInfo, selector: LabelSelector, namespace: str) -> int:
    """countPodsMatchSelector over one node's pods."""
    if selector.empty or selector.nothing:
        return 0
    n = 0
    for p in node_info.pods.values():
        if p.is_terminating or p.namespace != namespace:
            continue
        if selector.matches(p.labels):
            n += 1
    return n


# ---------------------------------------------------------------- args


def _valid_label_name(key: str) -> str | None:
    """metav1validation.ValidateLabelName: an optional DNS-subdomain prefix and a name of at most 63 characters."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name or len(name) > 63 or not _LABEL_NAME.match(name):
        return ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                "with an alphanumeric character (at most 63 characters)")
    return None


def _parse_default_constraints(raw: list[Any], field: str) -> list[TopologySpreadConstraint]:
    """ValidatePodTopologySpreadArgs over defaultConstraints, then the constraints."""
    out: list[TopologySpreadConstraint] = []
    seen: set[tuple[str, str]] = set()
    for i, c in enumerate(raw):
        f = fields.join(field, i)
        if not isinstance(c, dict):
            raise InputError("expected a topology spread constraint object", field=f)
        for k in c:
            if k not in CONSTRAINT_FIELDS:
                raise InputError(f"unknown field {k!r}; expected one of {', '.join(sorted(CONSTRAINT_FIELDS))}",
                                 field=f"{f}.{k}")
        skew = c.get("maxSkew")
        if isinstance(skew, bool) or not isinstance(skew, int) or skew <= 0:
            raise InputError(f"Invalid value: {skew!r}: not in valid range (0, inf)", field=f"{f}.maxSkew")
        key = c.get("topologyKey")
        if not isinstance(key, str) or not key:
            raise InputError("Required value: can not be empty", field=f"{f}.topologyKey")
        problem = _valid_label_name(key)
        if problem:
            raise InputError(f"Invalid value: {key!r}: {problem}", field=f"{f}.topologyKey")
        wu = c.get("whenUnsatisfiable")
        if not wu:
            raise InputError("Required value: can not be empty", field=f"{f}.whenUnsatisfiable")
        if wu not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise InputError(f'Unsupported value: "{wu}": supported values: "DoNotSchedule", "ScheduleAnyway"',
                             field=f"{f}.whenUnsatisfiable")
        if c.get("labelSelector") is not None:
            raise InputError("Forbidden: constraint must not define a selector, as they deduced for each pod",
                             field=f"{f}.labelSelector")
        if (key, wu) in seen:
            raise InputError(f'Duplicate value: "{{{key}, {wu}}}"', field=f)
        seen.add((key, wu))
        md = c.get("minDomains")
        if md is not None and (isinstance(md, bool) or not isinstance(md, int) or md <= 0):
            raise InputError(f"Invalid value: {md!r}: must be greater than 0", field=f"{f}.minDomains")
        policies: list[str | None] = []
        for pol in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            v = c.get(pol)
            if v not in (None, "Honor", "Ignore"):
                raise InputError(f'Unsupported value: "{v}": supported values: "Honor", "Ignore"', field=f"{f}.{pol}")
            policies.append(v)
        mlk = c.get("matchLabelKeys") or []
        if not isinstance(mlk, list) or not all(isinstance(k, str) for k in mlk):
            raise InputError("expected a list of label keys", field=f"{f}.matchLabelKeys")
        out.append(TopologySpreadConstraint(skew, key, wu, NOTHING, md, policies[0], policies[1], tuple(mlk)))
    return out
