"""`kubesched simulate SCENARIO [--variant NAME=FILE ...] --out DIR`: the table, the progress bar, --json."""

from __future__ import annotations

import json
import sys
from typing import Any

from kubesched.sim.units import parse_duration


def simulate_command(scenario: str, variants: tuple[str, ...], out: str | None, as_json: bool, jobs: int | None,
                     seed: int | None, duration: str | None, html: bool, progress: bool | None) -> None:
    from kubesched.output import check_output_dir
    from kubesched.sim.runner import simulate

    if out is not None:
        check_output_dir(out)

    overrides: dict[str, Any] = {}
    if seed is not None:
        overrides["seed"] = seed
    if duration is not None:
        from kubesched.sim.scenario import check_duration

        overrides["duration"] = parse_duration(duration, "--duration", allow_zero=False)
        check_duration(overrides["duration"], "--duration", None)
    show = sys.stderr.isatty() if progress is None else progress
    if not show:
        doc = simulate(scenario, list(variants), out, jobs, overrides, html)
    else:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

        console = Console(stderr=True)
        with Progress(TextColumn("{task.description:<24}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(),
                      console=console, transient=False) as bar:
            tasks: dict[str, Any] = {}

            def on_progress(name: str, frac: float) -> None:
                if name not in tasks:
                    tasks[name] = bar.add_task(name, total=1.0)
                bar.update(tasks[name], completed=frac)

            doc = simulate(scenario, list(variants), out, jobs, overrides, html, on_progress)
    if as_json:
        from kubesched.diagnostics import current

        collector = current()
        if collector is not None and collector.messages:
            doc = {**doc, "warnings": list(collector.messages)}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        print_table(doc)


def print_table(doc: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from kubesched.sim.runner import comparison_rows

    console = Console() if sys.stdout.isatty() else Console(width=max(120, 40 + 14 * len(doc["variants"])))
    table = Table(title=f"{doc['scenario']}: {len(doc['variants'])} variant(s), seed {doc['seed']}, "
                        f"{doc['duration'] / 3600:g}h simulated")
    table.add_column("metric")
    for v in doc["variants"]:
        table.add_column(v["name"], justify="right")
    for row in comparison_rows(doc):
        table.add_row(*row)
    console.print(table)
    for v in doc["variants"]:
        for f in v["loops"][:3]:
            console.print(f"[yellow]eviction loop[/yellow] in {v['name']}: {f['workload']} — {f['episodes']} episode(s), "
                          f"{f['loopingEvictions']} looping eviction(s), placed back {f['placedBack']}×, "
                          f"evicted again {f['evictedAgain']}×")
    files = doc.get("files")
    if files:
        console.print(f"results: {files['summary']}, {files['comparison']}"
                      + (f", report: {files['report']}" if files.get("report") else ""))
