"""The scheduler's scale paths agree with the plain ones (issue 18).

* PreFilterResult: a pod whose required node affinity names its nodes (`matchFields metadata.name`) is
  filtered on those nodes only; the nodes found, and the statuses when none fits, are what a pass over
  every node gives.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from kubesched.api.objects import parse_node, parse_pod
from kubesched.cluster.state import ClusterState
from kubesched.scheduler.framework import Code, CycleState
from kubesched.scheduler.scheduler import Diagnosis, Scheduler

ZONE = "topology.kubernetes.io/zone"


def _node(i: int, rnd: random.Random) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if rnd.random() < 0.15:
        spec["unschedulable"] = True
    if rnd.random() < 0.15:
        spec["taints"] = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"n{i}", "labels": {ZONE: rnd.choice(["a", "b", "c"]), "kubernetes.io/hostname": f"n{i}"}},
            "spec": spec,
            "status": {"allocatable": {"cpu": rnd.choice(["1", "2", "4"]), "memory": "8Gi", "pods": "110"}}}


def _pinned_pod(name: str, rnd: random.Random, n_nodes: int) -> dict[str, Any]:
    terms = []
    for _ in range(rnd.choice([1, 1, 1, 2])):
        names = [f"n{rnd.randrange(n_nodes + 3)}" for _ in range(rnd.choice([1, 1, 2, 3]))]  # some do not exist
        term: dict[str, Any] = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": names}]}
        if rnd.random() < 0.3:
            term["matchExpressions"] = [{"key": ZONE, "operator": "In", "values": [rnd.choice(["a", "b"])]}]
        terms.append(term)
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": rnd.choice(["100m", "1500m", "3"])}}}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}
    if rnd.random() < 0.3:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


@pytest.mark.parametrize("seed", range(10))
def test_prefilter_result_path_equals_a_full_pass(seed: int) -> None:
    rnd = random.Random(seed)
    cluster = ClusterState()
    n_nodes = 30
    for i in range(n_nodes):
        cluster.add(parse_node(_node(i, rnd)))
    sched = Scheduler(cluster)
    fwk = sched.frameworks["default-scheduler"]
    infos = cluster.node_infos
    checked_empty = 0
    for k in range(40):
        pod = parse_pod(_pinned_pod(f"p{k}", rnd, n_nodes))
        sched.next_start_node_index = rnd.randrange(n_nodes)
        state, diag = CycleState(), Diagnosis()
        feasible, _ = sched.find_nodes_that_fit(fwk, state, pod, diag)

        full_state = CycleState()
        fwk.run_pre_filter(full_state, pod)
        full_state.delete("PreFilterResult/NodeAffinity")
        order = cluster.node_order()
        mask = fwk.filter_mask(full_state, pod, order)
        assert sorted(infos[r].name for r in feasible) == sorted(infos[r].name for r in order[mask])
        # The named nodes are evaluated in node order (from the rotating start): at most one wrap-around.
        positions = [order.tolist().index(r) for r in feasible]
        assert sum(a > b for a, b in zip(positions, positions[1:], strict=False)) <= 1

        if len(feasible) == 0:
            checked_empty += 1
            required = pod.affinity.node_required
            assert required is not None
            named = {v for t in required.terms for r in t.match_fields for v in r.values}
            assert set(diag.node_to_status) == {i.name for i in infos}
            for info in infos:
                st = diag.node_to_status[info.name]
                if info.name in named:
                    want = fwk.run_filter_plugins(full_state, pod, info)
                    assert (st.code, st.reasons, st.plugin) == (want.code, want.reasons, want.plugin)
                else:
                    assert st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
                    assert st.reasons == ["node(s) didn't satisfy plugin(s) [NodeAffinity]"]
        # Bind some so that nodes fill up.
        if len(feasible) and rnd.random() < 0.5:
            cluster.add(pod)
            cluster.bind(pod, infos[int(feasible[0])].name)
    assert checked_empty > 0


def test_pinned_pods_land_on_their_nodes() -> None:
    cluster = ClusterState()
    for i in range(200):
        cluster.add(parse_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
                                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}))
    sched = Scheduler(cluster)
    for i in range(200):
        cluster.add(parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"ds-{i}", "namespace": "d"},
                               "spec": {"containers": [{"name": "c"}], "affinity": {"nodeAffinity": {
                                   "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                                       {"matchFields": [{"key": "metadata.name", "operator": "In",
                                                         "values": [f"n{i}"]}]}]}}}}}))
    sched.run_until_idle()
    assert all(cluster.pods[f"d/ds-{i}"].node_name == f"n{i}" for i in range(200))
