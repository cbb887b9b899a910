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

from fractions import Fraction
from typing import Any

from kubesched.api.objects import Pod
from kubesched.descheduler import podutil
from kubesched.descheduler.framework import Handle, SortPlugin
from kubesched.errors import InputError


class PriorityQoSSort(SortPlugin):
    name = "PriorityQoSSort"

    @classmethod
    def validate_args(cls, args: dict[str, Any], field: str) -> dict[str, Any]:
        if args:
            raise InputError(f"takes no args, got {', '.join(sorted(args))}", field=field)
        return {}

    def sort(self, pods: list[Pod]) -> list[Pod]:
        return sorted(pods, key=podutil.priority_qos_key)


class ActualUsageSort(SortPlugin):
    name = "ActualUsageSort"

    @classmethod
    def validate_args(cls, args: dict[str, Any], field: str) -> dict[str, Any]:
        for k in args:
            if k not in ("resource", "order"):
                raise InputError(f"unknown field {k!r}; expected resource or order", field=f"{field}.{k}")
        resource = args.get("resource", "cpu")
        if resource not in ("cpu", "memory"):
            raise InputError(f"expected cpu or memory, got {resource!r}", field=f"{field}.resource")
        order = args.get("order", "Descending")
        if order not in ("Ascending", "Descending"):
            raise InputError(f"expected Ascending or Descending, got {order!r}", field=f"{field}.order")
        return {"resource": resource, "order": order}

    def __init__(self, args: dict[str, Any] | None, handle: Handle) -> None:
        super().__init__(args, handle)
        self.resource = str(self.args.get("resource", "cpu"))
        self.descending = self.args.get("order", "Descending") == "Descending"

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
