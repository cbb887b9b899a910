"""DefaultEvictor: which pods may be evicted at all (Filter) and right before eviction (PreEvictionFilter).

Every argument of the newest upstream DefaultEvictor: the pod protections (old booleans or the newer
`podProtections` with defaultDisabled/extraEnabled, never both), labelSelector, namespaceLabelSelector,
priorityThreshold (value or class name), nodeFit with its nodeSelector, minReplicas, minPodAge,
noEvictionPolicy. The `descheduler.alpha.kubernetes.io/evict` annotation lets a pod through every Filter
check. kubesched adds `nodeFitProfile: <schedulerName>`: node fit answered by the scheduler's own
PreFilter/Filter/Score for that profile (see `kubesched.descheduler.scheduler_fit`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubesched.api import fields
from kubesched.api.duration import SECOND, format_go_duration, read_duration
from kubesched.api.objects import Node, Pod, parse_time
from kubesched.api.selectors import LabelSelector, parse_label_selector, parse_label_selector_string
from kubesched.config.plugin_args import OMITEMPTY, PluginArgs
from kubesched.descheduler import nodeutil, podutil
from kubesched.descheduler.framework import EvictorPlugin, Handle
from kubesched.descheduler.podutil import SYSTEM_CRITICAL_PRIORITY
from kubesched.descheduler.scheduler_fit import check_profile, scheduler_node_fit
from kubesched.errors import InputError

PODS_WITH_LOCAL_STORAGE = "PodsWithLocalStorage"
DAEMONSET_PODS = "DaemonSetPods"
SYSTEM_CRITICAL_PODS = "SystemCriticalPods"
FAILED_BARE_PODS = "FailedBarePods"
PODS_WITH_PVC = "PodsWithPVC"
PODS_WITHOUT_PDB = "PodsWithoutPDB"
PODS_WITH_RESOURCE_CLAIMS = "PodsWithResourceClaims"

DEFAULT_POD_PROTECTIONS = (PODS_WITH_LOCAL_STORAGE, SYSTEM_CRITICAL_PODS, FAILED_BARE_PODS, DAEMONSET_PODS)
EXTRA_POD_PROTECTIONS = (PODS_WITH_PVC, PODS_WITHOUT_PDB, PODS_WITH_RESOURCE_CLAIMS)

# A constraint returns why the pod is protected, or None.
Constraint = Callable[[Pod], str | None]


_ARGS = ("nodeSelector", "labelSelector", "namespaceLabelSelector", "priorityThreshold", "nodeFit", "minReplicas",
         "minPodAge", "noEvictionPolicy", "podProtections", "evictLocalStoragePods", "evictDaemonSetPods",
         "evictSystemCriticalPods", "ignorePvcPods", "ignorePodsWithoutPDB", "evictFailedBarePods", "nodeFitProfile",
         "apiVersion", "kind")
# The deprecated booleans, in the order upstream's validation names them.
_DEPRECATED = ("evictLocalStoragePods", "evictDaemonSetPods", "evictSystemCriticalPods", "ignorePvcPods",
               "evictFailedBarePods", "ignorePodsWithoutPDB")


# ---------------------------------------------------------------- args (types.go, defaults.go, validation.go)


@dataclass(frozen=True, slots=True)
class PriorityThreshold:
    """api.PriorityThreshold: a priority value or a PriorityClass name (at most one)."""

    value: int | None = None
    name: str = field(default="", metadata=OMITEMPTY)


@dataclass(frozen=True, slots=True)
class PodProtections:
    """PodProtections: protections added to (extraEnabled) or removed from (defaultDisabled) the defaults, and
    config.PodsWithPVC.protectedStorageClasses (names)."""

    extra_enabled: tuple[str, ...] = ()
    default_disabled: tuple[str, ...] = ()
    protected_storage_classes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DefaultEvictorArgs(PluginArgs):
    """DefaultEvictorArgs (every field defaults to its zero value) with ValidateDefaultEvictorArgs; kubesched adds
    `nodeFitProfile`. `min_pod_age` is in nanoseconds (a metav1.Duration)."""

    node_selector: str | None = None
    evict_local_storage_pods: bool = field(default=False, metadata=OMITEMPTY)
    evict_daemon_set_pods: bool = field(default=False, metadata=OMITEMPTY)
    evict_system_critical_pods: bool = field(default=False, metadata=OMITEMPTY)
    ignore_pvc_pods: bool = field(default=False, metadata=OMITEMPTY)
    evict_failed_bare_pods: bool = field(default=False, metadata=OMITEMPTY)
    ignore_pods_without_pdb: bool = field(default=False, metadata=OMITEMPTY)
    label_selector: LabelSelector | None = None
    namespace_label_selector: LabelSelector | None = None
    priority_threshold: PriorityThreshold | None = None
    node_fit: bool = field(default=False, metadata=OMITEMPTY)
    min_replicas: int = field(default=0, metadata=OMITEMPTY)
    min_pod_age: int | None = None
    no_eviction_policy: str = field(default="", metadata=OMITEMPTY)
    pod_protections: PodProtections = PodProtections()
    node_fit_profile: str | None = None

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> DefaultEvictorArgs:
        a = fields.Fields(raw, field, allowed=_ARGS)
        node_selector = a.string("nodeSelector")
        if node_selector is not None:
            parse_label_selector_string(node_selector, a.path("nodeSelector"))
        label_sel = _selector(a, "labelSelector")
        ns_sel = _selector(a, "namespaceLabelSelector")
        threshold = None
        if a.has("priorityThreshold"):
            pt = a.object("priorityThreshold", ("value", "name"), meta=False)
            value = pt.integer("value", bits=fields.INT32, whole_floats=True)
            if value is not None and value > SYSTEM_CRITICAL_PRIORITY:
                raise pt.error("value", f"priority threshold can't be greater than {SYSTEM_CRITICAL_PRIORITY}")
            name = pt.string("name") or ""
            if value is not None and name:
                raise a.error("priorityThreshold",
                              "priority threshold misconfigured, only one of priorityThreshold fields can be set")
            threshold = PriorityThreshold(value, name)
        flags = {key: a.boolean(key) for key in ("nodeFit", *_DEPRECATED)}
        min_replicas = a.unsigned("minReplicas", 0)
        min_pod_age = (read_duration(a.raw["minPodAge"], a.path("minPodAge")) if a.has("minPodAge") else None)
        policy = a.raw.get("noEvictionPolicy")
        if policy not in (None, "", "Preferred", "Mandatory"):
            raise a.error("noEvictionPolicy", f'noEvictionPolicy accepts only ["Preferred" "Mandatory"] values, got {policy!r}')
        profile = a.string("nodeFitProfile")
        return cls(node_selector=node_selector, evict_local_storage_pods=flags["evictLocalStoragePods"],
                   evict_daemon_set_pods=flags["evictDaemonSetPods"],
                   evict_system_critical_pods=flags["evictSystemCriticalPods"], ignore_pvc_pods=flags["ignorePvcPods"],
                   evict_failed_bare_pods=flags["evictFailedBarePods"],
                   ignore_pods_without_pdb=flags["ignorePodsWithoutPDB"], label_selector=label_sel,
                   namespace_label_selector=ns_sel, priority_threshold=threshold, node_fit=flags["nodeFit"],
                   min_replicas=min_replicas, min_pod_age=min_pod_age, no_eviction_policy=policy or "",
                   pod_protections=_pod_protections(a, [k for k in _DEPRECATED if a.raw.get(k)]),
                   node_fit_profile=profile)


def _selector(a: fields.Fields, key: str) -> LabelSelector | None:
    """A metav1.LabelSelector, checked the way LabelSelectorAsSelector checks it (None when absent)."""
    if not a.has(key):
        return None
    sel = a.object(key, ("matchLabels", "matchExpressions"), meta=False)
    return parse_label_selector(sel.raw, sel.field)


def _pod_protections(a: fields.Fields, deprecated: list[str]) -> PodProtections:
    pp = a.object("podProtections", ("extraEnabled", "defaultDisabled", "config"), meta=False)
    extra = pp.strings("extraEnabled")
    disabled = pp.strings("defaultDisabled")
    if deprecated and (extra or disabled):
        raise a.error("podProtections", f"cannot use Deprecated fields ({', '.join(deprecated)}) alongside "
                      "PodProtections.ExtraEnabled or PodProtections.DefaultDisabled")
    for i, p in enumerate(extra):
        if p not in EXTRA_POD_PROTECTIONS:
            raise pp.error(f"extraEnabled[{i}]", f"invalid pod protection policy in ExtraEnabled: {p!r}. Valid options "
                           f"are: {', '.join(EXTRA_POD_PROTECTIONS)}")
    for i, p in enumerate(disabled):
        if p not in DEFAULT_POD_PROTECTIONS:
            raise pp.error(f"defaultDisabled[{i}]", f"invalid pod protection policy in DefaultDisabled: {p!r}. Valid "
                           f"options are: {', '.join(DEFAULT_POD_PROTECTIONS)}")
    if len(set(disabled)) != len(disabled):
        raise pp.error("defaultDisabled", "PodProtections.DefaultDisabled contains duplicate entries")
    if len(set(extra)) != len(extra):
        raise pp.error("extraEnabled", "PodProtections.ExtraEnabled contains duplicate entries")
    pvc = pp.object("config", ("PodsWithPVC",), meta=False).object("PodsWithPVC", ("protectedStorageClasses",),
                                                                    meta=False)
    classes: list[str] = []
    if "protectedStorageClasses" in pvc.raw and pvc.raw["protectedStorageClasses"] is not None:
        items = pvc.raw["protectedStorageClasses"]
        if not isinstance(items, list):
            raise pvc.error("protectedStorageClasses", "expected a list")
        for i, item in enumerate(items):
            sc = fields.Fields(item, pvc.path(f"protectedStorageClasses[{i}]"), allowed=("name",), meta=False)
            if PODS_WITH_PVC in extra and not sc.get("name"):
                raise sc.error("name", f"PodProtections.Config.PodsWithPVC.ProtectedStorageClasses[{i}] name cannot "
                               "be empty")
            classes.append(str(sc.get("name")))
    return PodProtections(tuple(extra), tuple(disabled), tuple(classes))


def effective_pod_protections(args: DefaultEvictorArgs) -> list[str]:
    """getEffectivePodProtections: the new podProtections when used, else the legacy booleans."""
    pp = args.pod_protections
    if pp.default_disabled or pp.extra_enabled:
        return [p for p in DEFAULT_POD_PROTECTIONS if p not in pp.default_disabled] + list(pp.extra_enabled)
    out = []
    if not args.evict_local_storage_pods:
        out.append(PODS_WITH_LOCAL_STORAGE)
    if not args.evict_daemon_set_pods:
        out.append(DAEMONSET_PODS)
    if not args.evict_system_critical_pods:
        out.append(SYSTEM_CRITICAL_PODS)
    if not args.evict_failed_bare_pods:
        out.append(FAILED_BARE_PODS)
    if args.ignore_pvc_pods:
        out.append(PODS_WITH_PVC)
    if args.ignore_pods_without_pdb:
        out.append(PODS_WITHOUT_PDB)
    return out


def _protects(constraint: Constraint) -> Callable[[Pod], bool]:
    return lambda p: constraint(p) is not None


class DefaultEvictor(EvictorPlugin):
    name = "DefaultEvictor"
    Args = DefaultEvictorArgs
    args: DefaultEvictorArgs

    def __init__(self, args: DefaultEvictorArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        self.node_fit = args.node_fit
        self.node_selector: LabelSelector = parse_label_selector_string(args.node_selector, "nodeSelector")
        self.no_eviction_policy = args.no_eviction_policy
        self.protections = effective_pod_protections(args)
        self.constraints: list[Constraint] = []
        # The same checks as `constraints`, as yes/no answers for `filter`: the built-in protections that only
        # read the pod's own fields are answered by one function (`_basic_protected`), set up from these.
        self._protected_checks: list[Callable[[Pod], bool]] = []
        self._critical_at: int | None = None  # priority from which a pod is protected (critical or threshold)
        self._protect_bare = False  # no ownerRefs protects the pod
        self._protect_local_storage = False
        self._protect_daemonset = False
        self._add_protection_constraints()
        self._add_label_selector_constraint()
        self._add_min_replicas_constraint()
        self._add_min_pod_age_constraint()
        # Whether `filter`'s verdict on a pod reads only that pod, the cycle's clock and objects evictions do not
        # change (PVCs, PDB selectors): minReplicas counts the owner's other pods, which evictions change.
        self.filter_reads_only_the_pod = args.min_replicas <= 1
        # An empty namespaceLabelSelector (no matchLabels, no matchExpressions) filters nothing.
        ns_sel = args.namespace_label_selector
        self.namespace_selector: LabelSelector | None = ns_sel if ns_sel is not None and not ns_sel.empty else None
        self.node_fit_profile: str | None = args.node_fit_profile or None
        if self.node_fit_profile is not None:
            check_profile(handle, self.node_fit_profile)
        self._ready_cache: tuple[int, list[Node]] | None = None
        self._verdicts: dict[int, bool] = {}
        self._verdict_stamp: tuple[Any, ...] | None = None

    # ------------------------------------------------------------ constraints

    def _priority_threshold(self) -> int:
        """GetPriorityValueFromPriorityThreshold: the value, or the named PriorityClass's value."""
        pt = self.args.priority_threshold or PriorityThreshold()
        if pt.value is not None:
            return pt.value
        name = pt.name
        if name:
            pc = self.handle.cluster.priority_classes.get(name)
            if pc is None:
                raise InputError(f"unable to get priority value from the priority class: priorityclass {name!r} not found",
                                 field="priorityThreshold.name")
            if pc.value > SYSTEM_CRITICAL_PRIORITY:
                raise InputError(f"priority threshold can't be greater than {SYSTEM_CRITICAL_PRIORITY}",
                                 field="priorityThreshold.name")
            return pc.value
        return SYSTEM_CRITICAL_PRIORITY

    def _add_protection_constraints(self) -> None:
        enabled = set(self.protections)
        cluster = self.handle.cluster
        if SYSTEM_CRITICAL_PODS in enabled:
            threshold = self._priority_threshold()
            self._critical_at = min(threshold, podutil.SYSTEM_CRITICAL_PRIORITY)
            self.constraints.append(
                lambda p: "pod has system critical priority and is protected against eviction"
                if podutil.is_critical_priority_pod(p) else None)
            self.constraints.append(
                lambda p: None if podutil.is_pod_evictable_based_on_priority(p, threshold)
                else "pod has higher priority than specified priority class threshold")
        self._protect_bare = FAILED_BARE_PODS in enabled
        self._protect_local_storage = PODS_WITH_LOCAL_STORAGE in enabled
        self._protect_daemonset = DAEMONSET_PODS in enabled
        if FAILED_BARE_PODS in enabled:
            self.constraints.append(lambda p: "pod does not have any ownerRefs" if not podutil.owner_ref(p) else None)
        else:
            self.constraints.append(
                lambda p: "pod does not have any ownerRefs and is not in failed phase"
                if not podutil.owner_ref(p) and p.phase != "Failed" else None)
        if PODS_WITH_LOCAL_STORAGE in enabled:
            self.constraints.append(lambda p: "pod has local storage and is protected against eviction"
                                    if podutil.is_pod_with_local_storage(p) else None)
        if DAEMONSET_PODS in enabled:
            self.constraints.append(lambda p: "daemonset pods are protected against eviction"
                                    if podutil.is_daemonset_pod(podutil.owner_ref(p)) else None)
        basic = len(self.constraints)
        if PODS_WITH_PVC in enabled:
            protected = self._protected_storage_classes()
            if not protected:
                self.constraints.append(lambda p: "pod with PVC is protected against eviction"
                                        if podutil.is_pod_with_pvc(p) else None)
            else:
                self.constraints.append(lambda p: self._storage_class_protection(p, protected))
        if PODS_WITHOUT_PDB in enabled:
            self.constraints.append(
                lambda p: None if podutil.is_pod_covered_by_pdb(cluster, p)
                else "pod does not have a PodDisruptionBudget and is protected against eviction")
        if PODS_WITH_RESOURCE_CLAIMS in enabled:
            self.constraints.append(
                lambda p: "pod has ResourceClaims and descheduler is configured to protect ResourceClaims pods"
                if podutil.is_pod_with_resource_claims(p) else None)
        self._protected_checks.extend(_protects(c) for c in self.constraints[basic:])

    def _protected_storage_classes(self) -> set[str]:
        return set(self.args.pod_protections.protected_storage_classes)

    def _storage_class_protection(self, pod: Pod, protected: set[str]) -> str | None:
        """A PVC that is missing, or has no storage class, protects the pod (upstream fails the lookup)."""
        cluster = self.handle.cluster
        for vol in pod.volumes:
            claim = vol.get("persistentVolumeClaim")
            if not isinstance(claim, dict):
                continue
            claim_name = str(claim.get("claimName") or "")
            pvc = cluster.pvcs.get(f"{pod.namespace}/{claim_name}")
            if pvc is None:
                return f"failed to get persistent volume claim {pod.namespace!r}/{claim_name!r}"
            if not pvc.storage_class_name:
                return f"failed to resolve storage class for pod {pod.namespace!r}/{claim_name!r}"
            if pvc.storage_class_name in protected:
                return f"pod using protected storage class {pvc.storage_class_name!r}"
        return None

    def _add_label_selector_constraint(self) -> None:
        sel = self.args.label_selector
        if sel is None or sel.empty:
            return
        self.constraints.append(lambda p: None if sel.matches(p.labels)
                                else "pod labels do not match the labelSelector filter in the policy parameter")
        self._protected_checks.append(lambda p: not sel.matches(p.labels))

    def _add_min_replicas_constraint(self) -> None:
        min_replicas = self.args.min_replicas
        if min_replicas <= 1:
            return
        cluster = self.handle.cluster
        counts: dict[str, int] | None = None
        stamp = (-1, -1)

        def owner_counts() -> dict[str, int]:
            nonlocal counts, stamp
            now_stamp = (cluster.pod_generation, len(cluster.pods))
            if counts is None or stamp != now_stamp:
                counts = {}
                for p in cluster.pods.values():
                    # The informer's owner-UID index lists a pod once per distinct UID.
                    for uid in set(podutil.owner_ref_uids(p)):
                        counts[uid] = counts.get(uid, 0) + 1
                stamp = now_stamp
            return counts

        def check(p: Pod) -> str | None:
            owners = p.meta.owner_references
            if len(owners) != 1:
                return None
            n = owner_counts().get(owners[0].uid, 0)
            if n < min_replicas:
                return f"owner has {n} replicas which is less than minReplicas of {min_replicas}"
            return None

        self.constraints.append(check)
        self._protected_checks.append(_protects(check))

    def _add_min_pod_age_constraint(self) -> None:
        min_age_ns = self.args.min_pod_age
        if min_age_ns is None:
            return
        min_age = min_age_ns / SECOND
        handle = self.handle
        # Upstream's wording, Duration.String() included ("50m0s seconds").
        why = f"pod age is not older than MinPodAge: {format_go_duration(min_age_ns)} seconds"

        def check(p: Pod) -> str | None:
            start = p.status.get("startTime")
            if not start:
                return why
            try:
                t = parse_time(start, "status.startTime")
            except InputError:
                return why
            if t is None or (handle.now - t).total_seconds() < min_age:
                return why
            return None

        self.constraints.append(check)
        self._protected_checks.append(_protects(check))

    # ------------------------------------------------------------ extension points

    def filter_reasons(self, pod: Pod) -> list[str]:
        """Why the pod may not be evicted (empty: it may)."""
        if podutil.have_evict_annotation(pod):
            return []
        if self.no_eviction_policy == "Mandatory" and podutil.have_no_eviction_annotation(pod):
            return ["pod has the prefer-no-eviction annotation and noEvictionPolicy is Mandatory"]
        reasons = []
        if podutil.is_mirror_pod(pod):
            reasons.append("pod is a mirror pod")
        if podutil.is_static_pod(pod):
            reasons.append("pod is a static pod")
        if podutil.is_pod_terminating(pod):
            reasons.append("pod is terminating")
        for c in self.constraints:
            why = c(pod)
            if why is not None:
                reasons.append(why)
        return reasons

    def filter(self, pod: Pod) -> bool:
        # Every check depends on the pod, the cluster objects and the cycle's clock only: the verdict is
        # memoised per pod object within a cycle while the pods and nodes are unchanged (strategies ask
        # many times per cycle).
        # Kept by object id (no per-pod allocation, which would keep the cyclic GC busy on big clusters).
        cluster = self.handle.cluster
        stamp = (self.handle.services.cycle, cluster.pod_generation, cluster.node_generation, len(cluster.pods),
                 self.handle.now)
        if stamp != self._verdict_stamp:
            self._verdicts = {}
            self._verdict_stamp = stamp
        key = id(pod)
        hit = self._verdicts.get(key)
        if hit is None:
            hit = self._verdicts[key] = self._filter(pod)
        return hit

    def _filter(self, pod: Pod) -> bool:
        # filter_reasons(pod) == [], with the built-in checks inlined (this runs on most pods of a cycle).
        meta = pod.meta
        annotations = meta.annotations
        if annotations:
            if podutil.EVICT_POD_ANNOTATION in annotations:
                return True
            if self.no_eviction_policy == "Mandatory" and podutil.PREFER_NO_EVICTION_ANNOTATION in annotations:
                return False
            if podutil.is_mirror_pod(pod) or podutil.is_static_pod(pod):
                return False
        if meta.deletion_timestamp is not None or self._basic_protected(pod):
            return False
        for protected in self._protected_checks:
            if protected(pod):
                return False
        return True

    def _basic_protected(self, pod: Pod) -> bool:
        """The system-critical/priority, bare-pod, local-storage and DaemonSet protections, as enabled."""
        critical_at = self._critical_at
        if critical_at is not None and pod.priority is not None and pod.priority >= critical_at:
            return True
        owners = pod.meta.owner_references
        if not owners and (self._protect_bare or pod.phase != "Failed"):
            return True
        if self._protect_local_storage and pod.volumes and podutil.is_pod_with_local_storage(pod):
            return True
        if self._protect_daemonset:
            for o in owners:
                if o.kind == "DaemonSet":
                    return True
        return False

    def candidate_nodes(self) -> list[Node]:
        """ReadyNodes under this evictor's nodeSelector, over every node of the cluster."""
        cluster = self.handle.cluster
        if self._ready_cache is not None and self._ready_cache[0] == cluster.node_generation:
            return self._ready_cache[1]
        nodes = [n for n in cluster.nodes.values() if self.node_selector.matches(n.labels)]
        ready = nodeutil.ready_nodes(nodes)
        self._ready_cache = (cluster.node_generation, ready)
        return ready

    def pre_eviction_filter(self, pod: Pod) -> bool:
        if self.node_fit_profile is not None:
            if self._scheduler_fit().place(pod, self.candidate_nodes()) is None:
                return False
        elif self.node_fit:
            if not nodeutil.pod_fits_any_other_node(self.handle.cluster, pod, self.candidate_nodes()):
                return False
        if self.namespace_selector is None:
            return True
        ns = self.handle.cluster.namespaces.get(pod.namespace)
        return ns is not None and self.namespace_selector.matches(ns.labels)

    def evicting(self, pod: Pod) -> bool:
        # Strategies may pre-filter many pods before evicting any: ask the scheduler again now, with the
        # room earlier evictions' replacements took.
        if self.node_fit_profile is not None:
            return self._scheduler_fit().place(pod, self.candidate_nodes()) is not None
        return True

    def evicted(self, pod: Pod) -> None:
        if self.node_fit_profile is not None:
            self._scheduler_fit().commit(pod)

    # ------------------------------------------------------------ node fit by the scheduler

    def _scheduler_fit(self) -> Any:
        assert self.node_fit_profile is not None
        return scheduler_node_fit(self.handle, self.node_fit_profile)

    def node_fit_function(self) -> Callable[[Pod, list[Node]], bool] | None:
        """What strategies' own node-fit checks should use (Handle.node_fit), when the scheduler answers."""
        if self.node_fit_profile is None:
            return None

        def fits_other_node(pod: Pod, nodes: list[Node]) -> bool:
            return bool(self._scheduler_fit().fits_other_node(pod, nodes))

        return fits_other_node
