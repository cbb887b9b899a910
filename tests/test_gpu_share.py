"""GPU sharing: the device table, the GPU-share Filter/Reserve, the six FGD-paper policies (hand-checked
scores, vectorised and per-node forms agreeing), the fragmentation measure, the target workload and the
allocation recorder's samples."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from kubesched.api.objects import parse_node, parse_pod
from kubesched.cluster.gpu import (
    GPU_INDEX,
    GpuTable,
    TypicalPod,
    gpu_request,
    model_allows,
    parse_gpu_index,
    with_gpu_index,
)
from kubesched.cluster.gpufrag import FragCache, TargetTable, fragmentation, typical_pods
from kubesched.cluster.state import ClusterState
from kubesched.config.scheduler_config import load_scheduler_config, parse_scheduler_config
from kubesched.errors import InputError
from kubesched.scheduler.framework import CycleState
from kubesched.scheduler.scheduler import Scheduler
from kubesched.sim.gpu_allocation import GpuAllocationRecorder

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ROOT / "examples" / "openb" / "variants"
POLICIES = ["random", "dot-product", "gpu-clustering", "gpu-packing", "best-fit", "fgd"]
PLUGIN = {"random": "RandomScore", "dot-product": "DotProductScore", "gpu-clustering": "GpuClusteringScore",
          "gpu-packing": "GpuPackingScore", "best-fit": "BestFitScore", "fgd": "FGDScore"}
REALWORLD = ROOT.parent / "shared" / "realworld" / "docs"


def node(name: str, gpus: int, model: str = "V100", cpu: str = "64", memory: str = "256Gi") -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus:
        alloc.update({"alibabacloud.com/gpu-count": str(gpus), "alibabacloud.com/gpu-milli": str(1000 * gpus)})
    labels = {"alibabacloud.com/gpu-card-model": model} if gpus else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"capacity": dict(alloc), "allocatable": dict(alloc)}}


def pod(name: str, cpu: str = "4", milli: int = 0, count: int = 0, model: str = "", memory: str = "8Gi",
        node_name: str = "", index: str | None = None) -> dict[str, Any]:
    ann: dict[str, str] = {}
    if count:
        ann = {"alibabacloud.com/gpu-milli": str(milli), "alibabacloud.com/gpu-count": str(count)}
        if model:
            ann["alibabacloud.com/gpu-card-model"] = model
    if index is not None:
        ann[GPU_INDEX] = index
    spec: dict[str, Any] = {"schedulerName": "simon-scheduler",
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "annotations": ann},
            "spec": spec}


def scheduler_for(policy: str, cluster: ClusterState, seed: int = 0, tie_break: str = "random") -> Scheduler:
    cfg = parse_scheduler_config(yaml.safe_load((VARIANTS / f"{policy}.yaml").read_text()), f"{policy}.yaml")
    return Scheduler(cluster, cfg, seed=seed, tie_break=tie_break)


# ---------------------------------------------------------------- the device table


def test_annotations_are_read_as_upstream() -> None:
    p = parse_pod(pod("p", milli=300, count=1, model="V100M16|V100M32"))
    req = gpu_request(p)
    assert (req.milli, req.count, req.model, req.is_share, req.affinity) == (300, 1, "V100M16|V100M32", True, "share-gpu")
    assert gpu_request(parse_pod(pod("w", milli=1000, count=4))).affinity == "4-gpu"
    assert gpu_request(parse_pod(pod("c"))).affinity == "no-gpu"
    assert parse_gpu_index("0-2-3") == (0, 2, 3) and parse_gpu_index("x") is None and parse_gpu_index("") == ()
    assert model_allows("V100M16", "V100M16|V100M32") and not model_allows("T4", "V100M16|V100M32")
    assert model_allows("T4", "") and not model_allows("", "T4")


def test_device_table_follows_cluster_events() -> None:
    c = ClusterState()
    c.add(parse_node(node("n0", 2)))
    gpu = GpuTable.of(c)
    assert gpu.left[0].tolist() == [1000, 1000] and gpu.capacity_milli == 2000
    p = parse_pod(pod("a", milli=300, count=1))
    c.add(p)
    c.bind(p, "n0")
    assert gpu.used_milli == 0  # bound, but no devices recorded yet (Reserve writes them)
    cur = c.pods[p.key]
    c.update(with_gpu_index(cur, (1,)))
    assert gpu.left[0].tolist() == [1000, 700] and gpu.used_milli == 300 and gpu.devices(p.key) == (1,)
    assert GPU_INDEX not in cur.meta.annotations  # the object handed out was not changed
    c.update(with_gpu_index(c.pods[p.key], (0,)))
    assert gpu.left[0].tolist() == [700, 1000]
    c.unbind(c.pods[p.key])
    assert gpu.left[0].tolist() == [1000, 1000] and gpu.used_milli == 0
    q = parse_pod(pod("b", milli=1000, count=2, node_name="n0", index="0-1"))
    c.add(q)
    assert gpu.left[0].tolist() == [0, 0] and gpu.tags[0, gpu.tag_col("2-gpu")] == 1
    c.delete(c.pods[q.key])
    assert gpu.left[0].tolist() == [1000, 1000] and gpu.tags[0].sum() == 0
    c.add(parse_node(node("n1", 8, "T4")))
    assert gpu.left[1].tolist() == [1000] * 8 and gpu.models[int(gpu.model_code[1])] == "T4"
    c.delete(c.nodes["n0"])  # rows are renumbered: the table rebuilds
    assert gpu.count[: c.num_nodes].tolist() == [8]



def test_allocation_is_sampled_after_each_pod_and_not_before_the_first() -> None:
    # Upstream (pkg/simulator/core.go, analysis.go) logs one [Alloc] line after each pod; its report before
    # the first pod finds no nodes and logs nothing. 8 GPUs: 1 % of demand is 80 milli-GPU.
    c = ClusterState()
    c.add(parse_node(node("n0", 8)))
    rec = GpuAllocationRecorder(c, fragmentation=False)
    for name, milli, count, devices in [("cpu", 0, 0, ()), ("share", 24, 1, (0,)), ("whole", 1000, 1, (1,))]:
        p = parse_pod(pod(name, milli=milli, count=count))
        c.add(p)
        c.bind(p, "n0")
        if devices:
            c.update(with_gpu_index(c.pods[p.key], devices))
    out = rec.finish()
    assert out["arrived"] == [0, 24, 1024] and out["used"] == [0, 24, 1024]
    curve = out["allocation_curve"]
    # arrived 0 % and 0.3 % fall on point 0: mean(0, 0.3); a sample before the first pod would give 0.1
    assert curve[0] == 0.15 and curve[13] == 12.8 and curve[1] == 0.15 and curve[2] is None
    assert GpuAllocationRecorder(ClusterState(), fragmentation=False).finish()["arrived"] == []


def _random_cluster(rnd: random.Random) -> ClusterState:
    c = ClusterState()
    for i in range(12):
        gpus = rnd.choice([0, 1, 2, 4, 8])
        c.add(parse_node(node(f"n{i}", gpus, rnd.choice(["V100M16", "V100M32", "T4"]), cpu=rnd.choice(["16", "64"]))))
    return c


def _random_pod(i: int, rnd: random.Random) -> dict[str, Any]:
    kind = rnd.random()
    model = rnd.choice(["", "", "", "V100M16|V100M32", "T4"])
    if kind < 0.2:
        return pod(f"p{i}", cpu=rnd.choice(["1", "4", "8"]))
    if kind < 0.6:
        return pod(f"p{i}", cpu=rnd.choice(["1", "4"]), milli=rnd.choice([100, 250, 500, 700]), count=1, model=model)
    return pod(f"p{i}", cpu=rnd.choice(["2", "8"]), milli=1000, count=rnd.choice([1, 1, 2, 4, 8]), model=model)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("seed", range(3))
def test_device_assignment_invariants(policy: str, seed: int) -> None:
    """A share never crosses a device, whole-GPU pods take whole devices, the model constraint holds, and
    the table's free milli-GPU is what the pods' recorded devices leave."""
    rnd = random.Random(seed)
    c = _random_cluster(rnd)
    sched = scheduler_for(policy, c, seed)
    for i in range(120):
        c.add(parse_pod(_random_pod(i, rnd)))
    sched.enqueue_pending()
    sched.run_until_idle()
    gpu = GpuTable.of(c)
    used: dict[tuple[str, int], list[tuple[str, int]]] = {}
    placed = 0
    for p in c.pods.values():
        req = gpu_request(p)
        if not p.node_name or req.milli == 0:
            continue
        placed += 1
        info = c.node_info_by_name[p.node_name]
        devs = parse_gpu_index(p.meta.annotations[GPU_INDEX])
        assert devs is not None and len(devs) == req.count and len(set(devs)) == len(devs)
        assert all(0 <= d < int(gpu.count[info.index]) for d in devs)
        assert model_allows(info.node.labels.get("alibabacloud.com/gpu-card-model", ""), req.model)
        for d in devs:
            used.setdefault((p.node_name, d), []).append((p.key, req.milli))
    assert placed > 20
    for (name, d), holders in used.items():
        row = c.node_info_by_name[name].index
        total = sum(m for _, m in holders)
        assert total <= 1000, (name, d, holders)
        assert int(gpu.left[row, d]) == 1000 - total
        if any(m == 1000 for _, m in holders):
            assert len(holders) == 1  # a whole GPU is not shared
    assert gpu.used_milli == sum(m for holders in used.values() for _, m in holders)


@pytest.mark.parametrize("policy", POLICIES)
def test_vectorised_and_per_node_forms_agree(policy: str) -> None:
    rnd = random.Random(7)
    c = _random_cluster(rnd)
    sched = scheduler_for(policy, c, 3)
    for i in range(60):
        c.add(parse_pod(_random_pod(i, rnd)))
    sched.enqueue_pending()
    sched.run_until_idle()
    fwk = sched.frameworks["simon-scheduler"]
    share = fwk.plugins["Open-Gpu-Share"]
    score = fwk.plugins[PLUGIN[policy]]
    rows = c.node_order()
    for k in range(40):
        p = parse_pod(_random_pod(1000 + k, rnd))
        state = CycleState()
        mask = share.filter_nodes(state, p, c, rows)  # type: ignore[attr-defined]
        per = [share.filter(state, p, c.node_infos[r]).is_success for r in rows]
        assert mask.tolist() == per
        feasible = rows[mask]
        if not len(feasible):
            continue
        if policy == "random":
            score.pre_score(state, p, c, feasible)  # type: ignore[attr-defined]
        vec = score.score_nodes(state, p, c, feasible)
        one = [score.score(state, p, c.node_infos[r])[0] for r in feasible]
        if vec is not None:
            assert vec.tolist() == one, (policy, p.key)


# ---------------------------------------------------------------- hand-checked scores


def _cluster(*nodes: dict[str, Any], pods: tuple[dict[str, Any], ...] = ()) -> ClusterState:
    c = ClusterState()
    for n in nodes:
        c.add(parse_node(n))
    for p in pods:
        c.add(parse_pod(p))
    return c


def _scores(policy: str, c: ClusterState, p: dict[str, Any]) -> list[int]:
    sched = scheduler_for(policy, c)
    pl = sched.frameworks["simon-scheduler"].plugins[PLUGIN[policy]]
    obj = parse_pod(p)
    return [pl.score(CycleState(), obj, info)[0] for info in c.node_infos]


def test_gpu_packing_scores() -> None:
    # idle 2-GPU node; a node with a 700m share on device 0; a node whose partly used device is too small
    c = _cluster(node("idle", 2), node("used", 4), node("small", 2),
                 pods=(pod("x", milli=700, count=1, node_name="used", index="0"),
                       pod("y", milli=900, count=1, node_name="small", index="0")))
    share = pod("s", milli=200, count=1)
    # idle: max(33 - 2, 2) = 31; used: device 0 has 300 free, 100 - (300*100/1000)/10 = 97;
    # small: device 0 (100 free) cannot take 200, a fully free one is used: max(50 - 1, 33) = 49
    assert _scores("gpu-packing", c, share) == [31, 97, 49]
    assert _scores("gpu-packing", c, pod("w", milli=1000, count=1)) == [31, 49, 49]
    assert _scores("gpu-packing", c, pod("cpu-only")) == [0, 0, 0]


def test_best_fit_and_dot_product_scores() -> None:
    c = _cluster(node("a", 2, cpu="32"), node("b", 8, cpu="128"))
    p = pod("p", cpu="4", milli=500, count=1)
    # a: (28000/128000 × 0.5 + 1500/8000 × 0.5) = 0.203125 → int(79.6875) = 79;
    # b: (124000/128000 × 0.5 + 7500/8000 × 0.5) = 0.953125 → 4
    assert _scores("best-fit", c, p) == [79, 4]
    # normalised over the two: (79 − 4) × 100 / 75 = 100, and 0
    sched = scheduler_for("best-fit", c)
    pl = sched.frameworks["simon-scheduler"].plugins["BestFitScore"]
    s = np.array([79, 4], dtype=np.int64)
    pl.normalize_score(CycleState(), parse_pod(p), s, np.arange(2))
    assert s.tolist() == [100, 0]
    # dot product (merge, max): a: [0.25, 0.25]·[0.03125, 0.0625] / 2 = 0.01171875 → 98;
    # b: [1, 1]·[0.03125, 0.0625] / 2 = 0.046875 → 95
    assert _scores("dot-product", c, p) == [98, 95]


def test_gpu_clustering_scores() -> None:
    c = _cluster(node("empty", 4), node("shares", 2), node("whole", 2),
                 pods=(pod("s", milli=500, count=1, node_name="shares", index="0"),
                       pod("w", milli=1000, count=1, node_name="whole", index="0")))
    # empty: 25 × 4000 / 8000 = 12, + 25; shares: 25 × 6500 / 8000 = 20, + 75 (only shares);
    # whole: 25 × 7000 / 8000 = 21, + 0 (only other kinds)
    assert _scores("gpu-clustering", c, pod("p", milli=300, count=1)) == [37, 95, 21]
    assert _scores("gpu-clustering", c, pod("q")) == [0, 0, 0]


def test_fgd_scores_and_device_choice() -> None:
    c = _cluster(node("free", 2), node("part", 2), pods=(pod("x", milli=300, count=1, node_name="part", index="0"),))
    GpuTable.of(c).target = (TypicalPod(1000, 500, 1, "", 1.0),)
    p = pod("p", cpu="1", milli=600, count=1)
    # target: one share of 500. free [1000, 1000]: before 0; after [400, 1000]: 400 free on a device too small
    # → sigmoid(-0.4) × 100 = 40. part [700, 1000]: 600 on device 0 leaves 100 → sigmoid(-0.1) → 47;
    # on device 1 leaves 400 → 40: the node scores 47 and Reserve takes device 0.
    assert _scores("fgd", c, p) == [40, 47]
    sched = scheduler_for("fgd", c)
    c.add(parse_pod(p))
    sched.enqueue_pending()
    sched.run_until_idle()
    placed = c.pods["default/p"]
    assert placed.node_name == "part" and placed.meta.annotations[GPU_INDEX] == "0"


def test_random_score_picks_one_feasible_node() -> None:
    c = _cluster(node("a", 2), node("b", 2), node("c", 2))
    sched = scheduler_for("random", c, seed=5)
    pl = sched.frameworks["simon-scheduler"].plugins["RandomScore"]
    state = CycleState()
    p = parse_pod(pod("p", milli=500, count=1))
    rows = c.node_order()
    assert pl.pre_score(state, p, c, rows).is_success  # type: ignore[attr-defined]
    scores = pl.score_nodes(state, p, c, rows)
    assert scores is not None and sorted(scores.tolist()) == [0, 0, 100]
    _, st = pl.score(CycleState(), p, c.node_infos[0])
    assert not st.is_success  # without PreScore upstream's Score fails


# ---------------------------------------------------------------- fragmentation and the target workload


def test_fragmentation_hand_checked() -> None:
    c = _cluster(node("n", 2, cpu="8"), pods=(pod("x", milli=700, count=1, node_name="n", index="1"),))
    gpu = GpuTable.of(c)
    target = (TypicalPod(4000, 0, 0, "", 0.5), TypicalPod(1000, 500, 1, "", 0.5))
    tt = TargetTable(target)
    rows = np.array([0])
    # free [1000, 300], CPU left 4000: the CPU-only pod leaves all 1300 idle (0.5 × 1300 = 650);
    # the 500 share fits, and the 300 left on device 1 is too small for it (0.5 × 300 = 150)
    f = fragmentation(tt, gpu, gpu.cpu_left(rows), gpu.left[rows], gpu.model_code[rows])
    assert f.tolist() == [800.0]
    cats = fragmentation(tt, gpu, gpu.cpu_left(rows), gpu.left[rows], gpu.model_code[rows], breakdown=True)
    assert cats[0].tolist() == [0.0, 150.0, 500.0, 0.0, 650.0, 0.0, 0.0]
    gpu.target = target
    assert FragCache.of(gpu).cluster_total() == 800.0


def test_typical_pods_threshold_and_order() -> None:
    shapes = [(1000, 500, 1, "")] * 5 + [(2000, 1000, 1, "")] * 3 + [(4000, 0, 0, "")] + [(8000, 1000, 8, "")]
    out = typical_pods(shapes, popularity_threshold=80)
    assert [(p.cpu, p.milli, p.count) for p in out] == [(1000, 500, 1), (2000, 1000, 1)]
    assert [round(p.freq, 6) for p in out] == [0.625, 0.375]
    everything = typical_pods(shapes, popularity_threshold=100)
    # ties in count (one pod each) sort by CPU, descending
    assert [p.cpu for p in everything] == [1000, 2000, 8000, 4000] and abs(sum(p.freq for p in everything) - 1) < 1e-12
    assert typical_pods([(1000, 0, 0, "")] * 3, include_cpu_pods=False) == ()


# ---------------------------------------------------------------- configuration


def test_published_config_is_accepted_and_used() -> None:
    """The published simulator's own example (v1beta1, Open-Gpu-Share, FGDScore, Simon binder) schedules its
    own example cluster."""
    cfg = load_scheduler_config(str(REALWORLD / "hkust__example_test-scheduler-config.yaml"))
    prof = cfg.profiles[0]
    assert prof.scheduler_name == "simon-scheduler"
    assert [(r.name, r.weight) for r in prof.plugins["score"].enabled] == [("FGDScore", 1000)]
    c = ClusterState()
    for f in ("node_pai-node-00", "node_pai-node-01"):
        c.add(parse_node(yaml.safe_load((REALWORLD / f"hkust__example_test-cluster_{f}.yaml").read_text())))
    sched = Scheduler(c, cfg, seed=1)
    for f in ("pod_gpu-pod-00", "pod_gpu-pod-01", "pod_gpu-pod-02"):
        raw = yaml.safe_load((REALWORLD / f"hkust__example_test-cluster_{f}.yaml").read_text())
        raw["spec"]["schedulerName"] = "simon-scheduler"  # what the simulator's MakeValidPod sets
        c.add(parse_pod(raw))
    sched.enqueue_pending()
    sched.run_until_idle()
    placed = {p.name: (p.node_name, p.meta.annotations.get(GPU_INDEX)) for p in c.pods.values()}
    assert all(n for n, _ in placed.values())
    assert placed["gpu-pod-02"][1] is not None and len(placed["gpu-pod-02"][1].split("-")) == 2
    assert GpuTable.of(c).used_milli == 2500


def test_v1beta1_defaults_and_translations() -> None:
    cfg = parse_scheduler_config({"apiVersion": "kubescheduler.config.k8s.io/v1beta1",
                                  "kind": "KubeSchedulerConfiguration",
                                  "profiles": [{"plugins": {"score": {"disabled": [{"name": "NodeResourcesLeastAllocated"}],
                                                                      "enabled": [{"name": "NodeResourcesMostAllocated",
                                                                                   "weight": 2}]}}}]})
    prof = cfg.profiles[0]
    score = {r.name: r.weight for r in prof.plugins["score"].enabled}
    assert score["NodeResourcesFit"] == 2 and "NodePreferAvoidPods" not in score
    assert prof.plugin_config["NodeResourcesFit"]["scoringStrategy"]["type"] == "MostAllocated"
    assert "EBSLimits" not in [r.name for r in prof.plugins["filter"].enabled]
    Scheduler(ClusterState(), cfg)  # builds
    with pytest.raises(InputError, match="multiPoint"):
        parse_scheduler_config({"apiVersion": "kubescheduler.config.k8s.io/v1beta1",
                                "kind": "KubeSchedulerConfiguration", "profiles": [{"plugins": {"multiPoint": {}}}]})


@pytest.mark.parametrize("args,message", [
    ({"gpuSelMethod": "tightest"}, "neither best, worst nor random"),
    ({"gpuSelMethod": "best", "dimExtMethod": "fold"}, "expected one of merge, share, divide, extend"),
    ({"gpuSelMethod": "best", "color": "red"}, "unknown field 'color'"),
])
def test_gpu_share_args_are_validated(args: dict[str, Any], message: str) -> None:
    raw = yaml.safe_load((VARIANTS / "best-fit.yaml").read_text())
    raw["profiles"][0]["pluginConfig"][1]["args"] = args
    with pytest.raises(InputError, match=message) as e:
        Scheduler(ClusterState(), parse_scheduler_config(raw, "v.yaml"))
    assert "pluginConfig[Open-Gpu-Share].args" in str(e.value)


def test_tie_break_by_seeded_node_order() -> None:
    """Equal scores: the published fork takes the same node every time (a fixed order drawn from the seed);
    kube-scheduler draws among them."""
    def picks(tie_break: str, seed: int) -> set[str]:
        out = set()
        for k in range(30):
            c = _cluster(*[node(f"n{i}", 2) for i in range(6)])
            sched = scheduler_for("gpu-packing", c, seed=seed * 100 + k if tie_break == "random" else seed,
                                  tie_break=tie_break)
            c.add(parse_pod(pod("p", milli=1000, count=1)))
            sched.enqueue_pending()
            sched.run_until_idle()
            out.add(c.pods["default/p"].node_name)
        return out

    assert len(picks("seededNodeOrder", 1)) == 1
    assert len(picks("random", 1)) > 1
    assert len({next(iter(picks("seededNodeOrder", s))) for s in range(8)}) > 1


# ---------------------------------------------------------------- the unschedulable path's shortcuts


def test_first_failure_statuses_agree_with_the_per_node_path() -> None:
    """Statuses from the plugins' masks (and filter_statuses in bulk) are what running every plugin on each
    node gives: same code, reasons and plugin."""
    rnd = random.Random(11)
    c = _random_cluster(rnd)
    sched = scheduler_for("best-fit", c, 1)
    for i in range(150):
        c.add(parse_pod(_random_pod(i, rnd)))
    sched.enqueue_pending()
    sched.run_until_idle()
    fwk = sched.frameworks["simon-scheduler"]
    rows = c.node_order()
    checked = 0
    for k in range(60):
        p = parse_pod(_random_pod(2000 + k, rnd))
        state = CycleState()
        fwk.run_pre_filter(state, p)
        fast = fwk.first_failure_statuses(state, p, rows)
        for r in rows:
            info = c.node_infos[r]
            slow = fwk.run_filter_plugins(state, p, info)
            got = fast[info.name]
            assert (got.code, got.reasons, got.plugin if not slow.is_success else "") == \
                (slow.code, slow.reasons, slow.plugin), (p.key, info.name)
            checked += not slow.is_success
    assert checked > 100


def test_preemption_shortcut_gives_the_dry_run_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pods of one priority: the post-filter message without the dry run equals the one with it."""
    from kubesched.scheduler.plugins.default_preemption import DefaultPreemption

    def outcome(shortcut: bool) -> str:
        if not shortcut:
            monkeypatch.setattr(DefaultPreemption, "quick_reject", lambda self, pod, info: None)
        c = _cluster(node("a", 1, cpu="4"), node("b", 2, cpu="4"),
                     pods=(pod("x", cpu="2", milli=1000, count=1, node_name="a", index="0"),))
        sched = scheduler_for("gpu-packing", c)
        c.add(parse_pod(pod("big", cpu="2", milli=1000, count=4)))
        sched.enqueue_pending()
        outs: list[str] = []
        sched.run_until_idle(on_outcome=lambda o: outs.append(o.reason))
        monkeypatch.undo()
        return outs[0]

    fast = outcome(True)
    assert "preemption: 0/2 nodes are available" in fast and "No preemption victims found" in fast
    assert fast == outcome(False)


def _reference_frag(cpu_left: int, left: list[int], model: str, pods: tuple[TypicalPod, ...]) -> float:
    """NodeGpuShareFragAmount then FragAmountSumExceptQ3, written out as frag.go does it."""
    data = [0.0] * 7
    total = sum(left)
    for p in pods:
        if p.milli == 0:
            t = 4 if cpu_left >= p.cpu else 5
        elif not model_allows(model, p.model):
            t = 6
        else:
            need = p.count
            can = False
            for x in left:
                if x >= p.milli:
                    need -= 1
                    if need <= 0:
                        can = True
                        break
            t = (2 if cpu_left >= p.cpu else 3) if can else (1 if cpu_left >= p.cpu else 0)
        if t == 2:
            frag = sum(x for x in left if x < p.milli)
            data[1] += p.freq * float(frag)
            data[2] += p.freq * float(total - frag)
        else:
            data[t] += p.freq * float(total)
    out = 0.0
    for i in range(7):
        if i != 2:
            out += data[i]
    return out


def test_fragmentation_matches_upstream_order_exactly() -> None:
    rnd = random.Random(3)
    c = _cluster(*[node(f"n{i}", rnd.choice([1, 2, 4, 8]), rnd.choice(["A", "B"])) for i in range(40)])
    gpu = GpuTable.of(c)
    for trial in range(20):
        shapes = []
        for _ in range(rnd.randrange(3, 12)):
            kind = rnd.random()
            if kind < 0.2:
                shapes.append((rnd.choice([1000, 4000, 16000]), 0, 0, ""))
            else:
                shapes.append((rnd.choice([1000, 4000, 16000]), rnd.choice([100, 250, 500, 1000]),
                               rnd.choice([1, 1, 2]), rnd.choice(["", "", "A", "B|C"])))
        pods = typical_pods([s for s in shapes for _ in range(rnd.randrange(1, 5))], popularity_threshold=90)
        n = 30
        cpu = np.array([rnd.randrange(0, 20000) for _ in range(n)], dtype=np.int64)
        left = np.zeros((n, 8), dtype=np.int64)
        models = []
        for i in range(n):
            count = rnd.choice([1, 2, 4, 8])
            left[i, :count] = [rnd.choice([0, 100, 250, 333, 600, 1000]) for _ in range(count)]
            models.append(rnd.choice(["A", "B", "C"]))
        codes = np.array([gpu.model_code_of(m) for m in models], dtype=np.int64)
        got = fragmentation(TargetTable(pods), gpu, cpu, left, codes)
        want = [_reference_frag(int(cpu[i]), [int(x) for x in left[i]], models[i], pods) for i in range(n)]
        assert got.tolist() == want, trial


def test_simon_score_and_bind() -> None:
    c = _cluster(node("a", 2, cpu="64", memory="256Gi"), node("b", 2, cpu="8", memory="256Gi"))
    sched = scheduler_for("fgd", c)
    simon = sched.frameworks["simon-scheduler"].plugins["Simon"]
    p = parse_pod(pod("p", cpu="4", memory="8Gi"))
    # a: max(4 / 60, 8Gi / 248Gi, 0 / 110 pods, 0 / 2 GPUs) = 0.0667 → 7; b: 4 / 4 = 1 → 100
    assert [simon.score(CycleState(), p, info)[0] for info in c.node_infos] == [7, 100]  # type: ignore[attr-defined]
    c.add(p)
    sched.enqueue_pending()
    sched.run_until_idle()
    assert c.pods["default/p"].node_name in ("a", "b")  # bound by Simon (DefaultBinder is disabled)
