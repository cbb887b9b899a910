"""The double's storage: objects by resource, one resourceVersion counter, a bounded watch history.

What etcd and the watch cache give a real API server, reduced to what clients can observe:
- every write takes the next resourceVersion (one counter for all kinds, as etcd's revision);
- a LIST is ordered by storage key (`namespace/name`, or `name` for cluster-scoped kinds) and, when paged,
  consistent: later pages come from the snapshot the first page was cut from, until the continue token
  expires (then `410 Gone`, as after an etcd compaction);
- a WATCH from resourceVersion R sees every change after R while R is within the retained history; older
  than that is `410 Gone` ("too old resource version").

Stored objects are never mutated in place (a write stores a new dict), so snapshots are lists of references.
"""

from __future__ import annotations

import bisect
import copy
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.kube_apiserver_double.resources import RESOURCES, Resource, by_kind


class ApiError(Exception):
    """An error answer: rendered as a metav1.Status with this code and reason."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None,
                 retry_after: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.retry_after = retry_after

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                               "message": self.message, "reason": self.reason, "code": self.code}
        if self.details is not None:
            out["details"] = self.details
        return out


def qualified(r: Resource) -> str:
    """How apimachinery names a resource in messages: `pods`, `deployments.apps`."""
    return f"{r.plural}.{r.group}" if r.group else r.plural


def not_found(r: Resource, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{qualified(r)} "{name}" not found',
                    {"name": name, "group": r.group, "kind": r.plural})


def already_exists(r: Resource, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{qualified(r)} "{name}" already exists',
                    {"name": name, "group": r.group, "kind": r.plural})


def conflict(r: Resource, name: str, why: str = "the object has been modified; please apply your changes to the "
                                                 "latest version and try again") -> ApiError:
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {qualified(r)} "{name}": {why}',
                    {"name": name, "group": r.group, "kind": r.plural})


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class Event:
    rv: int
    resource: Resource
    type: str  # ADDED / MODIFIED / DELETED
    obj: dict[str, Any]
    old: dict[str, Any] | None = None


@dataclass(slots=True)
class ListSnapshot:
    rv: int
    items: list[dict[str, Any]]
    created: float


@dataclass
class Store:
    history_limit: int = 20000
    continue_ttl: float = 300.0
    max_snapshots: int = 64
    clock: Callable[[], float] = time.monotonic
    cond: threading.Condition = field(default_factory=threading.Condition)
    rv: int = 1
    objects: dict[Resource, dict[str, dict[str, Any]]] = field(default_factory=lambda: {r: {} for r in RESOURCES})
    history: list[Event] = field(default_factory=list)
    history_rvs: list[int] = field(default_factory=list)
    # Events with rv <= compacted are gone: a watch from an older resourceVersion is 410 Gone.
    compacted: int = 1
    snapshots: OrderedDict[str, ListSnapshot] = field(default_factory=OrderedDict)

    # ------------------------------------------------------------ keys

    @staticmethod
    def key(r: Resource, namespace: str | None, name: str) -> str:
        return f"{namespace}/{name}" if r.namespaced else name

    @staticmethod
    def key_of(r: Resource, obj: dict[str, Any]) -> str:
        meta = obj.get("metadata") or {}
        return f"{meta.get('namespace')}/{meta.get('name')}" if r.namespaced else str(meta.get("name"))

    # ------------------------------------------------------------ writes (callers hold no lock)

    def _record(self, r: Resource, type_: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> None:
        ev = Event(self.rv, r, type_, obj, old)
        self.history.append(ev)
        self.history_rvs.append(self.rv)
        if len(self.history) > 2 * self.history_limit:
            drop = len(self.history) - self.history_limit
            self.compacted = self.history_rvs[drop - 1]
            del self.history[:drop]
            del self.history_rvs[:drop]
        self.cond.notify_all()

    def _stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        meta = dict(obj.get("metadata") or {})
        meta["resourceVersion"] = str(self.rv)
        out = dict(obj)
        out["metadata"] = meta
        return out

    def create(self, r: Resource, obj: dict[str, Any], *, prepare: Callable[[dict[str, Any]], None] | None = None,
               keep_metadata: bool = False) -> dict[str, Any]:
        """Store a new object: uid, creationTimestamp, generation and the next resourceVersion."""
        obj = copy.deepcopy(obj)
        obj["apiVersion"] = r.api_version
        obj["kind"] = r.kind
        meta = obj.setdefault("metadata", {})
        if not keep_metadata or not meta.get("uid"):
            meta["uid"] = str(uuid.uuid4())
        if not keep_metadata or not meta.get("creationTimestamp"):
            meta["creationTimestamp"] = now_rfc3339()
        if "spec" in obj and r.kind not in ("Pod", "Node", "Namespace", "PersistentVolume", "PersistentVolumeClaim",
                                            "Service", "Lease", "Event"):
            meta.setdefault("generation", 1)
        meta.pop("resourceVersion", None)
        with self.cond:
            bucket = self.objects[r]
            k = self.key_of(r, obj)
            if k in bucket:
                raise already_exists(r, str(meta.get("name")))
            if prepare is not None:
                prepare(obj)
            stored = self._stamp(obj)
            bucket[k] = stored
            self._record(r, "ADDED", stored)
            return stored

    def replace(self, r: Resource, new: dict[str, Any], *, expect_rv: str | None = None,
                expect_uid: str | None = None) -> dict[str, Any]:
        """Store a new version of an existing object; a stale resourceVersion is a 409 Conflict."""
        with self.cond:
            k = self.key_of(r, new)
            cur = self.objects[r].get(k)
            name = str((new.get("metadata") or {}).get("name"))
            if cur is None:
                raise not_found(r, name)
            if expect_rv and expect_rv != cur["metadata"].get("resourceVersion"):
                raise conflict(r, name)
            if expect_uid and expect_uid != cur["metadata"].get("uid"):
                raise conflict(r, name, f"Precondition failed: UID in precondition: {expect_uid}, UID in object "
                                        f"meta: {cur['metadata'].get('uid')}")
            stored = self._stamp(new)
            self.objects[r][k] = stored
            self._record(r, "MODIFIED", stored, cur)
            return stored

    def update(self, r: Resource, namespace: str | None, name: str,
               change: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
        """Read-modify-write under the lock: `change` gets a deep copy of the current object."""
        with self.cond:
            cur = self.objects[r].get(self.key(r, namespace, name))
            if cur is None:
                raise not_found(r, name)
            new = change(copy.deepcopy(cur))
            return self.replace(r, new)

    def delete(self, r: Resource, namespace: str | None, name: str, *, expect_rv: str | None = None,
               expect_uid: str | None = None) -> dict[str, Any]:
        with self.cond:
            k = self.key(r, namespace, name)
            cur = self.objects[r].get(k)
            if cur is None:
                raise not_found(r, name)
            if expect_rv and expect_rv != cur["metadata"].get("resourceVersion"):
                raise conflict(r, name, f"Precondition failed: ResourceVersion in precondition: {expect_rv}, "
                                        f"ResourceVersion in object meta: {cur['metadata'].get('resourceVersion')}")
            if expect_uid and expect_uid != cur["metadata"].get("uid"):
                raise conflict(r, name, f"Precondition failed: UID in precondition: {expect_uid}, UID in object "
                                        f"meta: {cur['metadata'].get('uid')}")
            del self.objects[r][k]
            gone = self._stamp(cur)
            self._record(r, "DELETED", gone, cur)
            return gone

    def load(self, objects: Iterable[dict[str, Any]]) -> int:
        """Bulk-create objects as given (uids and timestamps kept when present); returns how many."""
        n = 0
        for obj in objects:
            r = by_kind(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
            if r is None:
                raise ValueError(f"the double serves no {obj.get('apiVersion')} {obj.get('kind')}")
            self.create(r, obj, keep_metadata=True)
            n += 1
        return n

    # ------------------------------------------------------------ reads

    def get(self, r: Resource, namespace: str | None, name: str) -> dict[str, Any]:
        with self.cond:
            cur = self.objects[r].get(self.key(r, namespace, name))
        if cur is None:
            raise not_found(r, name)
        return cur

    def current(self, r: Resource, namespace: str | None) -> tuple[int, list[dict[str, Any]]]:
        """Every object of a resource (in a namespace), in storage-key order, and the resourceVersion."""
        with self.cond:
            bucket = self.objects[r]
            if namespace and r.namespaced:
                prefix = namespace + "/"
                keys = sorted(k for k in bucket if k.startswith(prefix))
            else:
                keys = sorted(bucket)
            return self.rv, [bucket[k] for k in keys]

    def save_snapshot(self, rv: int, items: list[dict[str, Any]]) -> str:
        sid = uuid.uuid4().hex
        with self.cond:
            self.snapshots[sid] = ListSnapshot(rv, items, self.clock())
            while len(self.snapshots) > self.max_snapshots:
                self.snapshots.popitem(last=False)
        return sid

    def snapshot(self, sid: str) -> ListSnapshot | None:
        with self.cond:
            snap = self.snapshots.get(sid)
            if snap is not None and self.clock() - snap.created > self.continue_ttl:
                del self.snapshots[sid]
                return None
            return snap

    def expire_snapshots(self) -> None:
        """Forget every paged LIST in progress (as an etcd compaction would): their continue tokens are 410."""
        with self.cond:
            self.snapshots.clear()

    def compact(self) -> None:
        """Drop the watch history: watching from any resourceVersion before now is 410 Gone."""
        with self.cond:
            self.compacted = self.rv
            self.history.clear()
            self.history_rvs.clear()

    def events_after(self, rv: int) -> list[Event]:
        """Events newer than rv (caller holds `cond`)."""
        i = bisect.bisect_right(self.history_rvs, rv)
        return self.history[i:]
