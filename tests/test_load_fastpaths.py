"""The fast loading paths give what the exact ones give (issue 18, row 1).

- parse_quantity (remembered per written value) == parse_quantity_exact, on random quantities;
- the JSON snapshot path (msgspec split, lazily decoded pods) == the general path (whole document decoded,
  every object parsed from its dict), on random snapshots, including typed lists and bad input;
- ClusterState's bulk add of a snapshot's pods == adding them one by one.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.api.objects import RawDocument, parse_pod, parse_resource_list, resource_list_and_key
from kubesched.api.quantity import milli_value_of, parse_quantity, parse_quantity_exact, value_of
from kubesched.api.snapshot import iter_objects, load_snapshot, parse_objects, read_documents
from kubesched.cluster.state import ClusterState
from kubesched.errors import InputError

SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e3", "E-2", "e+1",
            "x", "KI", "i"]


@st.composite
def quantities(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "+", "-"]))
    whole = draw(st.text("0123456789", min_size=0, max_size=6))
    frac = draw(st.one_of(st.just(""), st.text("0123456789", min_size=0, max_size=4).map(lambda d: "." + d)))
    suffix = draw(st.sampled_from(SUFFIXES))
    return f"{sign}{whole}{frac}{suffix}"


def _outcome(fn, value):  # noqa: ANN001, ANN202
    try:
        return fn(value)
    except ValueError as e:
        return ("error", str(e))


@given(st.one_of(quantities(), st.integers(-10**20, 10**20), st.booleans(), st.none()))
@settings(max_examples=400)
def test_remembered_quantity_equals_exact_parse(value: object) -> None:
    first, again = _outcome(parse_quantity, value), _outcome(parse_quantity, value)
    exact = _outcome(parse_quantity_exact, value)
    assert first == exact and again == exact
    if isinstance(exact, Fraction):
        assert value_of(first) == value_of(exact) and milli_value_of(first) == milli_value_of(exact)


def test_quantity_rounding_and_suffixes_as_apimachinery() -> None:
    assert parse_quantity("100m") == Fraction(1, 10) and milli_value_of(parse_quantity("100m")) == 100
    assert parse_quantity("1.5Gi") == 3 * 2**29
    assert parse_quantity("1e3") == 1000 and parse_quantity("5E-2") == Fraction(5, 100)
    # Value() and MilliValue() round up, away from zero.
    assert value_of(parse_quantity("1001m")) == 2 and value_of(parse_quantity("-1001m")) == -2
    assert milli_value_of(parse_quantity("1n")) == 1
    with pytest.raises(ValueError, match="unknown suffix"):
        parse_quantity("1KI")


@given(st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods"]),
                       st.one_of(quantities(), st.integers(0, 10**6), st.booleans(), st.floats(allow_nan=True)),
                       max_size=4))
@settings(max_examples=300)
def test_remembered_resource_lists_equal_parsed_ones(raw: dict) -> None:
    for _ in range(2):
        try:
            expected = parse_resource_list(raw, "r")
        except InputError as e:
            with pytest.raises(InputError) as got:
                resource_list_and_key(raw, "r")
            assert str(got.value) == str(e)
            continue
        got_list, key = resource_list_and_key(raw, "r")
        assert got_list == expected and key == tuple(raw.items())


# ---------------------------------------------------------------- snapshots: fast path == general path

ZONES = ["a", "b"]


@st.composite
def pods(draw: st.DrawFn, i: int, nodes: int) -> dict:
    containers = []
    for c in range(draw(st.integers(1, 2))):
        req = draw(st.dictionaries(st.sampled_from(["cpu", "memory", "example.com/dev"]),
                                   st.sampled_from(["100m", "1", "250m", "64Mi", "1Gi", 2, "1.5"]), max_size=3))
        ctr: dict = {"name": f"c{c}", "image": "img:1", "resources": {"requests": req}}
        if draw(st.booleans()):
            ctr["ports"] = [{"containerPort": 80, "hostPort": draw(st.sampled_from([0, 8080]))}]
        containers.append(ctr)
    spec: dict = {"containers": containers}
    if draw(st.booleans()):
        spec["nodeName"] = f"n{draw(st.integers(0, nodes))}"  # sometimes a node that does not exist
    if draw(st.booleans()):
        spec["priority"] = draw(st.integers(0, 1000))
    if draw(st.booleans()):
        spec["tolerations"] = [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
    if draw(st.booleans()):
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    meta: dict = {"name": f"p{i}", "namespace": draw(st.sampled_from(["default", "team"])),
                  "labels": {"app": draw(st.sampled_from(["x", "y"]))},
                  "creationTimestamp": "2025-01-01T00:00:00Z"}
    if draw(st.booleans()):
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u1",
                                    "controller": True}]
    phase = draw(st.sampled_from(["Running", "Pending", "Succeeded"]))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def _node(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"n{i}", "labels": {"topology.kubernetes.io/zone": ZONES[i % 2]}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110", "example.com/dev": "2"}}}


@st.composite
def snapshots(draw: st.DrawFn) -> dict:
    nodes = draw(st.integers(0, 3))
    items = [_node(i) for i in range(nodes)]
    items += [draw(pods(i, nodes)) for i in range(draw(st.integers(0, 6)))]
    items = draw(st.permutations(items))
    items.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "hi"},
                  "value": 7, "globalDefault": True})
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _general(path: Path):  # noqa: ANN202
    return parse_objects(list(iter_objects(read_documents(path), str(path))), str(path))


def _same_snapshot(fast, slow) -> None:  # noqa: ANN001
    assert [p.key for p in fast.pods] == [p.key for p in slow.pods]
    for a, b in zip(fast.pods, slow.pods, strict=True):
        assert a == b  # every field, the document (decoded for the comparison) included
        assert a.raw == b.raw
        assert [c.raw for c in a.containers] == [c.raw for c in b.containers]
    assert fast.nodes == slow.nodes and fast.priority_classes == slow.priority_classes


@given(snapshots(), st.sampled_from(["List", "array", "PodList"]))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_fast_json_snapshot_equals_general_path(tmp_path: Path, doc: dict, shape: str) -> None:
    if shape == "array":
        data: object = doc["items"]
    elif shape == "PodList":
        # A typed list: items without kind and apiVersion, which are the list's.
        data = {"apiVersion": "v1", "kind": "PodList",
                "items": [{k: v for k, v in i.items() if k not in ("kind", "apiVersion")}
                          for i in doc["items"] if i["kind"] == "Pod"]}
    else:
        data = doc
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(data))
    fast, slow = load_snapshot(path), _general(path)
    # Pods the loader did not have to change (admission gives the others a priority) stay undecoded until
    # read (the comparisons below read them).
    written = {i["metadata"]["name"] for i in doc["items"] if i["kind"] == "Pod" and "priority" in i["spec"]}
    assert all(isinstance(p.document, RawDocument) for p in fast.pods if p.name in written)
    _same_snapshot(fast, slow)
    a, b = ClusterState.from_snapshot(fast), ClusterState.from_snapshot(slow)
    assert a.table.requested[: a.table.n].tolist() == b.table.requested[: b.table.n].tolist()


def _state_numbers(s: ClusterState) -> tuple:
    t = s.table
    return (t.resources, t.requested[: t.n].tolist(), t.non_zero[: t.n].tolist(), t.pod_count[: t.n].tolist(),
            t.alloc[: t.n].tolist(), list(s.pods), {i.name: (sorted(i.pods), i.requested, i.non_zero_cpu,
                                                             i.non_zero_mem, i.used_ports) for i in s.node_infos},
            sorted(s.assigned_with_affinity), sorted(s.assigned_with_required_anti_affinity), s.revision,
            s.pod_generation)


@given(snapshots())
@settings(max_examples=60, deadline=None)
def test_bulk_add_of_pods_equals_adding_one_by_one(doc: dict) -> None:
    snap = parse_objects(list(iter_objects([doc], "s")), "s")
    bulk = ClusterState.from_snapshot(snap)
    one = ClusterState()
    for n in snap.nodes:
        one.add(n)
    for pc in snap.priority_classes:
        one.add(pc)
    for p in snap.pods:
        one.add(p)
    assert _state_numbers(bulk) == _state_numbers(one)
    # And the state keeps working the same: take a pod off its node in both.
    bound = [p for p in snap.pods if p.node_name in bulk.node_info_by_name and not p.is_terminal]
    if bound:
        bulk.delete(bound[0])
        one.delete(bound[0])
        assert np.array_equal(bulk.table.requested[: bulk.table.n], one.table.requested[: one.table.n])


def test_bulk_add_with_a_listener_takes_the_general_path() -> None:
    seen = []
    state = ClusterState()
    state.subscribe(seen.append)
    pod = parse_pod({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}})
    state._add_pods_in_bulk([pod])
    assert [e.obj.key for e in seen] == ["default/p"]


def test_lazily_loaded_pod_reads_and_changes_like_a_decoded_one(tmp_path: Path) -> None:
    raw = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
           "spec": {"containers": [{"name": "c", "resources": {"limits": {"ephemeral-storage": "1Gi"}}}],
                    "priority": 0},
           "status": {"phase": "Pending"}}
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": [raw]}))
    pod = load_snapshot(path).pods[0]
    assert isinstance(pod.document, RawDocument)
    assert pod.containers[0].raw == raw["spec"]["containers"][0]  # a container's part, decoded on demand
    assert pod.raw == raw and pod.status == {"phase": "Pending"}
    assert pod.raw is pod.raw  # decoded once
    bound = pod.bound_to("n1")
    assert bound.raw["spec"]["nodeName"] == "n1" and "nodeName" not in pod.raw["spec"]
    running = pod.with_status(phase="Running")
    assert running.phase == "Running" and running.raw["spec"] is pod.raw["spec"]


def test_a_changed_pod_copies_every_other_field() -> None:
    """Pod changes (bind, status, deletion) copy the frozen object field by field: every field but the
    changed ones is the original's own value, and the original is untouched."""
    from dataclasses import fields
    from datetime import UTC, datetime

    pod = parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "labels": {"a": "b"}},
                     "spec": {"priority": 7, "containers": [{"name": "c", "image": "i"}],
                              "tolerations": [{"key": "k", "operator": "Exists"}]}})
    changed = {"node_name", "document"}
    bound = pod.bound_to("n1")
    assert bound.node_name == "n1" and pod.node_name == "" and type(bound) is type(pod)
    assert all(getattr(bound, f.name) is getattr(pod, f.name) for f in fields(pod) if f.name not in changed)
    gone = bound.marked_for_deletion(datetime(2026, 1, 1, tzinfo=UTC), 30)
    assert gone.meta.deletion_timestamp == datetime(2026, 1, 1, tzinfo=UTC) and bound.meta.deletion_timestamp is None
    assert all(getattr(gone.meta, f.name) is getattr(bound.meta, f.name) for f in fields(bound.meta)
               if f.name != "deletion_timestamp")
    assert gone.node_name == "n1" and gone.priority == 7 and gone.labels == {"a": "b"}


@pytest.mark.parametrize(("items", "message"), [
    ([{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
       "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}}],
     "Pod default/p: field spec.containers[0].resources.requests.cpu: expected a quantity"),
    ([{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}},
      {"apiVersion": "v1", "metadata": {"name": "q"}}],
     "object q: field kind: expected a kind"),
    ([{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"tolerations": [
        {"key": "k", "operator": "Exists", "tolerationSeconds": True}]}}],
     "field spec.tolerations[0].tolerationSeconds: expected an integer"),
])
def test_bad_snapshot_gives_the_general_paths_error(tmp_path: Path, items: list, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    with pytest.raises(InputError) as fast:
        load_snapshot(path)
    with pytest.raises(InputError) as slow:
        _general(path)
    assert str(fast.value) == str(slow.value)
    assert str(path) in str(fast.value) and message in str(fast.value)


def test_invalid_json_is_reported_with_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"apiVersion": "v1", "kind": "List", "items": [{"kind": "Pod",]}')
    with pytest.raises(InputError, match=r"broken.json: invalid JSON at line 1 column \d+"):
        load_snapshot(path)


def test_tolerations_remembered_still_refuse_a_boolean(tmp_path: Path) -> None:
    good = {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 1}
    bad = dict(good, tolerationSeconds=True)
    ok = parse_pod({"metadata": {"name": "a"}, "spec": {"tolerations": [good]}})
    assert ok.tolerations[0].toleration_seconds == 1
    with pytest.raises(InputError, match="tolerationSeconds"):
        parse_pod({"metadata": {"name": "b"}, "spec": {"tolerations": [bad]}})
