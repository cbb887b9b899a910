"""NodeAffinity: spec.nodeSelector, required node affinity and the scheduler-enforced addedAffinity.

PreFilter skips pods with neither a nodeSelector, required node affinity nor addedAffinity; when every
required term names nodes with `matchFields metadata.name In`, it narrows Filter to those nodes.
Filter: addedAffinity first ("scheduler-enforced"), then nodeSelector AND the required terms (ORed).
Score: the sum of the weights of matching preferred terms, the pod's and addedAffinity's;
NormalizeScore is DefaultNormalizeScore (not reversed). Filter masks and raw scores are node-static:
memoised per pod shape.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np

from kubesched.api import fields
from kubesched.api.objects import Pod, PreferredSchedulingTerm
from kubesched.api.selectors import (
    NODE_OPS,
    NodeSelector,
    NodeSelectorTerm,
    go_parse_int64,
    is_qualified_name,
    is_valid_label_value,
    parse_node_selector,
    parse_node_selector_term,
)
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.config.plugin_args import PluginArgs
from kubesched.errors import InputError
from kubesched.scheduler.framework import (
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
    ShapeCache,
    Status,
    all_pass,
    is_all_pass,
    skip,
    unresolvable,
)
from kubesched.scheduler.plugins.helper import (
    default_normalize_score,
    node_static_filter,
    node_static_mask,
    pod_cache_key,
)

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"
OBJECT_NAME_FIELD = "metadata.name"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
# Up to this many rows, a pod shape without a cached mask is evaluated on those rows only.
FEW_ROWS = 16


# ---------------------------------------------------------------- args (NodeAffinityArgs)


def _validate_requirement(raw: Any, field: str, label: bool) -> None:
    """What nodeaffinity.NewNodeSelector rejects, as a field error."""
    if not isinstance(raw, dict):
        raise InputError("expected an object with key, operator and values", field=field)
    for k in raw:
        if k not in ("key", "operator", "values"):
            raise InputError(f"unknown field {k!r}; expected key, operator or values", field=f"{field}.{k}")
    key, op, values = raw.get("key"), raw.get("operator"), raw.get("values") or []
    if not isinstance(key, str):
        raise InputError("expected a string", field=f"{field}.key")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise InputError("expected a list of strings", field=f"{field}.values")
    if not label:
        if len(values) != 1:
            raise InputError(f"Invalid value: {values!r}: must have one element", field=f"{field}.values")
        if op not in ("In", "NotIn"):
            raise InputError(f"Invalid value: {op!r}: not a valid selector operator", field=f"{field}.operator")
        return
    if op not in NODE_OPS:
        raise InputError(f"Unsupported value: {op!r}: supported values: {', '.join(sorted(NODE_OPS))}",
                         field=f"{field}.operator")
    if not is_qualified_name(key):
        raise InputError(f"Invalid value: {key!r}: a valid label key is an optional DNS subdomain prefix and '/', "
                         "then a name of at most 63 alphanumeric characters, '-', '_' or '.'", field=f"{field}.key")
    if op in ("In", "NotIn") and not values:
        raise InputError("for 'in', 'notin' operators, values set can't be empty", field=f"{field}.values")
    if op in ("Exists", "DoesNotExist") and values:
        raise InputError("values set must be empty for exists and does not exist", field=f"{field}.values")
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            raise InputError("for 'Gt', 'Lt' operators, exactly one value is required", field=f"{field}.values")
        if go_parse_int64(values[0]) is None:
            raise InputError("for 'Gt', 'Lt' operators, the value must be an integer", field=f"{field}.values[0]")
    for i, v in enumerate(values):
        if not is_valid_label_value(v):
            raise InputError(f"Invalid value: {v!r}: a valid label must be an empty string or consist of alphanumeric "
                             "characters, '-', '_' or '.', and must start and end with an alphanumeric character",
                             field=f"{field}.values[{i}]")


def _validate_term(raw: Any, field: str) -> None:
    if raw is None:
        return
    if not isinstance(raw, dict):
        raise InputError("expected a node selector term object", field=field)
    for k in raw:
        if k not in ("matchExpressions", "matchFields"):
            raise InputError(f"unknown field {k!r}; expected matchExpressions or matchFields", field=f"{field}.{k}")
    for name, label in (("matchExpressions", True), ("matchFields", False)):
        reqs = raw.get(name) or []
        if not isinstance(reqs, list):
            raise InputError("expected a list", field=f"{field}.{name}")
        for i, r in enumerate(reqs):
            _validate_requirement(r, f"{field}.{name}[{i}]", label)


def parse_added_affinity(raw: Any, field: str = "addedAffinity"
                         ) -> tuple[NodeSelector | None, tuple[PreferredSchedulingTerm, ...] | None]:
    """NodeAffinityArgs.addedAffinity: the enforced selector and the preferred terms (None when unset)."""
    if raw is None:
        return None, None
    if not isinstance(raw, dict):
        raise InputError(f"expected a NodeAffinity object, got {type(raw).__name__}", field=field)
    for k in raw:
        if k not in (REQUIRED, PREFERRED):
            raise InputError(f"unknown field {k!r}; expected {REQUIRED} or {PREFERRED}", field=f"{field}.{k}")
    required: NodeSelector | None = None
    if raw.get(REQUIRED) is not None:
        f = f"{field}.{REQUIRED}"
        ns = raw[REQUIRED]
        if not isinstance(ns, dict):
            raise InputError("expected a node selector object with nodeSelectorTerms", field=f)
        for k in ns:
            if k != "nodeSelectorTerms":
                raise InputError(f"unknown field {k!r}; expected nodeSelectorTerms", field=f"{f}.{k}")
        terms = ns.get("nodeSelectorTerms") or []
        if not isinstance(terms, list):
            raise InputError("expected a list", field=f"{f}.nodeSelectorTerms")
        for i, t in enumerate(terms):
            _validate_term(t, f"{f}.nodeSelectorTerms[{i}]")
        required = parse_node_selector(ns, f)
    preferred: tuple[PreferredSchedulingTerm, ...] | None = None
    pref_raw = raw.get(PREFERRED) or []
    f = f"{field}.{PREFERRED}"
    if not isinstance(pref_raw, list):
        raise InputError("expected a list", field=f)
    terms_out = []
    for i, p in enumerate(pref_raw):
        fi = f"{f}[{i}]"
        if not isinstance(p, dict):
            raise InputError("expected an object with weight and preference", field=fi)
        for k in p:
            if k not in ("weight", "preference"):
                raise InputError(f"unknown field {k!r}; expected weight or preference", field=f"{fi}.{k}")
        w = p.get("weight", 0)
        if w is None:
            w = 0
        if isinstance(w, bool) or not isinstance(w, int) or not -(2**31) <= w < 2**31:
            raise InputError(f"expected a 32-bit integer, got {w!r}", field=f"{fi}.weight")
        _validate_term(p.get("preference"), f"{fi}.preference")
        terms_out.append(PreferredSchedulingTerm(w, parse_node_selector_term(p.get("preference"), f"{fi}.preference")))
    if terms_out:
        preferred = tuple(terms_out)
    return required, preferred


@dataclasses.dataclass(frozen=True, slots=True)
class AddedAffinity:
    """NodeAffinityArgs.addedAffinity parsed: the enforced selector and the preferred terms (None when unset)."""

    required: NodeSelector | None = None
    preferred: tuple[PreferredSchedulingTerm, ...] | None = None
    raw: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)


@dataclasses.dataclass(frozen=True, slots=True)
class NodeAffinityArgs(PluginArgs):
    """NodeAffinityArgs: addedAffinity, validated as nodeaffinity.NewNodeSelector would."""

    added_affinity: AddedAffinity | None = None

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> NodeAffinityArgs:
        a = fields.Fields(raw, field, allowed={"addedAffinity"})
        added = a.get("addedAffinity")
        if added is None:
            return cls()
        required, preferred = parse_added_affinity(added, a.path("addedAffinity"))
        return cls(AddedAffinity(required, preferred, copy.deepcopy(added)))

    def to_raw(self) -> dict[str, Any]:
        return {} if self.added_affinity is None else {"addedAffinity": copy.deepcopy(dict(self.added_affinity.raw))}


# ---------------------------------------------------------------- matching


def _spec(pod: Pod) -> Mapping[str, Any]:
    spec = pod.raw.get("spec")
    return spec if isinstance(spec, dict) else {}


def has_node_selector_field(pod: Pod) -> bool:
    """pod.Spec.NodeSelector != nil (an empty map still counts)."""
    return _spec(pod).get("nodeSelector") is not None


def has_preferred_field(pod: Pod) -> bool:
    """pod.Spec.Affinity.NodeAffinity.PreferredDuringScheduling... != nil (an empty list still counts)."""
    aff = _spec(pod).get("affinity")
    na = aff.get("nodeAffinity") if isinstance(aff, dict) else None
    return isinstance(na, dict) and na.get(PREFERRED) is not None


def required_node_affinity_matches(pod: Pod, labels: Mapping[str, str], node_name: str) -> bool:
    """nodeaffinity.GetRequiredNodeAffinity(pod).Match: the nodeSelector AND the required terms."""
    for k, v in pod.node_selector.items():
        if labels.get(k) != v:
            return False
    req = pod.affinity.node_required
    return req is None or req.matches(labels, node_name)


def preferred_score(terms: tuple[PreferredSchedulingTerm, ...], labels: Mapping[str, str], node_name: str) -> int:
    """PreferredSchedulingTerms.Score: the weights of matching terms (weight 0 or empty terms never count)."""
    return sum(t.weight for t in terms if t.weight != 0 and t.preference.matches(labels, node_name))


def _invalid_preferred(terms: tuple[PreferredSchedulingTerm, ...]) -> int | None:
    """Index of the first counted term that does not parse (NewPreferredSchedulingTerms fails), if any."""
    for i, t in enumerate(terms):
        if t.weight == 0 or (not t.preference.match_expressions and not t.preference.match_fields):
            continue
        if t.preference.invalid:
            return i
    return None


def _term_node_names(terms: tuple[NodeSelectorTerm, ...]) -> set[str] | None:
    """Nodes named by `matchFields metadata.name In` in every term (ORed), or None if some term names none."""
    names: set[str] | None = None
    for t in terms:
        term_names: set[str] | None = None
        for r in t.match_fields:
            if r.key == OBJECT_NAME_FIELD and r.operator == "In":
                term_names = set(r.values) if term_names is None else term_names & set(r.values)
        if term_names is None:
            return None  # terms are ORed: this one does not restrict node names
        names = term_names if names is None else names | term_names
    return names


class NodeAffinity(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin):
    name = "NodeAffinity"
    Args = NodeAffinityArgs
    args: NodeAffinityArgs

    def __init__(self, args: NodeAffinityArgs, handle: Any) -> None:
        super().__init__(args, handle)
        added = args.added_affinity
        self.added_node_selector = added.required if added is not None else None
        self.added_pref_terms = added.preferred if added is not None else None
        self._cache = ShapeCache(limit=1024)  # int64 vectors over all nodes: bound the memory

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Node", ("add", "update"))]

    # ------------------------------------------------------------ filter

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> tuple[PreFilterResult | None, Status]:
        required = pod.affinity.node_required
        if required is None and self.added_node_selector is None and not has_node_selector_field(pod):
            return None, skip()
        if required is None or not required.terms:
            return None, SUCCESS
        names = _term_node_names(required.terms)
        if names is None:
            return None, SUCCESS
        if not names:
            return None, unresolvable(ERR_REASON_CONFLICT)
        return PreFilterResult(names), SUCCESS

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        node = node_info.node
        if self.added_node_selector is not None and not self.added_node_selector.matches(node.labels, node.name):
            return unresolvable(ERR_REASON_ENFORCED)
        if not required_node_affinity_matches(pod, node.labels, node.name):
            return unresolvable(ERR_REASON_POD)
        return SUCCESS

    def _pod_shape(self, pod: Pod) -> Hashable:
        return pod_cache_key(pod, "NodeAffinity/required",
                             lambda: (tuple(sorted(pod.node_selector.items())), pod.affinity.node_required))

    def filter_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray:
        added = self.added_node_selector
        mask: np.ndarray | None = None
        if added is not None:
            mask = node_static_filter(self._cache, cluster, ("added",),
                                      lambda i: added.matches(i.node.labels, i.node.name), rows)
        if not pod.node_selector and pod.affinity.node_required is None:
            return mask if mask is not None else all_pass(len(rows))

        def passes(i: NodeInfo) -> bool:
            return required_node_affinity_matches(pod, i.node.labels, i.node.name)

        key = ("pod", self._pod_shape(pod))
        if len(rows) <= FEW_ROWS and self._cache.peek(cluster, (id(cluster), key)) is None:
            # A few nodes (PreFilterResult's named nodes, a nominated node) of a shape not seen yet: pinned
            # pods each have their own shape, so a mask over every node would be computed for nothing.
            infos = cluster.node_infos
            m = np.fromiter((passes(infos[r]) for r in rows.tolist()), dtype=bool, count=len(rows))
        else:
            m = node_static_filter(self._cache, cluster, key, passes, rows)
        if mask is None or is_all_pass(mask):
            return m
        return mask if is_all_pass(m) else mask & m

    # ------------------------------------------------------------ score

    def pre_score(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> Status:
        if not has_preferred_field(pod) and self.added_pref_terms is None:
            return skip()
        bad = _invalid_preferred(pod.affinity.node_preferred)
        if bad is not None:
            return Status(Code.ERROR, [f"spec.affinity.nodeAffinity.{PREFERRED}[{bad}].preference: "
                                       "invalid node selector term"])
        return SUCCESS

    def _terms(self, pod: Pod) -> tuple[PreferredSchedulingTerm, ...]:
        return (self.added_pref_terms or ()) + pod.affinity.node_preferred

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        return preferred_score(self._terms(pod), node_info.node.labels, node_info.node.name), SUCCESS

    def score_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray:
        terms = self._terms(pod)
        if not terms:
            return np.zeros(len(rows), dtype=np.int64)

        def compute() -> np.ndarray:
            return np.fromiter((preferred_score(terms, i.node.labels, i.node.name) for i in cluster.node_infos),
                               dtype=np.int64, count=cluster.num_nodes)

        def one(i: NodeInfo) -> int:
            return preferred_score(terms, i.node.labels, i.node.name)

        return node_static_mask(self._cache, cluster, ("score", pod.affinity.node_preferred), compute, one)[rows]

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray, rows: np.ndarray) -> Status:
        default_normalize_score(scores, reverse=False)
        return SUCCESS
