"""TargetLoadPacking: best-fit packing of nodes up to a target CPU utilisation (scheduler-plugins Trimaran).

The node's CPU utilisation U (percent of capacity) is its measured usage plus the pod's predicted usage
plus the predicted usage of pods bound too recently for the metrics to show them. With target X:

    U <= X        : score = round((100 - X) · U / X + X)        (rising to 100 at the target)
    X < U <= 100  : score = round(X · (100 - U) / (100 - X))     (falling to 0 at full)
    U > 100       : score = 0

A container's predicted CPU is its limit when it sets one, else round(request × defaultRequestsMultiplier),
else defaultRequests.cpu; overhead is added. A node without metrics (or without a CPU metric) scores 0.
NormalizeScore is a no-op. Capacity here is status.capacity (not allocatable), as upstream.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubesched.api import fields
from kubesched.api.objects import Container, Pod, parse_resource_list
from kubesched.api.quantity import milli_value_of
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.errors import InputError
from kubesched.scheduler.framework import MIN_NODE_SCORE, SUCCESS, CycleState, Handle, ScorePlugin, Status
from kubesched.scheduler.plugins.gomath import go_round, go_round_array
from kubesched.scheduler.plugins.trimaran.collector import (
    TRIMARAN_SPEC_FIELDS,
    Collector,
    TrimaranArgs,
    tlp_cpu_percent,
)
from kubesched.scheduler.plugins.trimaran.handler import PodAssignEventHandler, is_missing

DEFAULT_REQUESTS_MILLI_CORES = 1000
DEFAULT_REQUESTS_MULTIPLIER = "1.5"
DEFAULT_TARGET_UTILIZATION_PERCENT = 40


def parse_go_float(text: str, field: str) -> float:
    """strconv.ParseFloat(s, 64) for ordinary decimal and exponent forms."""
    try:
        if text != text.strip() or "_" in text:
            raise ValueError(text)
        return float(text)
    except ValueError:
        raise InputError(f"unable to parse DefaultRequestsMultiplier: strconv.ParseFloat: parsing {text!r}: "
                         "invalid syntax", field=field) from None


@dataclass(frozen=True, slots=True)
class TargetLoadPackingArgs(TrimaranArgs):
    """TargetLoadPackingArgs; v1 defaulting: defaultRequests cpu 1000m, multiplier "1.5", targetUtilization 40
    (also for a value that is not positive)."""

    default_requests: Mapping[str, Any] = dataclasses.field(
        default_factory=lambda: {"cpu": f"{DEFAULT_REQUESTS_MILLI_CORES}m"})
    default_requests_multiplier: str = DEFAULT_REQUESTS_MULTIPLIER
    target_utilization: int = DEFAULT_TARGET_UTILIZATION_PERCENT

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> TargetLoadPackingArgs:
        a = fields.Fields(raw, field, allowed={*TRIMARAN_SPEC_FIELDS, "defaultRequests", "defaultRequestsMultiplier",
                                               "targetUtilization"})
        spec = cls.spec_of(a)
        target = a.integer("targetUtilization")
        requests = a.get("defaultRequests")
        if requests is not None:
            parse_resource_list(requests, a.path("defaultRequests"))
        multiplier = a.raw.get("defaultRequestsMultiplier", DEFAULT_REQUESTS_MULTIPLIER)
        if not isinstance(multiplier, str):
            raise a.error("defaultRequestsMultiplier", f"expected a string such as \"1.5\", got {multiplier!r}")
        parse_go_float(multiplier, a.path("defaultRequestsMultiplier"))
        return cls(**spec,
                   default_requests=dict(requests) if requests is not None else {"cpu": f"{DEFAULT_REQUESTS_MILLI_CORES}m"},
                   default_requests_multiplier=multiplier,
                   target_utilization=target if target is not None and target > 0 else DEFAULT_TARGET_UTILIZATION_PERCENT)

    @property
    def default_requests_milli_cores(self) -> int:
        requests = parse_resource_list(self.default_requests, "defaultRequests")
        return milli_value_of(requests["cpu"]) if "cpu" in requests else 0

    @property
    def multiplier(self) -> float:
        return parse_go_float(self.default_requests_multiplier, "defaultRequestsMultiplier")


class TargetLoadPacking(ScorePlugin):
    name = "TargetLoadPacking"
    Args = TargetLoadPackingArgs
    args: TargetLoadPackingArgs

    def __init__(self, args: TargetLoadPackingArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        self.target = args.target_utilization
        self.requests_milli_cores = args.default_requests_milli_cores
        self.requests_multiplier = args.multiplier
        self.collector = Collector(args, handle, self.name)
        self.event_handler = PodAssignEventHandler(handle.cluster, handle.now)

    # ------------------------------------------------------------ prediction

    def predict_utilisation(self, container: Container) -> int:
        """PredictUtilisation: the cpu limit, else round(request × multiplier), else the default."""
        if "cpu" in container.limits:
            return milli_value_of(container.limits["cpu"])
        if "cpu" in container.requests:
            return go_round(float(milli_value_of(container.requests["cpu"])) * self.requests_multiplier)
        return self.requests_milli_cores

    def _overhead_cpu(self, pod: Pod) -> int:
        return milli_value_of(pod.overhead["cpu"]) if "cpu" in pod.overhead else 0

    def pod_cpu(self, pod: Pod) -> int:
        return sum(self.predict_utilisation(c) for c in pod.containers) + self._overhead_cpu(pod)

    def missing_cpu(self, node: str, window_end: float) -> int:
        """The predicted usage of the node's pods bound too recently for the metrics."""
        total = 0
        for info in self.event_handler.recent(node):
            if is_missing(info.timestamp, window_end):
                total += sum(self.predict_utilisation(c) for c in info.pod.containers)
                total += self._overhead_cpu(info.pod)
        return total

    # ------------------------------------------------------------ the formula, over arrays

    def _scores(self, util_pct: np.ndarray, cap_milli: np.ndarray, pod_cpu: int, missing: np.ndarray) -> np.ndarray:
        util_milli = (util_pct / 100) * cap_milli
        safe = np.where(cap_milli != 0, cap_milli, 1.0)
        predicted = np.where(cap_milli != 0, 100 * (util_milli + float(pod_cpu) + missing) / safe, 0.0)
        x = float(self.target)
        over = predicted > x
        # Only the branch each row takes is evaluated for real; the other gets a harmless operand.
        penalised = go_round_array(x * (100 - predicted) / (100 - x if x != 100 else 1.0))
        rising = go_round_array((100 - x) * predicted / x + x)
        scores = np.where(over, np.where(predicted > 100, MIN_NODE_SCORE, penalised), rising)
        return scores.astype(np.int64)

    def _window_end(self) -> float:
        metrics = self.collector.metrics()
        window = metrics.window if metrics is not None and metrics.window is not None else None
        return window.end if window is not None else 0.0

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        metrics, _all = self.collector.node_metrics(node_info.node)
        if metrics is None:
            return MIN_NODE_SCORE, SUCCESS
        pct, found = tlp_cpu_percent(metrics)
        if not found:
            return MIN_NODE_SCORE, SUCCESS
        cap = float(self.collector.capacity(node_info.node).get("cpu", 0))
        missing = float(self.missing_cpu(node_info.name, self._window_end()))
        out = self._scores(np.array([pct]), np.array([cap]), self.pod_cpu(pod), np.array([missing]))
        return int(out[0]), SUCCESS

    def score_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray:
        cols = self.collector.columns(cluster)
        infos = cluster.node_infos
        cap = cols.cap_cpu[rows]
        missing = np.zeros(len(rows), dtype=np.float64)
        recent = set(self.event_handler.nodes())
        if recent:
            end = self._window_end()
            for i, r in enumerate(rows):
                if infos[r].name in recent:
                    missing[i] = float(self.missing_cpu(infos[r].name, end))
        scores = self._scores(cols.tlp_cpu[rows], cap, self.pod_cpu(pod), missing)
        return np.where(cols.has[rows] & cols.tlp_found[rows], scores, MIN_NODE_SCORE).astype(np.int64)
