"""`kubesched scheduler`: kubesched's scheduler as a second scheduler of a real cluster.

The same `Scheduler` (queue, framework, plugins, preemption) the one-shot commands and the simulator run,
over a `ClusterState` that informers keep current, acting through `LiveClient`. It runs as kube-scheduler
runs (kubernetes pkg/scheduler/schedule_one.go, cmd/kube-scheduler/app/server.go), as scheduler-plugins'
"second scheduler" setup does:

- only pods whose `spec.schedulerName` one of its profiles serves enter its queue (`responsibleForPod`);
  scheduling gates keep a pod out of the queue until they are removed (the PreEnqueue check);
- informers sync before anything is scheduled; with `--leader-elect` only the Lease's holder schedules;
- the scheduling cycle runs under the cache's lock; the binding (`pods/binding`) is sent asynchronously, as
  the binding cycle's goroutine sends it, while the pod stays assumed in the cache. On success the watch
  shows the pod bound; on failure the assumption is forgotten (Unreserve, then the pod leaves its node) and
  — upstream's `handleSchedulingFailure` — the pod goes back to the queue with backoff unless the API
  shows it bound or gone (a 409 is answered by reading the pod: bound by someone else, it is left alone;
  no retry storm);
- every failed attempt records a `FailedScheduling` Event and sets the pod's `PodScheduled` condition to
  False (reason Unschedulable, or SchedulerError for errors) when it changed; a binding records a
  `Scheduled` Event "Successfully assigned NS/NAME to NODE"; preemption patches `nominatedNodeName`,
  sets the victims' DisruptionTarget condition and deletes them (see kubesched.scheduler.preemption);
- metrics with kube-scheduler's names: `scheduler_schedule_attempts_total{result,profile}`,
  `scheduler_scheduling_attempt_duration_seconds{result,profile}`, `scheduler_pending_pods{queue}`,
  `scheduler_preemption_victims`, and client-go's `rest_client_requests_total{code,host,method}` and
  `leader_election_master_status{name}`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from kubesched.api.objects import Node, Pod, PodDisruptionBudget
from kubesched.client.interface import ApiError, Conflict, KubeEvent
from kubesched.cluster.events import Cause
from kubesched.cluster.state import ClusterState
from kubesched.config.scheduler_config import load_scheduler_config
from kubesched.errors import RemoteError
from kubesched.live.apiclient import LiveClient
from kubesched.live.informer import InformerCache, Informers
from kubesched.live.process import WRITER_THREADS, LiveProcess, ProcessOptions
from kubesched.live.usage import UsageRefresher, usage_source
from kubesched.metrics.base import wall_clock_now
from kubesched.metrics.watcher import WatcherHTTPSource
from kubesched.scheduler.framework import Code, CycleState, QueuedPodInfo, SchedulerServices
from kubesched.scheduler.registry import Registry
from kubesched.scheduler.scheduler import Outcome, Scheduler

LEASE_NAME = "kubesched-scheduler"
QUEUES = ("active", "backoff", "unschedulable", "gated")


@dataclass(frozen=True, slots=True)
class SchedulerOptions:
    config: str | None = None
    seed: int = 0
    metrics: str | None = None
    metrics_interval: float = 30.0
    plugins: tuple[str, ...] = ()


class SchedulerMetrics:
    def __init__(self, proc: LiveProcess) -> None:
        reg = proc.registry
        self.attempts = Counter("scheduler_schedule_attempts", "Number of attempts to schedule pods, by the result. "
                                "'unschedulable' means a pod could not be scheduled, while 'error' means an internal "
                                "scheduler problem.", ["result", "profile"], registry=reg)
        self.duration = Histogram("scheduler_scheduling_attempt_duration_seconds", "Scheduling attempt latency in "
                                  "seconds (scheduling algorithm + binding)", ["result", "profile"],
                                  buckets=[0.001 * 2 ** i for i in range(15)], registry=reg)
        self.pending = Gauge("scheduler_pending_pods", "Number of pending pods, by the queue type. 'active' means "
                             "number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' "
                             "means number of pods in unschedulablePods; 'gated' is the number of unschedulable pods "
                             "that the PreEnqueue plugins rejected.", ["queue"], registry=reg)
        self.victims = Histogram("scheduler_preemption_victims", "Number of selected preemption victims",
                                 buckets=[2.0 ** i for i in range(7)], registry=reg)
        self.usage_failures = Counter("kubesched_usage_read_failures", "Failed readings of the usage source.",
                                      registry=reg)

    def observe(self, result: str, profile: str, seconds: float) -> None:
        self.attempts.labels(result, profile).inc()
        self.duration.labels(result, profile).observe(seconds)


@dataclass(slots=True)
class _Binding:
    qpi: QueuedPodInfo | None
    pod: Pod
    node: str
    start: float
    profile: str


class AsyncBinder:
    """The Client the scheduler acts through: `bind` sends the Binding from a pool of writer threads and
    returns at once (the binding cycle runs beside the next scheduling cycle); the other verbs go to the API
    server as they are called."""

    def __init__(self, live: LiveClient, pool: ThreadPoolExecutor, done: Callable[[_Binding, ApiError | None], None],
                 record: Callable[[KubeEvent], None]) -> None:
        self.live = live
        self.pool = pool
        self.done = done
        self.record = record
        self.pending: dict[str, _Binding] = {}

    def bind(self, pod: Pod, node_name: str, *, cause: Cause = Cause.SCHEDULER) -> None:
        b = _Binding(None, pod, node_name, time.perf_counter(), pod.scheduler_name)
        self.pending[pod.key] = b
        self.pool.submit(self._send, b)

    def _send(self, b: _Binding) -> None:
        err: ApiError | None = None
        try:
            self.live.bind(b.pod, b.node)
        except ApiError as e:
            err = e
        self.done(b, err)

    def create_pod(self, manifest: dict[str, Any], *, cause: Cause) -> Pod:
        return self.live.create_pod(manifest, cause=cause)

    def delete_pod(self, pod: Pod, *, grace_period_seconds: int | None = None, cause: Cause) -> None:
        self.live.delete_pod(pod, grace_period_seconds=grace_period_seconds, cause=cause)

    def evict(self, pod: Pod, *, grace_period_seconds: int | None = None, dry_run: bool = False,
              cause: Cause = Cause.DESCHEDULER) -> None:
        self.live.evict(pod, grace_period_seconds=grace_period_seconds, dry_run=dry_run, cause=cause)

    def patch_node(self, node: Node, *, taints: list[dict[str, Any]] | None = None,
                   conditions: dict[str, str] | None = None, unschedulable: bool | None = None, cause: Cause) -> Node:
        return self.live.patch_node(node, taints=taints, conditions=conditions, unschedulable=unschedulable,
                                    cause=cause)

    def update_pod_status(self, pod: Pod, *, cause: Cause, **status: Any) -> Pod:
        return self.live.update_pod_status(pod, cause=cause, **status)

    def patch_pod_annotations(self, pod: Pod, annotations: Mapping[str, str | None], *, cause: Cause) -> Pod:
        return self.live.patch_pod_annotations(pod, annotations, cause=cause)

    def update_pdb_status(self, pdb: PodDisruptionBudget, **kw: Any) -> None:
        self.live.update_pdb_status(pdb, **kw)

    def create_event(self, event: KubeEvent) -> None:
        self.record(event)


class SchedulerProcess:
    def __init__(self, proc: LiveProcess, opts: SchedulerOptions) -> None:
        self.proc = proc
        self.opts = opts
        self.log = proc.log
        self.metrics = SchedulerMetrics(proc)
        # Configuration and plugins are read before anything is asked of the API server (bad input: exit 2).
        self.config = load_scheduler_config(opts.config)
        self.registry = Registry()
        for spec in opts.plugins:
            self.registry.register_spec(spec)
        self.state = ClusterState()
        self.cache = InformerCache(self.state, self.log)
        self.informers = Informers(proc.kube, self.cache, self.log, page_size=proc.opts.page_size)
        self.pool = ThreadPoolExecutor(WRITER_THREADS, thread_name_prefix="binder")
        self.binder = AsyncBinder(proc.client, self.pool, self._binding_done, proc.events.record)
        self.sched: Scheduler | None = None
        self.usage: UsageRefresher | None = None
        # A --metrics file is read now too, so that a bad one is refused before the cluster is contacted.
        self.usage_source = usage_source(opts.metrics, proc.kube) if opts.metrics else None
        self.bound = 0
        self._pending_counts: tuple[float, dict[str, int]] = (0.0, {})

    # ------------------------------------------------------------ running

    def run(self) -> int:
        proc = self.proc
        for q in QUEUES:
            self.metrics.pending.labels(q).set_function(self._pending_counter(q))
        proc.serve(readyz=[("informer-sync", self._synced)])
        self.informers.start()
        proc.on_shutdown(self._shutdown)
        self.log.info("Waiting for the informers to sync", server=proc.kube.server)
        if not self.informers.wait_synced(stop=proc.stop):
            return proc.exit_code()
        self.log.info("Informers synced", nodes=len(self.state.nodes), pods=len(self.state.pods))
        if not proc.lead():
            return proc.exit_code()
        services = SchedulerServices(start=wall_clock_now())
        source = self.usage_source
        if source is not None:
            self.usage = UsageRefresher(source, self.opts.metrics_interval, self.log, self.cache.cond,
                                        on_failure=self.metrics.usage_failures.inc)
            self.usage.start()
            services.metrics = self.usage.feed
            if isinstance(source, WatcherHTTPSource):
                services.load_watcher = source
        with self.cache.cond:
            self.sched = Scheduler(self.state, self.config, self.registry, seed=self.opts.seed, clock=time.time,
                                   services=services, client=self.binder, only_own_pods=True)
            profiles = sorted(self.sched.frameworks)
        self.log.info("Scheduling", profiles=",".join(profiles), queued=len(self.sched.queue))
        self._loop()
        return proc.exit_code()

    def _synced(self) -> tuple[bool, str]:
        if self.informers.synced():
            return True, ""
        return False, "; ".join(self.informers.last_errors()) or "informers have not synced yet"

    def _loop(self) -> None:
        sched = self.sched
        assert sched is not None
        cond = self.cache.cond
        proc = self.proc
        while proc.running:
            with cond:
                qpi = sched.queue.pop()
                if qpi is None:
                    expiry = sched.queue.next_backoff_expiry()
                    wait = 0.5 if expiry is None else min(0.5, max(0.0, expiry - time.time()))
                    cond.wait(wait)
                    continue
                start = time.perf_counter()
                out = sched.schedule_one(qpi)
                self._after_attempt(qpi, out, start)

    def _after_attempt(self, qpi: QueuedPodInfo, out: Outcome, start: float) -> None:
        """Bookkeeping of one scheduling cycle (the caller holds the lock)."""
        pod = out.pod
        profile = pod.scheduler_name
        if out.node is not None:
            b = self.binder.pending.get(pod.key)
            if b is not None and b.qpi is None:
                # The binding cycle is under way: its outcome is the attempt's.
                b.qpi = qpi
                b.start = start
            return
        error = out.status is not None and out.status.code is Code.ERROR
        result = "error" if error else "unschedulable"
        self.metrics.observe(result, profile, time.perf_counter() - start)
        if out.preempted:
            self.metrics.victims.observe(len(out.preempted))
        self.log.info("Unable to schedule pod; no fit; waiting" if not error else "Error scheduling pod; retrying",
                      v=2, pod=pod.key, err=out.reason, nominatedNode=out.nominated_node or "")
        self._report_failure(pod, out.reason, error)

    def _report_failure(self, pod: Pod, message: str, error: bool) -> None:
        """FailedScheduling Event and the PodScheduled=False condition (written when it changed)."""
        self.proc.events.record(KubeEvent(f"Pod {pod.key}", "FailedScheduling", message, type="Warning",
                                          component=pod.scheduler_name, fields={"uid": pod.uid, "action": "Scheduling"}))
        reason = "SchedulerError" if error else "Unschedulable"
        cur = next((c for c in pod.status.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "PodScheduled"),
                   None)
        if cur is not None and cur.get("status") == "False" and cur.get("reason") == reason and cur.get("message") == message:
            return
        cond = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message,
                "lastProbeTime": None, "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        self.pool.submit(self._patch_condition, pod, cond)

    def _patch_condition(self, pod: Pod, cond: dict[str, Any]) -> None:
        try:
            self.proc.client.update_pod_status(pod, cause=Cause.SCHEDULER, conditions=[cond])
        except ApiError as e:
            self.log.error("Error updating pod", err=e.message, pod=pod.key)

    # ------------------------------------------------------------ the binding cycle's end

    def _binding_done(self, b: _Binding, err: ApiError | None) -> None:
        """The answer to a Binding (a writer thread): see the module docstring."""
        refresh = False
        with self.cache.cond:
            self.binder.pending.pop(b.pod.key, None)
            seconds = time.perf_counter() - b.start
            if err is None:
                self.bound += 1
                self.metrics.observe("scheduled", b.profile, seconds)
                self.log.info("Successfully bound pod to node", v=2, pod=b.pod.key, node=b.node)
                self.proc.events.record(KubeEvent(
                    f"Pod {b.pod.key}", "Scheduled", f"Successfully assigned {b.pod.key} to {b.node}",
                    component=b.profile, fields={"uid": b.pod.uid, "action": "Binding"}))
                self.cache.cond.notify_all()
                return
            self.metrics.observe("error", b.profile, seconds)
            self.log.error("Error binding pod; forgetting the assumption", err=err.message, pod=b.pod.key, node=b.node,
                           code=err.code)
            self._forget(b)
            refresh = isinstance(err, Conflict)
            if not refresh:
                self._requeue(b)
        self._report_failure(b.pod, f"Binding rejected: {err.message}", True)
        if refresh:
            self._reread(b)

    def _forget(self, b: _Binding) -> None:
        sched = self.sched
        assert sched is not None
        state = self.state
        cur = state.pods.get(b.pod.key)
        if cur is None or cur.uid != b.pod.uid or b.pod.key not in state.assumed:
            return
        fwk = sched.framework_for(cur)
        if fwk is not None:
            fwk.run_unreserve(CycleState(), cur, b.node)
        state.unbind(cur)

    def _requeue(self, b: _Binding) -> None:
        """AddUnschedulableIfNotPresent with backoff, unless the cache shows the pod bound or gone."""
        sched = self.sched
        assert sched is not None
        cur = self.state.pods.get(b.pod.key)
        if cur is None or cur.uid != b.pod.uid or cur.node_name or cur.is_terminating or cur.is_terminal:
            return
        qpi = b.qpi if b.qpi is not None else QueuedPodInfo(pod=cur, timestamp=time.time(), initial_attempt_timestamp=None)
        qpi.pod = cur
        qpi.unschedulable_plugins = set()
        sched.queue.add_unschedulable(qpi, sched.queue.scheduling_cycle, error=True)
        self.cache.cond.notify_all()

    def _reread(self, b: _Binding) -> None:
        """After a 409: the pod as the API server has it now, applied to the cache, then requeue if still pending."""
        try:
            raw = self.proc.kube.get(f"/api/v1/namespaces/{b.pod.namespace}/pods/{b.pod.name}")
        except RemoteError as e:
            status = getattr(e, "status", None)
            if status == 404:
                with self.cache.cond:
                    cur = self.state.pods.get(b.pod.key)
                    if cur is not None:
                        self.cache.apply_watch("Pod", "DELETED", cur.raw)
                return
            with self.cache.cond:
                self._requeue(b)
            return
        raw.setdefault("kind", "Pod")
        raw.setdefault("apiVersion", "v1")
        with self.cache.cond:
            self.cache.apply_watch("Pod", "MODIFIED", raw)
            node = (raw.get("spec") or {}).get("nodeName")
            if node:
                self.log.info("Pod has been assigned to node. Abort adding it back to queue.", pod=b.pod.key, node=node)
            else:
                self._requeue(b)

    # ------------------------------------------------------------ metrics and shutdown

    def _pending_counter(self, q: str) -> Callable[[], float]:
        return lambda: self._pending_count(q)

    def _pending_count(self, q: str) -> float:
        at, counts = self._pending_counts
        now = time.monotonic()
        if now - at > 0.5:
            counts = {}
            sched = self.sched
            if sched is not None:
                with self.cache.cond:
                    for where in sched.queue.where.values():
                        counts[where] = counts.get(where, 0) + 1
            self._pending_counts = (now, counts)
        return float(counts.get(q, 0))

    def _shutdown(self) -> None:
        if self.usage is not None:
            self.usage.stop.set()
        self.informers.shutdown()
        # Bindings already sent are answered (a binding is never left half-known by a clean stop).
        self.pool.shutdown(wait=True, cancel_futures=False)
        self.log.info("Stopped scheduling", bound=self.bound)


def run_scheduler(popts: ProcessOptions, opts: SchedulerOptions) -> int:
    proc = LiveProcess(popts, "kubesched-scheduler", LEASE_NAME)
    try:
        sp = SchedulerProcess(proc, opts)
        proc.install_signal_handlers()
        return sp.run()
    finally:
        proc.shutdown()


