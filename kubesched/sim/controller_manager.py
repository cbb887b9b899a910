"""The controller manager: runs the workload controllers (controllers.py) and tells them what happened to
their pods and to the nodes.

Controllers create pods through the API server (`generateName`, admission, defaulting) and delete them
through it (graceful deletion); they learn from the cluster's events — a pod that starts terminating,
runs, fails, succeeds or is gone, a node added or removed — as a real controller learns from its
informers. Snapshot pods are adopted by the controller that owns them: one described in the snapshot
(ReplicaSet, StatefulSet, DaemonSet, Job, a Deployment's ReplicaSet), a scenario workload, or an implicit
controller that keeps their number.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from kubesched.api.defaulting import default_workload
from kubesched.api.objects import parse_workload
from kubesched.api.snapshot import Snapshot
from kubesched.client.interface import AlreadyExists
from kubesched.cluster.events import Cause, Event, EventType
from kubesched.errors import InputError
from kubesched.sim import controllers as ctl
from kubesched.sim.context import ORDER_POD, ORDER_SCENARIO, Sim
from kubesched.sim.controllers import Controller
from kubesched.sim.pods import SimPod


class ControllerManager:
    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self.controllers: list[Controller] = []
        self.by_workload: dict[str, Controller] = {}
        # Set by the wiring: the kubelet starts a pod that was created already bound.
        self.start_bound: Callable[[SimPod], None] = lambda sp: None

    # ------------------------------------------------------------ what controllers call

    def new_uid(self, name: str) -> str:
        return self.sim.server.new_uid(name)

    def create_pod(self, raw: dict[str, Any], owner: Controller | None, identity: str, ordinal: int,
                   replaces: str | None, workload: str | None = None, shape: Hashable | None = None,
                   cause: Cause = Cause.CONTROLLER, node: str | None = None) -> SimPod:
        """Create a pod through the API server and record what the simulation knows about it; with `node`,
        created bound (spec.nodeName: its kubelet starts it, the scheduler is not asked)."""
        if node:
            # Bound pods differ by node: each is admitted on its own.
            raw = {**raw, "spec": {**(raw.get("spec") or {}), "nodeName": node}}
        elif shape is None and owner is not None and not isinstance(owner, (ctl.StatefulSetController,
                                                                            ctl.BarePodController)):
            # Pods of one template are copies of one admitted pod (DaemonSet pods differ by node affinity).
            spec = raw.get("spec") or {}
            aff = spec.get("affinity") if isinstance(spec, dict) else None
            shape = (owner.key, repr(aff) if isinstance(owner, (ctl.DaemonSetController, ctl.ImplicitController))
                     else "")
        try:
            pod = self.sim.server.create_pod(raw, cause=cause, shape=shape)
        except AlreadyExists as e:
            raise InputError(f"two pods named {e.message.split(chr(34))[1]!r}", file=self.sim.scenario.path) from None
        wl = owner.workload if owner is not None else (workload or identity)
        sp = self.sim.pods.register(pod, owner, identity, ordinal, replaces, wl)
        if owner is not None:
            owner.own(sp)
        if node:
            self.start_bound(sp)
        return sp

    def delete_pod(self, sp: SimPod, component: str, reason: str, grace: float | None) -> None:
        """A graceful deletion (scale down, a failed StatefulSet pod, a finished Job's leftovers)."""
        if not self.sim.pods.current(sp) or sp.terminating:
            return
        self.sim.server.delete_pod(sp.pod, grace_period_seconds=None if grace is None else int(grace),
                                   cause=Cause.CONTROLLER)
        self.sim.pods.refresh(sp)

    def node_objects(self) -> list[Any]:
        return list(self.sim.cluster.nodes.values())

    def job_finished(self, job: Controller, how: str) -> None:
        self.sim.rec.event(self.sim.t, f"job{how}", workload=job.workload)

    # ------------------------------------------------------------ what controllers are told

    def pod_changed(self, sp: SimPod, ev: Event) -> None:
        owner = sp.owner
        if owner is None:
            return
        if ev.type is EventType.DELETED:
            owner.pod_gone(sp)
            return
        if ev.type is not EventType.UPDATED:
            return
        obj, old = ev.obj, ev.old
        if obj.is_terminating and (old is None or not old.is_terminating):
            owner.pod_terminating(sp)
        if old is not None and obj.phase != old.phase:
            if obj.phase == "Running":
                owner.pod_running(sp)
            elif obj.phase == "Failed":
                owner.pod_failed(sp)
            elif obj.phase == "Succeeded":
                owner.pod_succeeded(sp)

    def on_event(self, ev: Event) -> None:
        if ev.kind != "Node":
            return
        if ev.type is EventType.ADDED:
            for c in list(self.controllers):
                c.node_added(ev.obj)
        elif ev.type is EventType.DELETED:
            for c in list(self.controllers):
                c.node_removed(ev.obj.name)

    # ------------------------------------------------------------ building

    def make_controller(self, obj: dict[str, Any], workload: str, job_duration: float) -> Controller:
        kind = obj.get("kind")
        if kind == "Deployment":
            d = ctl.DeploymentController(self, obj, workload)
            self.sim.cluster.add(parse_workload(d.rs_object, "ReplicaSet"), cause=Cause.CONTROLLER)
            self.by_workload[workload] = d
            return d
        if kind == "ReplicaSet":
            c: Controller = ctl.ReplicaSetController(self, obj, workload)
        elif kind == "StatefulSet":
            c = ctl.StatefulSetController(self, obj, workload)
        elif kind == "DaemonSet":
            c = ctl.DaemonSetController(self, obj, workload)
        elif kind == "Job":
            c = ctl.JobController(self, obj, workload, job_duration)
        else:
            c = ctl.BarePodController(self, obj, workload)
        self.by_workload.setdefault(workload, c)
        return c

    def adopt_snapshot(self, snap: Snapshot, start_pod: Callable[[SimPod, int], None],
                       skip_pods: frozenset[str] = frozenset(), skip_workloads: frozenset[str] = frozenset()) -> None:
        """Snapshot pods start as they are: bound ones are started by their kubelet (`start_pod`) at time
        0, the others are pending. Their controllers (from the snapshot, the scenario, or implicit) adopt
        them. Pods and workloads a replay owns are skipped."""
        snap_ctrl: dict[tuple[str, str, str], Controller] = {}
        for o in snap.others:
            kind = o.kind
            if kind in ("ReplicaSet", "StatefulSet", "DaemonSet", "Job") and o.meta is not None:
                owners = (o.raw.get("metadata") or {}).get("ownerReferences") or []
                top = f"{kind}/{o.meta.namespace}/{o.meta.name}"
                for ow in owners:
                    if isinstance(ow, dict) and ow.get("controller") and ow.get("kind") == "Deployment":
                        top = f"Deployment/{o.meta.namespace}/{ow.get('name')}"
                if top in skip_workloads:
                    continue
                snap_ctrl[(kind, o.meta.namespace, o.meta.name)] = self.make_controller(o.raw, top, 600.0)
        implicit: dict[tuple[str, str, str], ctl.ImplicitController] = {}
        sim = self.sim
        for p in snap.pods:
            if p.key in skip_pods:
                continue
            ref = p.controller_ref()
            owner: Controller | None = None
            if ref is not None:
                k = (ref.kind, p.namespace, ref.name)
                owner = snap_ctrl.get(k)
                if owner is None:
                    if k not in implicit:
                        implicit[k] = ctl.ImplicitController(self, ref.kind, p.namespace, ref.name, ref.uid, p.raw,
                                                             f"{ref.kind}/{p.namespace}/{ref.name}")
                        self.controllers.append(implicit[k])
                    owner = implicit[k]
            workload = owner.workload if owner is not None else f"Pod/{p.key}"
            ordinal = len(owner.pods) if owner is not None else 0
            if isinstance(owner, ctl.StatefulSetController):
                try:
                    ordinal = int(p.name.rsplit("-", 1)[1])
                except (IndexError, ValueError):
                    pass
            identity = owner.identity(ordinal) if owner is not None else workload
            if isinstance(owner, ctl.DaemonSetController) or (isinstance(owner, ctl.ImplicitController) and owner.daemon):
                identity = f"{workload}@{p.node_name}"
            sp = sim.pods.register(p, owner, identity, ordinal, None, workload)
            if owner is not None:
                owner.adopt(sp)
            sim.cluster.add(p)
            if p.node_name and not p.is_terminal:
                sim.pods.set_node(sp, p.node_name)
                sp.bound_at = 0.0
                sim.push(0.0, ORDER_POD, start_pod, sp, sp.serial)
        for c in snap_ctrl.values():
            self.controllers.append(c)
            sim.push(0.0, ORDER_SCENARIO, c.start)

    def from_scenario(self) -> None:
        """The scenario's workloads, each under its controller, started at time 0."""
        sim = self.sim
        for w in sim.scenario.workloads:
            try:
                obj = default_workload(w.manifest, w.where)
                if obj.get("kind") in ("ReplicaSet", "StatefulSet"):
                    sim.cluster.add(parse_workload(obj, obj["kind"]), cause=Cause.CONTROLLER)
            except InputError as e:
                raise e.located(file=sim.scenario.path) from None
            c = self.make_controller(obj, w.key, w.job_duration)
            self.controllers.append(c)
            sim.push(0.0, ORDER_SCENARIO, self._start, c)

    def _start(self, c: Controller) -> None:
        try:
            c.start()
        except InputError as e:
            raise e.located(file=self.sim.scenario.path) from None

    def scale(self, workload: str, replicas: int) -> None:
        c = self.by_workload.get(workload)
        if c is not None:
            c.scale(replicas)
