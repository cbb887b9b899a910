"""Shared pieces of the descheduler strategies: argument reading, pod listing and filters, eviction calls.

Arguments are read (kubesched.api.fields) the way the descheduler's strict decoder reads plugin args: unknown
fields and values of the wrong type are errors, named by field. Pod listings mirror `podutil.ListPodsOnANode` (phases other than
Succeeded/Failed) and `ListAllPodsOnANode` (every phase); each listing is in pod-name order, the
deterministic order upstream's own tests impose on the (otherwise unordered) pod informer index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubesched.api import fields
from kubesched.api.objects import Node, Pod, Taint
from kubesched.api.selectors import LabelSelector, parse_label_selector
from kubesched.descheduler import podutil
from kubesched.descheduler.framework import EvictionLimitError, EvictOptions, Handle
from kubesched.errors import InputError

PodFilter = Callable[[Pod], bool]

# Go's zero time.Time: the creation time of an object without metadata.creationTimestamp.
GO_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)
# time.Duration saturates at about 292 years; ages are capped the same way.
MAX_DURATION_SECONDS = (2**63 - 1) / 1e9


# ---------------------------------------------------------------- reading args


def strategy_fields(plugin: str, raw: Any, field: str, allowed: tuple[str, ...]) -> fields.Fields:
    """A strategy's args object, read as the descheduler's strict decoder reads it: unknown fields (names are
    case-sensitive) and values of the wrong type are errors; every message starts with "<plugin> args: "."""
    return fields.Fields(raw, field, allowed=allowed, prefix=f"{plugin} args: ",
                         unknown="unknown field {key!r} (expected one of {allowed})")


def int32(a: fields.Fields, name: str, default: int = 0) -> int:
    """An `int32` field (JSON numbers like 3.0 decode into Go integers; 3.5 or "3" do not)."""
    return a.integer(name, default, bits=fields.INT32, what="a 32-bit integer", whole_floats=True)  # type: ignore[no-any-return]


def optional_strings(a: fields.Fields, name: str) -> list[str] | None:
    """A `[]string` field: None when absent or null."""
    return a.strings(name, show=repr) if a.has(name) else None


def optional_int32s(a: fields.Fields, name: str) -> list[int] | None:
    """A `[]int32` field: None when absent or null."""
    if not a.has(name):
        return None
    return a.integers(name, show=repr, item_what="a 32-bit integer", bits=fields.INT32, whole_floats=True)


@dataclass(frozen=True, slots=True)
class IncludeExclude:
    """api.Namespaces (and PodLifeTime's OwnerKinds): an include list and an exclude list."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()


def include_exclude(a: fields.Fields, name: str, what: str) -> IncludeExclude | None:
    """An {include, exclude} field (None when absent); only one of the two may be set."""
    if not a.has(name):
        return None
    v = a.object(name, ("include", "exclude"), what="an object with include and/or exclude", show=repr, meta=False,
                 unknown="unknown field {key!r} (expected include or exclude)")
    include = optional_strings(v, "include") or []
    exclude = optional_strings(v, "exclude") or []
    if include and exclude:
        raise a.error(name, f"only one of Include/Exclude {what} can be set")
    return IncludeExclude(tuple(include), tuple(exclude))


def namespaces(a: fields.Fields) -> IncludeExclude | None:
    return include_exclude(a, "namespaces", "namespaces")


def label_selector(a: fields.Fields, name: str = "labelSelector") -> LabelSelector | None:
    """A `*metav1.LabelSelector`: None when absent (no filtering); otherwise it must convert to a selector."""
    v = a.get(name)
    if v is None:
        return None
    try:
        return parse_label_selector(v, a.path(name))
    except InputError as e:
        raise InputError(f"{a.prefix}failed to get label selectors from strategy's params: {e.message}",
                         field=e.field) from None


# ---------------------------------------------------------------- pod filters and listings


def namespace_label_filter(namespaces: IncludeExclude | None, selector: LabelSelector | None) -> PodFilter:
    """podutil.Options without the evictor filter: included/excluded namespaces and the label selector."""
    include = frozenset(namespaces.include) if namespaces else frozenset()
    exclude = frozenset(namespaces.exclude) if namespaces else frozenset()

    def keep(pod: Pod) -> bool:
        if include and pod.namespace not in include:
            return False
        if exclude and pod.namespace in exclude:
            return False
        if selector is not None and not selector.matches(pod.labels):
            return False
        return True

    return keep


def all_of(*filters: PodFilter | None) -> PodFilter:
    """podutil.WrapFilterFuncs: every filter in order (None filters are skipped)."""
    fs = tuple(f for f in filters if f is not None)

    def keep(pod: Pod) -> bool:
        for f in fs:
            if not f(pod):
                return False
        return True

    return keep


def by_name(pods: Iterable[Pod]) -> list[Pod]:
    return sorted(pods, key=lambda p: (p.name, p.namespace))


def list_pods_on_node(handle: Handle, node_name: str, pod_filter: PodFilter | None = None) -> list[Pod]:
    """podutil.ListPodsOnANode: pods assigned to the node that are neither Succeeded nor Failed."""
    return by_name(podutil.list_pods_on_a_node(handle.cluster, node_name, pod_filter))


def list_all_pods_on_node(handle: Handle, node_name: str, pod_filter: PodFilter | None = None) -> list[Pod]:
    """podutil.ListAllPodsOnANode: every pod assigned to the node, Succeeded and Failed ones included."""
    return by_name(podutil.list_all_pods_on_a_node(handle.cluster, node_name, pod_filter))


def list_pods_on_nodes(handle: Handle, nodes: Iterable[Node], pod_filter: PodFilter | None = None) -> list[Pod]:
    """podutil.ListPodsOnNodes: ListPodsOnANode for each node, in node order."""
    out: list[Pod] = []
    for node in nodes:
        out.extend(list_pods_on_node(handle, node.name, pod_filter))
    return out


# ---------------------------------------------------------------- pod status


def _status_list(pod: Pod, key: str) -> list[dict[str, Any]]:
    v = pod.status.get(key)
    if not isinstance(v, list):
        return []
    return [cs for cs in v if isinstance(cs, dict)]


def container_statuses(pod: Pod, init: bool = False, ephemeral: bool = False) -> list[dict[str, Any]]:
    key = "initContainerStatuses" if init else "ephemeralContainerStatuses" if ephemeral else "containerStatuses"
    return _status_list(pod, key)


def _state(cs: Mapping[str, Any], which: str) -> Mapping[str, Any] | None:
    state = cs.get("state")
    if not isinstance(state, Mapping):
        return None
    s = state.get(which)
    return s if isinstance(s, Mapping) else None


def waiting_reason(cs: Mapping[str, Any]) -> str | None:
    """state.waiting.reason, or None when the container is not waiting."""
    w = _state(cs, "waiting")
    return None if w is None else str(w.get("reason") or "")


def terminated_reason(cs: Mapping[str, Any]) -> str | None:
    t = _state(cs, "terminated")
    return None if t is None else str(t.get("reason") or "")


def terminated_exit_code(pod: Pod, cs: Mapping[str, Any]) -> int | None:
    t = _state(cs, "terminated")
    if t is None:
        return None
    return status_int(pod, t.get("exitCode"), "status.containerStatuses[].state.terminated.exitCode")


def status_int(pod: Pod, v: Any, field: str) -> int:
    """An integer of a pod's status (0 when unset)."""
    try:
        return fields.optional_integer(v, field, 0, whole_floats=True) or 0
    except InputError as e:
        raise e.located(obj=f"Pod {pod.key}") from None


def pod_status_reason(pod: Pod) -> str:
    return str(pod.status.get("reason") or "")


def has_matching_waiting_state(statuses: list[dict[str, Any]], states: frozenset[str]) -> bool:
    """podutil.HasMatchingContainerWaitingState."""
    for cs in statuses:
        r = waiting_reason(cs)
        if r is not None and r in states:
            return True
    return False


def has_matching_terminated_state(statuses: list[dict[str, Any]], states: frozenset[str]) -> bool:
    """podutil.HasMatchingContainerTerminatedState."""
    for cs in statuses:
        r = terminated_reason(cs)
        if r is not None and r in states:
            return True
    return False


def creation_time(pod: Pod) -> datetime:
    return pod.meta.creation_timestamp or GO_ZERO_TIME


def seconds_since(now: datetime, then: datetime) -> float:
    """`now.Sub(then).Seconds()`, saturating like time.Duration."""
    s = (now - then).total_seconds()
    return min(max(s, -MAX_DURATION_SECONDS), MAX_DURATION_SECONDS)


# ---------------------------------------------------------------- node matching


def no_schedule_or_execute(taint: Taint) -> bool:
    return taint.effect in ("NoSchedule", "NoExecute")


def raw_spec(pod: Pod) -> Mapping[str, Any]:
    spec = pod.raw.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def has_node_selector_or_affinity(pod: Pod) -> bool:
    """`pod.Spec.NodeSelector != nil || pod.Spec.Affinity.NodeAffinity != nil` (a set but empty map counts)."""
    spec = raw_spec(pod)
    if spec.get("nodeSelector") is not None:
        return True
    aff = spec.get("affinity")
    return isinstance(aff, Mapping) and aff.get("nodeAffinity") is not None


# ---------------------------------------------------------------- evicting


EVICTED = "evicted"
FAILED = "failed"
NODE_LIMIT = "node"
NAMESPACE_LIMIT = "namespace"
TOTAL_LIMIT = "total"


def evict(handle: Handle, pod: Pod, plugin: str, reason: str = "") -> str:
    """Evictor().Evict, with its outcome as a word: EVICTED, FAILED (upstream only logs it), or the limit
    that stopped it (NODE_LIMIT, NAMESPACE_LIMIT, TOTAL_LIMIT). Strategies stop with a node on NODE_LIMIT,
    stop altogether on TOTAL_LIMIT, and go on with the next pod otherwise."""
    try:
        ok = handle.evictor.evict(pod, EvictOptions(reason=reason, profile=handle.profile, plugin=plugin))
    except EvictionLimitError as e:
        return e.limit if e.limit in (NODE_LIMIT, NAMESPACE_LIMIT, TOTAL_LIMIT) else FAILED
    return EVICTED if ok is not False else FAILED
