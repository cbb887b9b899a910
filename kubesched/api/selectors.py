"""Label selectors, node selector terms and their matching, as apimachinery and component-helpers define them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubesched.api.fields import sequence
from kubesched.errors import InputError

LABEL_OPS = ("In", "NotIn", "Exists", "DoesNotExist")

_INT64 = re.compile(r"[+-]?[0-9]+")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def go_parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): an optional sign and decimal digits that fit in int64, else None."""
    if not _INT64.fullmatch(text):
        return None
    v = int(text)
    return v if -(2**63) <= v < 2**63 else None


def is_valid_label_value(value: str) -> bool:
    """validation.IsValidLabelValue: at most 63 characters, alphanumeric at both ends."""
    return len(value) <= 63 and _LABEL_VALUE.fullmatch(value) is not None


def is_qualified_name(key: str) -> bool:
    """validation.IsQualifiedName (label keys): an optional DNS subdomain prefix and a name of at most 63."""
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix):
            return False
    else:
        return False
    return 0 < len(name) <= 63 and _LABEL_NAME.fullmatch(name) is not None
NODE_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


@dataclass(frozen=True, slots=True)
class Requirement:
    """One `key op values` requirement of a label selector or node selector term."""

    key: str
    operator: str
    values: tuple[str, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            v = labels.get(self.key)
            return v is not None and v in self.values
        if op == "NotIn":
            v = labels.get(self.key)
            return v is None or v not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        if op in ("Gt", "Lt"):
            v = labels.get(self.key)
            if v is None:
                return False
            have = go_parse_int64(v)
            want = go_parse_int64(self.values[0]) if self.values else None
            if have is None or want is None:
                return False
            return have > want if op == "Gt" else have < want
        return False


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector as a selector. `nothing` is the selector of a nil LabelSelector."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        for r in self.requirements:
            if not r.matches(labels):
                return False
        return True

    @property
    def empty(self) -> bool:
        """True for `{}`, which selects everything."""
        return not self.nothing and not self.requirements

    def with_requirements(self, extra: Iterable[Requirement]) -> LabelSelector:
        extra = tuple(extra)
        if not extra:
            return self
        if self.nothing:
            return self
        return LabelSelector(self.requirements + extra)


NOTHING = LabelSelector(nothing=True)
EVERYTHING = LabelSelector()


def parse_label_selector(raw: Any, field: str) -> LabelSelector:
    """Parse a metav1.LabelSelector; None gives the selector that matches nothing."""
    if raw is None:
        return NOTHING
    if not isinstance(raw, dict):
        raise InputError(f"expected a label selector object, got {type(raw).__name__}", field=field)
    reqs: list[Requirement] = []
    ml = raw.get("matchLabels") or {}
    if not isinstance(ml, dict):
        raise InputError("expected a map of label to value", field=f"{field}.matchLabels")
    for k in sorted(ml, key=str):
        try:
            reqs.append(Requirement(str(k), "In", (_label_value(ml[k]),)))
        except InputError as err:
            raise err.located(field_prefix=f"{field}.matchLabels.{k}") from None
    for i, e in enumerate(sequence(raw.get("matchExpressions"), f"{field}.matchExpressions")):
        f = f"{field}.matchExpressions[{i}]"
        reqs.append(_parse_requirement(e, f, LABEL_OPS))
    return LabelSelector(tuple(reqs))


def _label_value(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        raise InputError(f"expected a string, got {type(v).__name__}")
    return str(v)


def _parse_requirement(e: Any, f: str, ops: tuple[str, ...]) -> Requirement:
    if not isinstance(e, dict):
        raise InputError("expected an object with key, operator and values", field=f)
    key = e.get("key")
    if not isinstance(key, str) or not key:
        raise InputError("expected a non-empty key", field=f"{f}.key")
    op = e.get("operator")
    if op not in ops:
        raise InputError(f"expected one of {', '.join(ops)}, got {op!r}", field=f"{f}.operator")
    try:
        values = tuple(_label_value(v) for v in sequence(e.get("values"), f"{f}.values"))
    except InputError as err:
        raise err.located(field_prefix=None if err.field else f"{f}.values") from None
    if op in ("In", "NotIn") and not values and ops is LABEL_OPS:
        raise InputError(f"operator {op} needs at least one value", field=f"{f}.values")
    if op in ("Exists", "DoesNotExist") and values and ops is LABEL_OPS:
        raise InputError(f"operator {op} takes no values", field=f"{f}.values")
    return Requirement(key, op, values)


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One term of a NodeSelector: its expressions (on labels) and fields (metadata.name) are ANDed.

    `invalid` marks a term upstream would reject while building the selector (for example a Gt value
    that is not an integer); such a term matches no node.
    """

    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()
    invalid: bool = False

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        # An empty term matches nothing (component-helpers nodeSelectorTerm semantics).
        if self.invalid or (not self.match_expressions and not self.match_fields):
            return False
        for r in self.match_expressions:
            if not r.matches(labels):
                return False
        if self.match_fields:
            fields = {"metadata.name": node_name}
            for r in self.match_fields:
                if not r.matches(fields):
                    return False
        return True


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """A NodeSelector: its terms are ORed."""

    terms: tuple[NodeSelectorTerm, ...]

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        return any(t.matches(labels, node_name) for t in self.terms)


def parse_node_selector_term(raw: Any, field: str) -> NodeSelectorTerm:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise InputError("expected a node selector term object", field=field)
    invalid = False
    exprs = []
    for i, e in enumerate(sequence(raw.get("matchExpressions"), f"{field}.matchExpressions")):
        r = _parse_requirement(e, f"{field}.matchExpressions[{i}]", NODE_OPS)
        invalid = invalid or not _valid_node_requirement(r, label=True)
        exprs.append(r)
    fields = []
    for i, e in enumerate(sequence(raw.get("matchFields"), f"{field}.matchFields")):
        r = _parse_requirement(e, f"{field}.matchFields[{i}]", NODE_OPS)
        invalid = invalid or not _valid_node_requirement(r, label=False)
        fields.append(r)
    return NodeSelectorTerm(tuple(exprs), tuple(fields), invalid)


def _valid_node_requirement(r: Requirement, label: bool) -> bool:
    """What the scheduler's nodeaffinity helper accepts when it builds the selector.

    Stored objects already passed API validation; the remaining failure modes are the ones that only
    the selector builder checks: In/NotIn without values, Gt/Lt without exactly one integer, a label
    key or value that is not a valid label (e.g. "invalid value: ___@#$%^"), and a field requirement
    on anything but metadata.name with In/NotIn and one value.
    """
    if r.operator in ("In", "NotIn") and not r.values:
        return False
    if r.operator in ("Exists", "DoesNotExist") and r.values:
        return False
    if r.operator in ("Gt", "Lt"):
        if len(r.values) != 1 or go_parse_int64(r.values[0]) is None:
            return False
    if not label:
        if r.key != "metadata.name" or r.operator not in ("In", "NotIn") or len(r.values) != 1:
            return False
        return True
    # labels.NewRequirement also validates the key and every value.
    return is_qualified_name(r.key) and all(is_valid_label_value(v) for v in r.values)


def parse_node_selector(raw: Any, field: str) -> NodeSelector:
    if not isinstance(raw, dict):
        raise InputError("expected a node selector object with nodeSelectorTerms", field=field)
    terms = tuple(parse_node_selector_term(t, f"{field}.nodeSelectorTerms[{i}]")
                  for i, t in enumerate(sequence(raw.get("nodeSelectorTerms"), f"{field}.nodeSelectorTerms")))
    return NodeSelector(terms)


# ---------------------------------------------------------------- string label selectors (labels.Parse)

_TOKEN = re.compile(r"\s*(!=|==|=|!|,|\(|\)|>|<|[^\s!=,()<>]+)")


def parse_label_selector_string(text: str | None, field: str) -> LabelSelector:
    """apimachinery labels.Parse: `a=b,c!=d,e in (x,y),f notin (z),g,!h,i>5`. Empty selects everything."""
    if text is None or not text.strip():
        return LabelSelector()
    tokens: list[str] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            if text[pos:].strip() == "":
                break
            raise InputError(f"invalid label selector {text!r}", field=field)
        tokens.append(m.group(1))
        pos = m.end()
    reqs: list[Requirement] = []
    i = 0

    def bad(why: str) -> InputError:
        return InputError(f"invalid label selector {text!r}: {why}", field=field)

    while i < len(tokens):
        negate = tokens[i] == "!"
        if negate:
            i += 1
        if i >= len(tokens) or tokens[i] in ("=", "==", "!=", ",", "(", ")", "<", ">"):
            raise bad("expected a label key")
        key = tokens[i]
        i += 1
        if negate:
            reqs.append(Requirement(key, "DoesNotExist", ()))
        elif i >= len(tokens) or tokens[i] == ",":
            reqs.append(Requirement(key, "Exists", ()))
        elif tokens[i] in ("=", "==", "!="):
            op = "NotIn" if tokens[i] == "!=" else "In"
            i += 1
            value = ""
            if i < len(tokens) and tokens[i] not in (",", "(", ")"):
                value = tokens[i]
                i += 1
            reqs.append(Requirement(key, op, (value,)))
        elif tokens[i] in ("in", "notin"):
            op = "In" if tokens[i] == "in" else "NotIn"
            i += 1
            if i >= len(tokens) or tokens[i] != "(":
                raise bad(f"expected '(' after {tokens[i - 1]}")
            i += 1
            values: list[str] = []
            while i < len(tokens) and tokens[i] != ")":
                if tokens[i] != ",":
                    values.append(tokens[i])
                i += 1
            if i >= len(tokens):
                raise bad("expected ')'")
            i += 1
            reqs.append(Requirement(key, op, tuple(values) or ("",)))
        elif tokens[i] in (">", "<"):
            op = "Gt" if tokens[i] == ">" else "Lt"
            i += 1
            if i >= len(tokens) or not re.fullmatch(r"-?[0-9]+", tokens[i]):
                raise bad(f"expected an integer after {tokens[i - 1]}")
            reqs.append(Requirement(key, op, (tokens[i],)))
            i += 1
        else:
            raise bad(f"unexpected {tokens[i]!r}")
        if i < len(tokens):
            if tokens[i] != ",":
                raise bad(f"expected ',' before {tokens[i]!r}")
            i += 1
    return LabelSelector(tuple(reqs))
