"""Readable tables for the terminal (rich): explain, schedule, capacity.

Kept light to import: every one-shot command loads it (the simulation's table is in report/comparison.py).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

console = Console()


def explain_table(data: dict[str, Any], max_node_columns: int = 8) -> None:
    """Two tables that stay readable in a narrow terminal: nodes with their verdicts and totals, then
    the score of every plugin (rows) on the best nodes (columns)."""
    console.print(f"[bold]pod[/bold] {data['pod']}  profile {data.get('profile')}  "
                  f"selected [bold green]{data.get('selected') or '-'}[/bold green]")
    permit = data.get("permit")
    if permit:
        waits = "; ".join(f"{name} ({w['timeoutSeconds']:g}s): {w['reason']}" if w["reason"] else
                          f"{name} ({w['timeoutSeconds']:g}s)" for name, w in (permit.get("waitingOn") or {}).items())
        console.print(f"[bold]permit[/bold] {permit['code']}" + (f" by {permit['plugin']}" if permit.get("plugin") else "")
                      + (f": {'; '.join(permit['reasons'])}" if permit["reasons"] and not waits else "")
                      + (f" — waits for {waits}" if waits else ""))
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
