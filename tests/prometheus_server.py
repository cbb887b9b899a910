"""A real Prometheus server on a loopback port, loaded with history through real TSDB blocks.

`promtool tsdb create-blocks-from openmetrics` turns OpenMetrics text into blocks; `prometheus` then serves
them. `cadvisor_history` writes the series a kube-prometheus setup scrapes from kubelets' cAdvisor
(`container_cpu_usage_seconds_total` counters and `container_memory_working_set_bytes` gauges with namespace,
pod, container and node labels, plus each node's root cgroup `id="/"`), so capture's default queries read them
as they would a cluster's. Used by tests and by bench scripts.

Prometheus comes from Debian's `prometheus` package (scripts/install-system-deps.sh installs it). Without
it, `require()` skips — and fails under CI (`CI` or `KUBESCHED_REQUIRE_PROMETHEUS` set).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import accumulate, chain, repeat
from pathlib import Path
from typing import TextIO

import numpy as np
import pytest


def require() -> tuple[str, str]:
    prom, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if prom and promtool:
        return prom, promtool
    msg = ("prometheus/promtool are not installed: install Debian's prometheus package "
           "(scripts/install-system-deps.sh does, as root)")
    if os.environ.get("CI") or os.environ.get("KUBESCHED_REQUIRE_PROMETHEUS"):
        pytest.fail(msg + " — required under CI")
    pytest.skip(msg)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def prometheus_with(openmetrics: Path | None, work: Path, *, prom: str | None = None, promtool: str | None = None,
                    ready_timeout: float = 120.0) -> Iterator[str]:
    """Blocks from an OpenMetrics file (None: the blocks already in `work/tsdb`), a Prometheus serving them;
    yields its URL, stops it after."""
    prom = prom or shutil.which("prometheus") or "prometheus"
    promtool = promtool or shutil.which("promtool") or "promtool"
    tsdb = work / "tsdb"
    if openmetrics is not None:
        subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(tsdb)],
                       check=True, capture_output=True, timeout=7200)
    (work / "prometheus.yml").write_text("global:\n  scrape_interval: 1h\n")
    port = free_port()
    log = open(work / "prometheus.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([prom, f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={tsdb}",
                             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=100y",
                             "--query.max-samples=200000000"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + ready_timeout
    try:
        while True:
            try:
                with opener.open(url + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("prometheus did not become ready:\n" + (work / "prometheus.log").read_text()[-2000:])
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@dataclass(frozen=True)
class PodHistory:
    """One pod as cAdvisor saw it: on `node` from `start` to `end` (epoch seconds, end exclusive), its CPU in
    cores and memory in bytes as functions of time."""

    namespace: str
    pod: str
    node: str
    start: float
    end: float
    cpu: Callable[[float], float]
    memory: Callable[[float], float]
    container: str = "main"


def cadvisor_history(out: TextIO, pods: list[PodHistory], start: float, end: float, scrape: float = 15.0) -> int:
    """OpenMetrics for the pods' container series and every node's root cgroup; returns the samples written.
    The CPU counter integrates the pod's CPU between scrapes (exact for piecewise-constant usage).

    Lines are joined at C speed (each pod's values through `map`, the timestamps formatted once); the text is
    the same as writing one sample at a time."""
    nodes = sorted({p.node for p in pods})
    times = []
    t = start
    while t < end:
        times.append(t)
        t += scrape
    stamps = [f" {t:.3f}\n" for t in times]
    node_cpu = {nd: np.zeros(len(times)) for nd in nodes}
    node_mem = {nd: np.zeros(len(times)) for nd in nodes}
    n = 0

    def lines(prefix: str, values: Iterable[float], at: list[str]) -> str:
        return "".join(chain.from_iterable(zip(repeat(prefix), map(repr, values), at)))

    def alive(p: PodHistory) -> tuple[list[int], list[float]]:
        idx = [i for i, t in enumerate(times) if p.start <= t < p.end]
        return idx, [times[i] for i in idx]

    out.write("# TYPE container_cpu_usage_seconds_total counter\n")
    for p in pods:
        idx, ts = alive(p)
        if not idx:
            continue
        cpu = [p.cpu(t) for t in ts]
        # The counter at each scrape: what ran since the previous one, added in time order.
        steps = [c * (t - prev) for c, prev, t in zip(cpu[:-1], ts[:-1], ts[1:], strict=True)]
        labels = f'namespace="{p.namespace}",pod="{p.pod}",container="{p.container}",node="{p.node}"'
        out.write(lines(f"container_cpu_usage_seconds_total{{{labels}}} ", accumulate(steps, initial=0.0),
                        [stamps[i] for i in idx]))
        node_cpu[p.node][idx] += cpu
        n += len(idx)
    for nd in nodes:
        # The root cgroup's counter integrates everything that ran on the node.
        total = accumulate((float(c) * scrape for c in node_cpu[nd][:-1]), initial=0.0)
        out.write(lines(f'container_cpu_usage_seconds_total{{id="/",node="{nd}"}} ', total, stamps))
        n += len(times)
    out.write("# TYPE container_memory_working_set_bytes gauge\n")
    for p in pods:
        idx, ts = alive(p)
        if not idx:
            continue
        mem = [p.memory(t) for t in ts]
        labels = f'namespace="{p.namespace}",pod="{p.pod}",container="{p.container}",node="{p.node}"'
        out.write(lines(f"container_memory_working_set_bytes{{{labels}}} ", mem, [stamps[i] for i in idx]))
        node_mem[p.node][idx] += mem
        n += len(idx)
    for nd in nodes:
        out.write(lines(f'container_memory_working_set_bytes{{id="/",node="{nd}"}} ', map(float, node_mem[nd]), stamps))
        n += len(times)
    out.write("# EOF\n")
    return n
