"""A registry of plugin classes by name, imported lazily, extended by Python entry points.

The scheduler and the descheduler each keep one (with their own base class, built-in names and entry
point group), so a run imports only the plugins it uses and users add plugins without forking.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, ClassVar, Generic, TypeVar

from kubesched.errors import InputError

T = TypeVar("T")


class LazyRegistry(Generic[T]):
    """Plugin name → plugin class. Subclasses set `base`, `builtin`, `entry_point_group` and `what`."""

    base: ClassVar[type[Any]] = object
    builtin: ClassVar[dict[str, str]] = {}
    entry_point_group: ClassVar[str] = ""
    what: ClassVar[str] = "plugin"

    def __init__(self, specs: dict[str, str] | None = None, include_entry_points: bool = True) -> None:
        self._specs: dict[str, str | Callable[[], type[T]]] = dict(self.builtin if specs is None else specs)
        self._loaded: dict[str, type[T]] = {}
        if include_entry_points and self.entry_point_group:
            for ep in entry_points(group=self.entry_point_group):
                self._specs[ep.name] = ep.value

    def _load(self, spec: str, what: str) -> type[T]:
        module_name, _, attr = spec.partition(":")
        try:
            module = importlib.import_module(module_name)
            cls = getattr(module, attr) if attr else None
        except ImportError as e:
            raise InputError(f"cannot import {what} from {spec!r}: {e}") from None
        except AttributeError:
            cls = None
        except Exception as e:  # the module itself failed while it was imported
            raise InputError(f"cannot import {what} from {spec!r}: importing {module_name} raised "
                             f"{type(e).__name__}: {str(e)[:200]}") from None
        if not isinstance(cls, type) or not issubclass(cls, self.base):
            raise InputError(f"{what}: {spec!r} is not a kubesched {self.what} class")
        return cls

    def register(self, name: str, plugin: type[T] | str) -> None:
        if isinstance(plugin, str):
            self._specs[name] = plugin
            self._loaded.pop(name, None)
        else:
            self._loaded[name] = plugin
            self._specs[name] = f"{plugin.__module__}:{plugin.__qualname__}"

    def register_spec(self, spec: str) -> str:
        """Load `module:Class` and register it under the class's `name`; returns that name."""
        cls = self._load(spec, self.what)
        name = getattr(cls, "name", "") or cls.__name__
        self.register(name, cls)
        return name

    def __contains__(self, name: str) -> bool:
        return name in self._specs or name in self._loaded

    def names(self) -> list[str]:
        return sorted(set(self._specs) | set(self._loaded))

    def get(self, name: str) -> type[T]:
        cls = self._loaded.get(name)
        if cls is None:
            spec = self._specs.get(name)
            if spec is None:
                raise KeyError(name)
            cls = self._load(spec, f"{self.what} {name}") if isinstance(spec, str) else spec()
            self._loaded[name] = cls
        return cls
