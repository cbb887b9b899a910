"""The seed's story in one command: a node runs hot while its requests look balanced.

    .venv/bin/python examples/hotspot-descheduling/run.py

1. Request-based LowNodeUtilization sees node-1 at 37.5% of its CPU *requested* and evicts nothing.
2. Usage-based LowNodeLoad (koordinator) sees node-1 at 92.5% CPU *used* and moves two api pods away.
3. Where does the replacement pod land? The default scheduler (requests only) puts it back on node-1 —
   the node with the fewest requests; with LoadAwareScheduling it goes to a cold node.
4. `kubesched deschedule --scheduler-config` checks that the scheduler's and the descheduler's thresholds
   do not fight; a scheduler that fills nodes to 80% CPU against a descheduler draining above 75% is
   reported.

The script exits 1 if any step does not come out as described.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOW = "2024-06-01T12:00:30Z"  # 30 s after the metrics were taken


def kubesched(*args: str) -> tuple[dict, str]:
    """`kubesched ARGS --now NOW -o json`, run in this process (the same code path as the command line)."""
    from kubesched.cli import main as cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli([*args, "--now", NOW, "-o", "json"])
    if code != 0:
        sys.exit(f"kubesched {' '.join(args)} failed: {err.getvalue().strip()}")
    return json.loads(out.getvalue()), err.getvalue()


def main() -> int:
    snap = str(HERE / "snapshot.yaml")
    ok = True

    print("1. Request-based LowNodeUtilization (thresholds 20%, targetThresholds 60% of requests)")
    out, _ = kubesched("deschedule", "--snapshot", snap, "--policy", str(HERE / "lownodeutilization.yaml"))
    for node, u in sorted(out["utilization"].items()):
        print(f"   {node}: cpu requested {u['before']['cpu']}%")
    print(f"   evictions: {len(out['evictions'])} — node-1 does not look overutilized by requests")
    ok &= not out["evictions"]

    print("\n2. Usage-based LowNodeLoad (lowThresholds cpu 45%, highThresholds cpu 75% of actual usage)")
    out, _ = kubesched("deschedule", "--snapshot", snap, "--policy", str(HERE / "lownodeload.yaml"))
    for e in out["evictions"]:
        print(f"   evict {e['pod']} from {e['node']}: {e['reason']}")
    moved = [e["pod"] for e in out["evictions"]]
    ok &= len(moved) == 2 and all(e["node"] == "node-1" for e in out["evictions"])

    print("\n3. Where the ReplicaSet's replacement pod (shop/api-7) is scheduled")
    placed = {}
    for name in ("scheduler-default.yaml", "scheduler-loadaware.yaml"):
        out, _ = kubesched("schedule", "--snapshot", snap, "--config", str(HERE / name))
        placed[name] = out["placements"][0]["node"]
        print(f"   {name:<26} → {placed[name]}")
    ok &= placed["scheduler-default.yaml"] == "node-1" and placed["scheduler-loadaware.yaml"] != "node-1"

    print("\n4. Do the scheduler and the descheduler fight?")
    warnings = {}
    for name in ("scheduler-loadaware.yaml", "scheduler-fighting.yaml"):
        out, _ = kubesched("deschedule", "--snapshot", snap, "--policy", str(HERE / "lownodeload.yaml"),
                           "--scheduler-config", str(HERE / name))
        warnings[name] = out["warnings"]
        print(f"   {name}: {len(out['warnings'])} warning(s)")
        for w in out["warnings"]:
            print(f"     warning: {w}")
    ok &= not warnings["scheduler-loadaware.yaml"] and bool(warnings["scheduler-fighting.yaml"])

    print("\n" + ("The story holds." if ok else "The story did NOT come out as described."))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
