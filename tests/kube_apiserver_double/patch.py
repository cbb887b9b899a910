"""PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

Strategic merge patch is apimachinery's `strategicpatch`: like a merge patch, except that lists with a
patch merge key merge item by item (by that key) and `$patch: delete` / `$patch: replace` directives and
`$setElementOrder/...` / `$deleteFromPrimitiveList/...` keys are understood. The double knows the merge keys
of the fields kubesched's components patch (conditions by type, containers and volumes by name, owner
references by uid, ...); any other list is replaced, which is also what upstream does for lists without a
merge key. Server-side apply (`application/apply-patch+yaml`) is not served (415).
"""

from __future__ import annotations

import copy
from typing import Any

from tests.kube_apiserver_double.store import ApiError

# Field name → patch merge key, for lists that strategic merge patch merges item by item.
MERGE_KEYS = {
    "conditions": "type",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "env": "name",
    "ports": "containerPort",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "tolerations": "",  # atomic in the API: replaced
    "taints": "",
}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def strategic_merge_patch(target: Any, patch: Any, field: str = "") -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$setElementOrder/") or k == "$retainKeys":
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            name = k.split("/", 1)[1]
            if isinstance(out.get(name), list) and isinstance(v, list):
                out[name] = [x for x in out[name] if x not in v]
            continue
        if v is None:
            out.pop(k, None)
        elif isinstance(v, list) and MERGE_KEYS.get(k):
            out[k] = _merge_list(out.get(k), v, MERGE_KEYS[k])
        else:
            merged = strategic_merge_patch(out.get(k), v, k)
            if merged is None:
                out.pop(k, None)
            else:
                out[k] = merged
    return out


def _merge_list(current: Any, patch: list[Any], key: str) -> list[Any]:
    items = [copy.deepcopy(x) for x in current] if isinstance(current, list) else []
    for p in patch:
        if not isinstance(p, dict) or key not in p:
            items.append(copy.deepcopy(p))
            continue
        at = next((i for i, x in enumerate(items) if isinstance(x, dict) and x.get(key) == p[key]), None)
        if p.get("$patch") == "delete":
            if at is not None:
                del items[at]
            continue
        if at is None:
            items.append({k: copy.deepcopy(v) for k, v in p.items() if k != "$patch"})
        else:
            items[at] = strategic_merge_patch(items[at], p)
    return items


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], path: str) -> tuple[Any, str]:
    cur = doc
    for p in parts[:-1]:
        if isinstance(cur, dict) and p in cur:
            cur = cur[p]
        elif isinstance(cur, list) and p.isdigit() and int(p) < len(cur):
            cur = cur[int(p)]
        else:
            raise ApiError(422, "Invalid", f"the server rejected our request due to an error in our request: "
                                           f"doc is missing path: {path!r}")
    return cur, parts[-1]


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902: add, remove, replace, test, move, copy."""
    if not isinstance(ops, list):
        raise ApiError(400, "BadRequest", "a JSON patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ApiError(400, "BadRequest", f"invalid JSON patch operation {op!r}")
        kind, path = op["op"], op["path"]
        if kind in ("move", "copy"):
            src_parent, src_key = _parent(doc, _pointer(op["from"]), op["from"])
            value = src_parent[int(src_key)] if isinstance(src_parent, list) else src_parent[src_key]
            value = copy.deepcopy(value)
            if kind == "move":
                doc = json_patch(doc, [{"op": "remove", "path": op["from"]}])
            doc = json_patch(doc, [{"op": "add", "path": path, "value": value}])
            continue
        parts = _pointer(path)
        if not parts:
            if kind in ("add", "replace"):
                doc = copy.deepcopy(op.get("value"))
                continue
            raise ApiError(422, "Invalid", f"cannot {kind} the whole document")
        parent, last = _parent(doc, parts, path)
        if kind == "test":
            here = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if here != op.get("value"):
                raise ApiError(422, "Invalid", f"the server rejected our request due to an error in our request: "
                                               f"testing value {path} failed")
        elif kind == "remove":
            try:
                if isinstance(parent, list):
                    del parent[int(last)]
                else:
                    del parent[last]
            except (KeyError, IndexError, ValueError):
                raise ApiError(422, "Invalid", f"the server rejected our request due to an error in our request: "
                                               f"Unable to remove nonexistent key: {last}: missing value") from None
        elif kind in ("add", "replace"):
            value = copy.deepcopy(op.get("value"))
            if isinstance(parent, list):
                idx = len(parent) if last == "-" else int(last)
                if kind == "add":
                    parent.insert(idx, value)
                else:
                    parent[idx] = value
            else:
                if kind == "replace" and last not in parent:
                    raise ApiError(422, "Invalid", f"the server rejected our request due to an error in our request: "
                                                   f"replace operation does not apply: doc is missing key: {path}")
                parent[last] = value
        else:
            raise ApiError(400, "BadRequest", f"unknown JSON patch operation {kind!r}")
    return doc


def apply_patch(content_type: str, target: dict[str, Any], body: Any) -> dict[str, Any]:
    ct = content_type.split(";")[0].strip()
    if ct == "application/merge-patch+json":
        out = merge_patch(target, body)
    elif ct == "application/strategic-merge-patch+json":
        out = strategic_merge_patch(target, body)
    elif ct == "application/json-patch+json":
        out = json_patch(target, body)
    else:
        raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted "
                                                    "media types include: application/json-patch+json, "
                                                    "application/merge-patch+json, "
                                                    "application/strategic-merge-patch+json")
    if not isinstance(out, dict):
        raise ApiError(422, "Invalid", "the patch did not produce an object")
    return out
