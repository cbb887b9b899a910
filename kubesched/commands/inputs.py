"""What the one-shot commands read: the clock (`--now`) and a snapshot with its workloads' pods."""

from __future__ import annotations

from datetime import datetime

from kubesched.api.objects import parse_time
from kubesched.api.snapshot import Snapshot, load_snapshot
from kubesched.metrics.base import wall_clock_now
from kubesched.sim.expand import expand_workloads


def parse_now(value: str | None) -> datetime:
    """The value of `--now` (RFC 3339), or the wall clock when it is absent."""
    if value is None:
        # Marked as "nobody chose this moment": a replayed capture's metrics are then judged at their own time.
        return wall_clock_now()
    t = parse_time(value, "--now")
    assert t is not None
    return t


def load_cluster(path: str, now: datetime, seed: int) -> Snapshot:
    """A snapshot as the one-shot commands see it: its workloads' missing pods created (sim/expand.py)."""
    return expand_workloads(load_snapshot(path), path, now, seed)
