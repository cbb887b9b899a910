"""Built-in plugins of kubesched's sort extension point (candidate pods, most evictable first).

Upstream has no sort extension point (issue "Introduce sort and preEvictionSort extension points");
strategies order pods themselves. A profile that enables sorters gets them applied, stably, after the
strategy's own order: the first sorter listed is the primary key, ties keep the strategy's order.

- PriorityQoSSort: upstream's order as a plugin (no priority first, lower priority, BestEffort before
  Burstable before Guaranteed, pods without the prefer-no-eviction annotation first).
- ActualUsageSort: by actual usage from metrics.k8s.io PodMetrics (`resource`, default cpu; `order`
  Descending by default, so the pods that relieve a hot node most move first); pods without metrics last.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kubesched.api import fields
from kubesched.api.objects import Pod
from kubesched.config.plugin_args import PluginArgs
from kubesched.descheduler import podutil
from kubesched.descheduler.framework import Handle, SortPlugin
from kubesched.errors import InputError


@dataclass(frozen=True, slots=True)
class PriorityQoSSortArgs(PluginArgs):
    """PriorityQoSSort takes no args."""

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> PriorityQoSSortArgs:
        given = sorted(k for k in fields.mapping(raw, field) if k not in fields.META_KEYS)
        if given:
            raise InputError(f"takes no args, got {', '.join(given)}", field=field or None)
        return cls()


class PriorityQoSSort(SortPlugin):
    name = "PriorityQoSSort"
    Args = PriorityQoSSortArgs

    def sort(self, pods: list[Pod]) -> list[Pod]:
        return sorted(pods, key=podutil.priority_qos_key)


@dataclass(frozen=True, slots=True)
class ActualUsageSortArgs(PluginArgs):
    """ActualUsageSort's args: the resource to sort by (cpu or memory) and the order (Descending by default)."""

    resource: str = "cpu"
    order: str = "Descending"

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> ActualUsageSortArgs:
        a = fields.Fields(raw, field, allowed=("resource", "order"), unknown="unknown field {key!r}; expected resource "
                          "or order")
        resource = a.raw.get("resource", "cpu")
        if resource not in ("cpu", "memory"):
            raise a.error("resource", f"expected cpu or memory, got {resource!r}")
        order = a.raw.get("order", "Descending")
        if order not in ("Ascending", "Descending"):
            raise a.error("order", f"expected Ascending or Descending, got {order!r}")
        return cls(resource, order)


class ActualUsageSort(SortPlugin):
    name = "ActualUsageSort"
    Args = ActualUsageSortArgs
    args: ActualUsageSortArgs

    def __init__(self, args: ActualUsageSortArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        self.resource = args.resource
        self.descending = args.order == "Descending"

    def sort(self, pods: list[Pod]) -> list[Pod]:
        collector = self.handle.services.metrics_collector or self.handle.metrics
        if collector is None:
            return list(pods)

        def key(p: Pod) -> tuple[int, Fraction]:
            used = collector.pod_usage_total(p.namespace, p.name, self.resource)
            if used is None:
                return (1, Fraction(0))
            return (0, -used if self.descending else used)

        return sorted(pods, key=key)
