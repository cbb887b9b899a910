"""Replaying a recording: pods arrive on the node they ran on, when they were first seen, and leave when
they were last seen — the `spec.replay` section `kubesched capture` writes.

The table (CSV or Parquet) has one row per pod lifetime in the recording: namespace, name, node, `start`
(first seen) and `end` (the first moment it was no longer seen; empty when it was still running at the end
of the recording), in seconds since the scenario start (times `timeUnit`), and optionally `owner`
(`Kind/name` of its controller). Each row becomes a pod:

- its manifest is the snapshot's pod of that name; a pod that was gone by the time of the snapshot takes the
  pod template of its controller (the row's `owner`, else the snapshot ReplicaSet / StatefulSet / DaemonSet /
  Job / ReplicationController whose name the pod's name extends, as controllers name their pods), else a
  sibling snapshot pod of that controller, else a bare one-container pod;
- with `placement: recorded` it is created bound to its recorded node (as a pod created with
  spec.nodeName: the kubelet admits and starts it, the scheduler is not asked); with `placement: scheduler`
  the scheduler places it;
- it is one replica identity of its workload (its usage is its own series, looked up by `namespace/name`):
  when the simulation removes it (a descheduler or kubelet eviction, preemption, a failure) its controller
  replaces it at once under the same identity, placed by the scheduler — a DaemonSet's pod on its node —
  and the replacement leaves at the recorded end;
- snapshot pods of a recorded workload that have no row (no usage history: pending pods, say) are there
  from the start, as without a replay.

So a replay with no descheduler puts on each node, at each step, exactly the pods that ran there, with the
usage they had. Workloads without any recorded pod behave as plain snapshot workloads.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass
from typing import Any

from kubesched.api.objects import Pod
from kubesched.api.snapshot import Snapshot
from kubesched.errors import InputError
from kubesched.sim.context import ORDER_POD, Sim
from kubesched.sim.controller_manager import ControllerManager
from kubesched.sim.controllers import Controller
from kubesched.sim.pods import SimPod
from kubesched.sim.scenario import ReplaySpec
from kubesched.sim.traces import read_rows

OWNER_KINDS = ("ReplicaSet", "StatefulSet", "DaemonSet", "Job", "ReplicationController")
_API = {"Job": "batch/v1", "ReplicationController": "v1"}


@dataclass(slots=True)
class RecordedPod:
    namespace: str
    name: str
    node: str
    start: float
    end: float | None
    owner_kind: str
    owner_name: str
    owner_uid: str
    workload: str
    identity: str
    raw: dict[str, Any]
    from_snapshot: bool

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _time(value: Any, unit: float, column: str, line: int, file: str) -> float | None:
    if value is None or value == "":
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"row {line}: expected a number of seconds in column {column!r}, got {value!r}",
                         file=file) from None
    return None if math.isnan(v) else v * unit


def load_rows(spec: ReplaySpec) -> list[dict[str, Any]]:
    rows = read_rows(spec.file, spec.where)
    if not rows:
        return []
    for col in (spec.namespace, spec.name, spec.node, spec.start, spec.end):
        if col not in rows[0]:
            raise InputError(f"no column {col!r}; the table has: {', '.join(map(str, rows[0]))}", file=spec.file,
                             field=spec.where)
    return rows


def _workload_tops(snap: Snapshot) -> tuple[dict[tuple[str, str, str], str], dict[tuple[str, str, str], dict[str, Any]]]:
    """For each controller object of the snapshot: its top-level workload key (a ReplicaSet owned by a
    Deployment belongs to the Deployment, as the engine names it) and the object."""
    tops: dict[tuple[str, str, str], str] = {}
    objects: dict[tuple[str, str, str], dict[str, Any]] = {}
    for o in snap.others:
        if o.kind not in OWNER_KINDS or o.meta is None:
            continue
        k = (o.kind, o.meta.namespace, o.meta.name)
        top = f"{o.kind}/{o.meta.namespace}/{o.meta.name}"
        for ow in (o.raw.get("metadata") or {}).get("ownerReferences") or []:
            if isinstance(ow, dict) and ow.get("controller") and ow.get("kind") == "Deployment":
                top = f"Deployment/{o.meta.namespace}/{ow.get('name')}"
        tops[k] = top
        objects[k] = o.raw
    return tops, objects


def _pod_owner(pod: Pod) -> tuple[str, str, str]:
    ref = pod.controller_ref()
    return (ref.kind, ref.name, ref.uid) if ref is not None else ("", "", "")


class _OwnerIndex:
    """Which controller a pod that is no longer in the snapshot belonged to, from its name."""

    def __init__(self, snap: Snapshot, objects: dict[tuple[str, str, str], dict[str, Any]]) -> None:
        self.by_ns: dict[str, list[tuple[str, str, str]]] = {}
        seen: set[tuple[str, str, str]] = set()
        for kind, ns, name in objects:
            uid = str(((objects[(kind, ns, name)].get("metadata") or {}).get("uid")) or "")
            seen.add((kind, ns, name))
            self.by_ns.setdefault(ns, []).append((kind, name, uid))
        for p in snap.pods:
            kind, name, uid = _pod_owner(p)
            if kind and (kind, p.namespace, name) not in seen:
                seen.add((kind, p.namespace, name))
                self.by_ns.setdefault(p.namespace, []).append((kind, name, uid))
        for owners in self.by_ns.values():
            owners.sort(key=lambda o: -len(o[1]))  # the longest matching name wins

    def find(self, namespace: str, pod_name: str) -> tuple[str, str, str]:
        for kind, name, uid in self.by_ns.get(namespace, []):
            rest = pod_name[len(name) + 1:] if pod_name.startswith(name + "-") else None
            if rest is None:
                continue
            if kind == "StatefulSet" and rest.isdigit():
                return kind, name, uid
            if kind != "StatefulSet" and re.fullmatch(r"[a-z0-9]{5}", rest):
                return kind, name, uid
        return "", "", ""


def _from_template(template: dict[str, Any], namespace: str, name: str, owner: tuple[str, str, str]) -> dict[str, Any]:
    raw = copy.deepcopy(template)
    meta = raw.get("metadata") or {}
    raw["metadata"] = {"name": name, "namespace": namespace, "labels": dict(meta.get("labels") or {}),
                       "annotations": dict(meta.get("annotations") or {})}
    kind, oname, uid = owner
    if kind:
        raw["metadata"]["ownerReferences"] = [{"apiVersion": _API.get(kind, "apps/v1"), "kind": kind, "name": oname,
                                               "uid": uid, "controller": True, "blockOwnerDeletion": True}]
    raw["apiVersion"], raw["kind"] = "v1", "Pod"
    raw.setdefault("spec", {}).pop("nodeName", None)
    raw.pop("status", None)
    return raw


def _pristine(pod: Pod) -> dict[str, Any]:
    """A snapshot pod's manifest as a controller would create it again: no status, no binding."""
    raw = copy.deepcopy(pod.raw)
    raw.pop("status", None)
    meta = raw.get("metadata") or {}
    for k in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
              "managedFields", "generation"):
        meta.pop(k, None)
    raw.setdefault("spec", {}).pop("nodeName", None)
    return raw


def recorded_pods(spec: ReplaySpec, snap: Snapshot) -> list[RecordedPod]:
    """Every pod the replay plays, in table order, then the unrecorded snapshot pods of recorded workloads."""
    tops, objects = _workload_tops(snap)
    owners = _OwnerIndex(snap, objects)
    snap_pods = {p.key: p for p in snap.pods}
    siblings: dict[tuple[str, str, str], Pod] = {}
    for p in snap.pods:
        kind, oname, _ = _pod_owner(p)
        if kind:
            siblings.setdefault((kind, p.namespace, oname), p)
    out: list[RecordedPod] = []
    segments: dict[str, int] = {}
    for line, row in enumerate(load_rows(spec), start=2):
        ns = str(row[spec.namespace] or "default")
        name = str(row[spec.name] or "")
        if not name:
            raise InputError(f"row {line}: empty pod name in column {spec.name!r}", file=spec.file)
        node = str(row[spec.node] or "")
        start = _time(row[spec.start], spec.time_unit, spec.start, line, spec.file)
        if start is None:
            raise InputError(f"row {line}: no start time in column {spec.start!r}", file=spec.file)
        end = _time(row[spec.end], spec.time_unit, spec.end, line, spec.file)
        pod = snap_pods.get(f"{ns}/{name}")
        if pod is not None:
            owner = _pod_owner(pod)
            raw = _pristine(pod)
        else:
            owner = ("", "", "")
            named = str(row.get(spec.owner) or "")
            if "/" in named:
                kind, oname = named.split("/", 1)
                uid = str(((objects.get((kind, ns, oname)) or {}).get("metadata") or {}).get("uid") or "")
                owner = (kind, oname, uid)
            if not owner[0]:
                owner = owners.find(ns, name)
            kind, oname, _ = owner
            template = ((objects.get((kind, ns, oname)) or {}).get("spec") or {}).get("template")
            sibling = siblings.get((kind, ns, oname))
            if isinstance(template, dict):
                raw = _from_template(template, ns, name, owner)
            elif sibling is not None:
                raw = _from_template(_pristine(sibling), ns, name, owner)
            else:
                raw = _from_template({"spec": {"containers": [{"name": "main", "image": "recorded"}]}}, ns, name, owner)
        kind, oname, uid = owner
        workload = tops.get((kind, ns, oname)) or (f"{kind}/{ns}/{oname}" if kind else f"Pod/{ns}/{name}")
        seg = segments.get(f"{ns}/{name}", 0)
        segments[f"{ns}/{name}"] = seg + 1
        out.append(RecordedPod(ns, name, node, start, end, kind, oname, uid, workload,
                               f"{workload}#{ns}/{name}" + (f"#{seg}" if seg else ""), raw, pod is not None))
    recorded_workloads = {r.workload for r in out}
    have = {r.key for r in out}
    for p in snap.pods:
        if p.key in have or p.is_terminal:
            continue
        kind, oname, uid = _pod_owner(p)
        workload = tops.get((kind, p.namespace, oname)) or (f"{kind}/{p.namespace}/{oname}" if kind else
                                                             f"Pod/{p.key}")
        if workload in recorded_workloads:
            out.append(RecordedPod(p.namespace, p.name, p.node_name, 0.0, None, kind, oname, uid, workload,
                                   f"{workload}#{p.key}", _pristine(p), True))
    return out


class ReplayController(Controller):
    """The controller of a recorded workload: recorded pods arrive and leave at their times; a pod the
    simulation removes is replaced at once under the same identity, placed by the scheduler."""

    def __init__(self, manager: ControllerManager, kind: str, namespace: str, name: str, uid: str,
                 workload: str) -> None:
        self.kind = kind or "Pod"
        super().__init__(manager, {"metadata": {"name": name or workload, "namespace": namespace, "uid": uid}},
                         workload)
        self.current: dict[str, SimPod] = {}
        self.recorded: dict[str, RecordedPod] = {}
        self.ended: set[str] = set()
        self.placement = "recorded"

    def arrive(self, rec: RecordedPod) -> None:
        self.recorded[rec.identity] = rec
        node = rec.node if self.placement == "recorded" and rec.node else None
        raw = copy.deepcopy(rec.raw)
        sp = self.manager.create_pod(raw, self, rec.identity, -1, None, node=node)
        self.current[rec.identity] = sp

    def depart(self, identity: str) -> None:
        self.ended.add(identity)
        sp = self.current.pop(identity, None)
        if sp is not None and not sp.gone and not sp.terminating:
            self.manager.delete_pod(sp, component="controller", reason="Recorded", grace=0.0)

    def _replace(self, sp: SimPod) -> None:
        ident = sp.identity
        rec = self.recorded.get(ident)
        if rec is None or ident in self.ended or self.current.get(ident) is not sp or self.kind == "Pod":
            return
        raw = copy.deepcopy(rec.raw)
        meta = raw.setdefault("metadata", {})
        if self.kind != "StatefulSet":
            meta.pop("name", None)
            meta["generateName"] = f"{self.name}-"
        if self.kind == "DaemonSet" and rec.node:
            aff = raw.setdefault("spec", {}).setdefault("affinity", {}).setdefault("nodeAffinity", {})
            aff["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [rec.node]}]}]}
        self.current[ident] = self.manager.create_pod(raw, self, ident, -1, sp.key)

    def pod_terminating(self, sp: SimPod) -> None:
        if self.kind != "StatefulSet":
            self._replace(sp)

    def pod_failed(self, sp: SimPod) -> None:
        if self.kind != "StatefulSet":
            self._replace(sp)

    def pod_gone(self, sp: SimPod) -> None:
        super().pod_gone(sp)
        if self.kind == "StatefulSet" or (not sp.terminating and sp.phase not in ("Succeeded", "Failed")):
            self._replace(sp)


class Replay:
    """Builds the recorded pods and their controllers; the controller manager skips the snapshot pods and
    snapshot controllers the replay owns (`pod_keys`, `workloads`) and the engine calls `start()`."""

    def __init__(self, sim: Sim, manager: ControllerManager, spec: ReplaySpec, snap: Snapshot) -> None:
        self.sim = sim
        self.manager = manager
        self.spec = spec
        self.pods = recorded_pods(spec, snap)
        self.pod_keys = frozenset(r.key for r in self.pods if r.from_snapshot)
        self.workloads = frozenset(r.workload for r in self.pods)
        self.controllers: dict[str, ReplayController] = {}

    def start(self) -> None:
        m = self.manager
        duration = self.sim.scenario.duration
        for rec in self.pods:
            c = self.controllers.get(rec.workload)
            if c is None:
                c = ReplayController(m, rec.owner_kind, rec.namespace, rec.owner_name or rec.name, rec.owner_uid,
                                     rec.workload)
                c.placement = self.spec.placement
                self.controllers[rec.workload] = c
                m.controllers.append(c)
                m.by_workload.setdefault(rec.workload, c)
        # Departures first: at one instant a pod that left makes room before one that came.
        for rec in sorted(self.pods, key=lambda r: (r.end or 0.0, r.key)):
            if rec.end is not None and rec.end <= duration and rec.end > rec.start:
                self.sim.push(max(rec.end, 0.0), ORDER_POD, self.controllers[rec.workload].depart, rec.identity)
        for rec in sorted(self.pods, key=lambda r: (r.start, r.key)):
            if rec.start <= duration and (rec.end is None or rec.end > max(rec.start, 0.0)):
                self.sim.push(max(rec.start, 0.0), ORDER_POD, self.controllers[rec.workload].arrive, rec)
