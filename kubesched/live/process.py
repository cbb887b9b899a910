"""What both live processes share: options, the API client, signals, leader election, health and metrics,
and the Event recorder.

A process is run as kube-scheduler and the descheduler run (kubernetes cmd/kube-scheduler/app/server.go,
kubernetes-sigs/descheduler pkg/descheduler/descheduler.go): informers start and sync first; with
`--leader-elect` the work starts only once the Lease is ours, and losing it ends the process with exit
code 1 ("leaderelection lost"); SIGTERM or SIGINT stops it cleanly (the Lease is released, exit code 0).

Events are recorded as client-go's recorder does: asynchronously (a full queue of 1,000 drops the newest,
as the broadcaster does), and an identical event (same object, reason, message, type) within 10 minutes
increments the `count` of the one already written instead of writing another (the EventCorrelator).
"""

from __future__ import annotations

import queue
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from prometheus_client import CollectorRegistry, Counter, Gauge

from kubesched.client.interface import KubeEvent
from kubesched.errors import InputError, RemoteError
from kubesched.live.apiclient import LiveClient, rfc3339
from kubesched.live.client import KubeClient, RetryPolicy
from kubesched.live.leaderelection import LeaderElectionConfig, LeaderElector, default_identity
from kubesched.live.logs import Log, setup
from kubesched.live.server import Check, HealthServer

EVENT_QUEUE = 1000
EVENT_AGGREGATION_SECONDS = 600.0
WRITER_THREADS = 16


@dataclass(frozen=True, slots=True)
class ProcessOptions:
    """The flags both commands share (names as kube-scheduler's and the descheduler's)."""

    kubeconfig: str | None = None
    context: str | None = None
    leader_elect: bool = False
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    lease_name: str = ""
    lease_namespace: str = "kube-system"
    identity: str = ""
    bind_address: str = "0.0.0.0"
    port: int = 0
    verbosity: int = 0
    logging_format: str = "text"
    request_timeout: float = 30.0
    page_size: int = 500


class EventRecorder:
    """Asynchronous, aggregating Event writes (see the module docstring)."""

    def __init__(self, client: LiveClient, log: Log, failures: Counter) -> None:
        self.client = client
        self.log = log
        self.failures = failures
        self.queue: queue.Queue[KubeEvent | None] = queue.Queue(EVENT_QUEUE)
        self.seen: dict[tuple[str, str, str, str], tuple[str, str, int, float]] = {}
        self.dropped = 0
        self.thread = threading.Thread(target=self._run, name="event-recorder", daemon=True)
        self.thread.start()

    def record(self, event: KubeEvent) -> None:
        try:
            self.queue.put_nowait(event)
        except queue.Full:
            self.dropped += 1

    def _run(self) -> None:
        while True:
            ev = self.queue.get()
            if ev is None:
                return
            try:
                self._write(ev)
            except RemoteError as e:
                self.failures.inc()
                self.log.error("Unable to write event (may retry after sleeping)", err=e, reason=ev.reason,
                               object=ev.involved)
            except Exception as e:  # noqa: BLE001 - an event must never take the process down
                self.failures.inc()
                self.log.error("Unable to write event", err=e, reason=ev.reason, object=ev.involved)

    def _write(self, ev: KubeEvent) -> None:
        key = (ev.involved, ev.reason, ev.message, ev.type)
        now = time.time()
        prev = self.seen.get(key)
        kube = self.client.kube
        if prev is not None and now - prev[3] < EVENT_AGGREGATION_SECONDS:
            ns, name, count, first = prev
            try:
                kube.write("PATCH", f"/api/v1/namespaces/{quote(ns, safe='')}/events/{quote(name, safe='')}",
                           {"count": count + 1, "lastTimestamp": rfc3339(now)},
                           content_type="application/merge-patch+json")
                self.seen[key] = (ns, name, count + 1, first)
                return
            except RemoteError:
                pass  # gone (expired): write a new one
        body = self.client.event_body(ev)
        ns = body["metadata"]["namespace"]
        kube.write("POST", f"/api/v1/namespaces/{quote(ns, safe='')}/events", body)
        self.seen[key] = (ns, body["metadata"]["name"], 1, now)
        if len(self.seen) > 10_000:
            cutoff = now - EVENT_AGGREGATION_SECONDS
            self.seen = {k: v for k, v in self.seen.items() if v[3] >= cutoff}

    def flush(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.queue.empty() and time.monotonic() < deadline:
            time.sleep(0.02)

    def stop(self) -> None:
        try:
            self.queue.put(None, timeout=1.0)
        except queue.Full:
            pass


class LiveProcess:
    """The scaffolding of one live process (see the module docstring)."""

    def __init__(self, opts: ProcessOptions, component: str, default_lease: str) -> None:
        self.opts = opts
        self.component = component
        self.log = setup(opts.verbosity, opts.logging_format)
        self.stop = threading.Event()
        self.identity = opts.identity or default_identity()
        self.registry = CollectorRegistry()
        self.requests = Counter("rest_client_requests", "Number of HTTP requests, partitioned by status code, method, "
                                "and host.", ["code", "host", "method"], registry=self.registry)
        self.leader_status = Gauge("leader_election_master_status", "Gauge of if the reporting system is master of the "
                                   "relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used "
                                   "to identify the lease.", ["name"], registry=self.registry)
        self.event_failures = Counter("kubesched_event_write_failures", "Events that could not be written.",
                                      registry=self.registry)
        self.lease = LeaderElectionConfig(opts.lease_namespace, opts.lease_name or default_lease, self.identity,
                                          opts.lease_duration, opts.renew_deadline, opts.retry_period)
        if opts.leader_elect:
            self.lease.validate()
        retry = RetryPolicy(timeout=opts.request_timeout)
        self.kube = KubeClient.connect(opts.kubeconfig, opts.context, retry, pool_size=64,
                                       user_agent=f"kubesched-{component}/0.1.0 ({self.identity})")
        host = self.kube.server.split("://", 1)[-1]
        self.kube.on_response = lambda method, code: self.requests.labels(code, host, method).inc()
        self.client = LiveClient(self.kube, component=component, instance=self.identity)
        self.events = EventRecorder(self.client, self.log, self.event_failures)
        self.elector: LeaderElector | None = None
        self.server: HealthServer | None = None
        self._cleanups: list[Callable[[], None]] = []

    # ------------------------------------------------------------ signals

    def install_signal_handlers(self) -> None:
        def handler(signum: int, frame: Any) -> None:
            if not self.stop.is_set():
                self.log.info("Received signal, shutting down", signal=signal.Signals(signum).name)
            self.stop.set()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    # ------------------------------------------------------------ health and metrics

    def serve(self, readyz: list[tuple[str, Check]]) -> None:
        if self.opts.port == 0:
            return
        healthz: list[tuple[str, Check]] = [("ping", lambda: (True, ""))]
        healthz.append(("leaderElection", self._leader_healthy))
        try:
            self.server = HealthServer(self.opts.bind_address, self.opts.port, self.registry, healthz=healthz,
                                       readyz=readyz).start()
        except OSError as e:
            raise InputError(f"cannot listen on {self.opts.bind_address}:{self.opts.port}: {e.strerror or e}",
                             field="--port") from None
        self.log.info("Serving healthz, readyz and metrics", address=f"{self.opts.bind_address}:{self.server.port}")

    def _leader_healthy(self) -> tuple[bool, str]:
        if self.elector is None or self.elector.healthy():
            return True, ""
        return False, "the leader has not renewed its lease in time"

    # ------------------------------------------------------------ leader election

    def lead(self) -> bool:
        """Without --leader-elect: True at once. With it: block until the Lease is ours (True), or until
        asked to stop (False); renewal then runs in the background."""
        if not self.opts.leader_elect:
            return True
        lease = f"{self.lease.namespace}/{self.lease.name}"
        self.leader_status.labels(self.lease.name).set(0)
        self.elector = LeaderElector(self.kube, self.lease, self.log,
                                     on_change=lambda leading: self.leader_status.labels(self.lease.name).set(
                                         1 if leading else 0))
        if not self.elector.acquire(self.stop):
            return False
        self.elector.start_renewing(self.stop)
        self.log.info("Started leading", lease=lease, identity=self.identity)
        return True

    @property
    def lost_lease(self) -> bool:
        return self.elector is not None and self.elector.lost.is_set()

    @property
    def running(self) -> bool:
        return not self.stop.is_set() and not self.lost_lease

    def on_shutdown(self, fn: Callable[[], None]) -> None:
        self._cleanups.append(fn)

    def shutdown(self) -> None:
        for fn in reversed(self._cleanups):
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - shutting down goes on
                self.log.error("Error while shutting down", err=e)
        self.events.flush()
        self.events.stop()
        if self.elector is not None and not self.elector.lost.is_set():
            self.elector.release()
        if self.server is not None:
            self.server.stop()
        self.kube.close()

    def exit_code(self) -> int:
        """0 after a requested stop; 1 when the lease was lost (as kube-scheduler's "leaderelection lost")."""
        if self.lost_lease:
            self.log.error("Leaderelection lost")
            return 1
        return 0
