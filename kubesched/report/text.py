"""Readable tables for the terminal (rich): explain, schedule, capacity, and the simulation comparison.

Numbers print the way they are meant: counts as integers, shares as percentages, durations as durations;
lines are kept under 80 columns where a terminal may be that narrow.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from kubesched.sim.runner import TABLE_ROWS
from kubesched.sim.units import format_duration

console = Console()


def explain_table(data: dict[str, Any], max_node_columns: int = 8) -> None:
    """Two tables that stay readable in a narrow terminal: nodes with their verdicts and totals, then
    the score of every plugin (rows) on the best nodes (columns)."""
    console.print(f"[bold]pod[/bold] {data['pod']}  profile {data.get('profile')}  "
                  f"selected [bold green]{data.get('selected') or '-'}[/bold green]")
    rows = sorted(data["nodes"].items(), key=lambda kv: (kv[1]["total"] is None, -(kv[1]["total"] or 0), kv[0]))
    verdicts = Table(title="Filter")
    verdicts.add_column("node")
    verdicts.add_column("feasible")
    verdicts.add_column("total", justify="right")
    verdicts.add_column("rejected by")
    for node, entry in rows:
        fails = [f"{p}: {'; '.join(s['reasons']) or s['code']}" for p, s in entry["filters"].items()
                 if s["code"] not in ("Success", "Skip")]
        verdicts.add_row(node, "yes" if entry["feasible"] else "[red]no[/red]",
                         "" if entry["total"] is None else str(entry["total"]), "\n".join(fails) or "-")
    console.print(verdicts)
    # Only feasible nodes are scored, as upstream: a node that failed Filter is no candidate.
    scored = [node for node, entry in rows if entry["feasible"] and entry["scores"]]
    shown = scored[:max_node_columns]
    if not shown:
        return
    plugins: list[str] = []
    for node in shown:
        for name in data["nodes"][node]["scores"]:
            if name not in plugins:
                plugins.append(name)
    scores = Table(title="Score: normalized (raw), then × weight into the total")
    scores.add_column("plugin × weight")
    for node in shown:
        scores.add_column(node, justify="right")
    for name in plugins:
        cells = [f"{name} ×{data['weights'].get(name, 1)}"]
        for node in shown:
            sc = data["nodes"][node]["scores"].get(name)
            cells.append("" if sc is None else f"{sc['normalized']} ({sc['raw']})")
        scores.add_row(*cells)
    scores.add_row("[bold]total[/bold]", *[str(data["nodes"][n]["total"] or "") for n in shown])
    console.print(scores)
    if len(scored) > len(shown):
        console.print(f"(scores shown for the best {len(shown)} nodes; -o json has them all)")


def schedule_table(data: dict[str, Any]) -> None:
    table = Table()
    for col in ("pod", "node", "nominated", "preempted", "reason"):
        table.add_column(col)
    placed = 0
    for p in data["placements"]:
        placed += p["node"] is not None
        table.add_row(p["pod"], p["node"] or "[red]-[/red]", p.get("nominatedNode") or "",
                      ", ".join(p.get("preempted") or []), p.get("reason", ""))
    console.print(table)
    console.print(f"{placed}/{len(data['placements'])} pods placed")


def capacity_table(data: dict[str, Any]) -> None:
    table = Table()
    table.add_column("node")
    table.add_column("copies", justify="right")
    for node, n in sorted(data["perNode"].items()):
        table.add_row(node, str(n))
    console.print(table)
    console.print(f"[bold]{data['instances']}[/bold] more copies fit. Stopped: {data['reason']}")


# ---------------------------------------------------------------- simulate


def format_cell(value: Any, kind: str) -> str:
    """One cell of the comparison: kind is pct, int, minutes, duration or num."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if kind == "pct":
        return f"{100 * float(value):.1f}%"
    if kind in ("int", "minutes"):
        return f"{float(value):,.0f}"
    if kind == "duration":
        return format_duration(float(value))
    if isinstance(value, float):
        return f"{value:,.0f}" if value.is_integer() else f"{value:,.2f}"
    return str(value)


def comparison_rows(doc: dict[str, Any]) -> list[list[str]]:
    """The comparison table's rows: a label, then one cell per variant."""
    return [[label] + [format_cell(v["summary"].get(key), kind) for v in doc["variants"]]
            for key, label, kind in TABLE_ROWS]


def loop_lines(doc: dict[str, Any], per_variant: int = 3) -> list[str]:
    """Two short lines per eviction loop (at most `per_variant` per variant), each under 80 columns."""
    out = []
    for v in doc["variants"]:
        for f in v["loops"][:per_variant]:
            out.append(f"[yellow]eviction loop[/yellow] in {v['name']}: {f['workload']}")
            out.append(f"  {f['episodes']} episode(s), {f['loopingEvictions']} looping eviction(s): "
                       f"placed back {f['placedBack']}×, evicted again {f['evictedAgain']}×")
        if len(v["loops"]) > per_variant:
            out.append(f"  … and {len(v['loops']) - per_variant} more in {v['name']} (see the report)")
    return out


def simulation_table(doc: dict[str, Any]) -> None:
    """The side-by-side comparison of the variants, the loops found, and the files written."""
    out = Console() if sys.stdout.isatty() else Console(width=max(120, 40 + 16 * len(doc["variants"])))
    table = Table(title=f"{doc['scenario']}: {len(doc['variants'])} variant(s), seed {doc['seed']}, "
                        f"{format_duration(doc['duration'])} simulated")
    table.add_column("metric")
    for v in doc["variants"]:
        table.add_column(v["name"], justify="right")
    for row in comparison_rows(doc):
        table.add_row(*row)
    out.print(table)
    for line in loop_lines(doc):
        out.print(line, soft_wrap=True)
    files = doc.get("files")
    if files:
        out.print(f"results: {files['summary']}", soft_wrap=True)
        out.print(f"         {files['comparison']}", soft_wrap=True)
        if files.get("report"):
            out.print(f"report:  {files['report']}  (open it in a browser)", soft_wrap=True)
        if files.get("figures"):
            out.print(f"figures: {len(files['figures'])} file(s) in {files['figuresDir']}", soft_wrap=True)
    else:
        out.print("Nothing was written: add --out DIR for report.html and the CSV files.", soft_wrap=True)
