"""The search space of `kubesched tune`: which values of which documents to try, and what makes a policy good.

A kubesched.io/v1alpha1 TuneSpace document:

```yaml
apiVersion: kubesched.io/v1alpha1
kind: TuneSpace
metadata: {name: hotspots}
spec:
  base: variants/lnu-usage.yaml      # the documents to start from (a Variant or bare documents); default: the scenario's
  parameters:
  - name: low                        # a path into the base's documents (kubesched.tune.documents)
    path: descheduler.policy.profiles[name=balance].pluginConfig[name=LowNodeUtilization].args.thresholds.cpu
    int: {low: 10, high: 60, step: 5}
  - name: high
    path: descheduler.policy.profiles[name=balance].pluginConfig[name=LowNodeUtilization].args.targetThresholds.cpu
    int: {low: 5, high: 40, step: 5}
    plus: low                        # written value = its own + low's: targetThresholds stay above thresholds
  - {name: interval, path: descheduler.interval, duration: {low: 1m, high: 15m, step: 1m}}
  - {name: target, path: ..., float: {low: 0.1, high: 1, log: true}}
  - {name: strategy, path: ..., choices: [LeastAllocated, MostAllocated]}
  objectives: [{metric: hotNodeMinutes}, {metric: evictions}]        # see kubesched.tune.objectives
  constraints: [{metric: loopEpisodes, max: 0}, {metric: pendingLongest, max: 10m}]
  choose: closestToIdeal             # or {weights: {hotNodeMinutes: 1, evictions: 10}}
  sampler: {name: tpe, seed: 0, batch: 8, startupTrials: 16}
  trials: 60
  seeds: 3
```

Every error names the file and the field (exit code 2); each parameter's bounds are applied to the base
once before anything runs, so a path that does not exist fails at once.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubesched.api.snapshot import read_documents
from kubesched.errors import InputError
from kubesched.sim.scenario import API_VERSION, Obj, Scenario, VariantSpec, load_variant_file
from kubesched.sim.units import format_duration, parse_duration
from kubesched.tune.documents import Step, from_variant, parse_path, set_path
from kubesched.tune.objectives import Choice, Constraint, Objective, parse_choice, parse_constraints, parse_objectives

KIND = "TuneSpace"
KINDS = ("int", "float", "duration", "choices")
SAMPLERS = ("tpe", "nsga2", "random")


@dataclass(frozen=True, slots=True)
class Parameter:
    """One value to tune: where it goes, its kind and range (or choices)."""

    name: str
    path: tuple[Step, ...]
    path_text: str
    kind: str  # int | float | duration | choices
    low: float = 0.0
    high: float = 0.0
    step: float | None = None
    log: bool = False
    choices: tuple[Any, ...] = ()
    plus: str | None = None
    where: str = ""

    def distribution(self) -> Any:
        """The Optuna distribution this parameter is sampled from."""
        import optuna

        if self.kind in ("int", "duration"):
            return optuna.distributions.IntDistribution(int(self.low), int(self.high), step=int(self.step or 1),
                                                        log=self.log)
        if self.kind == "float":
            return optuna.distributions.FloatDistribution(self.low, self.high, step=self.step, log=self.log)
        return optuna.distributions.CategoricalDistribution(list(range(len(self.choices))))

    def number(self, sampled: Any, numbers: dict[str, float]) -> float:
        """The number written for a sampled value: with `plus`, the other parameter's written number added."""
        return float(sampled) + (numbers[self.plus] if self.plus is not None else 0.0)

    def value(self, sampled: Any, numbers: dict[str, float]) -> Any:
        """What is written into the document for a sampled value (a choice by its index, `plus` added)."""
        if self.kind == "choices":
            return copy.deepcopy(self.choices[int(sampled)])
        v = self.number(sampled, numbers)
        if self.kind == "duration":
            return format_duration(v)
        return int(v) if self.kind == "int" else v

    def label(self, sampled: Any) -> Any:
        """The sampled value as people read it (a choice itself, a duration as text)."""
        if self.kind == "choices":
            c = self.choices[int(sampled)]
            return c if isinstance(c, (str, int, float, bool)) or c is None else json.dumps(c, sort_keys=True)
        if self.kind == "duration":
            return format_duration(float(sampled))
        return sampled


@dataclass(slots=True)
class SamplerSpec:
    name: str = "tpe"
    seed: int = 0
    batch: int = 8  # trials asked at once; fixed, so results do not depend on the number of workers
    startup_trials: int = 16
    population: int = 16


@dataclass(slots=True)
class TuneSpace:
    name: str
    path: str
    base_file: str | None
    base: dict[str, Any]  # the documents tree (kubesched.tune.documents)
    parameters: list[Parameter]
    objectives: list[Objective]
    constraints: list[Constraint]
    choose: Choice
    sampler: SamplerSpec
    trials: int = 40
    seeds: int = 3
    raw: dict[str, Any] = field(default_factory=dict)

    def digest(self) -> str:
        """What identifies the study: the space document and the base documents it starts from."""
        text = json.dumps({"space": self.raw, "base": self.base}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def apply(self, params: dict[str, Any]) -> dict[str, Any]:
        """The base tree with the sampled values written in."""
        tree = copy.deepcopy(self.base)
        numbers: dict[str, float] = {}
        for p in self.parameters:
            set_path(tree, p.path, p.value(params[p.name], numbers), p.where, self.path)
            if p.kind != "choices":
                numbers[p.name] = p.number(params[p.name], numbers)
        return tree

    def labels(self, params: dict[str, Any]) -> dict[str, Any]:
        return {p.name: p.label(params[p.name]) for p in self.parameters}


def _number(o: Obj, key: str, kind: str) -> float:
    v = o.raw.get(key)
    if kind == "duration":
        try:
            return parse_duration(v, o.f(key))
        except InputError as e:
            raise e.located(file=o.file) from None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind == "int" and not isinstance(v, int)):
        raise o.err(key, f"expected {'an integer' if kind == 'int' else 'a number'}, got {v!r}")
    return float(v)


def _parameter(raw: Any, where: str, file: str, kinds_of: dict[str, str]) -> Parameter:
    o = Obj(raw, where, ("name", "path", *KINDS, "plus"), file)
    name = o.string("name", required=True)
    if not name.replace("_", "").replace("-", "").isalnum():
        raise o.err("name", f"expected letters, digits, '-' or '_', got {name!r}")
    if name in kinds_of:
        raise o.err("name", f"duplicate parameter name {name!r}")
    steps = parse_path(o.required("path"), o.f("path"), file)
    kinds = [k for k in KINDS if k in o.raw]
    if len(kinds) != 1:
        raise InputError(f"expected exactly one of {', '.join(KINDS)}", file=file, field=where)
    kind = kinds[0]
    plus = o.string("plus") or None
    if plus is not None and kinds_of.get(plus, "choices") == "choices":
        raise o.err("plus", f"expected the name of an int, float or duration parameter listed before this one, "
                            f"got {plus!r}")
    if kind == "choices":
        choices = o.seq("choices")
        if not choices:
            raise o.err("choices", "expected a non-empty list")
        if plus is not None:
            raise o.err("plus", "plus applies to int, float and duration parameters")
        return Parameter(name, steps, raw["path"], kind, choices=tuple(choices), where=o.f("choices"))
    r = o.obj(kind, ("low", "high", "step", "log"))
    low, high = _number(r, "low", kind), _number(r, "high", kind)
    if high < low:
        raise r.err("high", f"expected high ≥ low ({r.raw.get('low')!r}), got {r.raw.get('high')!r}")
    step = _number(r, "step", kind) if r.has("step") else None
    if step is not None and step <= 0:
        raise r.err("step", "expected a positive step")
    log = r.boolean("log")
    if log and (low <= 0 or step is not None):
        raise r.err("log", "a log scale needs low > 0 and no step")
    if kind == "duration" and (low != int(low) or high != int(high) or (step is not None and step != int(step))):
        raise r.err("low", "durations are tuned in whole seconds")
    return Parameter(name, steps, raw["path"], kind, low, high, step, log, plus=plus, where=o.f(kind))


def _sampler(raw: Any, where: str, file: str) -> SamplerSpec:
    o = Obj(raw or {}, where, ("name", "seed", "batch", "startupTrials", "populationSize"), file)
    name = o.string("name", "tpe")
    if name not in SAMPLERS:
        raise o.err("name", f"expected one of {', '.join(SAMPLERS)}, got {name!r}")
    batch = o.integer("batch", 8, minimum=1)
    return SamplerSpec(name, o.integer("seed", 0, minimum=None), batch, o.integer("startupTrials", 16, minimum=0),
                       o.integer("populationSize", max(batch, 2), minimum=2))


def parse_space(doc: Any, path: str, scenario: Scenario) -> TuneSpace:
    file = path
    top = Obj(doc, "", ("apiVersion", "kind", "metadata", "spec"), file)
    if doc.get("apiVersion") != API_VERSION:
        raise top.err("apiVersion", f"expected {API_VERSION}, got {doc.get('apiVersion')!r}")
    if doc.get("kind") != KIND:
        raise top.err("kind", f"expected {KIND}, got {doc.get('kind')!r}")
    name = top.obj("metadata", ("name", "labels", "annotations")).string("name", Path(path).stem)
    spec = Obj(top.required("spec"), "spec", ("base", "parameters", "objectives", "constraints", "choose", "sampler",
                                              "trials", "seeds"), file)
    base_file = None
    if spec.has("base"):
        rel = spec.string("base")
        p = Path(rel) if Path(rel).is_absolute() else Path(path).resolve().parent / rel
        if not p.exists():
            raise spec.err("base", f"file {rel!r} does not exist")
        interval = scenario.descheduler.interval if scenario.descheduler else 300.0
        base_file = str(p)
        base = from_variant(load_variant_file("base", base_file, where=spec.f("base"), interval=interval), scenario)
    else:
        base = from_variant(VariantSpec(name="base"), scenario)
    params: list[Parameter] = []
    items = spec.seq("parameters")
    if not items:
        raise spec.err("parameters", "expected at least one parameter")
    for i, item in enumerate(items):
        params.append(_parameter(item, f"{spec.f('parameters')}[{i}]", file, {p.name: p.kind for p in params}))
    objectives = parse_objectives(spec.raw.get("objectives"), spec.f("objectives"), file)
    constraints = parse_constraints(spec.raw.get("constraints"), spec.f("constraints"), file)
    choose = parse_choice(spec.raw.get("choose"), spec.f("choose"), file, objectives)
    space = TuneSpace(name, path, base_file, base, params, objectives, constraints, choose,
                      _sampler(spec.raw.get("sampler"), spec.f("sampler"), file),
                      spec.integer("trials", 40, minimum=1), spec.integer("seeds", 3, minimum=1), raw=copy.deepcopy(doc))
    # Every path must exist in the base: write each parameter's low end once.
    low = {p.name: (0 if p.kind == "choices" else p.low if p.kind == "float" else int(p.low)) for p in params}
    space.apply(low)
    return space


def load_space(path: str, scenario: Scenario) -> TuneSpace:
    if not Path(path).exists():
        raise InputError(f"file {path!r} does not exist", field="--space")
    docs = read_documents(path)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise InputError(f"expected one {KIND} document, found {len(docs)} document(s)", file=path)
    return parse_space(docs[0], path, scenario)
