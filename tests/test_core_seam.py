"""The core seam: one state changed only through apply (every change announced, nothing mutated in
place), components acting through the API server's verbs, and the bugs the seam fixed, met through the CLI
where a user would meet them."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.api.objects import parse_node, parse_pdb, parse_pod
from kubesched.cli import main_group
from kubesched.client.inprocess import InProcessAPIServer
from kubesched.client.interface import Conflict, TooManyRequests
from kubesched.cluster.events import Cause, Event, EventType
from kubesched.cluster.state import ClusterState
from kubesched.scheduler.framework import CycleState
from kubesched.scheduler.plugins.pod_topology_spread import PodTopologySpread
from kubesched.scheduler.scheduler import Scheduler
from kubesched.sim.engine import Engine
from kubesched.sim.scenario import load_scenario

HERE = Path(__file__).parent
EXAMPLES = HERE.parent / "examples"


def cli(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main_group, list(args), catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def node(name: str, cpu: str = "4", zone: str = "a", pods: str = "110") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": pods},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, node_name: str = "", cpu: str = "1", labels: dict[str, str] | None = None,
        phase: str = "Running", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels or {}},
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "i",
                                                            "resources": {"requests": {"cpu": cpu}}}], **spec},
            "status": {"phase": phase if node_name else "Pending"}}


def write(path: Path, items: list[dict[str, Any]]) -> str:
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return str(path)


# ---------------------------------------------------------------- every change announced, nothing mutated


def fingerprint(obj: Any) -> str:
    """Everything an object says, as text (its manifest and its parsed fields, not the memo cache). The
    manifest is read through `raw`: the stored `document` may be a lazy form that `raw` turns into the dict."""
    fields = {k: repr(getattr(obj, k)) for k in obj.__dataclass_fields__ if k not in ("cache", "raw", "document")}
    return json.dumps([obj.raw, fields], sort_keys=True, default=str)


class Auditor:
    """A mirror of the state built only from its events, and each announced object's fingerprint."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.mirror: dict[tuple[str, str], Any] = {}
        self.seen: list[tuple[Any, str]] = []
        self.causes: set[Cause] = set()
        self.types: set[EventType] = set()
        for store, kind in ((state.pods, "Pod"), (state.nodes, "Node"), (state.pdbs, "PodDisruptionBudget")):
            for key, obj in store.items():
                self.mirror[(kind, key)] = obj
        state.subscribe(self.on_event, index=True)

    def on_event(self, ev: Event) -> None:
        key = (ev.kind, ev.obj.meta.key if ev.kind != "Node" else ev.obj.name)
        if ev.type is EventType.DELETED:
            self.mirror.pop(key, None)
        else:
            self.mirror[key] = ev.obj
            self.seen.append((ev.obj, fingerprint(ev.obj)))
        self.causes.add(ev.cause)
        self.types.add(ev.type)

    def check(self) -> None:
        state = self.state
        actual = {("Pod", k): v for k, v in state.pods.items()}
        actual.update({("Node", k): v for k, v in state.nodes.items()})
        actual.update({("PodDisruptionBudget", k): v for k, v in state.pdbs.items()})
        mirrored = {k: v for k, v in self.mirror.items() if k[0] in ("Pod", "Node", "PodDisruptionBudget")}
        # Every change reached the listeners: the mirror holds the very objects the state holds.
        assert mirrored.keys() == actual.keys()
        assert all(mirrored[k] is actual[k] for k in actual)
        # Nobody changed an announced object afterwards.
        changed = [obj.meta.key for obj, fp in self.seen if fingerprint(obj) != fp]
        assert changed == []


def test_every_change_of_a_simulation_is_an_event_and_no_object_is_changed_in_place(tmp_path: Path) -> None:
    doc = yaml.safe_load((EXAMPLES / "hotspots" / "scenario.yaml").read_text())
    doc["spec"]["duration"] = "90m"
    doc["spec"]["events"] = [e for e in doc["spec"]["events"] if e["at"] != "4h"]
    doc["spec"]["events"] += [{"at": "40m", "drain": {"nodes": ["node-1"]}},
                              {"at": "50m", "removeNodes": {"nodes": ["node-2"]}}]
    doc["spec"]["cluster"]["objects"] = [
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "api", "namespace": "default"},
         "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "api"}}}}]
    (tmp_path / "variants").mkdir()
    for f in (EXAMPLES / "hotspots" / "variants").iterdir():
        (tmp_path / "variants" / f.name).write_text(f.read_text())
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc))
    s = load_scenario(str(path))
    e = Engine(s, next(v for v in s.variants if v.name == "lnu-usage"))
    audit = Auditor(e.cluster)
    e.run()
    audit.check()
    assert {Cause.SCHEDULER, Cause.KUBELET, Cause.CONTROLLER, Cause.NODE_LIFECYCLE, Cause.DISRUPTION,
            Cause.DESCHEDULER, Cause.API, Cause.POD_GC} <= audit.causes
    assert {EventType.ADDED, EventType.UPDATED, EventType.ASSUMED, EventType.BOUND, EventType.DELETED} <= audit.types


def test_one_shot_scheduling_and_preemption_announce_every_change() -> None:
    cluster = ClusterState()
    for obj in [parse_node(node("n1", cpu="2"))] + [parse_pod(pod(f"low{i}", "n1", priority=0)) for i in range(2)]:
        cluster.add(obj)
    audit = Auditor(cluster)
    clock = [1000.0]
    sched = Scheduler(cluster, clock=lambda: clock[0])
    cluster.add(parse_pod(pod("high", cpu="2", priority=100)))

    def advance(t: float) -> None:
        clock[0] = max(clock[0], t)

    sched.run_until_idle(advance=advance)
    audit.check()
    assert cluster.pods["default/high"].node_name == "n1" and set(cluster.pods) == {"default/high"}
    assert {Cause.PREEMPTION, Cause.SCHEDULER, Cause.API} <= audit.causes


# ---------------------------------------------------------------- the API server's decisions, as properties


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(allowed=st.integers(0, 3), n=st.integers(1, 6), order=st.randoms(use_true_random=False),
       ready=st.lists(st.booleans(), min_size=6, max_size=6))
def test_the_server_never_evicts_past_a_pdb(allowed: int, n: int, order: Any, ready: list[bool]) -> None:
    cluster = ClusterState()
    cluster.add(parse_node(node("n1", cpu="64")))
    cluster.add(parse_pdb({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                           "metadata": {"name": "b", "namespace": "default"},
                           "spec": {"selector": {"matchLabels": {"app": "web"}}},
                           "status": {"disruptionsAllowed": allowed, "currentHealthy": n, "desiredHealthy": n - allowed}}))
    for i in range(n):
        conds = [{"type": "Ready", "status": "True" if ready[i] else "False"}]
        p = pod(f"w{i}", "n1", labels={"app": "web"})
        p["status"]["conditions"] = conds
        cluster.add(parse_pod(p))
    server = InProcessAPIServer(cluster, lambda: 0.0)
    keys = sorted(cluster.pods)
    order.shuffle(keys)
    evicted_ready = 0
    for key in keys:
        cur = cluster.pods[key]
        was_ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in cur.status.get("conditions", []))
        try:
            server.evict(cur)
        except TooManyRequests:
            continue
        # A not-ready pod may go when the budget is already met without spending it (eviction.go).
        evicted_ready += was_ready or not (cluster.pdbs["default/b"].current_healthy >=
                                           cluster.pdbs["default/b"].desired_healthy > 0)
    assert evicted_ready <= allowed
    assert cluster.pdbs["default/b"].disruptions_allowed >= 0


@settings(max_examples=40, deadline=None)
@given(nodes=st.lists(st.sampled_from(["n1", "n2", "n3"]), min_size=1, max_size=6))
def test_the_server_never_binds_a_pod_twice(nodes: list[str]) -> None:
    cluster = ClusterState()
    for n in ("n1", "n2", "n3"):
        cluster.add(parse_node(node(n)))
    cluster.add(parse_pod(pod("p")))
    bound: list[str] = []
    cluster.subscribe(lambda ev: bound.append(ev.node) if ev.type is EventType.BOUND else None)
    server = InProcessAPIServer(cluster)
    for n in nodes:
        try:
            server.bind(cluster.pods["default/p"], n)
        except Conflict:
            pass
    assert bound == [nodes[0]] and cluster.pods["default/p"].node_name == nodes[0]


# ---------------------------------------------------------------- bugs the seam fixed, through the CLI


def test_a_plugin_error_fails_one_pod_not_the_run(tmp_path: Path) -> None:
    bad = pod("bad", affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [{"key": "size", "operator": "Gt", "values": ["x"]}]}}]}})
    snap = write(tmp_path / "s.yaml", [node("n1"), node("n2"), bad, pod("good")])
    code, out, err = cli("schedule", "--snapshot", snap, "-o", "json")
    assert code == 0, err
    placed = {p["pod"]: p for p in json.loads(out)["placements"]}
    assert placed["default/good"]["node"] in ("n1", "n2")
    assert placed["default/bad"]["node"] is None
    assert placed["default/bad"]["reason"].startswith("running PreScore plugin 'NodeAffinity': ")
    # capacity: the erroring pod is the template; the run ends with the reason instead of a traceback.
    template = tmp_path / "t.yaml"
    template.write_text(yaml.safe_dump(bad))
    code, out, err = cli("capacity", "--snapshot", snap, "--pod-template", str(template), "-o", "json")
    assert code == 0, err
    res = json.loads(out)
    assert res["instances"] == 0 and "NodeAffinity" in res["reason"]


def test_terminating_pods_leave_pod_topology_spread_at_once() -> None:
    cluster = ClusterState()
    for n, z in (("n1", "a"), ("n2", "b")):
        cluster.add(parse_node(node(n, zone=z)))
    spread = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}}]
    for name, n in (("a1", "n1"), ("a2", "n1"), ("b1", "n2")):
        p = pod(name, n, labels={"app": "web"}, terminationGracePeriodSeconds=600)
        cluster.add(parse_pod(p))
    sched = Scheduler(cluster)
    fwk = sched.frameworks["default-scheduler"]
    pl = fwk.plugins["PodTopologySpread"]
    assert isinstance(pl, PodTopologySpread)
    incoming = parse_pod(pod("new", labels={"app": "web"}, topologySpreadConstraints=spread))

    def fits(node_name: str) -> bool:
        state = CycleState()
        pl.pre_filter(state, incoming, cluster)
        return pl.filter(state, incoming, cluster.node_info_by_name[node_name]).is_success

    assert (fits("n1"), fits("n2")) == (False, True)  # zone a 2, zone b 1
    # Two graceful deletions in zone a: the pods terminate for 10 minutes, and upstream's spreading skips
    # terminating pods at once (before this fix kubesched counted them until they were gone).
    server = InProcessAPIServer(cluster, lambda: 0.0)
    server.delete_pod(cluster.pods["default/a1"], cause=Cause.CONTROLLER)
    server.delete_pod(cluster.pods["default/a2"], cause=Cause.CONTROLLER)
    assert cluster.pods["default/a1"].is_terminating
    assert (fits("n1"), fits("n2")) == (True, False)  # zone a 0, zone b 1


def test_simulate_a_snapshot_whose_pods_match_no_usage_rule(tmp_path: Path) -> None:
    write(tmp_path / "snap.yaml", [node("n1"), node("n2"), pod("web-1", "n1"), pod("web-2", "n2"), pod("pending")])
    (tmp_path / "usage.csv").write_text("pod,t,cpu,memory\nweb-1,0,0.5,100\nweb-1,60,0.7,100\n")
    scenario = {"apiVersion": "kubesched.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
                "spec": {"duration": "10m", "start": "2025-01-01T00:00:00Z",
                         "cluster": {"snapshot": "snap.yaml"},
                         "usageTraces": [{"file": "usage.csv", "columns": {"series": "pod", "time": "t", "cpu": "cpu",
                                                                           "memory": "memory"}, "cpuUnit": "1"}]}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario))
    code, out, err = cli("simulate", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o"), "--no-html",
                         "--no-progress", "--json")
    assert code == 0, err
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["variants"][0]["summary"]["podsScheduled"] == 1


def test_a_deployment_of_12000_replicas(tmp_path: Path) -> None:
    """27^5 generated names: 12,000 pods collide several times; the API server retries as upstream does."""
    scenario = {"apiVersion": "kubesched.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "big"},
                "spec": {"duration": "1m", "start": "2025-01-01T00:00:00Z", "usageStep": "0s",
                         "cluster": {"nodeTemplates": [{"name": "n", "count": 4, "node": {"status": {
                             "allocatable": {"cpu": "1000", "memory": "4000Gi", "pods": "4000"}}}}]},
                         "workloads": [{"object": {
                             "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                             "spec": {"replicas": 12000, "selector": {"matchLabels": {"app": "web"}},
                                      "template": {"metadata": {"labels": {"app": "web"}},
                                                   "spec": {"containers": [{"name": "c", "image": "w", "resources": {
                                                       "requests": {"cpu": "10m", "memory": "10Mi"}}}]}}}}}]}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario))
    code, out, err = cli("simulate", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o"), "--no-html",
                         "--no-progress", "--json")
    assert code == 0, err
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())["variants"][0]["summary"]
    assert summary["podsCreated"] == 12000 and summary["podsScheduled"] == 12000


@pytest.mark.parametrize("how", ["class", "globalDefault"])
def test_priority_comes_from_the_priority_class(tmp_path: Path, how: str) -> None:
    high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
            "value": 1000, "globalDefault": how == "globalDefault"}
    low = [pod(f"low{i}", "n1", cpu="2", priority=0) for i in range(2)]
    incoming = pod("important", cpu="2")
    if how == "class":
        incoming["spec"]["priorityClassName"] = "high"
    snap = write(tmp_path / "s.yaml", [node("n1", cpu="4"), high, *low, incoming])
    code, out, err = cli("schedule", "--snapshot", snap, "-o", "json")
    assert code == 0, err
    placed = {p["pod"]: p for p in json.loads(out)["placements"]}["default/important"]
    # The API server's Priority admission gave the pod 1000: it preempts one priority-0 pod and lands.
    assert placed["node"] == "n1" and len(placed["preempted"]) == 1


def test_deschedule_pdbs_are_the_servers_decision_and_switchable(tmp_path: Path) -> None:
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "default"},
           "spec": {"selector": {"matchLabels": {"app": "web"}}}, "status": {"disruptionsAllowed": 1}}
    items = [node("n1"), node("n2"), pdb] + [
        {**pod(f"w{i}", "n1", labels={"app": "web"}),
         "metadata": {"name": f"w{i}", "namespace": "default", "uid": f"u{i}", "labels": {"app": "web"},
                      "creationTimestamp": "2024-01-01T00:00:00Z", "ownerReferences": [
                          {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs", "controller": True}]}}
        for i in range(3)]
    snap = write(tmp_path / "s.yaml", items)
    policy = tmp_path / "p.yaml"
    policy.write_text(yaml.safe_dump({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [
        {"name": "p", "pluginConfig": [{"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 60}}],
         "plugins": {"deschedule": {"enabled": ["PodLifeTime"]}}}]}))
    now = datetime(2025, 1, 1, tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    code, out, err = cli("deschedule", "--snapshot", snap, "--policy", str(policy), "--now", now, "-o", "json")
    assert code == 0, err
    assert len(json.loads(out)["evictions"]) == 3  # upstream-compatible default: no PDB enforcement
    code, out, err = cli("deschedule", "--snapshot", snap, "--policy", str(policy), "--now", now, "--enforce-pdbs",
                         "-o", "json")
    assert code == 0, err
    assert len(json.loads(out)["evictions"]) == 1


def test_same_seed_same_events(tmp_path: Path) -> None:
    """Two runs of one scenario and seed see the same events with the same causes in the same order."""
    logs = []
    for _ in range(2):
        s = load_scenario(str(EXAMPLES / "hotspots" / "scenario.yaml"))
        v = next(x for x in s.variants if x.name == "mistuned")
        s2 = copy.copy(s)
        s2.duration = 3600.0
        e = Engine(s2, v)
        log: list[tuple[str, str, str, str]] = []
        e.cluster.subscribe(lambda ev, log=log: log.append((ev.type.value, ev.kind, ev.key, ev.cause.value)))
        e.run()
        logs.append(log)
    assert logs[0] == logs[1] and len(logs[0]) > 500


@pytest.mark.parametrize("seed", [0, 1, 42, 2**40 + 3])
def test_generated_name_suffixes_are_random_choice_draws(seed: int) -> None:
    """The server's generateName suffixes (drawn with getrandbits, without random.choice's per-call cost) are
    the names random.choice makes from the same seed, draw after draw: simulated pod names do not change."""
    import random

    from kubesched.client.inprocess import GENERATED_NAME_LENGTH, NAME_ALPHABET

    server = InProcessAPIServer(ClusterState(), seed=seed)
    ref = random.Random(seed)
    for _ in range(2000):
        assert server.random_suffix() == "".join(ref.choice(NAME_ALPHABET) for _ in range(GENERATED_NAME_LENGTH))
