"""`kubesched tune`: an Optuna study over a TuneSpace, stored on disk, run in batches on an engine.

The study lives in `<out>/study.journal` (Optuna's journal file storage). Trials are asked in batches of a
fixed size (`sampler.batch`, not the number of workers): the whole batch is asked, run on the engine, and
told as results arrive; the next batch is asked only when the batch is done. Each ask uses a sampler seeded
from (sampler seed, trial number), so a trial's parameters depend only on the seed and the trials before
its batch — never on the engine, the number of workers, completion order, or whether the run was
interrupted. Interrupting a run leaves the batch's unfinished trials RUNNING in the journal; the next run
asks the rest of that batch, runs the unfinished trials with the parameters they were given, and goes on.
(Only the journal's record order and the trials' timestamps follow completion order.)

Each trial runs the scenario over K seeds (scenario seed, seed + 1, …) and is scored on the mean and the
worst seed (kubesched.tune.objectives). A trial whose first seeds already break a worst-seed constraint
(an eviction loop, a pod pending too long) is pruned: its other seeds are not run and it is told PRUNED,
with its constraint violations, so samplers still learn that the region is infeasible. A trial whose
documents do not validate (say thresholds above targetThresholds) is told FAIL with the message.

The scenario's own variants run on the same seeds, once (cached in `<out>/variants.json`), for comparison.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubesched.api.hashing import stable_hash64
from kubesched.errors import InputError
from kubesched.report.tune import render_tune_report
from kubesched.sim.runner import check_variant, resolve_variants
from kubesched.sim.scenario import Scenario, load_scenario
from kubesched.tune.documents import from_variant, to_variant, write_documents
from kubesched.tune.engines import Engine, check_options, make_engine
from kubesched.tune.inputs import prepare
from kubesched.tune.objectives import aggregate, choose, objective_values, pareto_front, violations
from kubesched.tune.runs import RunTask
from kubesched.tune.space import SamplerSpec, TuneSpace, load_space

STUDY_FILE = "study.journal"
VARIANTS_FILE = "variants.json"
STUDY_NAME = "kubesched-tune"
CHOSEN = "tuned"

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True, slots=True)
class TuneOptions:
    trials: int | None = None
    seeds: int | None = None
    engine: str = "local"
    address: str | None = None
    workers: int | None = None
    sampler_seed: int | None = None


def _optuna() -> Any:
    try:
        import optuna
    except ImportError:
        raise InputError("kubesched tune needs Optuna: pip install 'kubesched[tune]'") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def make_sampler(spec: SamplerSpec, number: int) -> Any:
    """The sampler that asks trial `number`: seeded from the study's seed and the trial number."""
    optuna = _optuna()
    seed = stable_hash64("kubesched-tune", spec.seed, number) % (2**32)
    if spec.name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=spec.population)
    if spec.name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=spec.startup_trials, multivariate=True)


class TuneStudy:
    """The Optuna study of a tune run, in `<out>/study.journal`."""

    def __init__(self, out: Path, space: TuneSpace, fingerprint: dict[str, Any]) -> None:
        optuna = _optuna()
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        self.optuna = optuna
        self.space = space
        self.storage = JournalStorage(JournalFileBackend(str(out / STUDY_FILE)))
        directions = [o.direction for o in space.objectives]
        self.study = optuna.create_study(storage=self.storage, study_name=STUDY_NAME, directions=directions,
                                         load_if_exists=True)
        have = self.study.user_attrs.get("fingerprint")
        if have is None:
            self.study.set_user_attr("fingerprint", fingerprint)
        elif have != fingerprint:
            diff = sorted(k for k in fingerprint if have.get(k) != fingerprint[k])
            raise InputError(f"{out / STUDY_FILE} holds a study of other inputs (different {', '.join(diff)}); "
                             f"give another --out or remove it", field="--out")
        self._study_id = self.storage.get_study_id_from_name(STUDY_NAME)
        self.distributions = {p.name: p.distribution() for p in space.parameters}

    def trials(self) -> list[Any]:
        return sorted(self.study.get_trials(deepcopy=False), key=lambda t: t.number)

    def handle(self, number: int) -> Any:
        """A live Trial for a trial of the storage (to set constraints and attributes before telling it)."""
        tid = self.storage.get_trial_id_from_study_id_trial_number(self._study_id, number)
        return self.optuna.trial.Trial(self.study, tid)

    def next_batch(self, total: int) -> list[Any]:
        """Ask the current batch (finishing an interrupted one first); its trials still to run."""
        state = self.optuna.trial.TrialState
        batch = self.space.sampler.batch
        trials = self.trials()
        n = len(trials)
        open_ = [t for t in trials if t.state in (state.RUNNING, state.WAITING)]
        if not open_:
            if n >= total:
                return []
            end = min((n // batch + 1) * batch, total)
        else:
            lo = min(t.number for t in open_)
            end = max(n, min((lo // batch + 1) * batch, total))
        while n < end:
            self.study.sampler = make_sampler(self.space.sampler, n)
            self.study.ask(fixed_distributions=self.distributions)
            n += 1
        todo = []
        for t in self.trials():
            if t.state != state.RUNNING:
                continue
            if set(t.params) != set(self.distributions):
                # Interrupted while being asked: it has no complete set of parameters to run.
                self.study.tell(t.number, state=state.FAIL)
                continue
            todo.append(t)
        return todo

    def tell(self, number: int, result: dict[str, Any]) -> None:
        space = self.space
        state = self.optuna.trial.TrialState
        trial = self.handle(number)
        if result["error"]:
            trial.set_user_attr("error", result["error"])
            self.study.tell(number, state=state.FAIL)
            return
        scores = aggregate(result["summaries"], space.objectives, space.constraints)
        trial.set_user_attr("scores", {k: _finite(v) for k, v in scores.items()})
        trial.set_user_attr("seedsRun", len(result["summaries"]))
        for c, v in zip(space.constraints, violations(scores, space.constraints), strict=True):
            trial.set_constraint(c.key, v)
        if result["pruned"]:
            trial.set_user_attr("pruned", result["pruned"])
            self.study.tell(number, state=state.PRUNED)
        else:
            self.study.tell(number, objective_values(scores, space.objectives))


def _finite(v: float) -> float | None:
    return None if math.isnan(v) else v


def _trial_task(space: TuneSpace, scenario: str, number: int, params: dict[str, Any], seeds: tuple[int, ...]) -> RunTask:
    stop = tuple(c for c in space.constraints if c.score == "worst")
    return RunTask(f"trial-{number}", scenario, f"trial-{number}", space.apply(params), seeds, stop)


def _variant_tasks(s: Scenario, seeds: tuple[int, ...]) -> list[tuple[RunTask, str]]:
    """The scenario's own variants (or its documents alone, as `default`), with their descriptions."""
    return [(RunTask(f"variant-{v.name}", s.name, v.name, from_variant(v, s), seeds), v.description)
            for v in resolve_variants(s, [])]


# ---------------------------------------------------------------- the command's work


def tune(scenario_path: str, space_path: str, out_dir: str, opts: TuneOptions,
         on_progress: Progress | None = None) -> dict[str, Any]:
    """Run (or resume) the study; write the results; return the summary document."""
    check_options(opts.engine, opts.address)
    s = load_scenario(scenario_path)
    space = load_space(space_path, s)
    if opts.sampler_seed is not None:
        space.sampler.seed = opts.sampler_seed
    total = opts.trials or space.trials
    seeds = tuple(s.seed + i for i in range(opts.seeds or space.seeds))
    names = [v.name for v in resolve_variants(s, [])]
    for c in space.constraints:
        if c.variant is not None and c.variant not in names:
            raise InputError(f"the scenario has no variant {c.variant!r} (it has: {', '.join(names)})", file=space.path,
                             field=c.where)
    try:
        check_variant(s, to_variant("base", space.base, space.path))
    except InputError as e:
        raise InputError(e.message + " (the space's base documents)", file=e.file, obj=e.obj, field=e.field) from None
    out = Path(out_dir)
    inputs = {s.name: prepare(s, ship=opts.engine == "ray")}
    fingerprint = {"scenario": inputs[s.name].digest, "space": space.digest(), "seeds": list(seeds),
                   "samplerSeed": space.sampler.seed}
    if (out / STUDY_FILE).exists():
        TuneStudy(out, space, fingerprint)  # refuses another study's folder before an engine starts
    engine = make_engine(opts.engine, inputs, opts.workers, opts.address)
    try:
        out.mkdir(parents=True, exist_ok=True)
        study = TuneStudy(out, space, fingerprint)
        variants = _run_variants(engine, s, seeds, out, fingerprint, space, on_progress, total)
        try:
            scores = {v["name"]: v["scores"] for v in variants}
            space.constraints = [c.resolved(scores) for c in space.constraints]
        except InputError as e:
            raise e.located(file=space.path) from None
        for v in variants:
            v["violations"] = violations({k: math.nan if x is None else x for k, x in v["scores"].items()},
                                         space.constraints)
        _run_trials(engine, study, s, space, seeds, total, on_progress, len(variants))
    finally:
        engine.close()
    return _results(s, space, study, variants, seeds, out, engine)


def _run_variants(engine: Engine, s: Scenario, seeds: tuple[int, ...], out: Path, fingerprint: dict[str, Any],
                  space: TuneSpace, on_progress: Progress | None, total: int) -> list[dict[str, Any]]:
    cache = out / VARIANTS_FILE
    if cache.exists():
        doc = json.loads(cache.read_text())
        if doc.get("fingerprint") == fingerprint:
            return list(doc["variants"])
    pairs = _variant_tasks(s, seeds)
    by_key: dict[str, dict[str, Any]] = {}
    steps = len(pairs) + total
    for r in engine.run([t for t, _ in pairs]):
        by_key[r["key"]] = r
        if on_progress is not None:
            on_progress(len(by_key), steps, "variants")
    rows = []
    for t, description in pairs:
        r = by_key[t.key]
        if r["error"]:
            raise InputError(f"{r['error']} (variant {t.variant})")
        scores = aggregate(r["summaries"], space.objectives, space.constraints)
        rows.append({"name": t.variant, "description": description, "scores": {k: _finite(x) for k, x in scores.items()}})
    tmp = cache.with_suffix(".tmp")
    tmp.write_text(json.dumps({"fingerprint": fingerprint, "variants": rows}, indent=1))
    tmp.replace(cache)
    return rows


def _run_trials(engine: Engine, study: TuneStudy, s: Scenario, space: TuneSpace, seeds: tuple[int, ...], total: int,
                on_progress: Progress | None, offset: int) -> None:
    state = study.optuna.trial.TrialState
    steps = offset + total
    while True:
        todo = study.next_batch(total)
        if not todo:
            break
        tasks = []
        for t in todo:
            task = _trial_task(space, s.name, t.number, dict(t.params), seeds)
            try:
                check_variant(s, to_variant(task.variant, task.tree, space.path))
            except InputError as e:
                study.tell(t.number, {"error": e.render(), "summaries": [], "pruned": []})
                continue
            tasks.append(task)
        for r in engine.run(tasks):
            study.tell(int(r["key"].split("-", 1)[1]), r)
            if on_progress is not None:
                done = sum(1 for t in study.trials() if t.state not in (state.RUNNING, state.WAITING))
                on_progress(offset + done, steps, "trials")
    if on_progress is not None:
        on_progress(steps, steps, "trials")


def _results(s: Scenario, space: TuneSpace, study: TuneStudy, variants: list[dict[str, Any]], seeds: tuple[int, ...],
             out: Path, engine: Engine) -> dict[str, Any]:
    state = study.optuna.trial.TrialState
    rows = []
    for t in study.trials():
        scores = t.user_attrs.get("scores") or {}
        viol = [t.constraints.get(c.key, 0.0) for c in space.constraints] if scores else []
        rows.append({
            "number": t.number, "state": t.state.name, "params": space.labels(t.params) if t.params else {},
            "scores": scores, "values": list(t.values) if t.values is not None else None, "violations": viol,
            "feasible": t.state == state.COMPLETE and all(v <= 0 for v in viol), "seedsRun": t.user_attrs.get("seedsRun"),
            "pruned": t.user_attrs.get("pruned"), "error": t.user_attrs.get("error"),
        })
    feasible = [(r["number"], r["values"]) for r in rows if r["feasible"]]
    front = set(pareto_front(feasible, space.objectives))
    chosen = choose(feasible, space.objectives, space.choose)
    for r in rows:
        r["pareto"] = r["number"] in front
        r["chosen"] = r["number"] == chosen
    doc: dict[str, Any] = {
        "scenario": s.name, "space": space.name, "seeds": list(seeds), "engine": engine.name, "workers": engine.workers,
        "objectives": [{"metric": o.metric, "direction": o.direction, "score": o.score} for o in space.objectives],
        "constraints": [{"metric": c.metric, "bound": c.bound, "upper": c.upper, "score": c.score, "text": c.text()}
                        for c in space.constraints],
        "parameters": [p.name for p in space.parameters], "trials": rows, "pareto": sorted(front), "chosen": chosen,
        "variants": variants, "files": {},
    }
    if chosen is not None:
        row = next(r for r in rows if r["number"] == chosen)
        t = next(t for t in study.trials() if t.number == chosen)
        values = ", ".join(f"{k}={v}" for k, v in row["params"].items())
        desc = f"kubesched tune: trial {chosen} of {space.name} on {s.name} ({values})"
        doc["files"].update(write_documents(out, CHOSEN, space.apply(dict(t.params)), desc))
    _write_trials_csv(out / "trials.csv", doc, space)
    doc["files"]["trials"] = str(out / "trials.csv")
    (out / "report.html").write_text(render_tune_report(doc))
    doc["files"]["report"] = str(out / "report.html")
    tmp = out / "summary.json.tmp"
    tmp.write_text(json.dumps(doc, indent=1, default=str))
    tmp.replace(out / "summary.json")
    doc["files"]["summary"] = str(out / "summary.json")
    return doc


def _write_trials_csv(path: Path, doc: dict[str, Any], space: TuneSpace) -> None:
    keys = sorted({k for r in doc["trials"] for k in r["scores"]})
    header = ["number", "state", *[p.name for p in space.parameters], *keys, "feasible", "pareto", "chosen", "note"]
    with path.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        for r in doc["trials"]:
            note = r["error"] or "; ".join(r["pruned"] or [])
            w.writerow([r["number"], r["state"], *[r["params"].get(p.name, "") for p in space.parameters],
                        *[_fmt(r["scores"].get(k)) for k in keys], r["feasible"], r["pareto"], r["chosen"], note])


def _fmt(v: Any) -> str:
    return "" if v is None else f"{v:.6g}" if isinstance(v, float) else str(v)
