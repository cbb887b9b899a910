"""The simulator's indexes agree with what they index: incremental == recomputed.

- ClusterState: a node added or deleted changes only its own row (the pods naming a node that does not
  exist wait for it); after any sequence of node and pod changes every node's numbers, pods and table row
  equal those of a state rebuilt from the same objects.
- Controllers' active-pod index, the pod registry's and the kubelets' per-node indexes, the kubelets'
  engaged eviction managers, the disruption controller's per-PDB matches, the server's queue of graceful
  deletions: checked against a fresh scan at every minute of a simulation that evicts, drains, removes
  and adds nodes and scales.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.api.objects import parse_node, parse_pod
from kubesched.cluster.state import ClusterState
from kubesched.sim.context import ORDER_RECORD
from kubesched.sim.engine import Engine
from kubesched.sim.scenario import parse_scenario

# ---------------------------------------------------------------- ClusterState: node add / delete


def node(name: str, cpu: int, zone: str) -> Any:
    return parse_node({"apiVersion": "v1", "kind": "Node",
                       "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                             "topology.kubernetes.io/zone": zone}},
                       "status": {"allocatable": {"cpu": str(cpu), "memory": "16Gi", "pods": "110",
                                                  **({"example.com/gpu": "2"} if cpu % 3 == 0 else {})},
                                  "conditions": [{"type": "Ready", "status": "True"}]}})


def pod(name: str, node_name: str, cpu_m: int, phase: str, anti: bool) -> Any:
    spec: dict[str, Any] = {"nodeName": node_name, "containers": [{"name": "c", "image": "i", "resources": {
        "requests": {"cpu": f"{cpu_m}m", **({"example.com/gpu": "1"} if cpu_m % 2 else {})}},
        "ports": [{"containerPort": 80, "hostPort": 8000 + cpu_m % 3}] if cpu_m % 5 == 0 else []}]}
    if anti:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    return parse_pod({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}-{phase}",
                                   "labels": {"app": "a"}},
                      "spec": spec, "status": {"phase": phase}})


def view(state: ClusterState) -> dict[str, Any]:
    """Everything a node's row and NodeInfo hold, by node name, and the walk order."""
    t = state.table
    out: dict[str, Any] = {"order": [state.node_infos[int(r)].name for r in state.node_order()],
                           "rows": t.n, "affinity": sorted(state.assigned_with_affinity),
                           "anti": sorted(state.assigned_with_required_anti_affinity)}
    for info in state.node_infos:
        r = info.index
        cols = {res: (int(t.alloc[r, c]), int(t.requested[r, c]), bool(t.has[r, c])) for res, c in t.column.items()}
        out[info.name] = (r, sorted(info.pods), dict(sorted((k, v) for k, v in info.requested.items() if v)),
                          info.non_zero_cpu, info.non_zero_mem, sorted(info.used_ports.items()),
                          sorted(info.pods_with_affinity), {k: v for k, v in cols.items() if v != (0, 0, False)},
                          tuple(int(x) for x in t.non_zero[r]), int(t.pod_count[r]), int(t.allowed_pods[r]))
    assert not t.requested[t.n:].any() and not t.pod_count[t.n:].any()
    return out


def rebuilt(state: ClusterState) -> ClusterState:
    fresh = ClusterState()
    for info in state.node_infos:
        fresh.add(info.node)
    for p in state.pods.values():
        fresh.add(p)
    return fresh


OPS = st.lists(st.tuples(st.sampled_from(["add_node", "delete_node", "add_pod", "delete_pod", "finish"]),
                         st.integers(0, 7), st.integers(1, 9), st.booleans()), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_node_add_and_delete_change_only_their_row(ops: list[tuple[str, int, int, bool]]) -> None:
    state = ClusterState()
    for i in range(3):
        state.add(node(f"n{i}", 4 + i, "ab"[i % 2]))
    serial = 0
    for op, k, size, flag in ops:
        name = f"n{k}"
        if op == "add_node" and name not in state.nodes:
            state.add(node(name, 2 + size, "abc"[k % 3]))
        elif op == "delete_node" and name in state.nodes:
            state.delete(state.nodes[name])
        elif op == "add_pod":
            serial += 1
            state.add(pod(f"p{serial}", name if flag or size % 2 else "", 100 * size, "Running", size % 4 == 0))
        elif op == "delete_pod" and state.pods:
            keys = list(state.pods)
            state.delete(state.pods[keys[(k * 7 + size) % len(keys)]])
        elif op == "finish" and state.pods:
            keys = list(state.pods)
            p = state.pods[keys[(k * 3 + size) % len(keys)]]
            state.update(p.with_status(phase="Succeeded"))
        assert view(state) == view(rebuilt(state))


def test_a_node_added_late_counts_the_pods_that_named_it() -> None:
    state = ClusterState()
    state.add(node("n0", 4, "a"))
    state.add(pod("early", "n1", 500, "Running", False))
    state.add(pod("done", "n1", 700, "Succeeded", False))
    assert state._awaiting_node == {"n1": {"default/early"}}
    state.add(node("n1", 4, "a"))
    assert sorted(state.node_info_by_name["n1"].pods) == ["default/early"]
    assert state.node_info_by_name["n1"].requested["cpu"] == 500
    state.delete(state.nodes["n1"])
    # Its pods wait for a node of that name again; deleting one stops it waiting.
    assert state._awaiting_node == {"n1": {"default/early"}}
    state.delete(state.pods["default/early"])
    assert state._awaiting_node == {}
    assert view(state) == view(rebuilt(state))


# ---------------------------------------------------------------- the simulator's indexes in a run

NODE = {"metadata": {"labels": {"topology.kubernetes.io/zone": "a"}},
        "status": {"capacity": {"cpu": "4", "memory": "4Gi", "pods": "110"},
                   "allocatable": {"cpu": "4", "memory": "4Gi", "pods": "110"}}}


def deploy(name: str, replicas: int, cpu: float, memory: float, ns: str = "default") -> dict[str, Any]:
    c = {"name": "c", "image": f"{name}:1", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"},
                                                          "limits": {"memory": "1Gi"}}}
    return {"object": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
                       "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                                "template": {"metadata": {"labels": {"app": name, "tier": "t"}},
                                             "spec": {"containers": [c]}}}},
            "usage": {"cpu": {"model": "randomWalk", "start": cpu, "step": 0.3, "min": 0.1, "max": 3.0},
                      "memory": {"model": "randomWalk", "start": memory, "step": 0.2, "min": 0.2, "max": 2.2}}}


def check_indexes(e: Engine) -> None:
    for c in e.controllers.controllers:
        for sub in (c, getattr(c, "rs", None)):
            if sub is not None:
                assert sub.active_count() == len(sub.active())
                assert list(sub._active) == [p.key for p in sub.active()]
    u = e.usage
    s = u.slots
    for nid in range(u.n):
        assert u.live_slots_on(nid) == [int(x) for x in np.flatnonzero(s["live"] & (s["node"] == nid))]
    names = {sp.node for sp in e.pods.values()} | set(e.cluster.nodes) | set(e.pods._on_node)
    for name in names - {""}:
        assert e.pods.on_node(name) == [sp for sp in e.pods.values() if sp.node == name]
    k = e.kubelets
    assert k._engaged == {name for name, m in k.managers.items()
                          if m.node_conditions or m.thresholds_first_observed_at or m.thresholds_met}
    d = e.disruption
    for pdb in e.cluster.pdbs.values():
        want = [sp.key for sp in e.pods.values()
                if sp.pod.namespace == pdb.meta.namespace and pdb.selector.matches(sp.pod.labels)]
        assert list(d.matched(pdb)) == want


def test_indexes_agree_with_a_fresh_scan_through_a_run(tmp_path: Path) -> None:
    pdbs = [{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": f"pdb-{a}", "namespace": ns},
             "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": a}}}}
            for a, ns in (("web", "default"), ("db", "data"))]
    pdbs.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                 "metadata": {"name": "tier", "namespace": "data"},
                 "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"tier": "t"}}}})
    policy = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
              "metricsProviders": [{"source": "KubernetesMetrics"}],
              "profiles": [{"name": "p", "pluginConfig": [
                  {"name": "DefaultEvictor"},
                  {"name": "LowNodeUtilization", "args": {"thresholds": {"cpu": 40}, "targetThresholds": {"cpu": 60},
                                                          "metricsUtilization": {"source": "KubernetesMetrics"}}}],
                  "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}]}
    doc = {"apiVersion": "kubesched.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "idx"},
           "spec": {"duration": "2h", "seed": 3, "usageStep": "1m",
                    "cluster": {"nodeTemplates": [{"name": "n", "count": 5, "node": copy.deepcopy(NODE)}],
                                "objects": pdbs},
                    "workloads": [deploy("web", 14, 1.6, 1.2), deploy("db", 6, 0.4, 1.6, "data"),
                                  deploy("batch", 8, 1.0, 1.0, "data")],
                    "descheduler": {"policy": policy, "interval": "5m"},
                    "kubelet": {"housekeepingInterval": "10s"},
                    "events": [{"at": "20m", "scale": {"workload": "Deployment/default/web", "replicas": 8}},
                               {"at": "30m", "drain": {"nodes": ["n-1"]}},
                               {"at": "40m", "removeNodes": {"nodes": ["n-1"]}},
                               {"at": "50m", "addNodes": {"template": "n", "count": 2}},
                               {"at": "70m", "scale": {"workload": "Deployment/default/web", "replicas": 16}},
                               {"at": "80m", "removeNodes": {"nodes": ["n-2"]}}]}}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(doc))
    e = Engine(parse_scenario(doc, str(p)))
    checks = []

    engaged = []

    def checker() -> None:
        check_indexes(e)
        engaged.append(len(e.kubelets._engaged))
        checks.append(e.t)
        if e.t + 60 <= e.s.duration:
            e.push(e.t + 60, ORDER_RECORD, checker)

    e.push(0.0, ORDER_RECORD, checker)
    result = e.run()
    check_indexes(e)
    assert len(checks) > 100
    assert max(engaged) > 0 and result.recorder.oom_kills
    # Graceful deletions that are over leave the server's deadline queue (a bounded history).
    deletions = sum(1 for ev in result.recorder.evictions if ev.component in ("descheduler", "drain"))
    assert deletions > 10
    assert len(e.server._terminations) <= sum(1 for sp in e.pods.values() if sp.terminating) + 1
    # The run did what the indexes must follow: evictions, pods gone, nodes removed and added.
    assert result.recorder.evictions and len(e.cluster.nodes) == 5
    assert any(ev.component == "drain" for ev in result.recorder.evictions)
    assert {pdb.meta.name for pdb in e.cluster.pdbs.values() if pdb.expected_pods > 0} == {"pdb-web", "pdb-db",
                                                                                             "tier"}
