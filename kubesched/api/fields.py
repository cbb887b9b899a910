"""Typed readers of decoded documents (YAML or JSON): one value, or one object field by field.

Every loader reads through these — plugin args, configurations, policies, scenarios, metrics documents,
Kubernetes objects — so a value of the wrong type is reported the same way everywhere: an InputError that
names the field by its path from the document's root (`profiles[0].pluginConfig[1].args.thresholds.cpu`)
and says what was expected ("expected an integer, got 'ten'"). Objects can refuse fields they do not know,
as Kubernetes' strict decoders do (`apiVersion` and `kind` of typed args are always allowed).

A reader checks the JSON type of a value (and the range of Go's integer types); what a value means and the
upstream validation messages stay with the code that owns the document (a plugin's args, a policy).
Messages take an optional `prefix` (some documents name their owner first: "PodLifeTime args: ...").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kubesched.api.duration import read_duration_seconds
from kubesched.errors import InputError

META_KEYS = frozenset(("apiVersion", "kind"))
# How an unknown field is reported; `allowed` is the list of known fields, in the order the caller gives.
UNKNOWN_FIELD = "unknown field {key!r}; expected one of {allowed}"

INT32 = 32
INT64 = 64
UINT64_MAX = 2**64 - 1


def join(field: str, key: str | int) -> str:
    """The path of `key` inside `field`: `a.b`, `a[0]`, or `b` at the root."""
    if isinstance(key, int):
        return f"{field}[{key}]"
    return f"{field}.{key}" if field else key


def type_name(raw: Any) -> str:
    """How a value of the wrong type is shown where an object or a list was expected."""
    return type(raw).__name__


def _error(message: str, field: str) -> InputError:
    return InputError(message, field=field or None)


# ---------------------------------------------------------------- containers


# The readers that loaders call for every object take their options as plain parameters (pass them by
# name): CPython calls a function with keyword-only defaults on a slower path.


def mapping(raw: Any, field: str, what: str = "an object", prefix: str = "",
            show: Callable[[Any], str] = type_name) -> dict[str, Any]:
    """An object (None reads as empty)."""
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, Mapping):
        raise _error(f"{prefix}expected {what}, got {show(raw)}", field)
    return dict(raw)


def sequence(raw: Any, field: str, what: str = "a list", prefix: str = "",
             show: Callable[[Any], str] = type_name) -> list[Any]:
    """A list (None reads as empty)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _error(f"{prefix}expected {what}, got {show(raw)}", field)
    return raw


def check_known(raw: Mapping[str, Any], field: str, allowed: Iterable[str], *, message: str = UNKNOWN_FIELD,
                prefix: str = "", meta: bool = True, key_field: bool = True) -> None:
    """Strict decoding: every key must be one of `allowed` (and `apiVersion`/`kind` when `meta`).

    The error names the unknown key's path (`key_field`) or the object's; `message` is formatted with the
    key and the allowed names joined by commas, in the caller's order.
    """
    known = allowed if isinstance(allowed, (set, frozenset, dict)) else tuple(allowed)
    for key in raw:
        if key in known or (meta and key in META_KEYS):
            continue
        text = message.format(key=key, allowed=", ".join(known if isinstance(known, tuple) else sorted(known)))
        raise _error(prefix + text, join(field, str(key)) if key_field else field)


# ---------------------------------------------------------------- scalars


def boolean(raw: Any, field: str, *, prefix: str = "") -> bool:
    if not isinstance(raw, bool):
        raise _error(f"{prefix}expected true or false, got {raw!r}", field)
    return raw


def integer(raw: Any, field: str, lo: int | None = None, hi: int | None = None, bits: int | None = None,
            what: str | None = None, whole_floats: bool = False, strings: bool = False, prefix: str = "") -> int:
    """An integer; `bits` bounds it to Go's intN, `lo`/`hi` to a range.

    `whole_floats` accepts 3.0 as 3 (YAML and JSON numbers with a zero fraction); `strings` accepts "3" (the
    object loaders read what kubectl prints leniently). Without `what` the range errors read "expected an
    integer from 0 to 100, got 120" (or "integer … out of range for int32" for `bits`); with it every error
    reads "expected <what>, got …".
    """
    if type(raw) is int and bits is None and lo is None and hi is None:
        return raw  # the common case, kept cheap (object loaders read many)
    if whole_floats and isinstance(raw, float) and raw.is_integer():
        raw = int(raw)
    if strings and isinstance(raw, str):
        try:
            raw = int(raw)
        except ValueError:
            raise _error(f"{prefix}expected {what or 'an integer'}, got {raw!r}", field) from None
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise _error(f"{prefix}expected {what or 'an integer'}, got {raw!r}", field)
    if bits is not None and not -(2 ** (bits - 1)) <= raw < 2 ** (bits - 1):
        text = f"expected {what}, got {raw}" if what else f"integer {raw} out of range for int{bits}"
        raise _error(prefix + text, field)
    if (lo is not None and raw < lo) or (hi is not None and raw > hi):
        if what:
            raise _error(f"{prefix}expected {what}, got {raw}", field)
        rng = f"from {lo} to {hi}" if lo is not None and hi is not None else (f">= {lo}" if lo is not None else f"<= {hi}")
        raise _error(f"{prefix}expected an integer {rng}, got {raw}", field)
    return raw


def optional_integer(raw: Any, field: str, default: int | None = None, **kw: Any) -> int | None:
    """`integer`, or `default` when the value is null or absent."""
    return default if raw is None else integer(raw, field, **kw)


def unsigned(raw: Any, field: str, *, prefix: str = "", whole_floats: bool = True) -> int:
    """A Go `uint`: an integer from 0 to 2^64-1."""
    return integer(raw, field, lo=0, hi=UINT64_MAX, what="a non-negative integer", whole_floats=whole_floats,
                   prefix=prefix)


def number(raw: Any, field: str, *, what: str = "a number", prefix: str = "") -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise _error(f"{prefix}expected {what}, got {raw!r}", field)
    return float(raw)


def string(raw: Any, field: str, *, what: str = "a string", prefix: str = "") -> str:
    if not isinstance(raw, str):
        raise _error(f"{prefix}expected {what}, got {raw!r}", field)
    return raw


def strings(raw: Any, field: str, *, what: str = "a list of strings", prefix: str = "",
            show: Callable[[Any], str] = type_name) -> list[str]:
    """A list of strings (None reads as empty); a wrong item is named by its index."""
    return [string(v, join(field, i), prefix=prefix) for i, v in enumerate(sequence(raw, field, what=what,
                                                                                          prefix=prefix, show=show))]


def integers(raw: Any, field: str, *, what: str = "a list of integers", prefix: str = "",
             show: Callable[[Any], str] = type_name, item_what: str | None = None, bits: int | None = None,
             whole_floats: bool = False) -> list[int]:
    """A list of integers (None reads as empty); each element read by `integer` (`item_what` is its `what`)."""
    return [integer(v, join(field, i), prefix=prefix, what=item_what, bits=bits, whole_floats=whole_floats)
            for i, v in enumerate(sequence(raw, field, what=what, prefix=prefix, show=show))]


def label_map(raw: Any, field: str) -> dict[str, str]:
    """A map of strings as the API server stores labels and annotations (null reads as "", booleans and
    numbers as their text; an object or a list is refused, as the API server's decoder refuses it)."""
    out: dict[str, str] = {}
    for k, v in mapping(raw, field, what="a map").items():
        if v is None:
            out[str(k)] = ""
        elif isinstance(v, bool):
            out[str(k)] = "true" if v else "false"
        elif isinstance(v, (dict, list)):
            raise _error(f"expected a string, got {type_name(v)}", join(field, str(k)))
        else:
            out[str(k)] = str(v)
    return out


# ---------------------------------------------------------------- objects


class Fields:
    """One object of a document, read field by field.

    `field` is the object's path (errors name `field.key`); `allowed`, when given, refuses other keys (with
    `unknown` as the message); `prefix` starts every message; `file` is added to every error.
    A missing key and an explicit null read the same: the default.
    """

    __slots__ = ("raw", "field", "prefix", "file")

    def __init__(self, raw: Any, field: str = "", *, allowed: Iterable[str] | None = None,
                 unknown: str = UNKNOWN_FIELD, prefix: str = "", what: str = "an object",
                 show: Callable[[Any], str] = type_name, meta: bool = True, file: str | None = None) -> None:
        self.prefix = prefix
        self.file = file
        self.field = field
        try:
            self.raw = mapping(raw, field, what=what, prefix=prefix, show=show)
            if allowed is not None:
                check_known(self.raw, field, allowed, message=unknown, prefix=prefix, meta=meta)
        except InputError as e:
            raise e.located(file=file) from None

    def path(self, key: str | int) -> str:
        return join(self.field, key)

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def get(self, key: str, default: Any = None) -> Any:
        v = self.raw.get(key)
        return default if v is None else v

    def error(self, key: str | int, message: str) -> InputError:
        """An error about `key` (the prefix added)."""
        return InputError(self.prefix + message, file=self.file, field=self.path(key))

    def required(self, key: str, message: str = "required field is missing") -> Any:
        v = self.raw.get(key)
        if v is None:
            raise self.error(key, message)
        return v

    def _read(self, reader: Callable[..., Any], key: str, **kw: Any) -> Any:
        try:
            return reader(self.raw[key], self.path(key), prefix=self.prefix, **kw)
        except InputError as e:
            raise e.located(file=self.file) from None

    def boolean(self, key: str, default: bool = False) -> bool:
        return default if self.raw.get(key) is None else self._read(boolean, key)  # type: ignore[no-any-return]

    def integer(self, key: str, default: int | None = None, **kw: Any) -> Any:
        """`integer`'s options; None (or `default`) when absent."""
        return default if self.raw.get(key) is None else self._read(integer, key, **kw)

    def unsigned(self, key: str, default: int | None = None, **kw: Any) -> Any:
        return default if self.raw.get(key) is None else self._read(unsigned, key, **kw)

    def number(self, key: str, default: float | None = None, **kw: Any) -> Any:
        return default if self.raw.get(key) is None else self._read(number, key, **kw)

    def string(self, key: str, default: str | None = None, **kw: Any) -> Any:
        return default if self.raw.get(key) is None else self._read(string, key, **kw)

    def strings(self, key: str, **kw: Any) -> list[str]:
        return self._read(strings, key, **kw) if key in self.raw else []  # type: ignore[no-any-return]

    def integers(self, key: str, **kw: Any) -> list[int]:
        return self._read(integers, key, **kw) if key in self.raw else []  # type: ignore[no-any-return]

    def sequence(self, key: str, **kw: Any) -> list[Any]:
        return self._read(sequence, key, **kw) if key in self.raw else []  # type: ignore[no-any-return]

    def mapping(self, key: str, **kw: Any) -> dict[str, Any]:
        return self._read(mapping, key, **kw) if key in self.raw else {}  # type: ignore[no-any-return]

    def object(self, key: str, allowed: Iterable[str] | None = None, **kw: Any) -> Fields:
        """The object at `key` (empty when absent), read with this object's prefix and file."""
        kw.setdefault("prefix", self.prefix)
        return Fields(self.raw.get(key), self.path(key), allowed=allowed, file=self.file, **kw)

    def duration_seconds(self, key: str, default: float | None = None, **kw: Any) -> Any:
        """`read_duration_seconds`' options; `default` when absent."""
        if self.raw.get(key) is None:
            return default
        try:
            return read_duration_seconds(self.raw[key], self.path(key), **kw)
        except InputError as e:
            raise e.located(file=self.file) from None
