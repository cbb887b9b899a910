"""PrioritySort: higher priority first, then the earlier queue timestamp."""

from __future__ import annotations

from typing import Any

from kubesched.config.plugin_args import no_args
from kubesched.scheduler.framework import QueuedPodInfo, QueueSortPlugin


class PrioritySort(QueueSortPlugin):
    name = "PrioritySort"
    Args = no_args("PrioritySort")

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        pa, pb = a.pod.effective_priority, b.pod.effective_priority
        return pa > pb or (pa == pb and a.timestamp < b.timestamp)

    def sort_key(self, qpi: QueuedPodInfo) -> Any:
        return (-qpi.pod.effective_priority, qpi.timestamp)
