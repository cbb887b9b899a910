"""Running `kubesched scheduler` / `kubesched descheduler` as processes against the API server double.

Every process started here is stopped by the fixture that owns it (SIGTERM, then SIGKILL after a grace
period), so no test leaves one behind even when it fails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kube_apiserver_double import KubeAPIServerDouble

ROOT = Path(__file__).resolve().parent.parent


def node(name: str, cpu: str = "4", memory: str = "8Gi", labels: dict[str, str] | None = None) -> dict[str, Any]:
    lab = {"kubernetes.io/hostname": name, **(labels or {})}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": lab},
            "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
                       "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pending(name: str, cpu: str = "500m", memory: str = "256Mi", scheduler: str = "default-scheduler",
            ns: str = "default", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": name.rsplit("-", 1)[0]}},
            "spec": {"schedulerName": scheduler, "containers": [
                {"name": "c", "image": "registry.k8s.io/pause:3.9",
                 "resources": {"requests": {"cpu": cpu, "memory": memory}}}], **spec},
            "status": {"phase": "Pending"}}


def running(name: str, node_name: str, cpu: str = "500m", labels: dict[str, str] | None = None,
            owner: str | None = "ReplicaSet", ns: str = "default") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels or {"app": "web"}}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": "web-rs", "uid": "rs-uid",
                                    "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node_name, "containers": [
                {"name": "c", "image": "registry.k8s.io/pause:3.9", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def pods_of(api: KubeAPIServerDouble, ns: str = "default") -> dict[str, dict[str, Any]]:
    _, items = api.store.current(api.resource("Pod"), ns)
    return {p["metadata"]["name"]: p for p in items}


def bindings(api: KubeAPIServerDouble) -> dict[str, str]:
    return {name: p["spec"].get("nodeName", "") for name, p in pods_of(api).items()}


def binding_requests(api: KubeAPIServerDouble) -> list[Any]:
    return [r for r in list(api.requests) if r.method == "POST" and r.path.endswith("/binding")]


def wait_until(check: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Process:
    """One kubesched process; stderr goes to a file the test can read."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.args = args
        self.log_path = log
        self._log = open(log, "w")  # noqa: SIM115 - closed in stop()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "kubesched", *args], stdout=subprocess.PIPE,
                                     stderr=self._log, cwd=ROOT, env=env, text=True)
        self.stdout = ""

    @property
    def log(self) -> str:
        return self.log_path.read_text()

    def wait_log(self, text: str, timeout: float = 30.0) -> None:
        wait_until(lambda: text in self.log or self.proc.poll() is not None, timeout, f"{text!r} in the log")
        assert text in self.log, f"process ended ({self.proc.returncode}) before logging {text!r}:\n{self.log}"

    def terminate(self, timeout: float = 20.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def wait(self, timeout: float = 60.0) -> int:
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
            raise AssertionError(f"kubesched {self.args[0]} did not stop in {timeout}s:\n{self.log}") from None
        self.stdout += out or ""
        return self.proc.returncode

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()


@pytest.fixture()
def processes(tmp_path: Path) -> Iterator[Callable[..., Process]]:
    """Start kubesched processes; each is stopped when the test ends."""
    started: list[Process] = []

    def start(*args: str, name: str | None = None) -> Process:
        p = Process(list(args), tmp_path / f"{name or args[0]}-{len(started)}.log")
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()


@pytest.fixture()
def api(tmp_path: Path) -> Iterator[KubeAPIServerDouble]:
    with KubeAPIServerDouble(bookmark_interval=0.5) as server:
        yield server
