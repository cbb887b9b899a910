"""One-shot runs of the scheduler over a snapshot: `schedule` (every pending pod) and `capacity`."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from kubesched.api.objects import Pod, parse_pod
from kubesched.api.snapshot import Snapshot, iter_objects, load_snapshot, read_documents
from kubesched.client.inprocess import InProcessAPIServer
from kubesched.cluster.state import ClusterState
from kubesched.config.scheduler_config import load_scheduler_config
from kubesched.errors import InputError
from kubesched.metrics.loader import load_metrics
from kubesched.scheduler.framework import SchedulerServices
from kubesched.scheduler.registry import Registry
from kubesched.scheduler.scheduler import Outcome, Scheduler
from kubesched.scheduler.waiting_pods import MAX_PERMIT_TIMEOUT


class VirtualClock:
    """The one-shot commands' clock: it starts at `--now` and moves only when the run waits (backoff,
    graceful termination)."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, t: float) -> None:
        self.t = max(self.t, t)


def build_scheduler(snapshot: str | Snapshot, config: str | None, metrics: str | None, now: datetime, seed: int,
                    plugins: tuple[str, ...] = ()) -> tuple[Scheduler, VirtualClock]:
    """A scheduler over a snapshot (a file, or one already loaded — the command line's has its workloads'
    pods made), acting through an in-process API server on a virtual clock."""
    snap = load_snapshot(snapshot) if isinstance(snapshot, str) else snapshot
    cfg = load_scheduler_config(config)
    registry = Registry()
    for spec in plugins:
        registry.register_spec(spec)
    cluster = ClusterState.from_snapshot(snap)
    services = SchedulerServices(start=now, snapshot=snap,
                                 metrics=load_metrics(metrics, now) if metrics is not None else None)
    clock = VirtualClock(now.timestamp())
    server = InProcessAPIServer(cluster, clock, seed=seed)
    return Scheduler(cluster, cfg, registry, seed=seed, clock=clock, services=services, client=server), clock


def schedule_all(sched: Scheduler, clock: VirtualClock) -> dict[str, Any]:
    """Every pending pod through the queue; each binding is applied before the next pod is scheduled.

    Waits (backoff, preemption victims terminating, Permit timeouts) pass on the virtual clock; pods still
    unschedulable when nothing more can change are reported with their last reason. Once pods have waited
    at Permit, the run stops when no pod was bound for MAX_PERMIT_TIMEOUT + podMaxBackoffSeconds of
    virtual time (the real scheduler would retry a gang that cannot be placed for ever); pods still
    waiting then are reported as waiting.
    """
    records: dict[str, dict[str, Any]] = {}

    def record(out: Outcome) -> None:
        rec = records.setdefault(out.pod.key, {"pod": out.pod.key, "node": None, "nominatedNode": None,
                                               "preempted": []})
        rec["node"] = out.node
        if out.waited is not None:
            rec["permitWaitSeconds"] = round(out.waited, 3)
        if out.nominated_node:
            rec["nominatedNode"] = out.nominated_node
        rec["preempted"].extend(v for v in out.preempted if v not in rec["preempted"])
        if out.node is None:
            rec["reason"] = out.reason
        else:
            rec.pop("reason", None)

    sched.enqueue_pending()
    sched.run_until_idle(advance=clock.advance, on_outcome=record,
                         give_up_after=MAX_PERMIT_TIMEOUT + sched.config.pod_max_backoff_seconds)
    for wp in sched.waiting_pods:
        rec = records.setdefault(wp.pod.key, {"pod": wp.pod.key, "node": None, "nominatedNode": None,
                                              "preempted": []})
        rec["node"] = None
        rec["reason"] = (f"waiting at Permit on node {wp.node_name} for "
                         f"{', '.join(wp.get_pending_plugins()) or 'no plugin'} when the run stopped")
    for key in sched.queue.pending().get("gated", []):
        pod = sched.cluster.pods[key]
        records.setdefault(key, {"pod": key, "node": None, "nominatedNode": None, "preempted": [],
                                 "reason": "waiting for scheduling gates: "
                                           + ", ".join(pod.scheduling_gates)})
    return {"placements": list(records.values())}


def capacity(sched: Scheduler, template: str | Pod, max_limit: int = 0) -> dict[str, Any]:
    """Schedule copies of a pod one after another until one does not fit (cluster-capacity).

    `template` is a Pod (the command line makes one from a Pod or a workload's template) or a file holding one
    Pod. Preemption is not run: capacity asks what fits beside the existing pods, not what could displace them.
    """
    if max_limit < 0:
        raise InputError(f"expected 0 (no limit) or a positive number of copies, got {max_limit}", field="--max")
    template_path = template if isinstance(template, str) else "--pod-template"
    if isinstance(template, str):
        docs = list(iter_objects(read_documents(template), template))
        pods = [d for d in docs if d.get("kind") == "Pod"]
        if len(pods) != 1:
            raise InputError(f"expected exactly one Pod, found {len(pods)}", file=template)
        try:
            template = parse_pod(pods[0])
        except InputError as e:
            raise e.located(file=template_path) from None
    fwk = sched.framework_for(template)
    if fwk is None:
        raise InputError(f"no profile has schedulerName {template.scheduler_name!r}", file=template_path,
                         obj=f"Pod {template.key}", field="spec.schedulerName")
    per_node: dict[str, int] = {}
    instances = 0
    reason = ""
    post_filter = fwk.post_filter
    fwk.post_filter = []
    try:
        while not max_limit or instances < max_limit:
            raw = copy.deepcopy(template.raw)
            meta = raw.setdefault("metadata", {})
            meta["name"] = f"{template.name}-{instances}"
            raw.setdefault("spec", {}).pop("nodeName", None)
            pod = parse_pod(raw)
            sched.cluster.add(pod)
            qpi = sched.queue.pop()
            if qpi is None:
                reason = "waiting for scheduling gates: " + ", ".join(pod.scheduling_gates)
                sched.cluster.delete(pod)
                break
            out = sched.schedule_one(qpi)
            if out.node is None:
                reason = out.reason
                sched.cluster.delete(pod)
                break
            instances += 1
            per_node[out.node] = per_node.get(out.node, 0) + 1
        else:
            reason = f"limit reached ({max_limit} instances)"
    finally:
        fwk.post_filter = post_filter
    return {"instances": instances, "perNode": per_node, "reason": reason}
