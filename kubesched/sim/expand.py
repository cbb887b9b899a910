"""Workloads in a snapshot → the pods their controllers would create, for the one-shot commands.

A snapshot may hold Deployments, ReplicaSets, ReplicationControllers, StatefulSets, DaemonSets and Jobs whose
pods are not (all) in it: a folder of manifests (`kubectl apply -f` material), or a dump taken while the
controllers had not caught up. `schedule`, `capacity`, `explain`, `qos`, `deschedule` and `node-pressure` see
the cluster the way its controllers would leave it a moment later: every workload's missing pods exist,
pending, made by the same code as the simulator's controllers (`sim/controllers.py`: names, labels, owner
references, a Deployment's ReplicaSet, a DaemonSet pod's node affinity and tolerations) and passed through
the same API defaulting and admission (`api/defaulting.py`). No clock, no engine: what a controller does on
its first sync.

What counts as existing follows the controllers' pod claiming (PodControllerRefManager): pods whose
controller reference names the workload, and orphans in its namespace that its selector matches (adopted).
Terminal and terminating pods are not active. A Deployment with ReplicaSets of its own in the snapshot is
left to them; otherwise its ReplicaSet is made as the deployment controller makes it.

Where the controllers need time, the one-shot view takes the end state: a StatefulSet gets every missing
ordinal (OrderedReady would create them one by one as each becomes Ready), a Job its `parallelism` pods (or
fewer when fewer completions remain). CronJobs create Jobs on a schedule and are not expanded (a warning says
so); a suspended Job creates nothing.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubesched.api.defaulting import admit_pod, default_workload
from kubesched.api.documents import read_documents
from kubesched.api.hashing import stable_hash64
from kubesched.api.objects import GenericObject, Pod, PriorityClass, parse_pod
from kubesched.api.selectors import LabelSelector, parse_label_selector
from kubesched.api.snapshot import Snapshot, iter_objects
from kubesched.api.validation import check_create
from kubesched.diagnostics import warn
from kubesched.errors import InputError
from kubesched.sim import controllers as ctl

EXPANDED_KINDS = ("Deployment", "ReplicaSet", "ReplicationController", "StatefulSet", "DaemonSet", "Job")
# A bound on the pods one snapshot may ask for (10x the pods of the largest supported cluster, 150,000), so a
# replicas: 2000000000 is refused at once instead of exhausting memory.
MAX_EXPANDED_PODS = 1_500_000


@dataclass
class _Plan:
    kind: str
    obj: dict[str, Any]  # defaulted
    name: str
    namespace: str
    uid: str
    selector: LabelSelector
    missing: int = 0
    ordinals: list[int] = field(default_factory=list)  # StatefulSet
    nodes: list[str] = field(default_factory=list)  # DaemonSet
    daemon: ctl.DaemonTemplate | None = None


def _owner_uid(kind: str, namespace: str, name: str, raw_uid: Any) -> str:
    if isinstance(raw_uid, str) and raw_uid:
        return raw_uid
    h = f"{stable_hash64('uid', kind, namespace, name):016x}{stable_hash64(name, kind):016x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _active(pod: Pod) -> bool:
    return not pod.is_terminal and not pod.is_terminating


class _Claims:
    """Which snapshot pods each workload owns: by controller reference, or adopted orphans its selector matches."""

    def __init__(self, pods: list[Pod]) -> None:
        self.by_owner: dict[tuple[str, str, str], list[Pod]] = {}
        self.orphans: dict[str, list[Pod]] = {}
        for p in pods:
            ref = p.controller_ref()
            if ref is None:
                self.orphans.setdefault(p.namespace, []).append(p)
            else:
                self.by_owner.setdefault((ref.kind, p.namespace, ref.name), []).append(p)
        self.adopted: set[str] = set()

    def claim(self, kind: str, namespace: str, name: str, selector: LabelSelector) -> list[Pod]:
        owned = list(self.by_owner.get((kind, namespace, name), []))
        for p in self.orphans.get(namespace, []):
            if p.key not in self.adopted and not selector.empty and selector.matches(p.labels) and _active(p):
                self.adopted.add(p.key)
                owned.append(p)
        return owned


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def _defaulted(o: GenericObject, file: str, obj_name: str | None = None) -> dict[str, Any]:
    raw = o.raw
    if o.kind == "ReplicationController":
        # A map selector; the API server defaults it (and the template's labels) from each other.
        raw = copy.deepcopy(raw)
        spec: dict[str, Any] = raw["spec"] if isinstance(raw.get("spec"), dict) else {}
        template: dict[str, Any] = spec["template"] if isinstance(spec.get("template"), dict) else {}
        tmeta: dict[str, Any] = template["metadata"] if isinstance(template.get("metadata"), dict) else {}
        sel = spec.get("selector")
        if not sel and isinstance(tmeta.get("labels"), dict):
            sel = dict(tmeta["labels"])
        if isinstance(sel, dict):
            if not tmeta.get("labels"):
                tmeta["labels"] = dict(sel)
                template["metadata"] = tmeta
            spec["selector"] = {"matchLabels": sel}
        raw["spec"] = spec
    try:
        obj = default_workload({**raw, "kind": "ReplicaSet"} if o.kind == "ReplicationController" else raw, "")
    except InputError as e:
        field = e.field.lstrip(".") if e.field else e.field
        raise InputError(e.message, file=file, obj=obj_name or f"{o.kind} {o.meta.key if o.meta else '?'}",
                         field=field) from None
    if o.kind == "ReplicationController":
        obj["kind"] = "ReplicationController"
    return obj


def _int_field(spec: dict[str, Any], key: str, default: int) -> int:
    v = spec.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _has_daemon_pod(pods: list[Pod], node: str) -> bool:
    for p in pods:
        if not _active(p):
            continue
        if p.node_name == node:
            return True
        req = p.affinity.node_required
        if not p.node_name and req is not None:
            for term in req.terms:
                for r in term.match_fields:
                    if r.key == "metadata.name" and r.operator == "In" and r.values == (node,):
                        return True
    return False


def _job_finished(obj: dict[str, Any]) -> bool:
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    for c in conditions if isinstance(conditions, list) else []:
        if isinstance(c, dict) and c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return True
    return False


def _plan(snap: Snapshot, file: str) -> list[_Plan]:
    claims = _Claims(snap.pods)
    # Gang kinds (PodGroup, ElasticQuota, NodeResourceTopology) live in `others` too but are never expanded.
    objects = [o for o in snap.others
               if isinstance(o, GenericObject) and o.kind in EXPANDED_KINDS and o.meta is not None]
    for o in snap.others:
        if o.kind == "CronJob":
            warn("not expanded: a CronJob creates Jobs on its schedule, which a one-shot command does not reach",
                 file=file, obj=f"CronJob {o.meta.key if o.meta else '?'}")
    owned_rs = {(_meta(o.raw).get("namespace") or "default", ref.get("name"))
                for o in objects if o.kind == "ReplicaSet"
                for ref in (_meta(o.raw).get("ownerReferences") or [])
                if isinstance(ref, dict) and ref.get("controller") and ref.get("kind") == "Deployment"}
    plans: list[_Plan] = []
    for o in objects:
        assert o.meta is not None
        name, namespace = o.meta.name, o.meta.namespace or "default"
        uid = _owner_uid(o.kind, namespace, name, _meta(o.raw).get("uid"))
        if o.kind == "Deployment" and (namespace, name) in owned_rs:
            continue  # its ReplicaSets in the snapshot hold its pods
        spec_raw = o.raw.get("spec")
        if not isinstance(spec_raw, dict) or not isinstance(spec_raw.get("template"), dict):
            warn("no pod template: read for its selector only, no pods made for it", file=file,
                 obj=f"{o.kind} {o.meta.key}", field="spec.template")
            continue
        obj = _defaulted(o, file)
        kind = o.kind
        if kind == "Deployment":
            obj = ctl.deployment_replicaset(obj, name, namespace, uid)
            kind, name = "ReplicaSet", obj["metadata"]["name"]
            uid = _owner_uid(kind, namespace, name, None)
        spec = obj["spec"]
        selector = parse_label_selector(spec.get("selector"), "spec.selector") if kind != "Job" else \
            LabelSelector(())
        plan = _Plan(kind, obj, name, namespace, uid, selector)
        existing = [p for p in claims.claim(kind, namespace, name, selector if kind != "Job" else LabelSelector(()))
                    if _active(p)]
        if kind in ("ReplicaSet", "ReplicationController"):
            plan.missing = max(0, _int_field(spec, "replicas", 1) - len(existing))
        elif kind == "StatefulSet":
            have = {p.name for p in existing}
            plan.ordinals = [i for i in range(_int_field(spec, "replicas", 1)) if f"{name}-{i}" not in have]
            plan.missing = len(plan.ordinals)
        elif kind == "DaemonSet":
            plan.daemon = ctl.DaemonTemplate.of(obj)
            plan.nodes = [n.name for n in snap.nodes
                          if plan.daemon.should_run(n) and not _has_daemon_pod(existing, n.name)]
            plan.missing = len(plan.nodes)
        elif kind == "Job":
            if spec.get("suspend") is True or _job_finished(o.raw):
                continue
            status = o.raw.get("status")
            succeeded = _int_field(status if isinstance(status, dict) else {}, "succeeded", 0)
            want = _int_field(spec, "parallelism", 1)
            completions = spec.get("completions")
            if isinstance(completions, int) and not isinstance(completions, bool):
                want = min(want, max(0, completions - succeeded))
            plan.missing = max(0, want - len(existing))
        if plan.missing:
            plans.append(plan)
    return plans


def expand_workloads(snap: Snapshot, file: str, now: datetime, seed: int = 0) -> Snapshot:
    """The snapshot with every workload's missing pods added (pending), made as its controller makes them."""
    if not any(o.kind in EXPANDED_KINDS or o.kind == "CronJob" for o in snap.others):
        return snap
    plans = _plan(snap, file)
    total = sum(p.missing for p in plans)
    if total > MAX_EXPANDED_PODS:
        biggest = max(plans, key=lambda p: p.missing)
        raise InputError(f"the workloads would create {total} pods ({biggest.kind} {biggest.namespace}/{biggest.name}: "
                         f"{biggest.missing}); kubesched expands at most {MAX_EXPANDED_PODS}", file=file)
    if not plans:
        return snap
    classes: dict[str, PriorityClass] = {pc.meta.name: pc for pc in snap.priority_classes}
    taken = {p.key for p in snap.pods}
    rng = random.Random(stable_hash64("expand", seed))
    created: list[Pod] = []
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")

    def suffix() -> str:
        return "".join(rng.choice(ctl.ALPHANUMS) for _ in range(5))

    def unique(ns: str, base: str) -> str:
        """generateName: the base and a random suffix not yet taken."""
        while True:
            name = f"{base}-{suffix()}"
            if f"{ns}/{name}" not in taken:
                taken.add(f"{ns}/{name}")
                return name

    for plan in plans:
        obj_name = f"{plan.kind} {plan.namespace}/{plan.name}"
        spec = plan.obj["spec"]
        template = spec.get("template") or {}
        raws: list[dict[str, Any]] = []
        if plan.kind in ("ReplicaSet", "ReplicationController"):
            for _ in range(plan.missing):
                raws.append(ctl.owned_pod(template, plan.namespace, plan.kind, plan.name, plan.uid))
        elif plan.kind == "StatefulSet":
            revision = ctl.statefulset_revision(plan.name, template)
            for i in plan.ordinals:
                raws.append(ctl.statefulset_pod(template, plan.name, plan.namespace, plan.uid, i, revision))
                taken.add(f"{plan.namespace}/{plan.name}-{i}")
        elif plan.kind == "DaemonSet":
            assert plan.daemon is not None
            for node in plan.nodes:
                raws.append(plan.daemon.pod(plan.name, plan.namespace, plan.uid, node))
        else:
            for _ in range(plan.missing):
                raws.append(ctl.job_pod(template, plan.name, plan.namespace, plan.uid))
        for i, raw in enumerate(raws):
            meta = dict(raw["metadata"])
            if "generateName" in meta and not meta.get("name"):
                # What the API server does with generateName: the prefix and five random characters.
                meta["name"] = unique(plan.namespace, str(meta["generateName"]).rstrip("-"))
            raws[i] = {**raw, "metadata": meta}
        first: Pod | None = None
        for raw in raws:
            pod = _create(raw, classes, stamp, file, obj_name, first)
            first = first or pod
            created.append(pod)
    return Snapshot(nodes=snap.nodes, pods=snap.pods + created, namespaces=snap.namespaces,
                    priority_classes=snap.priority_classes, pdbs=snap.pdbs, pvcs=snap.pvcs,
                    workloads=snap.workloads, others=snap.others)


def _create(raw: dict[str, Any], classes: dict[str, PriorityClass], stamp: str, file: str, obj: str,
            first: Pod | None) -> Pod:
    """A pod through the API server's defaulting, admission and validation, as a controller's create is."""
    full = copy.deepcopy(raw)
    meta = full.setdefault("metadata", {})
    name, ns = meta["name"], meta["namespace"]
    meta["uid"] = _owner_uid("Pod", ns, name, None)
    meta["creationTimestamp"] = stamp
    full["status"] = {"phase": "Pending"}
    try:
        if first is None:
            check_create(full, field_prefix=None)
        admit_pod(full, classes, "spec.template.spec")
        return parse_pod(full)
    except InputError as e:
        raise e.located(file=file, obj=obj) from None



TEMPLATE_KINDS = ("Pod", "PodTemplate") + EXPANDED_KINDS


def pod_template(path: str, classes: dict[str, PriorityClass], now: datetime) -> Pod:
    """The pod `capacity --pod-template` copies: a Pod as written, or the pod a workload's controller would
    create from its template (defaulted and admitted like the simulator's), or a PodTemplate's template."""
    objects = [d for d in iter_objects(read_documents(path), path) if d.get("kind") in TEMPLATE_KINDS]
    if len(objects) != 1:
        raise InputError(f"expected exactly one Pod or workload ({', '.join(TEMPLATE_KINDS[1:])}), found "
                         f"{len(objects)}", file=path)
    raw = objects[0]
    kind = raw["kind"]
    meta = _meta(raw)
    name = str(meta.get("name") or kind.lower())
    namespace = str(meta.get("namespace") or "default")
    obj_name = f"{kind} {namespace}/{name}"
    if kind == "Pod":
        check_create(raw, file=path, obj=obj_name)
        try:
            return parse_pod(raw)
        except InputError as e:
            raise e.located(file=path) from None
    if kind == "PodTemplate":
        template = raw.get("template")
        if not isinstance(template, dict):
            raise InputError("Required value", file=path, obj=obj_name, field="template")
        pod = ctl.owned_pod(template, namespace, "PodTemplate", name, "")
        pod["metadata"].pop("ownerReferences", None)
        return _create(_named(pod, f"{name}-0"), classes, now.strftime("%Y-%m-%dT%H:%M:%SZ"), path, obj_name, None)
    generic = GenericObject(kind, str(raw.get("apiVersion") or ""), None, raw)
    obj = _defaulted(generic, path, obj_name)
    uid = _owner_uid(kind, namespace, name, meta.get("uid"))
    template = obj["spec"]["template"]
    if kind == "Deployment":
        rs = ctl.deployment_replicaset(obj, name, namespace, uid)
        rs_name = rs["metadata"]["name"]
        pod = ctl.owned_pod(rs["spec"]["template"], namespace, "ReplicaSet", rs_name,
                            _owner_uid("ReplicaSet", namespace, rs_name, None))
    elif kind in ("ReplicaSet", "ReplicationController"):
        pod = ctl.owned_pod(template, namespace, kind, name, uid)
    elif kind == "StatefulSet":
        pod = ctl.statefulset_pod(template, name, namespace, uid, 0, ctl.statefulset_revision(name, template))
    elif kind == "DaemonSet":
        pod = ctl.owned_pod(ctl.DaemonTemplate.of(obj).template, namespace, kind, name, uid)
    else:
        pod = ctl.job_pod(template, name, namespace, uid)
    generated = pod["metadata"].get("generateName")
    return _create(_named(pod, f"{generated}0" if generated else pod["metadata"]["name"]), classes,
                   now.strftime("%Y-%m-%dT%H:%M:%SZ"), path, obj_name, None)


def _named(pod: dict[str, Any], name: str) -> dict[str, Any]:
    return {**pod, "metadata": {**pod["metadata"], "name": name}}
