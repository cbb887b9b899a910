"""Do the scheduler and the descheduler agree on what a hot node is? Warnings for settings that fight.

A usage-aware scheduler admits pods to a node until its usage reaches the scheduler's limit:
LoadAwareScheduling's `usageThresholds` (a filter) or TargetLoadPacking's `targetUtilization` (the CPU
level its score packs nodes up to). A usage-aware descheduler drains a node whose usage is above its high
threshold: LowNodeLoad's `highThresholds`, or LowNodeUtilization's `targetThresholds` when it measures
actual usage. If the descheduler's high threshold is at or below the scheduler's limit, the scheduler
fills nodes into the band the descheduler drains, and pods bounce between them. And a node the
descheduler counts as a destination (usage under its low threshold) must still be one the scheduler
accepts, or evicted pods have nowhere to go: the low threshold must be below the scheduler's limit.

    scheduler limit  <  descheduler high threshold         (no eviction loop)
    descheduler low  <  scheduler limit                    (destinations accept pods)

`check` compares them per resource and per pair of profiles; deviation thresholds (relative to the
cluster mean) cannot be compared statically and are reported as such.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubesched.cluster.state import ClusterState
from kubesched.config.descheduler_policy import DeschedulerPolicy
from kubesched.config.scheduler_config import SchedulerConfig
from kubesched.descheduler.plugins.low_node_load import LowNodeLoadArgs
from kubesched.descheduler.plugins.low_node_utilization import LowNodeUtilizationArgs
from kubesched.scheduler.framework import Handle
from kubesched.scheduler.plugins.load_aware_scheduling import LoadAwareScheduling
from kubesched.scheduler.plugins.trimaran.target_load_packing import TargetLoadPacking
from kubesched.scheduler.registry import Registry
from kubesched.scheduler.runtime import build_frameworks


@dataclass(frozen=True, slots=True)
class Limit:
    """One side's number for one resource, and where it comes from."""

    resource: str
    percent: float
    where: str
    prod: bool = False  # about the usage of koord-prod pods only (prod thresholds)


def scheduler_limits(config: SchedulerConfig) -> list[Limit]:
    """The usage levels each scheduler profile packs nodes up to (built as the scheduler builds them)."""
    cluster = ClusterState()
    frameworks = build_frameworks(config, Registry(), lambda: Handle(cluster))
    out: list[Limit] = []
    for name, fwk in frameworks.items():
        for pl in fwk.filter:
            if isinstance(pl, LoadAwareScheduling):
                for r, pct in sorted(pl.args.usage_thresholds.items()):
                    if pct > 0:
                        out.append(Limit(r, float(pct), f"scheduler profile {name!r} LoadAwareScheduling "
                                                        f"usageThresholds.{r} {pct}%"))
                for r, pct in sorted(pl.args.prod_usage_thresholds.items()):
                    if pct > 0:
                        out.append(Limit(r, float(pct), f"scheduler profile {name!r} LoadAwareScheduling "
                                                        f"prodUsageThresholds.{r} {pct}%", prod=True))
        for spl in fwk.score:
            if isinstance(spl, TargetLoadPacking):
                target = float(spl.args.target_utilization)
                out.append(Limit("cpu", target, f"scheduler profile {name!r} TargetLoadPacking targetUtilization "
                                                f"{target:g}%"))
    return out


def descheduler_thresholds(policy: DeschedulerPolicy) -> tuple[list[Limit], list[Limit], list[str]]:
    """(high thresholds, low thresholds, notes) of the usage-based balance plugins of every profile."""
    highs: list[Limit] = []
    lows: list[Limit] = []
    notes: list[str] = []
    for prof in policy.profiles:
        enabled = prof.enabled("balance")
        lnl = prof.plugin_config.get("LowNodeLoad")
        if "LowNodeLoad" in enabled and isinstance(lnl, LowNodeLoadArgs):
            for pool in lnl.node_pools:
                where = f"descheduler profile {prof.name!r} LowNodeLoad pool {pool.name!r}"
                if pool.use_deviation_thresholds:
                    notes.append(f"{where} uses deviation thresholds (relative to the mean usage): not compared")
                    continue
                for key, values, into, prod in (("highThresholds", pool.high_thresholds, highs, False),
                                                ("lowThresholds", pool.low_thresholds, lows, False),
                                                ("prodHighThresholds", pool.prod_high_thresholds, highs, True),
                                                ("prodLowThresholds", pool.prod_low_thresholds, lows, True)):
                    for r, pct in sorted((values or {}).items()):
                        into.append(Limit(r, float(pct), f"{where} {key}.{r} {pct:g}%", prod))
        lnu = prof.plugin_config.get("LowNodeUtilization")
        if "LowNodeUtilization" in enabled and isinstance(lnu, LowNodeUtilizationArgs):
            if lnu.metrics_utilization is None or lnu.metrics_utilization.unset:
                continue  # requests, not usage: another measure than the scheduler's
            where = f"descheduler profile {prof.name!r} LowNodeUtilization (actual usage)"
            if lnu.use_deviation_thresholds:
                notes.append(f"{where} uses deviation thresholds (relative to the mean usage): not compared")
                continue
            for key, values, into in (("targetThresholds", lnu.target_thresholds, highs),
                                      ("thresholds", lnu.thresholds, lows)):
                for r, pct in sorted(values.items()):
                    into.append(Limit(r, float(pct), f"{where} {key}.{r} {pct:g}%"))
    return highs, lows, notes


def check(scheduler_config: SchedulerConfig, policy: DeschedulerPolicy) -> list[str]:
    """Warnings for every pair of settings that would make the scheduler and the descheduler fight."""
    limits = scheduler_limits(scheduler_config)
    highs, lows, notes = descheduler_thresholds(policy)
    out = []
    for lim in limits:
        for h in highs:
            if h.resource == lim.resource and h.prod == lim.prod and h.percent <= lim.percent:
                out.append(f"{h.where} is not above {lim.where}: the scheduler fills nodes to a usage the "
                           f"descheduler then drains (set the descheduler's high threshold above "
                           f"{lim.percent:g}%)")
        for lo in lows:
            if lo.resource == lim.resource and lo.prod == lim.prod and lo.percent >= lim.percent:
                out.append(f"{lo.where} is not below {lim.where}: nodes the descheduler counts as destinations "
                           f"are ones the scheduler may refuse (set the descheduler's low threshold below "
                           f"{lim.percent:g}%)")
    if limits:
        out.extend(notes)
    return out
