"""`kubesched descheduler`: kubesched's descheduler against a real cluster, as the upstream binary runs.

As kubernetes-sigs/descheduler's `descheduler.Run` (pkg/descheduler/descheduler.go): informers sync, then
with `--descheduling-interval` a cycle every interval (timed from the start of one cycle to the start of
the next), without one a single cycle and exit; `--leader-elect` needs an interval ("leaderElection must be
used with deschedulingInterval") and only the Lease's holder runs cycles.

A cycle is `Descheduler.run_cycle` — the same profiles, plugins, evictor filters and limits as
`kubesched deschedule` — over the informers' `ClusterState`, held still for the cycle (watch events wait
for its end, so an evicted pod stays as it was for the rest of the cycle, as in the one-shot command).
Evictions go to the API server as they are decided, through the policy/v1 Eviction subresource; the
server's 429 (a PodDisruptionBudget allows no disruption now) makes that eviction fail: it is logged as
skipped, counted (`descheduler_pods_evicted_total{result="error"}`), and never retried within the cycle;
the limits (`maxNoOfPodsToEvictPerNode`, `...PerNamespace`, `...Total`) hold across every plugin of every
profile. `--dry-run` sends nothing: evictions are answered by an in-process server over the cache that
refuses nothing, as upstream's dry-run mode answers them with a fake client, and reported.

Usage for usage-based strategies comes live: metrics.k8s.io NodeMetrics and PodMetrics through the API
server (when the policy enables the KubernetesMetrics provider, or `--metrics metrics.k8s.io`), smoothed
across cycles by the MetricsCollector as upstream's collector does; the policy's Prometheus provider asked
at the cycle's time; `--metrics SOURCE` for load-aware strategies (koordinator's LowNodeLoad).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from prometheus_client import Counter, Histogram

from kubesched.api.objects import Node, Pod, PodDisruptionBudget
from kubesched.api.selectors import parse_label_selector_string
from kubesched.client.inprocess import InProcessAPIServer
from kubesched.client.interface import ApiError, Client, KubeEvent, TooManyRequests
from kubesched.cluster.events import Cause
from kubesched.cluster.state import ClusterState
from kubesched.config.descheduler_policy import DeschedulerPolicy, load_descheduler_policy
from kubesched.config.scheduler_config import load_scheduler_config
from kubesched.descheduler.descheduler import CycleResult, Descheduler
from kubesched.descheduler.framework import DeschedulerServices
from kubesched.descheduler.metricscollector import MetricsCollector
from kubesched.descheduler.registry import default_registry
from kubesched.errors import InputError, RemoteError
from kubesched.live.informer import InformerCache, Informers
from kubesched.live.process import LiveProcess, ProcessOptions
from kubesched.live.usage import METRICS_API, ApiServerMetrics, usage_source
from kubesched.metrics.base import MetricsSource
from kubesched.metrics.prometheus import DeschedulerPrometheusClient, PrometheusClient

LEASE_NAME = "descheduler"
LOOP_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500]


@dataclass(frozen=True, slots=True)
class DeschedulerOptions:
    policy: str
    interval: float = 0.0
    dry_run: bool = False
    metrics: str | None = None
    min_ready_nodes: int = 2
    scheduler_config: str | None = None
    seed: int = 0
    output: str = "table"
    sync_timeout: float = 120.0


class DeschedulerMetrics:
    def __init__(self, proc: LiveProcess) -> None:
        reg = proc.registry
        self.evicted = Counter("descheduler_pods_evicted", "Number of total evicted pods, by the result, by the "
                               "strategy, by the namespace, by the node name. 'error' result means a pod could not be "
                               "evicted", ["result", "strategy", "profile", "namespace", "node"], registry=reg)
        self.loop = Histogram("descheduler_loop_duration_seconds", "Time taken to complete a full descheduling cycle",
                              buckets=LOOP_BUCKETS, registry=reg)
        self.usage_failures = Counter("kubesched_usage_read_failures", "Failed readings of the usage source.",
                                      registry=reg)


class EvictionReporter:
    """The Client the descheduler evicts through: the real (or dry-run) one, with every refusal logged and
    counted under the profile and plugin that asked."""

    def __init__(self, inner: Client, proc: LiveProcess, metrics: DeschedulerMetrics) -> None:
        self.inner = inner
        self.proc = proc
        self.metrics = metrics
        self.descheduler: Descheduler | None = None
        self.refused: list[dict[str, Any]] = []

    def _who(self) -> tuple[str, str]:
        if self.descheduler is not None:
            for prof in self.descheduler.profiles:
                if prof.evictor.current_plugin:
                    return prof.name, prof.evictor.current_plugin
        return "", ""

    def evict(self, pod: Pod, *, grace_period_seconds: int | None = None, dry_run: bool = False,
              cause: Cause = Cause.DESCHEDULER) -> None:
        try:
            self.inner.evict(pod, grace_period_seconds=grace_period_seconds, dry_run=dry_run, cause=cause)
        except ApiError as e:
            profile, plugin = self._who()
            self.metrics.evicted.labels("error", plugin, profile, pod.namespace, pod.node_name).inc()
            skipped = isinstance(e, TooManyRequests)
            self.refused.append({"pod": pod.key, "node": pod.node_name, "profile": profile, "plugin": plugin,
                                 "code": e.code, "message": e.message, "skipped": skipped})
            if skipped:
                self.proc.log.info("Skipped eviction: the API server refused it (429), a PodDisruptionBudget allows "
                                   "no disruption now", pod=pod.key, node=pod.node_name, err=e.message, profile=profile,
                                   strategy=plugin)
            else:
                self.proc.log.error("Error evicting pod", err=e.message, pod=pod.key, node=pod.node_name,
                                    code=e.code, profile=profile, strategy=plugin)
            raise

    def create_pod(self, manifest: dict[str, Any], *, cause: Cause) -> Pod:
        return self.inner.create_pod(manifest, cause=cause)

    def delete_pod(self, pod: Pod, *, grace_period_seconds: int | None = None, cause: Cause) -> None:
        self.inner.delete_pod(pod, grace_period_seconds=grace_period_seconds, cause=cause)

    def bind(self, pod: Pod, node_name: str, *, cause: Cause = Cause.SCHEDULER) -> None:
        self.inner.bind(pod, node_name, cause=cause)

    def patch_node(self, node: Node, *, taints: list[dict[str, Any]] | None = None,
                   conditions: dict[str, str] | None = None, unschedulable: bool | None = None, cause: Cause) -> Node:
        return self.inner.patch_node(node, taints=taints, conditions=conditions, unschedulable=unschedulable,
                                     cause=cause)

    def update_pod_status(self, pod: Pod, *, cause: Cause, **status: Any) -> Pod:
        return self.inner.update_pod_status(pod, cause=cause, **status)

    def patch_pod_annotations(self, pod: Pod, annotations: Mapping[str, str | None], *, cause: Cause) -> Pod:
        return self.inner.patch_pod_annotations(pod, annotations, cause=cause)

    def update_pdb_status(self, pdb: PodDisruptionBudget, **kw: Any) -> None:
        self.inner.update_pdb_status(pdb, **kw)

    def create_event(self, event: KubeEvent) -> None:
        self.proc.events.record(event)


class DeschedulerProcess:
    def __init__(self, proc: LiveProcess, opts: DeschedulerOptions) -> None:
        self.proc = proc
        self.opts = opts
        self.log = proc.log
        if opts.interval < 0:
            raise InputError(f"expected a non-negative duration, got {opts.interval}", field="--descheduling-interval")
        if proc.opts.leader_elect and opts.interval == 0:
            raise InputError("leaderElection must be used with deschedulingInterval", field="--leader-elect")
        if opts.min_ready_nodes < 0:
            raise InputError(f"expected a non-negative number, got {opts.min_ready_nodes}", field="--min-ready-nodes")
        # The policy and configs are read before anything is asked of the API server (bad input: exit 2).
        self.policy: DeschedulerPolicy = load_descheduler_policy(opts.policy, default_registry())
        self.scheduler_config = load_scheduler_config(opts.scheduler_config) if opts.scheduler_config else None
        self.metrics = DeschedulerMetrics(proc)
        self.state = ClusterState()
        self.cache = InformerCache(self.state, self.log)
        self.informers = Informers(proc.kube, self.cache, self.log, page_size=proc.opts.page_size)
        self.node_selector = parse_label_selector_string(self.policy.node_selector, "nodeSelector")
        # A --metrics file is read now too, so that a bad one is refused before the cluster is contacted.
        self.usage: MetricsSource | None = None
        if opts.metrics and opts.metrics != METRICS_API:
            self.usage = usage_source(opts.metrics, proc.kube)
        self.metrics_api = ApiServerMetrics(proc.kube)
        self.collector: MetricsCollector | None = None
        self.descheduler: Descheduler | None = None
        self.reporter: EvictionReporter | None = None
        self.cycles = 0

    # ------------------------------------------------------------ running

    def run(self) -> int:
        proc = self.proc
        proc.serve(readyz=[("informer-sync", self._synced)])
        self.informers.start()
        proc.on_shutdown(self.informers.shutdown)
        timeout = None if self.opts.interval > 0 else self.opts.sync_timeout
        if not self.informers.wait_synced(timeout, stop=proc.stop):
            if proc.stop.is_set():
                return proc.exit_code()
            errors = self.informers.last_errors()
            why = errors[0] + (f" (and {len(errors) - 1} more kinds)" if len(errors) > 1 else "") if errors else "no answer"
            raise RemoteError(f"the informers did not sync in {self.opts.sync_timeout:g}s: {why}")
        self.log.info("Informers synced", nodes=len(self.state.nodes), pods=len(self.state.pods))
        if not proc.lead():
            return proc.exit_code()
        if self.opts.interval == 0:
            result = self.cycle()
            self.print_report(result)
            return proc.exit_code()
        while proc.running:
            start = time.monotonic()
            self.cycle()
            proc.stop.wait(max(0.0, self.opts.interval - (time.monotonic() - start)))
        return proc.exit_code()

    def _synced(self) -> tuple[bool, str]:
        if self.informers.synced():
            return True, ""
        return False, "; ".join(self.informers.last_errors()) or "informers have not synced yet"

    # ------------------------------------------------------------ one cycle

    def _build(self) -> Descheduler:
        proc = self.proc
        inner: Client = (InProcessAPIServer(self.state, time.time, enforce_pdbs=False) if self.opts.dry_run
                         else proc.client)
        self.reporter = EvictionReporter(inner, proc, self.metrics)
        services = DeschedulerServices(seed=self.opts.seed, scheduler_config=self.scheduler_config)
        d = Descheduler(self.state, self.policy, now=datetime.now(UTC), metrics=self.collector, client=self.reporter,
                        dry_run=self.opts.dry_run, min_ready_nodes=self.opts.min_ready_nodes, services=services)
        self.reporter.descheduler = d
        return d

    def _usage_inputs(self, now: datetime) -> tuple[list[dict[str, Any]], Any]:
        """This cycle's metrics.k8s.io objects (when wanted) and the reading of `--metrics`."""
        objects: list[dict[str, Any]] = []
        if self.policy.kubernetes_metrics_enabled or self.opts.metrics == METRICS_API:
            try:
                objects = self.metrics_api.objects()
            except RemoteError as e:
                self.metrics.usage_failures.inc()
                self.log.error("Failed to read metrics.k8s.io", err=e)
        reading = None
        if self.usage is not None:
            try:
                reading = self.usage.fetch(now)
            except (RemoteError, InputError, OSError, ValueError) as e:
                self.metrics.usage_failures.inc()
                self.log.error("Failed to read usage", err=e, source=self.usage.describe())
        return objects, reading

    def cycle(self) -> CycleResult:
        now = datetime.now(UTC)
        objects, reading = self._usage_inputs(now)
        started = time.perf_counter()
        with self.cache.cond:
            names = [n.name for n in self.state.nodes.values() if self.node_selector.matches(n.labels)]
            if self.collector is None:
                self.collector = MetricsCollector.from_cluster(self.state, objects, self.node_selector,
                                                               f"{self.proc.kube.server} (metrics.k8s.io)")
            elif objects:
                self.collector.add_objects(objects, names, "metrics.k8s.io")
            if self.descheduler is None:
                self.descheduler = self._build()
            d = self.descheduler
            d.services.metric_objects = objects
            provider = self.policy.metrics_provider("Prometheus")
            url = (provider.prometheus or {}).get("url") if provider is not None else None
            if url:
                d.services.prometheus_client = DeschedulerPrometheusClient(PrometheusClient(str(url)), now.timestamp())
            assert self.reporter is not None
            self.reporter.refused = []
            result = d.run_cycle(now, metrics=self.collector, usage=reading)
        seconds = time.perf_counter() - started
        self.metrics.loop.observe(seconds)
        self.cycles += 1
        for r in result.evictions:
            self.metrics.evicted.labels("success", r.plugin, r.profile, r.pod.namespace, r.node).inc()
            self.log.info("Evicted pod in dry run mode" if self.opts.dry_run else "Evicted pod", v=1, pod=r.pod.key,
                          reason=r.reason, strategy=r.plugin, node=r.node, profile=r.profile)
            if not self.opts.dry_run:
                self.proc.events.record(KubeEvent(
                    f"Pod {r.pod.key}", r.reason or r.plugin or "NotSet",
                    f"pod eviction from {r.node} node by sigs.k8s.io/descheduler", component="sigs.k8s.io/descheduler",
                    fields={"uid": r.pod.uid, "action": "Descheduled"}))
        for err in result.errors:
            self.log.error("Plugin failed", err=err)
        if result.skipped:
            self.log.info("Cycle skipped", reason=result.skipped)
        skipped = len([r for r in (self.reporter.refused if self.reporter else []) if r["skipped"]])
        self.log.info("Descheduling cycle finished", cycle=self.cycles, evicted=len(result.evictions),
                      refused=len(self.reporter.refused) if self.reporter else 0, skippedByPDB=skipped,
                      seconds=round(seconds, 3), dryRun=self.opts.dry_run)
        return result

    def report(self, result: CycleResult) -> dict[str, Any]:
        return {"dryRun": self.opts.dry_run,
                "evictions": [r.to_json() for r in result.evictions],
                "refused": list(self.reporter.refused) if self.reporter else [],
                "skipped": result.skipped, "errors": result.errors, "nodes": [n.name for n in result.nodes]}

    def print_report(self, result: CycleResult) -> None:
        data = self.report(result)
        if self.opts.output == "json":
            sys.stdout.write(json.dumps(data, indent=2) + "\n")
            return
        verb = "would be evicted" if self.opts.dry_run else "evicted"
        for e in data["evictions"]:
            sys.stdout.write(f"{e['pod']}\t{e['node']}\t{e['plugin']}\t{e['profile']}\t{e['reason']}\n")
        for r in data["refused"]:
            sys.stdout.write(f"{r['pod']}\t{r['node']}\t{r['plugin']}\t{r['profile']}\trefused ({r['code']}): "
                             f"{r['message']}\n")
        sys.stdout.write(f"{len(data['evictions'])} pod(s) {verb}, {len(data['refused'])} refused by the API server\n")


def run_descheduler(popts: ProcessOptions, opts: DeschedulerOptions) -> int:
    proc = LiveProcess(popts, "kubesched-descheduler", LEASE_NAME)
    try:
        dp = DeschedulerProcess(proc, opts)
        proc.install_signal_handlers()
        return dp.run()
    finally:
        proc.shutdown()
