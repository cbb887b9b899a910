"""One unit of work for an engine: a scenario under one variant's documents, over one or more seeds.

This is what a worker process or a Ray task executes. It is a pure function of the shipped inputs and the
task, so a result does not depend on which worker ran it or when. Seeds run in the order given; with
`stop_when`, the task stops after the first seed that already breaks one of those constraints on its worst
seed (more seeds cannot mend a worst-seed constraint): that is how `kubesched tune` prunes a trial.
Only summaries (and series reduced to numbers, `SeriesMetric`) travel back, never series or events.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubesched.diagnostics import collecting
from kubesched.errors import InputError
from kubesched.sim.runner import run_scenario
from kubesched.tune.documents import to_variant
from kubesched.tune.inputs import ScenarioInputs, scenario_of
from kubesched.tune.objectives import Constraint, aggregate, broken_for_good

REDUCERS = ("last", "mean", "max", "min", "at")


@dataclass(frozen=True, slots=True)
class SeriesMetric:
    """A number from one of a run's cluster series (kubesched.sim.recorder.Recorder.series), e.g. GPU
    allocation when the arrived demand reaches 100% of capacity: `series` where `at_series` first reaches
    `at_value`, interpolated (NaN if it never does)."""

    name: str
    series: str
    reduce: str = "last"
    at_series: str | None = None
    at_value: float = 0.0

    def value(self, series: Mapping[str, np.ndarray]) -> float:
        y = series.get(self.series)
        if y is None or len(y) == 0:
            return math.nan
        y = np.asarray(y, dtype=float)
        if self.reduce == "last":
            return float(y[-1])
        if self.reduce in ("mean", "max", "min"):
            ok = y[~np.isnan(y)]
            return float(getattr(np, self.reduce)(ok)) if ok.size else math.nan
        assert self.at_series is not None
        x = series.get(self.at_series)
        if x is None or len(x) == 0:
            return math.nan
        x = np.asarray(x, dtype=float)
        hit = np.nonzero(x >= self.at_value)[0]
        if hit.size == 0:
            return math.nan
        i = int(hit[0])
        if i == 0 or x[i] == x[i - 1]:
            return float(y[i])
        f = (self.at_value - x[i - 1]) / (x[i] - x[i - 1])
        return float(y[i - 1] + f * (y[i] - y[i - 1]))


@dataclass(frozen=True, slots=True)
class RunTask:
    key: str  # the caller's identifier of this unit
    scenario: str  # the scenario's name in the inputs
    variant: str
    tree: dict[str, Any]  # the variant's documents (kubesched.tune.documents)
    seeds: tuple[int, ...]
    stop_when: tuple[Constraint, ...] = ()
    series_metrics: tuple[SeriesMetric, ...] = ()


def execute(inputs: Mapping[str, ScenarioInputs], task: RunTask) -> dict[str, Any]:
    """Run the task; returns {key, summaries (one per seed run), seconds, pruned (constraints broken), error}."""
    # A worker's warnings go back with its result (the driver reports each once), not to its stderr.
    with collecting(echo=False) as seen:
        result = _execute(inputs, task)
    result["warnings"] = list(seen.messages)
    return result


def _execute(inputs: Mapping[str, ScenarioInputs], task: RunTask) -> dict[str, Any]:
    t0 = time.perf_counter()
    base = scenario_of(inputs[task.scenario])
    summaries: list[dict[str, Any]] = []
    pruned: list[str] = []
    try:
        variant = to_variant(task.variant, task.tree, f"variant {task.variant}")
        for seed in task.seeds:
            data = run_scenario(dataclasses.replace(base, seed=seed), variant)
            summary = dict(data["summary"])
            for m in task.series_metrics:
                summary[m.name] = m.value(data["series"])
            summaries.append(summary)
            if task.stop_when and len(summaries) < len(task.seeds):
                pruned = broken_for_good(aggregate(summaries, (), task.stop_when), task.stop_when)
                if pruned:
                    break
    except InputError as e:
        return {"key": task.key, "summaries": summaries, "seconds": time.perf_counter() - t0, "pruned": [],
                "error": e.render()}
    return {"key": task.key, "summaries": summaries, "seconds": time.perf_counter() - t0, "pruned": pruned,
            "error": None}
