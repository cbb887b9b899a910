"""`labelSelector` and `fieldSelector` query parameters, as apimachinery parses and matches them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tests.kube_apiserver_double.store import ApiError

Matcher = Callable[[dict[str, Any]], bool]


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside `in (...)` / `notin (...)` value sets."""
    terms, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if cur:
        terms.append("".join(cur).strip())
    return [t for t in terms if t]


def _label_term(term: str) -> Callable[[Mapping[str, str]], bool]:
    words = term.split(None, 1)
    if len(words) == 2 and words[1].split("(", 1)[0].strip() in ("in", "notin"):
        key = words[0]
        op, _, rest = words[1].partition("(")
        values = {v.strip() for v in rest.rstrip(")").split(",") if v.strip()}
        if op.strip() == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    for op in ("!=", "==", "="):
        if op in term:
            key, value = (s.strip() for s in term.split(op, 1))
            if op == "!=":
                return lambda labels: labels.get(key) != value
            return lambda labels: labels.get(key) == value
    if term.startswith("!"):
        key = term[1:].strip()
        return lambda labels: key not in labels
    key = term.strip()
    if not key or " " in key:
        raise ApiError(400, "BadRequest", f"unable to parse requirement: {term!r}")
    return lambda labels: key in labels


def label_matcher(text: str | None) -> Matcher | None:
    if not text:
        return None
    terms = [_label_term(t) for t in _split_terms(text)]

    def match(obj: dict[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(t(labels) for t in terms)

    return match


def field_value(obj: dict[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def field_matcher(text: str | None) -> Matcher | None:
    if not text:
        return None
    checks: list[tuple[str, str, bool]] = []
    for term in _split_terms(text):
        for op in ("!=", "==", "="):
            if op in term:
                path, value = (s.strip() for s in term.split(op, 1))
                checks.append((path, value, op != "!="))
                break
        else:
            raise ApiError(400, "BadRequest", f"invalid field selector: {term!r}")

    def match(obj: dict[str, Any]) -> bool:
        return all((field_value(obj, p) == v) == eq for p, v, eq in checks)

    return match


def combine(*matchers: Matcher | None) -> Matcher | None:
    ms = [m for m in matchers if m is not None]
    if not ms:
        return None
    return lambda obj: all(m(obj) for m in ms)
