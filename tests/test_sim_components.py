"""The simulator's parts on tiny scenarios: defaulting, controllers, usage, metrics, kubelets, events, traces."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from kubesched.api.defaulting import admit_pod, default_workload
from kubesched.api.objects import parse_priority_class
from kubesched.cluster.events import Cause
from kubesched.errors import InputError
from kubesched.sim.engine import Engine
from kubesched.sim.loops import Binding, Eviction, find_loops
from kubesched.sim.metrics import MetricsPipeline, Sample, smooth
from kubesched.sim.scenario import MetricsView, ModelSpec, parse_level, parse_scenario
from kubesched.sim.usage import UsageTable

NODE = {"metadata": {"labels": {"topology.kubernetes.io/zone": "a"}},
        "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                   "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def deploy(name: str, replicas: int, cpu: str = "500m", memory: str = "512Mi", **spec: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "image": f"{name}:1", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    if "limits" in spec:
        c["resources"]["limits"] = spec.pop("limits")
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [c], **spec}}}}


def scenario(tmp: Path, workloads: list[dict[str, Any]], nodes: int = 2, **spec: Any) -> Any:
    doc = {"apiVersion": "kubesched.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "t"},
           "spec": {"duration": "30m", "seed": 1,
                    "cluster": {"nodeTemplates": [{"name": "n", "count": nodes, "node": copy.deepcopy(NODE)}]},
                    "workloads": workloads, **spec}}
    p = tmp / "s.yaml"
    p.write_text(yaml.safe_dump(doc))
    return parse_scenario(doc, str(p))


def run(tmp: Path, workloads: list[dict[str, Any]], **kw: Any) -> Engine:
    e = Engine(scenario(tmp, workloads, **kw))
    e.result = e.run()  # type: ignore[attr-defined]
    return e


# ---------------------------------------------------------------- API defaulting and admission


def test_pod_defaults_and_admission() -> None:
    pc = parse_priority_class({"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000,
                               "preemptionPolicy": "Never"})
    raw = {"metadata": {"name": "p", "labels": {"app": "a", "pod-template-hash": "h1"}},
           "spec": {"priorityClassName": "high", "containers": [
               {"name": "c", "image": "nginx", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                "ports": [{"containerPort": 80}]}],
               "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                              "labelSelector": {"matchLabels": {"app": "a"}},
                                              "matchLabelKeys": ["pod-template-hash"]}],
               "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                   {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "a"}},
                    "matchLabelKeys": ["pod-template-hash", "absent"], "mismatchLabelKeys": ["app"]}]}},
               "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}]}}
    admit_pod(raw, {"high": pc})
    spec = raw["spec"]
    c = spec["containers"][0]
    assert c["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}  # requests default to limits
    assert c["imagePullPolicy"] == "Always" and c["terminationMessagePath"] == "/dev/termination-log"
    assert c["ports"][0]["protocol"] == "TCP"
    assert spec["terminationGracePeriodSeconds"] == 30 and spec["restartPolicy"] == "Always"
    assert spec["schedulerName"] == "default-scheduler" and spec["dnsPolicy"] == "ClusterFirst"
    assert spec["priority"] == 1000 and spec["preemptionPolicy"] == "Never"
    tols = {(t["key"], t.get("tolerationSeconds")) for t in spec["tolerations"]}
    assert ("node.kubernetes.io/not-ready", 300) in tols and ("node.kubernetes.io/unreachable", None) in tols
    assert len(spec["tolerations"]) == 2
    exprs = spec["topologySpreadConstraints"][0]["labelSelector"]["matchExpressions"]
    assert exprs == [{"key": "pod-template-hash", "operator": "In", "values": ["h1"]}]
    term = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["labelSelector"]["matchExpressions"] == [
        {"key": "pod-template-hash", "operator": "In", "values": ["h1"]},
        {"key": "app", "operator": "NotIn", "values": ["a"]}]


def test_global_default_priority_and_host_network_ports() -> None:
    pc = parse_priority_class({"kind": "PriorityClass", "metadata": {"name": "base"}, "value": 7, "globalDefault": True})
    raw = {"metadata": {"name": "p"}, "spec": {"hostNetwork": True, "containers": [
        {"name": "c", "image": "x:1.2", "ports": [{"containerPort": 9100}]}]}}
    admit_pod(raw, {"base": pc})
    assert raw["spec"]["priorityClassName"] == "base" and raw["spec"]["priority"] == 7
    assert raw["spec"]["containers"][0]["ports"][0]["hostPort"] == 9100
    assert raw["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    with pytest.raises(InputError, match="no PriorityClass with name 'gold'"):
        admit_pod({"metadata": {"name": "q"}, "spec": {"priorityClassName": "gold", "containers": []}}, {})


def test_workload_defaults() -> None:
    d = default_workload(deploy("a", 3), "w")
    assert d["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%",
                                                                                 "maxSurge": "25%"}}
    job = default_workload({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                            "spec": {"template": {"spec": {"restartPolicy": "Never",
                                                           "containers": [{"name": "c", "image": "j"}]}}}}, "w")
    assert (job["spec"]["completions"], job["spec"]["parallelism"], job["spec"]["backoffLimit"]) == (1, 1, 6)
    with pytest.raises(InputError, match="selector"):
        default_workload({**deploy("a", 1), "spec": {**deploy("a", 1)["spec"], "selector": None}}, "w")


# ---------------------------------------------------------------- controllers


def test_replicaset_replaces_evicted_pods_with_the_same_usage_identity(tmp_path: Path) -> None:
    e = Engine(scenario(tmp_path, [{"object": deploy("web", 3), "usage": {"cpu": {"model": "randomWalk", "start": 0.5,
                                                                                  "step": 0.1}}}]))
    e.run()
    pods = sorted(e.pods.values(), key=lambda p: p.key)
    assert len(pods) == 3 and all(p.phase == "Running" for p in pods)
    assert all(p.pod.labels["pod-template-hash"] == pods[0].pod.labels["pod-template-hash"] for p in pods)
    rs = pods[0].pod.controller_ref()
    assert rs is not None and rs.kind == "ReplicaSet" and rs.name.startswith("web-")
    victim = pods[0]
    identity = victim.identity
    e.server.evict(victim.pod, grace_period_seconds=30, cause=Cause.USER)
    assert victim.terminating and victim.pod.meta.deletion_timestamp is not None
    new = [p for p in e.pods.values() if p.replaces == victim.key]
    assert len(new) == 1 and new[0].identity == identity and new[0].usage_row == victim.usage_row
    assert len([p for p in e.pods.values() if not p.terminating]) == 3


def test_statefulset_daemonset_job_and_bare_pod(tmp_path: Path) -> None:
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
           "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "db"}},
                    "template": {"metadata": {"labels": {"app": "db"}},
                                 "spec": {"containers": [{"name": "db", "image": "db:1"}]}}}}
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
          "spec": {"selector": {"matchLabels": {"app": "agent"}},
                   "template": {"metadata": {"labels": {"app": "agent"}},
                                "spec": {"containers": [{"name": "a", "image": "agent:1"}]}}}}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "batch"},
           "spec": {"completions": 4, "parallelism": 2,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "b", "image": "b:1"}]}}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lonely"},
           "spec": {"containers": [{"name": "c", "image": "c:1"}]}}
    e = run(tmp_path, [{"object": sts}, {"object": ds}, {"object": job, "jobDuration": "5m"}, {"object": pod}],
            events=[{"at": "10m", "addNodes": {"template": "n"}}, {"at": "12m", "removeNodes": {"nodes": ["n-0"]}}])
    names = sorted(p.pod.name for p in e.pods.values() if p.workload.startswith("StatefulSet"))
    assert names == ["db-0", "db-1", "db-2"]
    agents = {p.node for p in e.pods.values() if p.workload.startswith("DaemonSet") and not p.gone}
    assert agents == {"n-1", "n-2"}  # one per node, following node additions and removals
    job_events = [ev for ev in e.rec.events if ev["event"] == "jobComplete"]
    assert job_events and job_events[0]["t"] >= 600  # 4 completions, 2 at a time, 5 minutes each
    succeeded = [p for p in e.pods.values() if p.phase == "Succeeded"]
    assert len(succeeded) == 4
    assert "default/lonely" in e.pods or any(ev.get("pod") == "default/lonely" for ev in e.rec.events)


def test_scale_cordon_drain(tmp_path: Path) -> None:
    e = run(tmp_path, [{"object": deploy("web", 4)}], nodes=3,
            events=[{"at": "5m", "scale": {"workload": "Deployment/default/web", "replicas": 6}},
                    {"at": "10m", "drain": {"nodes": ["n-0"]}}, {"at": "20m", "uncordon": {"nodes": ["n-0"]}}])
    live = [p for p in e.pods.values() if not p.gone and p.phase == "Running"]
    assert len(live) == 6
    drained = [ev for ev in e.rec.evictions if ev.component == "drain"]
    assert drained and all(ev.node == "n-0" for ev in drained)
    assert not any(p.node == "n-0" and p.bound_at is not None and 600 <= p.bound_at < 1200 for p in e.pods.values())
    assert not e.cluster.nodes["n-0"].unschedulable


# ---------------------------------------------------------------- usage


def test_usage_models_are_deterministic_and_bounded() -> None:
    def table(seed: int) -> UsageTable:
        u = UsageTable(seed, 0.0, 60.0)
        walk = ModelSpec("randomWalk", {"start": parse_level(0.5, "f", "cpu", None),
                                        "step": parse_level(0.2, "f", "cpu", None),
                                        "min": parse_level(0.1, "f", "cpu", None),
                                        "max": parse_level(1.0, "f", "cpu", None)})
        spikes = ModelSpec("spikes", {"base": parse_level("100m", "f", "cpu", None),
                                      "peak": parse_level("900m", "f", "cpu", None)}, rate_per_hour=6,
                           spike_duration=300)
        diurnal = ModelSpec("diurnal", {"mean": parse_level(1.0, "f", "cpu", None),
                                        "amplitude": parse_level(0.5, "f", "cpu", None)}, peak_at=14 * 3600)
        for i, m in enumerate((walk, spikes, diurnal)):
            u.assign(u.identity(f"w#{i}"), "cpu", m, 1000.0)
        return u

    def series(u: UsageTable) -> np.ndarray:
        out = []
        for k in range(24 * 60):
            u.evaluate(k * 60.0)
            out.append(u.values("cpu").copy())
        return np.array(out)

    a, b, c = series(table(1)), series(table(1)), series(table(2))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert a[:, 0].min() >= 100 - 1e-9 and a[:, 0].max() <= 1000 + 1e-9 and a[:, 0].std() > 10
    assert set(np.round(a[:, 1])) == {100.0, 900.0}
    assert abs(a[14 * 60, 2] - 1500) < 1e-6 and abs(a[2 * 60, 2] - 500) < 1e-6  # peak at 14:00, trough at 02:00


def test_usage_follows_request_ratio_and_limits(tmp_path: Path) -> None:
    e = run(tmp_path, [{"object": deploy("a", 2, cpu="1", limits={"cpu": "1500m"}), "usage": {"cpu": 2.0}},
                       {"object": deploy("b", 2, cpu="500m"), "usage": {"cpu": "250m", "memory": "100Mi"}}], nodes=1)
    cpu = e.rec.matrix(e.rec.node_cpu)[-1, 0] * 4000
    assert abs(cpu - (2 * 1500 + 2 * 250)) < 1e-6  # a is throttled at its 1.5-core limit


# ---------------------------------------------------------------- metrics pipeline


def test_plain_smoothing_equals_go_rounding_bit_for_bit() -> None:
    """The collector's smoothing for operands that are all +0.0 or positive (floor(x + 0.5)) equals the
    general form (sign(x)·floor(|x| + 0.5), Go's math.Round) bit for bit, halves and zeros included."""
    from kubesched.sim.metrics import smooth_plain

    rng = np.random.default_rng(4)
    for _ in range(50):
        n = int(rng.integers(1, 300))
        prev = np.where(rng.random((2, n)) < 0.2, 0.0, np.floor(rng.random((2, n)) * 4e9))
        value = np.where(rng.random((2, n)) < 0.2, 0.0, np.ceil(rng.random((2, n)) * 4e9))
        value[:, ::7] = prev[:, ::7] + 5.0  # 0.9·p + 0.1·(p + 5) = p + 0.5: a half to round
        have = rng.random(n) < 0.9
        seen = have & (rng.random(n) < 0.8)
        want = np.where(have, smooth(prev, value, seen), prev)
        got = smooth_plain(prev, value, value * 0.1, seen, have)
        assert got.tobytes() == want.tobytes()
        assert not np.signbit(got).any()


def test_metrics_window_and_delay() -> None:
    p = MetricsPipeline(15.0, 600.0)
    for i in range(40):
        v = np.array([float(i * 15)])
        p.add(Sample(i * 15.0, v, v, np.zeros(1), np.zeros(1), np.zeros(1)))
    view = p.node_view(MetricsView(window=60.0, delay=30.0), 300.0)
    assert view is not None
    # samples at 210, 225, 240, 255, 270 fall in (210, 270]: 225..270
    assert view.cpu[0] == pytest.approx((225 + 240 + 255 + 270) / 4) and view.stamp == 270.0
    late = p.node_view(MetricsView(window=0.0, delay=30.0), 300.0)
    assert late is not None and late.cpu[0] == 270.0
    assert np.array_equal(smooth(np.array([100.0, 0.0]), np.array([200.0, 5.0]), np.array([True, False])),
                          np.array([110.0, 5.0]))


# ---------------------------------------------------------------- kubelets and OOM


def test_kubelet_pressure_eviction_and_oom(tmp_path: Path) -> None:
    kubelet = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
               "evictionHard": {"memory.available": "1Gi"}, "evictionPressureTransitionPeriod": "1m"}
    be = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "be"},
          "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "be"}},
                   "template": {"metadata": {"labels": {"app": "be"}},
                                "spec": {"containers": [{"name": "c", "image": "be:1"}]}}}}
    e = run(tmp_path, [{"object": be, "usage": {"memory": "3584Mi"}},
                       {"object": deploy("leak", 1, memory="256Mi", limits={"memory": "512Mi"}),
                        "usage": {"memory": "600Mi"}}],
            nodes=1, kubelet={"config": kubelet})
    kubelet_ev = [ev for ev in e.rec.evictions if ev.component == "kubelet"]
    assert kubelet_ev and all(ev.reason == "memory.available" and ev.workload == "Deployment/default/be"
                              for ev in kubelet_ev)
    failed = [p for p in e.pods.values() if p.phase == "Failed"]
    assert failed and failed[0].pod.raw["status"]["reason"] == "Evicted"
    assert any(ev["event"] == "nodeConditions" and "MemoryPressure" in ev["conditions"] for ev in e.rec.events)
    ooms = [o for o in e.rec.oom_kills if o["workload"] == "Deployment/default/leak"]
    assert len(ooms) >= 3 and ooms[0]["scope"] == "container"
    leak = next(p for p in e.pods.values() if p.workload == "Deployment/default/leak")
    assert leak.restarts == len(ooms) and leak.phase == "Running"


# ---------------------------------------------------------------- traces and node tables


def test_pod_trace_and_node_table(tmp_path: Path) -> None:
    (tmp_path / "nodes.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\nA,8000,16384,2,T4\nB,8000,16384,0,\n")
    (tmp_path / "pods.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,arrive,leave\n"
        "p1,1000,1024,1,500,,0,600\np2,1000,1024,1,1000,T4,60,\np3,1000,1024,2,1000,,120,900\n"
        "p4,1000,1024,0,0,,300,\n")
    (tmp_path / "usage.csv").write_text("pod,time,cpu,memory\np4,0,250,100\np4,600,750,100\n")
    doc = {"apiVersion": "kubesched.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "t"},
           "spec": {"duration": "30m",
                    "cluster": {"nodeTable": {"file": "nodes.csv", "name": "sn",
                                              "capacity": {"cpu": {"column": "cpu_milli", "unit": "m"},
                                                           "memory": {"column": "memory_mib", "unit": "Mi"},
                                                           "example.com/gpu": {"column": "gpu"},
                                                           "example.com/gpu-milli": {"column": "gpu", "scale": 1000}},
                                              "labels": {"gpu-model": "model"}}},
                    "workloads": [{"podTrace": {"file": "pods.csv", "columns": {"arrival": "arrive", "departure": "leave"},
                                                "requests": {"cpu": {"column": "cpu_milli", "unit": "m"},
                                                             "example.com/gpu": {"column": "num_gpu"},
                                                             "example.com/gpu-milli": {"product": ["num_gpu",
                                                                                                   "gpu_milli"]}},
                                                "nodeAffinity": {"column": "gpu_spec", "label": "gpu-model"}}}],
                    "usageTraces": [{"file": "usage.csv", "cpuUnit": "m"}]}}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(doc))
    e = Engine(parse_scenario(doc, str(p)))
    assert e.cluster.nodes["A"].labels["gpu-model"] == "T4" and "example.com/gpu" not in e.cluster.nodes["B"].allocatable
    e.run()
    binds = {b.pod: b.node for b in e.rec.bindings}
    assert binds["default/p2"] == "A" and binds["default/p4"] in ("A", "B")
    assert "default/p3" not in binds  # two GPUs requested, no node has two free
    assert "default/p1" not in e.pods and "default/p2" in e.pods  # p1 left at 600s, p2 never leaves
    alloc = e.rec.allocation["example.com/gpu-milli"]
    assert max(alloc) == pytest.approx(1500 / 2000)
    series = e.rec.series()
    assert series["allocated_example.com/gpu-milli_arrived"][-1] == pytest.approx(3500 / 2000)
    # p4 follows its usage trace: 250m until 10 minutes, then 750m.
    p4 = e.pods["default/p4"]
    row = p4.usage_row
    assert e.usage.table.values("cpu")[row] == pytest.approx(750)


# ---------------------------------------------------------------- loops


def test_find_loops_chains_and_placed_back() -> None:
    ev = [Eviction(0, "ns/a1", "D/a", "n1", "descheduler", "LNU"), Eviction(300, "ns/a2", "D/a", "n2", "descheduler", "LNU"),
          Eviction(5000, "ns/b1", "D/b", "n1", "descheduler", "LNU")]
    binds = [Binding(0, "ns/a2", "D/a", "n2", 0), Binding(301, "ns/a3", "D/a", "n1", 300),
             Binding(5000, "ns/b2", "D/b", "n3", 5000)]
    loops = find_loops(ev, binds, {"ns/a2": "ns/a1", "ns/a3": "ns/a2", "ns/b2": "ns/b1"}, 1800)
    assert [f.workload for f in loops] == ["D/a"]
    f = loops[0]
    # a1 was evicted again (as a2) and a pod of the workload came back to n1 (a3); a2 itself did not loop.
    assert f.episodes == 1 and f.evicted_again == 1 and f.placed_back == 1 and f.looping_evictions == 1
    assert [(x["event"], x["pod"]) for x in f.chain] == [("evicted", "ns/a1"), ("replacement bound", "ns/a2"),
                                                          ("evicted", "ns/a2"), ("placed back", "ns/a3")]
    assert find_loops(ev, binds, {"ns/a2": "ns/a1", "ns/a3": "ns/a2"}, 100) == []


def _placed_back_by_scanning(e: Eviction, bindings: list[Binding], window: float) -> Binding | None:
    """The reference for "any pod of the workload placed back": the first binding of the list that fits."""
    for b in bindings:
        if (b.workload, b.node) == (e.workload, e.node) and b.created >= e.t and e.t <= b.t <= e.t + window \
                and b.pod != e.pod:
            return b
    return None


@pytest.mark.parametrize("seed", range(6))
def test_find_loops_placed_back_search_equals_a_scan(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """find_loops starts its search for a placed-back pod at the eviction's time (bisect over bindings in time
    order): the same findings, chains included, as a search from the first binding, and as many placed-back
    evictions as a scan of every binding finds (no replacement chains here: every placed-back link comes
    from that search)."""
    import random

    from kubesched.sim import loops as loops_module

    rnd = random.Random(seed)
    evictions, bindings = [], []
    t = 0.0
    for k in range(300):
        t += rnd.choice([0.0, 5.0, 60.0, 400.0])
        wl, node = f"D/w{rnd.randrange(3)}", f"n{rnd.randrange(4)}"
        if rnd.random() < 0.5:
            evictions.append(Eviction(t, f"ns/p{k}", wl, node, "descheduler", "LNU"))
        else:
            bindings.append(Binding(t, f"ns/p{k}", wl, node, t - rnd.choice([0.0, 30.0, 900.0])))
    window = rnd.choice([60.0, 600.0, 1800.0])
    found = [f.to_json() for f in find_loops(evictions, bindings, {}, window)]
    expect: dict[str, int] = {}
    for e in evictions:
        if _placed_back_by_scanning(e, bindings, window) is not None:
            expect[e.workload] = expect.get(e.workload, 0) + 1
    assert {f["workload"]: f["placedBack"] for f in found} == expect
    assert sum(expect.values()) > 0
    # Bindings out of time order are searched from the start: whether a pod came back does not change.
    shuffled = bindings[:]
    rnd.shuffle(shuffled)
    assert {f.workload: f.placed_back for f in find_loops(evictions, shuffled, {}, window)} == expect
    with monkeypatch.context() as m:
        m.setattr(loops_module.bisect, "bisect_left", lambda a, x, **kw: 0)
        assert [f.to_json() for f in find_loops(evictions, bindings, {}, window)] == found


def test_stable_hash_hex_is_the_hash_number_in_hex() -> None:
    """The one-call hex form the simulated API server makes uids with equals the part-by-part hash
    printed as 16 hex digits, for parts of every kind (and so every uid a run gives stays the same)."""
    from kubesched.api.hashing import stable_hash64, stable_hash64_hex

    for parts in [(0,), (7, "Pod/default/web-abc12", 1), ("Pod/ns/x", 2**40), ("", ""), ("é\x00", None, 3.5)]:
        assert stable_hash64_hex(*parts) == f"{stable_hash64(*parts):016x}"


def test_usage_randomness_is_splitmix64_and_box_muller_bit_for_bit() -> None:
    """The usage models' random numbers (in-place NumPy passes) equal SplitMix64's published sequence and a
    scalar Box-Muller over it, bit for bit: a faster form must not change a scenario's numbers."""
    import math

    import numpy as np

    from kubesched.sim.usage import gaussian, splitmix64, uniform, uniform_one

    mask = (1 << 64) - 1
    gamma = 0x9E3779B97F4A7C15

    def mix(x: int) -> int:
        z = (x + gamma) & mask
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return z ^ (z >> 31)

    # SplitMix64 seeded with 0: its first two outputs.
    assert [int(v) for v in splitmix64(np.array([0, gamma], dtype=np.uint64))] == \
        [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4]
    keys = [0, 1, 12345, mask, 0xDEADBEEFCAFEF00D, 2**63]
    arr = np.array(keys, dtype=np.uint64)

    def u(k: int, salt: int) -> float:
        return (float(mix(k ^ salt) >> 11) + 0.5) * (1.0 / 9007199254740992.0)

    assert uniform(arr, 0x1002).tolist() == [u(k, 0x1002) for k in keys]
    # The scalar form a new identity draws its spread with: the same bits, salts wider than 64 bits masked.
    for salt in (0xA5A5, 0x5A5A, 0x1002, 2**64 + 7):
        assert [uniform_one(k, salt) for k in keys] == uniform(arr, salt).tolist()
    expect = [math.sqrt(-2.0 * math.log(u(k, 0x1003))) * math.cos(u(k, 0x1003 ^ 0x5DEECE66D) * (2.0 * math.pi))
              for k in keys]
    got = gaussian(arr, 0x1003).tolist()
    # NumPy's log/cos may differ from the C library's in the last bit; the hashing and order must not.
    assert got == pytest.approx(expect, rel=1e-15, abs=0)
    # Worked out in cache-sized blocks: the same bits as the whole-vector passes, across block edges.
    from kubesched.sim import usage as usage_mod

    many = np.random.default_rng(5).integers(0, 2**64, 2 * usage_mod._BLOCK + 123, dtype=np.uint64, endpoint=False)
    u1, u2 = uniform(many, 0x2003), uniform(many, 0x2003 ^ 0x5DEECE66D)
    whole = np.sqrt(-2.0 * np.log(u1)) * np.cos(u2 * (2.0 * np.pi))
    assert gaussian(many, 0x2003).view(np.uint64).tolist() == whole.view(np.uint64).tolist()
    # The noise factor applied block by block: out * (1 + noise * g), the same bits.
    rng = np.random.default_rng(6)
    out, noise = rng.random(len(many)) * 4000.0, rng.random(len(many)) * 0.3
    want = out * (1.0 + noise * gaussian(many, 0x2003))
    usage_mod.scale_by_noise(out, many, 0x2003, noise)
    assert out.view(np.uint64).tolist() == want.view(np.uint64).tolist()


def test_node_usage_sums_equal_a_pass_over_every_slot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ResourceUsage.compute / aggregate (limits gathered once per slot change, no masking when every slot is
    placed, the demand reused when no node is throttled) give, bit for bit, what the plain per-step pass gives:
    with nodes whose demand exceeds their CPU, containers down after OOM kills, and pods coming and going."""
    from kubesched.sim.node_usage import ResourceUsage

    real_compute, real_aggregate = ResourceUsage.compute, ResourceUsage.aggregate
    seen = {"throttled": 0, "down": 0, "calls": 0}

    def compute(self: ResourceUsage) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        live, down, got_mem = real_compute(self)
        s, rows = self.slots, self.slots["row"][live]
        cpu = np.minimum(self.table.values("cpu")[rows], s["lim_cpu"][live])
        mem = self.table.values("memory")[rows].copy()
        want_down = s["down"][live] > self.sim.t
        cpu[want_down] = 0.0
        mem[want_down] = 0.0
        assert np.array_equal(down, want_down)
        assert s["cpu"][live].tobytes() == cpu.tobytes() and s["mem"][live].tobytes() == mem.tobytes()
        assert got_mem.tobytes() == mem.tobytes()
        assert self.memory_limits(live).tobytes() == s["lim_mem"][live].tobytes()
        seen["down"] += int(want_down.sum())
        return live, down, got_mem

    def aggregate(self: ResourceUsage, live: np.ndarray) -> None:
        s, n = self.slots, self.n
        sel = live[s["live"][live]]
        nodes, cpu, mem = s["node"][sel], s["cpu"][sel].copy(), s["mem"][sel]
        valid = nodes >= 0
        cap = self.nodes["cap_cpu"][:n]
        demand = np.bincount(nodes[valid], weights=cpu[valid], minlength=n)
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(demand > cap, cap / np.maximum(demand, 1e-9), 1.0)
        if (factor < 1.0).any():
            seen["throttled"] += 1
            cpu[valid] *= factor[nodes[valid]]
        want_cpu = np.bincount(nodes[valid], weights=cpu[valid], minlength=n)
        want_mem = np.bincount(nodes[valid], weights=mem[valid], minlength=n)
        real_aggregate(self, live)
        seen["calls"] += 1
        assert self.nodes["cpu"][:n].tobytes() == want_cpu.tobytes()
        assert self.nodes["mem"][:n].tobytes() == want_mem.tobytes()
        assert s["cpu"][sel].tobytes() == cpu.tobytes()

    monkeypatch.setattr(ResourceUsage, "compute", compute)
    monkeypatch.setattr(ResourceUsage, "aggregate", aggregate)
    run(tmp_path, [{"object": deploy("hot", 6, cpu="1"), "usage": {"cpu": {"model": "randomWalk", "start": 1.5,
                                                                           "step": 0.3, "min": 0.5, "max": 3.0}}},
                   {"object": deploy("leak", 2, memory="256Mi", limits={"memory": "512Mi"}),
                    "usage": {"memory": "600Mi"}},
                   {"object": deploy("plain", 3, cpu="250m"), "usage": {"cpu": {"model": "constant", "value": 0.8,
                                                                                "noise": 0.2}}}],
        nodes=2)
    assert seen["calls"] > 20 and seen["throttled"] and seen["down"]


def test_usage_full_step_equals_the_per_row_form() -> None:
    """A full usage step (the diurnal wave worked out once per distinct period and peak, the spike-start
    chance kept while the models stand) gives, bit for bit, what the per-row form gives: with workloads that
    share and do not share their wave, and models changed mid-run."""
    def level(v: Any) -> Any:
        return parse_level(v, "f", "cpu", None)

    def models(shift: float) -> list[ModelSpec]:
        out = []
        for i in range(7):
            out.append(ModelSpec("diurnal", {"mean": level(0.5 + 0.1 * i), "amplitude": level(0.3)},
                                 period=(12 + 6 * (i % 3)) * 3600.0, peak_at=(i % 2) * 5 * 3600.0 + shift,
                                 noise=0.1 * (i % 2)))
            out.append(ModelSpec("spikes", {"base": level(0.2), "peak": level(1.5 + i)}, rate_per_hour=1 + 3 * (i % 3),
                                 spike_duration=600))
        return out

    def table() -> UsageTable:
        u = UsageTable(9, 1_700_000_000.0, 60.0)
        ms = models(0.0)
        for j in range(120):
            u.assign(u.identity(f"w#{j}"), "cpu", ms[j % len(ms)], 1000.0 + j)
        return u

    full, rows = table(), table()
    changed = models(1800.0)
    for k in range(600):
        if k == 300:  # new models for a third of the identities: the kept values must go
            for u in (full, rows):
                for j in range(0, 120, 3):
                    u.assign(j, "cpu", changed[(j + 1) % len(changed)], 1000.0)
        full.evaluate(k * 60.0)
        rows.evaluate(k * 60.0, np.arange(rows.n))
        assert full.values("cpu").tobytes() == rows.values("cpu").tobytes(), k
    assert len(np.unique(full.values("cpu"))) > 20


def test_metrics_samples_copy_only_up_to_the_last_live_slot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sample's slot columns stop at the last live slot and share the serials while no slot changes: every
    slot past the end is free (no usage, no pod), so each pod's view reads what full copies would give."""
    from kubesched.sim.node_usage import ResourceUsage

    real = ResourceUsage.slot_copies
    seen = {"calls": 0, "trimmed": 0, "shared": 0}
    last: list[Any] = [None]

    def slot_copies(self: ResourceUsage) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cpu, mem, serial = real(self)
        s, end = self.slots, len(cpu)
        seen["calls"] += 1
        seen["trimmed"] += end < self.slots.cap
        seen["shared"] += last[0] is serial
        last[0] = serial
        assert len(mem) == len(serial) == end
        assert cpu.tobytes() == s["cpu"][:end].tobytes() and mem.tobytes() == s["mem"][:end].tobytes()
        assert serial.tolist() == s["serial"][:end].tolist()
        assert not s["live"][end:].any() and not s["cpu"][end:].any() and not s["mem"][end:].any()
        assert (s["serial"][end:] == -1).all()
        return cpu, mem, serial

    monkeypatch.setattr(ResourceUsage, "slot_copies", slot_copies)
    policy = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
              "metricsProviders": [{"source": "KubernetesMetrics"}],
              "profiles": [{"name": "p", "pluginConfig": [
                  {"name": "DefaultEvictor"},
                  {"name": "LowNodeUtilization", "args": {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 30},
                                                          "metricsUtilization": {"source": "KubernetesMetrics"}}}],
                  "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}]}
    e = run(tmp_path, [{"object": deploy("hot", 6, cpu="250m"),
                        "usage": {"cpu": {"model": "randomWalk", "start": 2.0, "step": 1.5, "min": 0.2, "max": 8.0}}},
                       {"object": deploy("plain", 3, cpu="250m"), "usage": {"cpu": 0.5}}],
            nodes=3, descheduler={"policy": policy, "interval": "2m"},
            metrics={"samplingInterval": "15s", "window": "1m", "delay": "30s"})
    assert seen["calls"] > 20 and seen["trimmed"] == seen["calls"] and seen["shared"]
    assert e.result.descheduler_cycles and len(e.rec.evictions)  # type: ignore[attr-defined]
