"""QOSSort: the queue ordered by priority, then QoS class (Guaranteed, Burstable, BestEffort), then arrival.

Mirrors kubernetes-sigs/scheduler-plugins `pkg/qos/queue_sort.go`: higher priority first; at equal
priority the higher QoS class (v1qos.GetPodQOS: status.qosClass when set, else computed from the spec);
at equal class the earlier queue timestamp. No args.
"""

from __future__ import annotations

from typing import Any

from kubesched.api.qos import BEST_EFFORT, BURSTABLE, GUARANTEED, qos_class
from kubesched.config.plugin_args import no_args
from kubesched.scheduler.framework import QueuedPodInfo, QueueSortPlugin

_RANK = {BEST_EFFORT: 1, BURSTABLE: 2, GUARANTEED: 3}


class QOSSort(QueueSortPlugin):
    name = "QOSSort"
    Args = no_args("QOSSort")

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        pa, pb = a.pod.effective_priority, b.pod.effective_priority
        if pa != pb:
            return pa > pb
        qa, qb = _RANK.get(qos_class(a.pod), 0), _RANK.get(qos_class(b.pod), 0)
        if qa != qb:
            return qa > qb
        return a.timestamp < b.timestamp

    def sort_key(self, qpi: QueuedPodInfo) -> Any:
        return (-qpi.pod.effective_priority, -_RANK.get(qos_class(qpi.pod), 0), qpi.timestamp)
