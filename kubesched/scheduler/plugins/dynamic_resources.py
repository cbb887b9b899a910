"""DynamicResources: pods without spec.resourceClaims are skipped; claims themselves are not modelled.

kubesched has no model of ResourceClaims, ResourceSlices or DeviceClasses (device allocation), so a
pod that asks for resource claims is rejected at PreFilter as UnschedulableAndUnresolvable with a reason
that says so, instead of being placed as if its devices were free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubesched.api import fields
from kubesched.api.objects import Pod
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.config.plugin_args import PluginArgs
from kubesched.scheduler.framework import (
    SUCCESS,
    ClusterEvent,
    CycleState,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    Status,
    skip,
    unresolvable,
)

ERR_REASON_NOT_MODELLED = "pod has resource claims (spec.resourceClaims), which kubesched does not model"
DEFAULT_FILTER_TIMEOUT = "10s"


@dataclass(frozen=True, slots=True)
class DynamicResourcesArgs(PluginArgs):
    """DynamicResourcesArgs: filterTimeout (v1 default 10s) and bindingTimeout, metav1.Durations that may not
    be negative; kubesched models no device allocation, so neither changes a placement."""

    filter_timeout: str = DEFAULT_FILTER_TIMEOUT
    binding_timeout: str | None = None

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> DynamicResourcesArgs:
        a = fields.Fields(raw, field, allowed={"filterTimeout", "bindingTimeout"})
        for key in ("filterTimeout", "bindingTimeout"):
            a.duration_seconds(key, example="10s", negative=False)
        return cls(a.get("filterTimeout", DEFAULT_FILTER_TIMEOUT), a.get("bindingTimeout"))


def resource_claims(pod: Pod) -> list[Any]:
    spec = pod.raw.get("spec")
    claims = spec.get("resourceClaims") if isinstance(spec, dict) else None
    return claims if isinstance(claims, list) else []


class DynamicResources(PreFilterPlugin, FilterPlugin):
    name = "DynamicResources"
    Args = DynamicResourcesArgs
    args: DynamicResourcesArgs

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(k, ("add", "update")) for k in ("ResourceClaim", "ResourceSlice", "DeviceClass")]

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> tuple[PreFilterResult | None, Status]:
        if not resource_claims(pod):
            return None, skip()
        return None, unresolvable(ERR_REASON_NOT_MODELLED)

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        if resource_claims(pod):
            return unresolvable(ERR_REASON_NOT_MODELLED)
        return SUCCESS
