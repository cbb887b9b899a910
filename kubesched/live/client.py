"""Reading a Kubernetes API server through the official `kubernetes` client: configuration, paged LIST,
WATCH, timeouts and retries.

The read side that `kubesched capture` uses and that live mode's informers build on. Objects come back as
the JSON the server sent (plain dicts, nothing dropped or renamed), through the official client's
transport, authentication (tokens, client certificates, exec plugins, in-cluster service accounts) and TLS.

Mirrors client-go where a client's behaviour is visible:
- configuration as clientcmd loads it (kubernetes/client-go tools/clientcmd/loader.go): `--kubeconfig`, else
  `$KUBECONFIG`, else `~/.kube/config`, else the in-cluster service account when running in a pod
  (`KUBERNETES_SERVICE_HOST`); `--context` picks a context;
- paged LIST as tools/pager/pager.go does it: `limit` and `continue` until the server stops sending a token;
  a `410 Expired` continue token falls back to one full LIST (FullListIfExpired);
- WATCH from a resourceVersion with bookmarks, as tools/cache/reflector.go watches; a `410 Gone`
  (an ERROR event or status) is `ResourceExpired`, for the caller to relist;
- retries: rest/with_retry.go retries answers carrying Retry-After; for reads we also retry any 429 and
  5xx answer and connection errors, with exponential backoff (or the server's Retry-After), because a
  capture of a busy cluster should not fail on one overloaded answer.

Secrets are never requested by anything in kubesched; `_refuse_secrets` guards every path this module reads.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from kubesched.api.documents import decode_text, loads_yaml
from kubesched.errors import InputError, RemoteError

DEFAULT_PAGE_SIZE = 500  # what kubectl and client-go's pager ask for
RETRYABLE_STATUS = (429, 500, 502, 503, 504)


@dataclass(frozen=True, slots=True)
class ResourceType:
    """An API resource: group, version, plural, kind, and whether it lives in namespaces."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace and self.namespaced:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        return base


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How reads retry: `attempts` tries in all, waiting initial·factor^k (capped, jittered) between them,
    or what the server's Retry-After says; each request times out after `timeout` seconds."""

    attempts: int = 5
    initial: float = 0.5
    factor: float = 2.0
    max_delay: float = 10.0
    timeout: float = 30.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_delay)
        base = min(self.initial * self.factor ** attempt, self.max_delay)
        return base * (0.9 + 0.2 * random.random())


class ApiStatusError(RemoteError):
    """The server answered with an error status (a metav1.Status)."""

    def __init__(self, message: str, status: int, reason: str = "", body: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.body = body or {}


class ResourceExpired(ApiStatusError):
    """410 Gone / Expired: the resourceVersion (or continue token) is older than the server keeps."""


class ConnectionLost(RemoteError):
    """The connection broke in the middle of a response (a watch stream that ended abruptly)."""


@dataclass(slots=True)
class ListPage:
    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str
    remaining: int | None


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK
    object: dict[str, Any]

    @property
    def resource_version(self) -> str:
        return str((self.object.get("metadata") or {}).get("resourceVersion") or "")


# ---------------------------------------------------------------- configuration


def _kubeconfig_paths(kubeconfig: str | None) -> list[str]:
    if kubeconfig:
        return [kubeconfig]
    env = os.environ.get("KUBECONFIG")
    if env:
        return [p for p in env.split(os.pathsep) if p]
    default = Path.home() / ".kube" / "config"
    return [str(default)] if default.exists() else []


def _contexts(paths: list[str]) -> tuple[list[str], str]:
    """The context names the files define and the current context (first file that sets one)."""
    names: list[str] = []
    current = ""
    for p in paths:
        try:
            data = Path(p).read_bytes()
        except OSError as e:
            if len(paths) > 1 and isinstance(e, FileNotFoundError):
                continue  # clientcmd skips missing files named in $KUBECONFIG
            raise InputError(f"cannot read kubeconfig: {e.strerror or e}", file=p) from None
        try:
            # kubesched's bounded reader: UTF-8, depth and alias bounds, named errors.
            docs = loads_yaml(decode_text(data, p), p)
        except InputError as e:
            raise InputError(f"invalid kubeconfig: {e.message}", file=p) from None
        doc = docs[0] if docs else None
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise InputError("expected a kubeconfig (kind: Config)", file=p)
        for c in doc.get("contexts") or []:
            if isinstance(c, dict) and c.get("name"):
                names.append(str(c["name"]))
        if not current and doc.get("current-context"):
            current = str(doc["current-context"])
    return names, current


def load_configuration(kubeconfig: str | None = None, context: str | None = None) -> tuple[k8s_client.Configuration, str]:
    """The official client's Configuration and a description of where it came from (for messages).

    Bad or missing configuration is an InputError (exit 2) naming the file and what is wrong."""
    cfg = k8s_client.Configuration()
    paths = _kubeconfig_paths(kubeconfig)
    if not paths:
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            if context:
                raise InputError("--context needs a kubeconfig; in a pod the service account is used",
                                 field="--context")
            try:
                k8s_config.load_incluster_config(client_configuration=cfg)
            except ConfigException as e:
                raise InputError(f"in-cluster configuration: {e}", field="--kubeconfig") from None
            return cfg, "in-cluster service account"
        raise InputError("no kubeconfig: give --kubeconfig, set KUBECONFIG, create ~/.kube/config, or run in a pod",
                         field="--kubeconfig")
    names, current = _contexts(paths)
    where = os.pathsep.join(paths)
    if context and context not in names:
        raise InputError(f"no context {context!r} in the kubeconfig; it has: {', '.join(names) or 'none'}",
                         file=where, field="--context")
    if not context and not current:
        raise InputError("the kubeconfig sets no current-context; choose one with --context", file=where,
                         field="current-context")
    try:
        if len(paths) == 1:
            k8s_config.load_kube_config(config_file=paths[0], context=context, client_configuration=cfg,
                                        persist_config=False)
        else:
            merged = k8s_config.kube_config.KubeConfigMerger(where)
            k8s_config.load_kube_config_from_dict(merged.config.value, context=context, client_configuration=cfg,
                                                  persist_config=False)
    except ConfigException as e:
        raise InputError(f"invalid kubeconfig: {e}", file=where) from None
    except (OSError, ValueError, TypeError, KeyError) as e:
        raise InputError(f"invalid kubeconfig: {e}", file=where) from None
    return cfg, f"context {context or current} ({cfg.host})"


# ---------------------------------------------------------------- the client


@dataclass
class KubeClient:
    """Reads from one API server. Build with `KubeClient.connect(kubeconfig, context)`."""

    api: k8s_client.ApiClient
    server: str
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Callable[[float], None] = time.sleep
    on_retry: Callable[[str, int, str], None] | None = None  # (path, attempt, why)
    # Every answer (method, status code; "<error>" when none came), for client-go's rest_client_requests_total.
    on_response: Callable[[str, str], None] | None = None
    requests: int = 0
    retries: int = 0

    @classmethod
    def connect(cls, kubeconfig: str | None = None, context: str | None = None,
                retry: RetryPolicy | None = None, *, pool_size: int | None = None,
                user_agent: str | None = None) -> KubeClient:
        """`pool_size`: connections kept per host (a process that watches many kinds and writes from
        several threads needs more than urllib3's default); `user_agent` names the caller to the server."""
        cfg, _ = load_configuration(kubeconfig, context)
        # Retries are ours (with backoff and Retry-After); urllib3's own would hide what failed.
        cfg.retries = False
        if pool_size is not None:
            cfg.connection_pool_maxsize = pool_size
        api = k8s_client.ApiClient(cfg)
        if user_agent:
            api.user_agent = user_agent
        return cls(api, cfg.host, retry or RetryPolicy())

    def close(self) -> None:
        self.api.close()

    # ------------------------------------------------------------ one request

    def _call(self, method: str, path: str, query: list[tuple[str, Any]], timeout: float | None,
              body: Any = None, content_type: str | None = None) -> Any:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        req = self.api.param_serialize(method, path, query_params=query or None, header_params=headers, body=body,
                                       auth_settings=["BearerToken"])
        self.requests += 1
        t = timeout if timeout is not None else self.retry.timeout
        try:
            resp = self.api.call_api(*req, _request_timeout=(min(t, 10.0), t))
        except (urllib3.exceptions.HTTPError, OSError):
            if self.on_response is not None:
                self.on_response(method, "<error>")
            raise
        if self.on_response is not None:
            self.on_response(method, str(resp.status))
        return resp

    def request(self, method: str, path: str, query: list[tuple[str, Any]] | None = None, *,
                body: Any = None, content_type: str | None = None, timeout: float | None = None,
                retry: bool = True) -> dict[str, Any]:
        """One request with retries; the decoded JSON answer. Error answers raise ApiStatusError."""
        attempts = self.retry.attempts if retry else 1
        last = ""
        for attempt in range(attempts):
            retry_after: float | None = None
            try:
                resp = self._call(method, path, query or [], timeout, body, content_type)
                data = resp.read()
            except (urllib3.exceptions.HTTPError, OSError) as e:
                last = _connection_problem(e)
            else:
                if resp.status < 400:
                    try:
                        out = json.loads(data) if data else {}
                    except ValueError:
                        raise RemoteError(f"{self.server}{path}: the answer is not JSON") from None
                    return out if isinstance(out, dict) else {"items": out}
                err = self._status_error(resp.status, data, path, resp.getheader("Retry-After"))
                if resp.status not in RETRYABLE_STATUS:
                    raise err
                last = str(err)
                retry_after = _seconds(resp.getheader("Retry-After"))
            if attempt + 1 < attempts:
                self.retries += 1
                if self.on_retry is not None:
                    self.on_retry(path, attempt + 1, last)
                self.sleep(self.retry.delay(attempt, retry_after))
        raise RemoteError(f"{self.server}: {method} {path} failed after {attempts} attempt"
                          f"{'s' if attempts > 1 else ''}: {last}")

    def write(self, method: str, path: str, body: Any, *, query: list[tuple[str, Any]] | None = None,
              content_type: str = "application/json", timeout: float | None = None) -> dict[str, Any]:
        """A write (POST, PUT, PATCH, DELETE): retried only when the server says when — a 429 or 5xx with
        Retry-After, as client-go's rest client does — and every other error answer is raised at once as an
        ApiStatusError (the caller decides: a 409 binding is someone else's, a 429 eviction a PDB's no).
        A connection that fails is ConnectionLost: whether the write happened is unknown."""
        _refuse_secrets(path)
        for attempt in range(max(1, self.retry.attempts)):
            try:
                resp = self._call(method, path, query or [], timeout, body, content_type)
                raw = resp.read()
            except (urllib3.exceptions.HTTPError, OSError) as e:
                raise ConnectionLost(f"{self.server}: {method} {path}: {_connection_problem(e)}") from None
            if resp.status < 400:
                try:
                    out = json.loads(raw) if raw else {}
                except ValueError:
                    raise RemoteError(f"{self.server}{path}: the answer is not JSON") from None
                return out if isinstance(out, dict) else {}
            err = self._status_error(resp.status, raw, path, resp.getheader("Retry-After"))
            retry_after = _seconds(resp.getheader("Retry-After"))
            if resp.status not in RETRYABLE_STATUS or retry_after is None or attempt + 1 >= self.retry.attempts:
                raise err
            self.retries += 1
            if self.on_retry is not None:
                self.on_retry(path, attempt + 1, str(err))
            self.sleep(self.retry.delay(attempt, retry_after))
        raise AssertionError("unreachable")

    def _status_error(self, status: int, data: bytes, path: str, retry_after: str | None) -> ApiStatusError:
        body: dict[str, Any] = {}
        try:
            parsed = json.loads(data) if data else {}
            body = parsed if isinstance(parsed, dict) else {}
        except ValueError:
            pass
        reason = str(body.get("reason") or "")
        message = str(body.get("message") or (data[:200].decode(errors="replace") if data else ""))
        text = f"{self.server}{path}: {status} {reason or 'error'}: {message}".rstrip(": ")
        if status == 401:
            text = f"{self.server}: the API server rejected the credentials (401 Unauthorized)"
        elif status == 403:
            text = (f"{self.server}: forbidden: {message} (the account needs get/list/watch on what kubesched reads: "
                    f"see deploy/capture-clusterrole.yaml)")
        cls = ResourceExpired if status == 410 else ApiStatusError
        return cls(text, status, reason, body)

    # ------------------------------------------------------------ reads

    def get(self, path: str, query: list[tuple[str, Any]] | None = None) -> dict[str, Any]:
        """GET a path (an object, or a raw path as `kubectl get --raw` reads it)."""
        _refuse_secrets(path)
        return self.request("GET", path, query)

    def list_pages(self, rt: ResourceType, namespace: str | None = None, *, limit: int = DEFAULT_PAGE_SIZE,
                   label_selector: str | None = None, field_selector: str | None = None,
                   retry: bool = True) -> Iterator[ListPage]:
        """Pages of a LIST, in the server's order; the last page carries the list's resourceVersion.
        `retry=False`: one attempt per page (a caller with its own backoff, such as an informer)."""
        path = rt.path(namespace)
        _refuse_secrets(path)
        base: list[tuple[str, Any]] = []
        if label_selector:
            base.append(("labelSelector", label_selector))
        if field_selector:
            base.append(("fieldSelector", field_selector))
        token = ""
        while True:
            query = list(base)
            if limit > 0:
                query.append(("limit", limit))
            if token:
                query.append(("continue", token))
            try:
                doc = self.request("GET", path, query, retry=retry)
            except ResourceExpired:
                if not token:
                    raise
                # The continue token outlived the server's snapshot: one full, unpaged LIST instead.
                doc = self.request("GET", path, base, retry=retry)
                meta = doc.get("metadata") or {}
                yield ListPage(list(doc.get("items") or []), str(meta.get("resourceVersion") or ""), "", None, )
                return
            meta = doc.get("metadata") or {}
            token = str(meta.get("continue") or "")
            remaining = meta.get("remainingItemCount")
            yield ListPage(list(doc.get("items") or []), str(meta.get("resourceVersion") or ""), token,
                           int(remaining) if isinstance(remaining, int) else None)
            if not token:
                return

    def list(self, rt: ResourceType, namespace: str | None = None, *, limit: int = DEFAULT_PAGE_SIZE,
             label_selector: str | None = None, field_selector: str | None = None, retry: bool = True,
             ) -> tuple[list[dict[str, Any]], str]:
        """Every object of a LIST (paged) and the resourceVersion to watch from."""
        items: list[dict[str, Any]] = []
        rv = ""
        for page in self.list_pages(rt, namespace, limit=limit, label_selector=label_selector,
                                    field_selector=field_selector, retry=retry):
            items.extend(page.items)
            rv = page.resource_version or rv
        return items, rv

    def watch(self, rt: ResourceType, resource_version: str, namespace: str | None = None, *,
              bookmarks: bool = True, timeout_seconds: int = 300, label_selector: str | None = None,
              field_selector: str | None = None) -> Iterator[WatchEvent]:
        """Events after `resource_version` until the server ends the stream (normally after
        `timeout_seconds`). ResourceExpired when the version is too old; ConnectionLost when the stream
        breaks; the caller resumes from the last event's resourceVersion."""
        path = rt.path(namespace)
        _refuse_secrets(path)
        query: list[tuple[str, Any]] = [("watch", "true"), ("resourceVersion", resource_version),
                                        ("timeoutSeconds", timeout_seconds)]
        if bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        try:
            resp = self._call("GET", path, query, timeout_seconds + self.retry.timeout)
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise ConnectionLost(f"{self.server}: watch {path}: {_connection_problem(e)}") from None
        if resp.status >= 400:
            raise self._status_error(resp.status, resp.read(), path, resp.getheader("Retry-After"))
        raw = resp.response
        try:
            for line in _lines(raw):
                ev = json.loads(line)
                obj = ev.get("object") or {}
                if ev.get("type") == "ERROR":
                    code = int(obj.get("code") or 500)
                    message = f"{self.server}{path}: watch error {code}: {obj.get('message', '')}"
                    cls = ResourceExpired if code == 410 else ApiStatusError
                    raise cls(message, code, str(obj.get("reason") or ""), obj)
                yield WatchEvent(str(ev.get("type")), obj)
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise ConnectionLost(f"{self.server}: watch {path} broke: {_connection_problem(e)}") from None
        except ValueError:
            raise ConnectionLost(f"{self.server}: watch {path}: an event that is not JSON") from None
        finally:
            raw.release_conn()


def _lines(raw: Any) -> Iterator[bytes]:
    buf = b""
    for chunk in raw.stream(65536, decode_content=True):
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                yield line
    if buf.strip():
        yield buf


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def _connection_problem(e: BaseException) -> str:
    """A short reason for a connection failure (urllib3 wraps the socket error several levels deep)."""
    seen = e
    for _ in range(5):
        reason = getattr(seen, "reason", None)
        inner = reason if isinstance(reason, BaseException) else (seen.__cause__ or seen.__context__)
        if inner is None or inner is seen:
            break
        seen = inner
    text = str(seen)
    if "Connection refused" in text or isinstance(seen, ConnectionRefusedError):
        return "connection refused"
    if isinstance(seen, (TimeoutError, urllib3.exceptions.TimeoutError)) or "timed out" in text:
        return "timed out"
    if "RemoteDisconnected" in repr(seen) or "closed connection without response" in text:
        return "the server closed the connection without answering"
    return text.split("\n")[0][:200] or type(seen).__name__


def _refuse_secrets(path: str) -> None:
    parts = path.split("?")[0].strip("/").split("/")
    if "secrets" in parts:
        raise RemoteError(f"refusing to read {path}: kubesched never reads Secrets")
