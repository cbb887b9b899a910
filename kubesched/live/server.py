"""/healthz, /readyz and /metrics of a live process, on `--bind-address`/`--port`.

As kube-scheduler and the descheduler serve them (k8s.io/apiserver healthz, component-base metrics):
`/healthz` (and `/livez`) answer `ok` while the process works — the leader-election watchdog makes it fail
when a leader has stopped renewing its lease —; `/readyz` answers `ok` once the informers have synced
(before that 500 with the check that failed); `/metrics` is the Prometheus text exposition of the process's
registry. Served over plain HTTP (put a TLS-terminating proxy or the pod network policy in front; upstream
serves HTTPS with delegated authentication, which is not modelled). Port 0 turns the server off.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

Check = Callable[[], tuple[bool, str]]


class HealthServer:
    def __init__(self, address: str, port: int, registry: CollectorRegistry, *, healthz: list[tuple[str, Check]],
                 readyz: list[tuple[str, Check]]) -> None:
        self.registry = registry
        self.healthz = healthz
        self.readyz = readyz
        self._httpd = ThreadingHTTPServer((address, port), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.owner = self  # type: ignore[attr-defined]
        self.port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="health-server", daemon=True)

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def answer(self, path: str) -> tuple[int, str, bytes]:
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)
        checks = {"/healthz": self.healthz, "/livez": self.healthz, "/readyz": self.readyz}.get(path)
        if checks is None:
            return 404, "text/plain; charset=utf-8", b"404 page not found\n"
        failed = []
        for name, check in checks:
            ok, why = check()
            if not ok:
                failed.append(f"[-]{name} failed: {why}")
        if failed:
            body = "\n".join(failed) + f"\n{path[1:]} check failed\n"
            return 500, "text/plain; charset=utf-8", body.encode()
        return 200, "text/plain; charset=utf-8", b"ok"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        owner: HealthServer = self.server.owner  # type: ignore[attr-defined]
        code, ctype, body = owner.answer(self.path.split("?", 1)[0].rstrip("/") or "/")
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
