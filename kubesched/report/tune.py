"""HTML reports of `kubesched tune` and `kubesched sweep`: tables and Plotly charts in one file.

plotly.js is inlined once per page, so the file opens from disk with no network. Plot element ids are
fixed, so the same results give the same bytes.

- tune: the chosen point and the scenario's own variants side by side (mean and worst seed of every
  objective and constraint metric); the Pareto front as a table; the trials in objective space (feasible,
  infeasible, pruned, the front, the chosen point, the variants on the same seeds); each objective over
  the trials; the parameters of the feasible trials (parallel coordinates).
- sweep: the summary per factor and level (mean ± std over the other factors), the reference's published
  numbers beside ours where the sweep names one, and a box plot of every shown metric per factor.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

from kubesched.errors import InputError
from kubesched.sim.units import format_duration, parse_duration

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
           "#bcbd22"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1180px;color:#222}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f5f5f5}td:first-child,th:first-child{text-align:left}.best{font-weight:bold;background:#e8f5e9}
.bad{color:#b71c1c}.muted{color:#777}code{background:#f3f3f3;padding:1px 4px;border-radius:3px}
"""


def _go() -> Any:
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise RuntimeError("the tune and sweep reports need Plotly: pip install 'kubesched[tune]'") from None
    return go


def esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def num(v: Any, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and (math.isnan(v))):
        return "–"
    if isinstance(v, float):
        if math.isinf(v):
            return "∞" if v > 0 else "−∞"
        return f"{v:.{digits}g}"
    return esc(v)


def page(title: str, body: list[str]) -> str:
    from plotly.offline import get_plotlyjs

    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>" + esc(title) + "</title><style>" + _CSS
            + "</style><script>" + get_plotlyjs() + "</script></head><body>" + "\n".join(body) + "</body></html>")


def figure_html(fig: Any, div_id: str) -> str:
    fig.update_layout(template="plotly_white", margin={"l": 60, "r": 20, "t": 40, "b": 50}, height=460)
    return str(fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config={"displaylogo": False}))


def table(header: Sequence[str], rows: Sequence[Sequence[str]], raw: bool = False) -> str:
    out = ["<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{c if raw else esc(c)}</td>" for c in r) + "</tr>")
    return "".join(out) + "</table>"


# ---------------------------------------------------------------- tune


def _metric_columns(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(score key, label) for every metric the objectives and constraints use: mean and worst."""
    cols: list[tuple[str, str]] = []
    for m in [o["metric"] for o in doc["objectives"]] + [c["metric"] for c in doc["constraints"]]:
        for score in ("mean", "worst"):
            key = f"{m}.{score}"
            if key not in [c[0] for c in cols]:
                cols.append((key, f"{m} ({score})"))
    return cols


def render_tune_report(doc: dict[str, Any]) -> str:
    go = _go()
    trials = doc["trials"]
    objectives = doc["objectives"]
    body = [f"<h1>kubesched tune: {esc(doc['scenario'])} — {esc(doc['space'])}</h1>"]
    states: dict[str, int] = {}
    for t in trials:
        states[t["state"]] = states.get(t["state"], 0) + 1
    body.append(f"<p>{len(trials)} trials ({', '.join(f'{n} {s.lower()}' for s, n in sorted(states.items()))}), "
                f"each over seeds {esc(', '.join(str(s) for s in doc['seeds']))}; engine {esc(doc['engine'])}. "
                f"Objectives: {esc(', '.join(_objective_text(o) for o in objectives))}. "
                f"Constraints: {esc(', '.join(c['text'] for c in doc['constraints']) or 'none')}.</p>")
    cols = _metric_columns(doc)
    chosen = next((t for t in trials if t["chosen"]), None)

    body.append("<h2>The chosen point and the scenario's variants, on the same seeds</h2>")
    if chosen is None:
        body.append("<p class='bad'>No trial met every constraint: nothing is chosen. Widen the space, run more "
                    "trials, or relax the constraints.</p>")
    else:
        files = doc.get("files", {})
        body.append(f"<p>Trial {chosen['number']}: "
                    + esc(", ".join(f"{k} = {v}" for k, v in chosen["params"].items()))
                    + ". Documents: " + ", ".join(f"<code>{esc(files[k])}</code>" for k in
                                                  ("descheduler", "scheduler", "kubelet", "variant") if k in files)
                    + "</p>")
    rows_src = ([(f"tuned (trial {chosen['number']})", chosen["scores"], True)] if chosen else [])
    rows_src += [(v["name"], v["scores"], all(x <= 0 for x in v["violations"])) for v in doc["variants"]]
    best: dict[str, float] = {}
    for key, _ in cols:
        vals = [s.get(key) for _, s, _ in rows_src if s.get(key) is not None]
        if vals:
            best[key] = min(vals) if _minimised(doc, key) else max(vals)
    rows = []
    for name, scores, ok in rows_src:
        cells = [esc(name)]
        for key, _ in cols:
            v = scores.get(key)
            cls = " class='best'" if v is not None and v == best.get(key) else ""
            cells.append(f"<span{cls}>{num(v)}</span>")
        cells.append("yes" if ok else "<span class='bad'>no</span>")
        rows.append(cells)
    body.append(table(["variant", *[c[1] for c in cols], "meets constraints"], rows, raw=True))

    body.append("<h2>Pareto front (feasible trials)</h2>")
    front = sorted((t for t in trials if t["pareto"]), key=lambda t: t["values"] or [])
    params = doc["parameters"]
    body.append(table(["trial", *params, *[f"{o['metric']} ({o['score']})" for o in objectives], "chosen"],
                      [[str(t["number"]), *[str(t["params"].get(p, "")) for p in params],
                        *[num(v) for v in (t["values"] or [])], "★" if t["chosen"] else ""] for t in front]))

    body.append("<h2>Trials in objective space</h2>")
    body.append(figure_html(_objective_scatter(go, doc), "tune-objectives"))
    body.append("<h2>Objectives over the trials</h2>")
    body.append(figure_html(_history(go, doc), "tune-history"))
    feasible = [t for t in trials if t["feasible"]]
    if feasible and params:
        body.append("<h2>Parameters of the feasible trials</h2>")
        body.append(figure_html(_parcoords(go, doc, feasible), "tune-parameters"))
    return page(f"kubesched tune: {doc['scenario']}", body)


def _objective_text(o: dict[str, Any]) -> str:
    return f"{o['direction']} {o['metric']} ({o['score']})"


def _minimised(doc: dict[str, Any], key: str) -> bool:
    metric = key.rsplit(".", 1)[0]
    for o in doc["objectives"]:
        if o["metric"] == metric:
            return bool(o["direction"] == "minimize")
    for c in doc["constraints"]:
        if c["metric"] == metric:
            return bool(c["upper"])
    return True


def _objective_scatter(go: Any, doc: dict[str, Any]) -> Any:
    objectives = doc["objectives"]
    keys = [f"{o['metric']}.{o['score']}" for o in objectives]
    xk, yk = (keys[0], keys[1]) if len(keys) > 1 else ("number", keys[0])
    fig = go.Figure()

    def xy(t: dict[str, Any]) -> tuple[Any, Any]:
        x = t["number"] if xk == "number" else t["scores"].get(xk)
        return x, t["scores"].get(yk)

    groups = [("feasible", lambda t: t["feasible"] and not t["pareto"], "#9e9e9e", "circle"),
              ("Pareto front", lambda t: t["pareto"], PALETTE[0], "circle"),
              ("breaks a constraint", lambda t: t["state"] == "COMPLETE" and not t["feasible"], PALETTE[1], "x"),
              ("pruned (worst seed so far)", lambda t: t["state"] == "PRUNED", "#ff9800", "x")]
    for label, pred, colour, symbol in groups:
        sel = [t for t in doc["trials"] if pred(t) and t["scores"]]
        if not sel:
            continue
        pts = [xy(t) for t in sel]
        fig.add_trace(go.Scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="markers", name=label,
                                 marker={"color": colour, "symbol": symbol, "size": 8 if label != "feasible" else 6},
                                 text=[_hover(t) for t in sel], hoverinfo="text"))
    front = sorted((xy(t) for t in doc["trials"] if t["pareto"]), key=lambda p: (p[0], p[1]))
    if len(front) > 1 and xk != "number":
        fig.add_trace(go.Scatter(x=[p[0] for p in front], y=[p[1] for p in front], mode="lines", line={"shape": "hv",
                                 "color": PALETTE[0], "width": 1}, showlegend=False, hoverinfo="skip"))
    chosen = next((t for t in doc["trials"] if t["chosen"]), None)
    if chosen is not None:
        x, y = xy(chosen)
        fig.add_trace(go.Scatter(x=[x], y=[y], mode="markers", name=f"chosen (trial {chosen['number']})",
                                 marker={"color": "#ffd600", "symbol": "star", "size": 18, "line": {"width": 1}},
                                 text=[_hover(chosen)], hoverinfo="text"))
    if xk != "number":
        for i, v in enumerate(doc["variants"]):
            fig.add_trace(go.Scatter(x=[v["scores"].get(xk)], y=[v["scores"].get(yk)], mode="markers+text",
                                     name=f"variant {v['name']}", text=[v["name"]], textposition="top center",
                                     marker={"symbol": "diamond", "size": 11, "color": PALETTE[(i + 2) % len(PALETTE)]}))
    fig.update_xaxes(title=_axis(xk))
    fig.update_yaxes(title=_axis(yk))
    return fig


def _axis(key: str) -> str:
    if key == "number":
        return "trial"
    metric, score = key.rsplit(".", 1)
    return f"{metric} ({score} over seeds)"


def _hover(t: dict[str, Any]) -> str:
    lines = [f"trial {t['number']} ({t['state'].lower()})"]
    lines += [f"{k} = {v}" for k, v in t["params"].items()]
    lines += [f"{k} = {num(v)}" for k, v in sorted(t["scores"].items())]
    if t.get("pruned"):
        lines.append("pruned: " + "; ".join(t["pruned"]))
    return "<br>".join(esc(x) for x in lines)


def _history(go: Any, doc: dict[str, Any]) -> Any:
    fig = go.Figure()
    for i, o in enumerate(doc["objectives"]):
        key = f"{o['metric']}.{o['score']}"
        sel = [t for t in doc["trials"] if t["scores"].get(key) is not None]
        fig.add_trace(go.Scatter(x=[t["number"] for t in sel], y=[t["scores"][key] for t in sel], mode="markers",
                                 name=_axis(key), yaxis="y" if i == 0 else "y2",
                                 marker={"color": PALETTE[i % len(PALETTE)],
                                         "symbol": ["circle" if t["feasible"] else "x" for t in sel]}))
    fig.update_layout(xaxis={"title": "trial"}, yaxis={"title": _axis(f"{doc['objectives'][0]['metric']}."
                                                                       f"{doc['objectives'][0]['score']}")})
    if len(doc["objectives"]) > 1:
        o = doc["objectives"][1]
        fig.update_layout(yaxis2={"title": _axis(f"{o['metric']}.{o['score']}"), "overlaying": "y", "side": "right"})
    return fig


def _seconds(text: str) -> float | None:
    try:
        return parse_duration(text, "")
    except InputError:
        return None


def _parcoords(go: Any, doc: dict[str, Any], feasible: list[dict[str, Any]]) -> Any:
    o = doc["objectives"][0]
    key = f"{o['metric']}.{o['score']}"
    dims = []
    for p in doc["parameters"]:
        vals = [t["params"].get(p) for t in feasible]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            dims.append({"label": p, "values": vals})
        elif all(isinstance(v, str) and _seconds(v) is not None for v in vals):
            secs = [_seconds(str(v)) or 0.0 for v in vals]
            ticks = sorted(set(secs))
            dims.append({"label": p, "values": secs, "tickvals": ticks, "ticktext": [format_duration(x) for x in ticks]})
        else:
            levels = sorted({str(v) for v in vals})
            dims.append({"label": p, "values": [levels.index(str(v)) for v in vals],
                         "tickvals": list(range(len(levels))), "ticktext": levels})
    colour = [t["scores"].get(key) for t in feasible]
    dims.append({"label": _axis(key), "values": colour})
    return go.Figure(go.Parcoords(line={"color": colour, "colorscale": "Viridis_r", "showscale": True}, dimensions=dims))


# ---------------------------------------------------------------- sweep


def render_sweep_report(doc: dict[str, Any], rows: Sequence[dict[str, Any]]) -> str:
    go = _go()
    metrics = doc["metrics"]
    body = [f"<h1>kubesched sweep: {esc(doc['sweep'])}</h1>",
            f"<p>{doc['done']} of {doc['runs']} runs in the dataset ({doc['errors']} with errors); this invocation ran "
            f"{doc['ran']} and skipped {doc['skipped']} already done. Rows: <code>{esc(doc['files']['runs'])}</code> "
            f"(Parquet, one row per run).</p>"]
    body.append("<h2>Summary per factor (mean ± std over the other factors)</h2>")
    ref = {r["level"]: r for r in doc.get("reference") or []}
    ref_factor = doc.get("referenceFactor")
    header = ["factor", "level", "runs"]
    for m in metrics:
        header.append(m)
        if ref and any(m in r for r in ref.values()):
            header.append(f"{m}: {doc.get('referenceLabel')}")
    out_rows = []
    for e in doc["summary"]:
        cells = [esc(e["factor"]), esc(e["level"]), str(e["runs"])]
        for m in metrics:
            s = e[m]
            cells.append("–" if s["mean"] is None else f"{num(s['mean'])} ± {num(s['std'], 2)}")
            if ref and any(m in r for r in ref.values()):
                r = ref.get(str(e["level"])) if e["factor"] == ref_factor else None
                cells.append(f"{num(r[m]['mean'])} (n={r[m]['n']})" if r and m in r else "")
        out_rows.append(cells)
    # Reference levels we did not run (yet): shown so the published table is whole.
    ran_levels = {str(e["level"]) for e in doc["summary"] if e["factor"] == ref_factor}
    for level, r in ref.items():
        if level in ran_levels:
            continue
        cells = [esc(ref_factor), esc(level) + " <span class='muted'>(not run)</span>", "0"]
        for m in metrics:
            cells.append("")
            if any(m in x for x in ref.values()):
                cells.append(f"{num(r[m]['mean'])} (n={r[m]['n']})" if m in r else "")
        out_rows.append(cells)
    body.append(table(header, out_rows, raw=True))
    factors = [f for f in doc["factors"] if f != "seed"]
    ok = [r for r in rows if r.get("error") is None]
    n = 0
    for f in factors:
        col = f if f in ("scenario", "variant") else f"param.{f}"
        levels = sorted({str(r[col]) for r in ok})
        if len(levels) < 2:
            continue
        body.append(f"<h2>By {esc(f)}</h2>")
        for m in metrics:
            fig = go.Figure()
            for i, level in enumerate(levels):
                vals = [r[m] for r in ok if str(r[col]) == level and r.get(m) is not None]
                fig.add_trace(go.Box(y=vals, name=level, boxpoints="all", jitter=0.3, pointpos=0,
                                     marker={"color": PALETTE[i % len(PALETTE)]}))
                if f == ref_factor and level in ref and m in ref[level]:
                    fig.add_trace(go.Scatter(x=[level], y=[ref[level][m]["mean"]], mode="markers",
                                             name=f"{doc.get('referenceLabel')} ({level})", showlegend=i == 0,
                                             marker={"symbol": "line-ew-open", "size": 30, "color": "#000"}))
            fig.update_layout(title=f"{m} by {f}", showlegend=False, yaxis={"title": m})
            n += 1
            body.append(figure_html(fig, f"sweep-{n}"))
    return page(f"kubesched sweep: {doc['sweep']}", body)
