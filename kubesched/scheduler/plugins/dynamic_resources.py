"""DynamicResources: pods without spec.resourceClaims are skipped; claims themselves are not modelled.

kubesched has no model of ResourceClaims, ResourceSlices or DeviceClasses (device allocation), so a
pod that asks for resource claims is rejected at PreFilter as UnschedulableAndUnresolvable with a reason
that says so, instead of being placed as if its devices were free.
"""

from __future__ import annotations

import re
from typing import Any

from kubesched.api.objects import Pod
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.errors import InputError
from kubesched.scheduler.framework import (
    ClusterEvent,
    CycleState,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    Status,
    skip,
    unresolvable,
)
from kubesched.scheduler.plugins.args import check_known

ERR_REASON_NOT_MODELLED = "pod has resource claims (spec.resourceClaims), which kubesched does not model"
DEFAULT_FILTER_TIMEOUT = "10s"


def _check_duration(value: Any, field: str) -> None:
    """A metav1.Duration ("10s", "1m30s"), not negative."""
    if not isinstance(value, str):
        raise InputError(f"expected a duration such as 10s, got {value!r}", field=field)
    text = value.strip()
    if text in ("0", ""):
        return
    if not re.fullmatch(r"(?:[0-9]+(?:\.[0-9]*)?(?:ns|us|µs|ms|s|m|h))+", text):
        raise InputError(f"expected a non-negative duration such as 10s, got {value!r}", field=field)


def resource_claims(pod: Pod) -> list[Any]:
    spec = pod.raw.get("spec")
    claims = spec.get("resourceClaims") if isinstance(spec, dict) else None
    return claims if isinstance(claims, list) else []


class DynamicResources(PreFilterPlugin, FilterPlugin):
    name = "DynamicResources"

    def __init__(self, args: dict[str, Any] | None, handle: Any) -> None:
        super().__init__(args, handle)
        check_known(self.args, {"filterTimeout", "bindingTimeout"})
        for key in ("filterTimeout", "bindingTimeout"):
            if self.args.get(key) is not None:
                _check_duration(self.args[key], key)

    @classmethod
    def default_args(cls) -> dict[str, Any]:
        return {"filterTimeout": DEFAULT_FILTER_TIMEOUT}

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(k, ("add", "update")) for k in ("ResourceClaim", "ResourceSlice", "DeviceClass")]

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> tuple[PreFilterResult | None, Status]:
        if not resource_claims(pod):
            return None, skip()
        return None, unresolvable(ERR_REASON_NOT_MODELLED)

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        if resource_claims(pod):
            return unresolvable(ERR_REASON_NOT_MODELLED)
        return Status()
