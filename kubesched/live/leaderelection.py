"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection package does it.

Follows kubernetes/client-go tools/leaderelection/leaderelection.go and resourcelock/leaselock.go:

- the record lives in the Lease's spec: `holderIdentity`, `leaseDurationSeconds`, `acquireTime`,
  `renewTime` (MicroTime), `leaseTransitions`;
- `try_acquire_or_renew`: GET the Lease (create it when missing); when the record differs from the one last
  observed, note it with the *local* time of observation; a lease held by another identity is taken only when
  that observation is older than the lease duration (clocks of different machines are never compared); an
  update carries the Lease's resourceVersion, so of two candidates racing for it the API server lets one win
  (409 Conflict for the other); taking over from another holder increments `leaseTransitions`;
- acquiring retries every `retry_period` (jittered by a factor of 1.2); once leading, renewal is tried every
  `retry_period` and leadership is lost when no renewal succeeded within `renew_deadline`;
- on a clean stop with `release_on_cancel` the lease is released (holder cleared, duration 1 s) so another
  candidate takes over at once; kube-scheduler releases on cancel.

Losing the lease is final: the caller stops working (kube-scheduler and the descheduler exit).
Defaults are kube-scheduler's (15 s / 10 s / 2 s); the flags are validated as upstream validates them
(lease duration > renew deadline > retry period × 1.2).
"""

from __future__ import annotations

import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

from kubesched.errors import InputError, RemoteError
from kubesched.live.apiclient import micro_time
from kubesched.live.client import ApiStatusError, KubeClient
from kubesched.live.logs import Log

JITTER_FACTOR = 1.2
DEFAULT_LEASE_DURATION = 15.0
DEFAULT_RENEW_DEADLINE = 10.0
DEFAULT_RETRY_PERIOD = 2.0
# NewLeaderHealthzAdaptor(20 s): /healthz fails when the leader has not renewed for lease duration + this.
HEALTHZ_TIMEOUT = 20.0


def default_identity() -> str:
    """hostname_uuid, as kube-scheduler names itself."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = DEFAULT_LEASE_DURATION
    renew_deadline: float = DEFAULT_RENEW_DEADLINE
    retry_period: float = DEFAULT_RETRY_PERIOD
    release_on_cancel: bool = True

    def validate(self) -> None:
        """NewLeaderElector's checks, with the flags named."""
        if self.lease_duration <= self.renew_deadline:
            raise InputError("leaseDuration must be greater than renewDeadline", field="--leader-elect-lease-duration")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise InputError("renewDeadline must be greater than retryPeriod*JitterFactor",
                             field="--leader-elect-renew-deadline")
        if self.lease_duration < 1 or self.renew_deadline < 1 or self.retry_period < 1e-3:
            raise InputError("leaseDuration and renewDeadline must be at least 1s, retryPeriod positive",
                             field="--leader-elect-lease-duration")
        if not self.identity:
            raise InputError("the leader election identity must not be empty", field="--leader-elect")


def _parse_micro(v: Any) -> float | None:
    if not isinstance(v, str) or not v:
        return None
    try:
        return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass
class LeaderElector:
    """Acquire, hold and release one Lease. `run` blocks until leadership is lost or `stop` is set."""

    kube: KubeClient
    config: LeaderElectionConfig
    log: Log
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    on_change: Callable[[bool], None] | None = None  # leading or not (leader_election_master_status)
    leading: threading.Event = field(default_factory=threading.Event)
    lost: threading.Event = field(default_factory=threading.Event)
    observed_record: dict[str, Any] = field(default_factory=dict)
    observed_time: float = 0.0
    last_renew: float = 0.0
    _resource_version: str = ""

    @property
    def path(self) -> str:
        c = self.config
        return f"/apis/coordination.k8s.io/v1/namespaces/{quote(c.namespace, safe='')}/leases/{quote(c.name, safe='')}"

    @property
    def holder(self) -> str:
        return str(self.observed_record.get("holderIdentity") or "")

    # ------------------------------------------------------------ one attempt

    def try_acquire_or_renew(self) -> bool:
        c = self.config
        now_wall = self.wall()
        record: dict[str, Any] = {"holderIdentity": c.identity, "leaseDurationSeconds": int(round(c.lease_duration)),
                                  "acquireTime": micro_time(now_wall), "renewTime": micro_time(now_wall),
                                  "leaseTransitions": 0}
        try:
            lease = self.kube.request("GET", self.path, retry=False)
        except ApiStatusError as e:
            if e.status != 404:
                raise
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": c.name, "namespace": c.namespace}, "spec": record}
            created = self.kube.write("POST", self.path.rsplit("/", 1)[0], body)
            self._observe(created)
            return True
        old = dict(lease.get("spec") or {})
        if old != self.observed_record:
            self.observed_record = old
            self.observed_time = self.clock()
        self._resource_version = str((lease.get("metadata") or {}).get("resourceVersion") or "")
        holder = str(old.get("holderIdentity") or "")
        duration = float(old.get("leaseDurationSeconds") or c.lease_duration)
        if holder and holder != c.identity and self.observed_time + duration > self.clock():
            return False
        if holder == c.identity:
            record["acquireTime"] = old.get("acquireTime") or record["acquireTime"]
            record["leaseTransitions"] = int(old.get("leaseTransitions") or 0)
        else:
            record["leaseTransitions"] = int(old.get("leaseTransitions") or 0) + 1
        body = {**lease, "spec": record}
        updated = self.kube.write("PUT", self.path, body)
        self._observe(updated)
        return True

    def _observe(self, lease: dict[str, Any]) -> None:
        self.observed_record = dict(lease.get("spec") or {})
        self.observed_time = self.clock()
        self._resource_version = str((lease.get("metadata") or {}).get("resourceVersion") or "")

    def _attempt(self) -> bool:
        try:
            return self.try_acquire_or_renew()
        except RemoteError as e:
            self.log.error("Error retrieving or updating the lease", err=e, lease=f"{self.config.namespace}/{self.config.name}")
            return False

    # ------------------------------------------------------------ the loops

    def acquire(self, stop: threading.Event) -> bool:
        """Try every retry period until the lease is ours (True) or `stop` is set (False)."""
        c = self.config
        self.log.info("Attempting to acquire leader lease", lease=f"{c.namespace}/{c.name}", identity=c.identity)
        while not stop.is_set():
            if self._attempt():
                self.last_renew = self.clock()
                self.log.info("Successfully acquired lease", lease=f"{c.namespace}/{c.name}", identity=c.identity)
                self._set_leading(True)
                return True
            if self.holder:
                self.log.info("Lease is held by another candidate", v=4, holder=self.holder)
            stop.wait(c.retry_period * (1 + JITTER_FACTOR * random.random()))
        return False

    def renew_loop(self, stop: threading.Event) -> None:
        """Renew every retry period; leadership is lost when no renewal succeeds within the renew deadline."""
        c = self.config
        while not stop.is_set():
            deadline = self.clock() + c.renew_deadline
            renewed = False
            while not stop.is_set() and self.clock() < deadline:
                if self._attempt() and self.holder == c.identity:
                    renewed = True
                    break
                stop.wait(c.retry_period)
            if stop.is_set():
                return
            if not renewed:
                self.log.error("Failed to renew lease: leadership lost", lease=f"{c.namespace}/{c.name}",
                               identity=c.identity)
                self._set_leading(False)
                self.lost.set()
                return
            self.last_renew = self.clock()
            stop.wait(c.retry_period)

    def release(self) -> None:
        """Give the lease up (holder cleared, 1 s duration) if we hold it, so another candidate need not wait."""
        if not self.leading.is_set():
            return
        c = self.config
        now = micro_time(self.wall())
        try:
            lease = self.kube.request("GET", self.path, retry=False)
            if (lease.get("spec") or {}).get("holderIdentity") != c.identity:
                return
            spec = {"holderIdentity": None, "leaseDurationSeconds": 1, "acquireTime": now, "renewTime": now,
                    "leaseTransitions": int(self.observed_record.get("leaseTransitions") or 0)}
            self.kube.write("PUT", self.path, {**lease, "spec": spec})
            self.log.info("Released the lease", lease=f"{c.namespace}/{c.name}")
        except RemoteError as e:
            self.log.error("Failed to release the lease", err=e)
        self._set_leading(False)

    def _set_leading(self, leading: bool) -> None:
        if leading:
            self.leading.set()
        else:
            self.leading.clear()
        if self.on_change is not None:
            self.on_change(leading)

    def healthy(self) -> bool:
        """The healthz watchdog: a leader that has not renewed for lease duration + 20 s is unhealthy."""
        if not self.leading.is_set():
            return True
        return self.clock() - self.last_renew <= self.config.lease_duration + HEALTHZ_TIMEOUT

    def start_renewing(self, stop: threading.Event) -> threading.Thread:
        t = threading.Thread(target=self.renew_loop, args=(stop,), name="leader-election", daemon=True)
        t.start()
        return t
