"""`kubesched scheduler` through the command line, against the API server double: binding, events, gates,
faults (unreachable, dropped watch, 410, 409, 500, slow), leader election, and the same placements as
`kubesched schedule` on the equivalent snapshot."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.kube_apiserver_double import KubeAPIServerDouble
from tests.live_processes import Process, binding_requests, bindings, node, pending, pods_of, wait_until
from tests.test_live_capture import run
from tests.test_live_double import kubectl

Start = Callable[..., Process]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in a Prometheus text exposition (0 when absent)."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def successful_bindings(api: KubeAPIServerDouble) -> Counter[str]:
    return Counter(req.path.split("/")[-2] for req, code in list(api.answers)
                   if req.method == "POST" and req.path.endswith("/binding") and code == 201)


def scheduler(start: Start, kc: Path, *extra: str, name: str = "scheduler") -> Process:
    return start("scheduler", "--kubeconfig", str(kc), "--port", "0", "-v", "2", *extra, name=name)


# ---------------------------------------------------------------- the happy path, as a user sees it


def test_binds_its_pods_writes_events_and_serves_metrics(api: KubeAPIServerDouble, processes: Start,
                                                          tmp_path: Path) -> None:
    api.add(node("n1"), node("n2"))
    api.add(*[pending(f"web-{i}") for i in range(6)])
    api.add(pending("other-0", scheduler="someone-else"))
    api.add(pending("huge-0", cpu="64"))
    api.add(pending("gated-0", schedulingGates=[{"name": "example.com/wait"}]))
    kc = api.kubeconfig(tmp_path / "kc")
    port = free_port()
    p = processes("scheduler", "--kubeconfig", str(kc), "--port", str(port), "--bind-address", "127.0.0.1", "-v", "2")
    wait_until(lambda: all(bindings(api)[f"web-{i}"] for i in range(6)), what="web pods bound")
    wait_until(lambda: "FailedScheduling" in {e["reason"] for e in pods_of_kind(api, "Event")}, what="FailedScheduling")
    # Events are written after the binding, asynchronously (as client-go's broadcaster writes them), and the
    # pods may be tried in any order: wait for every Scheduled event, not just for the bindings.
    wait_until(lambda: {e["involvedObject"]["name"] for e in pods_of_kind(api, "Event") if e["reason"] == "Scheduled"}
               >= {f"web-{i}" for i in range(6)}, what="Scheduled events")

    placed = bindings(api)
    assert placed["other-0"] == "" and placed["huge-0"] == "" and placed["gated-0"] == ""
    assert successful_bindings(api) == Counter({f"web-{i}": 1 for i in range(6)})
    # The scheduler's view is the API's: kubectl reads the bindings and the events it wrote.
    out = kubectl(tmp_path, "--kubeconfig", str(kc), "get", "pods", "-o", "json").stdout
    nodes = {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in json.loads(out)["items"]}
    assert nodes == placed
    events = kubectl(tmp_path, "--kubeconfig", str(kc), "get", "events", "-o", "json").stdout
    by_reason: dict[str, list[dict[str, Any]]] = {}
    for e in json.loads(events)["items"]:
        by_reason.setdefault(e["reason"], []).append(e)
    assert sorted(e["involvedObject"]["name"] for e in by_reason["Scheduled"]) == [f"web-{i}" for i in range(6)]
    sched_msg = {e["involvedObject"]["name"]: e["message"] for e in by_reason["Scheduled"]}
    assert sched_msg["web-0"] == f"Successfully assigned default/web-0 to {placed['web-0']}"
    failed = by_reason["FailedScheduling"]
    assert [e["involvedObject"]["name"] for e in failed] == ["huge-0"] and failed[0]["type"] == "Warning"
    assert failed[0]["message"].startswith("0/2 nodes are available: 2 Insufficient cpu.")
    cond = [c for c in pods_of(api)["huge-0"]["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert cond and cond[0]["status"] == "False" and cond[0]["reason"] == "Unschedulable"

    # Health, readiness and upstream's metric names.
    assert http_get(port, "/healthz") == (200, "ok")
    assert http_get(port, "/readyz") == (200, "ok")
    code, text = http_get(port, "/metrics")
    assert code == 200
    assert metric(text, "scheduler_schedule_attempts_total", result="scheduled", profile="default-scheduler") == 6
    assert metric(text, "scheduler_schedule_attempts_total", result="unschedulable", profile="default-scheduler") >= 1
    assert metric(text, "scheduler_scheduling_attempt_duration_seconds_count", result="scheduled",
                  profile="default-scheduler") == 6
    assert metric(text, "scheduler_pending_pods", queue="gated") == 1
    # The pod that fits nowhere waits (unschedulable, or in backoff after a move request during its attempt).
    assert sum(metric(text, "scheduler_pending_pods", queue=q) for q in ("active", "backoff", "unschedulable")) == 1
    assert metric(text, "rest_client_requests_total", code="201", method="POST") >= 6

    # Removing the scheduling gate lets the pod in; it is bound like the others.
    gated = api.resource("Pod")
    api.store.update(gated, "default", "gated-0", lambda o: {**o, "spec": {**o["spec"], "schedulingGates": []}})
    wait_until(lambda: bindings(api)["gated-0"] != "", what="the ungated pod bound")
    assert "Successfully bound pod to node" in p.log and 'pod="default/web-0"' in p.log
    assert p.terminate() == 0
    assert "Received signal, shutting down" in p.log


def pods_of_kind(api: KubeAPIServerDouble, kind: str) -> list[dict[str, Any]]:
    _, items = api.store.current(api.resource(kind, "v1"), "default")
    return items


# ---------------------------------------------------------------- faults


def test_api_unreachable_at_start_then_reachable(processes: Start, tmp_path: Path) -> None:
    port = free_port()
    api = KubeAPIServerDouble(port=port, bookmark_interval=0.5)
    kc = api.kubeconfig(tmp_path / "kc")
    health = free_port()
    p = processes("scheduler", "--kubeconfig", str(kc), "--port", str(health), "--bind-address", "127.0.0.1")
    p.wait_log("Failed to list or watch")
    assert "connection refused" in p.log
    code, body = http_get(health, "/readyz")
    assert code == 500 and "informer-sync failed" in body
    api.add(node("n1"), *[pending(f"web-{i}") for i in range(3)])
    api.start()
    try:
        wait_until(lambda: all(bindings(api).values()), timeout=40, what="pods bound once the server is up")
        assert http_get(health, "/readyz")[0] == 200
        assert p.terminate() == 0
    finally:
        api.stop()


def test_watch_dropped_mid_stream_and_410_gone_lose_nothing(api: KubeAPIServerDouble, processes: Start,
                                                            tmp_path: Path) -> None:
    api.add(node("n1", cpu="32"), node("n2", cpu="32"))
    kc = api.kubeconfig(tmp_path / "kc")
    # The pod watch breaks after two events, twice; then the history is compacted (watches answer 410).
    api.faults.drop_watch_after(2, times=2, path=r"/pods$")
    p = scheduler(processes, kc, "-v", "2")
    p.wait_log("Scheduling")
    for i in range(5):
        api.add(pending(f"a-{i}"))
    wait_until(lambda: "Watch broke, resuming" in p.log, what="a broken watch")
    api.store.compact()
    for i in range(5):
        api.add(pending(f"b-{i}"))
    wait_until(lambda: len(bindings(api)) == 10 and all(bindings(api).values()), what="every pod bound")
    wait_until(lambda: "Watch expired, relisting" in p.log, what="a relist after 410")
    assert max(successful_bindings(api).values()) == 1
    assert p.terminate() == 0


def test_bind_409_someone_else_bound_it_no_retry(api: KubeAPIServerDouble, processes: Start, tmp_path: Path) -> None:
    api.add(node("n1"), node("n2"), node("elsewhere"))
    api.add(pending("web-0", nodeSelector={"kubernetes.io/hostname": "n1"}))
    # The binding is slow; meanwhile another scheduler binds the pod elsewhere: ours gets 409.
    api.faults.delay(1.5, path=r"/pods/web-0/binding$", times=1)
    kc = api.kubeconfig(tmp_path / "kc")
    p = scheduler(processes, kc)
    wait_until(lambda: len(binding_requests(api)) == 1, what="the binding request")
    api.store.update(api.resource("Pod"), "default", "web-0",
                     lambda o: {**o, "spec": {**o["spec"], "nodeName": "elsewhere"}})
    p.wait_log("Pod has been assigned to node. Abort adding it back to queue.")
    time.sleep(2.5)  # longer than the first backoff: a requeued pod would have been tried again
    assert len(binding_requests(api)) == 1
    assert bindings(api)["web-0"] == "elsewhere"
    assert "Error binding pod; forgetting the assumption" in p.log and "code=409" in p.log
    assert p.terminate() == 0


def test_bind_500s_back_off_and_bind_and_a_slow_server(api: KubeAPIServerDouble, processes: Start,
                                                       tmp_path: Path) -> None:
    api.add(node("n1", cpu="16"), node("n2", cpu="16"))
    api.add(*[pending(f"web-{i}") for i in range(8)])
    api.faults.fail(500, times=3, path=r"/binding$")
    api.faults.delay(0.05)  # every answer 50 ms late
    kc = api.kubeconfig(tmp_path / "kc")
    port = free_port()
    p = processes("scheduler", "--kubeconfig", str(kc), "--port", str(port), "--bind-address", "127.0.0.1")
    wait_until(lambda: all(bindings(api).values()), timeout=40, what="every pod bound despite the 500s")
    assert successful_bindings(api) == Counter({f"web-{i}": 1 for i in range(8)})
    assert p.log.count("Error binding pod; forgetting the assumption") == 3

    def scheduled() -> float:
        return metric(http_get(port, "/metrics")[1], "scheduler_schedule_attempts_total", result="scheduled",
                      profile="default-scheduler")

    # The server records a binding before its (50 ms late) answer reaches the scheduler, which counts the
    # attempt once the answer is in: wait for the last count, then every figure must be exact.
    wait_until(lambda: scheduled() >= 8, timeout=20, what="the last binding's answer counted")
    _, text = http_get(port, "/metrics")
    assert metric(text, "scheduler_schedule_attempts_total", result="error", profile="default-scheduler") == 3
    assert metric(text, "scheduler_schedule_attempts_total", result="scheduled", profile="default-scheduler") == 8
    assert metric(text, "rest_client_requests_total", code="500", method="POST") == 3
    assert p.terminate() == 0


# ---------------------------------------------------------------- leader election


def leader_args(kc: Path) -> list[str]:
    return ["scheduler", "--kubeconfig", str(kc), "--port", "0", "--leader-elect",
            "--leader-elect-lease-duration", "2s", "--leader-elect-renew-deadline", "1500ms",
            "--leader-elect-retry-period", "250ms", "--leader-elect-resource-namespace", "default"]


def test_two_schedulers_with_leader_election_never_both_bind(api: KubeAPIServerDouble, processes: Start,
                                                            tmp_path: Path) -> None:
    api.add(node("n1", cpu="32"), node("n2", cpu="32"))
    kc = api.kubeconfig(tmp_path / "kc")
    a = processes(*leader_args(kc), name="a")
    b = processes(*leader_args(kc), name="b")
    wait_until(lambda: "Started leading" in a.log or "Started leading" in b.log, what="a leader")
    leader, standby = (a, b) if "Started leading" in a.log else (b, a)
    for i in range(6):
        api.add(pending(f"first-{i}"))
    wait_until(lambda: all(bindings(api).values()), what="first pods bound")
    agents = {r.agent for r in binding_requests(api)}
    assert len(agents) == 1
    assert "Started leading" not in standby.log
    assert leader.terminate() == 0  # releases the lease: the standby takes over without waiting it out
    standby.wait_log("Started leading", timeout=15)
    for i in range(6):
        api.add(pending(f"second-{i}"))
    wait_until(lambda: len(bindings(api)) == 12 and all(bindings(api).values()), what="second pods bound")
    second = {r.agent for r in binding_requests(api) if "/second-" in r.path}
    assert len(second) == 1 and second.isdisjoint(agents)
    assert max(successful_bindings(api).values()) == 1
    lease = api.store.get(api.resource("Lease"), "default", "kubesched-scheduler")
    assert lease["spec"]["leaseTransitions"] >= 1
    assert standby.terminate() == 0


def test_losing_the_lease_stops_work(api: KubeAPIServerDouble, processes: Start, tmp_path: Path) -> None:
    api.add(node("n1"))
    kc = api.kubeconfig(tmp_path / "kc")
    p = processes(*leader_args(kc))
    p.wait_log("Started leading")
    api.faults.fail(500, times=-1, path=r"/leases/")
    assert p.wait(timeout=20) == 1
    assert "Failed to renew lease: leadership lost" in p.log and "Leaderelection lost" in p.log


# ---------------------------------------------------------------- one source of truth


def equivalent_cluster() -> list[dict[str, Any]]:
    zones = ["a", "b", "c"]
    objs: list[dict[str, Any]] = [node(f"n{i:02d}", cpu=str(2 + i % 4), memory=f"{4 + 2 * (i % 3)}Gi",
                                       labels={"topology.kubernetes.io/zone": zones[i % 3]}) for i in range(12)]
    shapes = [("100m", "128Mi"), ("500m", "512Mi"), ("1", "1Gi"), ("250m", "2Gi")]
    for i in range(40):
        cpu, mem = shapes[i % 4]
        spec: dict[str, Any] = {}
        if i % 5 == 0:
            spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                                  "whenUnsatisfiable": "ScheduleAnyway",
                                                  "labelSelector": {"matchLabels": {"app": f"app{i % 3}"}}}]
        p = pending(f"app{i % 3}-{i:02d}", cpu=cpu, memory=mem, **spec)
        p["metadata"]["labels"] = {"app": f"app{i % 3}"}
        objs.append(p)
    return objs


def test_live_scheduler_binds_where_schedule_places(api: KubeAPIServerDouble, processes: Start, tmp_path: Path) -> None:
    objs = equivalent_cluster()
    # The snapshot lists objects in the order the API server lists them (by name): the queue and the node
    # order then start from the same place.
    ordered = sorted([o for o in objs if o["kind"] == "Node"], key=lambda o: o["metadata"]["name"]) + sorted(
        [o for o in objs if o["kind"] == "Pod"], key=lambda o: o["metadata"]["name"])
    snap = tmp_path / "snapshot.yaml"
    snap.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": ordered}, sort_keys=False))
    code, out, err = run("schedule", "--snapshot", str(snap), "--seed", "7", "-o", "json")
    assert code == 0, err
    expected = {r["pod"].split("/")[1]: r["node"] for r in json.loads(out)["placements"]}
    assert len(expected) == 40 and all(expected.values())
    api.add(*ordered)
    kc = api.kubeconfig(tmp_path / "kc")
    p = scheduler(processes, kc, "--seed", "7")
    wait_until(lambda: all(bindings(api).values()), what="every pod bound")
    assert bindings(api) == expected
    assert p.terminate() == 0


def test_live_gpu_share_reserve_patches_the_devices_then_binds(api: KubeAPIServerDouble, processes: Start,
                                                               tmp_path: Path) -> None:
    """The published simulator's GPU-share plugins against a real API: Reserve writes the chosen device
    (a merge patch of the pod's annotations), then Simon binds through pods/binding."""
    gpu_node = node("gpu-1", cpu="32", memory="64Gi", labels={"alibabacloud.com/gpu-card-model": "V100"})
    for key in ("capacity", "allocatable"):
        gpu_node["status"][key]["alibabacloud.com/gpu-count"] = "2"
    api.add(gpu_node, node("cpu-1", cpu="32", memory="64Gi"))
    share = pending("share-0", cpu="1", scheduler="simon-scheduler")
    share["metadata"]["annotations"] = {"alibabacloud.com/gpu-milli": "500", "alibabacloud.com/gpu-count": "1"}
    api.add(share)
    kc = api.kubeconfig(tmp_path / "kc")
    config = Path(__file__).resolve().parents[1] / "examples" / "openb" / "variants" / "gpu-packing.yaml"
    p = scheduler(processes, kc, "--config", str(config))
    wait_until(lambda: bindings(api)["share-0"] == "gpu-1", what="the GPU pod bound to the GPU node")
    assert pods_of(api)["share-0"]["metadata"]["annotations"]["alibabacloud.com/gpu-index"] in ("0", "1")
    requests = list(api.requests)
    patches = [i for i, r in enumerate(requests) if r.method == "PATCH" and r.path.endswith("/pods/share-0")]
    binds = [i for i, r in enumerate(requests) if r.method == "POST" and r.path.endswith("/share-0/binding")]
    assert len(patches) == 1 and len(binds) == 1 and patches[0] < binds[0]
    assert p.terminate() == 0


# ---------------------------------------------------------------- bad input


def test_bad_flags_and_config_exit_2_in_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles: 3\n")
    kc = tmp_path / "kc"
    KubeAPIServerDouble(port=free_port()).kubeconfig(kc)
    for args in (["scheduler", "--kubeconfig", str(kc), "--config", str(cfg), "--port", "0"],
                 ["scheduler", "--kubeconfig", str(tmp_path / "missing"), "--port", "0"],
                 ["scheduler", "--kubeconfig", str(kc), "--port", "0", "--leader-elect",
                  "--leader-elect-renew-deadline", "20s"],
                 ["scheduler", "--kubeconfig", str(kc), "--port", "0", "--leader-elect-lease-duration", "soon"]):
        code, out, err = run(*args)
        assert code == 2, (args, err)
        assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and out == ""
