"""`kubesched tune` and `kubesched sweep`: the progress bar, the tables, --json."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as ProgressBar
from rich.table import Table

from kubesched.output import check_resumable_dir
from kubesched.report.tune import num
from kubesched.tune.study import TuneOptions, tune
from kubesched.tune.sweep import sweep

Progress = Callable[[int, int, str], None]


@contextmanager
def progress_bar(show: bool) -> Iterator[Progress | None]:
    if not show:
        yield None
        return
    with ProgressBar(TextColumn("{task.description:<10}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task("", total=None)

        def update(done: int, total: int, label: str) -> None:
            bar.update(task, completed=done, total=total, description=label)

        yield update


def _console() -> Console:
    return Console() if sys.stdout.isatty() else Console(width=160)


def tune_command(scenario: str, space: str, out: str, opts: TuneOptions, as_json: bool, progress: bool | None) -> None:
    check_resumable_dir(out)
    show = sys.stderr.isatty() if progress is None else progress
    with progress_bar(show) as cb:
        doc = tune(scenario, space, out, opts, cb)
    if as_json:
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
        return
    console = _console()
    states: dict[str, int] = {}
    for t in doc["trials"]:
        states[t["state"]] = states.get(t["state"], 0) + 1
    console.print(f"{doc['scenario']}: {len(doc['trials'])} trials "
                  f"({', '.join(f'{n} {s.lower()}' for s, n in sorted(states.items()))}) over seeds "
                  f"{', '.join(str(s) for s in doc['seeds'])}, engine {doc['engine']} ({doc['workers']} workers)")
    # Objectives on the mean and the worst seed; constraints on the score they are judged by.
    keys = [f"{o['metric']}.{score}" for o in doc["objectives"] for score in ("mean", "worst")]
    keys += [k for k in (f"{c['metric']}.{c['score']}" for c in doc["constraints"]) if k not in keys]
    table = Table(title="chosen point vs the scenario's variants (same seeds)")
    table.add_column("variant")
    for k in keys:
        table.add_column(k.replace(".", " "), justify="right")
    table.add_column("constraints met", justify="right")
    chosen = next((t for t in doc["trials"] if t["chosen"]), None)
    if chosen is not None:
        table.add_row(f"tuned (trial {chosen['number']})", *[num(chosen["scores"].get(k)) for k in keys], "yes")
    for v in doc["variants"]:
        table.add_row(v["name"], *[num(v["scores"].get(k)) for k in keys],
                      "yes" if all(x <= 0 for x in v["violations"]) else "no")
    console.print(table)
    front = Table(title="Pareto front")
    front.add_column("trial", justify="right")
    for p in doc["parameters"]:
        front.add_column(p, justify="right")
    for o in doc["objectives"]:
        front.add_column(f"{o['metric']} ({o['score']})", justify="right")
    for t in sorted((t for t in doc["trials"] if t["pareto"]), key=lambda t: t["values"]):
        front.add_row(("★ " if t["chosen"] else "") + str(t["number"]), *[str(t["params"][p]) for p in doc["parameters"]],
                      *[num(v) for v in t["values"]])
    console.print(front)
    files = doc["files"]
    if chosen is None:
        console.print("[red]no trial met every constraint[/red]: nothing chosen")
    else:
        console.print("chosen: trial " + str(chosen["number"]) + " — "
                      + ", ".join(f"{k}={v}" for k, v in chosen["params"].items()))
        console.print("documents: " + ", ".join(files[k] for k in ("descheduler", "scheduler", "kubelet", "variant")
                                                if k in files))
    console.print(f"report: {files['report']}, trials: {files['trials']}, summary: {files['summary']}")


def sweep_command(sweep_file: str, out: str, engine: str, address: str | None, workers: int | None, as_json: bool,
                  progress: bool | None) -> None:
    check_resumable_dir(out)
    show = sys.stderr.isatty() if progress is None else progress
    with progress_bar(show) as cb:
        doc = sweep(sweep_file, out, engine, address, workers, cb)
    if as_json:
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
        return
    console = _console()
    console.print(f"{doc['sweep']}: {doc['done']} of {doc['runs']} runs in the dataset, {doc['ran']} run now, "
                  f"{doc['skipped']} skipped (done before), {doc['errors']} with errors")
    table = Table(title="mean ± std per factor level")
    table.add_column("factor")
    table.add_column("level")
    table.add_column("runs", justify="right")
    ref = {r["level"]: r for r in doc.get("reference") or []}
    for m in doc["metrics"]:
        table.add_column(m, justify="right")
        if any(m in r for r in ref.values()):
            table.add_column(f"{m} ({doc['referenceLabel']})", justify="right")
    for e in doc["summary"]:
        cells = [e["factor"], str(e["level"]), str(e["runs"])]
        for m in doc["metrics"]:
            s = e[m]
            cells.append("-" if s["mean"] is None else f"{num(s['mean'])} ± {num(s['std'], 2)}")
            if any(m in r for r in ref.values()):
                r = ref.get(str(e["level"])) if e["factor"] == doc["referenceFactor"] else None
                cells.append(num(r[m]["mean"]) if r and m in r else "")
        table.add_row(*cells)
    console.print(table)
    files: dict[str, Any] = doc["files"]
    console.print(f"runs: {files['runs']}, summary: {files['summary']}, report: {files['report']}")
