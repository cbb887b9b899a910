"""Typed plugin args: the base every plugin's args derive from, and how a framework builds them once.

The pattern of the descheduler's `types.go`, `defaults.go` and `validation.go` (and kube-scheduler's
`types_pluginargs.go`, `v1/defaults.go`, `validation_pluginargs.go`): each plugin's args are a frozen
dataclass in the plugin's own file, whose defaults are upstream's defaults and whose `from_raw` decodes a
pluginConfig `args` object strictly (unknown fields are errors, camelCase names become attributes), applies
the defaults and validates with upstream's messages, as InputErrors naming the field from `field`, the path
of the args in the document (empty: paths relative to the args).

A plugin class declares `Args = FooArgs`; the scheduler's Framework and the descheduler's policy loader call
`build_args(cls, raw, field)` once and hand the plugin the result. A third-party plugin without `Args` gets
the raw dict, as before.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, ClassVar, Self

from kubesched.api import fields
from kubesched.errors import InputError


class PluginArgs:
    """Base of every plugin's typed args (a frozen dataclass)."""

    __slots__ = ()

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> Self:
        """Decode, default and validate a pluginConfig `args` object; InputError naming the field."""
        raise NotImplementedError

    def to_raw(self) -> dict[str, Any]:
        """The args as a pluginConfig `args` object: camelCase keys; unset (None) and empty fields left out,
        as Go's `omitempty` leaves them."""
        return _object_to_raw(self)


# dataclasses.field metadata of a field Go tags `omitempty` whose zero value is meaningful to leave out ("", 0,
# false); None, empty lists and empty objects are always left out.
OMITEMPTY: Mapping[str, Any] = {"omitempty": True}


def _object_to_raw(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = to_raw(getattr(obj, f.name))
        if value is None or value == [] or value == {} or (f.metadata.get("omitempty") and not value):
            continue
        out[camel_case(f.name)] = value
    return out


def to_raw(value: Any) -> Any:
    """A typed value back in its document form (dataclasses as camelCase objects, tuples as lists)."""
    if isinstance(value, PluginArgs):
        return value.to_raw()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _object_to_raw(value)
    if isinstance(value, (tuple, list, frozenset)):
        return [to_raw(v) for v in value]
    if isinstance(value, Mapping):
        return {k: to_raw(v) for k, v in value.items()}
    return value


_UPPER = re.compile(r"_([a-z0-9])")


def camel_case(name: str) -> str:
    """A Python attribute name as its JSON field: `min_pod_age` → `minPodAge`."""
    return _UPPER.sub(lambda m: m.group(1).upper(), name)


@dataclasses.dataclass(frozen=True, slots=True)
class NoArgs(PluginArgs):
    """Args of a plugin that registers no args type: kube-scheduler decodes strictly, so any field is an error."""

    plugin: ClassVar[str] = ""

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> Self:
        for key in fields.mapping(raw, field):
            if key not in fields.META_KEYS:
                raise InputError(f"unknown field {key!r}: plugin {cls.plugin} takes no args",
                                 field=fields.join(field, key))
        return cls()


def no_args(plugin: str) -> type[NoArgs]:
    """The NoArgs type of `plugin` (its errors name the plugin)."""
    return type(f"{plugin}NoArgs", (NoArgs,), {"__slots__": (), "plugin": plugin})


def build_args(cls: type[Any], raw: Any, field: str = "") -> Any:
    """What a framework hands plugin class `cls`: its typed `Args` built from the pluginConfig args, or —
    for a plugin without `Args` — the raw args as a dict."""
    args_type = getattr(cls, "Args", None)
    if isinstance(args_type, type) and issubclass(args_type, PluginArgs):
        if raw is not None and not isinstance(raw, Mapping):
            raise InputError(f"expected an object, got {type(raw).__name__}", field=field or None)
        return args_type.from_raw(raw, field)
    return dict(raw) if isinstance(raw, Mapping) else {}
