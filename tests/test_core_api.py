"""Quantities, selectors, taints/tolerations, effective requests and snapshot loading."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesched.api.objects import Taint, Toleration, parse_node, parse_pod
from kubesched.api.quantity import milli_value_of, parse_quantity, value_of
from kubesched.api.resources import non_zero_request, pod_requests, scheduler_request
from kubesched.api.selectors import parse_label_selector, parse_node_selector
from kubesched.api.snapshot import load_snapshot
from kubesched.errors import InputError


@pytest.mark.parametrize("text,want", [
    ("100m", Fraction(1, 10)), ("1.5Gi", Fraction(3 * 2**29)), ("1e3", Fraction(1000)), ("2k", Fraction(2000)),
    ("0.5", Fraction(1, 2)), ("1E3", Fraction(1000)), ("3Mi", Fraction(3 * 2**20)), ("1.5", Fraction(3, 2)),
    ("5n", Fraction(5, 10**9)), ("12e-1", Fraction(6, 5)), (7, Fraction(7)), (0.25, Fraction(1, 4)), ("+3", Fraction(3)),
])
def test_parse_quantity(text: object, want: Fraction) -> None:
    assert parse_quantity(text) == want


@pytest.mark.parametrize("bad", ["", "abc", "1.2.3", "5K", "1Gb", "--1", True, None, [1]])
def test_bad_quantity(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_quantity(bad)


def test_milli_value_rounds_up_like_apimachinery() -> None:
    assert milli_value_of(parse_quantity("1n")) == 1
    assert milli_value_of(parse_quantity("100m")) == 100
    assert value_of(parse_quantity("1500m")) == 2
    assert value_of(parse_quantity("-1500m")) == -2


@given(st.integers(min_value=0, max_value=10**12))
def test_value_roundtrip(n: int) -> None:
    assert value_of(parse_quantity(str(n))) == n
    assert milli_value_of(parse_quantity(f"{n}m")) == n


def test_label_selector_semantics() -> None:
    sel = parse_label_selector({"matchLabels": {"app": "web"},
                                "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]},
                                                     {"key": "env", "operator": "Exists"}]}, "s")
    assert sel.matches({"app": "web", "env": "prod"})
    assert not sel.matches({"app": "web", "env": "prod", "tier": "db"})
    assert not sel.matches({"app": "web"})
    assert not parse_label_selector(None, "s").matches({})  # nil selects nothing
    assert parse_label_selector({}, "s").matches({"x": "y"})  # empty selects everything
    with pytest.raises(InputError) as e:
        parse_label_selector({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, "sel")
    assert "sel.matchExpressions[0].operator" in str(e.value)


def test_node_selector_gt_lt_fields_and_invalid_terms() -> None:
    ns = parse_node_selector({"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["2"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]},
    ]}, "ns")
    assert ns.matches({"gpus": "3"}, "n1")
    assert not ns.matches({"gpus": "2"}, "n1")
    assert ns.matches({}, "n9")
    # A Gt value that is not an integer makes the term invalid: it matches nothing.
    bad = parse_node_selector({"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["x"]}]}]}, "ns")
    assert not bad.matches({"gpus": "3"}, "n1")
    # An empty term matches nothing.
    assert not parse_node_selector({"nodeSelectorTerms": [{}]}, "ns").matches({"a": "b"}, "n1")


def test_toleration_matching() -> None:
    taint = Taint("dedicated", "gpu", "NoSchedule")
    assert Toleration("dedicated", "Equal", "gpu", "NoSchedule").tolerates(taint)
    assert Toleration("dedicated", "Exists", "", "").tolerates(taint)
    assert Toleration("", "Exists", "", "").tolerates(taint)
    assert not Toleration("dedicated", "Equal", "cpu", "NoSchedule").tolerates(taint)
    assert not Toleration("dedicated", "Exists", "", "NoExecute").tolerates(taint)


def _pod(spec: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": spec}


def test_effective_requests_with_init_containers_and_sidecars() -> None:
    pod = parse_pod(_pod({
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                       {"name": "b", "resources": {"requests": {"cpu": "500m"}}}],
        "initContainers": [
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "200m", "memory": "100Mi"}}},
            {"name": "init", "resources": {"requests": {"cpu": "3", "memory": "10Mi"}}},
        ],
        "overhead": {"cpu": "100m"},
    }))
    reqs = pod_requests(pod)
    # regular + sidecar = 1.7 cpu; init peak = 3 + 0.2 (sidecar started before it) = 3.2 → 3.2 wins, + overhead
    assert reqs["cpu"] == Fraction(33, 10)
    assert reqs["memory"] == Fraction(2**30 + 100 * 2**20)
    assert scheduler_request(pod)["cpu"] == 3300
    # non-zero: container b gets the 200Mi memory default
    cpu, mem = non_zero_request(pod)
    assert cpu == 3300
    assert mem == 2**30 + 100 * 2**20 + 200 * 2**20


def test_pod_level_resources_override_and_unknown_resources_dropped() -> None:
    pod = parse_pod(_pod({
        "resources": {"requests": {"cpu": "2", "memory": "1Gi"}},
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "foo": "3", "example.com/gpu": "1"}}}],
    }))
    req = scheduler_request(pod)
    assert req["cpu"] == 2000 and req["memory"] == 2**30
    assert "foo" not in req  # unprefixed non-native names are not tracked by the scheduler
    assert req["example.com/gpu"] == 1


def test_no_containers_means_no_default_requests() -> None:
    pod = parse_pod(_pod({"containers": []}))
    assert non_zero_request(pod) == (0, 0)


def test_pod_parse_errors_name_object_and_field() -> None:
    with pytest.raises(InputError) as e:
        parse_pod(_pod({"containers": [{"name": "a", "resources": {"requests": {"cpu": "lots"}}}]}))
    msg = str(e.value)
    assert "Pod ns/p" in msg and "spec.containers[0].resources.requests.cpu" in msg
    with pytest.raises(InputError) as e:
        parse_node({"kind": "Node", "metadata": {"name": "n"}, "spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}})
    assert "Node n" in str(e.value) and "spec.taints[0].effect" in str(e.value)


def test_snapshot_formats(tmp_path: Path) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "1"}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}
    lst = tmp_path / "list.json"
    lst.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node, pod]}))
    multi = tmp_path / "multi.yaml"
    multi.write_text("---\napiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\n"
                     "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n")
    for f in (lst, multi):
        snap = load_snapshot(f)
        assert [n.name for n in snap.nodes] == ["n1"]
        assert [p.key for p in snap.pods] == ["default/p"]


@pytest.mark.parametrize("content,fragment", [
    ("{not json", "invalid"),
    ("a: [1, 2\n", "invalid YAML"),
    ('{"kind": "List", "items": [{"metadata": {"name": "x"}}]}', "kind"),
    ('{"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"resources": {"limits": {"memory": "1Q"}}}]}}',
     "spec.containers[0].resources.limits.memory"),
])
def test_snapshot_errors(tmp_path: Path, content: str, fragment: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(content)
    with pytest.raises(InputError) as e:
        load_snapshot(f)
    assert str(f) in str(e.value) and fragment in str(e.value)


def test_a_status_change_of_a_bound_pod_keeps_its_node_accounting(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kubelet's status update (and a deletion mark) swaps the object the node counts, without taking the
    pod off and on again (no table change, no per-row cache recomputed)."""
    from datetime import UTC, datetime

    from kubesched.cluster.state import ClusterState

    cluster = ClusterState()
    cluster.add(parse_node({"kind": "Node", "metadata": {"name": "n"},
                            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}))
    pod = parse_pod({"kind": "Pod", "metadata": {"name": "p", "namespace": "d"},
                     "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}})
    cluster.add(pod)
    cluster.bind(pod, "n")
    accounted: list[int] = []
    real = ClusterState._account
    monkeypatch.setattr(ClusterState, "_account", lambda self, info, p, sign: accounted.append(sign) or real(self, info, p, sign))
    logged = len(cluster.table.changed_rows)
    running = cluster.pods["d/p"].with_status(phase="Running")
    cluster.update(running)
    cluster.update(running.marked_for_deletion(datetime(2024, 1, 1, tzinfo=UTC), 30))
    assert accounted == [] and len(cluster.table.changed_rows) == logged
    cur = cluster.pods["d/p"]
    assert cluster.node_info_by_name["n"].pods["d/p"] is cur
    assert cur.raw["spec"]["nodeName"] == "n" and cur.raw["status"]["phase"] == "Running"
