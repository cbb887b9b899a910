"""Eviction loops: a workload's pods evicted and placed back on the same node, or evicted again, soon.

The detector follows each evicted pod to its replacement (the controller records which pod a new pod
replaces). An eviction is part of a loop when, within `window` of it, the replacement is bound to the
node the pod was evicted from ("placed back"), or is itself evicted ("evicted again"). Evictions linked
by "evicted again" form a chain; each chain with at least one looping eviction is an episode. Any pod of
the same workload created after the eviction and bound to the same node
within the window counts as placed back too (the workload's pods return to the node they were
moved off, whichever eviction they replace).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

CHAIN_LIMIT = 16


@dataclass(frozen=True, slots=True)
class Eviction:
    t: float
    pod: str
    workload: str
    node: str
    component: str
    reason: str
    terminal: bool = False  # the pod had already failed or succeeded: a clean-up, not a disruption


@dataclass(frozen=True, slots=True)
class Binding:
    t: float
    pod: str
    workload: str
    node: str
    created: float


@dataclass(slots=True)
class LoopFinding:
    workload: str
    episodes: int = 0
    looping_evictions: int = 0
    placed_back: int = 0
    evicted_again: int = 0
    nodes: dict[str, int] = field(default_factory=dict)
    chain: list[dict[str, Any]] = field(default_factory=list)
    components: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"workload": self.workload, "episodes": self.episodes, "loopingEvictions": self.looping_evictions,
                "placedBack": self.placed_back, "evictedAgain": self.evicted_again,
                "nodes": dict(sorted(self.nodes.items())), "components": dict(sorted(self.components.items())),
                "chain": self.chain}


def _time(b: Binding) -> float:
    return b.t


def find_loops(evictions: Sequence[Eviction], bindings: Sequence[Binding], replaces: dict[str, str],
               window: float) -> list[LoopFinding]:
    """Loops per workload, most looping evictions first."""
    children: dict[str, list[str]] = {}
    for child, parent in replaces.items():
        children.setdefault(parent, []).append(child)
    binds_of: dict[str, list[Binding]] = {}
    binds_by_workload_node: dict[tuple[str, str], list[Binding]] = {}
    for b in bindings:
        binds_of.setdefault(b.pod, []).append(b)
        binds_by_workload_node.setdefault((b.workload, b.node), []).append(b)
    # The scan starts at the eviction's time (lists are recorded in time order; one that is not is scanned
    # from its start).
    in_order = {k for k, bs in binds_by_workload_node.items() if all(a.t <= b.t for a, b in itertools.pairwise(bs))}
    evictions = [e for e in evictions if not e.terminal]
    evicted: dict[str, Eviction] = {}
    for e in evictions:
        evicted.setdefault(e.pod, e)

    def successors(e: Eviction) -> tuple[Binding | None, Eviction | None]:
        back: Binding | None = None
        again: Eviction | None = None
        kids = children.get(e.pod, [])
        for k in kids:
            for b in binds_of.get(k, []):
                if b.node == e.node and e.t <= b.t <= e.t + window and (back is None or b.t < back.t):
                    back = b
            e2 = evicted.get(k)
            if e2 is not None and e.t <= e2.t <= e.t + window and (again is None or e2.t < again.t):
                again = e2
        if back is None:
            # Any replacement of the workload (created after the eviction) landing on the same node: the first
            # in the list (in time order, the earliest in the window).
            key = (e.workload, e.node)
            same = binds_by_workload_node.get(key, [])
            ordered = key in in_order
            start = bisect.bisect_left(same, e.t, key=_time) if ordered else 0
            for j in range(start, len(same)):
                b = same[j]
                if ordered and b.t > e.t + window:
                    break
                if b.created >= e.t and e.t <= b.t <= e.t + window and b.pod != e.pod:
                    back = b
                    break
        return back, again

    links: dict[str, tuple[Binding | None, Eviction | None]] = {}
    targets: set[str] = set()
    for e in evictions:
        if e.pod in links:
            continue
        back, again = successors(e)
        links[e.pod] = (back, again)
        if again is not None:
            targets.add(again.pod)

    findings: dict[str, LoopFinding] = {}
    for e in evictions:
        if e.pod in targets or e.pod not in links:
            continue  # not the head of a chain
        chain: list[Eviction] = []
        cur: Eviction | None = e
        seen: set[str] = set()
        while cur is not None and cur.pod not in seen:
            seen.add(cur.pod)
            chain.append(cur)
            cur = links.get(cur.pod, (None, None))[1]
        looping = [x for x in chain if links[x.pod][0] is not None or links[x.pod][1] is not None]
        if not looping:
            continue
        f = findings.setdefault(e.workload, LoopFinding(e.workload))
        f.episodes += 1
        f.looping_evictions += len(looping)
        events: list[dict[str, Any]] = []
        for x in chain:
            back, again = links[x.pod]
            f.nodes[x.node] = f.nodes.get(x.node, 0) + 1
            f.components[x.component] = f.components.get(x.component, 0) + 1
            if back is not None:
                f.placed_back += 1
            if again is not None:
                f.evicted_again += 1
            events.append({"t": x.t, "event": "evicted", "pod": x.pod, "node": x.node, "by": x.component,
                           "reason": x.reason})
            for k in children.get(x.pod, []):
                for b in binds_of.get(k, []):
                    if b.t >= x.t:
                        events.append({"t": b.t, "event": "replacement bound", "pod": b.pod, "node": b.node})
                        break
            if back is not None and not (events[-1]["pod"] == back.pod and events[-1]["node"] == back.node):
                events.append({"t": back.t, "event": "placed back", "pod": back.pod, "node": back.node})
            elif back is not None:
                events[-1]["event"] = "placed back"
        # A replacement that is also the pod placed back is shown once, as placed back.
        backs = {(ev["pod"], ev["node"]) for ev in events if ev["event"] == "placed back"}
        events = [ev for ev in events if not (ev["event"] == "replacement bound" and (ev["pod"], ev["node"]) in backs)]
        events.sort(key=lambda ev: (ev["t"], 0 if ev["event"] == "evicted" else 1))
        if len(events) > len(f.chain):
            f.chain = events[:CHAIN_LIMIT]
    return sorted(findings.values(), key=lambda f: (-f.looping_evictions, f.workload))
