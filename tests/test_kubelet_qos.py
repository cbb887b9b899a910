"""QoS classes and per-container oom_score_adj, and the `qos` command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kubesched.api import koordinator
from kubesched.api.objects import Pod, parse_pod
from kubesched.api.qos import compute_qos, qos_class
from kubesched.cli import main
from kubesched.kubelet.oom import container_oom_score_adjust, pod_oom_score_adjust

CAP = 8_000_000_000


def res(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> dict[str, Any]:
    return {"requests": requests or {}, "limits": limits or {}}


def make(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None, pod_resources: Any = None,
         status: dict[str, Any] | None = None, priority: int | None = None, priority_class: str = "") -> Pod:
    spec: dict[str, Any] = {"containers": containers}
    if init:
        spec["initContainers"] = init
    if pod_resources is not None:
        spec["resources"] = pod_resources
    if priority is not None:
        spec["priority"] = priority
    if priority_class:
        spec["priorityClassName"] = priority_class
    return parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                      "spec": spec, "status": status or {}})


def c(name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
      sidecar: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "resources": res(requests, limits)}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


G = {"cpu": "1", "memory": "1Gi"}


@pytest.mark.parametrize(("pod", "want"), [
    (make([c("a")]), "BestEffort"),
    (make([c("a", G, G)]), "Guaranteed"),
    (make([c("a", G, G), c("b", G, G)], init=[c("i", G, G)]), "Guaranteed"),
    (make([c("a", G, G), c("b")]), "Burstable"),  # a BestEffort and a Guaranteed container
    (make([c("a", {"memory": "1Gi"}, {"memory": "1Gi"})]), "Burstable"),  # cpu unset
    (make([c("a", {"cpu": "0", "memory": "0"}, G)]), "Burstable"),  # explicit zero requests, no defaulting
    (make([c("a", None, G)]), "Burstable"),  # limits only, stored as written
    (make([c("a", {"hugepages-2Mi": "2Mi"}, {"hugepages-2Mi": "2Mi"})]), "BestEffort"),
    (make([c("a", None, {"memory": "0"})]), "BestEffort"),
    (make([c("a", G, G)], init=[c("i", {"cpu": "1"})]), "Burstable"),
    (make([c("a", {"cpu": "1"}, {"cpu": "2"})], pod_resources=res(G, G)), "Guaranteed"),  # pod level decides
    (make([c("a", G, G)], pod_resources=res(G, {"cpu": "2", "memory": "1Gi"})), "Burstable"),
    (make([c("a", G, G)], pod_resources={}), "BestEffort"),  # spec.resources set but empty
])
def test_qos_class(pod: Pod, want: str) -> None:
    assert qos_class(pod) == want


def test_status_qos_class_wins_and_feature_gate_off_ignores_pod_level() -> None:
    pod = make([c("a")], status={"qosClass": "Guaranteed"})
    assert qos_class(pod) == "Guaranteed" and compute_qos(pod) == "BestEffort"
    pod_level = make([c("a", {"cpu": "1"}, {"cpu": "2"})], pod_resources=res(G, G))
    assert compute_qos(pod_level, pod_level_resources=False) == "Burstable"
    # The class is memoised per pod object; a pod whose status changes is a new object and is asked again.
    assert qos_class(pod.with_status(qosClass="Burstable")) == "Burstable"
    assert qos_class(pod.with_status(qosClass=None)) == "BestEffort" and qos_class(pod) == "Guaranteed"


def test_koordinator_priority_class_follows_a_status_change() -> None:
    # koordinator's default priority class comes from the QoS class, which status.qosClass decides: a memo
    # read before the status changed must not answer for the new pod object.
    pod = make([c("a")])
    assert koordinator.priority_class(pod) == koordinator.PRIORITY_BATCH
    assert koordinator.priority_class(pod.with_status(qosClass="Guaranteed")) == koordinator.PRIORITY_PROD


def adj(pod: Pod, name: str, capacity: int = CAP) -> int:
    container = next(x for x in [*pod.init_containers, *pod.containers] if x.name == name)
    return container_oom_score_adjust(pod, container, capacity)


def test_oom_score_adj_by_class_and_clamps() -> None:
    assert adj(make([c("a", G, G)]), "a") == -997
    assert adj(make([c("a")]), "a") == 1000
    assert adj(make([c("a", None, {"cpu": "10"})]), "a") == 999  # 1000 lowered so it never ties BestEffort
    assert adj(make([c("a", {"memory": "4000000000"}, {"memory": "10G"})]), "a") == 500
    assert adj(make([c("a", {"memory": "7999999999"})]), "a") == 3  # raised above Guaranteed's 10
    assert adj(make([c("a", {"memory": "1G"})]), "a", 3_000_000_000) == 667  # integer division truncates


def test_only_node_critical_pods_get_guaranteed_score() -> None:
    node_critical = make([c("a")], priority=2_000_001_000, priority_class="system-node-critical")
    cluster_critical = make([c("a")], priority=2_000_000_000, priority_class="system-cluster-critical")
    assert adj(node_critical, "a") == -997
    assert adj(cluster_critical, "a") == 1000


def test_sidecar_never_scores_above_the_smallest_regular_container() -> None:
    mem = {"memory": "1000000000"}
    small = make([c("main", mem, {"memory": "2G"})], init=[c("init", mem, {"memory": "2G"}),
                                                         c("side", {"memory": "400000000"}, {"memory": "2G"}, True)])
    assert adj(small, "side") == 875 and adj(small, "main") == 875 and adj(small, "init") == 875
    big = make([c("main", mem, {"memory": "2G"})], init=[c("side", {"memory": "4000000000"}, {"memory": "5G"}, True)])
    assert adj(big, "side") == 500


def test_pod_level_requests_are_shared_among_containers() -> None:
    pod = make([c("c1", {"cpu": "5m", "memory": "1000000000"}, {"cpu": "5m", "memory": "2000001000"}),
                c("c2", {"cpu": "5m", "memory": "500000000"}, {"cpu": "5m", "memory": "2000001000"})],
               init=[c("side", {"cpu": "5m", "memory": "200000000"}, {"cpu": "5m", "memory": "2000001000"}, True)],
               pod_resources=res({"cpu": "5m", "memory": "2000000000"}, {"cpu": "5m", "memory": "2000001000"}))
    # 2e9 - 1.7e9 unclaimed, shared by 3 containers.
    assert pod_oom_score_adjust(pod, 4_000_000_000) == {"side": 850, "c1": 725, "c2": 850}
    guaranteed = make([c("b", {"cpu": "3m", "memory": "1G"}, {"cpu": "5m", "memory": "2G"}), c("e")],
                      pod_resources=res({"cpu": "5m", "memory": "2G"}, {"cpu": "5m", "memory": "2G"}))
    assert pod_oom_score_adjust(guaranteed, 4_000_000_000) == {"b": -997, "e": -997}


def test_unknown_machine_memory_only_matters_for_burstable() -> None:
    assert pod_oom_score_adjust(make([c("a", {"memory": "1Gi"})]), None) == {"a": None}
    assert pod_oom_score_adjust(make([c("a", G, G)]), None) == {"a": -997}


def test_qos_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {"capacity": {"memory": "8G"}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "shop"},
         "spec": {"nodeName": "n1", "containers": [c("app", {"memory": "2G"}, {"memory": "4G"})]}},
    ]}
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snap))
    assert main(["qos", "--snapshot", str(path), "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["pods"]["shop/web"]["qosClass"] == "Burstable"
    assert out["pods"]["shop/web"]["oomScoreAdj"] == {"app": 750}
    assert main(["qos", "--snapshot", str(path)]) == 0
    assert "Burstable" in capsys.readouterr().out
