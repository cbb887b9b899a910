"""koordinator's API extensions that its load-aware plugins read (`apis/extension`).

Priority classes (koord-prod, koord-mid, koord-batch, koord-free) from the `koordinator.sh/priority-class`
label, else the priority value's band, else the QoS class; koordinator QoS classes from the
`koordinator.sh/qosClass` label, else from the Kubernetes QoS; per-node usage thresholds and raw
allocatable from annotations; per-pod estimation overrides from annotations. Malformed annotations are
ignored as upstream ignores them (logged there, not fatal).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kubesched.api.objects import Node, Pod, parse_resource_list
from kubesched.api.qos import BEST_EFFORT, BURSTABLE, GUARANTEED, qos_class
from kubesched.api.quantity import milli_value_of, value_of
from kubesched.errors import InputError

PRIORITY_PROD = "koord-prod"
PRIORITY_MID = "koord-mid"
PRIORITY_BATCH = "koord-batch"
PRIORITY_FREE = "koord-free"
PRIORITY_NONE = ""
PRIORITY_CLASSES = (PRIORITY_PROD, PRIORITY_MID, PRIORITY_BATCH, PRIORITY_FREE)

QOS_SYSTEM, QOS_LSE, QOS_LSR, QOS_LS, QOS_BE, QOS_NONE = "SYSTEM", "LSE", "LSR", "LS", "BE", ""

LABEL_PRIORITY_CLASS = "koordinator.sh/priority-class"
LABEL_QOS = "koordinator.sh/qosClass"
ANNOTATION_RAW_ALLOCATABLE = "node.koordinator.sh/raw-allocatable"
ANNOTATION_USAGE_THRESHOLDS = "scheduling.koordinator.sh/usage-thresholds"
ANNOTATION_SCALING_FACTORS = "scheduling.koordinator.sh/load-estimated-scaling-factors"
ANNOTATION_SECONDS_AFTER_SCHEDULED = "scheduling.koordinator.sh/load-estimated-seconds-after-pod-scheduled"
ANNOTATION_SECONDS_AFTER_INITIALIZED = "scheduling.koordinator.sh/load-estimated-seconds-after-initialized"

BATCH_CPU = "kubernetes.io/batch-cpu"
BATCH_MEMORY = "kubernetes.io/batch-memory"
MID_CPU = "kubernetes.io/mid-cpu"
MID_MEMORY = "kubernetes.io/mid-memory"
RESOURCE_NAME_MAP = {PRIORITY_BATCH: {"cpu": BATCH_CPU, "memory": BATCH_MEMORY},
                     PRIORITY_MID: {"cpu": MID_CPU, "memory": MID_MEMORY}}

# Priority value bands (PriorityProdValueMin..Max, ...).
_BANDS = ((9000, 9999, PRIORITY_PROD), (7000, 7999, PRIORITY_MID), (5000, 5999, PRIORITY_BATCH),
          (3000, 3999, PRIORITY_FREE))


def priority_class_by_name(name: str) -> str:
    return name if name in PRIORITY_CLASSES else PRIORITY_NONE


def priority_class_raw(pod: Pod) -> str:
    """GetPodPriorityClassRaw: the label, else the priority value's band, else none."""
    if LABEL_PRIORITY_CLASS in pod.labels:
        return priority_class_by_name(pod.labels[LABEL_PRIORITY_CLASS])
    if pod.priority is None:
        return PRIORITY_NONE
    for lo, hi, cls in _BANDS:
        if lo <= pod.priority <= hi:
            return cls
    return PRIORITY_NONE


def qos_class_raw(pod: Pod) -> str:
    """GetPodQoSClassRaw: koordinator's own QoS (the `koordinator.sh/qosClass` label: SYSTEM, LSE, LSR, LS, BE),
    a different notion from Kubernetes' QoS class (kubesched.api.qos.qos_class), which it defaults from."""
    q = pod.labels.get(LABEL_QOS)
    return q if q in (QOS_SYSTEM, QOS_LSE, QOS_LSR, QOS_LS, QOS_BE) else QOS_NONE


def koord_qos_class(pod: Pod) -> str:
    """GetPodQoSClassWithDefault: the label, else Guaranteed → LSR, Burstable → LS, BestEffort → BE."""
    q = qos_class_raw(pod)
    if q:
        return q
    return {GUARANTEED: QOS_LSR, BURSTABLE: QOS_LS, BEST_EFFORT: QOS_BE}.get(qos_class(pod), QOS_NONE)


def priority_class(pod: Pod) -> str:
    """GetPodPriorityClassWithDefault: the pod's class, or the one its QoS implies (LS/LSR/LSE/SYSTEM → prod,
    BE → batch)."""
    cached = pod.cache.get("koord_priority_class")
    if cached is None:
        cached = priority_class_raw(pod)
        if not cached:
            q = koord_qos_class(pod)
            cached = PRIORITY_PROD if q in (QOS_SYSTEM, QOS_LSE, QOS_LSR, QOS_LS) else (
                PRIORITY_BATCH if q == QOS_BE else PRIORITY_NONE)
        pod.cache["koord_priority_class"] = cached
    return str(cached)


def translate_resource_name(priority: str, resource: str) -> str:
    """TranslateResourceNameByPriorityClass: batch and mid pods are accounted in batch-/mid- resources."""
    if priority in (PRIORITY_PROD, PRIORITY_NONE):
        return resource
    return RESOURCE_NAME_MAP.get(priority, {}).get(resource, "")


def units(resource: str, q: Any) -> int:
    return milli_value_of(q) if resource == "cpu" else value_of(q)


def raw_allocatable(node: Node) -> dict[str, Any] | None:
    """The node's un-amplified allocatable (annotation), or None when absent or unreadable."""
    s = node.meta.annotations.get(ANNOTATION_RAW_ALLOCATABLE)
    if not s:
        return None
    try:
        return parse_resource_list(json.loads(s), ANNOTATION_RAW_ALLOCATABLE)
    except (ValueError, InputError, RecursionError):  # unreadable: ignored, as koordinator ignores it
        return None


def estimate_node_allocatable(node: Node) -> dict[str, int]:
    """EstimateNode / GetNodeRawAllocatableFromNode: allocatable, with raw-allocatable entries overriding."""
    alloc = dict(node.allocatable)
    raw = raw_allocatable(node)
    if raw:
        alloc.update(raw)
    return {k: units(k, v) for k, v in alloc.items()}


@dataclass(slots=True)
class CustomUsageThresholds:
    usage_thresholds: dict[str, int] = field(default_factory=dict)
    prod_usage_thresholds: dict[str, int] = field(default_factory=dict)
    aggregated: dict[str, Any] | None = None  # {usageThresholds, usageAggregationType, usageAggregatedDuration}


def custom_usage_thresholds(node: Node) -> CustomUsageThresholds | None:
    """The node's usage-thresholds annotation; None when it cannot be read (the plugin args apply then)."""
    s = node.meta.annotations.get(ANNOTATION_USAGE_THRESHOLDS)
    if s is None:
        return CustomUsageThresholds()
    try:
        doc = json.loads(s)
        if not isinstance(doc, dict):
            return None
        agg = doc.get("aggregatedUsage")
        return CustomUsageThresholds(_int_map(doc.get("usageThresholds")), _int_map(doc.get("prodUsageThresholds")),
                                     agg if isinstance(agg, dict) else None)
    except (ValueError, TypeError, RecursionError):
        return None


def _int_map(raw: Any) -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise TypeError("expected a map")
    out = {}
    for k, v in raw.items():
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError("expected integers")
        out[str(k)] = v
    return out


def custom_scaling_factors(pod: Pod) -> dict[str, int] | None:
    s = pod.meta.annotations.get(ANNOTATION_SCALING_FACTORS)
    if not s:
        return None
    try:
        return _int_map(json.loads(s))
    except (ValueError, TypeError, RecursionError):
        return None


def custom_seconds(pod: Pod, annotation: str) -> int:
    s = pod.meta.annotations.get(annotation)
    if s:
        try:
            return int(s, 10)
        except ValueError:
            return -1
    return -1
