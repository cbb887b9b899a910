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

from kubesched.api import fields
from kubesched.api.objects import Pod
from kubesched.api.resources import CPU, EPHEMERAL_STORAGE, MEMORY, is_scalar_resource
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.config.plugin_args import PluginArgs
from kubesched.scheduler.framework import CycleState, Handle, ScorePlugin, Status
from kubesched.scheduler.plugins.gomath import go_div, go_div_array
from kubesched.scheduler.plugins.pod_state import min_max_normalize
from kubesched.scheduler.plugins.resource_allocation import ResourceSpec

LEAST = "Least"
MOST = "Most"
DEFAULT_RESOURCES = (ResourceSpec(CPU, 1 << 20), ResourceSpec(MEMORY, 1))


@dataclass(frozen=True, slots=True)
class NodeResourcesAllocatableArgs(PluginArgs):
    """NodeResourcesAllocatableArgs (v1): `resources` (name and weight), `mode`."""

    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    mode: str = LEAST

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> NodeResourcesAllocatableArgs:
        a = fields.Fields(raw, field, allowed=("mode", "resources"))
        weights: dict[str, int] = {}
        for i, item in enumerate(a.sequence("resources")):
            r = fields.Fields(item, fields.join(a.path("resources"), i), allowed=("name", "weight"))
            name = r.string("name", "")
            weight = r.integer("weight", 0, bits=fields.INT64)
            if weight <= 0:  # ValidateNodeResourcesAllocatableArgs
                raise r.error("weight", f"Invalid value: {weight}: resource weight of {name} should be a positive "
                                        f"value, got :{weight}")
            weights[name] = weight  # a repeated name keeps its last weight (the plugin reads a map)
        mode = a.string("mode", "") or LEAST
        if mode not in (LEAST, MOST):
            raise a.error("mode", f"Invalid value: {mode!r}: invalid support ModeType")
        resources = tuple(ResourceSpec(n, w) for n, w in weights.items())
        return cls(resources or DEFAULT_RESOURCES, mode)


def _allocatable_of(info_alloc: Mapping[str, int], resource: str) -> int:
    """calculateResourceAllocatableRequest's allocatable side."""
    if resource in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar_resource(resource):
        return info_alloc.get(resource, 0)
    return 0


class NodeResourcesAllocatable(ScorePlugin):
    name = "NodeResourcesAllocatable"
    Args = NodeResourcesAllocatableArgs

    def __init__(self, args: NodeResourcesAllocatableArgs | None, handle: Handle) -> None:
        super().__init__(args if args is not None else NodeResourcesAllocatableArgs(), handle)
        self.args: NodeResourcesAllocatableArgs
        self.sign = -1 if self.args.mode == LEAST else 1
        self.weight_sum = sum(r.weight for r in self.args.resources)

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        total = 0
        for r in self.args.resources:
            total += self.sign * _allocatable_of(node_info.allocatable, r.name) * r.weight
        return go_div(total, self.weight_sum), Status()

    def score_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray | None:
        table = cluster.table
        total = np.zeros(len(rows), dtype=np.int64)
        for r in self.args.resources:
            col = table.column.get(r.name)
            if col is None or not (r.name in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar_resource(r.name)):
                continue
            total += self.sign * table.alloc[rows, col] * r.weight
        return go_div_array(total, self.weight_sum)

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray, rows: np.ndarray) -> Status | None:
        min_max_normalize(scores)
        return Status()
