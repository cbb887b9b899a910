"""What makes a policy good: objectives and constraints on the simulator's summary metrics, over seeds.

A trial runs the scenario once per seed. Each metric is then scored two ways: the **mean** over the seeds
and the **worst** seed (the highest value of a metric to minimise or bounded above, the lowest of one to
maximise or bounded below). Objectives use the mean unless they say `score: worst`; constraints use the
worst unless they say `score: mean`, so "no eviction loop" means on no seed at all.

Defaults: minimise hot-node minutes and evictions; no eviction-loop episode; no pod pending longer than
10 minutes (`pendingLongest`, which counts pods still pending at the end). A bound may be a number (a
duration for metrics in seconds) or `{variant: NAME}`: what that scenario variant scores on the same seeds
("no more evictions than the policy we run today").

The chosen point is picked among the feasible trials: `closestToIdeal` (default) normalises each objective
over the feasible Pareto front to [0, 1] and takes the point nearest the ideal corner; `{weights: {...}}`
minimises the weighted sum of the objectives (a maximised one counts negatively). Ties go to the lower
trial number.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesched.errors import InputError
from kubesched.sim.scenario import Obj
from kubesched.sim.units import parse_duration

# Numeric metrics of a run's summary (kubesched.sim.recorder.Recorder.summary, kubesched.sim.runner.collect
# and run_scenario); tests check this list against a real run.
SUMMARY_METRICS = (
    "cpuUtilisationMean", "cpuSpreadStdMean", "cpuSpreadStdFinal", "cpuRangeMean", "cpuMaxPeak", "memSpreadStdMean",
    "hotNodeMinutes", "pendingMax", "pendingMean", "pendingLongest", "podsCreated", "podsScheduled", "podsWaited",
    "failedSchedulingAttempts", "schedulingLatencyP50", "schedulingLatencyP95", "schedulingLatencyMax", "evictions",
    "deschedulerEvictions", "kubeletEvictions", "oomKills", "loopWorkloads", "loopEpisodes", "loopingEvictions",
    "deschedulerCycles",
)
# Metrics in seconds: their bounds may be written as durations.
SECONDS_METRICS = ("pendingLongest", "schedulingLatencyP50", "schedulingLatencyP95", "schedulingLatencyMax")

DEFAULT_OBJECTIVES = [{"metric": "hotNodeMinutes"}, {"metric": "evictions"}]
DEFAULT_CONSTRAINTS = [{"metric": "loopEpisodes", "max": 0}, {"metric": "pendingLongest", "max": "10m"}]


@dataclass(frozen=True, slots=True)
class Objective:
    metric: str
    direction: str = "minimize"  # minimize | maximize
    score: str = "mean"  # mean | worst

    @property
    def key(self) -> str:
        return f"{self.metric}.{self.score}"


@dataclass(frozen=True, slots=True)
class Constraint:
    metric: str
    bound: float  # NaN until a bound relative to a variant is resolved
    upper: bool  # True: value ≤ bound; False: value ≥ bound
    score: str = "worst"
    variant: str | None = None  # the bound is what this scenario variant scores on the same seeds
    where: str = ""

    @property
    def key(self) -> str:
        return f"{self.metric}.{self.score}"

    def text(self) -> str:
        of = f" (variant {self.variant})" if self.variant else ""
        return f"{self.metric} ({self.score}) {'≤' if self.upper else '≥'} {self.bound:g}{of}"

    def resolved(self, variant_scores: Mapping[str, Mapping[str, float | None]]) -> Constraint:
        """The constraint with a variant's score as its bound (unchanged when the bound is a number)."""
        if self.variant is None:
            return self
        v = variant_scores[self.variant].get(self.key)
        if v is None or math.isnan(v):
            raise InputError(f"variant {self.variant!r} has no {self.key} to bound by", field=self.where)
        return dataclasses.replace(self, bound=float(v))


@dataclass(frozen=True, slots=True)
class Choice:
    rule: str  # closestToIdeal | weights
    weights: tuple[tuple[str, float], ...] = ()


def _metric(o: Obj) -> str:
    m = o.string("metric", required=True)
    if m not in SUMMARY_METRICS:
        raise o.err("metric", f"unknown metric {m!r}; expected one of: {', '.join(SUMMARY_METRICS)}")
    return m


def _score(o: Obj, default: str) -> str:
    s = o.string("score", default)
    if s not in ("mean", "worst"):
        raise o.err("score", f"expected mean or worst, got {s!r}")
    return s


def parse_objectives(raw: Any, where: str, file: str | None) -> list[Objective]:
    items = DEFAULT_OBJECTIVES if raw is None else raw
    if not isinstance(items, list) or not items:
        raise InputError("expected a non-empty list of objectives", file=file, field=where)
    out: list[Objective] = []
    for i, item in enumerate(items):
        o = Obj(item, f"{where}[{i}]", ("metric", "direction", "score"), file)
        d = o.string("direction", "minimize")
        if d not in ("minimize", "maximize"):
            raise o.err("direction", f"expected minimize or maximize, got {d!r}")
        obj = Objective(_metric(o), d, _score(o, "mean"))
        if any(x.key == obj.key for x in out):
            raise o.err("metric", f"duplicate objective {obj.key}")
        out.append(obj)
    return out


def parse_constraints(raw: Any, where: str, file: str | None) -> list[Constraint]:
    items = DEFAULT_CONSTRAINTS if raw is None else raw
    if not isinstance(items, list):
        raise InputError("expected a list of constraints", file=file, field=where)
    out: list[Constraint] = []
    for i, item in enumerate(items):
        o = Obj(item, f"{where}[{i}]", ("metric", "max", "min", "score"), file)
        metric = _metric(o)
        keys = [k for k in ("max", "min") if o.has(k)]
        if len(keys) != 1:
            raise InputError("expected exactly one of max, min", file=file, field=f"{where}[{i}]")
        key = keys[0]
        v = o.raw[key]
        if isinstance(v, dict):
            vo = Obj(v, o.f(key), ("variant",), file)
            out.append(Constraint(metric, math.nan, key == "max", _score(o, "worst"), vo.string("variant", required=True),
                                  vo.f("variant")))
            continue
        if metric in SECONDS_METRICS and isinstance(v, str):
            try:
                bound = parse_duration(v, o.f(key))
            except InputError as e:
                raise e.located(file=file) from None
        elif isinstance(v, bool) or not isinstance(v, (int, float)):
            raise o.err(key, f"expected a number, got {v!r}")
        else:
            bound = float(v)
        out.append(Constraint(metric, bound, key == "max", _score(o, "worst")))
    return out


def parse_choice(raw: Any, where: str, file: str | None, objectives: list[Objective]) -> Choice:
    if raw is None or raw == "closestToIdeal":
        return Choice("closestToIdeal")
    o = Obj(raw, where, ("weights",), file)
    w = o.raw.get("weights")
    if not isinstance(w, dict) or not w:
        raise o.err("weights", "expected a map of objective metric to weight (or choose: closestToIdeal)")
    names = {ob.metric for ob in objectives}
    out = []
    for k, v in w.items():
        if k not in names:
            raise o.err(f"weights.{k}", f"not an objective; expected one of: {', '.join(sorted(names))}")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise o.err(f"weights.{k}", f"expected a non-negative number, got {v!r}")
        out.append((str(k), float(v)))
    return Choice("weights", tuple(out))


# ---------------------------------------------------------------- scoring a trial


def _value(summary: Mapping[str, Any], metric: str) -> float:
    v = summary.get(metric)
    return math.nan if v is None else float(v)


def aggregate(summaries: Sequence[Mapping[str, Any]], objectives: Sequence[Objective],
              constraints: Sequence[Constraint]) -> dict[str, float]:
    """Mean and worst of every metric the objectives and constraints use, over the seeds run so far."""
    out: dict[str, float] = {}
    wanted: list[tuple[str, bool]] = [(o.metric, o.direction == "minimize") for o in objectives]
    wanted += [(c.metric, c.upper) for c in constraints]
    for metric, high_is_bad in wanted:
        vals = [x for x in (_value(s, metric) for s in summaries) if not math.isnan(x)]
        out[f"{metric}.mean"] = sum(vals) / len(vals) if vals else math.nan
        worst = (max(vals) if high_is_bad else min(vals)) if vals else math.nan
        # A metric both minimised and bounded below keeps the worst for the objective's sense.
        out.setdefault(f"{metric}.worst", worst)
    return out


def objective_values(scores: Mapping[str, float], objectives: Sequence[Objective]) -> list[float]:
    """The objective vector (NaN, from a metric no seed produced, counts as the worst possible)."""
    out = []
    for o in objectives:
        v = scores.get(o.key, math.nan)
        if math.isnan(v):
            v = math.inf if o.direction == "minimize" else -math.inf
        out.append(v)
    return out


def violations(scores: Mapping[str, float], constraints: Sequence[Constraint]) -> list[float]:
    """Per constraint, how far it is broken (≤ 0: kept)."""
    out = []
    for c in constraints:
        v = scores.get(c.key, math.nan)
        if math.isnan(v):
            out.append(0.0)
        else:
            out.append(v - c.bound if c.upper else c.bound - v)
    return out


def broken_for_good(scores: Mapping[str, float], constraints: Sequence[Constraint]) -> list[str]:
    """Constraints judged on the worst seed that are broken already: more seeds cannot mend them."""
    return [c.text() for c, v in zip(constraints, violations(scores, constraints), strict=True)
            if c.score == "worst" and v > 0]


# ---------------------------------------------------------------- the front and the chosen point


def dominates(a: Sequence[float], b: Sequence[float], objectives: Sequence[Objective]) -> bool:
    better = False
    for x, y, o in zip(a, b, objectives, strict=True):
        if o.direction == "maximize":
            x, y = -x, -y
        if x > y:
            return False
        if x < y:
            better = True
    return better


def pareto_front(points: Sequence[tuple[int, Sequence[float]]], objectives: Sequence[Objective]) -> list[int]:
    """Numbers of the points no other point dominates (points: (number, objective vector))."""
    return [n for n, v in points if not any(dominates(w, v, objectives) for m, w in points if m != n)]


def choose(points: Sequence[tuple[int, Sequence[float]]], objectives: Sequence[Objective], rule: Choice) -> int | None:
    """The chosen point's number among feasible points, or None when there are none."""
    if not points:
        return None
    if rule.rule == "weights":
        w = dict(rule.weights)

        def weighted(p: tuple[int, Sequence[float]]) -> tuple[float, int]:
            total = 0.0
            for v, o in zip(p[1], objectives, strict=True):
                total += w.get(o.metric, 0.0) * (v if o.direction == "minimize" else -v)
            return total, p[0]

        return min(points, key=weighted)[0]
    front = set(pareto_front(points, objectives))
    cand = [p for p in points if p[0] in front]
    k = len(objectives)
    lo = [min(p[1][i] for p in cand) for i in range(k)]
    hi = [max(p[1][i] for p in cand) for i in range(k)]

    def distance(p: tuple[int, Sequence[float]]) -> tuple[float, int]:
        d = 0.0
        for i, o in enumerate(objectives):
            span = hi[i] - lo[i]
            if span <= 0 or math.isinf(span):
                continue
            x = (p[1][i] - lo[i]) / span
            d += (x if o.direction == "minimize" else 1.0 - x) ** 2
        return d, p[0]

    return min(cand, key=distance)[0]
