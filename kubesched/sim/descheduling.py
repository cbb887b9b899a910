"""The descheduler, running every interval against the simulated API server.

As the upstream binary does: a cycle at start, then one every `interval`; the same `Descheduler` for the
whole run (strategies keep state across cycles, e.g. LowNodeLoad's anomaly detectors). Each cycle gets
the metrics of its moment — the MetricsCollector's smoothed node usage and the pods' usage from
metrics-server, and koordlet's NodeMetric when a strategy reads it — and PodDisruptionBudgets' status is
brought up to date first. Evictions go through the Eviction API (a PDB that allows no disruption
refuses with 429; the pod terminates gracefully otherwise).
"""

from __future__ import annotations

from kubesched.config.descheduler_policy import DeschedulerPolicy
from kubesched.config.scheduler_config import SchedulerConfig
from kubesched.descheduler.descheduler import Descheduler
from kubesched.descheduler.framework import DeschedulerServices
from kubesched.sim.context import ORDER_DESCHEDULER, Sim
from kubesched.sim.disruption import DisruptionController
from kubesched.sim.loops import Eviction
from kubesched.sim.metrics import MetricsDriver
from kubesched.sim.node_usage import ResourceUsage


class DeschedulerDriver:
    def __init__(self, sim: Sim, policy: DeschedulerPolicy, interval: float, scheduler_config: SchedulerConfig,
                 usage: ResourceUsage, metrics: MetricsDriver, disruption: DisruptionController) -> None:
        self.sim = sim
        self.policy = policy
        self.interval = interval
        self.scheduler_config = scheduler_config
        self.usage = usage
        self.metrics = metrics
        self.disruption = disruption
        names = {n for prof in policy.profiles for ps in prof.plugins.values() for n in ps.enabled}
        self.wants_koordlet = bool(names & {"LowNodeLoad"})
        self.descheduler: Descheduler | None = None
        self.cycles = 0

    def cycle(self) -> None:
        sim = self.sim
        self.usage.current()
        self.disruption.sync()
        now = sim.now_dt()
        collector = self.metrics.metrics_collector()
        d = self.descheduler
        if d is None:
            services = DeschedulerServices(scheduler_config=self.scheduler_config, seed=sim.scenario.seed)
            d = Descheduler(sim.cluster, self.policy, now=now, metrics=collector, client=sim.server, dry_run=False,
                            services=services)
            self.descheduler = d
        usage = self.metrics.koordlet.fetch(now) if self.wants_koordlet else None
        result = d.run_cycle(now, metrics=collector, usage=usage)
        self.cycles += 1
        for r in result.evictions:
            sp = sim.pods.last(r.pod.key)
            sim.rec.evictions.append(Eviction(sim.t, r.pod.key, sp.workload if sp is not None else "", r.node,
                                              "descheduler", r.plugin or "descheduler", r.pod.is_terminal))
        if result.evictions or result.errors or result.skipped:
            sim.rec.event(sim.t, "deschedulerCycle", evictions=len(result.evictions), skipped=result.skipped,
                          errors=list(result.errors)[:5])
        sim.push(sim.t + self.interval, ORDER_DESCHEDULER, self.cycle)
