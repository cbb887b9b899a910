"""The simulation's comparison in the terminal: one column per variant, the loops found, the files written.

Numbers print the way they are meant: counts as integers with separators, shares as percentages,
durations as durations; lines are kept under 80 columns where a terminal may be that narrow.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from kubesched.sim.runner import table_rows
from kubesched.sim.units import format_duration


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
            for key, label, kind in table_rows([v["summary"] for v in doc["variants"]])]


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
    """The side-by-side comparison of the variants, the loops found, and the files written.

    In a terminal too narrow for every variant, the variants are split over several tables (metric labels
    and numbers never wrap)."""
    out = Console() if sys.stdout.isatty() or "COLUMNS" in os.environ else \
        Console(width=max(120, 40 + 16 * len(doc["variants"])))
    rows = comparison_rows(doc)
    label_width = max(len(r[0]) for r in rows)
    widths = [max(len(v["name"]), *(len(r[i + 1]) for r in rows)) for i, v in enumerate(doc["variants"])]
    room = out.width - (label_width + 4)
    chunks: list[list[int]] = [[]]
    used = 0
    for i, w in enumerate(widths):
        if chunks[-1] and used + w + 3 > room:
            chunks.append([])
            used = 0
        chunks[-1].append(i)
        used += w + 3
    title = (f"{doc['scenario']}: {len(doc['variants'])} variant(s), seed {doc['seed']}, "
             f"{format_duration(doc['duration'])} simulated")
    for n, chunk in enumerate(chunks):
        part = f" ({chunk[0] + 1}–{chunk[-1] + 1} of {len(widths)})" if len(chunks) > 1 else ""
        table = Table(title=title + part if n == 0 else f"variants {chunk[0] + 1}–{chunk[-1] + 1} of {len(widths)}")
        table.add_column("metric", no_wrap=True)
        for i in chunk:
            table.add_column(doc["variants"][i]["name"], justify="right", no_wrap=True)
        for r in rows:
            table.add_row(r[0], *(r[i + 1] for i in chunk))
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
