"""Gangs in the simulator: PodGroups for the workloads that name one, gang members that work only together,
and what the report shows of them.

- **PodGroups.** A Job, or a set of bare Pods, whose pod template carries `scheduling.x-k8s.io/pod-group`
  is created with its PodGroup: the scenario's own PodGroup object when it has one (in a workload file, in
  `cluster.objects` or in the snapshot), else one made at the start with minMember = the Job's parallelism
  (or the number of bare Pods naming the group). The PodGroup controller (`podgroups.py`) keeps their status.
- **Gang semantics.** A distributed job's workers wait for each other: a pod of a group starts its work (its
  Job's `jobDuration`) only once minMember pods of the group are Running; until then it holds its node's
  resources and makes no progress. A gang that is placed piecemeal and never completes holds them for ever —
  the deadlock gang scheduling exists to avoid.
- **Measures** (per variant): how long each gang waited (creation → minMember running), Permit waits and
  timeouts (from the scheduler's outcomes), and the GPUs and CPU held by pods of gangs below quorum — assumed
  while waiting at Permit, or bound and idle — as a step series, its integral (GPU-hours, CPU core-hours)
  and its peak: the fragmentation partial placement causes.

A driver like the others (it takes the `Sim` and never imports the engine): the kubelets ask `holds(sp,
serial)` when a pod starts (True: the gang driver pushes the pod's success once its gang works), the engine
hands it every scheduling outcome (`outcome`) and asks `result(t)` at the end; the rest is listening to the
cluster state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kubesched.api.objects import Pod
from kubesched.api.resources import CPU, scheduler_request
from kubesched.api.scheduling import API_VERSION, PodGroup, PodGroupStatus, parse_pod_group, pod_group_full_name
from kubesched.cluster.events import Cause, Event, EventType
from kubesched.scheduler.scheduler import Outcome
from kubesched.sim.context import ORDER_POD
from kubesched.sim.podgroups import PodGroupController

if TYPE_CHECKING:
    from kubesched.sim.context import Sim
    from kubesched.sim.pods import SimPod

# Extended resources counted as GPUs (whole devices).
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "alibabacloud.com/gpu-count")


def gpus_of(pod: Pod) -> int:
    req = scheduler_request(pod)
    return sum(req.get(r, 0) for r in GPU_RESOURCES)


@dataclass(slots=True)
class Gang:
    key: str  # namespace/name
    min_member: int
    created: float
    quorum_bound: float | None = None  # minMember pods bound (assumed pods do not count)
    started: float | None = None  # minMember pods Running: the work begins
    finished: float | None = None  # the PodGroup reached Finished
    failed: bool = False
    phase: str = ""
    permit_waits: list[float] = field(default_factory=list)
    permit_timeouts: int = 0
    permit_rejections: int = 0
    running: dict[str, tuple[SimPod, int]] = field(default_factory=dict)
    held: list[tuple[SimPod, int]] = field(default_factory=list)

    def to_json(self, end: float) -> dict[str, Any]:
        wait = (self.started if self.started is not None else end) - self.created
        return {"podGroup": self.key, "minMember": self.min_member, "created": round(self.created, 3),
                "quorumBound": _r(self.quorum_bound), "started": _r(self.started), "finished": _r(self.finished),
                "waitSeconds": round(wait, 3), "startedInRun": self.started is not None, "phase": self.phase,
                "permitWaits": len(self.permit_waits), "permitTimeouts": self.permit_timeouts,
                "permitRejections": self.permit_rejections}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


class GangDriver:
    def __init__(self, sim: Sim, succeed: Callable[[SimPod, int], None]) -> None:
        """`succeed(sp, serial)`: the kubelet's end of a Job pod that has done its work."""
        self.e = sim
        self.succeed = succeed
        self.cluster = sim.cluster
        self.gangs: dict[str, Gang] = {}
        # Pods of gangs below quorum that hold resources (assumed or bound): key → (gpus, milli-cpu).
        self._holding: dict[str, tuple[str, int, int]] = {}
        self.held_gpus = 0
        self.held_milli_cpu = 0
        self.series: list[tuple[float, int, float]] = []  # (t, GPUs held, cores held) at each change
        self._gpu_seconds = 0.0
        self._cpu_seconds = 0.0
        self._peak_gpus = 0
        self._peak_cores = 0.0
        self._last_t = 0.0
        self._create_missing_pod_groups()
        for obj in list(self.cluster.others.values()):
            if isinstance(obj, PodGroup):
                self._gang(obj)
        self.cluster.subscribe(self._on_event, kinds=("Pod", "PodGroup"))
        self.controller = PodGroupController(self.cluster, self._phase_changed)

    # ------------------------------------------------------------ PodGroups

    def _create_missing_pod_groups(self) -> None:
        """Workloads that name a PodGroup the cluster does not have get one (minMember = their size)."""
        sizes: dict[tuple[str, str], int] = {}
        for w in self.e.scenario.workloads:
            obj = w.manifest
            kind = obj.get("kind")
            meta = obj.get("metadata") or {}
            ns = str(meta.get("namespace") or "default")
            if kind == "Job":
                spec = obj.get("spec") or {}
                tmpl_meta = (spec.get("template") or {}).get("metadata") or {}
                group = (tmpl_meta.get("labels") or {}).get("scheduling.x-k8s.io/pod-group")
                size = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
            elif kind == "Pod":
                group = (meta.get("labels") or {}).get("scheduling.x-k8s.io/pod-group")
                size = 1
            else:
                continue
            if group:
                sizes[(ns, str(group))] = sizes.get((ns, str(group)), 0) + size
        start = datetime.fromtimestamp(self.e.epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for (ns, name), size in sorted(sizes.items()):
            if f"PodGroup/{ns}/{name}" in self.cluster.others:
                continue
            pg = parse_pod_group({"apiVersion": API_VERSION, "kind": "PodGroup",
                                  "metadata": {"name": name, "namespace": ns, "creationTimestamp": start},
                                  "spec": {"minMember": size}})
            self.cluster.add(pg, cause=Cause.CONTROLLER)
            self.e.rec.event(self.e.t, "podGroupCreated", podGroup=f"{ns}/{name}", minMember=size)

    def _gang(self, pg: PodGroup) -> Gang:
        g = self.gangs.get(pg.full_name)
        if g is None:
            created = pg.meta.creation_timestamp
            t = created.timestamp() - self.e.epoch if created is not None else self.e.t
            g = Gang(pg.full_name, pg.min_member, max(t, 0.0))
            self.gangs[pg.full_name] = g
        g.min_member = pg.min_member
        return g

    def _gang_of(self, pod: Pod) -> Gang | None:
        full = pod_group_full_name(pod)
        if not full:
            return None
        g = self.gangs.get(full)
        if g is None:
            pg = self.cluster.others.get(f"PodGroup/{full}")
            if isinstance(pg, PodGroup):
                g = self._gang(pg)
        return g

    def _phase_changed(self, pg: PodGroup, old: PodGroupStatus) -> None:
        g = self._gang(pg)
        g.phase = pg.status.phase
        if pg.status.phase == "Finished" and g.finished is None:
            g.finished = self.e.t
        if pg.status.phase == "Failed":
            g.failed = True
        self.e.rec.event(self.e.t, "podGroupPhase", podGroup=pg.full_name, phase=pg.status.phase,
                         running=pg.status.running, succeeded=pg.status.succeeded, failed=pg.status.failed)

    # ------------------------------------------------------------ held resources

    def _advance(self) -> None:
        t = self.e.t
        dt = t - self._last_t
        if dt > 0:
            self._gpu_seconds += dt * self.held_gpus
            self._cpu_seconds += dt * self.held_milli_cpu / 1000.0
            self._last_t = t

    def _changed(self) -> None:
        self._peak_gpus = max(self._peak_gpus, self.held_gpus)
        self._peak_cores = max(self._peak_cores, self.held_milli_cpu / 1000.0)
        point = (round(self.e.t, 3), self.held_gpus, round(self.held_milli_cpu / 1000.0, 3))
        if self.series and self.series[-1][0] == point[0]:
            self.series[-1] = point
        else:
            self.series.append(point)

    def _hold(self, pod: Pod, gang: Gang) -> None:
        if pod.key in self._holding or gang.started is not None:
            return
        self._advance()
        gpus, cpu = gpus_of(pod), scheduler_request(pod).get(CPU, 0)
        self._holding[pod.key] = (gang.key, gpus, cpu)
        self.held_gpus += gpus
        self.held_milli_cpu += cpu
        self._changed()

    def _release(self, key: str) -> None:
        entry = self._holding.pop(key, None)
        if entry is None:
            return
        self._advance()
        self.held_gpus -= entry[1]
        self.held_milli_cpu -= entry[2]
        self._changed()

    def _on_event(self, ev: Event) -> None:
        obj, t = ev.obj, ev.type
        if ev.kind == "PodGroup" and t in (EventType.ADDED, EventType.UPDATED):
            self._gang(obj)
            return
        if ev.kind != "Pod" or not self.gangs:
            return  # every PodGroup there is has a gang (from the start or from its ADDED event)
        gang = self._gang_of(obj)
        if gang is None:
            return
        if t is EventType.ASSUMED or t is EventType.BOUND:
            self._hold(obj, gang)
            if t is EventType.BOUND and gang.quorum_bound is None:
                bound = sum(1 for p in self.controller.pods_of(gang.key.split("/", 1)[1])
                            if p.namespace == obj.namespace and p.node_name and p.key not in self.cluster.assumed)
                if bound >= gang.min_member:
                    gang.quorum_bound = self.e.t
        elif t is EventType.UNBOUND or t is EventType.DELETED:
            self._release(obj.key)
        elif t is EventType.UPDATED and obj.is_terminal:
            self._release(obj.key)

    # ------------------------------------------------------------ engine hooks

    def holds(self, sp: SimPod, serial: int) -> bool:
        """A pod started: a gang member waits for its gang before working (True: the driver pushes its end)."""
        gang = self._gang_of(sp.pod)
        if gang is None:
            return False
        gang.running[sp.key] = (sp, serial)
        self.controller.reconcile(sp.pod.namespace, gang.key.split("/", 1)[1])
        if gang.started is not None:
            return False  # the gang works already: a late member just works
        gang.held.append((sp, serial))
        # This pod has just started (its Running status may still be on its way to the record).
        live = [(p, s) for p, s in gang.running.values() if p is sp or (not p.gone and p.phase == "Running")]
        if len(live) >= gang.min_member:
            gang.started = self.e.t
            self.e.rec.event(self.e.t, "gangStarted", podGroup=gang.key, waited=round(self.e.t - gang.created, 3))
            for p, s in gang.held:
                self._release(p.key)
                if p.run_seconds > 0:
                    self.e.push(self.e.t + p.run_seconds, ORDER_POD, self.succeed, p, s)
            for key in [k for k, v in self._holding.items() if v[0] == gang.key]:
                self._release(key)
            gang.held = []
        return True

    def outcome(self, out: Outcome) -> None:
        gang = self._gang_of(out.pod)
        if gang is None:
            return
        if out.waited is not None:
            gang.permit_waits.append(out.waited)
            if out.node is None:
                if out.timed_out:
                    gang.permit_timeouts += 1
                else:
                    gang.permit_rejections += 1

    def result(self, end: float) -> dict[str, Any]:
        """What the report shows of the gangs (empty when the run had none)."""
        if not self.gangs:
            return {}
        self._advance()
        gangs = [g.to_json(end) for _, g in sorted(self.gangs.items())]
        waits = [g["waitSeconds"] for g in gangs]
        permit = [w for g in self.gangs.values() for w in g.permit_waits]
        capacity_gpus = sum(sum(info.allocatable.get(r, 0) for r in GPU_RESOURCES) for info in self.cluster.node_infos)
        summary = {
            "gangs": len(gangs),
            "gangsStarted": sum(1 for g in gangs if g["startedInRun"]),
            "gangsFinished": sum(1 for g in self.gangs.values() if g.finished is not None),
            "gangWaitMean": round(sum(waits) / len(waits), 3),
            "gangWaitMax": round(max(waits), 3),
            "permitWaits": len(permit),
            "permitWaitMax": round(max(permit), 3) if permit else 0.0,
            "permitTimeouts": sum(g.permit_timeouts for g in self.gangs.values()),
            "permitRejections": sum(g.permit_rejections for g in self.gangs.values()),
            "partialGangGpuHours": round(self._gpu_seconds / 3600.0, 4),
            "partialGangCpuCoreHours": round(self._cpu_seconds / 3600.0, 4),
            "partialGangGpusPeak": self._peak_gpus,
            "partialGangCpuCoresPeak": round(self._peak_cores, 3),
            "partialGangGpusAtEnd": self.held_gpus,
            "clusterGpus": capacity_gpus,
        }
        return {"summary": summary, "gangs": gangs,
                "series": {"t": [p[0] for p in self.series], "gpus": [p[1] for p in self.series],
                           "cores": [p[2] for p in self.series]}}
