"""Pods that come and go as a trace says: created at their arrival, deleted at their departure.

A pod trace (for example the openb trace) lists pods with their requests, arrival and departure times
and a node-model constraint. With `inflate`, more pods are sampled from the trace (with replacement,
seeded) until the demand for a resource reaches a factor of the cluster's capacity (the FGD paper's
method). With `dropUnschedulable`, a pod that fails its scheduling attempt leaves at once.
"""

from __future__ import annotations

import numpy as np

from kubesched.cluster.events import Cause
from kubesched.sim.context import ORDER_POD, Sim
from kubesched.sim.controller_manager import ControllerManager
from kubesched.sim.pods import SimPod
from kubesched.sim.scenario import PodTraceSpec
from kubesched.sim.traces import TracePod, load_pod_trace, pod_trace_manifest


class TracePods:
    def __init__(self, sim: Sim, manager: ControllerManager) -> None:
        self.sim = sim
        self.manager = manager
        self.drop_workloads = {f"PodTrace/{pt.name}" for pt in sim.scenario.pod_traces if pt.drop_unschedulable}
        # Arrived demand per resource (milli-CPU for cpu), for allocation-against-arrival curves.
        self.arrived: dict[str, float] = {}
        self.resources: list[str] = []

    def schedule(self, spec: PodTraceSpec) -> None:
        pods = load_pod_trace(spec)
        if spec.inflate is not None:
            pods = self._inflate(spec, pods)
        ns = str((spec.template.get("metadata") or {}).get("namespace") or "default")
        workload = f"PodTrace/{spec.name}"
        for res in sorted({r for p in pods for r in p.requests}):
            if res not in self.resources:
                self.resources.append(res)
        for p in pods:
            if p.arrival > self.sim.scenario.duration:
                continue
            self.sim.push(max(p.arrival, 0.0), ORDER_POD, self._arrive, spec, p, ns, workload)

    def _inflate(self, spec: PodTraceSpec, pods: list[TracePod]) -> list[TracePod]:
        """Sample more pods (with replacement, seeded) until the demand reaches factor × capacity."""
        assert spec.inflate is not None
        res, factor = spec.inflate
        cap = sum(float(info.allocatable.get(res, 0)) for info in self.sim.cluster.node_infos)
        if cap <= 0 or not pods:
            return pods
        demand = sum(float(p.requests.get(res, 0)) for p in pods)
        rng = np.random.default_rng([self.sim.scenario.seed, 7])
        out = list(pods)
        i = 0
        if not any(p.requests.get(res) for p in pods):
            return pods
        while demand < factor * cap:
            src = pods[int(rng.integers(len(pods)))]
            i += 1
            t = out[-1].arrival + (spec.interval if spec.timing == "sequential" else 0.0)
            out.append(TracePod(f"{src.name}-x{i}", t, None, dict(src.requests), list(src.affinity_values)))
            demand += float(src.requests.get(res, 0))
        return out

    def _arrive(self, spec: PodTraceSpec, p: TracePod, ns: str, workload: str) -> None:
        raw = pod_trace_manifest(spec, p, ns)
        # Trace pods with the same requests and affinity are copies of one admitted pod.
        shape = (workload, tuple(sorted((k, str(v)) for k, v in p.requests.items())), tuple(p.affinity_values))
        sp = self.manager.create_pod(raw, None, f"{workload}/{p.name}", -1, None, workload, shape=shape,
                                     cause=Cause.TRACE)
        for res, v in p.requests.items():
            self.arrived[res] = self.arrived.get(res, 0.0) + float(v * 1000 if res == "cpu" else v)
        if p.departure is not None and p.departure >= p.arrival:
            self.sim.push(p.departure, ORDER_POD, self._depart, sp, sp.serial)

    def _depart(self, sp: SimPod, serial: int) -> None:
        if not self.sim.pods.current(sp) or sp.serial != serial:
            return
        self.sim.server.delete_pod(sp.pod, grace_period_seconds=0, cause=Cause.TRACE)

    def unschedulable(self, sp: SimPod, reason: str) -> None:
        """A pod of a trace that drops unschedulable pods failed its attempt: it leaves."""
        if sp.workload in self.drop_workloads and self.sim.pods.current(sp):
            self.sim.rec.event(self.sim.t, "dropped", pod=sp.key, reason=reason[:200])
            self.sim.server.delete_pod(sp.pod, grace_period_seconds=0, cause=Cause.TRACE)
