"""explain: one pod, every node, every plugin — the per-plugin, per-node view of one scheduling cycle.

Unlike a scheduling cycle, nothing short-circuits: every PreFilter plugin runs, every Filter plugin runs
on every node (so every reason a node is rejected shows), then PreScore and Score run on all feasible
nodes (no percentageOfNodesToScore cut), NormalizeScore across them, and the profile's weights.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kubesched.api.objects import Pod
from kubesched.errors import InputError
from kubesched.scheduler.framework import Code, CycleState, ScorePlugin, Status
from kubesched.scheduler.runtime import Framework
from kubesched.scheduler.scheduler import Scheduler


def explain(scheduler: Scheduler, pod: Pod) -> dict[str, Any]:
    fwk = scheduler.framework_for(pod)
    if fwk is None:
        raise InputError(f"no profile has schedulerName {pod.scheduler_name!r}", obj=f"Pod {pod.key}",
                         field="spec.schedulerName")
    cluster = scheduler.cluster
    state = CycleState()
    pre_statuses: dict[str, Status] = {}
    pre_res, pre_st = fwk.run_pre_filter(state, pod, pre_statuses)
    # A plugin whose PreFilter rejected the pod has no state for Filter: its verdict is the PreFilter's.
    rejected = {name for name, st in pre_statuses.items() if st.is_rejected or st.code is Code.ERROR}
    state.skip_filter_plugins |= rejected
    rows = cluster.node_order()
    infos = cluster.node_infos
    per_plugin: dict[str, np.ndarray] = {}
    if len(rows):
        fwk.filter_mask(state, pod, rows, per_plugin)
    filter_names = {pl.name for pl in fwk.filter}
    nodes: dict[str, dict[str, Any]] = {}
    feasible = np.ones(len(rows), dtype=bool)
    for i, r in enumerate(rows):
        info = infos[r]
        filters: dict[str, Any] = {}
        ok = True
        for pl in fwk.filter:
            if pl.name in rejected:
                filters[pl.name] = pre_statuses[pl.name].to_json()
                ok = False
                continue
            if pl.name in state.skip_filter_plugins:
                filters[pl.name] = {"code": Code.SKIP.value, "reasons": []}
                continue
            if per_plugin[pl.name][i]:
                filters[pl.name] = {"code": Code.SUCCESS.value, "reasons": []}
            else:
                st = pl.filter(state, pod, info)
                filters[pl.name] = st.to_json()
                ok = ok and st.is_success
        for name in sorted(rejected - filter_names):
            filters[name] = pre_statuses[name].to_json()
        if not pre_st.is_success:
            ok = False
        if not pre_res.all_nodes() and info.name not in (pre_res.node_names or ()):
            ok = False
        nominated = scheduler.nominated_pods_for(info.name, pod)
        if ok and nominated:
            st = fwk.run_filter_with_nominated_pods(state, pod, info, nominated)
            if not st.is_success:
                filters[st.plugin or "nominatedPods"] = st.to_json()
                ok = False
        feasible[i] = ok
        nodes[info.name] = {"feasible": bool(feasible[i]), "filters": filters, "scores": {}, "total": None}

    selected = None
    feasible_rows = rows[feasible]
    pre_score_statuses: dict[str, Status] = {}
    if len(feasible_rows):
        st = fwk.run_pre_score(state, pod, feasible_rows, pre_score_statuses)
        if not st.is_success:
            raise InputError(f"PreScore plugin {st.plugin} failed: {st.message}", obj=f"Pod {pod.key}")
        breakdown, st = fwk.run_score(state, pod, feasible_rows)
        if not st.is_success:
            raise InputError(f"Score plugin {st.plugin} failed: {st.message}", obj=f"Pod {pod.key}")
        assert breakdown.total is not None
        for i, r in enumerate(feasible_rows):
            entry = nodes[infos[r].name]
            for name in breakdown.raw:
                entry["scores"][name] = {"raw": int(breakdown.raw[name][i]),
                                         "normalized": int(breakdown.normalized[name][i]),
                                         "weighted": int(breakdown.weighted[name][i])}
            for spl in fwk.score:
                if spl.name in state.skip_score_plugins:
                    # Skipped at PreScore: the plugin adds nothing to any node, i.e. scores 0 everywhere.
                    entry["scores"][spl.name] = {"raw": 0, "normalized": 0, "weighted": 0, "skipped": True}
            entry["total"] = int(breakdown.total[i])
        selected = infos[scheduler.select_host(feasible_rows, breakdown.total)].name
    else:
        st = fwk.run_pre_score(state, pod, feasible_rows, pre_score_statuses)
    # Nodes that failed Filter are no candidates, but a plugin whose score of a node does not depend on
    # the other nodes (no NormalizeScore) still says what that node would score.
    for i, r in enumerate(rows):
        if feasible[i]:
            continue
        entry = nodes[infos[r].name]
        for spl in fwk.score:
            if spl.name in state.skip_score_plugins or type(spl).normalize_score is not ScorePlugin.normalize_score:
                continue
            value, sst = spl.score(state, pod, infos[r])
            if sst.is_success:
                entry["scores"][spl.name] = {"raw": int(value), "normalized": int(value),
                                             "weighted": int(value) * fwk.weights.get(spl.name, 1)}
    permit = _dry_permit(scheduler, fwk, state, pod, selected) if selected is not None and fwk.permit else None
    return {
        "pod": pod.key,
        "profile": fwk.scheduler_name,
        "selected": selected,
        "preFilter": {k: v.to_json() for k, v in pre_statuses.items()},
        "preScore": {k: v.to_json() for k, v in pre_score_statuses.items()},
        "weights": dict(fwk.weights),
        "permit": permit,
        "nodes": nodes,
        "notes": "scores of nodes that failed Filter are shown only for plugins without NormalizeScore; "
                 "such nodes have no total",
    }


def _dry_permit(scheduler: Scheduler, fwk: Framework, state: CycleState, pod: Pod, node: str) -> dict[str, Any]:
    """Reserve and Permit on the selected node, then undone: the Permit verdict and, for a pod that would
    wait (a gang member), on which plugins, for how long and why."""
    cluster = scheduler.cluster
    known = pod.key in cluster.pods
    pod = cluster.assume(pod, node)
    st = fwk.run_reserve(state, pod, node)
    if st.is_success:
        st = fwk.run_permit(state, pod, node)
    out: dict[str, Any] = {"node": node, "code": st.code.value, "reasons": list(st.reasons), "plugin": st.plugin}
    wp = scheduler.waiting_pods.of(pod)
    if wp is not None:
        plugins = {pl.name: pl for pl in fwk.permit}
        out["waitingOn"] = {name: {"timeoutSeconds": wp.timeouts[name],
                                   "reason": plugins[name].wait_reason(pod) if name in plugins else ""}
                            for name in wp.get_pending_plugins()}
        scheduler.waiting_pods.remove(wp)
    fwk.run_unreserve(state, pod, node)
    pod = cluster.unbind(pod)
    if not known:
        cluster.delete(pod)
    return out
