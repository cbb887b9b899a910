"""What InterPodAffinity and PodTopologySpread share: topology codes and indexed pod counts per node row.

Both plugins count, per topology domain, the assigned pods that match a selector. Doing that by walking
every pod each cycle is what makes them the slowest default plugins, so a `ClusterIndex` (one per
ClusterState, kept current by the cluster's event listeners) holds:

* per topology key, an integer code per NodeTable row (-1: the node lacks the label), rebuilt when any
  node changes (`node_generation`);
* for each *tracked* `PodMatcher` (namespaces + selectors, all of which must match), the number of
  matching assigned pods per row — computed once, then updated per pod event; the first count looks
  only at the pods a namespace or an `In` requirement of the matcher allows (an inverted index of the
  assigned pods by namespace and by label), so a new workload's selector costs its own pods, not all;
* for every assigned pod's own (anti-)affinity terms, the number of pods per row carrying each term, so
  existing pods' terms are evaluated once per distinct term, not once per pod.

A count per domain is then one `np.bincount` over the rows' codes. Nothing is built until a plugin asks,
so clusters where nobody uses affinity or spreading pay nothing.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubesched.api.objects import Node, Pod, PodAffinityTerm, find_untolerated_taint
from kubesched.api.selectors import NOTHING, LabelSelector, Requirement
from kubesched.cluster.events import Event, EventType
from kubesched.cluster.state import ClusterState

HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"
WORKLOAD_KINDS = ("Service", "ReplicaSet", "ReplicationController", "StatefulSet")
# helper.DoNotScheduleTaintsFilterFunc: the taint effects a NodeTaintsPolicy of Honor looks at.
DO_NOT_SCHEDULE_EFFECTS = ("NoSchedule", "NoExecute")
NO_LABELS: Mapping[str, str] = {}

# Categories of existing pods' terms kept in the index.
REQUIRED_AFFINITY = "requiredAffinity"
REQUIRED_ANTI_AFFINITY = "requiredAntiAffinity"
PREFERRED_AFFINITY = "preferredAffinity"
PREFERRED_ANTI_AFFINITY = "preferredAntiAffinity"

MAX_TRACKED_MATCHERS = 1024
MAX_DENSE_TERMS = 512


# ---------------------------------------------------------------- affinity terms


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """framework.AffinityTerm: a PodAffinityTerm with its namespaces resolved against its own pod."""

    namespaces: frozenset[str]
    namespace_selector: LabelSelector  # NOTHING for a nil namespaceSelector
    selector: LabelSelector
    topology_key: str

    def matches(self, pod: Pod, namespace_labels: Mapping[str, str]) -> bool:
        """AffinityTerm.Matches: the pod's namespace is listed or selected, and its labels are selected."""
        if pod.namespace in self.namespaces or self.namespace_selector.matches(namespace_labels):
            return self.selector.matches(pod.labels)
        return False

    def namespace_scope(self) -> frozenset[str] | None:
        """The namespaces this term can match when it has been merged (None: all of them)."""
        return None if self.namespace_selector.empty else self.namespaces


@dataclass(frozen=True, slots=True)
class PodTerms:
    required_affinity: tuple[AffinityTerm, ...]
    required_anti_affinity: tuple[AffinityTerm, ...]
    preferred_affinity: tuple[tuple[int, AffinityTerm], ...]
    preferred_anti_affinity: tuple[tuple[int, AffinityTerm], ...]


def merge_label_keys(term: PodAffinityTerm, labels: Mapping[str, str]) -> LabelSelector:
    """matchLabelKeys / mismatchLabelKeys as the API server merges them at pod creation.

    Each key the pod has becomes `key In (value)` (or `NotIn` for mismatchLabelKeys); a nil selector
    stays nil. A requirement already present (a snapshot of a real cluster is already merged) is not
    added twice, so merging is idempotent.
    """
    sel = term.label_selector
    if sel.nothing or not (term.match_label_keys or term.mismatch_label_keys):
        return sel
    extra: list[Requirement] = []
    for key in term.match_label_keys:
        if key in labels:
            extra.append(Requirement(key, "In", (labels[key],)))
    for key in term.mismatch_label_keys:
        if key in labels:
            extra.append(Requirement(key, "NotIn", (labels[key],)))
    have = set(sel.requirements)
    return sel.with_requirements(r for r in extra if r not in have)


def new_affinity_term(pod: Pod, term: PodAffinityTerm) -> AffinityTerm:
    """newAffinityTerm: no namespaces and a nil namespaceSelector mean the pod's own namespace."""
    if not term.namespaces and term.namespace_selector is None:
        namespaces = frozenset((pod.namespace,))
    else:
        namespaces = frozenset(term.namespaces)
    return AffinityTerm(namespaces, term.namespace_selector if term.namespace_selector is not None else NOTHING,
                        merge_label_keys(term, pod.labels), term.topology_key)


def pod_terms(pod: Pod) -> PodTerms:
    """The pod's (anti-)affinity terms as framework.PodInfo parses them (cached on the pod)."""
    cached = pod.cache.get("pod_affinity_terms")
    if cached is None:
        aff = pod.affinity
        cached = PodTerms(
            tuple(new_affinity_term(pod, t) for t in aff.pod_affinity_required),
            tuple(new_affinity_term(pod, t) for t in aff.pod_anti_affinity_required),
            tuple((w.weight, new_affinity_term(pod, w.term)) for w in aff.pod_affinity_preferred),
            tuple((w.weight, new_affinity_term(pod, w.term)) for w in aff.pod_anti_affinity_preferred),
        )
        pod.cache["pod_affinity_terms"] = cached
    return cached


def merge_namespaces(term: AffinityTerm, cluster: ClusterState) -> AffinityTerm:
    """mergeAffinityTermNamespacesIfNotEmpty: for the incoming pod, unroll namespaceSelector into namespaces.

    An empty selector (`{}`) selects every namespace and is kept; any other (including nil) is replaced
    by the names of the Namespace objects it selects, and becomes Nothing.
    """
    sel = term.namespace_selector
    if sel.empty:
        return term
    names = set(term.namespaces)
    if not sel.nothing:
        names.update(ns.name for ns in cluster.namespaces.values() if sel.matches(ns.labels))
    return AffinityTerm(frozenset(names), NOTHING, term.selector, term.topology_key)


def existing_term_keys(pod: Pod) -> tuple[tuple[str, AffinityTerm, int], ...]:
    """(category, term, weight) for every (anti-)affinity term of a pod, as the index keeps them."""
    cached = pod.cache.get("pod_affinity_term_keys")
    if cached is None:
        aff = pod.affinity
        if not (aff.has_pod_affinity or aff.has_pod_anti_affinity):
            cached = ()
        else:
            t = pod_terms(pod)
            cached = tuple([(REQUIRED_AFFINITY, x, 0) for x in t.required_affinity]
                           + [(REQUIRED_ANTI_AFFINITY, x, 0) for x in t.required_anti_affinity]
                           + [(PREFERRED_AFFINITY, x, w) for w, x in t.preferred_affinity]
                           + [(PREFERRED_ANTI_AFFINITY, x, w) for w, x in t.preferred_anti_affinity])
        pod.cache["pod_affinity_term_keys"] = cached
    return cached


# ---------------------------------------------------------------- node helpers


def required_node_affinity_matches(pod: Pod, node: Node) -> bool:
    """nodeaffinity.GetRequiredNodeAffinity(pod).Match(node): nodeSelector and required node affinity."""
    labels = node.labels
    for k, v in pod.node_selector.items():
        if labels.get(k) != v:
            return False
    req = pod.affinity.node_required
    return req is None or req.matches(labels, node.name)


def tolerates_node_taints(pod: Pod, node: Node) -> bool:
    """No NoSchedule/NoExecute taint of the node is left untolerated by the pod."""
    return find_untolerated_taint(node.taints, pod.tolerations, DO_NOT_SCHEDULE_EFFECTS) is None


# ---------------------------------------------------------------- topology codes


class Topology:
    """One topology key: an integer code per table row (-1 where the node lacks the label).

    Rows with the label are kept sorted by code (`order`, with each domain's first position in
    `starts`), so a sum per domain is one gather and one `np.add.reduceat` — or only the gather when
    every domain is a single node (hostname).
    """

    __slots__ = ("key", "codes", "values", "value_code", "order", "starts", "unique", "complete", "_ids")

    def __init__(self, key: str, codes: np.ndarray, values: list[str], value_code: dict[str, int]) -> None:
        self.key = key
        self.codes = codes
        self.values = values
        self.value_code = value_code
        labelled = np.flatnonzero(codes >= 0)
        self.order = labelled[np.argsort(codes[labelled], kind="stable")]
        sorted_codes = codes[self.order]
        self.starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]]) if len(sorted_codes) \
            else np.zeros(0, dtype=np.int64)
        self.unique = len(self.order) == len(values)
        self.complete = len(self.order) == len(codes)  # every node has the label
        self._ids: np.ndarray | None = None

    @property
    def ids(self) -> np.ndarray:
        """Each row's domain for PreScore, where a node without the label counts under the value "" (upstream
        reads a missing label as ""): its code, else the code of "" when some node has it, else `size`."""
        if self._ids is None:
            empty_id = self.value_code.get("", self.size)
            self._ids = self.codes if self.complete else np.where(self.codes >= 0, self.codes, empty_id)
        return self._ids

    @property
    def size(self) -> int:
        return len(self.values)

    def code_of(self, labels: Mapping[str, str]) -> int | None:
        v = labels.get(self.key)
        return None if v is None else self.value_code.get(v)

    def domain_sum(self, per_row: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        """Per-row numbers summed per domain (rows without the label, or outside `mask`, left out)."""
        if not self.size:
            return np.zeros(0, dtype=np.int64)
        x = per_row if mask is None else np.where(mask, per_row, 0)
        gathered = np.asarray(x, dtype=np.int64)[self.order]
        return gathered if self.unique else np.add.reduceat(gathered, self.starts)

    def domains_of(self, mask: np.ndarray | None) -> np.ndarray:
        """Which domains hold at least one row of `mask` (that has the label); None: every row."""
        if mask is None:
            return np.ones(self.size, dtype=bool)
        if not self.size:
            return np.zeros(0, dtype=bool)
        gathered = mask[self.order]
        return gathered if self.unique else np.logical_or.reduceat(gathered, self.starts)

    def per_row(self, per_domain: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The value of each row's domain; 0 (False) for rows without the label."""
        padded = np.zeros(len(per_domain) + 1, dtype=per_domain.dtype)
        padded[:-1] = per_domain  # code -1 indexes the trailing 0
        return padded[self.codes[rows]]


# ---------------------------------------------------------------- pod matchers and the index


class PodMatcher:
    """Pods whose namespace and labels satisfy every clause (None namespaces: any namespace).

    A dictionary key looked up every cycle, so its hash is computed once.
    """

    __slots__ = ("clauses", "skip_terminating", "_hash")

    def __init__(self, clauses: tuple[tuple[frozenset[str] | None, LabelSelector], ...],
                 skip_terminating: bool = False) -> None:
        self.clauses = clauses
        self.skip_terminating = skip_terminating
        self._hash = hash((clauses, skip_terminating))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, PodMatcher) and self._hash == other._hash and self.clauses == other.clauses
                and self.skip_terminating == other.skip_terminating)

    def scope(self) -> frozenset[str] | None:
        out: frozenset[str] | None = None
        for ns, _ in self.clauses:
            if ns is not None:
                out = ns if out is None else out & ns
        return out

    def matches(self, namespace: str, labels: Mapping[str, str], terminating: bool) -> bool:
        if terminating and self.skip_terminating:
            return False
        for ns, sel in self.clauses:
            if ns is not None and namespace not in ns:
                return False
            if not sel.matches(labels):
                return False
        return True


class TermCounts:
    """How many assigned pods carry one (anti-)affinity term, per row: sparse, densified on demand."""

    __slots__ = ("rows", "total", "dense", "domains")

    def __init__(self) -> None:
        self.rows: dict[int, int] = {}
        self.total = 0
        self.dense: np.ndarray | None = None
        self.domains: dict[str, tuple[Topology, np.ndarray]] = {}


@dataclass(slots=True)
class _Record:
    """What the index counted for one pod (the numbers it was counted with)."""

    row: int
    namespace: str
    labels: dict[str, str]
    terminating: bool
    terms: tuple[tuple[str, AffinityTerm, int], ...]


@dataclass
class ClusterIndex:
    """Counts per node row for one ClusterState, kept current through the cluster's listeners."""

    cluster_ref: Any  # weakref.ref[ClusterState]
    n: int = 0
    valid: bool = False
    seen_pod_generation: int = -1
    workload_generation: int = 0
    rebuilds: int = 0  # full rescans so far (events keep the index current between them)
    records: dict[str, _Record] = field(default_factory=dict)
    # The recorded pods' keys by namespace and by label (key, value): where a new matcher's pods can be.
    by_namespace: dict[str, set[str]] = field(default_factory=dict)
    by_label: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    matchers: OrderedDict[PodMatcher, np.ndarray] = field(default_factory=OrderedDict)
    # The tracked matchers a pod event can touch, by (namespace or None for any, label key, label value) when
    # the matcher requires `key In (values)` (matchLabels included), else by (namespace or None, None, None):
    # an event asks only the matchers its pod's namespace and labels can satisfy.
    matcher_scope: dict[tuple[str | None, str | None, str | None], set[PodMatcher]] = \
        field(default_factory=dict)
    matcher_buckets: dict[PodMatcher, list[tuple[str | None, str | None, str | None]]] = \
        field(default_factory=dict)
    # Per tracked matcher and topology key: the matching pods per domain, kept current like the rows.
    matcher_domains: dict[PodMatcher, dict[str, tuple[Topology, np.ndarray]]] = field(default_factory=dict)
    terms: dict[str, dict[tuple[AffinityTerm, int], TermCounts]] = field(default_factory=dict)
    # Terms whose dense per-row array is kept (bounded: a term per pod must not cost a row vector each).
    dense_terms: OrderedDict[int, TermCounts] = field(default_factory=OrderedDict)
    topologies: dict[str, Topology] = field(default_factory=dict)
    topology_generation: int = -1
    default_selectors: dict[Any, LabelSelector] = field(default_factory=dict)
    default_selectors_generation: int = -1

    @property
    def cluster(self) -> ClusterState:
        c = self.cluster_ref()
        assert c is not None
        return c

    # ------------------------------------------------------------ events

    def on_event(self, ev: Event) -> None:
        kind = ev.kind
        cluster = self.cluster_ref()
        if cluster is None:
            return
        if kind == "Pod":
            old, new, t = ev.old, ev.obj, ev.type
            unchanged = (t is EventType.BOUND and old is new) or (
                t is EventType.UPDATED and old is not None and old.node_name == new.node_name
                and old.meta.labels is new.meta.labels and old.is_terminating == new.is_terminating
                and old.is_terminal == new.is_terminal)
            # A binding that confirms an assumption, or a status change, leaves what the index counts as is.
            if self.valid and not unchanged:
                self._reconcile(cluster, new.key)
        elif kind == "Node":
            # Rows are positional: a node added or removed renumbers or grows them.
            if ev.type is EventType.DELETED or cluster.num_nodes != self.n:
                self.valid = False
        elif kind in WORKLOAD_KINDS:
            self.workload_generation += 1
        if self.valid:
            self.seen_pod_generation = cluster.pod_generation

    def _reconcile(self, cluster: ClusterState, key: str) -> None:
        pod = cluster.pods.get(key)
        rec = self.records.get(key)
        if rec is not None and pod is not None and pod.node_name:
            info = cluster.node_info_by_name.get(pod.node_name)
            if (info is not None and info.index == rec.row and info.pods.get(key) is pod
                    and rec.namespace == pod.namespace and rec.labels == pod.labels
                    and rec.terms == existing_term_keys(pod)):
                # The same pod counted on the same row (a deletion started, a status change): only the
                # matchers that skip terminating pods can move; term counts include every pod.
                terminating = pod.is_terminating
                if terminating != rec.terminating:
                    self._apply_scoped_matchers(rec, -1)
                    rec.terminating = terminating
                    self._apply_scoped_matchers(rec, +1)
                return
        old = self.records.pop(key, None)
        if old is not None:
            self._apply(old, -1)
            self._unindex(key, old)
        pod = cluster.pods.get(key)
        if pod is None or not pod.node_name:
            return
        info = cluster.node_info_by_name.get(pod.node_name)
        if info is None or info.pods.get(key) is not pod:
            return
        rec = _Record(info.index, pod.namespace, dict(pod.labels), pod.is_terminating, existing_term_keys(pod))
        self._apply(rec, +1)
        self._record(key, rec)

    def _record(self, key: str, rec: _Record) -> None:
        self.records[key] = rec
        self.by_namespace.setdefault(rec.namespace, set()).add(key)
        by_label = self.by_label
        for kv in rec.labels.items():
            keys = by_label.get(kv)
            if keys is None:
                by_label[kv] = {key}
            else:
                keys.add(key)

    def _unindex(self, key: str, rec: _Record) -> None:
        keys = self.by_namespace.get(rec.namespace)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self.by_namespace[rec.namespace]
        by_label = self.by_label
        for kv in rec.labels.items():
            keys = by_label.get(kv)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del by_label[kv]

    def _candidates(self, matcher: PodMatcher) -> Iterator[_Record]:
        """The recorded pods that can match `matcher`: the smallest of the sets its namespaces or its `In`
        requirements allow (every matching pod is in each of them), or every pod."""
        best: set[str] | list[set[str]] | None = None
        best_size = len(self.records)
        for ns, sel in matcher.clauses:
            if sel.nothing:
                return
            options: list[tuple[int, list[set[str]]]] = []
            if ns is not None:
                sets = [self.by_namespace[n] for n in ns if n in self.by_namespace]
                options.append((sum(len(x) for x in sets), sets))
            for r in sel.requirements:
                if r.operator == "In":
                    sets = [self.by_label[(r.key, v)] for v in set(r.values) if (r.key, v) in self.by_label]
                    options.append((sum(len(x) for x in sets), sets))
            for size, sets in options:
                if size < best_size or best is None and size <= best_size:
                    best, best_size = sets, size
        records = self.records
        if best is None:
            yield from records.values()
            return
        for keys in best:  # disjoint: a pod has one namespace and one value per label key
            for key in keys:
                yield records[key]

    def _apply_scoped_matchers(self, rec: _Record, sign: int) -> None:
        buckets = self.matcher_scope
        if buckets:
            labels = rec.labels
            for scope in (rec.namespace, None):
                # A pod has one value per label key, so it is in at most one bucket of a matcher.
                self._apply_matchers(buckets.get((scope, None, None)), rec, sign)
                for k, v in labels.items():
                    self._apply_matchers(buckets.get((scope, k, v)), rec, sign)

    def _apply(self, rec: _Record, sign: int) -> None:
        self._apply_scoped_matchers(rec, sign)
        for cat, term, weight in rec.terms:
            by_term = self.terms.setdefault(cat, {})
            tc = by_term.get((term, weight))
            if tc is None:
                tc = by_term[(term, weight)] = TermCounts()
            row = rec.row
            left = tc.rows.get(row, 0) + sign
            if left:
                tc.rows[row] = left
            else:
                del tc.rows[row]
            tc.total += sign
            if tc.dense is not None:
                tc.dense[row] += sign
            if tc.domains:
                _shift_domains(tc.domains, row, sign)
            if tc.total == 0:
                # Forget terms no assigned pod carries any more, so scans over terms stay short.
                del by_term[(term, weight)]
                self.dense_terms.pop(id(tc), None)

    def _apply_matchers(self, matchers: set[PodMatcher] | None, rec: _Record, sign: int) -> None:
        if not matchers:
            return
        for m in matchers:
            if m.matches(rec.namespace, rec.labels, rec.terminating):
                self.matchers[m][rec.row] += sign
                doms = self.matcher_domains.get(m)
                if doms:
                    _shift_domains(doms, rec.row, sign)

    def _scope(self, matcher: PodMatcher, scope: frozenset[str] | None) -> None:
        """File a tracked matcher under the buckets of the pods that can match it."""
        label: tuple[str, tuple[str, ...]] | None = None
        for _, sel in matcher.clauses:
            for r in sel.requirements:
                if r.operator == "In":
                    label = (r.key, r.values)
                    break
            if label is not None:
                break
        buckets: list[tuple[str | None, str | None, str | None]] = []
        for ns in ([None] if scope is None else sorted(scope)):
            if label is None:
                buckets.append((ns, None, None))
            else:
                buckets.extend((ns, label[0], v) for v in dict.fromkeys(label[1]))
        for b in buckets:
            self.matcher_scope.setdefault(b, set()).add(matcher)
        self.matcher_buckets[matcher] = buckets

    # ------------------------------------------------------------ keeping current

    def sync(self) -> None:
        cluster = self.cluster
        if self.valid and self.seen_pod_generation == cluster.pod_generation and self.n == cluster.num_nodes:
            return
        self.rebuilds += 1
        self.n = cluster.num_nodes
        self.records.clear()
        self.by_namespace.clear()
        self.by_label.clear()
        self.terms.clear()
        self.dense_terms.clear()
        self.matcher_domains.clear()
        for m in self.matchers:
            self.matchers[m] = np.zeros(self.n, dtype=np.int64)
        for info in cluster.node_infos:
            for pod in info.pods.values():
                rec = _Record(info.index, pod.namespace, dict(pod.labels), pod.is_terminating, existing_term_keys(pod))
                self._apply(rec, +1)
                self._record(pod.key, rec)
        self.valid = True
        self.seen_pod_generation = cluster.pod_generation

    # ------------------------------------------------------------ reading

    def topology(self, key: str) -> Topology:
        cluster = self.cluster
        if self.topology_generation != cluster.node_generation:
            self.topologies.clear()
            self.topology_generation = cluster.node_generation
        topo = self.topologies.get(key)
        if topo is None:
            codes = np.full(cluster.num_nodes, -1, dtype=np.int64)
            value_code: dict[str, int] = {}
            for info in cluster.node_infos:
                v = info.node.labels.get(key)
                if v is not None:
                    c = value_code.get(v)
                    if c is None:
                        c = value_code[v] = len(value_code)
                    codes[info.index] = c
            topo = self.topologies[key] = Topology(key, codes, list(value_code), value_code)
        return topo

    def counts(self, matcher: PodMatcher) -> np.ndarray:
        """Assigned pods matching `matcher`, per table row (do not modify the array)."""
        self.sync()
        arr = self.matchers.get(matcher)
        if arr is not None:
            self.matchers.move_to_end(matcher)
            return arr
        arr = np.zeros(self.n, dtype=np.int64)
        scope = matcher.scope()
        if scope is None or scope:
            for rec in self._candidates(matcher):
                if (scope is None or rec.namespace in scope) and matcher.matches(rec.namespace, rec.labels,
                                                                                  rec.terminating):
                    arr[rec.row] += 1
        if len(self.matchers) >= MAX_TRACKED_MATCHERS:
            old, _ = self.matchers.popitem(last=False)
            self._unscope(old)
        self.matchers[matcher] = arr
        self._scope(matcher, scope)
        return arr

    def domain_counts(self, matcher: PodMatcher, topo: Topology) -> np.ndarray:
        """Assigned pods matching `matcher`, per domain of `topo` (do not modify the array)."""
        per_row = self.counts(matcher)
        doms = self.matcher_domains.setdefault(matcher, {})
        cur = doms.get(topo.key)
        if cur is None or cur[0] is not topo:
            cur = doms[topo.key] = (topo, topo.domain_sum(per_row))
        return cur[1]

    def term_domain_counts(self, tc: TermCounts, topo: Topology) -> np.ndarray:
        """Pods carrying a term, per domain of `topo` (do not modify the array)."""
        cur = tc.domains.get(topo.key)
        if cur is None or cur[0] is not topo:
            cur = tc.domains[topo.key] = (topo, topo.domain_sum(self.term_rows(tc)))
        return cur[1]

    def _unscope(self, matcher: PodMatcher) -> None:
        self.matcher_domains.pop(matcher, None)
        for b in self.matcher_buckets.pop(matcher, ()):
            members = self.matcher_scope.get(b)
            if members is not None:
                members.discard(matcher)
                if not members:
                    del self.matcher_scope[b]

    def existing_terms(self, category: str) -> Iterator[tuple[AffinityTerm, int, TermCounts]]:
        """(term, weight, pods carrying it) for the existing pods' terms of one category."""
        self.sync()
        yield from ((term, weight, tc) for (term, weight), tc in list(self.terms.get(category, {}).items()))

    def term_rows(self, tc: TermCounts) -> np.ndarray:
        """The pods carrying a term, per table row (do not modify the array)."""
        if tc.dense is None:
            dense = np.zeros(self.n, dtype=np.int64)
            if tc.rows:
                dense[np.fromiter(tc.rows.keys(), dtype=np.int64, count=len(tc.rows))] = \
                    np.fromiter(tc.rows.values(), dtype=np.int64, count=len(tc.rows))
            tc.dense = dense
            if len(self.dense_terms) >= MAX_DENSE_TERMS:
                _, old = self.dense_terms.popitem(last=False)
                old.dense = None
        self.dense_terms[id(tc)] = tc
        self.dense_terms.move_to_end(id(tc))
        return tc.dense

    # ------------------------------------------------------------ default spreading selectors

    def default_selector(self, pod: Pod) -> LabelSelector:
        """helper.DefaultSelector: the selectors of the Services, RCs, RSs and StatefulSets of the pod, merged."""
        if self.default_selectors_generation != self.workload_generation:
            self.default_selectors.clear()
            self.default_selectors_generation = self.workload_generation
        owner = pod.controller_ref()
        key = (pod.namespace, frozenset(pod.labels.items()),
               None if owner is None else (owner.kind, owner.api_version, owner.name))
        sel = self.default_selectors.get(key)
        if sel is None:
            sel = self.default_selectors[key] = _default_selector(self.cluster, pod)
        return sel


def _shift_domains(doms: dict[str, tuple[Topology, np.ndarray]], row: int, sign: int) -> None:
    """One pod more (or less) on `row`: move the cached per-domain counts along."""
    for topo, arr in doms.values():
        if row < len(topo.codes):
            code = topo.codes[row]
            if code >= 0:
                arr[code] += sign


def _workload_map(selector: LabelSelector) -> dict[str, str]:
    """A Service/RC map selector back as a map (parse_workload stores it as `key In (value)`)."""
    if selector.nothing:
        return {}
    return {r.key: r.values[0] for r in selector.requirements if r.operator == "In" and len(r.values) == 1}


def _default_selector(cluster: ClusterState, pod: Pod) -> LabelSelector:
    label_set: dict[str, str] = {}
    ns = pod.namespace
    for key in sorted(cluster.workloads):
        w = cluster.workloads[key]
        if w.kind != "Service" or w.meta.namespace != ns or w.selector.nothing:
            continue
        if w.selector.matches(pod.labels):
            label_set.update(_workload_map(w.selector))
    reqs = [Requirement(k, "In", (v,)) for k, v in sorted(label_set.items())]
    owner = pod.controller_ref()
    if owner is not None:
        # Only the exact group/version/kind of the supported controllers counts, as upstream's switch on GVK.
        gvk = (owner.api_version, owner.kind)
        if gvk == ("v1", "ReplicationController"):
            rc = cluster.workloads.get(f"ReplicationController/{ns}/{owner.name}")
            if rc is not None:
                label_set.update(_workload_map(rc.selector))
                reqs = [Requirement(k, "In", (v,)) for k, v in sorted(label_set.items())]
        elif gvk in (("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet")):
            ctrl = cluster.workloads.get(f"{owner.kind}/{ns}/{owner.name}")
            if ctrl is not None and not ctrl.selector.nothing:
                reqs.extend(ctrl.selector.requirements)
    return LabelSelector(tuple(reqs))




def index_for(cluster: ClusterState) -> ClusterIndex:
    """The cluster's index, created (and subscribed to its events) on first use."""
    idx: ClusterIndex | None = cluster.indexes.get("topology")
    if idx is None:
        idx = ClusterIndex(weakref.ref(cluster))
        cluster.subscribe(idx.on_event, index=True)
        cluster.indexes["topology"] = idx
    return idx
