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
from typing import Any


@dataclass(frozen=True, slots=True)
class Limit:
    """One side's number for one resource, and where it comes from."""

    resource: str
    percent: float
    where: str
    prod: bool = False  # about the usage of koord-prod pods only (prod thresholds)


def scheduler_limits(config: Any) -> list[Limit]:
    """The usage levels each scheduler profile packs nodes up to (built as the scheduler builds them)."""
    from kubesched.cluster.state import ClusterState
    from kubesched.scheduler.framework import Handle
    from kubesched.scheduler.registry import Registry
    from kubesched.scheduler.runtime import build_frameworks

    cluster = ClusterState()
    frameworks = build_frameworks(config, Registry(), lambda: Handle(cluster))
    out: list[Limit] = []
    for name, fwk in frameworks.items():
        for pl in fwk.filter:
            if pl.name == "LoadAwareScheduling":
                for r, pct in sorted(getattr(pl, "usage_thresholds", {}).items()):
                    if pct > 0:
                        out.append(Limit(r, float(pct), f"scheduler profile {name!r} LoadAwareScheduling "
                                                        f"usageThresholds.{r} {pct}%"))
                for r, pct in sorted(getattr(pl, "prod_usage_thresholds", {}).items()):
                    if pct > 0:
                        out.append(Limit(r, float(pct), f"scheduler profile {name!r} LoadAwareScheduling "
                                                        f"prodUsageThresholds.{r} {pct}%", prod=True))
        for spl in fwk.score:
            if spl.name == "TargetLoadPacking":
                target = float(getattr(spl, "target", 0))
                out.append(Limit("cpu", target, f"scheduler profile {name!r} TargetLoadPacking targetUtilization "
                                                f"{target:g}%"))
    return out


def descheduler_thresholds(policy: Any) -> tuple[list[Limit], list[Limit], list[str]]:
    """(high thresholds, low thresholds, notes) of the usage-based balance plugins of every profile."""
    highs: list[Limit] = []
    lows: list[Limit] = []
    notes: list[str] = []
    for prof in policy.profiles:
        enabled = prof.enabled("balance")
        if "LowNodeLoad" in enabled:
            args = prof.plugin_config.get("LowNodeLoad") or {}
            for pool in args.get("nodePools") or []:
                where = f"descheduler profile {prof.name!r} LowNodeLoad pool {pool.get('name')!r}"
                if pool.get("useDeviationThresholds"):
                    notes.append(f"{where} uses deviation thresholds (relative to the mean usage): not compared")
                    continue
                for key, into, prod in (("highThresholds", highs, False), ("lowThresholds", lows, False),
                                        ("prodHighThresholds", highs, True), ("prodLowThresholds", lows, True)):
                    for r, pct in sorted((pool.get(key) or {}).items()):
                        into.append(Limit(r, float(pct), f"{where} {key}.{r} {pct:g}%", prod))
        if "LowNodeUtilization" in enabled:
            args = prof.plugin_config.get("LowNodeUtilization") or {}
            if not args.get("metricsUtilization"):
                continue  # requests, not usage: another measure than the scheduler's
            where = f"descheduler profile {prof.name!r} LowNodeUtilization (actual usage)"
            if args.get("useDeviationThresholds"):
                notes.append(f"{where} uses deviation thresholds (relative to the mean usage): not compared")
                continue
            for key, into in (("targetThresholds", highs), ("thresholds", lows)):
                for r, pct in sorted((args.get(key) or {}).items()):
                    into.append(Limit(r, float(pct), f"{where} {key}.{r} {pct:g}%"))
    return highs, lows, notes


def check(scheduler_config: Any, policy: Any) -> list[str]:
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
