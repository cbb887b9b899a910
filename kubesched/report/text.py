"""Readable tables for the terminal (rich)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

console = Console()


def explain_table(data: dict[str, Any]) -> None:
    console.print(f"[bold]pod[/bold] {data['pod']}  profile {data.get('profile')}  "
                  f"selected [bold green]{data.get('selected') or '-'}[/bold green]")
    score_plugins: list[str] = []
    for entry in data["nodes"].values():
        for name in entry["scores"]:
            if name not in score_plugins:
                score_plugins.append(name)
    table = Table(show_lines=False)
    table.add_column("node")
    table.add_column("feasible")
    table.add_column("filter verdicts (failures)")
    for name in score_plugins:
        table.add_column(f"{name} ×{data['weights'].get(name, 1)}", justify="right")
    table.add_column("total", justify="right")
    rows = sorted(data["nodes"].items(), key=lambda kv: (-(kv[1]["total"] or -1), kv[0]))
    for node, entry in rows:
        fails = [f"{p}: {'; '.join(s['reasons']) or s['code']}" for p, s in entry["filters"].items()
                 if s["code"] not in ("Success", "Skip")]
        cells = [node, "yes" if entry["feasible"] else "[red]no[/red]", "\n".join(fails) or "-"]
        for name in score_plugins:
            s = entry["scores"].get(name)
            cells.append("" if s is None else f"{s['normalized']} ({s['raw']})")
        cells.append("" if entry["total"] is None else str(entry["total"]))
        table.add_row(*cells)
    console.print(table)
    console.print("scores show normalized (raw); the total sums normalized × weight")


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
