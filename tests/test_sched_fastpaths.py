"""The scheduler's fast paths agree with the plain ones: vectorised vs per-node plugin forms on random
clusters, segment-wise node search vs a full pass, and the resource memo shared by pods of one shape."""

from __future__ import annotations

import random
import sys
from typing import Any

import numpy as np
import pytest

from kubesched.api.objects import parse_node, parse_pod
from kubesched.api.resources import non_zero_request, pod_requests, scheduler_request
from kubesched.cluster.state import ClusterState
from kubesched.config.scheduler_config import parse_scheduler_config
from kubesched.scheduler.framework import CycleState
from kubesched.scheduler.plugins import resource_allocation as ra
from kubesched.scheduler.scheduler import Diagnosis, Scheduler

PLUGINS = ["PrioritySort", "NodeResourcesFit", "NodeResourcesBalancedAllocation", "DefaultBinder"]


def _node(i: int, rnd: random.Random) -> dict[str, Any]:
    cpu = rnd.choice(["0", "1", "2", "4", "3500m"]) if i % 7 == 3 else rnd.choice(["1", "2", "4", "3500m"])
    mem = rnd.choice(["1Gi", "4Gi", "8Gi", "0"]) if i % 11 == 5 else rnd.choice(["1Gi", "4Gi", "8Gi"])
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
            "status": {"allocatable": {"cpu": cpu, "memory": mem, "pods": rnd.choice(["3", "110"])}}}


def _pod(name: str, rnd: random.Random, node: str = "") -> dict[str, Any]:
    req: dict[str, str] = {}
    if rnd.random() < 0.8:
        req["cpu"] = rnd.choice(["100m", "250m", "1", "1500m"])
    if rnd.random() < 0.8:
        req["memory"] = rnd.choice(["100Mi", "512Mi", "1Gi", "3Gi"])
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": req}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def _scheduler(seed: int, strategy: str = "LeastAllocated") -> tuple[Scheduler, random.Random]:
    rnd = random.Random(seed)
    cluster = ClusterState()
    for i in range(40):
        cluster.add(parse_node(_node(i, rnd)))
    for j in range(60):
        cluster.add(parse_pod(_pod(f"e{j}", rnd, f"n{rnd.randrange(40)}")))
    cfg = parse_scheduler_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"plugins": {"multiPoint": {"disabled": [{"name": "*"}], "enabled": [{"name": n} for n in PLUGINS]}},
                      "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": strategy}}}]}]})
    return Scheduler(cluster, cfg), rnd


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("strategy", ["LeastAllocated", "MostAllocated"])
def test_vectorised_and_per_node_forms_agree(seed: int, strategy: str) -> None:
    sched, rnd = _scheduler(seed, strategy)
    fwk = sched.frameworks["default-scheduler"]
    rows = sched.cluster.node_order()
    for k in range(10):
        pod = parse_pod(_pod(f"p{k}", rnd))
        for name in ("NodeResourcesFit", "NodeResourcesBalancedAllocation"):
            pl: Any = fwk.plugins[name]
            state = CycleState()
            if name == "NodeResourcesFit":
                pl.pre_filter(state, pod, sched.cluster)
                mask = pl.filter_nodes(state, pod, sched.cluster, rows)
                per_node = [pl.filter(state, pod, sched.cluster.node_infos[r]).is_success for r in rows]
                assert mask.tolist() == per_node
            if not pl.pre_score(state, pod, sched.cluster, rows).is_success:
                continue
            vec = pl.score_nodes(state, pod, sched.cluster, rows)
            one = [pl.score(state, pod, sched.cluster.node_infos[r])[0] for r in rows]
            assert vec.tolist() == one, (name, pod.key)
            # The promise that lets the framework skip its range check for these plugins.
            assert pl.scores_in_range and all(0 <= v <= 100 for v in one), (name, pod.key)


def test_a_score_out_of_range_is_an_error_for_plugins_that_do_not_promise_the_range() -> None:
    sched, rnd = _scheduler(0)
    fwk = sched.frameworks["default-scheduler"]
    rows = sched.cluster.node_order()
    pod = parse_pod(_pod("p", rnd))
    pl: Any = fwk.plugins["NodeResourcesBalancedAllocation"]
    state = CycleState()
    assert fwk.run_pre_score(state, pod, rows).is_success
    good, st = fwk.run_score(state, pod, rows, detail=False)
    assert st.is_success
    detailed, st = fwk.run_score(state, pod, rows, detail=True)
    assert st.is_success and detailed.total is not None and good.total is not None
    assert detailed.total.tolist() == good.total.tolist() == sum(detailed.weighted.values()).tolist()
    pl.scores_in_range = False  # as an out-of-tree plugin would be
    pl.score_nodes = lambda *a: np.full(len(rows), 101, dtype=np.int64)
    for detail in (False, True):
        _, st = fwk.run_score(state, pod, rows, detail=detail)
        assert st.code.name == "ERROR" and st.plugin == "NodeResourcesBalancedAllocation"
        assert st.message == ("plugin 'NodeResourcesBalancedAllocation' returns an invalid score 101, it should in "
                              "the range of [0, 100] after normalizing")


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n_shapes", [3, 30])
def test_row_caches_follow_every_change(seed: int, n_shapes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pods of a few shapes, checked again after binds, deletions and node changes: the per-row caches
    must give what the per-node forms give on the current cluster. With many shapes, a shape comes back
    after more changes than the row-by-row form takes (the vectorised catch-up, its rows shared by the
    caches read in a row)."""
    batches = []
    real = ra._pending_array
    monkeypatch.setattr(ra, "_pending_array", lambda p: batches.append(len(p.rows)) or real(p))
    sched, rnd = _scheduler(seed)
    cluster = sched.cluster
    fwk = sched.frameworks["default-scheduler"]
    shapes = [_pod(f"shape{i}", rnd) for i in range(n_shapes)]
    for step in range(40 if n_shapes == 3 else 150):
        # Two pods between changes: caches of different shapes are read at one length of the change log.
        for other in ("", "-b"):
            raw = dict(rnd.choice(shapes), metadata={"name": f"s{step}{other}", "namespace": "default"})
            pod = parse_pod(raw)
            rows = cluster.node_order()
            for name in ("NodeResourcesFit", "NodeResourcesBalancedAllocation"):
                pl: Any = fwk.plugins[name]
                state = CycleState()
                if name == "NodeResourcesFit":
                    pl.pre_filter(state, pod, cluster)
                    assert pl.filter_nodes(state, pod, cluster, rows).tolist() == [
                        pl.filter(state, pod, cluster.node_infos[r]).is_success for r in rows]
                if pl.pre_score(state, pod, cluster, rows).is_success:
                    assert pl.score_nodes(state, pod, cluster, rows).tolist() == [
                        pl.score(state, pod, cluster.node_infos[r])[0] for r in rows]
        action = rnd.random()
        if action < 0.5:
            cluster.add(pod)
            cluster.bind(pod, f"n{rnd.randrange(40)}")
        elif action < 0.7:
            assigned = [p for p in cluster.pods.values() if p.node_name]
            cluster.delete(rnd.choice(assigned))
        elif action < 0.85:
            cluster.update(parse_node(_node(rnd.randrange(40), rnd)))
        elif action < 0.95:
            cluster.add(parse_node(_node(40 + step, rnd)))
        else:
            i = rnd.randrange(40)
            cluster.delete(cluster.nodes[f"n{i}"])  # a new table without it, then the node again
            cluster.add(parse_node(_node(i, rnd)))
    if n_shapes > 3:
        assert batches and max(batches) > 8


def test_row_numbers_follow_the_table() -> None:
    """The scalar forms' row numbers, read once per row between changes, are the table's current numbers:
    after a bind, a deletion, a node update, a new resource column and a reset change log."""
    rnd = random.Random(3)
    cluster = ClusterState()
    for i in range(5):
        cluster.add(parse_node(_node(i, rnd)))
    t = cluster.table

    def check() -> None:
        for r in range(t.n):
            rn = ra.row_numbers(t, r)
            assert (rn.pod_count, rn.allowed_pods) == (int(t.pod_count[r]), int(t.allowed_pods[r]))
            assert rn.requested == t.requested[r].tolist() and rn.alloc == t.alloc[r].tolist()
            assert rn.non_zero == t.non_zero[r].tolist()

    check()
    before = ra.row_numbers(t, 2)
    assert ra.row_numbers(t, 2) is before  # read once while nothing changes
    pod = parse_pod(_pod("p", rnd))
    cluster.add(pod)
    cluster.bind(pod, "n2")
    assert ra.row_numbers(t, 2) is not before
    check()
    cluster.delete(cluster.pods[pod.key])
    check()
    cluster.update(parse_node(_node(1, rnd)))
    check()
    width = len(t.resources)
    raw = _node(3, rnd)
    raw["status"]["allocatable"]["example.com/gpu"] = "2"
    cluster.update(parse_node(raw))
    assert len(t.resources) == width + 1
    check()
    t.changed_rows.extend([0] * ((1 << 16) - len(t.changed_rows)))  # the next change starts a new log
    cluster.update(parse_node(_node(0, rnd)))
    assert len(t.changed_rows) == 1
    check()


def test_column_fast_paths_equal_the_matrix_forms() -> None:
    rng = np.random.default_rng(1)
    alloc = rng.integers(1, 10_000, size=(300, 2))
    req = rng.integers(0, 12_000, size=(300, 2))
    weights = np.array([3, 1])
    cols = [(req[:, 0], alloc[:, 0]), (req[:, 1], alloc[:, 1])]
    assert ra.least_allocated_columns(cols, weights).tolist() == ra.least_allocated(req, alloc, weights).tolist()
    assert ra.balanced_columns(cols).tolist() == ra.balanced(req, alloc).tolist()
    alloc3 = rng.integers(1, 10_000, size=(300, 3))
    req3 = rng.integers(0, 12_000, size=(300, 3))
    cols3 = [(req3[:, j], alloc3[:, j]) for j in range(3)]
    assert ra.balanced_columns(cols3).tolist() == ra.balanced(req3, alloc3).tolist()


def test_segmented_search_finds_what_a_full_pass_finds() -> None:
    # 150 nodes (so 100 must be found), most full: the search needs several segments.
    cluster = ClusterState()
    for i in range(150):
        cluster.add(parse_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i:03d}"},
                                "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "110"}}}))
        if i % 3:
            cluster.add(parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"f{i}", "namespace": "d"},
                                   "spec": {"nodeName": f"n{i:03d}", "containers": [
                                       {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}))
    sched = Scheduler(cluster, parse_scheduler_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"plugins": {"multiPoint": {"disabled": [{"name": "*"}],
                                                 "enabled": [{"name": n} for n in PLUGINS]}}}]}))
    fwk = sched.frameworks["default-scheduler"]
    pod = parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "d"},
                     "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}})
    for start in (0, 7, 149):
        sched.next_start_node_index = start
        feasible, processed = sched.find_nodes_that_fit(fwk, CycleState(), pod, Diagnosis())
        order = np.roll(cluster.node_order(), -start)
        mask = fwk.filter_mask(CycleState(), pod, order)
        assert feasible.tolist() == order[mask].tolist() and processed == 150
        assert sched.next_start_node_index == start


def test_resource_memo_is_per_shape() -> None:
    def mk(name: str, cpu: str, mem: str | None = None) -> Any:
        req = {"cpu": cpu} | ({"memory": mem} if mem else {})
        return parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                          "spec": {"containers": [{"name": "c", "resources": {"requests": req}}]}})

    a, b, c = mk("a", "250m", "1Gi"), mk("b", "250m", "1Gi"), mk("c", "0.25", "1Gi")
    d = mk("d", "250m")
    assert scheduler_request(a) is scheduler_request(b)
    assert scheduler_request(c) == scheduler_request(a)
    assert scheduler_request(d) == {"cpu": 250}
    assert non_zero_request(d) == (250, 200 * 1024 * 1024)
    assert non_zero_request(a) == (250, 1024**3)
    assert pod_requests(d)["cpu"] * 1000 == 250
    # A later pod of a shape finds what earlier pods of it worked out already in its own memo; values of
    # another shape never reach it.
    e, f = mk("e", "250m", "1Gi"), mk("f", "300m", "1Gi")
    non_zero_request(e)
    assert e.cache["sched_request"] is scheduler_request(a) and e.cache["non_zero"] == (250, 1024**3)
    assert scheduler_request(f) == {"cpu": 300, "memory": 1024**3} and non_zero_request(f) == (300, 1024**3)


@pytest.mark.parametrize("seed", range(4))
def test_image_locality_scores_lie_in_range_and_match_the_per_node_form(seed: int) -> None:
    """ImageLocality promises scores in [0, 100] (the framework skips its range check for it): images from
    a few bytes to many times maxThreshold, pods of zero to three containers, shared and missing images."""
    rnd = random.Random(seed)
    cluster = ClusterState()
    names = [f"reg.io/img{i}:v1" for i in range(6)]
    for i in range(30):
        images = [{"names": [n], "sizeBytes": rnd.choice([1, 10**6, 23 * 2**20, 300 * 2**20, 1000 * 2**20, 50 * 2**30])}
                  for n in rnd.sample(names, rnd.randrange(0, 5))]
        cluster.add(parse_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
                                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                                           "images": images}}))
    cfg = parse_scheduler_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                                  "profiles": [{"plugins": {"multiPoint": {"disabled": [{"name": "*"}], "enabled": [
                                      {"name": "PrioritySort"}, {"name": "ImageLocality"}, {"name": "DefaultBinder"}]}}}]})
    sched = Scheduler(cluster, cfg)
    pl: Any = sched.frameworks["default-scheduler"].plugins["ImageLocality"]
    rows = cluster.node_order()
    for k in range(12):
        containers = [{"name": f"c{j}", "image": rnd.choice(names + ["other:1"])} for j in range(rnd.randrange(0, 4))]
        pod = parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{k}"},
                         "spec": {"containers": containers}})
        state = CycleState()
        vec = pl.score_nodes(state, pod, cluster, rows).tolist()
        one = [pl.score(state, pod, cluster.node_infos[r])[0] for r in rows]
        assert vec == one and pl.scores_in_range and all(0 <= v <= 100 for v in one)


def test_scheduler_perf_bench_runs_and_places_every_pod(capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "bench" / "scheduler_perf.py"
    spec = importlib.util.spec_from_file_location("scheduler_perf_bench", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    assert mod.main(["--scale", "0.004"]) == 0
    out = capsys.readouterr().out
    for name in ("SchedulingBasic", "SchedulingNodeAffinity", "TopologySpreading", "SchedulingPodAntiAffinity",
                 "SchedulingDaemonSet"):
        assert name in out
    assert "FAILED" not in out and "peak memory:" in out


def test_rounding_of_non_negative_values_is_gos_math_round() -> None:
    from kubesched.scheduler.plugins.gomath import go_round, go_round_array, go_round_nonnegative

    rng = np.random.default_rng(3)
    # Halves, values just beside them, zero, large values and PodTopologySpread-like sums.
    x = np.concatenate([np.arange(0, 50, 0.5), np.nextafter(np.arange(0.5, 50, 1.0), 0), [0.0, 2.0**52 + 1],
                        rng.integers(0, 500, 200) * np.log(rng.integers(1, 5000, 200) + 2.0) + 4.0])
    got = go_round_nonnegative(x)
    assert got.tolist() == go_round_array(x).tolist() == [float(go_round(float(v))) for v in x]
    inplace = x.copy()
    assert go_round_nonnegative(inplace, out=inplace) is inplace and inplace.tobytes() == got.tobytes()


def test_taint_toleration_scores_when_no_node_has_a_prefer_no_schedule_taint_it_does_not_tolerate() -> None:
    """The all-zero shortcut (no look at the scores in NormalizeScore) gives what DefaultNormalizeScore gives
    on the per-node scores, before and after a node gains a PreferNoSchedule taint."""
    cluster = ClusterState()
    for i in range(6):
        taints = [{"key": "k", "value": "v", "effect": "PreferNoSchedule"}] if i == 4 else []
        cluster.add(parse_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
                                "spec": {"taints": taints},
                                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}))
    cfg = parse_scheduler_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                                  "profiles": [{"plugins": {"multiPoint": {"disabled": [{"name": "*"}], "enabled": [
                                      {"name": "PrioritySort"}, {"name": "TaintToleration"}, {"name": "DefaultBinder"}]}}}]})
    sched = Scheduler(cluster, cfg)
    fwk = sched.frameworks["default-scheduler"]
    pl: Any = fwk.plugins["TaintToleration"]
    rows = cluster.node_order()
    tolerant = parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "t"},
                          "spec": {"containers": [{"name": "c"}], "tolerations": [{"key": "k", "operator": "Exists"}]}})
    plain = parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}})
    from kubesched.scheduler.plugins.helper import default_normalize_score

    for pod, want in ((tolerant, [100] * 6), (plain, [100, 100, 100, 100, 0, 100])):
        state = CycleState()
        assert fwk.run_pre_score(state, pod, rows).is_success
        per_node = np.array([pl.score(state, pod, cluster.node_infos[r])[0] for r in rows], dtype=np.int64)
        default_normalize_score(per_node, reverse=True)
        for detail in (False, True):
            got, st = fwk.run_score(state, pod, rows, detail=detail)
            assert st.is_success and got.total is not None
            assert got.total.tolist() == per_node.tolist() == [want[r] for r in rows]
        # Scores that did not come from the shortcut are normalised by looking at them, in the same state.
        other = np.array([0, 2, 1, 0, 0, 0], dtype=np.int64)
        pl.normalize_score(state, pod, other, rows)
        assert other.tolist() == [100, 0, 50, 100, 100, 100]
