"""The descheduler's vectorised and incremental fast paths agree with the plain forms.

- `nodeutil.node_requested_units` (NodeInfo's integer sums when every request is whole) equals the exact
  sum of the pods' requests, and `fits_request` equals fitsRequest computed from exact quantities;
- `nodeutil.NodeFitColumns.mask` equals koordinator's NodeFit asked node by node, also after pods are
  added to and removed from the nodes (the columns follow the NodeTable's change log), and its `candidates`
  are exact at the nodes worked out so far and keep every fitting node elsewhere;
- LowNodeLoad's `_Destinations.book` books the same pods on the same destinations as the one-destination-
  at-a-time `fits_any_with_threshold`, with whole usage (exact integer columns), fractional usage (float
  columns and the exact check) and a switch from one to the other;
- `sort_like_go(pods, pod_sort_key(...))` gives Go's `sort.Slice` order with `pod_sort_less`, ties included;
- `_exact_sums` and `compute_qos` (memoised per resource shape) equal their plain forms.
"""

from __future__ import annotations

import copy
import random
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import pytest

from kubesched.api.objects import Node, Pod, parse_node, parse_pod
from kubesched.api.qos import _spec_qos, compute_qos, has_pod_level_resources
from kubesched.api.quantity import milli_value_of, value_of
from kubesched.api.resources import pod_requests
from kubesched.cluster.state import ClusterState
from kubesched.descheduler import nodeutil
from kubesched.descheduler.evictor import PodEvictor, ProfileEvictor
from kubesched.descheduler.framework import Handle
from kubesched.descheduler.plugins._gosort import go_sort_slice
from kubesched.descheduler.plugins.low_node_load import (
    LowNodeLoad,
    LowNodeLoadArgs,
    NodeThresholds,
    NodeUsage,
    _Destinations,
    _exact_sums,
    pod_sort_key,
    pod_sort_less,
    sort_like_go,
)

CPUS = ("100m", "250m", "1", "1500m", "0.5m", "100u", "3")
MEMS = ("64Mi", "1Gi", "100", "1.5", "2Gi")


def node(i: int, rng: random.Random) -> Node:
    alloc: dict[str, str] = {"cpu": rng.choice(("2", "4", "4500m", "0.0005")), "pods": rng.choice(("3", "10", "110"))}
    if rng.random() < 0.9:
        alloc["memory"] = rng.choice(("4Gi", "2Gi", "1000"))
    if rng.random() < 0.4:
        alloc["example.com/gpu"] = rng.choice(("1", "2"))
    if rng.random() < 0.2:
        alloc["foo"] = "5"
    taints = [{"key": "dedicated", "value": "x", "effect": rng.choice(("NoSchedule", "NoExecute", "PreferNoSchedule"))}] \
        if rng.random() < 0.2 else []
    return parse_node({"apiVersion": "v1", "kind": "Node",
                       "metadata": {"name": f"n{i}", "labels": {"zone": rng.choice("ab"), "kubernetes.io/hostname": f"n{i}"}},
                       "spec": {"taints": taints, "unschedulable": rng.random() < 0.1},
                       "status": {"allocatable": alloc, "capacity": alloc,
                                  "conditions": [{"type": "Ready", "status": "True"}]}})


def pod(i: int, rng: random.Random, node_name: str = "") -> Pod:
    requests: dict[str, str] = {"cpu": rng.choice(CPUS)}
    if rng.random() < 0.8:
        requests["memory"] = rng.choice(MEMS)
    if rng.random() < 0.2:
        requests["example.com/gpu"] = "1"
    if rng.random() < 0.1:
        requests["foo"] = "1"
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i", "resources": {"requests": requests}}]}
    if rng.random() < 0.2:
        spec["initContainers"] = [{"name": "init", "image": "i", "resources": {"requests": {"cpu": rng.choice(CPUS)}}}]
    if rng.random() < 0.1:
        spec["overhead"] = {"cpu": "10m"}
    if rng.random() < 0.2:
        spec["nodeSelector"] = {"zone": rng.choice("ab")}
    if rng.random() < 0.1:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [f"n{rng.randrange(8)}"]}]}]}}}
    if rng.random() < 0.3:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": rng.choice(("NoSchedule", ""))}]
    if node_name:
        spec["nodeName"] = node_name
    return parse_pod({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": f"p{i}", "namespace": "default", "uid": f"u{i}"},
                      "spec": spec, "status": {"phase": "Running"}})


def cluster(seed: int, nodes: int = 8, pods: int = 30) -> tuple[ClusterState, list[Node], random.Random]:
    rng = random.Random(seed)
    state = ClusterState()
    node_list = [node(i, rng) for i in range(nodes)]
    for n in node_list:
        state.add(n)
    for i in range(pods):
        state.add(pod(i, rng, f"n{rng.randrange(nodes)}"))
    return state, node_list, rng


def exact_fits(state: ClusterState, p: Pod, n: Node) -> bool:
    """fitsRequest from exact quantities, as upstream computes it."""
    requests = pod_requests(p)
    on = list(state.pods_on(n.name))
    used: dict[str, Fraction] = {}
    for q in on:
        for k, v in pod_requests(q).items():
            used[k] = used.get(k, Fraction(0)) + v
    alloc = n.allocatable
    avail = {"cpu": Fraction(milli_value_of(alloc.get("cpu", Fraction(0))) - milli_value_of(used.get("cpu", Fraction(0))), 1000),
             "memory": Fraction(value_of(alloc.get("memory", Fraction(0))) - value_of(used.get("memory", Fraction(0)))),
             "pods": Fraction(value_of(alloc.get("pods", Fraction(0))) - len(on))}
    for name in requests:
        if name not in avail:
            avail[name] = Fraction(value_of(alloc[name]) - value_of(used.get(name, Fraction(0)))) if name in alloc \
                else Fraction(0)
    for name in ["pods", *requests]:
        if milli_value_of(requests.get(name, Fraction(0))) > milli_value_of(avail[name]):
            return False
    return milli_value_of(avail["pods"]) > 0


def koord_node_fit(state: ClusterState, p: Pod, n: Node) -> bool:
    return (nodeutil.pod_match_node_selector(p, n) and nodeutil.pod_tolerates_node_taints(p, n)
            and exact_fits(state, p, n) and not n.unschedulable)


@pytest.mark.parametrize("seed", range(6))
def test_requested_units_are_the_exact_sums(seed: int) -> None:
    state, nodes, _ = cluster(seed)
    fractional = False
    for n in nodes:
        units, count = nodeutil.node_requested_units(state, n.name)
        fractional = fractional or any(isinstance(v, Fraction) for v in units.values())
        exact: dict[str, Fraction] = {}
        for q in state.pods_on(n.name):
            for k, v in pod_requests(q).items():
                exact[k] = exact.get(k, Fraction(0)) + (v * 1000 if k == "cpu" else v)
        assert count == len(list(state.pods_on(n.name)))
        assert {k: v for k, v in exact.items() if v} == {k: Fraction(v) for k, v in units.items() if v}
    if seed == 0:
        assert fractional  # the exact path ran too (requests finer than a millicore)


@pytest.mark.parametrize("seed", range(6))
def test_node_fit_columns_equal_the_per_node_fit_as_pods_come_and_go(seed: int) -> None:
    state, nodes, rng = cluster(seed)
    columns = nodeutil.NodeFitColumns(state, nodes)
    candidates = [pod(1000 + i, rng) for i in range(25)]
    next_id = 2000
    seen: set[bool] = set()
    for _round in range(4):
        for p in candidates:
            expected = [koord_node_fit(state, p, n) for n in nodes]
            seen.update(expected)
            assert columns.mask(p).tolist() == expected
            assert [nodeutil.fits_request(state, p, n)[0] for n in nodes] == [exact_fits(state, p, n) for n in nodes]
        # Pods leave and arrive (what evictions and bindings do during a cycle).
        for q in rng.sample(list(state.pods.values()), 4):
            state.delete(q)
        for _ in range(4):
            state.add(pod(next_id, rng, f"n{rng.randrange(len(nodes))}"))
            next_id += 1
    assert seen == {True, False}


@pytest.mark.parametrize("seed", range(6))
def test_node_fit_candidates_are_exact_where_worked_out_as_pods_come_and_go(seed: int,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nodeutil.NodeFitColumns, "BLOCK", 2)
    state, nodes, rng = cluster(seed)
    columns = nodeutil.NodeFitColumns(state, nodes)
    candidates = [pod(1000 + i, rng) for i in range(25)]
    next_id = 2000
    learned = 0
    for _round in range(4):
        for p in candidates:
            expected = [koord_node_fit(state, p, n) for n in nodes]
            got = columns.candidates(p).tolist()
            for i, (e, g) in enumerate(zip(expected, got, strict=True)):
                # Exact where the node's requests are worked out; elsewhere every node that fits is a candidate.
                assert g == e if columns.known(i) else (g or not e)
            unknown = [i for i in range(len(nodes)) if not columns.known(i)]
            if unknown and rng.random() < 0.3:
                i = rng.choice(unknown)
                columns.learn(i)
                learned += 1
                assert columns.known(i)
                assert columns.candidates(p)[i] == expected[i]
        for q in rng.sample(list(state.pods.values()), 4):
            state.delete(q)
        for _ in range(4):
            state.add(pod(next_id, rng, f"n{rng.randrange(len(nodes))}"))
            next_id += 1
    assert learned > 0


def _usage(rng: random.Random, whole: bool) -> dict[str, Fraction]:
    cpu = Fraction(rng.randrange(50, 1500)) if whole else Fraction(rng.randrange(50, 15000), 10)
    return {"cpu": cpu, "memory": Fraction(rng.randrange(1, 2000) * 2**20)}


@pytest.mark.parametrize(("seed", "prod", "mode"), [(s, p, m) for s in range(4) for p in (False, True)
                                                    for m in ("whole", "fractional", "switch")])
def test_destinations_book_like_the_one_at_a_time_walk(seed: int, prod: bool, mode: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # Small blocks: the walks learn the destinations' requests a few at a time.
    monkeypatch.setattr(nodeutil.NodeFitColumns, "BLOCK", 1 + seed % 3)
    whole = mode != "fractional"
    state, nodes, rng = cluster(seed, nodes=12, pods=20)
    usages: dict[str, NodeUsage] = {}
    thresholds: dict[str, NodeThresholds] = {}
    for n in nodes:
        if rng.random() < 0.1:
            continue  # a destination without metrics takes any pod that fits
        used = _usage(rng, whole)
        usages[n.name] = NodeUsage(n, [], [], {**used, "pods": Fraction(3)}, {**_usage(rng, whole), "pods": Fraction(1)},
                                   {}, {})
        high = {"cpu": Fraction(rng.randrange(1000, 4000)), "memory": Fraction(rng.randrange(1, 4) * 2**30)}
        thresholds[n.name] = NodeThresholds(high=dict(high), prod_high=dict(high))
    usages_copy, thresholds_copy = copy.deepcopy(usages), copy.deepcopy(thresholds)
    handle = Handle(cluster=state, evictor=ProfileEvictor("p", PodEvictor(None)),  # type: ignore[arg-type]
                    now=datetime(2024, 1, 1, tzinfo=UTC))
    plugin = LowNodeLoad(LowNodeLoadArgs(), handle)
    fast = _Destinations(state, nodes, usages_copy, thresholds_copy, prod)
    assert (fast.rooms is not None) == whole  # exact integer columns while every number is whole
    answers = set()
    for i in range(60):
        p = pod(3000 + i, rng)
        # "switch": whole numbers, then a fractional usage turns the columns to floats half way.
        metric = _usage(rng, whole and not (mode == "switch" and i == 30))
        slow = plugin.fits_any_with_threshold(p, nodes, usages, thresholds, prod, metric)
        answers.add(slow)
        assert fast.book(p, metric) == slow
        fast.flush()
        assert usages_copy == usages  # the same destination took the pod
    assert answers == {True, False}
    assert (fast.rooms is not None) == (mode == "whole")


def _koord_pod(i: int, rng: random.Random) -> Pod:
    labels = {}
    if rng.random() < 0.3:
        labels["koordinator.sh/priority-class"] = rng.choice(("koord-prod", "koord-batch"))
    meta: dict[str, Any] = {"name": f"p{i}", "namespace": "default", "labels": labels}
    if rng.random() < 0.3:
        meta["annotations"] = {"controller.kubernetes.io/pod-deletion-cost": str(rng.randrange(3))}
    if rng.random() < 0.5:
        meta["creationTimestamp"] = f"2024-01-01T00:00:0{rng.randrange(3)}Z"
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": rng.choice(("1", "2"))}}}]}
    if rng.random() < 0.5:
        spec["priority"] = rng.choice((0, 100))
    return parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})


@pytest.mark.parametrize("seed", range(8))
def test_keyed_sort_is_gos_sort_with_the_less_function(seed: int) -> None:
    rng = random.Random(seed)
    pods = [_koord_pod(i, rng) for i in range(rng.randrange(5, 40))]
    # Few distinct usages (and pods without metrics): many ties, which Go's algorithm orders.
    metrics = {p.key: {"cpu": Fraction(rng.choice((100, 200, 300)))} for p in pods if rng.random() < 0.8}
    exceeded = {"cpu": Fraction(rng.choice((50, 400)))}
    weights = {"cpu": 1}
    expected = list(pods)
    go_sort_slice(expected, pod_sort_less(metrics, exceeded, weights))
    got = list(pods)
    sort_like_go(got, pod_sort_key(metrics, exceeded, weights))
    assert [p.key for p in got] == [p.key for p in expected]


def test_exact_sums_equal_fraction_sums() -> None:
    rng = random.Random(3)
    maps = [{"cpu": Fraction(rng.randrange(1, 100), rng.choice((1, 1, 3, 10))), "memory": Fraction(rng.randrange(9))}
            for _ in range(50)]
    maps.append({"memory": Fraction(1, 7)})
    assert _exact_sums(maps, ["cpu", "memory", "gpu"]) == [
        sum((m.get(r, Fraction(0)) for m in maps), Fraction(0)) for r in ("cpu", "memory", "gpu")]


def test_qos_memoised_per_shape_keeps_pod_level_resources_apart() -> None:
    container = {"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}
    plain = parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": {"containers": [container]}})
    pod_level = parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b"},
                           "spec": {"containers": [container], "resources": {}}})
    assert compute_qos(plain) == "Guaranteed"
    assert compute_qos(pod_level) == "BestEffort"  # empty pod-level resources decide
    assert compute_qos(pod_level, pod_level_resources=False) == "Guaranteed"
    for p in (plain, pod_level):
        assert compute_qos(p) == _spec_qos(p, has_pod_level_resources(p))
