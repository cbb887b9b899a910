"""Results on disk for notebooks: CSV always, Parquet too when pyarrow is installed.

Per variant (`<out>/variants/<name>/`): `series.csv` (cluster series per record), `node_cpu.csv` and
`node_mem.csv` (utilisation per node, wide: one column per node), `evictions.csv`, `bindings.csv`,
`oom_kills.csv`, `events.jsonl`, `summary.json`, `loops.json`. Files are written in a fixed order with
fixed number formatting, so the same run gives the same bytes.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


def fmt(x: Any) -> str:
    """A number as text the same way every time (NaN as empty)."""
    if x is None:
        return ""
    if isinstance(x, (float, np.floating)):
        f = float(x)
        if math.isnan(f):
            return ""
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        return f"{f:.6g}"
    return str(x)


def write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        for r in rows:
            w.writerow([fmt(v) for v in r])


def have_pyarrow() -> bool:
    try:
        import pyarrow  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
    except ImportError:
        return False
    return True


def write_parquet(path: Path, columns: dict[str, Any]) -> None:
    import pyarrow as pa  # type: ignore[import-not-found,unused-ignore]
    import pyarrow.parquet as pq  # type: ignore[import-not-found,unused-ignore]

    table = pa.table({k: pa.array(v) for k, v in columns.items()})
    # No creation metadata that changes run to run.
    pq.write_table(table, path, compression="zstd", write_statistics=False)


def json_dump(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=False, default=_default) + "\n")


def _default(o: Any) -> Any:
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def write_variant(folder: Path, data: dict[str, Any], parquet: bool) -> list[str]:
    """Write one variant's results; returns the file names written."""
    folder.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    series: dict[str, np.ndarray] = data["series"]
    keys = list(series)
    n = len(series["t"])
    write_csv(folder / "series.csv", keys, [[series[k][i] for k in keys] for i in range(n)])
    written.append("series.csv")
    names: list[str] = data["node_names"]
    for which in ("node_cpu", "node_mem", "node_cpu_req"):
        m: np.ndarray = data[which]
        write_csv(folder / f"{which}.csv", ["t"] + names,
                  [[series["t"][i]] + [m[i, j] if j < m.shape[1] else None for j in range(len(names))]
                   for i in range(m.shape[0])])
        written.append(f"{which}.csv")
    ev = data["evictions"]
    write_csv(folder / "evictions.csv", ["t", "pod", "workload", "node", "component", "reason"],
              [[e["t"], e["pod"], e["workload"], e["node"], e["component"], e["reason"]] for e in ev])
    b = data["bindings"]
    write_csv(folder / "bindings.csv", ["t", "pod", "workload", "node", "created"],
              [[x["t"], x["pod"], x["workload"], x["node"], x["created"]] for x in b])
    o = data["oom_kills"]
    write_csv(folder / "oom_kills.csv", ["t", "pod", "workload", "node", "scope", "memory"],
              [[x["t"], x["pod"], x["workload"], x["node"], x["scope"], x["memory"]] for x in o])
    written += ["evictions.csv", "bindings.csv", "oom_kills.csv"]
    with (folder / "events.jsonl").open("w") as fh:
        for e in data["events"]:
            fh.write(json.dumps(e, sort_keys=False, default=_default) + "\n")
    written.append("events.jsonl")
    json_dump(folder / "summary.json", data["summary"])
    json_dump(folder / "loops.json", data["loops"])
    written += ["summary.json", "loops.json"]
    if parquet:
        write_parquet(folder / "series.parquet", {k: np.asarray(v, dtype=np.float64) for k, v in series.items()})
        t = np.asarray(series["t"], dtype=np.float64)
        cpu: np.ndarray = data["node_cpu"]
        mem: np.ndarray = data["node_mem"]
        rows_t = np.repeat(t, cpu.shape[1]) if cpu.size else np.zeros(0)
        node_col: Any = np.tile(np.array(names[: cpu.shape[1]], dtype=object), cpu.shape[0]) if cpu.size else []
        write_parquet(folder / "nodes.parquet", {"t": rows_t, "node": list(node_col),
                                                 "cpu": cpu.reshape(-1).astype(np.float64),
                                                 "memory": mem.reshape(-1).astype(np.float64)})
        write_parquet(folder / "evictions.parquet", {
            "t": [float(e["t"]) for e in ev], "pod": [e["pod"] for e in ev], "workload": [e["workload"] for e in ev],
            "node": [e["node"] for e in ev], "component": [e["component"] for e in ev],
            "reason": [e["reason"] for e in ev]})
        written += ["series.parquet", "nodes.parquet", "evictions.parquet"]
    return written


def write_gpu_allocation(folder: Path, gpu: dict[str, Any]) -> None:
    """`gpu_allocation.csv`: every sample (arrived and used milli-GPU, fragmentation), one per pod arrival."""
    frag = gpu.get("fragmentation") or []
    header = ["arrived_milli_gpu", "used_milli_gpu"] + (["fragmentation_milli_gpu"] if frag else [])
    rows = [[a, u] + ([frag[i]] if frag else []) for i, (a, u) in enumerate(zip(gpu["arrived"], gpu["used"],
                                                                                strict=True))]
    write_csv(folder / "gpu_allocation.csv", header, rows)
