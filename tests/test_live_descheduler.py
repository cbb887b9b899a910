"""`kubesched descheduler` through the command line, against the API server double: the same evictions as
`kubesched deschedule`, limits across plugins and profiles, PodDisruptionBudgets (429, never retried),
dry run, the interval loop with metrics and a clean SIGTERM, and bad input."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.kube_apiserver_double import KubeAPIServerDouble
from tests.live_processes import Process, node, pods_of, running, wait_until
from tests.test_live_capture import run
from tests.test_live_scheduler import free_port, http_get, metric

Start = Callable[..., Process]

POLICY = {
    "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
    "maxNoOfPodsToEvictPerNode": 2, "maxNoOfPodsToEvictTotal": 3,
    "profiles": [
        {"name": "requests", "pluginConfig": [
            {"name": "DefaultEvictor", "args": {}},
            {"name": "LowNodeUtilization", "args": {"thresholds": {"cpu": 20, "memory": 20, "pods": 20},
                                                    "targetThresholds": {"cpu": 50, "memory": 50, "pods": 50}}}],
         "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}},
        {"name": "duplicates", "pluginConfig": [{"name": "DefaultEvictor", "args": {}},
                                                {"name": "RemoveDuplicates", "args": {}}],
         "plugins": {"balance": {"enabled": ["RemoveDuplicates"]}}},
    ],
}


def cluster(pdb_allows: int | None = None) -> list[dict[str, Any]]:
    """n1 crowded with one ReplicaSet's pods (requests over the target, and duplicates), n4 with two copies of
    another ReplicaSet's pod, n2 and n3 nearly idle."""
    objs: list[dict[str, Any]] = [node("n1"), node("n2"), node("n3"), node("n4")]
    objs += [running(f"web-{i}", "n1", cpu="400m") for i in range(8)]
    objs.append(running("db-0", "n2", cpu="100m", labels={"app": "db"}, owner="StatefulSet"))
    for i in range(2):
        batch = running(f"batch-{i}", "n4", cpu="200m", labels={"app": "batch"})
        batch["metadata"]["ownerReferences"][0].update(name="batch-rs", uid="batch-uid")
        objs.append(batch)
    if pdb_allows is not None:
        objs.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                     "metadata": {"name": "web", "namespace": "default", "generation": 1},
                     "spec": {"minAvailable": 8 - pdb_allows, "selector": {"matchLabels": {"app": "web"}}}})
    return objs


def setup(api: KubeAPIServerDouble, tmp_path: Path, objs: list[dict[str, Any]]) -> tuple[Path, Path, Path]:
    api.add(*objs)
    api.sync_pdbs()
    _, stored = api.store.current(api.resource("PodDisruptionBudget"), "default")
    snap = tmp_path / "snapshot.yaml"
    items = [o for o in objs if o["kind"] != "PodDisruptionBudget"] + stored
    snap.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}, sort_keys=False))
    pol = tmp_path / "policy.yaml"
    pol.write_text(yaml.safe_dump(POLICY, sort_keys=False))
    return api.kubeconfig(tmp_path / "kc"), snap, pol


def eviction_requests(api: KubeAPIServerDouble) -> list[str]:
    return [r.path.split("/")[-2] for r in list(api.requests) if r.method == "POST" and r.path.endswith("/eviction")]


def evictions(doc: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return sorted((e["pod"], e["node"], e["profile"], e["plugin"]) for e in doc["evictions"])


def test_one_live_cycle_evicts_what_deschedule_reports(api: KubeAPIServerDouble, processes: Start,
                                                       tmp_path: Path) -> None:
    kc, snap, pol = setup(api, tmp_path, cluster())
    code, out, err = run("deschedule", "--snapshot", str(snap), "--policy", str(pol), "-o", "json")
    assert code == 0, err
    expected = evictions(json.loads(out))
    # The limits hold across plugins and profiles: 3 in all, at most 2 from a node.
    assert len(expected) == 3 and {e[2] for e in expected} == {"duplicates", "requests"}
    assert max(Counter(e[1] for e in expected).values()) == 2
    p = processes("descheduler", "--kubeconfig", str(kc), "--policy", str(pol), "--port", "0", "-v", "1", "-o", "json")
    assert p.wait() == 0, p.log
    live = json.loads(p.stdout)
    assert evictions(live) == expected and live["refused"] == []
    assert sorted(eviction_requests(api)) == sorted(e[0].split("/")[1] for e in expected)
    gone = {e[0].split("/")[1] for e in expected}
    assert gone.isdisjoint(pods_of(api)) and len(pods_of(api)) == 11 - 3
    assert 'Evicted pod" pod="default/web-' in p.log
    reasons = Counter(e["reason"] for e in _events(api))
    assert sum(reasons.values()) == 3


def _events(api: KubeAPIServerDouble) -> list[dict[str, Any]]:
    _, items = api.store.current(api.resource("Event", "v1"), "default")
    return items


def test_a_pdb_429_is_skipped_counted_and_never_retried(api: KubeAPIServerDouble, processes: Start,
                                                        tmp_path: Path) -> None:
    kc, _, pol = setup(api, tmp_path, cluster(pdb_allows=1))
    p = processes("descheduler", "--kubeconfig", str(kc), "--policy", str(pol), "--port", "0", "-o", "json")
    assert p.wait() == 0, p.log
    live = json.loads(p.stdout)
    # The budget allows one web pod to go; the API server refuses the next with 429.
    assert [e[0] for e in evictions(live) if e[0].startswith("default/web-")] == ["default/web-0"]
    refused = live["refused"]
    assert refused and all(r["code"] == 429 and r["skipped"] for r in refused)
    # No retry: each strategy asks for a pod at most once in the cycle (upstream's strategies each ask on
    # their own, so two profiles may each ask once), and every request is accounted for.
    asked = Counter(eviction_requests(api))
    by_strategy = Counter((r["pod"], r["plugin"]) for r in refused)
    assert max(by_strategy.values()) == 1 and max(asked.values()) <= len(POLICY["profiles"])
    assert sum(asked.values()) == len(live["evictions"]) + len(refused)
    # Never past the budget: exactly one web pod went.
    assert sum(1 for n in pods_of(api) if n.startswith("web-")) == 7
    pdb = api.store.get(api.resource("PodDisruptionBudget"), "default", "web")
    assert pdb["status"]["disruptionsAllowed"] >= 0
    assert "Skipped eviction: the API server refused it (429)" in p.log


def test_dry_run_sends_nothing_and_reports(api: KubeAPIServerDouble, processes: Start, tmp_path: Path) -> None:
    kc, snap, pol = setup(api, tmp_path, cluster())
    code, out, _ = run("deschedule", "--snapshot", str(snap), "--policy", str(pol), "-o", "json")
    p = processes("descheduler", "--kubeconfig", str(kc), "--policy", str(pol), "--dry-run", "--port", "0", "-v", "1")
    assert p.wait() == 0, p.log
    writes = [r for r in list(api.requests) if r.method != "GET"]
    assert writes == []
    expected = evictions(json.loads(out))
    assert f"{len(expected)} pod(s) would be evicted" in p.stdout
    for pod, node_name, profile, plugin in expected:
        assert f"{pod}\t{node_name}\t{plugin}\t{profile}" in p.stdout
    assert "Evicted pod in dry run mode" in p.log


def test_interval_runs_cycles_serves_metrics_and_stops_on_sigterm(api: KubeAPIServerDouble, processes: Start,
                                                                  tmp_path: Path) -> None:
    kc, _, pol = setup(api, tmp_path, cluster())
    port = free_port()
    p = processes("descheduler", "--kubeconfig", str(kc), "--policy", str(pol), "--descheduling-interval", "300ms",
                  "--port", str(port), "--bind-address", "127.0.0.1")
    wait_until(lambda: p.log.count("Descheduling cycle finished") >= 3, what="three cycles")
    _, text = http_get(port, "/metrics")
    assert metric(text, "descheduler_loop_duration_seconds_count") >= 3
    evicted = sum(metric(text, "descheduler_pods_evicted_total", result="success", strategy=s, profile=pr,
                         namespace="default", node=n)
                  for s, pr in (("RemoveDuplicates", "duplicates"), ("LowNodeUtilization", "requests"))
                  for n in ("n1", "n2", "n3"))
    assert evicted >= 3
    assert http_get(port, "/readyz") == (200, "ok")
    assert p.terminate() == 0


def test_bad_input_exits_2_and_an_unreachable_server_1(tmp_path: Path) -> None:
    pol = tmp_path / "policy.yaml"
    pol.write_text(yaml.safe_dump(POLICY))
    kc = tmp_path / "kc"
    KubeAPIServerDouble(port=free_port()).kubeconfig(kc)
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: [{name: x, plugins: {balance: "
                   "{enabled: [NoSuchPlugin]}}}]\n")
    for args in (["--policy", str(tmp_path / "missing.yaml")], ["--policy", str(bad)],
                 ["--policy", str(pol), "--leader-elect"], ["--policy", str(pol), "--descheduling-interval", "often"]):
        code, out, err = run("descheduler", "--kubeconfig", str(kc), "--port", "0", *args)
        assert code == 2, (args, err)
        assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and out == ""
    code, out, err = run("descheduler", "--kubeconfig", str(kc), "--policy", str(pol), "--port", "0",
                         "--sync-timeout", "1s")
    assert code == 1 and "did not sync" in err and "connection refused" in err
