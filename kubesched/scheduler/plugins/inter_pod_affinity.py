"""InterPodAffinity: required and preferred pod affinity and anti-affinity, the pod's own and existing pods'.

PreFilter counts, per topology domain: existing pods whose required anti-affinity terms match the
incoming pod; existing pods matching all of the incoming pod's required affinity terms; existing pods
matching each of its required anti-affinity terms. Filter then rejects a node whose domain lacks an
affinity match (UnschedulableAndUnresolvable — unless no pod matches anywhere and the pod matches its
own terms, so the first pod of a self-affine group can start), holds an anti-affinity match
(Unschedulable), or holds an existing pod whose anti-affinity rejects the pod (Unschedulable).

Score sums, per domain, the weights of the incoming pod's preferred terms matched by existing pods, of
existing pods' preferred terms (unless ignorePreferredTermsOfExistingPods and the pod has none) and of
existing pods' required affinity terms (hardPodAffinityWeight) matched by the incoming pod, anti-affinity
counting negative; NormalizeScore maps min..max to 0..100.

The incoming pod's namespaceSelector is unrolled into namespaces from ClusterState.namespaces; existing
pods' selectors are matched against the incoming pod's Namespace labels. Counts per domain come from the
shared ClusterIndex, so a cycle costs a few bincounts over node rows; with no affinity anywhere the plugin
Skips at PreFilter and PreScore without touching any pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubesched.api import fields
from kubesched.api.objects import Pod
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.config.plugin_args import PluginArgs
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
    Status,
    error,
    skip,
)
from kubesched.scheduler.plugins.topology_index import (
    NO_LABELS,
    PREFERRED_AFFINITY,
    PREFERRED_ANTI_AFFINITY,
    REQUIRED_AFFINITY,
    REQUIRED_ANTI_AFFINITY,
    AffinityTerm,
    ClusterIndex,
    PodMatcher,
    Topology,
    index_for,
    merge_namespaces,
    pod_terms,
)

PRE_FILTER_KEY = "PreFilterInterPodAffinity"
PRE_SCORE_KEY = "PreScoreInterPodAffinity"
ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"
MIN_HARD_POD_AFFINITY_WEIGHT = 0
MAX_HARD_POD_AFFINITY_WEIGHT = 100


def _matcher(terms: tuple[AffinityTerm, ...]) -> PodMatcher:
    """Existing pods matching every one of the incoming pod's (namespace-merged) terms."""
    return PodMatcher(tuple((t.namespace_scope(), t.selector) for t in terms))


def _pods_match_all(terms: tuple[AffinityTerm, ...], pod: Pod) -> bool:
    """podMatchesAllAffinityTerms: merged terms need no namespace labels."""
    return bool(terms) and all(t.matches(pod, NO_LABELS) for t in terms)


class _DomainCounts:
    """topologyToMatchedTermCount: (topology key, value) -> count, as one array per key over domain codes."""

    __slots__ = ("idx", "by_key", "_positive", "_empty")

    def __init__(self, idx: ClusterIndex) -> None:
        self.idx = idx
        self.by_key: dict[str, tuple[Topology, np.ndarray]] = {}
        # Derived answers the per-node Filter asks on every node, dropped on any change.
        self._positive: list[str] | None = None
        self._empty: bool | None = None

    def clone(self) -> _DomainCounts:
        out = _DomainCounts(self.idx)
        out.by_key = {k: (t, a.copy()) for k, (t, a) in self.by_key.items()}
        return out

    def add(self, topo: Topology, per_domain: np.ndarray) -> None:
        self._positive = self._empty = None
        cur = self.by_key.get(topo.key)
        if cur is None:
            self.by_key[topo.key] = (topo, per_domain.astype(np.int64, copy=True))
        else:
            cur[1][:] += per_domain

    def update(self, key: str, labels: Mapping[str, str], delta: int) -> None:
        self._positive = self._empty = None
        cur = self.by_key.get(key)
        if cur is None:
            topo = self.idx.topology(key)
            cur = self.by_key[key] = (topo, np.zeros(topo.size, dtype=np.int64))
        code = cur[0].code_of(labels)
        if code is not None:
            cur[1][code] += delta

    def empty(self) -> bool:
        """len(map) == 0: upstream deletes pairs whose count drops to zero."""
        if self._empty is None:
            self._empty = not any(a.any() for _, a in self.by_key.values())
        return self._empty

    def positive_keys(self) -> list[str]:
        """Topology keys with at least one domain whose count is positive."""
        if self._positive is None:
            self._positive = [k for k, (_, a) in self.by_key.items() if (a > 0).any()]
        return self._positive

    def has_positive(self, key: str, labels: Mapping[str, str]) -> bool:
        """count[(key, labels[key])] > 0."""
        cur = self.by_key.get(key)
        if cur is None:
            return False
        code = cur[0].code_of(labels)
        return code is not None and bool(cur[1][code] > 0)

    def fresh(self, n: int) -> bool:
        return all(len(t.codes) == n for t, _ in self.by_key.values())


@dataclass
class PreFilterState:
    pod: Pod
    required_affinity: tuple[AffinityTerm, ...]
    required_anti_affinity: tuple[AffinityTerm, ...]
    namespace_labels: Mapping[str, str]
    existing_anti_affinity: _DomainCounts
    affinity: _DomainCounts
    anti_affinity: _DomainCounts

    def clone(self) -> PreFilterState:
        return PreFilterState(self.pod, self.required_affinity, self.required_anti_affinity, self.namespace_labels,
                              self.existing_anti_affinity.clone(), self.affinity.clone(), self.anti_affinity.clone())

    def update_with_pod(self, updated: Pod, labels: Mapping[str, str], delta: int) -> None:
        """preFilterState.updateWithPod: count (or uncount) one pod on a node with `labels`."""
        for t in pod_terms(updated).required_anti_affinity:
            if t.matches(self.pod, self.namespace_labels) and t.topology_key in labels:
                self.existing_anti_affinity.update(t.topology_key, labels, delta)
        if _pods_match_all(self.required_affinity, updated):
            for t in self.required_affinity:
                if t.topology_key in labels:
                    self.affinity.update(t.topology_key, labels, delta)
        for t in self.required_anti_affinity:
            if t.matches(updated, NO_LABELS) and t.topology_key in labels:
                self.anti_affinity.update(t.topology_key, labels, delta)


@dataclass
class PreScoreState:
    # topologyScore: per topology key, the score of each domain.
    scores: dict[str, tuple[Topology, np.ndarray]]

    def clone(self) -> PreScoreState:
        return self


@dataclass(frozen=True, slots=True)
class InterPodAffinityArgs(PluginArgs):
    """InterPodAffinityArgs with v1 defaults and ValidateInterPodAffinityArgs (weight in [0, 100])."""

    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> InterPodAffinityArgs:
        a = fields.Fields(raw, field, allowed={"hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"})
        w = a.integer("hardPodAffinityWeight", 1)
        if not MIN_HARD_POD_AFFINITY_WEIGHT <= w <= MAX_HARD_POD_AFFINITY_WEIGHT:
            raise a.error("hardPodAffinityWeight", f"Invalid value: {w}: not in valid range "
                          f"[{MIN_HARD_POD_AFFINITY_WEIGHT}, {MAX_HARD_POD_AFFINITY_WEIGHT}]")
        return cls(w, a.boolean("ignorePreferredTermsOfExistingPods"))


class InterPodAffinity(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, PreFilterExtensions):
    name = "InterPodAffinity"
    Args = InterPodAffinityArgs
    args: InterPodAffinityArgs

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", ("add", "update", "delete")), ClusterEvent("Node", ("add", "update"))]

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self

    # ------------------------------------------------------------ PreFilter

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> tuple[PreFilterResult | None, Status]:
        terms = pod_terms(pod)
        if not terms.required_affinity and not terms.required_anti_affinity \
                and not cluster.assigned_with_required_anti_affinity:
            return None, skip()
        idx = index_for(cluster)
        req_aff = tuple(merge_namespaces(t, cluster) for t in terms.required_affinity)
        req_anti = tuple(merge_namespaces(t, cluster) for t in terms.required_anti_affinity)
        ns_labels = cluster.namespace_labels(pod.namespace)

        existing = _DomainCounts(idx)
        for term, _w, carriers in idx.existing_terms(REQUIRED_ANTI_AFFINITY):
            if term.matches(pod, ns_labels):
                topo = idx.topology(term.topology_key)
                existing.add(topo, idx.term_domain_counts(carriers, topo))
        affinity = _DomainCounts(idx)
        if req_aff:
            all_terms = _matcher(req_aff)
            for t in req_aff:
                topo = idx.topology(t.topology_key)
                affinity.add(topo, idx.domain_counts(all_terms, topo))
        anti = _DomainCounts(idx)
        for t in req_anti:
            topo = idx.topology(t.topology_key)
            anti.add(topo, idx.domain_counts(_matcher((t,)), topo))
        if not existing.positive_keys() and not req_aff and not req_anti:
            return None, skip()
        state.write(PRE_FILTER_KEY, PreFilterState(pod, req_aff, req_anti, ns_labels, existing, affinity, anti))
        return None, SUCCESS

    # ------------------------------------------------------------ AddPod / RemovePod

    def add_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_add: Pod, node_info: NodeInfo) -> Status:
        s = state.read(PRE_FILTER_KEY)
        if s is None:
            return error(f'reading "{PRE_FILTER_KEY}" from cycleState: not found')
        s.update_with_pod(pod_to_add, node_info.node.labels, 1)
        return SUCCESS

    def remove_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_remove: Pod, node_info: NodeInfo) -> Status:
        s = state.read(PRE_FILTER_KEY)
        if s is None:
            return error(f'reading "{PRE_FILTER_KEY}" from cycleState: not found')
        s.update_with_pod(pod_to_remove, node_info.node.labels, -1)
        return SUCCESS

    # ------------------------------------------------------------ Filter

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        s = state.read(PRE_FILTER_KEY)
        if s is None:
            return error(f'reading "{PRE_FILTER_KEY}" from cycleState: not found')
        labels = node_info.node.labels
        # satisfyPodAffinity
        pods_exist = True
        for t in s.required_affinity:
            if t.topology_key not in labels:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_AFFINITY_RULES_NOT_MATCH])
            if not s.affinity.has_positive(t.topology_key, labels):
                pods_exist = False
        if not pods_exist and not (s.affinity.empty() and _pods_match_all(s.required_affinity, s.pod)):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_AFFINITY_RULES_NOT_MATCH])
        # satisfyPodAntiAffinity
        for t in s.required_anti_affinity:
            if s.anti_affinity.has_positive(t.topology_key, labels):
                return Status(Code.UNSCHEDULABLE, [ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH])
        # satisfyExistingPodsAntiAffinity
        for key in s.existing_anti_affinity.positive_keys():
            if s.existing_anti_affinity.has_positive(key, labels):
                return Status(Code.UNSCHEDULABLE, [ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH])
        return SUCCESS

    def filter_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray | None:
        s = state.read(PRE_FILTER_KEY)
        n = cluster.num_nodes
        if s is None or not (s.affinity.fresh(n) and s.anti_affinity.fresh(n) and s.existing_anti_affinity.fresh(n)):
            return None
        ok = np.ones(len(rows), dtype=bool)
        if s.required_affinity:
            have_all = np.ones(len(rows), dtype=bool)
            exist = np.ones(len(rows), dtype=bool)
            for t in s.required_affinity:
                topo, per_domain = s.affinity.by_key[t.topology_key]
                have_all &= topo.codes[rows] >= 0
                exist &= topo.per_row(per_domain > 0, rows)
            if s.affinity.empty() and _pods_match_all(s.required_affinity, s.pod):
                exist[:] = True
            ok &= have_all & exist
        # Domains the pod's anti-affinity or an existing pod's anti-affinity closes, merged per key so
        # each key costs one lookup over the rows.
        blocked: dict[str, tuple[Topology, np.ndarray]] = {}
        keys = [(s.anti_affinity, t.topology_key) for t in s.required_anti_affinity]
        keys += [(s.existing_anti_affinity, k) for k in s.existing_anti_affinity.positive_keys()]
        for counts, key in keys:
            cur = counts.by_key.get(key)
            if cur is None:
                continue
            topo, closed = cur[0], cur[1] > 0
            prev = blocked.get(key)
            if prev is not None and prev[0] is topo:
                closed |= prev[1]
            elif prev is not None:
                ok &= ~prev[0].per_row(prev[1], rows)
            blocked[key] = (topo, closed)
        for topo, closed in blocked.values():
            ok &= ~topo.per_row(closed, rows)
        return ok

    # ------------------------------------------------------------ PreScore / Score

    def pre_score(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> Status:
        if not len(rows):
            return skip()
        terms = pod_terms(pod)
        has_constraints = bool(terms.preferred_affinity or terms.preferred_anti_affinity)
        if self.args.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return skip()
        if not has_constraints and not cluster.assigned_with_affinity:
            return skip()
        idx = index_for(cluster)
        scores: dict[str, tuple[Topology, np.ndarray]] = {}
        touched = False

        def add(topo: Topology, weight: int, per_domain: np.ndarray) -> None:
            # scoreMap.processTerm for every matching pod: the domain gets weight per pod.
            nonlocal touched
            if not per_domain.any():
                return
            touched = True
            cur = scores.get(topo.key)
            if cur is None:
                scores[topo.key] = (topo, per_domain * weight)
            else:
                cur[1][:] += per_domain * weight

        for sign, weighted in ((1, terms.preferred_affinity), (-1, terms.preferred_anti_affinity)):
            for w, t in weighted:
                mt = merge_namespaces(t, cluster)
                topo = idx.topology(mt.topology_key)
                add(topo, sign * w, idx.domain_counts(_matcher((mt,)), topo))
        ns_labels = cluster.namespace_labels(pod.namespace)
        for category, sign in ((REQUIRED_AFFINITY, 1), (PREFERRED_AFFINITY, 1), (PREFERRED_ANTI_AFFINITY, -1)):
            if category == REQUIRED_AFFINITY and self.args.hard_pod_affinity_weight <= 0:
                continue
            for term, w, carriers in idx.existing_terms(category):
                if term.matches(pod, ns_labels):
                    topo = idx.topology(term.topology_key)
                    weight = self.args.hard_pod_affinity_weight if category == REQUIRED_AFFINITY else w
                    add(topo, sign * weight, idx.term_domain_counts(carriers, topo))
        if not touched:
            return skip()
        state.write(PRE_SCORE_KEY, PreScoreState(scores))
        return SUCCESS

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        s = state.read(PRE_SCORE_KEY)
        if s is None:
            return 0, error(f'reading "{PRE_SCORE_KEY}" from cycleState: not found')
        labels = node_info.node.labels
        total = 0
        for topo, per_domain in s.scores.values():
            code = topo.code_of(labels)
            if code is not None:
                total += int(per_domain[code])
        return total, SUCCESS

    def score_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray | None:
        s = state.read(PRE_SCORE_KEY)
        if s is None or any(len(t.codes) != cluster.num_nodes for t, _ in s.scores.values()):
            return None
        total = np.zeros(len(rows), dtype=np.int64)
        for topo, per_domain in s.scores.values():
            total += topo.per_row(per_domain, rows)
        return total

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray, rows: np.ndarray) -> Status | None:
        s = state.read(PRE_SCORE_KEY)
        if s is None:
            return error(f'reading "{PRE_SCORE_KEY}" from cycleState: not found')
        if not s.scores or not len(scores):
            return SUCCESS
        lo, hi = int(scores.min()), int(scores.max())
        diff = hi - lo
        if diff > 0:
            # float64(MaxNodeScore) * (float64(score-min) / float64(max-min)), truncated by int64().
            f = float(MAX_NODE_SCORE) * ((scores.astype(np.int64) - lo).astype(np.float64) / float(diff))
            scores[:] = np.trunc(f).astype(np.int64)
        else:
            scores[:] = 0
        return SUCCESS
