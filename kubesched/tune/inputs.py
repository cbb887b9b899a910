"""Scenario inputs as one value a worker can receive: the parsed scenario, and the data files it reads.

A scenario is parsed and validated once, by the driver. The files the simulator reads while it runs (the
cluster snapshot, the node table, pod traces, usage traces) are either left where they are (the local
engine: workers share the disk) or carried along as bytes (`ship=True`, the Ray engine: a worker on
another machine writes them once into a temporary folder and reads them there). The digest identifies the
inputs by content — the scenario as parsed and the bytes of every file — never by where they are, so a
run's inputs hash is the same from any folder and on any machine.
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from kubesched.sim.scenario import Scenario

# Fields that only say where something was written or where a file is: not part of what a run computes.
_LOCATION_FIELDS = frozenset({"path", "base_dir", "where", "source", "file", "snapshot"})


@dataclass(frozen=True, slots=True)
class ScenarioInputs:
    scenario: Scenario
    digest: str
    files: dict[str, bytes] | None = None  # path as written in `scenario` → content, when shipped


def data_files(s: Scenario) -> list[str]:
    """The files a run of the scenario reads, in a fixed order."""
    out: list[str] = []
    if s.cluster.snapshot:
        out.append(s.cluster.snapshot)
    if s.cluster.node_table is not None:
        out.append(s.cluster.node_table.file)
    out += [t.file for t in s.pod_traces]
    out += [t.file for t in s.usage_traces]
    return out


def _canonical(x: Any) -> Any:
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _canonical(getattr(x, f.name)) for f in dataclasses.fields(x) if f.name not in _LOCATION_FIELDS}
    if isinstance(x, dict):
        return {str(k): _canonical(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_canonical(v) for v in x]
    if isinstance(x, (Fraction, Path)):
        return str(x)
    if isinstance(x, datetime):
        return x.isoformat()
    if isinstance(x, float):
        return repr(x)
    if x is None or isinstance(x, (str, int, bool)):
        return x
    return repr(x)


def scenario_digest(s: Scenario, contents: list[bytes]) -> str:
    h = hashlib.sha256()
    h.update(json.dumps(_canonical(s), sort_keys=True).encode())
    for c in contents:
        h.update(hashlib.sha256(c).digest())
    return h.hexdigest()


def prepare(s: Scenario, ship: bool) -> ScenarioInputs:
    """The inputs of a loaded scenario; with `ship`, its data files' bytes travel with it."""
    paths = data_files(s)
    contents = [Path(p).read_bytes() for p in paths]
    files = dict(zip(paths, contents, strict=True)) if ship else None
    return ScenarioInputs(s, scenario_digest(s, contents), files)


# ---------------------------------------------------------------- on a worker

_LOCAL: dict[str, Scenario] = {}
_TEMP: list[str] = []


def _cleanup() -> None:
    for d in _TEMP:
        shutil.rmtree(d, ignore_errors=True)


def scenario_of(inputs: ScenarioInputs) -> Scenario:
    """The scenario ready to run in this process: shipped files written once per process and inputs."""
    if inputs.files is None:
        return inputs.scenario
    s = _LOCAL.get(inputs.digest)
    if s is not None:
        return s
    folder = tempfile.mkdtemp(prefix=f"kubesched-{inputs.digest[:12]}-")
    if not _TEMP:
        atexit.register(_cleanup)
    _TEMP.append(folder)
    where: dict[str, str] = {}
    for i, (path, content) in enumerate(inputs.files.items()):
        local = Path(folder) / f"{i}-{Path(path).name}"
        local.write_bytes(content)
        where[path] = str(local)
    src = inputs.scenario
    cluster = dataclasses.replace(src.cluster)
    if cluster.snapshot:
        cluster.snapshot = where[cluster.snapshot]
    if cluster.node_table is not None:
        cluster.node_table = dataclasses.replace(cluster.node_table, file=where[cluster.node_table.file])
    s = dataclasses.replace(src, cluster=cluster,
                            pod_traces=[dataclasses.replace(t, file=where[t.file]) for t in src.pod_traces],
                            usage_traces=[dataclasses.replace(t, file=where[t.file]) for t in src.usage_traces])
    _LOCAL[inputs.digest] = s
    return s
