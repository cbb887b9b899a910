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

Memory grows with one chunk, not with the window or the cluster: an answer is decoded by msgspec with each
series' points left as raw JSON and read by NumPy into two float arrays (no Python object per point), the
CPU and memory answers are merged as NumPy columns (pods and nodes as codes into a list of their names),
and each chunk is written as its own Parquet row group / CSV rows before the next one is asked for.

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
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
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


class _Series(msgspec.Struct):
    metric: dict[str, str] = {}
    values: msgspec.Raw = msgspec.Raw(b"[]")  # [[t, "v"], ...], read by `parse_points`


class _Data(msgspec.Struct):
    resultType: str = ""  # noqa: N815 - Prometheus' field name
    result: msgspec.Raw = msgspec.Raw(b"[]")


class _Answer(msgspec.Struct):
    status: str = ""
    error: str = ""
    data: _Data = msgspec.field(default_factory=_Data)


_ANSWER = msgspec.json.Decoder(_Answer)
_MATRIX = msgspec.json.Decoder(list[_Series])
_PAIRS = msgspec.json.Decoder(list[tuple[float, str]])


def parse_points(raw: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(timestamps, values) of a series' `[[t, "v"], ...]`: stripped of brackets and quotes and read by NumPy
    in one call; values are strings in Prometheus' JSON ("NaN", "+Inf" included)."""
    n = raw.count(b'"') // 2
    if n == 0:
        return np.empty(0), np.empty(0)
    with warnings.catch_warnings():
        # A text NumPy cannot read to the end stops it short with a warning (NumPy < 2.3: the count below
        # catches it) or a ValueError; the JSON decoder then reads the points one by one.
        warnings.simplefilter("ignore")
        try:
            flat = np.fromstring(raw.translate(None, b'[]"'), sep=",")
        except ValueError:
            flat = np.empty(0)
    if flat.size == 2 * n:
        return flat[0::2].copy(), flat[1::2].copy()
    pairs = _PAIRS.decode(raw)
    return (np.fromiter((p[0] for p in pairs), dtype=np.float64, count=len(pairs)),
            np.fromiter((float(p[1]) for p in pairs), dtype=np.float64, count=len(pairs)))


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

    def _post(self, path: str, form: dict[str, str]) -> bytes:
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
                    return bytes(resp.read())
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
            if attempt + 1 < self.retry.attempts:
                self.sleep(self.retry.delay(attempt, retry_after))
        raise RemoteError(f"prometheus {self.url}: cannot query {path} after {self.retry.attempts} attempts: {last}")

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[tuple[dict[str, str], np.ndarray,
                                                                                          np.ndarray]]:
        """(labels, timestamps, values) of every series of a range query."""
        body = self._post("/api/v1/query_range", {"query": expr, "start": _num(start), "end": _num(end),
                                                   "step": _num(step)})
        try:
            doc = _ANSWER.decode(body)
            if doc.status != "success":
                raise RemoteError(f"prometheus {self.url}: query failed: {doc.error or body[:200]!r}")
            if doc.data.resultType != "matrix":
                raise InputError(f"the query must give a range vector per series, got {doc.data.resultType!r}: "
                                 f"{expr}", field="query")
            return [(s.metric, *parse_points(bytes(s.values))) for s in _MATRIX.decode(doc.data.result)]
        except ValueError as e:  # msgspec.DecodeError, or a value that is not a number
            raise RemoteError(f"prometheus {self.url}: unreadable /api/v1/query_range answer: {e}") from None


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


# ---------------------------------------------------------------- writers


@dataclass(frozen=True, slots=True)
class Strings:
    """A string column as codes into its distinct values: one Python string per pod or node, not per row."""

    codes: np.ndarray
    values: list[str]

    def __len__(self) -> int:
        return len(self.codes)

    def tolist(self) -> list[str]:
        v = self.values
        return [v[i] for i in self.codes.tolist()]


class TableWriter:
    """Rows streamed to Parquet (pyarrow) or CSV, one batch at a time (a Parquet row group each)."""

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
                elif isinstance(col, Strings):
                    values = self._pa.array(col.values, type=self._pa.string())
                    arrays.append(values.take(self._pa.array(col.codes)))
                else:
                    arrays.append(self._pa.array(list(col), type=self._pa.string()))
            self._writer.write_table(self._pa.Table.from_arrays(arrays, schema=self._schema))
            return
        cols = [batch[name].tolist() if isinstance(batch[name], (np.ndarray, Strings)) else batch[name]
                for name, _ in self.columns]
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
            series = max(len(cpu), len(mem), 1)
            self._write_pods(writer, cpu, mem)
            done += n
            if self.progress is not None:
                self.progress(done, self.points)
            if not sized:
                sized = True
                points = max(1, min(self.max_points, self.max_samples // series))
        self.result.queries = self.prom.queries_made

    def _merge(self, cpu: list[Any], mem: list[Any], key: Callable[[dict[str, str]], tuple[str, ...] | None]
               ) -> tuple[list[tuple[str, ...]], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """CPU and memory series of one chunk as rows sorted by (key, step): (the keys in sorted order, each
        row's key code into them, its step index, cpu, memory); a resource without a point there is NaN. Where
        two series have the same key, the later one's points win. Empties `cpu` and `mem` (their arrays are
        freed as they are merged)."""
        keys: dict[tuple[str, ...], int] = {}
        cols: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # per answer: key code, step index, value
        for result in (cpu, mem):
            codes: list[int] = []
            sizes: list[int] = []
            ts: list[np.ndarray] = []
            ys: list[np.ndarray] = []
            for labels, t, y in result:
                k = key(labels)
                if k is not None and len(t):
                    codes.append(keys.setdefault(k, len(keys)))
                    sizes.append(len(t))
                    ts.append(t)
                    ys.append(y)
            result.clear()
            cols.append((np.repeat(np.asarray(codes, dtype=np.int64), sizes),
                         self._index(np.concatenate(ts)) if ts else np.empty(0, np.int64),
                         np.concatenate(ys) if ys else np.empty(0)))
            del ts, ys
        ordered = sorted(keys)
        if not ordered:
            empty = np.empty(0)
            return ordered, empty.astype(np.int64), empty.astype(np.int64), empty, empty
        rank = np.empty(len(ordered), dtype=np.int64)
        rank[[keys[k] for k in ordered]] = np.arange(len(ordered))
        lo = min(int(idx.min()) for _, idx, _ in cols if len(idx))
        span = max(int(idx.max()) for _, idx, _ in cols if len(idx)) - lo + 1
        # One int64 per row orders by key, then step.
        flat = [(rank[codes] * span + (idx - lo), vals) for codes, idx, vals in cols]
        del cols
        rows = np.sort(np.concatenate([f for f, _ in flat]))
        rows = rows[np.r_[True, rows[1:] != rows[:-1]]]  # unique (np.unique hashes: slower on millions)
        values = []
        for f, vals in flat:
            v = np.full(len(rows), np.nan)
            v[np.searchsorted(rows, f)] = vals
            values.append(v)
        return ordered, rows // span, rows % span + lo, values[0], values[1]

    def _write_pods(self, writer: TableWriter, cpu: list[Any], mem: list[Any]) -> None:
        def key(labels: dict[str, str]) -> tuple[str, ...] | None:
            pod = labels.get("pod", "")
            return (labels.get("namespace", ""), pod, labels.get("node", "")) if pod else None

        ordered, codes, idx, c, m = self._merge(cpu, mem, key)
        if not ordered:
            return
        # Each key's first and last step in this chunk: the ends of its runs of rows.
        starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
        ends = np.r_[starts[1:], len(codes)] - 1
        for k, first, last in zip(codes[starts].tolist(), idx[starts].tolist(), idx[ends].tolist(), strict=True):
            ns, pod, node = ordered[k]
            life = self.result.lifetimes.get((ns, pod, node))
            if life is None:
                self.result.lifetimes[(ns, pod, node)] = Lifetime(first, last)
            else:
                life.first, life.last = min(life.first, first), max(life.last, last)
            self.result.pods_with_usage.add(f"{ns}/{pod}")
        writer.write({"pod": Strings(codes, [f"{ns}/{pod}" for ns, pod, _ in ordered]),
                      "node": Strings(codes, [node for _, _, node in ordered]),
                      "t": np.rint(idx * self.step).astype(np.int64), "cpu": c, "memory": m})
        self.result.usage_rows = writer.rows

    def fetch_nodes(self, writer: TableWriter) -> None:
        """Node CPU and memory over the window into `writer` (node, t, cpu, memory)."""
        for s, e in time_chunks(self.start, self.end, self.step, self.max_points):
            cpu = self._ranged(self.q.node_cpu, s, e)
            mem = self._ranged(self.q.node_memory, s, e)
            ordered, codes, idx, c, m = self._merge(cpu, mem, lambda labels: (labels["node"],) if labels.get("node")
                                                    else None)
            self.result.nodes_with_usage.update(k[0] for k in ordered)
            writer.write({"node": Strings(codes, [k[0] for k in ordered]),
                          "t": np.rint(idx * self.step).astype(np.int64), "cpu": c, "memory": m})
        self.result.node_rows = writer.rows
        self.result.queries = self.prom.queries_made
