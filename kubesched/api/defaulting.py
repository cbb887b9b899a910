"""What the API server does to objects on create: defaulting and admission (Priority, DefaultTolerationSeconds).

Snapshot objects are stored objects and are never defaulted. Workload manifests and the pods their
controllers create go through what the API server would do on create:

- workload defaults (replicas 1, Deployment strategy, StatefulSet podManagementPolicy, Job completions,
  parallelism and backoffLimit) and the validation that the selector matches the template's labels;
- pod defaults (SetDefaults_PodSpec / SetDefaults_Pod / SetDefaults_Container): restartPolicy Always,
  terminationGracePeriodSeconds 30, dnsPolicy ClusterFirst, schedulerName default-scheduler, an empty
  securityContext, enableServiceLinks, requests copied from limits where a container sets only limits,
  hostPort = containerPort under hostNetwork, imagePullPolicy, terminationMessagePath/Policy;
- the Priority admission plugin: priority (and preemptionPolicy) from the pod's PriorityClass, or from
  the globalDefault class, or 0; an unknown class is an error;
- the DefaultTolerationSeconds admission plugin: not-ready and unreachable NoExecute tolerations for
  300 seconds unless the pod tolerates them already;
- the pod strategy's label-key merging: matchLabelKeys / mismatchLabelKeys of pod (anti-)affinity terms
  and matchLabelKeys of topology spread constraints become `key In/NotIn (value)` requirements of the
  term's labelSelector, for keys the pod has (MatchLabelKeysInPodAffinity and
  MatchLabelKeysInPodTopologySpreadSelectorMerge, both on by default).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

from kubesched.api.objects import Pod, PriorityClass
from kubesched.api.selectors import parse_label_selector
from kubesched.errors import InputError

INT32_MAX = 2**31 - 1
DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS = 30
DEFAULT_SCHEDULER_NAME = "default-scheduler"
DEFAULT_TOLERATION_SECONDS = 300
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"

# The two classes every API server creates (scheduling/v1 SystemPriorityClasses).
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}


def _dict(parent: dict[str, Any], key: str) -> dict[str, Any]:
    v = parent.get(key)
    if not isinstance(v, dict):
        v = {}
        parent[key] = v
    return v


def _image_pull_policy(image: str) -> str:
    """Always for a :latest (or missing) tag, IfNotPresent otherwise (digests count as a tag)."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def _default_container(c: dict[str, Any], host_network: bool, pod_level: bool) -> None:
    c.setdefault("imagePullPolicy", _image_pull_policy(str(c.get("image") or "")))
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    for p in c.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")
            if host_network and not p.get("hostPort"):
                p["hostPort"] = p.get("containerPort")
    if pod_level:
        res = c.get("resources")
        if isinstance(res, dict) and isinstance(res.get("limits"), dict):
            # SetDefaults_Pod: requests default to limits, resource by resource.
            req = res.get("requests")
            if not isinstance(req, dict):
                req = {}
                res["requests"] = req
            for k, v in res["limits"].items():
                req.setdefault(k, v)


def default_pod_spec(spec: dict[str, Any], *, pod_level: bool) -> None:
    """SetDefaults_PodSpec (templates and pods) and, for pods (`pod_level`), SetDefaults_Pod."""
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("restartPolicy", "Always")
    if not isinstance(spec.get("securityContext"), dict):
        spec["securityContext"] = {}
    if spec.get("terminationGracePeriodSeconds") is None:
        spec["terminationGracePeriodSeconds"] = DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS
    if not spec.get("schedulerName"):
        spec["schedulerName"] = DEFAULT_SCHEDULER_NAME
    host_network = bool(spec.get("hostNetwork", False))
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            if isinstance(c, dict):
                _default_container(c, host_network, pod_level)
    if pod_level and spec.get("enableServiceLinks") is None:
        spec["enableServiceLinks"] = True


def admit_priority(spec: dict[str, Any], classes: Mapping[str, PriorityClass], where: str) -> None:
    """The Priority admission plugin: resolve spec.priority (and preemptionPolicy) from the class."""
    name = spec.get("priorityClassName")
    if name:
        if name in SYSTEM_PRIORITY_CLASSES and name not in classes:
            value, policy = SYSTEM_PRIORITY_CLASSES[name], "PreemptLowerPriority"
        else:
            pc = classes.get(name)
            if pc is None:
                raise InputError(f"no PriorityClass with name {name!r} was found", field=f"{where}.priorityClassName")
            value, policy = pc.value, pc.preemption_policy or "PreemptLowerPriority"
    else:
        default = _global_default(classes)
        if default is not None:
            spec["priorityClassName"] = default.meta.name
            value, policy = default.value, default.preemption_policy or "PreemptLowerPriority"
        else:
            value, policy = 0, "PreemptLowerPriority"
    if spec.get("priority") is not None and spec["priority"] != value:
        raise InputError(f"the integer value of priority ({spec['priority']}) must not be provided in pod spec; "
                         f"priority admission controller computed {value} from the given PriorityClass name",
                         field=f"{where}.priority")
    spec["priority"] = value
    spec.setdefault("preemptionPolicy", policy)


def admit_default_tolerations(spec: dict[str, Any]) -> None:
    """DefaultTolerationSeconds: tolerate not-ready and unreachable NoExecute taints for 300s."""
    tolerations = spec.get("tolerations")
    if not isinstance(tolerations, list):
        tolerations = []
    for key in (TAINT_NOT_READY, TAINT_UNREACHABLE):
        tolerated = False
        for t in tolerations:
            if not isinstance(t, dict):
                continue
            op = t.get("operator") or "Equal"
            effect = t.get("effect") or ""
            if effect not in ("", "NoExecute"):
                continue
            if (op == "Exists" and (not t.get("key") or t.get("key") == key)) or \
                    (op == "Equal" and t.get("key") == key and not t.get("value")):
                tolerated = True
                break
        if not tolerated:
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": DEFAULT_TOLERATION_SECONDS})
    spec["tolerations"] = tolerations


def _merge_label_keys(selector: dict[str, Any], keys: list[Any], operator: str, labels: Mapping[str, str]) -> None:
    exprs = selector.get("matchExpressions")
    if not isinstance(exprs, list):
        exprs = []
        selector["matchExpressions"] = exprs
    for key in keys:
        if key in labels:
            exprs.append({"key": key, "operator": operator, "values": [labels[key]]})


def merge_match_label_keys(spec: dict[str, Any], labels: Mapping[str, str]) -> None:
    """The pod strategy's PrepareForCreate: label keys become selector requirements."""
    affinity = spec.get("affinity")
    if isinstance(affinity, dict):
        for kind in ("podAffinity", "podAntiAffinity"):
            pa = affinity.get(kind)
            if not isinstance(pa, dict):
                continue
            terms: list[dict[str, Any]] = []
            for t in pa.get("requiredDuringSchedulingIgnoredDuringExecution") or []:
                if isinstance(t, dict):
                    terms.append(t)
            for w in pa.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
                if isinstance(w, dict) and isinstance(w.get("podAffinityTerm"), dict):
                    terms.append(w["podAffinityTerm"])
            for t in terms:
                sel = t.get("labelSelector")
                # A nil selector matches nothing; upstream leaves it nil.
                if not isinstance(sel, dict):
                    continue
                _merge_label_keys(sel, list(t.get("matchLabelKeys") or []), "In", labels)
                _merge_label_keys(sel, list(t.get("mismatchLabelKeys") or []), "NotIn", labels)
    for c in spec.get("topologySpreadConstraints") or []:
        if isinstance(c, dict) and isinstance(c.get("labelSelector"), dict) and c.get("matchLabelKeys"):
            _merge_label_keys(c["labelSelector"], list(c["matchLabelKeys"]), "In", labels)


def admit_pod(raw: dict[str, Any], classes: Mapping[str, PriorityClass], where: str = "spec") -> dict[str, Any]:
    """Everything the API server does to a pod on create, in place; returns the pod."""
    spec = _dict(raw, "spec")
    meta = _dict(raw, "metadata")
    default_pod_spec(spec, pod_level=True)
    admit_priority(spec, classes, where)
    admit_default_tolerations(spec)
    labels_raw = meta.get("labels")
    labels: dict[Any, Any] = labels_raw if isinstance(labels_raw, dict) else {}
    merge_match_label_keys(spec, {str(k): str(v) for k, v in labels.items()})
    raw.setdefault("apiVersion", "v1")
    raw["kind"] = "Pod"
    return raw


# ---------------------------------------------------------------- workloads


def _selector_matches(selector: Any, labels: Mapping[str, str], where: str) -> bool:
    return parse_label_selector(selector, where).matches(labels)


def default_workload(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """Defaults and validation of a workload manifest (a deep copy is returned)."""
    obj = copy.deepcopy(raw)
    kind = obj.get("kind")
    meta = _dict(obj, "metadata")
    meta.setdefault("namespace", "default")
    if kind == "Pod":
        return obj
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise InputError("expected spec to be an object", field=f"{where}.spec")
    template = spec.get("template")
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        raise InputError("expected a pod template with a spec", field=f"{where}.spec.template")
    tmeta = _dict(template, "metadata")
    tlabels_raw = tmeta.get("labels")
    tlabels = {str(k): str(v) for k, v in (tlabels_raw if isinstance(tlabels_raw, dict) else {}).items()}
    containers = template["spec"].get("containers")
    if not isinstance(containers, list) or not containers:
        raise InputError("Required value", field=f"{where}.spec.template.spec.containers")
    default_pod_spec(template["spec"], pod_level=False)
    if kind == "Job":
        rp = template["spec"].get("restartPolicy")
        if rp not in ("OnFailure", "Never"):
            raise InputError(f'unsupported value {rp!r}: a Job\'s pods must set restartPolicy "OnFailure" or "Never"',
                             field=f"{where}.spec.template.spec.restartPolicy")
        spec.setdefault("completions", 1 if spec.get("parallelism") is None else spec.get("completions"))
        spec.setdefault("parallelism", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        for k in ("parallelism", "backoffLimit"):
            v = spec.get(k)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= INT32_MAX:
                raise InputError(f"expected a non-negative int32, got {v!r}", field=f"{where}.spec.{k}")
        if spec.get("completions") is not None and (isinstance(spec["completions"], bool)
                                                     or not isinstance(spec["completions"], int)
                                                     or not 0 <= spec["completions"] <= INT32_MAX):
            raise InputError(f"expected a non-negative integer, got {spec['completions']!r}",
                             field=f"{where}.spec.completions")
        return obj
    sel = spec.get("selector")
    if sel is None:
        raise InputError("Required value", field=f"{where}.spec.selector")
    if not _selector_matches(sel, tlabels, f"{where}.spec.selector"):
        raise InputError("`selector` does not match template `labels`", field=f"{where}.spec.template.metadata.labels")
    if kind in ("Deployment", "ReplicaSet", "StatefulSet"):
        replicas = spec.get("replicas", 1)
        if isinstance(replicas, bool) or not isinstance(replicas, int) or not 0 <= replicas <= INT32_MAX:
            raise InputError(f"expected a non-negative int32, got {replicas!r}", field=f"{where}.spec.replicas")
        spec["replicas"] = replicas
    if kind == "Deployment":
        strategy = _dict(spec, "strategy")
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            ru = _dict(strategy, "rollingUpdate")
            ru.setdefault("maxUnavailable", "25%")
            ru.setdefault("maxSurge", "25%")
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
    elif kind == "StatefulSet":
        spec.setdefault("podManagementPolicy", "OrderedReady")
        if spec["podManagementPolicy"] not in ("OrderedReady", "Parallel"):
            raise InputError(f"expected OrderedReady or Parallel, got {spec['podManagementPolicy']!r}",
                             field=f"{where}.spec.podManagementPolicy")
        us = _dict(spec, "updateStrategy")
        us.setdefault("type", "RollingUpdate")
        spec.setdefault("revisionHistoryLimit", 10)
    elif kind == "DaemonSet":
        us = _dict(spec, "updateStrategy")
        us.setdefault("type", "RollingUpdate")
        spec.setdefault("revisionHistoryLimit", 10)
    return obj


def with_admitted_priority(pod: Pod, classes: Mapping[str, PriorityClass]) -> Pod:
    """A stored pod as the Priority admission plugin left it: a pod written without spec.priority gets its
    PriorityClass's value (the globalDefault class's when it names none; a system class's when the
    snapshot does not define it). A pod naming a class the snapshot lacks keeps no priority (0)."""
    if pod.priority is not None:
        return pod
    name = pod.priority_class_name
    if name:
        pc = classes.get(name)
        if pc is not None:
            value, policy = pc.value, pc.preemption_policy
        elif name in SYSTEM_PRIORITY_CLASSES:
            value, policy = SYSTEM_PRIORITY_CLASSES[name], None
        else:
            return pod
    else:
        default = _global_default(classes)
        if default is None:
            return pod
        name, value, policy = default.meta.name, default.value, default.preemption_policy
    spec = {**(pod.raw.get("spec") or {}), "priority": value, "priorityClassName": name}
    preemption = pod.preemption_policy
    if preemption is None:
        preemption = policy or "PreemptLowerPriority"
        spec["preemptionPolicy"] = preemption
    return dataclasses.replace(pod, priority=value, priority_class_name=name, preemption_policy=preemption,
                               document={**pod.raw, "spec": spec})


def _global_default(classes: Mapping[str, PriorityClass]) -> PriorityClass | None:
    """The globalDefault class (the lowest value when several claim it, as the admission plugin picks)."""
    default = None
    for pc in classes.values():
        if pc.global_default and (default is None or pc.value < default.value):
            default = pc
    return default
