"""The scheduler's scale paths agree with the plain ones (issue 18).

* PreFilterResult: a pod whose required node affinity names its nodes (`matchFields metadata.name`) is
  filtered on those nodes only; the nodes found, and the statuses when none fits, are what a pass over
  every node gives.
* Shape caches recompute only the rows of changed nodes; per-row resource results catch up over many
  changed rows at once: both equal the per-node forms on the current cluster.
* The queue moves, on a cluster event, exactly the unschedulable pods walking them all would move.
* NodeVolumeLimits, VolumeBinding and VolumeZone: the vectorised Filter equals the per-node one.
* The topology index's counts per selector (first count from the namespace/label candidates, then kept
  current per event) equal a scan of every assigned pod.
* PodTopologySpread's PreScore counts per domain (from the index's per-domain totals where it can) equal
  upstream's loop over every node.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from kubesched.api.objects import parse_node, parse_pod
from kubesched.api.selectors import LabelSelector, Requirement
from kubesched.api.snapshot import parse_objects
from kubesched.cluster.state import ClusterState
from kubesched.scheduler.framework import Code, CycleState
from kubesched.scheduler.plugins.topology_index import PodMatcher, index_for
from kubesched.scheduler.queue import SchedulingQueue
from kubesched.scheduler.scheduler import Diagnosis, Scheduler
from tests.test_sched_plugins_node import SC_CSI_WFFC, SC_IMMEDIATE, SC_WFFC, claim_volume, pv, pvc
from tests.test_sched_plugins_node import node as vol_node
from tests.test_sched_plugins_node import pod as vol_pod

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


# ---------------------------------------------------------------- caches that follow the change


def _plain_node(i: int, rnd: random.Random) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"n{i}", "labels": {ZONE: rnd.choice(["a", "b"]), "tier": rnd.choice(["x", "y"])}},
            "spec": {"unschedulable": rnd.random() < 0.2,
                     "taints": rnd.choice([[], [{"key": "k", "value": "v", "effect": rnd.choice(
                         ["NoSchedule", "PreferNoSchedule", "NoExecute"])}]])},
            "status": {"allocatable": {"cpu": rnd.choice(["2", "4"]), "memory": rnd.choice(["4Gi", "8Gi"]),
                                       "pods": "110"}}}


def _shaped_pod(name: str, shape: int, node: str = "") -> dict[str, Any]:
    cpu, mem = ["100m", "300m", "700m"][shape % 3], ["128Mi", "1Gi"][shape % 2]
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]}
    if shape % 4 == 1:
        spec["tolerations"] = [{"key": "k", "operator": "Exists"}]
    if shape % 5 == 2:
        spec["nodeSelector"] = {"tier": "x"}
    if shape % 3 == 0:
        spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a"]}]}}]}}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


@pytest.mark.parametrize("seed", range(6))
def test_node_static_and_row_caches_follow_node_and_pod_changes(seed: int) -> None:
    """Shape masks kept per changed node row, and per-row resource results caught up over many changed rows
    at once, give what the per-node forms give on the current cluster."""
    rnd = random.Random(seed)
    cluster = ClusterState()
    for i in range(30):
        cluster.add(parse_node(_plain_node(i, rnd)))
    sched = Scheduler(cluster)
    fwk = sched.frameworks["default-scheduler"]
    names = ("NodeName", "NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodeResourcesFit",
             "NodeResourcesBalancedAllocation")
    made = 0
    for step in range(60):
        shape = rnd.randrange(12)
        pod = parse_pod(_shaped_pod(f"q{step}", shape))
        rows = cluster.node_order()
        for name in names:
            pl: Any = fwk.plugins[name]
            state = CycleState()
            if hasattr(pl, "pre_filter"):
                _, st = pl.pre_filter(state, pod, cluster)
                if st.is_skip:
                    continue
            if hasattr(pl, "filter_nodes"):
                got = pl.filter_nodes(state, pod, cluster, rows)
                assert got.tolist() == [pl.filter(state, pod, cluster.node_infos[r]).is_success for r in rows], name
            if hasattr(pl, "score_nodes") and pl.pre_score(state, pod, cluster, rows).is_success:
                got = pl.score_nodes(state, pod, cluster, rows)
                assert got.tolist() == [pl.score(state, pod, cluster.node_infos[r])[0] for r in rows], name
        # Between two reads: several node objects change, or many pods come and go (more than the
        # per-row catch-up handles one by one).
        if rnd.random() < 0.4:
            for _ in range(rnd.randrange(1, 4)):
                cluster.update(parse_node(_plain_node(rnd.randrange(30), rnd)))
        else:
            for _ in range(rnd.randrange(1, 25)):
                made += 1
                cluster.add(parse_pod(_shaped_pod(f"e{made}", rnd.randrange(12), f"n{rnd.randrange(30)}")))
            assigned = [p for p in cluster.pods.values() if p.node_name]
            for p in rnd.sample(assigned, min(len(assigned), rnd.randrange(0, 10))):
                cluster.delete(p)


@pytest.mark.parametrize("seed", range(6))
def test_topology_index_counts_equal_a_scan(seed: int) -> None:
    """Pods per row matching a selector: the index (candidates by namespace and label, then kept current
    per pod event) against a scan of every assigned pod, with pods bound, relabelled and deleted."""
    rnd = random.Random(seed)
    cluster = ClusterState()
    for i in range(12):
        cluster.add(parse_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
                                "status": {"allocatable": {"cpu": "64", "memory": "64Gi", "pods": "500"}}}))
    idx = index_for(cluster)

    def pod(k: int) -> Any:
        labels = {"app": f"a{rnd.randrange(4)}"} | ({"tier": rnd.choice(["x", "y"])} if rnd.random() < 0.6 else {})
        meta: dict[str, Any] = {"name": f"p{k}", "namespace": rnd.choice(["ns1", "ns2", "ns3"]), "labels": labels}
        return parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                          "spec": {"nodeName": f"n{rnd.randrange(12)}", "containers": [{"name": "c"}]}})

    def matcher() -> PodMatcher:
        reqs = []
        if rnd.random() < 0.7:
            reqs.append(Requirement("app", "In", tuple(sorted({f"a{rnd.randrange(4)}" for _ in range(2)}))))
        if rnd.random() < 0.4:
            reqs.append(Requirement("tier", rnd.choice(["In", "NotIn"]), (rnd.choice(["x", "y"]),)))
        if rnd.random() < 0.2:
            reqs.append(Requirement("tier", "Exists", ()))
        ns = rnd.choice([None, frozenset({"ns1"}), frozenset({"ns2", "ns3"}), frozenset()])
        clauses = ((ns, LabelSelector(tuple(reqs))),)
        if rnd.random() < 0.3:  # a second clause (a term's selector beside a namespace selector's)
            second = Requirement("tier", "In", tuple(sorted({rnd.choice(["x", "y"]) for _ in range(2)})))
            clauses += ((rnd.choice([None, frozenset({"ns1", "ns2"})]), LabelSelector((second,))),)
        return PodMatcher(clauses, skip_terminating=rnd.random() < 0.5)

    def scan(m: PodMatcher) -> list[int]:
        out = [0] * cluster.num_nodes
        for p in cluster.pods.values():
            if p.node_name and not p.is_terminal and m.matches(p.namespace, p.labels, p.is_terminating):
                out[cluster.node_info_by_name[p.node_name].index] += 1
        return out

    made = 0
    made_matchers: list[PodMatcher] = []
    for _ in range(30):
        for _ in range(rnd.randrange(1, 15)):
            made += 1
            cluster.add(pod(made))
        keys = [k for k in cluster.pods]
        for k in rnd.sample(keys, min(3, len(keys))):
            cluster.delete(cluster.pods[k])
        for k in rnd.sample(list(cluster.pods), min(2, len(cluster.pods))):
            p = cluster.pods[k]
            meta = dict(p.raw["metadata"], labels={"app": f"a{rnd.randrange(4)}"})
            if rnd.random() < 0.3:  # being deleted: matchers that skip terminating pods stop counting it
                meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
            cluster.update(parse_pod(dict(p.raw, metadata=meta)))
        for _ in range(4):
            made_matchers.append(matcher())
        # New matchers are counted from the candidates; those asked before were kept current by the events.
        for m in made_matchers:
            assert idx.counts(m).tolist() == scan(m), m


# ---------------------------------------------------------------- the queue's moves


class WalkingQueue(SchedulingQueue):
    """The reference: every cluster event walks every unschedulable pod and asks its rejecting plugins."""

    def on_cluster_event(self, resource: str, action: str) -> None:
        self.move_request_cycle = self.scheduling_cycle
        for key in list(self.unschedulable_since):
            qpi = self.infos[key]
            fwk = self.frameworks.get(qpi.pod.scheduler_name)
            if fwk is not None and self._interested(fwk, qpi.unschedulable_plugins, resource, action):
                self._move(qpi)


@pytest.mark.parametrize("seed", range(8))
def test_grouped_moves_equal_walking_every_unschedulable_pod(seed: int) -> None:
    rnd = random.Random(seed)
    frameworks = Scheduler(ClusterState()).frameworks
    now = [1000.0]
    queues = [SchedulingQueue(frameworks, lambda: now[0]), WalkingQueue(frameworks, lambda: now[0])]
    plugin_sets = [set(), {"NodeResourcesFit"}, {"NodeAffinity"}, {"TaintToleration", "NodeAffinity"},
                   {"PodTopologySpread"}, {"NoSuchPlugin"}, {"NodeUnschedulable"}, {"VolumeBinding"}]
    events = [("Pod", "add"), ("Pod", "delete"), ("Pod", "update"), ("Node", "add"), ("Node", "update"),
              ("Node", "delete"), ("PersistentVolumeClaim", "add"), ("Namespace", "update")]
    made = 0
    for _ in range(300):
        op = rnd.random()
        if op < 0.25:
            made += 1
            p = parse_pod({"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": f"p{made}", "namespace": "d"},
                           "spec": {"containers": [{"name": "c"}], "priority": rnd.choice([0, 0, 5])}})
            for q in queues:
                q.add(p)
        elif op < 0.55:
            popped = [q.pop() for q in queues]
            assert (popped[0] is None) == (popped[1] is None)
            if popped[0] is not None:
                assert popped[0].pod.key == popped[1].pod.key  # type: ignore[union-attr]
                plugins = rnd.choice(plugin_sets)
                cycle = queues[0].scheduling_cycle - rnd.choice([0, 0, 1])
                error = rnd.random() < 0.1
                for q, qpi in zip(queues, popped, strict=True):
                    assert qpi is not None
                    qpi.unschedulable_plugins = set(plugins)
                    q.add_unschedulable(qpi, cycle, error=error)
        elif op < 0.85:
            resource, action = rnd.choice(events)
            for q in queues:
                q.on_cluster_event(resource, action)
        elif op < 0.92:
            now[0] += rnd.choice([0.5, 2.0, 30.0, 400.0])
        else:
            keys = sorted(queues[1].infos)
            if keys:
                victim = queues[1].infos[rnd.choice(keys)].pod
                for q in queues:
                    q.delete(victim)
        assert queues[0].where == queues[1].where
        assert list(queues[0].unschedulable_since) == list(queues[1].unschedulable_since)
        assert sorted(queues[0]._active) == sorted(queues[1]._active)
        assert sorted(queues[0]._backoff) == sorted(queues[1]._backoff)


# ---------------------------------------------------------------- volume plugins: vectorised == per node


def _volume_cluster(rnd: random.Random) -> ClusterState:
    objs: list[dict[str, Any]] = [SC_WFFC, SC_CSI_WFFC, SC_IMMEDIATE]
    for i in range(16):
        labels = {"kubernetes.io/hostname": f"n{i}"}
        if rnd.random() < 0.8:
            labels[ZONE] = rnd.choice(["a", "b", "c"])
            labels["zone"] = labels[ZONE]
        alloc: dict[str, Any] = {"cpu": "4", "memory": "8Gi", "pods": "110"}
        if rnd.random() < 0.3:
            alloc["attachable-volumes-csi-csi.example.com"] = str(rnd.choice([1, 2]))
        objs.append(vol_node(f"n{i}", labels, allocatable=alloc))
        if rnd.random() < 0.2:
            objs.append({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": f"n{i}"},
                         "spec": {"drivers": [{"name": "csi.example.com", "nodeID": f"n{i}",
                                               "allocatable": {"count": rnd.choice([1, 2])}}]}})
    for j in range(10):
        kind = rnd.choice(["local", "csi", "zoned"])
        if kind == "local":
            objs.append(pv(f"pv{j}", "local", hostname=f"n{rnd.randrange(16)}", claim=f"c{j}"))
        elif kind == "csi":
            objs.append(pv(f"pv{j}", "fast", csi=("csi.example.com", f"h{j}"), claim=f"c{j}"))
        else:
            objs.append(pv(f"pv{j}", "fast", labels={ZONE: rnd.choice(["a", "b", "a__b"])}, claim=f"c{j}"))
        objs.append(pvc(f"c{j}", "local" if kind == "local" else "fast", f"pv{j}", bound=True))
    for j in range(3):
        objs.append(pv(f"free{j}", "local", hostname=f"n{rnd.randrange(16)}"))
        objs.append(pvc(f"wait{j}", "local"))
    for k in range(12):
        claims = rnd.sample([f"c{j}" for j in range(10)], rnd.choice([1, 2]))
        objs.append(vol_pod(f"old{k}", f"n{rnd.randrange(16)}", volumes=[claim_volume(f"v{i}", c)
                                                                       for i, c in enumerate(claims)]))
    return ClusterState.from_snapshot(parse_objects(objs, "test"))


@pytest.mark.parametrize("seed", range(8))
def test_volume_plugins_vectorised_equal_per_node(seed: int) -> None:
    rnd = random.Random(seed)
    cluster = _volume_cluster(rnd)
    fwk = Scheduler(cluster).frameworks["default-scheduler"]
    names = ("NodeVolumeLimits", "VolumeBinding", "VolumeZone")
    for k in range(25):
        choices = [f"c{j}" for j in range(10)] + [f"wait{j}" for j in range(3)] + ["nope"]
        claims = rnd.sample(choices, rnd.choice([1, 1, 2, 3]))
        pod_obj = parse_objects([vol_pod(f"new{k}", volumes=[claim_volume(f"v{i}", c)
                                                             for i, c in enumerate(claims)])], "t").pods[0]
        rows = cluster.node_order()
        for name in names:
            pl: Any = fwk.plugins[name]
            state = CycleState()
            _, st = pl.pre_filter(state, pod_obj, cluster)
            if st.is_skip:
                continue
            got = pl.filter_nodes(state, pod_obj, cluster, rows).tolist()
            want = [pl.filter(state, pod_obj, cluster.node_infos[r]).is_success for r in rows]
            assert got == want, (name, claims)
        if rnd.random() < 0.3:  # a node's labels or limits change: the cached masks follow that row
            i = rnd.randrange(16)
            labels = {"kubernetes.io/hostname": f"n{i}", ZONE: rnd.choice(["a", "b"])}
            alloc = {"cpu": "4", "memory": "8Gi", "pods": "110"}
            if rnd.random() < 0.5:
                alloc["attachable-volumes-csi-csi.example.com"] = "1"
            cluster.update(parse_objects([vol_node(f"n{i}", labels, allocatable=alloc)], "t").nodes[0])


def test_absent_nodes_status_names_every_narrowing_plugin_as_go_prints_them() -> None:
    """NodeAffinity names n1 and n2, VolumeBinding (a local PV on n1) names n1; n1 is too small: every other
    node gets upstream's absent-nodes status, the plugins printed as Go prints a string slice."""
    objs = [vol_node(f"n{i}", {"kubernetes.io/hostname": f"n{i}"},
                     allocatable={"cpu": "1" if i == 1 else "8", "memory": "8Gi", "pods": "110"}) for i in range(1, 5)]
    objs += [SC_WFFC, pv("local1", "local", hostname="n1", claim="data"), pvc("data", "local", "local1", bound=True),
             vol_pod("p", volumes=[claim_volume("v", "data")],
                     containers=[{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
                     affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                         {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]}
                         for n in ("n1", "n2")]}}})]
    cluster = ClusterState.from_snapshot(parse_objects(objs, "t"))
    sched = Scheduler(cluster)
    diag = Diagnosis()
    feasible, _ = sched.find_nodes_that_fit(sched.frameworks["default-scheduler"], CycleState(),
                                            cluster.pods["default/p"], diag)
    assert len(feasible) == 0
    assert diag.node_to_status["n1"].reasons == ["Insufficient cpu"]
    for name in ("n2", "n3", "n4"):
        assert diag.node_to_status[name].reasons == ["node(s) didn't satisfy plugin(s) [NodeAffinity VolumeBinding]"]


# ---------------------------------------------------------------- PodTopologySpread's PreScore counts


@pytest.mark.parametrize("seed", range(8))
def test_spread_prescore_domain_counts_equal_upstreams_node_loop(seed: int) -> None:
    """PodTopologySpread PreScore's pods per domain — from the index's per-domain totals when every node of a
    candidate domain is eligible, else summed per row — equal upstream's loop over every node: eligible when
    it has every key (explicit constraints) and passes the inclusion policies, counted under its label value
    ("" when missing) if a scored node is in that domain."""
    from kubesched.config.plugin_args import build_args
    from kubesched.scheduler.framework import Handle
    from kubesched.scheduler.plugins.pod_topology_spread import (
        PRE_SCORE_KEY,
        PodTopologySpread,
        required_node_affinity_matches,
        tolerates_node_taints,
    )

    rnd = random.Random(seed)
    cluster = ClusterState()
    n_nodes = 30
    for i in range(n_nodes):
        labels = {"kubernetes.io/hostname": f"n{i}", "disk": rnd.choice(["ssd", "hdd"])}
        r = rnd.random()
        if seed % 2 == 0 or r < 0.7:  # even seeds: every node is zoned (the fast path)
            labels[ZONE] = rnd.choice(["a", "b", "c", "d"])
        elif r < 0.85:
            labels[ZONE] = ""
        taints = [{"key": "t", "effect": "NoSchedule"}] if rnd.random() < 0.2 else []
        cluster.add(parse_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}", "labels": labels},
                                "spec": {"taints": taints},
                                "status": {"allocatable": {"cpu": "64", "memory": "64Gi", "pods": "500"}}}))
    owner = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u1", "controller": True}]
    made = 0

    def add_pods(k: int) -> None:
        nonlocal made
        for _ in range(k):
            made += 1
            cluster.add(parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": f"p{made}", "namespace": rnd.choice(["ns1", "ns2"]),
                "labels": {"app": rnd.choice(["x", "y"])}, "ownerReferences": owner},
                "spec": {"nodeName": f"n{rnd.randrange(n_nodes)}", "containers": [{"name": "c"}]}}))

    default_pl = PodTopologySpread(build_args(PodTopologySpread, None), Handle(cluster))
    listed = PodTopologySpread(build_args(PodTopologySpread, {"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"}]}), Handle(cluster))
    for step in range(12):
        add_pods(rnd.randrange(1, 12))
        for k in rnd.sample(list(cluster.pods), min(2, len(cluster.pods))):
            cluster.delete(cluster.pods[k])
        spec: dict[str, Any] = {"containers": [{"name": "c"}]}
        if rnd.random() < 0.5:
            spec["topologySpreadConstraints"] = [{
                "maxSkew": 2, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "x"}},
                **({"nodeTaintsPolicy": "Honor"} if rnd.random() < 0.5 else {})}]
        if rnd.random() < 0.4:
            spec["nodeSelector"] = {"disk": "ssd"}
        incoming = parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"in{step}", "namespace": rnd.choice(["ns1", "ns2"]), "labels": {"app": "x"},
            "ownerReferences": owner}, "spec": spec})
        pl = default_pl if step % 3 else listed
        rows = np.array(sorted(rnd.sample(range(n_nodes), rnd.randrange(1, n_nodes))), dtype=np.int64)
        state = CycleState()
        st = pl.pre_score(state, incoming, cluster, rows)
        if st.code is Code.SKIP:
            continue
        s = state.read(PRE_SCORE_KEY)
        infos = cluster.node_infos
        explicit = bool(incoming.topology_spread_constraints) or not pl.system_defaulted

        def has_all(node: Any, s: Any = s) -> bool:
            return all(c.topology_key in node.labels for c in s.constraints)

        for i, c in enumerate(s.constraints):
            if c.topology_key != ZONE:
                continue
            scored_values = {infos[r].node.labels.get(ZONE, "") for r in rows
                             if not explicit or has_all(infos[r].node)}
            expected: dict[str, int] = {}
            for info in infos:
                node = info.node
                if explicit and not has_all(node):
                    continue
                if c.node_affinity_honor and not required_node_affinity_matches(incoming, node):
                    continue
                if c.node_taints_honor and not tolerates_node_taints(incoming, node):
                    continue
                value = node.labels.get(ZONE, "")
                if value not in scored_values:
                    continue
                n = sum(1 for p in info.pods.values() if p.namespace == incoming.namespace
                        and not p.is_terminating and c.selector.matches(p.labels))
                expected[value] = expected.get(value, 0) + n
            topo = s.topologies[i]
            got = {("" if d == topo.size else topo.values[d]): int(v) for d, v in enumerate(s.domain_counts[i]) if v}
            assert got == {k: v for k, v in expected.items() if v}, (seed, step)
