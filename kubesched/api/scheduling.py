"""scheduler-plugins' own objects (group scheduling.x-k8s.io, version v1alpha1): PodGroup and ElasticQuota.

Mirrors kubernetes-sigs/scheduler-plugins `apis/scheduling/v1alpha1/types.go` and the CRDs' validation
(`manifests/crds/`): a PodGroup's `minMember` is at least 1 when given; `scheduleTimeoutSeconds` is an
int32; `minResources`, ElasticQuota `min` and `max` are resource lists. Pods join a group with the label
`scheduling.x-k8s.io/pod-group: <name>` (in the PodGroup's namespace). The status fields are what the
PodGroup controller keeps (phase, running, succeeded, failed, occupiedBy, scheduleStartTime).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubesched.api import fields
from kubesched.api.objects import ObjectMeta, Pod, ResourceList, parse_meta, parse_resource_list, parse_time
from kubesched.errors import InputError

GROUP = "scheduling.x-k8s.io"
API_VERSION = f"{GROUP}/v1alpha1"
POD_GROUP_LABEL = f"{GROUP}/pod-group"

# PodGroupPhase values.
PHASE_PENDING = "Pending"
PHASE_RUNNING = "Running"
PHASE_SCHEDULING = "Scheduling"
PHASE_UNKNOWN = "Unknown"
PHASE_FINISHED = "Finished"
PHASE_FAILED = "Failed"
PHASES = (PHASE_PENDING, PHASE_RUNNING, PHASE_SCHEDULING, PHASE_UNKNOWN, PHASE_FINISHED, PHASE_FAILED)


def pod_group_name(pod: Pod) -> str:
    """util.GetPodGroupLabel: the pod's group name, empty when it has none."""
    return pod.meta.labels.get(POD_GROUP_LABEL, "")


def pod_group_full_name(pod: Pod) -> str:
    """util.GetPodGroupFullName: namespace/name of the pod's group, empty when it has none."""
    name = pod.meta.labels.get(POD_GROUP_LABEL, "")
    return f"{pod.meta.namespace}/{name}" if name else ""


@dataclass(frozen=True, slots=True)
class PodGroupStatus:
    phase: str = ""
    occupied_by: str = ""
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    schedule_start_time: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.phase:
            out["phase"] = self.phase
        if self.occupied_by:
            out["occupiedBy"] = self.occupied_by
        for key, value in (("running", self.running), ("succeeded", self.succeeded), ("failed", self.failed)):
            if value:
                out[key] = value
        return out


@dataclass(frozen=True, slots=True)
class PodGroup:
    """A group of pods scheduled all together or not at all (minMember of them, with minResources)."""

    meta: ObjectMeta
    min_member: int
    min_resources: ResourceList | None
    schedule_timeout_seconds: int | None
    status: PodGroupStatus
    raw: dict[str, Any] = field(repr=False)
    api_version: str = API_VERSION
    kind = "PodGroup"

    @property
    def full_name(self) -> str:
        return self.meta.key


@dataclass(frozen=True, slots=True)
class ElasticQuota:
    """Elastic quota of one namespace: `min` is guaranteed, `max` is the most it may borrow up to."""

    meta: ObjectMeta
    min: ResourceList | None
    max: ResourceList | None
    used: ResourceList
    raw: dict[str, Any] = field(repr=False)
    api_version: str = API_VERSION
    kind = "ElasticQuota"


def _check_api_version(raw: dict[str, Any]) -> str:
    version = raw.get("apiVersion")
    if version != API_VERSION:
        raise InputError(f"expected apiVersion {API_VERSION}, got {version!r}", field="apiVersion")
    return API_VERSION


def _int32(f: fields.Fields, key: str, minimum: int | None = None) -> int | None:
    """An int32 field; below `minimum` is refused with the CRD schema's message."""
    value: int | None = f.integer(key, bits=fields.INT32)
    if value is not None and minimum is not None and value < minimum:
        path = f.path(key)
        raise f.error(key, f"Invalid value: {value}: {path} in body should be greater than or equal to {minimum}")
    return value


def _resource_list(f: fields.Fields, key: str) -> ResourceList | None:
    raw = f.raw.get(key)
    if raw is None:
        return None
    rl = parse_resource_list(raw, f.path(key))
    for name, q in rl.items():
        if q < 0:
            raise InputError(f"must be greater than or equal to 0, got {raw[name]!r}",
                             field=fields.join(f.path(key), name))
    return rl


def parse_pod_group(raw: dict[str, Any]) -> PodGroup:
    meta = parse_meta(raw, "PodGroup", namespaced=True)
    try:
        version = _check_api_version(raw)
        doc = fields.Fields(raw)
        spec = doc.object("spec")
        status = doc.object("status")
        phase = status.string("phase", "")
        if phase and phase not in PHASES:
            raise status.error("phase", f"expected one of {', '.join(PHASES)}, got {phase!r}")
        return PodGroup(
            meta=meta,
            min_member=_int32(spec, "minMember", minimum=1) or 0,
            min_resources=_resource_list(spec, "minResources"),
            schedule_timeout_seconds=_int32(spec, "scheduleTimeoutSeconds"),
            status=PodGroupStatus(
                phase=phase,
                occupied_by=status.string("occupiedBy", ""),
                running=_int32(status, "running", minimum=0) or 0,
                succeeded=_int32(status, "succeeded", minimum=0) or 0,
                failed=_int32(status, "failed", minimum=0) or 0,
                schedule_start_time=parse_time(status.get("scheduleStartTime"), "status.scheduleStartTime"),
            ),
            raw=raw,
            api_version=version,
        )
    except InputError as e:
        raise e.located(obj=f"PodGroup {meta.key}") from None


def parse_elastic_quota(raw: dict[str, Any]) -> ElasticQuota:
    meta = parse_meta(raw, "ElasticQuota", namespaced=True)
    try:
        version = _check_api_version(raw)
        doc = fields.Fields(raw)
        spec = doc.object("spec")
        status = doc.object("status")
        return ElasticQuota(
            meta=meta,
            min=_resource_list(spec, "min"),
            max=_resource_list(spec, "max"),
            used=_resource_list(status, "used") or {},
            raw=raw,
            api_version=version,
        )
    except InputError as e:
        raise e.located(obj=f"ElasticQuota {meta.key}") from None
