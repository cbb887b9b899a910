"""Informers: the one `ClusterState` kept current from a real API server by list and watch.

Each watched kind has a `Reflector` that works as client-go's does (kubernetes/client-go
tools/cache/reflector.go):

- LIST (paged), then apply what was listed as a replacement of everything the informer knew of that kind —
  objects gone from the list are deleted, unchanged ones (same resourceVersion) are left alone —, then
  WATCH from the list's resourceVersion with bookmarks;
- every event is applied as it arrives; a BOOKMARK only moves the resourceVersion on;
- a watch that ends (the server's timeout) or breaks (`ConnectionLost`) resumes from the last
  resourceVersion seen; `410 Gone` ("too old resource version") relists; any other failure waits with
  exponential backoff (0.8 s doubling to 30 s, jittered, as client-go's reflector backoff) and lists again.

Objects are converted by kubesched's own parsers (`kubesched.api.objects`) and applied through
`ClusterState.apply` with `Cause.API`, under the cache's lock, so the scheduler, its queue and plugins see
exactly the events they see in one-shot runs and in the simulator. Pods the scheduler has assumed are kept
assumed until the API shows them bound: a watch event that shows a pod bound (`spec.nodeName` set) is a
BOUND event (to whichever node the server says), and one that changes an assumed pod without binding it
keeps the assumption (the scheduler's cache keeps assumed pods over informer updates the same way).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kubesched.api.objects import (
    GenericObject,
    parse_meta,
    parse_namespace,
    parse_node,
    parse_pdb,
    parse_pod,
    parse_priority_class,
    parse_pvc,
    parse_workload,
)
from kubesched.api.snapshot import WORKLOAD_KINDS
from kubesched.cluster.events import Cause, EventType
from kubesched.cluster.state import ClusterState
from kubesched.errors import InputError, RemoteError
from kubesched.live.client import ApiStatusError, ConnectionLost, KubeClient, ResourceExpired, ResourceType
from kubesched.live.logs import Log

_PARSERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "Node": parse_node, "Pod": parse_pod, "Namespace": parse_namespace, "PriorityClass": parse_priority_class,
    "PodDisruptionBudget": parse_pdb, "PersistentVolumeClaim": parse_pvc,
}

# What the scheduler and the descheduler read (the kinds `kubesched capture` reads, less metrics).
CORE_KINDS = (
    ResourceType("", "v1", "nodes", "Node", False),
    ResourceType("", "v1", "namespaces", "Namespace", False),
    ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
    ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True),
    ResourceType("", "v1", "persistentvolumes", "PersistentVolume", False),
    ResourceType("storage.k8s.io", "v1", "storageclasses", "StorageClass", False),
    ResourceType("storage.k8s.io", "v1", "csinodes", "CSINode", False),
    ResourceType("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False),
    ResourceType("storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", True),
    ResourceType("", "v1", "services", "Service", True),
    ResourceType("", "v1", "replicationcontrollers", "ReplicationController", True),
    ResourceType("apps", "v1", "replicasets", "ReplicaSet", True),
    ResourceType("apps", "v1", "statefulsets", "StatefulSet", True),
    ResourceType("", "v1", "pods", "Pod", True),
)
# Without these nothing can be scheduled or descheduled: failing to read them is never "not served".
REQUIRED_KINDS = ("Node", "Pod")

INITIAL_BACKOFF = 0.8
MAX_BACKOFF = 30.0


def convert(raw: dict[str, Any]) -> Any:
    """A typed object from an object the API sent (`kind` and `apiVersion` filled in by the caller)."""
    kind = str(raw.get("kind"))
    parser = _PARSERS.get(kind)
    if parser is not None:
        return parser(raw)
    if kind in WORKLOAD_KINDS:
        return parse_workload(raw, kind)
    meta = parse_meta(raw, kind, namespaced=True) if isinstance(raw.get("metadata"), dict) else None
    return GenericObject(kind, str(raw.get("apiVersion", "")), meta, raw)


def _key(raw: dict[str, Any]) -> str:
    meta = raw.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def _rv(raw: dict[str, Any]) -> str:
    return str((raw.get("metadata") or {}).get("resourceVersion") or "")


@dataclass
class InformerStats:
    lists: int = 0
    relists_410: int = 0
    watch_restarts: int = 0
    errors: int = 0
    events: int = 0
    skipped_objects: int = 0


class InformerCache:
    """The ClusterState, its lock, and what each informer has applied (kind → key → resourceVersion).

    Everyone who reads or changes the state holds `cond` (a Condition over a re-entrant lock); every
    applied change notifies it, so a loop waiting for work wakes up.
    """

    def __init__(self, state: ClusterState, log: Log) -> None:
        self.state = state
        self.log = log
        self.cond = threading.Condition(threading.RLock())
        self.known: dict[str, dict[str, str]] = {}
        self.stats: dict[str, InformerStats] = {}
        self.on_event: Callable[[str, str], None] | None = None  # (kind, watch event type), for metrics

    # ------------------------------------------------------------ applying (callers hold no lock)

    def replace(self, kind: str, items: Iterable[dict[str, Any]]) -> None:
        """A LIST's result replaces what the informer knew of `kind` (client-go's Replace)."""
        with self.cond:
            known = self.known.setdefault(kind, {})
            seen: set[str] = set()
            for raw in items:
                key = _key(raw)
                seen.add(key)
                if known.get(key) == _rv(raw) and known.get(key):
                    continue
                self._apply(kind, "MODIFIED" if key in known else "ADDED", raw)
            for key in [k for k in known if k not in seen]:
                self._delete(kind, key)
            self.cond.notify_all()

    def apply_watch(self, kind: str, type_: str, raw: dict[str, Any]) -> None:
        with self.cond:
            if type_ == "DELETED":
                self._delete(kind, _key(raw))
            else:
                self._apply(kind, type_, raw)
            self.cond.notify_all()

    # ------------------------------------------------------------ the state's events

    def _apply(self, kind: str, type_: str, raw: dict[str, Any]) -> None:
        try:
            obj = convert(raw)
        except InputError as e:
            self.stats.setdefault(kind, InformerStats()).skipped_objects += 1
            self.log.error("Skipping an object kubesched cannot read", err=e.render(), kind=kind, object=_key(raw))
            return
        known = self.known.setdefault(kind, {})
        known[_key(raw)] = _rv(raw)
        if kind == "Pod":
            self._apply_pod(obj)
            return
        state = self.state
        exists = self._current(kind, obj) is not None
        state.apply(EventType.UPDATED if exists else EventType.ADDED, obj, cause=Cause.API)

    def _current(self, kind: str, obj: Any) -> Any:
        state = self.state
        if kind == "Node":
            return state.nodes.get(obj.name)
        store, key = _store(state, obj)
        return store.get(key)

    def _apply_pod(self, pod: Any) -> None:
        state = self.state
        cur = state.pods.get(pod.key)
        if cur is not None and cur.uid != pod.uid:
            # Another pod under the same name: the old one is gone.
            state.apply(EventType.DELETED, cur, cause=Cause.API)
            cur = None
        if cur is None:
            state.apply(EventType.ADDED, pod, cause=Cause.API)
            return
        assumed = pod.key in state.assumed
        if pod.node_name and (not cur.node_name or assumed):
            # The binding (ours or anyone's) as the API shows it, then the object as it now is.
            state.apply(EventType.BOUND, cur, cause=Cause.API, node=pod.node_name)
        elif not pod.node_name and assumed:
            pod = pod.bound_to(cur.node_name)
        state.apply(EventType.UPDATED, pod, cause=Cause.API)

    def _delete(self, kind: str, key: str) -> None:
        self.known.get(kind, {}).pop(key, None)
        state = self.state
        if kind == "Pod":
            obj: Any = state.pods.get(key)
        elif kind == "Node":
            obj = state.nodes.get(key)
        elif kind == "Namespace":
            obj = state.namespaces.get(key)
        elif kind == "PriorityClass":
            obj = state.priority_classes.get(key)
        elif kind == "PodDisruptionBudget":
            obj = state.pdbs.get(key)
        elif kind == "PersistentVolumeClaim":
            obj = state.pvcs.get(key)
        elif kind in WORKLOAD_KINDS:
            obj = state.workloads.get(f"{kind}/{key}")
        else:
            obj = state.others.get(f"{kind}/{key}")
        if obj is not None:
            state.apply(EventType.DELETED, obj, cause=Cause.API)


def _store(state: ClusterState, obj: Any) -> tuple[dict[str, Any], str]:
    kind = obj.kind
    if kind == "Namespace":
        return state.namespaces, obj.meta.name
    if kind == "PriorityClass":
        return state.priority_classes, obj.meta.name
    if kind == "PodDisruptionBudget":
        return state.pdbs, obj.meta.key
    if kind == "PersistentVolumeClaim":
        return state.pvcs, obj.meta.key
    if kind in WORKLOAD_KINDS:
        return state.workloads, f"{kind}/{obj.meta.key}"
    return state.others, f"{kind}/{obj.meta.key if obj.meta else id(obj)}"


@dataclass
class Reflector:
    """List and watch one kind into the cache (see the module docstring)."""

    kube: KubeClient
    rt: ResourceType
    cache: InformerCache
    stop: threading.Event
    log: Log
    page_size: int = 500
    watch_timeout: int = 300
    # Set once the first LIST has been applied (HasSynced); `unavailable` when the server does not serve
    # the kind or the account may not read it (optional kinds only).
    synced: threading.Event = field(default_factory=threading.Event)
    unavailable: str = ""
    last_error: str = ""
    resource_version: str = ""
    thread: threading.Thread | None = None

    @property
    def stats(self) -> InformerStats:
        return self.cache.stats.setdefault(self.rt.kind, InformerStats())

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name=f"reflector:{self.rt.plural}", daemon=True)
        self.thread.start()

    def run(self) -> None:
        backoff = INITIAL_BACKOFF
        while not self.stop.is_set():
            try:
                self.list_and_watch()
                backoff = INITIAL_BACKOFF
            except ResourceExpired as e:
                self.stats.relists_410 += 1
                self.log.info("Watch expired, relisting", v=1, resource=self.rt.plural, reason=str(e))
                self.resource_version = ""
                continue
            except ApiStatusError as e:
                if e.status in (403, 404) and self.rt.kind not in REQUIRED_KINDS:
                    self.unavailable = f"{e.status} {e.reason}".strip()
                    self.log.warning("Not reading a kind the server does not serve or the account may not read",
                                     resource=self.rt.plural, reason=self.unavailable)
                    self.synced.set()
                    return
                self._failed(e)
            except RemoteError as e:
                self._failed(e)
            if self.stop.wait(backoff * (1 + 0.2 * random.random())):
                return
            backoff = min(backoff * 2, MAX_BACKOFF)

    def _failed(self, e: Exception) -> None:
        self.stats.errors += 1
        self.last_error = str(e)
        self.log.error("Failed to list or watch", err=e, resource=self.rt.plural)

    def list_and_watch(self) -> None:
        if not self.resource_version:
            items, rv = self.kube.list(self.rt, limit=self.page_size, retry=False)
            for raw in items:
                raw.setdefault("kind", self.rt.kind)
                raw.setdefault("apiVersion", self.rt.api_version)
            self.cache.replace(self.rt.kind, items)
            self.stats.lists += 1
            self.resource_version = rv
            self.log.info("Listed", v=2, resource=self.rt.plural, objects=len(items), resourceVersion=rv)
            self.synced.set()
        while not self.stop.is_set():
            timeout = int(self.watch_timeout * (1 + random.random()))
            try:
                for ev in self.kube.watch(self.rt, self.resource_version, timeout_seconds=timeout):
                    if self.stop.is_set():
                        return
                    raw = ev.object
                    rv = ev.resource_version
                    if ev.type != "BOOKMARK":
                        raw.setdefault("kind", self.rt.kind)
                        raw.setdefault("apiVersion", self.rt.api_version)
                        self.cache.apply_watch(self.rt.kind, ev.type, raw)
                        self.stats.events += 1
                        if self.cache.on_event is not None:
                            self.cache.on_event(self.rt.kind, ev.type)
                        self.log.info("Watch event", v=5, resource=self.rt.plural, type=ev.type, object=_key(raw),
                                      resourceVersion=rv)
                    if rv:
                        self.resource_version = rv
            except ConnectionLost as e:
                self.stats.watch_restarts += 1
                self.log.info("Watch broke, resuming", v=1, resource=self.rt.plural, err=str(e),
                              resourceVersion=self.resource_version)
                if self.stop.wait(INITIAL_BACKOFF * random.random()):
                    return
                continue
            # The server ended the stream (its timeout): watch again from where it stopped.
            self.stats.watch_restarts += 1


class Informers:
    """A reflector per kind over one cache; `wait_synced` is client-go's WaitForCacheSync."""

    def __init__(self, kube: KubeClient, cache: InformerCache, log: Log, *, kinds: Iterable[ResourceType] = CORE_KINDS,
                 page_size: int = 500, watch_timeout: int = 300) -> None:
        self.stop = threading.Event()
        self.reflectors = [Reflector(kube, rt, cache, self.stop, log, page_size, watch_timeout) for rt in kinds]

    def start(self) -> None:
        for r in self.reflectors:
            r.start()

    def synced(self) -> bool:
        return all(r.synced.is_set() for r in self.reflectors)

    def wait_synced(self, timeout: float | None = None, stop: threading.Event | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.synced():
            if stop is not None and stop.is_set():
                return False
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def last_errors(self) -> list[str]:
        return [f"{r.rt.plural}: {r.last_error}" for r in self.reflectors if r.last_error and not r.synced.is_set()]

    def shutdown(self) -> None:
        self.stop.set()
