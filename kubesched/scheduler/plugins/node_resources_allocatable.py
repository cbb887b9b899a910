"""NodeResourcesAllocatable: prefer nodes with the least (or most) allocatable resources, weighted.

Mirrors kubernetes-sigs/scheduler-plugins `pkg/noderesources/allocatable.go` and `resource_allocation.go`
(args: `apis/config/v1/types.go`, `defaults.go`, `validation/validation_pluginargs.go`). A node's raw score
is Σ(±allocatable(r) · weight(r)) / Σ weight(r) in Go integer division — negative allocatable in mode
Least, positive in mode Most — where allocatable is millicores for cpu, bytes for memory and
ephemeral-storage, the Value() of a scalar (extended, hugepages, …) resource, and 0 for any other name.
The pod's requests do not change the score. NormalizeScore maps lowest..highest onto 0..100.

Args: `resources` ([{name, weight}], default cpu 1<<20 and memory 1: a millicore weighs as much as a MiB;
each weight must be positive, no upper bound), `mode` (Least, the default, or Most).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubesched.api.objects import Pod
from kubesched.api.resources import CPU, EPHEMERAL_STORAGE, MEMORY, is_scalar_resource
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.errors import InputError
from kubesched.scheduler.framework import CycleState, Handle, ScorePlugin, Status
from kubesched.scheduler.plugins.args import META_KEYS
from kubesched.scheduler.plugins.gomath import go_div, go_div_array
from kubesched.scheduler.plugins.pod_state import min_max_normalize

LEAST = "Least"
MOST = "Most"
DEFAULT_RESOURCES: tuple[tuple[str, int], ...] = ((CPU, 1 << 20), (MEMORY, 1))


@dataclass(frozen=True, slots=True)
class NodeResourcesAllocatableArgs:
    resources: tuple[tuple[str, int], ...] = DEFAULT_RESOURCES
    mode: str = LEAST

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> NodeResourcesAllocatableArgs:
        raw = raw or {}
        prefix = f"{field}." if field else ""
        for key in raw:
            if key not in ("resources", "mode") and key not in META_KEYS:
                raise InputError(f"unknown field {key!r}; expected one of mode, resources", field=prefix + key)
        items = raw.get("resources")
        if items is not None and not isinstance(items, list):
            raise InputError(f"expected a list, got {type(items).__name__}", field=prefix + "resources")
        resources: list[tuple[str, int]] = []
        for i, r in enumerate(items or []):
            f = f"{prefix}resources[{i}]"
            if not isinstance(r, dict) or not isinstance(r.get("name"), str):
                raise InputError("expected a resource with a name and a weight", field=f)
            unknown = set(r) - {"name", "weight"}
            if unknown:
                raise InputError(f"unknown field {sorted(unknown)[0]!r}", field=f)
            w = r.get("weight", 0)
            if isinstance(w, bool) or not isinstance(w, int):
                raise InputError(f"expected an integer weight, got {w!r}", field=f"{f}.weight")
            if w <= 0:
                raise InputError(f"Invalid value: {w}: resource weight of {r['name']} should be a positive value, "
                                 f"got :{w}", field=f"{f}.weight")
            resources.append((r["name"], w))
        mode = raw.get("mode") or LEAST
        if mode not in (LEAST, MOST):
            raise InputError(f"Invalid value: {mode!r}: invalid support ModeType", field=prefix + "mode")
        # A repeated name keeps its last weight (the args become a map).
        merged = dict(resources) if resources else dict(DEFAULT_RESOURCES)
        return cls(tuple(merged.items()), mode)


def _allocatable_of(info_alloc: Mapping[str, int], resource: str) -> int:
    """calculateResourceAllocatableRequest's allocatable side."""
    if resource in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar_resource(resource):
        return info_alloc.get(resource, 0)
    return 0


class NodeResourcesAllocatable(ScorePlugin):
    name = "NodeResourcesAllocatable"
    Args = NodeResourcesAllocatableArgs

    def __init__(self, args: NodeResourcesAllocatableArgs | Mapping[str, Any] | None, handle: Handle) -> None:
        super().__init__(None, handle)
        self.args = (args if isinstance(args, NodeResourcesAllocatableArgs)
                     else NodeResourcesAllocatableArgs.from_raw(args))
        self.sign = -1 if self.args.mode == LEAST else 1
        self.weight_sum = sum(w for _, w in self.args.resources)

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        total = 0
        for resource, weight in self.args.resources:
            total += self.sign * _allocatable_of(node_info.allocatable, resource) * weight
        return go_div(total, self.weight_sum), Status()

    def score_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray | None:
        table = cluster.table
        total = np.zeros(len(rows), dtype=np.int64)
        for resource, weight in self.args.resources:
            col = table.column.get(resource)
            if col is None or not (resource in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar_resource(resource)):
                continue
            total += self.sign * table.alloc[rows, col] * weight
        return go_div_array(total, self.weight_sum)

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray, rows: np.ndarray) -> Status | None:
        min_max_normalize(scores)
        return Status()
