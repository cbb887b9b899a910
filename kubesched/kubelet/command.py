"""`kubesched node-pressure` and `kubesched qos`: the eviction manager on one node over a timeline of
Summary API documents, and the QoS class and oom_score_adj of every pod in a snapshot."""

from __future__ import annotations

from datetime import datetime
from fractions import Fraction
from typing import Any

from rich.console import Console
from rich.table import Table

from kubesched.api.documents import describe
from kubesched.api.objects import Node, Pod, parse_time
from kubesched.api.qos import qos_class
from kubesched.api.quantity import value_of
from kubesched.api.snapshot import Snapshot, load_snapshot, read_documents
from kubesched.errors import InputError
from kubesched.kubelet.kubelet_config import load_kubelet_config
from kubesched.kubelet.manager import DiskLayout, EvictionManager, SyncResult
from kubesched.kubelet.oom import pod_oom_score_adjust
from kubesched.kubelet.signals import Summary, parse_summary

# A step's disk layout may also be given as flat keys (dedicatedContainerFs is upstream's name for a
# writable-layer filesystem split from the imagefs); it is read once, before the first synchronize.
LAYOUT_FIELDS = {"dedicatedImageFs", "dedicatedContainerFs", "splitContainerFs"}
STEP_FIELDS = {"at", "stats", "statsAfterNodeReclaim", "diskLayout", "expect", *LAYOUT_FIELDS}

console = Console()


# ---------------------------------------------------------------- node-pressure


def _load_timeline(path: str) -> list[dict[str, Any]]:
    docs = read_documents(path)
    steps: Any = docs[0] if len(docs) == 1 else docs
    if isinstance(steps, dict) and isinstance(steps.get("steps"), list):
        steps = steps["steps"]
    if not isinstance(steps, list):
        raise InputError(f"expected a list of steps {{at, stats}}, got {describe(steps)}", file=path)
    out = []
    previous = 0.0
    for i, step in enumerate(steps):
        where = f"steps[{i}]"
        if not isinstance(step, dict):
            raise InputError("expected a step object with at and stats", file=path, field=where)
        unknown = sorted(set(step) - STEP_FIELDS)
        if unknown:
            raise InputError(f"unknown field {unknown[0]!r}; expected {', '.join(sorted(STEP_FIELDS - {'expect'}))}",
                             file=path, field=f"{where}.{unknown[0]}")
        at = step.get("at", 0)
        if isinstance(at, bool) or not isinstance(at, (int, float)):
            raise InputError(f"expected seconds after --now, got {at!r}", file=path, field=f"{where}.at")
        if at < 0 or at > 10**10:
            raise InputError(f"expected seconds after --now, from 0 to 10^10, got {at!r}", file=path, field=f"{where}.at")
        if at < previous:
            raise InputError(f"the timeline goes back in time: {at:g}s comes after a step at {previous:g}s (steps are "
                             "in time order)", file=path, field=f"{where}.at")
        previous = float(at)
        out.append(step)
    return out


def _disk_layout(raw: Any, path: str, where: str) -> DiskLayout:
    if not isinstance(raw, dict) or set(raw) - LAYOUT_FIELDS or not all(isinstance(v, bool) for v in raw.values()):
        raise InputError("expected {dedicatedImageFs: bool, splitContainerFs: bool}", file=path, field=where)
    return DiskLayout(bool(raw.get("dedicatedImageFs", False)),
                      bool(raw.get("splitContainerFs", raw.get("dedicatedContainerFs", False))))


def _pick_node(snap: Snapshot, first_stats: Summary | None) -> Node | None:
    if len(snap.nodes) <= 1:
        return snap.nodes[0] if snap.nodes else None
    name = first_stats.node.node_name if first_stats is not None else ""
    for n in snap.nodes:
        if n.name == name:
            return n
    raise InputError(f"the snapshot has {len(snap.nodes)} nodes and the stats name none of them "
                     f"(node.nodeName {name!r})", field="stats.node.nodeName")


def _step_dict(at: float, res: SyncResult, manager: EvictionManager, candidates: list[Pod]) -> dict[str, Any]:
    signals: list[str] = []
    for t in res.thresholds_met:
        if t.signal not in signals:
            signals.append(t.signal)
    admit: dict[str, bool] = {}
    rejected: dict[str, str] = {}
    for p in candidates:
        r = manager.admit(p)
        admit[p.key] = r.admit
        if not r.admit:
            rejected[p.key] = r.message
    return {
        "at": at,
        "observations": {s: {"available": str(o.available), "capacity": str(o.capacity)}
                         for s, o in res.observations.items()},
        "thresholdsMet": signals,
        "conditions": list(res.conditions),
        "taints": [{"key": t.key, "effect": t.effect} for t in res.taints],
        "thresholdToReclaim": None if res.threshold_to_reclaim is None else str(res.threshold_to_reclaim),
        "starvedResource": res.starved_resource,
        "nodeReclaim": None if res.node_reclaim is None else {
            "signal": res.node_reclaim.signal, "actions": list(res.node_reclaim.actions),
            "resolved": res.node_reclaim.resolved},
        "rankOrder": [p.key for p in res.rank_order],
        "evicted": [e.pod.key for e in res.evictions],
        "gracePeriodSeconds": {e.pod.key: e.grace_period_seconds for e in res.evictions},
        "podStatus": {e.pod.key: e.status() for e in res.evictions},
        "notEvictedCritical": [p.key for p in res.skipped_critical],
        "admit": admit,
        "admitRejections": rejected,
    }


def node_pressure_command(kubelet_config: str, snapshot: str | Snapshot | None, timeline: str | None,
                          now: datetime) -> dict[str, Any]:
    """Run the eviction manager over the timeline, one synchronize per step, state kept between steps."""
    cfg = load_kubelet_config(kubelet_config)
    snap = snapshot if isinstance(snapshot, Snapshot) else load_snapshot(snapshot) if snapshot else Snapshot()
    steps = _load_timeline(timeline) if timeline else []
    parsed: list[tuple[Summary | None, Summary | None]] = []
    for i, step in enumerate(steps):
        try:
            stats = parse_summary(step["stats"], f"steps[{i}].stats") if step.get("stats") is not None else None
            after = parse_summary(step["statsAfterNodeReclaim"], f"steps[{i}].statsAfterNodeReclaim") \
                if step.get("statsAfterNodeReclaim") is not None else None
        except InputError as e:
            raise e.located(file=timeline) from None
        parsed.append((stats, after))
    layout = DiskLayout()
    for i, step in enumerate(steps):
        if "diskLayout" in step:
            layout = _disk_layout(step["diskLayout"], str(timeline), f"steps[{i}].diskLayout")
            break
        flat = {k: step[k] for k in LAYOUT_FIELDS if k in step}
        if flat:
            layout = _disk_layout(flat, str(timeline), f"steps[{i}]")
            break
    node = _pick_node(snap, next((s for s, _ in parsed if s is not None), None))
    active = [p for p in snap.pods if p.node_name and (node is None or p.node_name == node.name)]
    candidates = [p for p in snap.pods if not p.node_name]
    origin = now.timestamp()
    manager = EvictionManager(cfg, clock=lambda: origin, disk_layout=layout)
    out_steps = []
    current = Summary()
    for step, (stats, after) in zip(steps, parsed, strict=True):
        if stats is not None:
            current = stats
        at = float(step.get("at", 0))

        def reclaim(_actions: Any, after: Summary | None = after) -> Summary | None:
            return after

        res = manager.synchronize(origin + at, current, active, node, reclaim=reclaim)
        out_steps.append(_step_dict(step.get("at", 0), res, manager, candidates))
    return {"node": node.name if node is not None else None,
            "thresholds": [t.to_dict() for t in cfg.thresholds],
            "steps": out_steps}


def node_pressure_table(data: dict[str, Any]) -> None:
    th = Table(title="eviction thresholds")
    for col in ("signal", "value", "grace period", "min reclaim"):
        th.add_column(col)
    for t in data["thresholds"]:
        v = t["value"]
        value = v.get("quantity") or f"{round(v.get('percentage', 0) * 100, 4):g}%"
        mr = t.get("minReclaim")
        reclaim = "-" if not mr else (mr.get("quantity") or f"{round(mr.get('percentage', 0) * 100, 4):g}%")
        th.add_row(t["signal"], f"< {value}", "hard" if t["gracePeriod"] == "0s" else t["gracePeriod"], reclaim)
    console.print(th)
    if not data["steps"]:
        return
    st = Table(title=f"node {data.get('node') or '-'}: one synchronize per step")
    for col in ("at (s)", "thresholds met", "conditions", "evicted (grace s)", "admission rejected"):
        st.add_column(col)
    for s in data["steps"]:
        evicted = [f"{k} ({s['gracePeriodSeconds'][k]})" for k in s["evicted"]]
        if s.get("nodeReclaim"):
            nr = s["nodeReclaim"]
            evicted.insert(0, f"[dim]node reclaim {'resolved it' if nr['resolved'] else 'not enough'}[/dim]")
        rejected = [k for k, ok in s["admit"].items() if not ok]
        st.add_row(str(s["at"]), ", ".join(s["thresholdsMet"]) or "-",
                   ", ".join(f"[red]{c}[/red]" for c in s["conditions"]) or "-",
                   "\n".join(evicted) or "-", ", ".join(rejected) or "-")
    console.print(st)
    for s in data["steps"]:
        for key, status in s["podStatus"].items():
            console.print(f"[bold]at {s['at']}s[/bold] {key}: {status['phase']} ({status['reason']}): {status['message']}")


# ---------------------------------------------------------------- qos


def _memory_capacity(node: Node | None) -> int | None:
    if node is None:
        return None
    mem = node.capacity.get("memory")
    return value_of(mem) if mem is not None and mem > Fraction(0) else None


def running_at(pod: Pod, now: datetime) -> str | None:
    """Why the kubelet would have no containers of this pod running at `now` (None: it would).

    A terminal phase; a deletion whose grace period has run out (deletionTimestamp is when it ends); or
    spec.activeDeadlineSeconds passed since status.startTime (the kubelet's activeDeadlineHandler kills it:
    "DeadlineExceeded").
    """
    if pod.is_terminal:
        return pod.phase
    deletion = pod.meta.deletion_timestamp
    if deletion is not None and deletion <= now:
        return "Deleted"
    deadline = pod.raw.get("spec", {}).get("activeDeadlineSeconds") if isinstance(pod.raw.get("spec"), dict) else None
    start = pod.status.get("startTime")
    if isinstance(deadline, int) and not isinstance(deadline, bool) and start:
        try:
            started = parse_time(start, "status.startTime")
        except InputError as e:
            raise e.located(obj=f"Pod {pod.key}") from None
        if started is not None and (now - started).total_seconds() >= deadline:
            return "DeadlineExceeded"
    return None


def qos_command(snapshot: str | Snapshot, now: datetime | None = None) -> dict[str, Any]:
    """QoS class and per-container oom_score_adj of every pod; machine memory is the capacity of the pod's
    node (or of the only node in the snapshot). With `now`, each pod says whether its containers would be
    running then (`notRunning`: why not)."""
    snap = snapshot if isinstance(snapshot, Snapshot) else load_snapshot(snapshot)
    nodes = {n.name: n for n in snap.nodes}
    only = snap.nodes[0] if len(snap.nodes) == 1 else None
    pods: dict[str, Any] = {}
    for p in snap.pods:
        node = nodes.get(p.node_name) if p.node_name else None
        capacity = _memory_capacity(node or only)
        pods[p.key] = {"qosClass": qos_class(p), "node": p.node_name or None, "memoryCapacity": capacity,
                       "oomScoreAdj": pod_oom_score_adjust(p, capacity)}
        if now is not None:
            pods[p.key]["notRunning"] = running_at(p, now)
    return {"pods": pods}


def qos_table(data: dict[str, Any]) -> None:
    table = Table()
    for col in ("pod", "QoS class", "container oom_score_adj", "not running at --now"):
        table.add_column(col)
    for key, entry in data["pods"].items():
        adj = ", ".join(f"{c}={'?' if v is None else v}" for c, v in entry["oomScoreAdj"].items())
        table.add_row(key, entry["qosClass"], adj or "-", entry.get("notRunning") or "-")
    console.print(table)
    if any(v is None for e in data["pods"].values() for v in e["oomScoreAdj"].values()):
        console.print("? = Burstable container on a node whose memory capacity is unknown")
