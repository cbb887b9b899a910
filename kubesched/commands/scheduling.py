"""What `explain`, `schedule` and `capacity` share: a scheduler over a snapshot, and the pod of `--pod`."""

from __future__ import annotations

from datetime import datetime

from kubesched.api.objects import Pod
from kubesched.commands.inputs import load_cluster
from kubesched.errors import InputError
from kubesched.scheduler.oneshot import VirtualClock, build_scheduler
from kubesched.scheduler.scheduler import Scheduler


def scheduler_inputs(snapshot: str, config: str | None, metrics: str | None, now: datetime, seed: int,
                     plugins: tuple[str, ...]) -> tuple[Scheduler, VirtualClock]:
    """The scheduler of `--config` (with `--metrics` and `--plugin`s) over the snapshot, on a virtual clock."""
    return build_scheduler(load_cluster(snapshot, now, seed), config, metrics, now, seed, plugins)


def find_pod(sched: Scheduler, key: str) -> Pod:
    """The pod NS/NAME (or NAME in `default`) of the scheduler's cluster; bad input when it is not there."""
    ns, _, name = key.rpartition("/")
    ns = ns or "default"
    pod = sched.cluster.pods.get(f"{ns}/{name}")
    if pod is None:
        raise InputError(f"pod {ns}/{name} is not in the snapshot", field="--pod")
    return pod
