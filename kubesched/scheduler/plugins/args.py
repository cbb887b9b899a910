"""Reading plugin args with upstream defaults and clear errors (field paths relative to `args`)."""

from __future__ import annotations

from typing import Any

from kubesched.errors import InputError

META_KEYS = {"apiVersion", "kind"}


def check_known(args: dict[str, Any], allowed: set[str] | tuple[str, ...]) -> None:
    """kube-scheduler decodes plugin args strictly: an unknown field is an error."""
    for key in args:
        if key not in META_KEYS and key not in allowed:
            raise InputError(f"unknown field {key!r}; expected one of {', '.join(sorted(allowed))}", field=key)


def get_int(args: dict[str, Any], key: str, default: int | None, lo: int | None = None,
            hi: int | None = None) -> int | None:
    v = args.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise InputError(f"expected an integer, got {v!r}", field=key)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = f"from {lo} to {hi}" if lo is not None and hi is not None else (f">= {lo}" if lo is not None else f"<= {hi}")
        raise InputError(f"expected an integer {rng}, got {v}", field=key)
    return v


def get_number(args: dict[str, Any], key: str, default: float | None) -> float | None:
    v = args.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(f"expected a number, got {v!r}", field=key)
    return float(v)


def get_bool(args: dict[str, Any], key: str, default: bool) -> bool:
    v = args.get(key)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise InputError(f"expected true or false, got {v!r}", field=key)
    return v


def get_str(args: dict[str, Any], key: str, default: str | None) -> str | None:
    v = args.get(key)
    if v is None:
        return default
    if not isinstance(v, str):
        raise InputError(f"expected a string, got {v!r}", field=key)
    return v


def get_list(args: dict[str, Any], key: str) -> list[Any]:
    v = args.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise InputError(f"expected a list, got {type(v).__name__}", field=key)
    return v


def get_dict(args: dict[str, Any], key: str) -> dict[str, Any] | None:
    v = args.get(key)
    if v is None:
        return None
    if not isinstance(v, dict):
        raise InputError(f"expected an object, got {type(v).__name__}", field=key)
    return v


def resource_specs(raw: list[Any], field: str, default: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """A list of {name, weight} (config.ResourceSpec); weight 0 means 1, 1..100 allowed; empty gives `default`."""
    if not raw:
        return list(default)
    out: list[tuple[str, int]] = []
    seen: set[str] = set()
    for i, r in enumerate(raw):
        f = f"{field}[{i}]"
        if not isinstance(r, dict) or not isinstance(r.get("name"), str) or not r["name"]:
            raise InputError("expected a resource with a name and a weight", field=f)
        w = r.get("weight", 0) or 0
        if isinstance(w, bool) or not isinstance(w, int) or w < 0 or w > 100:
            raise InputError(f"expected a weight from 1 to 100, got {w!r}", field=f"{f}.weight")
        if r["name"] in seen:
            raise InputError(f"duplicate resource {r['name']!r}", field=f"{f}.name")
        seen.add(r["name"])
        out.append((r["name"], w or 1))
    return out
