"""A contract-test double of the Kubernetes API server: plain HTTP on a loopback port.

It is not an API server: it has no admission chain beyond what is listed here, no authorization, no
validation of object schemas, no controllers but an optional disruption controller and an optional
"kubelet" that starts bound pods. What it serves is what a client observes of the real one for the verbs
kubesched uses, so that kubectl and the official Python client work against it unchanged:

- discovery: /version, /api, /api/v1, /apis, /apis/GROUP, /apis/GROUP/VERSION (legacy, non-aggregated
  documents; clients that ask for aggregated discovery fall back to these), /healthz, /readyz, /livez;
  /openapi/v2 and /openapi/v3 answer 404, which kubectl treats as "no schema": it then skips client-side
  validation (the double does no schema validation either);
- LIST with `limit`/`continue` (consistent snapshots, `remainingItemCount`, `410 Expired` for a continue
  token whose snapshot is gone), `labelSelector`, `fieldSelector`; items without `kind`/`apiVersion`, as the
  real server encodes typed lists;
- WATCH with `resourceVersion` (events after it; unset or "0" first replays the current objects as ADDED),
  `allowWatchBookmarks` (BOOKMARK events every `bookmark_interval` seconds), `sendInitialEvents`,
  `timeoutSeconds`, and an ERROR event with a 410 Status for a resourceVersion older than the retained
  history ("too old resource version"), as the watch cache answers;
- GET, create (POST; generateName, NamespaceLifecycle's 404 for a missing namespace, pod API defaulting and
  Priority admission from kubesched's own model), update (PUT, optimistic concurrency: a stale
  `metadata.resourceVersion` is 409 Conflict), PATCH (merge, strategic merge, JSON patch), DELETE (with
  preconditions; finalizers keep the object with a deletionTimestamp), deletecollection;
- subresources: `status` (PUT/PATCH touch only status; the main resource leaves status alone),
  `pods/binding` (409 when the pod is already bound or being deleted), `pods/eviction` (policy/v1 Eviction
  checked against PodDisruptionBudgets as the eviction REST handler does: 429 when the budget forbids it,
  500 for several budgets, terminal and pending pods deleted without a check);
- Events (core/v1 and events.k8s.io/v1) and coordination.k8s.io/v1 Leases, as plain resources.

Fault injection (`server.faults`): answer N matching requests with a status (429 with Retry-After, 500, ...),
drop the connection without an answer, delay answers, end watch streams mid-stream after N events; and
`stop()` / `start()` make the address unreachable and reachable again; `store.compact()` and
`store.expire_snapshots()` force 410s.

Upstream semantics followed: kubernetes/kubernetes pkg/registry/core/pod/storage/eviction.go (eviction),
pkg/registry/core/pod/storage/storage.go (binding), staging/src/k8s.io/apiserver/pkg/storage/cacher (watch
errors and bookmarks), staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go (paged lists).
"""

from __future__ import annotations

import base64
import copy
import json
import random
import re
import socket
import string
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from tests.kube_apiserver_double.patch import apply_patch
from tests.kube_apiserver_double.resources import GROUP_ORDER, RESOURCES, Resource, by_path
from tests.kube_apiserver_double.selectors import combine, field_matcher, label_matcher
from tests.kube_apiserver_double.store import ApiError, Store, conflict, not_found, now_rfc3339

BOOTSTRAP_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")
CONTINUE_EXPIRED = ("The provided continue parameter is too old to display a consistent list result. You can start a "
                    "new list without the continue parameter, or use the continue token in this response to retrieve "
                    "the remainder of the results. Continuing with the provided token results in an inconsistent list "
                    "- objects that were created, modified, or deleted between the time the first chunk was returned "
                    "and now may show up in the list.")
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"


# ---------------------------------------------------------------- faults


@dataclass
class Rule:
    action: str  # status | drop | delay | drop_watch
    times: int  # how many more matching requests (-1: every one)
    method: str | None = None
    path: re.Pattern[str] | None = None
    watch: bool | None = None
    code: int = 500
    retry_after: int | None = None
    seconds: float = 0.0
    events: int = 0
    hits: int = 0


@dataclass
class Faults:
    """Faults to inject, matched by method, path (a regular expression searched in the URL path) and
    whether the request is a watch."""

    rules: list[Rule] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _add(self, rule: Rule, path: str | None) -> Rule:
        rule.path = re.compile(path) if path else None
        with self.lock:
            self.rules.append(rule)
        return rule

    def fail(self, code: int, *, times: int = 1, method: str | None = None, path: str | None = None,
             watch: bool | None = None, retry_after: int | None = None) -> Rule:
        """Answer the next `times` matching requests with `code` (a Status; 429 carries Retry-After)."""
        return self._add(Rule("status", times, method, None, watch, code=code, retry_after=retry_after), path)

    def drop(self, *, times: int = 1, method: str | None = None, path: str | None = None,
             watch: bool | None = None) -> Rule:
        """Close the connection of the next `times` matching requests without answering."""
        return self._add(Rule("drop", times, method, None, watch), path)

    def delay(self, seconds: float, *, times: int = -1, method: str | None = None, path: str | None = None,
              watch: bool | None = None) -> Rule:
        """Answer matching requests `seconds` late (a slow server)."""
        return self._add(Rule("delay", times, method, None, watch, seconds=seconds), path)

    def drop_watch_after(self, events: int, *, times: int = 1, path: str | None = None) -> Rule:
        """End the next `times` matching watch streams abruptly after `events` events."""
        return self._add(Rule("drop_watch", times, "GET", None, True, events=events), path)

    def clear(self) -> None:
        with self.lock:
            self.rules.clear()

    def take(self, method: str, path: str, watch: bool) -> list[Rule]:
        out = []
        with self.lock:
            for r in self.rules:
                if r.times == 0 or (r.method and r.method != method) or (r.watch is not None and r.watch != watch):
                    continue
                if r.path is not None and not r.path.search(path):
                    continue
                if r.times > 0:
                    r.times -= 1
                r.hits += 1
                out.append(r)
        return out


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    agent: str = ""  # the User-Agent header (which client sent it)


# ---------------------------------------------------------------- the server


class KubeAPIServerDouble:
    """The double. Use as a context manager, or start() / stop(); `url`, `kubeconfig(path)`."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, token: str | None = None,
                 bookmark_interval: float = 1.0, history_limit: int = 20000, continue_ttl: float = 300.0,
                 default_watch_timeout: float = 1800.0, bootstrap: bool = True, disruption_controller: bool = True,
                 run_bound_pods: bool = False) -> None:
        self.host = host
        self.port = port
        self.token = token
        self.bookmark_interval = bookmark_interval
        self.default_watch_timeout = default_watch_timeout
        self.disruption_controller = disruption_controller
        self.run_bound_pods = run_bound_pods
        self.store = Store(history_limit=history_limit, continue_ttl=continue_ttl)
        self.faults = Faults()
        self.requests: list[Request] = []
        # Every answer sent, with its status code (watches: 200 when the stream starts).
        self.answers: list[tuple[Request, int]] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        if bootstrap:
            ns = next(r for r in RESOURCES if r.kind == "Namespace")
            for name in BOOTSTRAP_NAMESPACES:
                self.store.create(ns, {"metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
                                       "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})

    # ------------------------------------------------------------ lifecycle

    def start(self) -> KubeAPIServerDouble:
        self._stopping.clear()
        httpd = _Server((self.host, self.port), _Handler)
        httpd.daemon_threads = True
        httpd.double = self  # type: ignore[attr-defined]
        self.port = httpd.server_address[1]
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
                                        name=f"kube-apiserver-double:{self.port}")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening (the address becomes unreachable) and end open watches; the store is kept."""
        self._stopping.set()
        with self.store.cond:
            self.store.cond.notify_all()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> KubeAPIServerDouble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def kubeconfig(self, path: str | Path, *, context: str = "double", namespace: str | None = None) -> Path:
        """A kubeconfig file that points kubectl and client libraries at the double."""
        user: dict[str, Any] = {"token": self.token} if self.token else {}
        ctx: dict[str, Any] = {"cluster": context, "user": context}
        if namespace:
            ctx["namespace"] = namespace
        doc = {"apiVersion": "v1", "kind": "Config", "preferences": {},
               "clusters": [{"name": context, "cluster": {"server": self.url}}],
               "users": [{"name": context, "user": user}],
               "contexts": [{"name": context, "context": ctx}], "current-context": context}
        p = Path(path)
        p.write_text(yaml.safe_dump(doc, sort_keys=False))
        return p

    def add(self, *objects: dict[str, Any] | Iterable[dict[str, Any]]) -> int:
        """Store objects directly (not through HTTP): kept as given, with uids and timestamps they carry."""
        flat: list[dict[str, Any]] = []
        for o in objects:
            if isinstance(o, dict):
                flat.extend(o["items"] if o.get("kind") == "List" else [o])
            else:
                flat.extend(o)
        return self.store.load(flat)

    def resource(self, kind: str, api_version: str | None = None) -> Resource:
        for r in RESOURCES:
            if r.kind == kind and (api_version is None or r.group_version == api_version):
                return r
        raise KeyError(kind)

    # ------------------------------------------------------------ discovery

    def discovery(self, path: str) -> dict[str, Any] | None:
        if path == "/version":
            return {"major": "1", "minor": "32", "gitVersion": "v1.32.0-kubesched-test-double", "gitCommit": "",
                    "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.23.0",
                    "compiler": "gc", "platform": "linux/amd64"}
        if path == "/api":
            return {"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": f"{self.host}:{self.port}"}]}
        if path == "/apis":
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [self._group(g) for g in GROUP_ORDER]}
        m = re.fullmatch(r"/apis/([^/]+)", path)
        if m and m.group(1) in GROUP_ORDER:
            return {"kind": "APIGroup", "apiVersion": "v1", **self._group(m.group(1))}
        m = re.fullmatch(r"/api/(v1)|/apis/([^/]+)/([^/]+)", path)
        if m:
            gv = m.group(1) or f"{m.group(2)}/{m.group(3)}"
            resources = [r for r in RESOURCES if r.group_version == gv]
            if not resources:
                return None
            return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                    "resources": [x for r in resources for x in self._resource_entries(r)]}
        return None

    @staticmethod
    def _group(name: str) -> dict[str, Any]:
        versions = sorted({r.version for r in RESOURCES if r.group == name})
        gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
        return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}

    @staticmethod
    def _resource_entries(r: Resource) -> list[dict[str, Any]]:
        main: dict[str, Any] = {"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
                                "kind": r.kind, "verbs": list(r.verbs)}
        if r.short_names:
            main["shortNames"] = list(r.short_names)
        out = [main]
        for sub in r.subresources:
            if sub == "status":
                out.append({"name": f"{r.plural}/status", "singularName": "", "namespaced": r.namespaced,
                            "kind": r.kind, "verbs": ["get", "patch", "update"]})
            elif sub == "binding":
                out.append({"name": f"{r.plural}/binding", "singularName": "", "namespaced": True, "kind": "Binding",
                            "verbs": ["create"]})
            elif sub == "eviction":
                out.append({"name": f"{r.plural}/eviction", "singularName": "", "namespaced": True, "group": "policy",
                            "version": "v1", "kind": "Eviction", "verbs": ["create"]})
        return out

    # ------------------------------------------------------------ controllers the double runs

    def sync_pdbs(self, namespace: str | None = None) -> None:
        """A disruption controller, simplified: expected pods are the non-terminal pods the selector matches
        (upstream asks their controllers' scale), healthy ones are Ready and not being deleted."""
        pdb_r = self.resource("PodDisruptionBudget")
        pod_r = self.resource("Pod")
        _, pdbs = self.store.current(pdb_r, namespace)
        for pdb in pdbs:
            ns = pdb["metadata"]["namespace"]
            sel = (pdb.get("spec") or {}).get("selector")
            _, pods = self.store.current(pod_r, ns)
            matched = [p for p in pods if _selector_matches(sel, (p.get("metadata") or {}).get("labels") or {})
                       and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
            expected = len(matched)
            healthy = sum(1 for p in matched if pod_ready(p) and not p["metadata"].get("deletionTimestamp"))
            spec = pdb.get("spec") or {}
            if spec.get("minAvailable") is not None:
                desired = _scaled(spec["minAvailable"], expected, up=True)
            elif spec.get("maxUnavailable") is not None:
                desired = max(0, expected - _scaled(spec["maxUnavailable"], expected, up=True))
            else:
                desired = expected
            status = dict(pdb.get("status") or {})
            new = {"observedGeneration": pdb["metadata"].get("generation", 1), "expectedPods": expected,
                   "currentHealthy": healthy, "desiredHealthy": desired,
                   "disruptionsAllowed": max(0, healthy - desired)}
            disrupted = {k: v for k, v in (status.get("disruptedPods") or {}).items()
                         if any(p["metadata"]["name"] == k and not p["metadata"].get("deletionTimestamp") for p in pods)}
            if disrupted:
                new["disruptedPods"] = disrupted
            if all(status.get(k) == v for k, v in new.items()) and set(status.get("disruptedPods") or {}) == set(disrupted):
                continue
            status.update(new)
            if not disrupted:
                status.pop("disruptedPods", None)
            try:
                self.store.update(pdb_r, ns, pdb["metadata"]["name"], lambda o, s=status: {**o, "status": s})
            except ApiError:
                continue

    def _after_pod_write(self, namespace: str) -> None:
        if self.disruption_controller:
            self.sync_pdbs(namespace)


def _scaled(v: Any, total: int, up: bool) -> int:
    if isinstance(v, int):
        return v
    text = str(v)
    if text.endswith("%"):
        x = int(text[:-1]) * total / 100
        return int(-(-x // 1)) if up else int(x // 1)
    return int(text)


def _selector_matches(sel: Any, labels: dict[str, str]) -> bool:
    """metav1.LabelSelectorAsSelector, where a nil or empty selector matches nothing (eviction's rule)."""
    if not isinstance(sel, dict) or (not sel.get("matchLabels") and not sel.get("matchExpressions")):
        return False
    from kubesched.api.selectors import parse_label_selector

    return parse_label_selector(sel, "spec.selector").matches(labels)


def pod_ready(pod: dict[str, Any]) -> bool:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def _without_type(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}


def _success(code: int = 201) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}


def _encode_continue(sid: str, offset: int, rv: int) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": f"{sid}:{offset}"}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[str, int]:
    try:
        raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        sid, offset = str(raw["start"]).split(":")
        return sid, int(offset)
    except (ValueError, KeyError, TypeError):
        raise ApiError(400, "BadRequest", "continue key is not valid: incorrect encoded start resourceVersion "
                                          "(version meta.k8s.io/v1)") from None


# ---------------------------------------------------------------- HTTP


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that goes away mid-request (a process stopped with connections open) is not an error.
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kube-apiserver-test-double"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    @property
    def double(self) -> KubeAPIServerDouble:
        return self.server.double  # type: ignore[attr-defined,no-any-return]

    # ------------------------------------------------------------ plumbing

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._handle("PUT")

    def do_PATCH(self) -> None:  # noqa: N802
        self._handle("PATCH")

    def do_DELETE(self) -> None:  # noqa: N802
        self._handle("DELETE")

    def _send_json(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        req = getattr(self, "_request", None)
        if req is not None:
            self.double.answers.append((req, code))
        data = json.dumps(body, separators=(",", ":")).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, e: ApiError) -> None:
        headers = {"Retry-After": str(e.retry_after)} if e.retry_after else None
        self._send_json(e.code, e.status(), headers)

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = self._read_chunked()
        if not raw:
            return None
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if "protobuf" in ctype:
            raise ApiError(415, "UnsupportedMediaType", f"the test double speaks JSON only, not {ctype}")
        try:
            if "yaml" in ctype:
                return yaml.safe_load(raw)
            return json.loads(raw)
        except (ValueError, yaml.YAMLError) as e:
            raise ApiError(400, "BadRequest", f"the body of the request could not be decoded: {e}") from None

    def _read_chunked(self) -> bytes:
        out = b""
        while True:
            size = int(self.rfile.readline().strip() or b"0", 16)
            if size == 0:
                self.rfile.readline()
                return out
            out += self.rfile.read(size)
            self.rfile.readline()

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _handle(self, method: str) -> None:
        d = self.double
        parts = urlsplit(self.path)
        path = parts.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        watch = query.get("watch") in ("true", "1")
        req = Request(method, path, query, self.headers.get("User-Agent") or "")
        self._request = req
        d.requests.append(req)
        try:
            for rule in d.faults.take(method, path, watch):
                if rule.action == "delay":
                    time.sleep(rule.seconds)
                elif rule.action == "drop":
                    self._body()
                    self._drop()
                    return
                elif rule.action == "status":
                    self._body()
                    raise ApiError(rule.code, _REASONS.get(rule.code, "InternalError"),
                                   f"injected fault: {rule.code}", retry_after=rule.retry_after)
                elif rule.action == "drop_watch":
                    query["__drop_after"] = str(rule.events)
            if d.token is not None and self.headers.get("Authorization") != f"Bearer {d.token}":
                raise ApiError(401, "Unauthorized", "Unauthorized")
            if path in ("/healthz", "/readyz", "/livez"):
                data = b"ok"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            if method == "GET":
                doc = d.discovery(path)
                if doc is not None:
                    self._send_json(200, doc)
                    return
            target = _route(path)
            if target is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            r, ns, name, sub = target
            self._dispatch(method, r, ns, name, sub, query, watch)
        except ApiError as e:
            self._send_error(e)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _dispatch(self, method: str, r: Resource, ns: str | None, name: str | None, sub: str | None,
                  query: dict[str, str], watch: bool) -> None:
        verb = {"GET": "get" if name else ("watch" if watch else "list"), "POST": "create", "PUT": "update",
                "PATCH": "patch", "DELETE": "delete" if name else "deletecollection"}[method]
        if sub is None and verb not in r.verbs:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        if sub is not None and sub not in r.subresources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if verb == "list":
            self._send_json(200, self._list(r, ns, query))
        elif verb == "watch":
            self._watch(r, ns, query)
        elif verb == "get":
            assert name is not None
            self._send_json(200, self.double.store.get(r, ns, name))
        elif verb == "create" and sub is None:
            self._send_json(201, self._create(r, ns, self._body(), query))
        elif verb == "create" and sub == "binding":
            assert ns is not None and name is not None
            self._send_json(201, self._bind(r, ns, name, self._body()))
        elif verb == "create" and sub == "eviction":
            assert ns is not None and name is not None
            code, body = self._evict(r, ns, name, self._body())
            self._send_json(code, body)
        elif verb in ("update", "patch"):
            assert name is not None
            self._send_json(200, self._write(r, ns, name, sub, method, self._body()))
        elif verb == "delete":
            assert name is not None
            self._send_json(200, self._delete(r, ns, name, self._body(), query))
        elif verb == "deletecollection":
            self._send_json(200, self._delete_collection(r, ns, query))
        else:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    # ------------------------------------------------------------ list and watch

    def _list(self, r: Resource, ns: str | None, query: dict[str, str]) -> dict[str, Any]:
        store = self.double.store
        limit = int(query.get("limit") or 0)
        token = query.get("continue")
        selective = bool(query.get("labelSelector") or query.get("fieldSelector"))
        if token:
            sid, offset = _decode_continue(token)
            snap = store.snapshot(sid)
            if snap is None:
                raise ApiError(410, "Expired", CONTINUE_EXPIRED)
            rv, items = snap.rv, snap.items
        else:
            rv, items = store.current(r, ns)
            match = combine(label_matcher(query.get("labelSelector")), field_matcher(query.get("fieldSelector")))
            if match is not None:
                items = [o for o in items if match(o)]
            offset = 0
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        page = items[offset:]
        if limit > 0 and len(page) > limit:
            sid = sid if token else store.save_snapshot(rv, items)
            page = page[:limit]
            meta["continue"] = _encode_continue(sid, offset + limit, rv)
            if not selective:
                meta["remainingItemCount"] = len(items) - offset - limit
        return {"kind": r.list_kind, "apiVersion": r.api_version, "metadata": meta,
                "items": [_without_type(o) for o in page]}

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _event(self, type_: str, obj: dict[str, Any]) -> None:
        self._chunk(json.dumps({"type": type_, "object": obj}, separators=(",", ":")).encode() + b"\n")

    def _watch(self, r: Resource, ns: str | None, query: dict[str, str]) -> None:
        d = self.double
        store = d.store
        match = combine(label_matcher(query.get("labelSelector")), field_matcher(query.get("fieldSelector")))
        rv_param = query.get("resourceVersion", "")
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        initial = rv_param in ("", "0") or query.get("sendInitialEvents") in ("true", "1")
        timeout = float(query.get("timeoutSeconds") or d.default_watch_timeout)
        drop_after = int(query["__drop_after"]) if "__drop_after" in query else None
        deadline = time.monotonic() + timeout
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        sent = 0

        def in_scope(obj: dict[str, Any] | None) -> bool:
            if obj is None:
                return False
            if ns and r.namespaced and (obj.get("metadata") or {}).get("namespace") != ns:
                return False
            return match is None or match(obj)

        def emit(type_: str, obj: dict[str, Any]) -> bool:
            nonlocal sent
            if drop_after is not None and sent >= drop_after:
                self._drop()
                return False
            self._event(type_, obj)
            sent += 1
            return True

        try:
            with store.cond:
                if initial:
                    last, items = store.current(r, ns)
                    pending = [o for o in items if in_scope(o)]
                else:
                    last = int(rv_param)
                    pending = []
                    if last < store.compacted:
                        gone = ApiError(410, "Expired", f"too old resource version: {last} ({store.compacted + 1})")
                        self._event("ERROR", gone.status())
                        self._chunk(b"")
                        return
            for o in pending:
                if not emit("ADDED", o):
                    return
            if query.get("sendInitialEvents") in ("true", "1") and bookmarks:
                self._event("BOOKMARK", {"kind": r.kind, "apiVersion": r.api_version, "metadata": {
                    "resourceVersion": str(last), "annotations": {"k8s.io/initial-events-end": "true"}}})
            last_bookmark = time.monotonic()
            while not d._stopping.is_set():
                now = time.monotonic()
                if now >= deadline:
                    break
                with store.cond:
                    if last < store.compacted:
                        gone = ApiError(410, "Expired", f"too old resource version: {last} ({store.compacted + 1})")
                        self._event("ERROR", gone.status())
                        break
                    events = store.events_after(last)
                    if not events:
                        wait = min(deadline - now, d.bookmark_interval - (now - last_bookmark) if bookmarks else 0.5)
                        store.cond.wait(max(0.01, min(wait, 0.5)))
                        events = store.events_after(last)
                    current_rv = store.rv
                for ev in events:
                    last = ev.rv
                    if ev.resource is not r:
                        continue
                    now_in, was_in = in_scope(ev.obj), in_scope(ev.old)
                    if ev.type == "MODIFIED" and now_in != was_in:
                        ok = emit("ADDED" if now_in else "DELETED", ev.obj)
                    elif now_in or (ev.type != "ADDED" and was_in):
                        ok = emit(ev.type, ev.obj)
                    else:
                        continue
                    if not ok:
                        return
                if not events:
                    last = max(last, current_rv)
                if bookmarks and time.monotonic() - last_bookmark >= d.bookmark_interval:
                    self._event("BOOKMARK", {"kind": r.kind, "apiVersion": r.api_version,
                                             "metadata": {"resourceVersion": str(last)}})
                    last_bookmark = time.monotonic()
            self._chunk(b"")
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    # ------------------------------------------------------------ writes

    def _create(self, r: Resource, ns: str | None, body: Any, query: dict[str, str]) -> dict[str, Any]:
        d = self.double
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body of the request is not an object")
        if body.get("kind") not in (None, r.kind):
            raise ApiError(400, "BadRequest", f"the kind of the provided object ({body.get('kind')}) does not match "
                                              f"the resource ({r.kind})")
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if r.namespaced:
            if meta.get("namespace") and meta["namespace"] != ns:
                raise ApiError(400, "BadRequest", "the namespace of the provided object does not match the namespace "
                                                  "sent on the request")
            meta["namespace"] = ns
            ns_r = d.resource("Namespace")
            try:
                d.store.get(ns_r, None, str(ns))
            except ApiError:
                raise not_found(ns_r, str(ns)) from None
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = meta["generateName"] + "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
            else:
                raise ApiError(422, "Invalid", f'{r.kind} "" is invalid: metadata.name: Required value: name or '
                                               f"generateName is required")
        if r.kind == "Pod":
            self._admit_pod(obj)
        elif r.kind == "Namespace":
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj["status"] = {"phase": "Active"}
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
        if query.get("dryRun") == "All":
            return obj
        stored = d.store.create(r, obj)
        if r.kind in ("Pod", "PodDisruptionBudget"):
            d._after_pod_write(str(ns))
        return stored

    def _admit_pod(self, obj: dict[str, Any]) -> None:
        """The pod strategy's defaulting and the Priority admission plugin, from kubesched's own model."""
        from kubesched.api.defaulting import admit_pod
        from kubesched.api.objects import parse_priority_class
        from kubesched.errors import InputError

        _, pcs = self.double.store.current(self.double.resource("PriorityClass"), None)
        classes = {p["metadata"]["name"]: parse_priority_class(p) for p in pcs}
        try:
            admit_pod(obj, classes, "spec")
        except InputError as e:
            raise ApiError(403 if "PriorityClass" in e.message else 422, "Forbidden" if "PriorityClass" in e.message
                           else "Invalid", f'pods "{obj["metadata"]["name"]}" is forbidden: {e.message}') from None
        obj.setdefault("status", {}).setdefault("phase", "Pending")

    def _write(self, r: Resource, ns: str | None, name: str, sub: str | None, method: str, body: Any) -> dict[str, Any]:
        d = self.double
        store = d.store
        if not isinstance(body, (dict, list)):
            raise ApiError(400, "BadRequest", "the body of the request is not an object")
        with store.cond:
            cur = store.get(r, ns, name)
            if method == "PUT":
                assert isinstance(body, dict)
                bmeta = body.get("metadata") or {}
                if bmeta.get("name") not in (None, name):
                    raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
                new = copy.deepcopy(body)
            else:
                new = apply_patch(self.headers.get("Content-Type") or "", copy.deepcopy(cur), body)
            expect = (new.get("metadata") or {}).get("resourceVersion")
            if expect and expect != cur["metadata"].get("resourceVersion"):
                raise conflict(r, name)
            if sub == "status":
                merged = copy.deepcopy(cur)
                merged["status"] = new.get("status")
                new = merged
            else:
                if r.status_subresource and "status" in cur:
                    new["status"] = copy.deepcopy(cur["status"])
                elif r.status_subresource:
                    new.pop("status", None)
                meta = dict(new.get("metadata") or {})
                for k in ("uid", "creationTimestamp", "namespace", "name", "deletionTimestamp", "generation"):
                    if k in cur["metadata"]:
                        meta[k] = cur["metadata"][k]
                if "generation" in meta and new.get("spec") != cur.get("spec"):
                    meta["generation"] = int(meta["generation"]) + 1
                new["metadata"] = meta
            new["apiVersion"], new["kind"] = r.api_version, r.kind
            stored = store.replace(r, new)
        if r.kind in ("Pod", "PodDisruptionBudget"):
            d._after_pod_write(str(ns))
        return stored

    def _delete(self, r: Resource, ns: str | None, name: str, body: Any, query: dict[str, str]) -> dict[str, Any]:
        d = self.double
        opts = body if isinstance(body, dict) else {}
        pre = opts.get("preconditions") or {}
        if query.get("dryRun") == "All" or opts.get("dryRun"):
            return d.store.get(r, ns, name)
        cur = d.store.get(r, ns, name)
        if cur["metadata"].get("finalizers"):
            def mark(o: dict[str, Any]) -> dict[str, Any]:
                o["metadata"].setdefault("deletionTimestamp", now_rfc3339())
                o["metadata"].setdefault("deletionGracePeriodSeconds", 0)
                return o

            return d.store.update(r, ns, name, mark)
        gone = d.store.delete(r, ns, name, expect_rv=pre.get("resourceVersion"), expect_uid=pre.get("uid"))
        if r.kind == "Pod":
            d._after_pod_write(str(ns))
        return gone

    def _delete_collection(self, r: Resource, ns: str | None, query: dict[str, str]) -> dict[str, Any]:
        _, items = self.double.store.current(r, ns)
        match = combine(label_matcher(query.get("labelSelector")), field_matcher(query.get("fieldSelector")))
        gone = []
        for o in items:
            if match is None or match(o):
                meta = o["metadata"]
                try:
                    gone.append(_without_type(self.double.store.delete(r, meta.get("namespace"), meta["name"])))
                except ApiError:
                    continue
        return {"kind": r.list_kind, "apiVersion": r.api_version, "metadata": {}, "items": gone}

    # ------------------------------------------------------------ binding and eviction

    def _bind(self, r: Resource, ns: str, name: str, body: Any) -> dict[str, Any]:
        d = self.double
        if not isinstance(body, dict) or not isinstance(body.get("target"), dict):
            raise ApiError(400, "BadRequest", "expected a Binding with a target")
        if (body.get("metadata") or {}).get("name") not in (None, name):
            raise ApiError(400, "BadRequest", "name in URL does not match name in Binding object")
        node = str(body["target"].get("name") or "")
        binding_r = Resource("", "v1", "pods/binding", "Binding", True)

        def assign(pod: dict[str, Any]) -> dict[str, Any]:
            if pod["metadata"].get("deletionTimestamp"):
                raise conflict(binding_r, name, f"pod {name} is being deleted, cannot be assigned to a host")
            assigned = (pod.get("spec") or {}).get("nodeName")
            if assigned:
                raise conflict(binding_r, name, f'pod {name} is already assigned to node "{assigned}"')
            pod.setdefault("spec", {})["nodeName"] = node
            ann = (body.get("metadata") or {}).get("annotations") or {}
            if ann:
                pod["metadata"].setdefault("annotations", {}).update(ann)
            status = pod.setdefault("status", {})
            conds = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conds.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                          "lastTransitionTime": now_rfc3339()})
            status["conditions"] = conds
            if d.run_bound_pods:
                start = now_rfc3339()
                status["phase"] = "Running"
                status["startTime"] = start
                conds.append({"type": "Ready", "status": "True", "lastProbeTime": None, "lastTransitionTime": start})
            return pod

        d.store.update(r, ns, name, assign)
        d._after_pod_write(ns)
        return _success()

    def _evict(self, r: Resource, ns: str, name: str, body: Any) -> tuple[int, dict[str, Any]]:
        """pods/eviction as the eviction REST handler answers it."""
        d = self.double
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "expected an Eviction")
        if (body.get("metadata") or {}).get("name") != name:
            raise ApiError(400, "BadRequest", "name in URL does not match name in Eviction object")
        opts = body.get("deleteOptions") or {}
        pre = (opts.get("preconditions") or {}) if isinstance(opts, dict) else {}
        pdb_r = d.resource("PodDisruptionBudget")
        with d.store.cond:
            pod = d.store.get(r, ns, name)
            phase = (pod.get("status") or {}).get("phase")
            if phase in ("Succeeded", "Failed", "Pending") or pod["metadata"].get("deletionTimestamp"):
                d.store.delete(r, ns, name, expect_rv=pre.get("resourceVersion"), expect_uid=pre.get("uid"))
            else:
                labels = pod["metadata"].get("labels") or {}
                _, all_pdbs = d.store.current(pdb_r, ns)
                pdbs = [p for p in all_pdbs if _selector_matches((p.get("spec") or {}).get("selector"), labels)]
                if len(pdbs) > 1:
                    return 500, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                 "message": "This pod has more than one PodDisruptionBudget, which the eviction "
                                            "subresource does not support.", "code": 500}
                if pdbs:
                    self._check_and_decrement(pdbs[0], pod)
                d.store.delete(r, ns, name, expect_rv=pre.get("resourceVersion"), expect_uid=pre.get("uid"))
        d._after_pod_write(ns)
        return 201, _success()

    def _check_and_decrement(self, pdb: dict[str, Any], pod: dict[str, Any]) -> None:
        d = self.double
        status = pdb.get("status") or {}
        pdb_name = pdb["metadata"]["name"]
        healthy, desired = int(status.get("currentHealthy") or 0), int(status.get("desiredHealthy") or 0)
        # An unready pod does not count towards healthy: no decrement while the budget holds.
        if not pod_ready(pod) and healthy >= desired and desired > 0:
            return
        if int(status.get("observedGeneration") or 0) < int(pdb["metadata"].get("generation") or 0):
            raise _too_many_requests(f"The disruption budget {pdb_name} is still being processed by the server.", 10)
        allowed = int(status.get("disruptionsAllowed") or 0)
        if allowed < 0:
            raise ApiError(403, "Forbidden", f'poddisruptionbudgets.policy "{pdb_name}" is forbidden: pdb disruptions '
                                             f"allowed is negative")
        if len(status.get("disruptedPods") or {}) > 2000:
            raise ApiError(403, "Forbidden", f'poddisruptionbudgets.policy "{pdb_name}" is forbidden: DisruptedPods map '
                                             f"too big - too many evictions not confirmed by PDB controller")
        if allowed == 0:
            raise _too_many_requests(f"The disruption budget {pdb_name} needs {desired} healthy pods and has "
                                     f"{healthy} currently", 0)

        def decrement(o: dict[str, Any]) -> dict[str, Any]:
            st = o.setdefault("status", {})
            st["disruptionsAllowed"] = int(st.get("disruptionsAllowed") or 0) - 1
            st.setdefault("disruptedPods", {})[pod["metadata"]["name"]] = now_rfc3339()
            return o

        d.store.update(d.resource("PodDisruptionBudget"), pdb["metadata"]["namespace"], pdb_name, decrement)


def _too_many_requests(cause: str, retry_after: int) -> ApiError:
    details: dict[str, Any] = {"causes": [{"reason": DISRUPTION_BUDGET_CAUSE, "message": cause}]}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return ApiError(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.",
                    details, retry_after=retry_after or None)


_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict", 410: "Expired",
            429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


def _route(path: str) -> tuple[Resource, str | None, str | None, str | None] | None:
    """(resource, namespace, name, subresource) of a resource URL, or None."""
    m = re.fullmatch(r"/api/(v1)/(.+)|/apis/([^/]+)/([^/]+)/(.+)", path)
    if not m:
        return None
    if m.group(1):
        group, version, rest = "", m.group(1), m.group(2)
    else:
        group, version, rest = m.group(3), m.group(4), m.group(5)
    parts = rest.split("/")
    ns: str | None = None
    if parts[0] == "namespaces" and len(parts) >= 3 and by_path(group, version, parts[2]) is not None \
            and by_path(group, version, parts[2]).namespaced:  # type: ignore[union-attr]
        ns, parts = parts[1], parts[2:]
    r = by_path(group, version, parts[0])
    if r is None or len(parts) > 3:
        return None
    if r.namespaced and ns is None and len(parts) > 1:
        return None
    name = parts[1] if len(parts) > 1 else None
    sub = parts[2] if len(parts) > 2 else None
    return r, ns, name, sub


__all__ = ["ApiError", "Faults", "KubeAPIServerDouble", "Request", "not_found"]
