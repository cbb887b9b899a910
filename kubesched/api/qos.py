"""Pod QoS classes, as `pkg/apis/core/v1/helper/qos` computes them.

Only cpu and memory take part. With pod-level resources (`spec.resources`, feature gate PodLevelResources,
on by default) the class comes from the pod-level requests and limits alone; otherwise each init and
regular container gets a class from its own requests and limits (equal and non-zero: Guaranteed, all
zero or absent: BestEffort, anything else: Burstable) and the pod is Burstable as soon as one container is
Burstable or two containers differ. Stored objects are read as they are: no limits are copied into
missing requests.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from kubesched.api.objects import Pod
from kubesched.api.resources import CPU, MEMORY, is_supported_pod_level_resource, memo_by_shape

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"
QOS_CLASSES = (GUARANTEED, BURSTABLE, BEST_EFFORT)

_QOS_RESOURCES = (CPU, MEMORY)
_ZERO = Fraction(0)


def has_pod_level_resources(pod: Pod) -> bool:
    """`pod.Spec.Resources != nil`: the stored spec has a `resources` object (even an empty one)."""
    spec = pod.raw.get("spec")
    return isinstance(spec, dict) and isinstance(spec.get("resources"), dict)


def is_pod_level_requests_set(pod: Pod) -> bool:
    """resourcehelper.IsPodLevelRequestsSet: a supported resource among the pod-level requests."""
    return any(is_supported_pod_level_resource(k) for k in (pod.pod_requests or {}))


def is_pod_level_resources_set(pod: Pod) -> bool:
    """resourcehelper.IsPodLevelResourcesSet: a supported resource among pod-level requests or limits."""
    return is_pod_level_requests_set(pod) or any(is_supported_pod_level_resource(k) for k in (pod.pod_limits or {}))


def _resource_qos(requests: Mapping[str, Fraction], limits: Mapping[str, Fraction]) -> str:
    # One set of requirements: an empty set is BestEffort even if it only names other resources.
    if not requests and not limits:
        return BEST_EFFORT
    qos = ""
    for name in _QOS_RESOURCES:
        req = requests.get(name, _ZERO)
        lim = limits.get(name, _ZERO)
        if req != lim:
            return BURSTABLE
        best_effort = req == 0
        if not qos:
            qos = BEST_EFFORT if best_effort else GUARANTEED
        elif best_effort != (qos == BEST_EFFORT):
            return BURSTABLE
    return qos


# Memo keys: the class on the pod object (status-derived, dropped by Pod.with_status), and per resource shape.
_CLASS_KEYS = {True: ("qos_class", True), False: ("qos_class", False)}
_SHAPE_KEYS = {True: ("qos", True), False: ("qos", False)}


def compute_qos(pod: Pod, pod_level_resources: bool = True) -> str:
    """ComputePodQOS: the class from the spec, ignoring status.qosClass.

    A function of the pod's resources alone (and of whether its pod-level resources decide): memoised per
    resource shape, so pods of one template compute it once."""
    level = pod_level_resources and has_pod_level_resources(pod)
    return str(memo_by_shape(pod, _SHAPE_KEYS[level], lambda: _spec_qos(pod, level)))


def _spec_qos(pod: Pod, pod_level: bool) -> str:
    if pod_level:
        return _resource_qos(pod.pod_requests or {}, pod.pod_limits or {})
    qos = ""
    for c in [*pod.init_containers, *pod.containers]:
        cq = _resource_qos(c.requests, c.limits)
        if cq == BURSTABLE:
            return BURSTABLE
        if not qos:
            qos = cq
        elif qos != cq:
            return BURSTABLE
    return qos or BEST_EFFORT


def qos_class(pod: Pod, pod_level_resources: bool = True) -> str:
    """GetPodQOS: status.qosClass when the API server has set it, otherwise computed from the spec.

    Memoised on the pod object (a changed pod is a new object, and a status change drops the memo): sorters
    ask for it many times per cycle, and a descheduling cycle asks it of many pods once, so the first
    answer is read straight from the stored document (what `compute_qos` does, without its calls)."""
    key = _CLASS_KEYS[pod_level_resources]
    cache = pod.cache
    cached = cache.get(key)
    if cached is not None:
        return str(cached)
    doc = pod.raw
    status = doc.get("status")
    q = status.get("qosClass") if isinstance(status, dict) else None
    if not (isinstance(q, str) and q):
        spec = doc.get("spec")
        level = pod_level_resources and isinstance(spec, dict) and isinstance(spec.get("resources"), dict)
        what = _SHAPE_KEYS[level]
        q = cache.get(what)
        if q is None:
            q = memo_by_shape(pod, what, lambda: _spec_qos(pod, level))
    cache[key] = q
    return str(q)
