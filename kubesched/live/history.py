"""Usage history from Prometheus: each pod's CPU and memory over a window, as usage traces.

The default queries read the series a kube-prometheus (prometheus-operator) setup scrapes from every
kubelet's cAdvisor endpoint, which carry `namespace`, `pod`, `container` and `node` labels:

    cpu     sum by (namespace, pod, node) (rate(container_cpu_usage_seconds_total{container!="", container!="POD"}[5m]))
    memory  sum by (namespace, pod, node) (container_memory_working_set_bytes{container!="", container!="POD"})
    node cpu     sum by (node) (rate(container_cpu_usage_seconds_total{id="/"}[5m]))
    node memory  sum by (node) (container_memory_working_set_bytes{id="/"})

(`container=""` is the pod's own cgroup and `POD` the pause container: both would count usage twice; `id="/"` is
the node's root cgroup.) Each can be replaced (`--cpu-query` ...); a replacement must keep the labels: namespace
and pod (and node) for pod queries, node for node queries. CPU is in cores, memory in bytes.

Range queries are split in time so that no series has more than `max_points` points in one answer
(Prometheus refuses more than 11,000 points per series) and no answer holds more than `max_samples` points
in all (a chunk that Prometheus still finds too large is halved and asked again).

What is written, streamed chunk by chunk (Parquet with pyarrow installed, else CSV):
- usage: pod (`namespace/name`), node, t (seconds since the window start), cpu (cores), memory (bytes) —
  one row per pod and sampled step; a resource without a point at that step is empty;
- pods: one row per pod and node it ran on: namespace, pod, node, start (first step seen), end (the first
  step after the last one seen; empty when seen at the last step), owner (`Kind/name` when known);
- node usage: node, t, cpu, memory, for checking a replay against what the nodes themselves reported.
"""

from __future__ import annotations

import csv
import json
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kubesched.errors import InputError, RemoteError
from kubesched.live.client import RetryPolicy

CPU_QUERY = ('sum by (namespace, pod, node) (rate(container_cpu_usage_seconds_total{container!="", '
             'container!="POD"}[5m]))')
MEMORY_QUERY = 'sum by (namespace, pod, node) (container_memory_working_set_bytes{container!="", container!="POD"})'
NODE_CPU_QUERY = 'sum by (node) (rate(container_cpu_usage_seconds_total{id="/"}[5m]))'
NODE_MEMORY_QUERY = 'sum by (node) (container_memory_working_set_bytes{id="/"})'
MAX_POINTS = 11000  # Prometheus' limit of points per series in one range query
MAX_SAMPLES = 2_000_000  # points per answer we ask for at most (memory of one decoded answer)


@dataclass(frozen=True, slots=True)
class Queries:
    cpu: str = CPU_QUERY
    memory: str = MEMORY_QUERY
    node_cpu: str = NODE_CPU_QUERY
    node_memory: str = NODE_MEMORY_QUERY


class TooLarge(RemoteError):
    """Prometheus refused a range query as too large (points or samples)."""


@dataclass
class Prometheus:
    """Range queries against a Prometheus HTTP API, with retries on 429/5xx and connection errors."""

    url: str
    token: str | None = None
    retry: RetryPolicy = field(default_factory=lambda: RetryPolicy(timeout=120.0))
    sleep: Callable[[float], None] = time.sleep
    queries_made: int = 0

    def _post(self, path: str, form: dict[str, str]) -> Any:
        data = urllib.parse.urlencode(form).encode()
        host = urllib.parse.urlsplit(self.url).hostname or ""
        handlers: list[urllib.request.BaseHandler] = []
        if host in ("localhost", "::1") or host.startswith("127."):
            handlers.append(urllib.request.ProxyHandler({}))
        opener = urllib.request.build_opener(*handlers)
        last = ""
        for attempt in range(self.retry.attempts):
            req = urllib.request.Request(self.url.rstrip("/") + path, data=data, method="POST",
                                         headers={"Content-Type": "application/x-www-form-urlencoded",
                                                  "Accept": "application/json"})
            if self.token:
                req.add_header("Authorization", f"Bearer {self.token}")
            retry_after = None
            self.queries_made += 1
            try:
                with opener.open(req, timeout=self.retry.timeout) as resp:
                    return json.loads(resp.read())
            except urllib.error.HTTPError as e:
                body = e.read().decode("utf-8", "replace")
                try:
                    err = str(json.loads(body).get("error") or body)
                except ValueError:
                    err = body[:200]
                if "too many samples" in err or "exceeded maximum resolution" in err:
                    raise TooLarge(err) from None
                if e.code not in (429, 500, 502, 503, 504):
                    raise RemoteError(f"prometheus {self.url}: {path} answered {e.code}: {err}") from None
                last = f"{e.code}: {err}"
                ra = e.headers.get("Retry-After") if e.headers else None
                retry_after = float(ra) if ra and ra.replace(".", "", 1).isdigit() else None
            except (urllib.error.URLError, OSError) as e:
                last = str(getattr(e, "reason", e))
            except ValueError:
                raise RemoteError(f"prometheus {self.url}: {path} did not answer JSON") from None
            if attempt + 1 < self.retry.attempts:
                self.sleep(self.retry.delay(attempt, retry_after))
        raise RemoteError(f"prometheus {self.url}: cannot query {path} after {self.retry.attempts} attempts: {last}")

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[tuple[dict[str, str], np.ndarray,
                                                                                          np.ndarray]]:
        """(labels, timestamps, values) of every series of a range query."""
        doc = self._post("/api/v1/query_range", {"query": expr, "start": _num(start), "end": _num(end),
                                                  "step": _num(step)})
        if doc.get("status") != "success":
            raise RemoteError(f"prometheus {self.url}: query failed: {doc.get('error', doc)}")
        data = doc.get("data") or {}
        if data.get("resultType") != "matrix":
            raise InputError(f"the query must give a range vector per series, got {data.get('resultType')!r}: {expr}",
                             field="query")
        out = []
        for s in data.get("result") or []:
            vals = s.get("values") or []
            ts = np.fromiter((float(v[0]) for v in vals), dtype=np.float64, count=len(vals))
            ys = np.fromiter((float(v[1]) for v in vals), dtype=np.float64, count=len(vals))
            out.append(({str(k): str(v) for k, v in (s.get("metric") or {}).items()}, ts, ys))
        return out


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


# ---------------------------------------------------------------- writers


class TableWriter:
    """Rows streamed to Parquet (pyarrow) or CSV, one batch at a time."""

    def __init__(self, path: Path, columns: list[tuple[str, str]], parquet: bool) -> None:
        self.path = path
        self.columns = columns
        self.parquet = parquet
        self.rows = 0
        self._writer: Any = None
        self._fh: Any = None
        if parquet:
            import pyarrow as pa  # type: ignore[import-not-found,unused-ignore]
            import pyarrow.parquet as pq  # type: ignore[import-not-found,unused-ignore]

            types = {"string": pa.string(), "int": pa.int64(), "float": pa.float64()}
            self._pa = pa
            self._schema = pa.schema([(n, types[t]) for n, t in columns])
            self._writer = pq.ParquetWriter(str(path), self._schema, compression="zstd")
        else:
            self._fh = path.open("w", newline="")
            self._csv = csv.writer(self._fh)
            self._csv.writerow([n for n, _ in columns])

    def write(self, batch: dict[str, Any]) -> None:
        n = len(next(iter(batch.values()))) if batch else 0
        if n == 0:
            return
        self.rows += n
        if self.parquet:
            arrays = []
            for name, kind in self.columns:
                col = batch[name]
                if kind == "float":
                    arrays.append(self._pa.array(np.asarray(col, dtype=np.float64), from_pandas=True))
                elif kind == "int":
                    arrays.append(self._pa.array(np.asarray(col, dtype=np.int64)))
                else:
                    arrays.append(self._pa.array(list(col), type=self._pa.string()))
            self._writer.write_table(self._pa.Table.from_arrays(arrays, schema=self._schema))
            return
        cols = [batch[name] for name, _ in self.columns]
        kinds = [k for _, k in self.columns]
        for row in zip(*cols, strict=True):
            self._csv.writerow([_cell(v, k) for v, k in zip(row, kinds, strict=True)])

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._fh is not None:
            self._fh.close()


def _cell(v: Any, kind: str) -> Any:
    if kind == "float":
        f = float(v)
        return "" if math.isnan(f) else repr(f)
    if kind == "int":
        return int(v)
    return "" if v is None else v


def parquet_available() -> bool:
    try:
        import pyarrow.parquet  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
    except ImportError:
        return False
    return True


# ---------------------------------------------------------------- fetching


def time_chunks(start: float, end: float, step: float, points: int) -> Iterator[tuple[float, float]]:
    """[start, end] on the step grid in pieces of at most `points` points (both ends included)."""
    n = int(round((end - start) / step)) + 1
    i = 0
    while i < n:
        j = min(i + points, n)
        yield start + i * step, start + (j - 1) * step
        i = j


@dataclass
class Lifetime:
    first: int
    last: int


@dataclass
class HistoryResult:
    start: float
    end: float
    step: float
    points: int
    pods_with_usage: set[str] = field(default_factory=set)  # namespace/name
    lifetimes: dict[tuple[str, str, str], Lifetime] = field(default_factory=dict)  # (ns, pod, node)
    nodes_with_usage: set[str] = field(default_factory=set)
    usage_rows: int = 0
    node_rows: int = 0
    queries: int = 0
    chunks: int = 0


class History:
    """Fetches pod and node usage over [start, end] and streams it to the writers."""

    def __init__(self, prom: Prometheus, queries: Queries, start: float, end: float, step: float, *,
                 max_points: int = MAX_POINTS, max_samples: int = MAX_SAMPLES,
                 progress: Callable[[int, int], None] | None = None) -> None:
        if step <= 0:
            raise InputError(f"expected a positive step, got {step:g}s", field="--step")
        self.prom = prom
        self.q = queries
        self.start, self.end, self.step = start, end, step
        self.points = int(round((end - start) / step)) + 1
        self.max_points = max(1, min(max_points, MAX_POINTS))
        self.max_samples = max_samples
        self.progress = progress
        self.result = HistoryResult(start, end, step, self.points)

    def _index(self, ts: np.ndarray) -> np.ndarray:
        return np.rint((ts - self.start) / self.step).astype(np.int64)

    def _ranged(self, expr: str, s: float, e: float) -> list[tuple[dict[str, str], np.ndarray, np.ndarray]]:
        """One range query; a chunk Prometheus refuses as too large is asked for in halves."""
        try:
            return self.prom.query_range(expr, s, e, self.step)
        except TooLarge:
            n = int(round((e - s) / self.step)) + 1
            if n <= 1:
                raise
            mid = s + (n // 2 - 1) * self.step
            return self._ranged(expr, s, mid) + self._ranged(expr, mid + self.step, e)

    def fetch_pods(self, writer: TableWriter) -> None:
        """Pod CPU and memory, chunk by chunk, into `writer` (pod, node, t, cpu, memory)."""
        # A short first chunk counts the series; the next ones are sized by it (bounded answers and memory).
        points = min(self.max_points, 60)
        done = 0
        sized = False
        while done < self.points:
            n = min(points, self.points - done)
            s = self.start + done * self.step
            e = s + (n - 1) * self.step
            cpu = self._ranged(self.q.cpu, s, e)
            mem = self._ranged(self.q.memory, s, e)
            self.result.chunks += 1
            self._write_pods(writer, cpu, mem)
            done += n
            if self.progress is not None:
                self.progress(done, self.points)
            if not sized:
                sized = True
                series = max(len(cpu), len(mem), 1)
                points = max(1, min(self.max_points, self.max_samples // series))
        self.result.queries = self.prom.queries_made

    def _write_pods(self, writer: TableWriter, cpu: list[Any], mem: list[Any]) -> None:
        merged: dict[tuple[str, str, str], dict[int, list[float]]] = {}
        for which, result in ((0, cpu), (1, mem)):
            for labels, ts, ys in result:
                ns, pod, node = labels.get("namespace", ""), labels.get("pod", ""), labels.get("node", "")
                if not pod:
                    continue
                slot = merged.setdefault((ns, pod, node), {})
                for i, y in zip(self._index(ts).tolist(), ys.tolist(), strict=True):
                    slot.setdefault(i, [math.nan, math.nan])[which] = y
        pods: list[str] = []
        nodes: list[str] = []
        t: list[int] = []
        c: list[float] = []
        m: list[float] = []
        for (ns, pod, node), slot in sorted(merged.items()):
            key = f"{ns}/{pod}"
            idx = sorted(slot)
            life = self.result.lifetimes.get((ns, pod, node))
            if life is None:
                self.result.lifetimes[(ns, pod, node)] = Lifetime(idx[0], idx[-1])
            else:
                life.first, life.last = min(life.first, idx[0]), max(life.last, idx[-1])
            self.result.pods_with_usage.add(key)
            for i in idx:
                pods.append(key)
                nodes.append(node)
                t.append(int(round(i * self.step)))
                c.append(slot[i][0])
                m.append(slot[i][1])
        writer.write({"pod": pods, "node": nodes, "t": t, "cpu": c, "memory": m})
        self.result.usage_rows = writer.rows

    def fetch_nodes(self, writer: TableWriter) -> None:
        """Node CPU and memory over the window into `writer` (node, t, cpu, memory)."""
        for s, e in time_chunks(self.start, self.end, self.step, self.max_points):
            merged: dict[str, dict[int, list[float]]] = {}
            for which, expr in ((0, self.q.node_cpu), (1, self.q.node_memory)):
                for labels, ts, ys in self._ranged(expr, s, e):
                    node = labels.get("node", "")
                    if not node:
                        continue
                    slot = merged.setdefault(node, {})
                    for i, y in zip(self._index(ts).tolist(), ys.tolist(), strict=True):
                        slot.setdefault(i, [math.nan, math.nan])[which] = y
            batch: dict[str, list[Any]] = {"node": [], "t": [], "cpu": [], "memory": []}
            for node, slot in sorted(merged.items()):
                self.result.nodes_with_usage.add(node)
                for i in sorted(slot):
                    batch["node"].append(node)
                    batch["t"].append(int(round(i * self.step)))
                    batch["cpu"].append(slot[i][0])
                    batch["memory"].append(slot[i][1])
            writer.write(batch)
        self.result.node_rows = writer.rows
        self.result.queries = self.prom.queries_made
