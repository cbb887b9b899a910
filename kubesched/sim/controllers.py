"""Workload controllers: they turn workloads into pods and replace the pods that go away.

Each follows its upstream controller where it matters for placement and for eviction loops:

- ReplicaSet (and Deployment, through the ReplicaSet it owns): keeps `replicas` active pods; a pod that
  starts terminating (an eviction) or fails is replaced at once, not when it is gone (active pods exclude
  terminating ones); scaling down deletes the lowest-ranked pods first (unassigned, then not running,
  then those sharing a node with more replicas, then the newest).
- StatefulSet: pods `<name>-<ordinal>`; OrderedReady creates ordinal i+1 only when ordinal i runs; an
  evicted pod is recreated under the same name once it is gone.
- DaemonSet: one pod per node that the pod's node selector, node affinity and tolerations allow, bound
  by the default scheduler through a node-name affinity; node added → pod, node removed → pod deleted.
- Job: `parallelism` pods at a time until `completions` pods have succeeded (each runs for the
  scenario's jobDuration); an evicted or failed pod counts against backoffLimit and is replaced.
- Bare pods are never recreated. Snapshot pods whose controller is not described anywhere get an
  implicit controller that keeps their number, recreating from the pod's own spec.

A pod's usage identity (`<workload>#<ordinal>`) passes from an evicted pod to its replacement, and so
does the lineage (`replaces`) the loop detector follows.
"""

from __future__ import annotations

import copy
import heapq
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubesched.api.hashing import stable_hash64
from kubesched.api.objects import Node, Taint, Toleration, parse_affinity, parse_toleration
from kubesched.sim.pods import SimPod

if TYPE_CHECKING:
    from kubesched.sim.controller_manager import ControllerManager

ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"


def safe_encode(text: str) -> str:
    """rand.SafeEncodeString: every character mapped onto the vowel-free alphabet."""
    return "".join(ALPHANUMS[ord(ch) % len(ALPHANUMS)] for ch in text)


def template_hash(template: dict[str, Any]) -> str:
    """A pod-template-hash: stable for a template, in upstream's alphabet (not upstream's exact value)."""
    h32 = stable_hash64(json.dumps(template, sort_keys=True)) & 0xFFFFFFFF
    return safe_encode(str(h32))


def _owner_ref(kind: str, name: str, uid: str) -> dict[str, Any]:
    api = "batch/v1" if kind == "Job" else "apps/v1"
    return {"apiVersion": api, "kind": kind, "name": name, "uid": uid, "controller": True,
            "blockOwnerDeletion": True}


def _map_at(parent: dict[str, Any], key: str) -> dict[str, Any]:
    """parent[key] as a map, made one when it is missing or null (`labels: null` is an empty map to the API)."""
    v = parent.get(key)
    if not isinstance(v, dict):
        v = {}
        parent[key] = v
    return v


def owned_pod(template: dict[str, Any], namespace: str, owner_kind: str, owner_name: str,
              owner_uid: str) -> dict[str, Any]:
    """A ReplicaSet's pod from its template: a shallow copy with generateName `<owner>-`, namespace and owner set
    (the API server makes the name)."""
    raw = dict(template)
    meta = dict(raw.get("metadata") or {})
    raw["metadata"] = meta
    meta.pop("name", None)
    meta["generateName"] = f"{owner_name}-"
    meta["namespace"] = namespace
    meta["ownerReferences"] = [_owner_ref(owner_kind, owner_name, owner_uid)]
    raw["kind"] = "Pod"
    return raw


def deployment_replicaset(obj: dict[str, Any], name: str, namespace: str, uid: str) -> dict[str, Any]:
    """The ReplicaSet a Deployment's controller makes for its template: <deployment>-<pod-template-hash>."""
    spec = obj["spec"]
    template = copy.deepcopy(spec["template"])
    h = template_hash(template)
    _map_at(_map_at(template, "metadata"), "labels")["pod-template-hash"] = h
    selector = copy.deepcopy(spec["selector"])
    _map_at(selector, "matchLabels")["pod-template-hash"] = h
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"{name}-{h}", "namespace": namespace,
                         "labels": dict(template["metadata"]["labels"]),
                         "ownerReferences": [_owner_ref("Deployment", name, uid)]},
            "spec": {"replicas": spec.get("replicas", 1), "selector": selector, "template": template}}


def statefulset_revision(name: str, template: dict[str, Any]) -> str:
    return f"{name}-{template_hash(template)}"


def statefulset_pod(template: dict[str, Any], set_name: str, namespace: str, uid: str, ordinal: int,
                    revision: str) -> dict[str, Any]:
    """newVersionedStatefulSetPod: <set>-<ordinal>, with the identity labels and hostname."""
    raw = copy.deepcopy(template)
    meta = _map_at(raw, "metadata")
    name = f"{set_name}-{ordinal}"
    meta["name"] = name
    meta["namespace"] = namespace
    labels = _map_at(meta, "labels")
    labels["statefulset.kubernetes.io/pod-name"] = name
    labels["apps.kubernetes.io/pod-index"] = str(ordinal)
    labels["controller-revision-hash"] = revision
    meta["ownerReferences"] = [_owner_ref("StatefulSet", set_name, uid)]
    raw["kind"] = "Pod"
    _map_at(raw, "spec")["hostname"] = name
    return raw


@dataclass(frozen=True, slots=True)
class DaemonTemplate:
    """A DaemonSet's pod template with the tolerations its controller adds, and what decides its nodes."""

    template: dict[str, Any]
    tolerations: tuple[Toleration, ...]
    node_selector: dict[str, str]
    affinity: Any
    revision: str

    @classmethod
    def of(cls, obj: dict[str, Any]) -> DaemonTemplate:
        spec = obj.get("spec") or {}
        template = copy.deepcopy(spec.get("template") or {})
        pspec = _map_at(template, "spec")
        tols = list(pspec.get("tolerations") or [])
        wanted = list(DAEMON_TOLERATIONS)
        if pspec.get("hostNetwork"):
            wanted.append(("node.kubernetes.io/network-unavailable", "NoSchedule"))
        for key, effect in wanted:
            if not any(isinstance(t, dict) and t.get("key") == key and t.get("effect") == effect for t in tols):
                tols.append({"key": key, "operator": "Exists", "effect": effect})
        pspec["tolerations"] = tols
        tolerations = tuple(parse_toleration(t, f"spec.template.spec.tolerations[{i}]") for i, t in enumerate(tols))
        node_selector = {str(k): str(v) for k, v in (pspec.get("nodeSelector") or {}).items()}
        affinity = parse_affinity(pspec.get("affinity"), "spec.template.spec.affinity")
        return cls(template, tolerations, node_selector, affinity, template_hash(template))

    def should_run(self, node: Node) -> bool:
        """NodeShouldRunDaemonPod: node selector, required node affinity, NoSchedule/NoExecute taints."""
        labels = node.labels
        if any(labels.get(k) != v for k, v in self.node_selector.items()):
            return False
        req = self.affinity.node_required
        if req is not None and not req.matches(labels, node.name):
            return False
        for taint in node.taints:
            if taint.effect in ("NoSchedule", "NoExecute") and not _tolerated(self.tolerations, taint):
                return False
        return True

    def pod(self, set_name: str, namespace: str, uid: str, node: str) -> dict[str, Any]:
        """A daemon pod bound to `node` by a node-name affinity (ReplaceDaemonSetPodNodeNameNodeAffinity)."""
        raw = copy.deepcopy(self.template)
        meta = _map_at(raw, "metadata")
        meta.pop("name", None)
        meta["generateName"] = f"{set_name}-"
        meta["namespace"] = namespace
        _map_at(meta, "labels")["controller-revision-hash"] = self.revision
        meta["ownerReferences"] = [_owner_ref("DaemonSet", set_name, uid)]
        raw["kind"] = "Pod"
        pspec = _map_at(raw, "spec")
        aff = _map_at(_map_at(pspec, "affinity"), "nodeAffinity")
        aff["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
        return raw


def job_labels(name: str, uid: str) -> dict[str, str]:
    return {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
            "controller-uid": uid, "job-name": name}


def job_pod(template: dict[str, Any], job_name: str, namespace: str, uid: str) -> dict[str, Any]:
    """A Job's pod: the template with the job's labels (a shallow copy, like a ReplicaSet's pod)."""
    raw = dict(template)
    meta = dict(raw.get("metadata") or {})
    raw["metadata"] = meta
    meta.pop("name", None)
    meta["generateName"] = f"{job_name}-"
    meta["namespace"] = namespace
    meta["labels"] = {**(meta.get("labels") or {}), **job_labels(job_name, uid)}
    meta["ownerReferences"] = [_owner_ref("Job", job_name, uid)]
    raw["kind"] = "Pod"
    return raw


class Controller:
    """Common bookkeeping: the pods a controller owns and the ordinals they hold."""

    kind = ""

    def __init__(self, manager: ControllerManager, obj: dict[str, Any], workload: str) -> None:
        self.manager = manager
        self.obj = obj
        meta = obj.get("metadata") or {}
        self.name = str(meta.get("name"))
        self.namespace = str(meta.get("namespace") or "default")
        self.uid = str(meta.get("uid") or manager.new_uid(f"{self.kind}/{self.namespace}/{self.name}"))
        self.key = f"{self.kind}/{self.namespace}/{self.name}"
        self.workload = workload
        # The pods it owns (change through own/disown), and those of them that are active (neither
        # terminating nor terminal): kept in step by `pod_state_changed`, so counting them costs nothing.
        self.pods: dict[str, SimPod] = {}
        self._active: dict[str, SimPod] = {}
        self._free: list[int] = []
        self._free_from: dict[int, str] = {}
        self._next_ordinal = 0

    # ------------------------------------------------------------ ordinals (usage identity, lineage)

    def take_ordinal(self) -> tuple[int, str | None]:
        if self._free:
            o = heapq.heappop(self._free)
            return o, self._free_from.pop(o, None)
        o = self._next_ordinal
        self._next_ordinal += 1
        return o, None

    def release_ordinal(self, sp: SimPod) -> None:
        if sp.ordinal < 0 or sp.ordinal in self._free_from:
            return
        heapq.heappush(self._free, sp.ordinal)
        self._free_from[sp.ordinal] = sp.key

    def hold_ordinal(self, o: int) -> None:
        self._next_ordinal = max(self._next_ordinal, o + 1)

    def identity(self, ordinal: int) -> str:
        return f"{self.workload}#{ordinal}"

    # ------------------------------------------------------------ pod events (from the controller manager)

    def active(self) -> list[SimPod]:
        """The active pods, in the order they were first owned."""
        return [p for p in self.pods.values() if _is_active(p)]

    def active_count(self) -> int:
        """len(self.active()), from the index."""
        return len(self._active)

    def own(self, sp: SimPod) -> None:
        self.pods[sp.key] = sp
        self.pod_state_changed(sp)

    def disown(self, key: str) -> None:
        self.pods.pop(key, None)
        self._active.pop(key, None)

    def pod_state_changed(self, sp: SimPod) -> None:
        """The registry changed the pod's phase or terminating mark (or the controller took it)."""
        key = sp.key
        if _is_active(sp) and self.pods.get(key) is sp:
            self._active[key] = sp
        elif self._active.get(key) is sp:
            del self._active[key]

    def adopt(self, sp: SimPod) -> None:
        self.own(sp)
        self.hold_ordinal(sp.ordinal)

    def pod_terminating(self, sp: SimPod) -> None:
        """The pod's deletion started (eviction, drain, scale down)."""

    def pod_failed(self, sp: SimPod) -> None:
        """The pod failed (kubelet eviction, admission rejection, OOM with restartPolicy Never)."""

    def pod_succeeded(self, sp: SimPod) -> None:
        """The pod's containers all exited 0 (Jobs)."""

    def pod_gone(self, sp: SimPod) -> None:
        """The pod object was deleted."""
        self.disown(sp.key)

    def pod_running(self, sp: SimPod) -> None:
        """The pod started running."""

    def node_added(self, node: Node) -> None:
        """A node joined (DaemonSets)."""

    def node_removed(self, name: str) -> None:
        """A node left (DaemonSets)."""

    def start(self) -> None:
        """Create the pods the workload wants at the start."""

    def scale(self, replicas: int) -> None:
        raise NotImplementedError(f"a {self.kind} cannot be scaled")


# ---------------------------------------------------------------- ReplicaSet / Deployment


class ReplicaSetController(Controller):
    kind = "ReplicaSet"

    def __init__(self, manager: ControllerManager, obj: dict[str, Any], workload: str) -> None:
        super().__init__(manager, obj, workload)
        spec = obj.get("spec") or {}
        self.replicas = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
        self.template = spec.get("template") or {}

    def _new_pod(self, replaces_hint: str | None = None) -> None:
        ordinal, freed_by = self.take_ordinal()
        # A shallow copy: the API server deep-copies the template the first time and clones its pod afterwards.
        raw = owned_pod(self.template, self.namespace, self.kind, self.name, self.uid)
        self.manager.create_pod(raw, self, self.identity(ordinal), ordinal, freed_by or replaces_hint)

    def reconcile(self) -> None:
        diff = self.replicas - self.active_count()
        for _ in range(diff):
            self._new_pod()
        if diff < 0:
            for sp in rank_for_deletion(self.active())[: -diff]:
                self.manager.delete_pod(sp, component="controller", reason="ScaleDown", grace=None)

    def start(self) -> None:
        self.reconcile()

    def scale(self, replicas: int) -> None:
        self.replicas = replicas
        self.reconcile()

    def pod_terminating(self, sp: SimPod) -> None:
        self.release_ordinal(sp)
        self.reconcile()

    def pod_failed(self, sp: SimPod) -> None:
        self.release_ordinal(sp)
        self.reconcile()

    def pod_gone(self, sp: SimPod) -> None:
        super().pod_gone(sp)
        if not sp.terminating and sp.phase not in ("Succeeded", "Failed"):
            # Deleted without a graceful deletion (preemption victims, node removal).
            self.release_ordinal(sp)
            self.reconcile()


def _is_active(p: SimPod) -> bool:
    return not p.terminating and p.phase not in ("Succeeded", "Failed")


def rank_for_deletion(pods: list[SimPod]) -> list[SimPod]:
    """ActivePodsWithRanks, simplified: the pods a ReplicaSet deletes first come first."""
    per_node: dict[str, int] = {}
    for p in pods:
        if p.node:
            per_node[p.node] = per_node.get(p.node, 0) + 1

    def key(p: SimPod) -> tuple[int, int, int, float, str]:
        return (1 if p.node else 0, 1 if p.phase == "Running" else 0, -per_node.get(p.node, 0), -p.created, p.key)

    return sorted(pods, key=key)


class DeploymentController(Controller):
    """A Deployment: one ReplicaSet named <deployment>-<pod-template-hash> does the work."""

    kind = "Deployment"

    def __init__(self, manager: ControllerManager, obj: dict[str, Any], workload: str) -> None:
        super().__init__(manager, obj, workload)
        rs = deployment_replicaset(obj, self.name, self.namespace, self.uid)
        self.rs = ReplicaSetController(manager, rs, workload)
        self.rs_object = rs

    def start(self) -> None:
        self.rs.start()

    def scale(self, replicas: int) -> None:
        self.rs.scale(replicas)


# ---------------------------------------------------------------- StatefulSet


class StatefulSetController(Controller):
    kind = "StatefulSet"

    def __init__(self, manager: ControllerManager, obj: dict[str, Any], workload: str) -> None:
        super().__init__(manager, obj, workload)
        spec = obj.get("spec") or {}
        self.replicas = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
        self.template = spec.get("template") or {}
        self.ordered = (spec.get("podManagementPolicy") or "OrderedReady") == "OrderedReady"
        self.revision = statefulset_revision(self.name, self.template)
        self.by_ordinal: dict[int, SimPod] = {}
        self.last_gone: dict[int, str] = {}

    def _create(self, ordinal: int) -> None:
        raw = statefulset_pod(self.template, self.name, self.namespace, self.uid, ordinal, self.revision)
        sp = self.manager.create_pod(raw, self, self.identity(ordinal), ordinal, self.last_gone.pop(ordinal, None))
        self.by_ordinal[ordinal] = sp

    def reconcile(self) -> None:
        for o in range(self.replicas):
            if o in self.by_ordinal:
                if self.ordered and self.by_ordinal[o].phase != "Running":
                    return
                continue
            self._create(o)
            if self.ordered:
                return
        # Scale down: the highest ordinal first, one at a time when ordered.
        for o in sorted((o for o in self.by_ordinal if o >= self.replicas), reverse=True):
            sp = self.by_ordinal[o]
            if not sp.terminating:
                self.manager.delete_pod(sp, component="controller", reason="ScaleDown", grace=None)
            if self.ordered:
                return

    def adopt(self, sp: SimPod) -> None:
        super().adopt(sp)
        self.by_ordinal[sp.ordinal] = sp

    def start(self) -> None:
        self.reconcile()

    def scale(self, replicas: int) -> None:
        self.replicas = replicas
        self.reconcile()

    def pod_running(self, sp: SimPod) -> None:
        self.reconcile()

    def pod_failed(self, sp: SimPod) -> None:
        # A failed pod is deleted and recreated under the same name.
        self.manager.delete_pod(sp, component="controller", reason="RecreateFailed", grace=0.0)

    def pod_gone(self, sp: SimPod) -> None:
        super().pod_gone(sp)
        if self.by_ordinal.get(sp.ordinal) is sp:
            del self.by_ordinal[sp.ordinal]
            self.last_gone[sp.ordinal] = sp.key
        self.reconcile()


# ---------------------------------------------------------------- DaemonSet


DAEMON_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
)


class DaemonSetController(Controller):
    kind = "DaemonSet"

    def __init__(self, manager: ControllerManager, obj: dict[str, Any], workload: str) -> None:
        super().__init__(manager, obj, workload)
        self.daemon = DaemonTemplate.of(obj)
        self.template = self.daemon.template
        self.by_node: dict[str, SimPod] = {}

    def should_run(self, node: Node) -> bool:
        return self.daemon.should_run(node)

    def _create(self, node: str) -> None:
        raw = self.daemon.pod(self.name, self.namespace, self.uid, node)
        prev = self.by_node.get(node)
        sp = self.manager.create_pod(raw, self, f"{self.workload}@{node}", -1, prev.key if prev is not None else None)
        self.by_node[node] = sp

    def reconcile(self) -> None:
        for node in self.manager.node_objects():
            cur = self.by_node.get(node.name)
            if self.should_run(node):
                if cur is None or cur.terminating or cur.phase in ("Succeeded", "Failed"):
                    self._create(node.name)
            elif cur is not None and not cur.terminating and cur.phase not in ("Succeeded", "Failed"):
                self.manager.delete_pod(cur, component="controller", reason="NodeNotEligible", grace=None)

    def adopt(self, sp: SimPod) -> None:
        self.own(sp)
        if sp.node:
            self.by_node[sp.node] = sp

    def start(self) -> None:
        self.reconcile()

    def node_added(self, node: Node) -> None:
        self.reconcile()

    def node_removed(self, name: str) -> None:
        self.by_node.pop(name, None)

    def pod_terminating(self, sp: SimPod) -> None:
        self.reconcile()

    def pod_failed(self, sp: SimPod) -> None:
        self.reconcile()

    def pod_gone(self, sp: SimPod) -> None:
        super().pod_gone(sp)
        for node, cur in list(self.by_node.items()):
            if cur is sp:
                del self.by_node[node]
        self.reconcile()


def _tolerated(tolerations: tuple[Toleration, ...], taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


# ---------------------------------------------------------------- Job


class JobController(Controller):
    kind = "Job"

    def __init__(self, manager: ControllerManager, obj: dict[str, Any], workload: str, run_seconds: float) -> None:
        super().__init__(manager, obj, workload)
        spec = obj.get("spec") or {}
        self.parallelism = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
        c = spec.get("completions")
        self.completions = int(c) if c is not None else None
        self.backoff_limit = int(spec.get("backoffLimit", 6) if spec.get("backoffLimit") is not None else 6)
        self.template = spec.get("template") or {}
        self.run_seconds = run_seconds
        self.succeeded = 0
        self.failed = 0
        self.finished = ""
        self.job_labels = job_labels(self.name, self.uid)

    def _create(self) -> None:
        ordinal, freed_by = self.take_ordinal()
        raw = job_pod(self.template, self.name, self.namespace, self.uid)
        sp = self.manager.create_pod(raw, self, self.identity(ordinal), ordinal, freed_by)
        sp.run_seconds = self.run_seconds

    def reconcile(self) -> None:
        if self.finished:
            return
        if self.completions is not None and self.succeeded >= self.completions:
            self.finished = "Complete"
            self.manager.job_finished(self, self.finished)
            return
        if self.failed > self.backoff_limit:
            self.finished = "Failed"
            self.manager.job_finished(self, self.finished)
            for sp in self.active():
                self.manager.delete_pod(sp, component="controller", reason="BackoffLimitExceeded", grace=None)
            return
        active = self.active_count()
        want = self.parallelism
        if self.completions is not None:
            want = min(want, self.completions - self.succeeded)
        elif self.succeeded > 0:
            want = 0
            if active == 0:
                self.finished = "Complete"
                self.manager.job_finished(self, self.finished)
                return
        for _ in range(want - active):
            self._create()

    def start(self) -> None:
        self.reconcile()

    def scale(self, replicas: int) -> None:
        self.parallelism = replicas
        self.reconcile()

    def pod_terminating(self, sp: SimPod) -> None:
        if sp.phase != "Succeeded":
            self.failed += 1
        self.release_ordinal(sp)
        self.reconcile()

    def pod_failed(self, sp: SimPod) -> None:
        self.failed += 1
        self.release_ordinal(sp)
        self.reconcile()

    def pod_succeeded(self, sp: SimPod) -> None:
        self.succeeded += 1
        self.reconcile()

    def pod_gone(self, sp: SimPod) -> None:
        super().pod_gone(sp)
        if not sp.terminating and sp.phase not in ("Succeeded", "Failed"):
            self.failed += 1
            self.release_ordinal(sp)
            self.reconcile()


# ---------------------------------------------------------------- bare pods and implicit controllers


class BarePodController(Controller):
    """A Pod manifest: created once, never replaced."""

    kind = "Pod"

    def start(self) -> None:
        raw = copy.deepcopy(self.obj)
        _map_at(raw, "metadata")["namespace"] = self.namespace
        self.manager.create_pod(raw, self, self.workload, 0, None)


class ImplicitController(Controller):
    """Snapshot pods whose controller is not described: keep their number, recreating from a pod's spec."""

    def __init__(self, manager: ControllerManager, kind: str, namespace: str, name: str, uid: str, template_pod: dict[str, Any],
                 workload: str) -> None:
        self.kind = kind
        super().__init__(manager, {"metadata": {"name": name, "namespace": namespace, "uid": uid}}, workload)
        raw = copy.deepcopy(template_pod)
        raw.pop("status", None)
        meta = raw.get("metadata") or {}
        raw["metadata"] = {"labels": dict(meta.get("labels") or {}), "annotations": dict(meta.get("annotations") or {}),
                           "ownerReferences": list(meta.get("ownerReferences") or [])}
        spec = raw.get("spec") or {}
        spec.pop("nodeName", None)
        raw["spec"] = spec
        self.template = raw
        self.replicas = 0
        self.daemon = kind == "DaemonSet"

    def adopt(self, sp: SimPod) -> None:
        super().adopt(sp)
        self.replicas += 1

    def _create(self, replaces: SimPod) -> None:
        raw = copy.deepcopy(self.template)
        meta = raw["metadata"]
        if self.kind == "StatefulSet":
            meta["name"] = replaces.pod.name
        else:
            meta["generateName"] = f"{self.name}-"
        meta["namespace"] = self.namespace
        raw["kind"] = "Pod"
        if self.daemon and replaces.node:
            aff = _map_at(_map_at(raw["spec"], "affinity"), "nodeAffinity")
            aff["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [replaces.node]}]}]}
        self.manager.create_pod(raw, self, replaces.identity, replaces.ordinal, replaces.key)

    def pod_terminating(self, sp: SimPod) -> None:
        if self.kind not in ("StatefulSet",):
            self._create(sp)

    def pod_failed(self, sp: SimPod) -> None:
        if self.kind != "Job":
            self._create(sp)

    def pod_gone(self, sp: SimPod) -> None:
        super().pod_gone(sp)
        if self.kind == "StatefulSet" or (not sp.terminating and sp.phase not in ("Succeeded", "Failed")):
            self._create(sp)
