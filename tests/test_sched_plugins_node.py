"""Unit tests for the node-level default plugins (NodeUnschedulable, NodeName, NodePorts, NodeAffinity,
TaintToleration, ImageLocality), the volume plugins, DynamicResources and plugins/helper.

Includes a hypothesis property test that every plugin's vectorised form (filter_nodes / score_nodes)
agrees with its per-node form (filter / score) on random clusters, and a test for every args error.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.api.snapshot import parse_objects
from kubesched.cluster.state import ClusterState
from kubesched.config.plugin_args import build_args
from kubesched.config.scheduler_config import parse_scheduler_config
from kubesched.errors import InputError
from kubesched.scheduler.framework import Code, CycleState, Handle, Status
from kubesched.scheduler.plugins.dynamic_resources import DynamicResources
from kubesched.scheduler.plugins.helper import default_normalize_score
from kubesched.scheduler.plugins.image_locality import ImageLocality, normalized_image_name
from kubesched.scheduler.plugins.node_affinity import NodeAffinity
from kubesched.scheduler.plugins.node_name import NodeName
from kubesched.scheduler.plugins.node_ports import NodePorts
from kubesched.scheduler.plugins.node_unschedulable import NodeUnschedulable
from kubesched.scheduler.plugins.node_volume_limits import NodeVolumeLimits, csi_attach_limit_key
from kubesched.scheduler.plugins.taint_toleration import TaintToleration
from kubesched.scheduler.plugins.volume_binding import VolumeBinding
from kubesched.scheduler.plugins.volume_restrictions import VolumeRestrictions
from kubesched.scheduler.plugins.volume_zone import VolumeZone
from kubesched.scheduler.registry import default_registry
from kubesched.scheduler.runtime import Framework

# ---------------------------------------------------------------- builders


def node(name: str, labels: dict[str, str] | None = None, taints: list[dict[str, Any]] | None = None,
         unschedulable: bool = False, images: list[tuple[list[str], int]] | None = None,
         allocatable: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"taints": taints or [], "unschedulable": unschedulable},
            "status": {"allocatable": allocatable or {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "images": [{"names": n, "sizeBytes": s} for n, s in (images or [])]}}


def pod(name: str, node_name: str = "", containers: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"containers": containers if containers is not None else [{"name": "c", "image": "pause"}]}
    if node_name:
        s["nodeName"] = node_name
    s.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": s, "status": {"phase": "Running" if node_name else "Pending"}}


def ports_container(*ports: tuple[str, str, int]) -> dict[str, Any]:
    return {"name": "c", "image": "pause",
            "ports": [{"containerPort": p, "hostPort": p, "protocol": proto, "hostIP": ip} for ip, proto, p in ports]}


def cluster_of(*objs: dict[str, Any]) -> ClusterState:
    return ClusterState.from_snapshot(parse_objects(list(objs), "test"))


def plugin(cls: Any, cluster: ClusterState, args: dict[str, Any] | None = None) -> Any:
    return cls(build_args(cls, args), Handle(cluster))


def run_filter(pl: Any, cluster: ClusterState, pod_key: str) -> dict[str, Status]:
    """PreFilter then per-node Filter on every node (a PreFilter Skip passes every node)."""
    p = cluster.pods[pod_key]
    state = CycleState()
    if hasattr(pl, "pre_filter"):
        _res, st = pl.pre_filter(state, p, cluster)
        if st.is_skip:
            return {i.name: Status() for i in cluster.node_infos}
        if not st.is_success:
            return {i.name: st for i in cluster.node_infos}
    return {i.name: pl.filter(state, p, i) for i in cluster.node_infos}


# ---------------------------------------------------------------- helper


def test_default_normalize_score_scales_with_integer_division() -> None:
    s = np.array([0, 1, 3], dtype=np.int64)
    default_normalize_score(s)
    assert s.tolist() == [0, 33, 100]
    r = np.array([0, 1, 3], dtype=np.int64)
    default_normalize_score(r, reverse=True)
    assert r.tolist() == [100, 67, 0]


def test_default_normalize_score_all_zero() -> None:
    s = np.zeros(3, dtype=np.int64)
    default_normalize_score(s)
    assert s.tolist() == [0, 0, 0]
    default_normalize_score(s, reverse=True)
    assert s.tolist() == [100, 100, 100]


# ---------------------------------------------------------------- NodeUnschedulable / NodeName


def test_node_unschedulable_rejects_unless_tolerated() -> None:
    c = cluster_of(node("a", unschedulable=True), node("b"), pod("p"),
                   pod("t", tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                                          "effect": "NoSchedule"}]))
    pl = plugin(NodeUnschedulable, c)
    got = run_filter(pl, c, "default/p")
    assert got["a"].code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert got["a"].reasons == ["node(s) were unschedulable"]
    assert got["b"].is_success
    assert all(s.is_success for s in run_filter(pl, c, "default/t").values())


def test_node_name_filter() -> None:
    c = cluster_of(node("a"), node("b"), pod("p"))
    pl = plugin(NodeName, c)
    p = c.pods["default/p"].bound_to("b")  # a pod naming its node (spec.nodeName set but not yet accounted)
    st = pl.filter(CycleState(), p, c.node_info_by_name["a"])
    assert st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ["node(s) didn't match the requested node name"]
    assert pl.filter(CycleState(), p, c.node_info_by_name["b"]).is_success
    assert pl.filter_nodes(CycleState(), p, c, np.array([0, 1])).tolist() == [False, True]


# ---------------------------------------------------------------- NodePorts


@pytest.mark.parametrize("existing, wanted, fits", [
    (("", "TCP", 8080), ("", "TCP", 8081), True),
    (("", "UDP", 8080), ("", "UDP", 8080), False),
    (("", "UDP", 8080), ("", "TCP", 8080), True),
    (("127.0.0.1", "TCP", 8080), ("127.0.0.2", "TCP", 8080), True),
    (("127.0.0.1", "TCP", 8080), ("0.0.0.0", "TCP", 8080), False),  # wildcard wanted: any IP conflicts
    (("0.0.0.0", "TCP", 8080), ("127.0.0.1", "TCP", 8080), False),  # wildcard used: every IP conflicts
    (("0.0.0.0", "TCP", 8080), ("127.0.0.1", "UDP", 8080), True),
])
def test_node_ports_conflicts(existing: tuple[str, str, int], wanted: tuple[str, str, int], fits: bool) -> None:
    c = cluster_of(node("m1"), pod("old", "m1", [ports_container(existing)]), pod("new", "", [ports_container(wanted)]))
    got = run_filter(plugin(NodePorts, c), c, "default/new")["m1"]
    assert got.is_success is fits
    if not fits:
        assert got.code is Code.UNSCHEDULABLE
        assert got.reasons == ["node(s) didn't have free ports for the requested pod ports"]


def test_node_ports_skip_and_sidecars() -> None:
    sidecar = {"name": "s", "image": "x", "restartPolicy": "Always",
               "ports": [{"containerPort": 9000, "hostPort": 9000}]}
    plain_init = {"name": "i", "image": "x", "ports": [{"containerPort": 9001, "hostPort": 9001}]}
    c = cluster_of(node("m1"), pod("old", "m1", initContainers=[sidecar, plain_init]),
                   pod("none"), pod("s9000", "", [ports_container(("", "TCP", 9000))]),
                   pod("s9001", "", [ports_container(("", "TCP", 9001))]))
    pl = plugin(NodePorts, c)
    _res, st = pl.pre_filter(CycleState(), c.pods["default/none"], c)
    assert st.is_skip
    assert not run_filter(pl, c, "default/s9000")["m1"].is_success  # sidecar host ports are in use
    assert run_filter(pl, c, "default/s9001")["m1"].is_success  # a plain init container's are not


# ---------------------------------------------------------------- NodeAffinity


def _affinity(required_terms: list[dict[str, Any]] | None = None,
              preferred: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    na: dict[str, Any] = {}
    if required_terms is not None:
        na["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": required_terms}
    if preferred is not None:
        na["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    return {"nodeAffinity": na}


def test_node_affinity_prefilter_skip_and_node_names() -> None:
    c = cluster_of(node("n1"), node("n2"), node("n3"), pod("plain"),
                   pod("named", affinity=_affinity([
                       {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}]},
                       {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n3"]}]}])),
                   pod("conflict", affinity=_affinity([{"matchFields": [
                       {"key": "metadata.name", "operator": "In", "values": ["n1"]},
                       {"key": "metadata.name", "operator": "In", "values": ["n2"]}]}])),
                   pod("mixed", affinity=_affinity([
                       {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                       {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}])),
                   pod("empty-selector", nodeSelector={}))
    pl = plugin(NodeAffinity, c)
    assert pl.pre_filter(CycleState(), c.pods["default/plain"], c)[1].is_skip
    assert pl.pre_filter(CycleState(), c.pods["default/empty-selector"], c)[1].is_success
    res, st = pl.pre_filter(CycleState(), c.pods["default/named"], c)
    assert st.is_success and res is not None and res.node_names == {"n1", "n2", "n3"}
    res, st = pl.pre_filter(CycleState(), c.pods["default/conflict"], c)
    assert st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.reasons == ["pod affinity terms conflict"]
    res, st = pl.pre_filter(CycleState(), c.pods["default/mixed"], c)
    assert st.is_success and res is None
    # With addedAffinity nothing is skipped.
    added = plugin(NodeAffinity, c, {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]}}})
    assert added.pre_filter(CycleState(), c.pods["default/plain"], c)[1].is_success


def test_node_affinity_filter_reasons() -> None:
    c = cluster_of(node("n1", {"zone": "a", "foo": "bar"}), node("n2", {"zone": "b"}), node("n3", {"foo": "bar"}),
                   pod("p", nodeSelector={"foo": "bar"},
                       affinity=_affinity([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                                           {"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}])))
    pl = plugin(NodeAffinity, c, {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["b"]}]}]}}})
    got = run_filter(pl, c, "default/p")
    assert got["n1"].is_success
    assert got["n2"].reasons == ["node(s) didn't match scheduler-enforced node affinity"]
    assert got["n3"].is_success  # zone DoesNotExist term and the selector match
    c2 = cluster_of(node("n1", {"zone": "a"}), pod("p", nodeSelector={"foo": "bar"}))
    got2 = run_filter(plugin(NodeAffinity, c2), c2, "default/p")
    assert got2["n1"].code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert got2["n1"].reasons == ["node(s) didn't match Pod's node affinity/selector"]


def test_node_affinity_invalid_terms_match_nothing() -> None:
    c = cluster_of(node("n1", {"foo": "bar", "n": "5"}),
                   pod("badvalue", affinity=_affinity([{"matchExpressions": [
                       {"key": "foo", "operator": "NotIn", "values": ["invalid value: ___@#$%^"]}]}])),
                   pod("gt", affinity=_affinity([{"matchExpressions": [{"key": "n", "operator": "Gt", "values": ["4"]}]}])),
                   pod("gtbad", affinity=_affinity([{"matchExpressions": [
                       {"key": "n", "operator": "Gt", "values": ["4_0"]}]}])))
    pl = plugin(NodeAffinity, c)
    assert not run_filter(pl, c, "default/badvalue")["n1"].is_success
    assert run_filter(pl, c, "default/gt")["n1"].is_success
    assert not run_filter(pl, c, "default/gtbad")["n1"].is_success


def test_node_affinity_score_and_normalize() -> None:
    pref = [{"weight": 2, "preference": {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]}},
            {"weight": 4, "preference": {"matchExpressions": [{"key": "key", "operator": "In", "values": ["value"]}]}}]
    c = cluster_of(node("n1", {"foo": "bar"}), node("n2", {"key": "value"}), node("n3", {"foo": "bar", "key": "value"}),
                   pod("p", affinity=_affinity(preferred=pref)), pod("none"))
    pl = plugin(NodeAffinity, c, {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 3, "preference": {"matchExpressions": [{"key": "key", "operator": "In", "values": ["value"]}]}}]}})
    p = c.pods["default/p"]
    state = CycleState()
    rows = np.arange(3)
    assert pl.pre_score(state, p, c, rows).is_success
    raw = pl.score_nodes(state, p, c, rows)
    assert raw.tolist() == [2, 7, 9]
    assert [pl.score(state, p, c.node_infos[r])[0] for r in rows] == [2, 7, 9]
    pl.normalize_score(state, p, raw, rows)
    assert raw.tolist() == [22, 77, 100]
    assert plugin(NodeAffinity, c).pre_score(CycleState(), c.pods["default/none"], c, rows).is_skip
    assert pl.pre_score(CycleState(), c.pods["default/none"], c, rows).is_success  # addedAffinity preferred


# ---------------------------------------------------------------- TaintToleration


def test_taint_toleration_filter_and_score() -> None:
    c = cluster_of(node("a"),
                   node("b", taints=[{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]),
                   node("c", taints=[{"key": "k", "value": "v", "effect": "PreferNoSchedule"},
                                     {"key": "k2", "value": "v2", "effect": "PreferNoSchedule"}]),
                   node("d", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
                   pod("p"),
                   pod("tol", tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu",
                                            "effect": "NoSchedule"},
                                           {"key": "k", "operator": "Exists", "effect": "PreferNoSchedule"}]))
    pl = plugin(TaintToleration, c)
    got = run_filter(pl, c, "default/p")
    assert got["d"].code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert got["d"].reasons == ["node(s) had untolerated taint(s)"]
    assert got["b"].is_success and got["c"].is_success
    assert run_filter(pl, c, "default/tol")["d"].is_success
    rows = np.arange(3)
    for key, want_raw, want in (("default/p", [0, 1, 2], [100, 50, 0]), ("default/tol", [0, 0, 1], [100, 100, 0])):
        state = CycleState()
        p = c.pods[key]
        pl.pre_score(state, p, c, rows)
        raw = pl.score_nodes(state, p, c, rows)
        assert raw.tolist() == want_raw
        pl.normalize_score(state, p, raw, rows)
        assert raw.tolist() == want


# ---------------------------------------------------------------- ImageLocality


def test_normalized_image_name() -> None:
    assert normalized_image_name("nginx") == "nginx:latest"
    assert normalized_image_name("gcr.io/x/nginx") == "gcr.io/x/nginx:latest"
    assert normalized_image_name("nginx:1.2") == "nginx:1.2"
    assert normalized_image_name("localhost:5000/nginx") == "localhost:5000/nginx:latest"


def test_image_locality_spread_and_init_containers() -> None:
    mb = 1024 * 1024
    c = cluster_of(node("n1", images=[(["gcr.io/40:latest"], 40 * mb), (["gcr.io/300:latest"], 300 * mb)]),
                   node("n2", images=[(["gcr.io/40:latest"], 40 * mb)]),
                   pod("p", containers=[{"name": "c", "image": "gcr.io/40"}],
                       initContainers=[{"name": "i", "image": "gcr.io/300"}]))
    pl = plugin(ImageLocality, c)
    p = c.pods["default/p"]
    # n1: 40MB (on 2 of 2 nodes) + 300MB (on 1 of 2) = 190MB; max = 2 containers * 1000MB.
    want_n1 = 100 * (190 * mb - 23 * mb) // (2000 * mb - 23 * mb)
    want_n2 = 100 * (40 * mb - 23 * mb) // (2000 * mb - 23 * mb)
    assert pl.score_nodes(CycleState(), p, c, np.arange(2)).tolist() == [want_n1, want_n2]
    assert [pl.score(CycleState(), p, i)[0] for i in c.node_infos] == [want_n1, want_n2]


# ---------------------------------------------------------------- volume plugins

SC_WFFC = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
           "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}
SC_CSI_WFFC = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "csi"},
               "provisioner": "csi.example.com", "volumeBindingMode": "WaitForFirstConsumer",
               "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}]}
SC_IMMEDIATE = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"},
                "provisioner": "csi.example.com", "volumeBindingMode": "Immediate"}


def pvc(name: str, sc: str | None = None, volume: str = "", modes: list[str] | None = None,
        storage: str = "1Gi", bound: bool = False) -> dict[str, Any]:
    ann = {"pv.kubernetes.io/bind-completed": "yes"} if bound else {}
    spec: dict[str, Any] = {"accessModes": modes or ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}}
    if sc is not None:
        spec["storageClassName"] = sc
    if volume:
        spec["volumeName"] = volume
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "default", "annotations": ann}, "spec": spec,
            "status": {"phase": "Bound" if bound else "Pending"}}


def pv(name: str, sc: str = "", hostname: str | None = None, labels: dict[str, str] | None = None,
       storage: str = "10Gi", csi: tuple[str, str] | None = None, claim: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": storage}, "accessModes": ["ReadWriteOnce"], "storageClassName": sc}
    if hostname:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [hostname]}]}]}}
    if csi:
        spec["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    if claim:
        spec["claimRef"] = {"namespace": "default", "name": claim}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "labels": labels or {}},
            "spec": spec, "status": {"phase": "Bound" if claim else "Available"}}


def claim_volume(name: str, claim: str) -> dict[str, Any]:
    return {"name": name, "persistentVolumeClaim": {"claimName": claim}}


def test_volume_plugins_skip_pods_without_volumes() -> None:
    c = cluster_of(node("n1"), pod("p"))
    p = c.pods["default/p"]
    for cls in (VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone, DynamicResources):
        _res, st = plugin(cls, c).pre_filter(CycleState(), p, c)
        assert st.is_skip, cls.name


def test_volume_restrictions_disk_conflicts() -> None:
    gce_rw = {"name": "d", "gcePersistentDisk": {"pdName": "disk1"}}
    gce_ro = {"name": "d", "gcePersistentDisk": {"pdName": "disk1", "readOnly": True}}
    ebs = {"name": "d", "awsElasticBlockStore": {"volumeID": "vol-1"}}
    c = cluster_of(node("n1"), node("n2"), pod("old-ro", "n1", volumes=[gce_ro]), pod("old-ebs", "n2", volumes=[ebs]),
                   pod("new-ro", volumes=[gce_ro]), pod("new-rw", volumes=[gce_rw]), pod("new-ebs", volumes=[ebs]))
    pl = plugin(VolumeRestrictions, c)
    assert run_filter(pl, c, "default/new-ro")["n1"].is_success  # both read-only
    got = run_filter(pl, c, "default/new-rw")["n1"]
    assert got.code is Code.UNSCHEDULABLE and got.reasons == ["node(s) had no available disk"]
    assert not run_filter(pl, c, "default/new-ebs")["n2"].is_success
    assert run_filter(pl, c, "default/new-ebs")["n1"].is_success


def test_volume_restrictions_read_write_once_pod() -> None:
    c = cluster_of(node("n1"), node("n2"), pvc("rwop", "fast", "pv1", ["ReadWriteOncePod"], bound=True),
                   pod("user", "n1", volumes=[claim_volume("v", "rwop")]), pod("new", volumes=[claim_volume("v", "rwop")]),
                   pod("missing", volumes=[claim_volume("v", "nope")]))
    pl = plugin(VolumeRestrictions, c)
    got = run_filter(pl, c, "default/new")
    assert all(s.code is Code.UNSCHEDULABLE for s in got.values())
    assert got["n2"].reasons == ["node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod "
                                 "access mode"]
    # Preemption removing the user frees the claim.
    state = CycleState()
    p = c.pods["default/new"]
    pl.pre_filter(state, p, c)
    pl.pre_filter_extensions().remove_pod(state, p, c.pods["default/user"], c.node_info_by_name["n1"])
    assert pl.filter(state, p, c.node_info_by_name["n2"]).is_success
    missing = run_filter(pl, c, "default/missing")["n1"]
    assert missing.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE and missing.reasons == ['persistentvolumeclaim "nope" not found']


def test_node_volume_limits_counts_unique_csi_volumes() -> None:
    csinode = {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "n1"},
               "spec": {"drivers": [{"name": "csi.example.com", "nodeID": "n1", "allocatable": {"count": 2}}]}}
    c = cluster_of(node("n1"), csinode, SC_IMMEDIATE,
                   pv("pv1", "fast", csi=("csi.example.com", "h1"), claim="c1"),
                   pv("pv2", "fast", csi=("csi.example.com", "h2"), claim="c2"),
                   pv("pv3", "fast", csi=("csi.example.com", "h3"), claim="c3"),
                   pvc("c1", "fast", "pv1", bound=True), pvc("c2", "fast", "pv2", bound=True),
                   pvc("c3", "fast", "pv3", bound=True),
                   pod("a", "n1", volumes=[claim_volume("v", "c1")]),
                   pod("shares", volumes=[claim_volume("v", "c1"), claim_volume("w", "c2")]),
                   pod("third", volumes=[claim_volume("v", "c2"), claim_volume("w", "c3")]))
    pl = plugin(NodeVolumeLimits, c)
    assert run_filter(pl, c, "default/shares")["n1"].is_success  # c1 already attached: 2 unique volumes
    got = run_filter(pl, c, "default/third")["n1"]
    assert got.code is Code.UNSCHEDULABLE and got.reasons == ["node(s) exceed max volume count"]
    assert csi_attach_limit_key("csi.example.com") == "attachable-volumes-csi-csi.example.com"
    long_key = csi_attach_limit_key("x" * 60)
    assert long_key.startswith("attachable-volumes-csi-" + "x" * 23) and len(long_key) == 23 + 23 + 16


def test_volume_binding_prefilter_rejections() -> None:
    c = cluster_of(node("n1"), SC_IMMEDIATE, pvc("unbound", "fast"),
                   pod("missing", volumes=[claim_volume("v", "nope")]),
                   pod("immediate", volumes=[claim_volume("v", "unbound")]))
    pl = plugin(VolumeBinding, c)
    _r, st = pl.pre_filter(CycleState(), c.pods["default/missing"], c)
    assert st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.reasons == ['persistentvolumeclaim "nope" not found']
    _r, st = pl.pre_filter(CycleState(), c.pods["default/immediate"], c)
    assert st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ["pod has unbound immediate PersistentVolumeClaims"]


def test_volume_binding_bound_pv_node_affinity() -> None:
    c = cluster_of(node("n1", {"kubernetes.io/hostname": "n1"}), node("n2", {"kubernetes.io/hostname": "n2"}),
                   SC_WFFC, pv("local1", "local", hostname="n1", claim="data"), pvc("data", "local", "local1", bound=True),
                   pod("p", volumes=[claim_volume("v", "data")]))
    pl = plugin(VolumeBinding, c)
    res, st = pl.pre_filter(CycleState(), c.pods["default/p"], c)
    assert st.is_success and res is not None and res.node_names == {"n1"}
    got = run_filter(pl, c, "default/p")
    assert got["n1"].is_success
    assert got["n2"].reasons == ["node(s) didn't match PersistentVolume's node affinity"]


def test_volume_binding_wait_for_first_consumer() -> None:
    c = cluster_of(node("n1", {"kubernetes.io/hostname": "n1", "zone": "a"}),
                   node("n2", {"kubernetes.io/hostname": "n2", "zone": "b"}),
                   SC_WFFC, SC_CSI_WFFC, pv("local1", "local", hostname="n1"),
                   pvc("static", "local"), pvc("dynamic", "csi"),
                   pod("s", volumes=[claim_volume("v", "static")]), pod("d", volumes=[claim_volume("v", "dynamic")]))
    pl = plugin(VolumeBinding, c)
    got = run_filter(pl, c, "default/s")
    assert got["n1"].is_success
    assert got["n2"].reasons == ["node(s) didn't find available persistent volumes to bind"]
    got = run_filter(pl, c, "default/d")  # provisioner with allowedTopologies zone a
    assert got["n1"].is_success and not got["n2"].is_success
    # Reserve takes the PV: a second claim of the same class finds none left.
    state = CycleState()
    p = c.pods["default/s"]
    pl.pre_filter(state, p, c)
    assert pl.filter(state, p, c.node_info_by_name["n1"]).is_success
    assert pl.reserve(state, p, "n1").is_success
    c.add(parse_objects([pvc("static2", "local")], "t").pvcs[0])
    c.add(parse_objects([pod("s2", volumes=[claim_volume("v", "static2")])], "t").pods[0])
    assert not run_filter(pl, c, "default/s2")["n1"].is_success
    pl.unreserve(state, p, "n1")
    assert run_filter(pl, c, "default/s2")["n1"].is_success


def test_volume_zone_mismatch() -> None:
    zone = "topology.kubernetes.io/zone"
    c = cluster_of(node("n1", {zone: "a"}), node("n2", {zone: "b"}), node("n3"),
                   SC_IMMEDIATE, pv("z", "fast", labels={zone: "a__c"}, claim="c"), pvc("c", "fast", "z", bound=True),
                   pod("p", volumes=[claim_volume("v", "c")]))
    got = run_filter(plugin(VolumeZone, c), c, "default/p")
    assert got["n1"].is_success and got["n3"].is_success  # n3 has no topology labels
    assert got["n2"].code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert got["n2"].reasons == ["node(s) had no available volume zone"]


def test_dynamic_resources_rejects_claims() -> None:
    c = cluster_of(node("n1"), pod("p", resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu-claim"}]))
    _r, st = plugin(DynamicResources, c).pre_filter(CycleState(), c.pods["default/p"], c)
    assert st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE and "resource claims" in st.reasons[0]


# ---------------------------------------------------------------- args validation


@pytest.mark.parametrize("cls", [NodeUnschedulable, NodeName, NodePorts, TaintToleration, ImageLocality,
                                 VolumeRestrictions, NodeVolumeLimits, VolumeZone])
def test_plugins_without_args_reject_fields(cls: Any) -> None:
    with pytest.raises(InputError) as e:
        build_args(cls, {"foo": 1})
    assert e.value.field == "foo"
    meta = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "X"}
    cls(build_args(cls, meta), Handle(ClusterState()))  # meta fields are fine


REQ = "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution"
PREF = "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution"


def _req(expr: dict[str, Any], fields: bool = False) -> dict[str, Any]:
    key = "matchFields" if fields else "matchExpressions"
    return {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{key: [expr]}]}}}


@pytest.mark.parametrize("args, field", [
    ({"unknown": 1}, "unknown"),
    ({"addedAffinity": []}, "addedAffinity"),
    ({"addedAffinity": {"requiredDuringSchedulingRequiredDuringExecution": {}}},
     "addedAffinity.requiredDuringSchedulingRequiredDuringExecution"),
    ({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}}, REQ),
    ({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"terms": []}}}, f"{REQ}.terms"),
    (_req({"key": "zone", "operator": "Foo", "values": ["a"]}), f"{REQ}.nodeSelectorTerms[0].matchExpressions[0].operator"),
    (_req({"key": "zone", "operator": "In", "values": []}), f"{REQ}.nodeSelectorTerms[0].matchExpressions[0].values"),
    (_req({"key": "zone", "operator": "Exists", "values": ["a"]}),
     f"{REQ}.nodeSelectorTerms[0].matchExpressions[0].values"),
    (_req({"key": "n", "operator": "Gt", "values": ["1", "2"]}), f"{REQ}.nodeSelectorTerms[0].matchExpressions[0].values"),
    (_req({"key": "n", "operator": "Lt", "values": ["x"]}), f"{REQ}.nodeSelectorTerms[0].matchExpressions[0].values[0]"),
    (_req({"key": "bad key!", "operator": "Exists"}), f"{REQ}.nodeSelectorTerms[0].matchExpressions[0].key"),
    (_req({"key": "zone", "operator": "In", "values": ["bad value!"]}),
     f"{REQ}.nodeSelectorTerms[0].matchExpressions[0].values[0]"),
    (_req({"key": "metadata.name", "operator": "In", "values": ["a", "b"]}, fields=True),
     f"{REQ}.nodeSelectorTerms[0].matchFields[0].values"),
    (_req({"key": "metadata.name", "operator": "Exists", "values": ["a"]}, fields=True),
     f"{REQ}.nodeSelectorTerms[0].matchFields[0].operator"),
    ({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": "x", "preference": {}}]}},
     f"{PREF}[0].weight"),
    ({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {
        "matchExpressions": [{"key": "k", "operator": "In"}]}}]}}, f"{PREF}[0].preference.matchExpressions[0].values"),
    ({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "pref": {}}]}},
     f"{PREF}[0].pref"),
])
def test_node_affinity_args_errors(args: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as e:
        build_args(NodeAffinity, args)
    assert e.value.field == field


@pytest.mark.parametrize("cls, args, field", [
    (VolumeBinding, {"bindTimeoutSeconds": -1}, "bindTimeoutSeconds"),
    (VolumeBinding, {"bindTimeoutSeconds": "10"}, "bindTimeoutSeconds"),
    (VolumeBinding, {"shape": [{"utilization": 0, "score": 0}]}, "shape"),
    (VolumeBinding, {"bindTimeout": 5}, "bindTimeout"),
    (DynamicResources, {"filterTimeout": "ten seconds"}, "filterTimeout"),
    (DynamicResources, {"filterTimeout": 10}, "filterTimeout"),
    (DynamicResources, {"bindingTimeout": "-1s"}, "bindingTimeout"),
    (DynamicResources, {"timeout": "1s"}, "timeout"),
])
def test_other_args_errors(cls: Any, args: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as e:
        build_args(cls, args)
    assert e.value.field == field


def test_args_error_is_located_in_the_config() -> None:
    cfg = parse_scheduler_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                                  "profiles": [{"pluginConfig": [{"name": "NodeAffinity", "args": _req(
                                      {"key": "zone", "operator": "In", "values": []})}]}]})
    with pytest.raises(InputError) as e:
        Framework(cfg.profiles[0], default_registry(), Handle(ClusterState()))
    assert e.value.field == (f"profiles[0].pluginConfig[NodeAffinity].args.{REQ}.nodeSelectorTerms[0]"
                             ".matchExpressions[0].values")


# ---------------------------------------------------------------- vectorised == per node

LABEL_KEYS = ["zone", "disk", "gpu"]
LABEL_VALUES = ["a", "b", "c", "1", "5"]
TAINTS = [{"key": "k1", "value": "v", "effect": "NoSchedule"}, {"key": "k2", "value": "", "effect": "NoExecute"},
          {"key": "k3", "value": "x", "effect": "PreferNoSchedule"}, {"key": "k4", "value": "y", "effect": "PreferNoSchedule"},
          {"key": "node.kubernetes.io/unschedulable", "value": "", "effect": "NoSchedule"}]
TOLERATIONS = [{"key": "k1", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
               {"key": "k2", "operator": "Exists"}, {"key": "k3", "operator": "Exists", "effect": "PreferNoSchedule"},
               {"operator": "Exists", "effect": "PreferNoSchedule"},
               {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
IMAGES = ["img-a:latest", "img-b:1", "img-c:latest"]
PORTS = [("", "TCP", 80), ("10.0.0.1", "TCP", 80), ("0.0.0.0", "UDP", 53), ("10.0.0.2", "UDP", 53)]
OPS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]

labels_st = st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES), max_size=3)


@st.composite
def requirement_st(draw: Any) -> dict[str, Any]:
    op = draw(st.sampled_from(OPS))
    key = draw(st.sampled_from(LABEL_KEYS))
    if op in ("Exists", "DoesNotExist"):
        return {"key": key, "operator": op}
    if op in ("Gt", "Lt"):
        return {"key": key, "operator": op, "values": [draw(st.sampled_from(["0", "3", "x"]))]}
    return {"key": key, "operator": op, "values": draw(st.lists(st.sampled_from(LABEL_VALUES), min_size=1, max_size=2))}


term_st = st.fixed_dictionaries({"matchExpressions": st.lists(requirement_st(), max_size=2)})


@st.composite
def cluster_st(draw: Any) -> tuple[ClusterState, list[str]]:
    n = draw(st.integers(1, 6))
    objs: list[dict[str, Any]] = []
    for i in range(n):
        objs.append(node(f"n{i}", draw(labels_st), draw(st.lists(st.sampled_from(TAINTS), max_size=3, unique_by=str)),
                         draw(st.booleans()),
                         [([im], draw(st.integers(1, 2000)) * 1024 * 1024)
                          for im in draw(st.lists(st.sampled_from(IMAGES), max_size=3, unique=True))]))
        for j in range(draw(st.integers(0, 2))):
            ports = draw(st.lists(st.sampled_from(PORTS), max_size=2, unique=True))
            objs.append(pod(f"e{i}-{j}", f"n{i}", [ports_container(*ports)],
                            volumes=draw(st.sampled_from([[], [{"name": "d", "gcePersistentDisk": {"pdName": "pd1"}}]]))))
    pods = []
    for k in range(3):
        spec: dict[str, Any] = {}
        if draw(st.booleans()):
            spec["nodeSelector"] = draw(labels_st)
        if draw(st.booleans()):
            pref_st = st.lists(st.fixed_dictionaries({"weight": st.integers(0, 100), "preference": term_st}),
                               max_size=3)
            spec["affinity"] = _affinity(draw(st.one_of(st.none(), st.lists(term_st, max_size=2))),
                                         draw(st.one_of(st.none(), pref_st)))
        spec["tolerations"] = draw(st.lists(st.sampled_from(TOLERATIONS), max_size=3, unique_by=str))
        if draw(st.booleans()):
            spec["volumes"] = [{"name": "d", "gcePersistentDisk": {"pdName": "pd1", "readOnly": draw(st.booleans())}}]
        containers = [{"name": f"c{m}", "image": im, "ports": [
            {"containerPort": p, "hostPort": p, "protocol": proto, "hostIP": ip}
            for ip, proto, p in draw(st.lists(st.sampled_from(PORTS), max_size=2, unique=True))]}
            for m, im in enumerate(draw(st.lists(st.sampled_from(IMAGES + ["img-a", "other"]), max_size=3)))]
        objs.append(pod(f"p{k}", "", containers, **spec))
        pods.append(f"default/p{k}")
    return cluster_of(*objs), pods


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster_st(), st.sampled_from([None, _req({"key": "zone", "operator": "In", "values": ["a", "b"]})]))
def test_vectorised_forms_agree_with_per_node_forms(cs: tuple[ClusterState, list[str]], added: Any) -> None:
    cluster, pods = cs
    rows = cluster.node_order()
    filters = [plugin(NodeUnschedulable, cluster), plugin(NodeName, cluster), plugin(NodePorts, cluster),
               plugin(NodeAffinity, cluster, added), plugin(TaintToleration, cluster),
               plugin(VolumeRestrictions, cluster)]
    scorers = [plugin(NodeAffinity, cluster, {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                   {"weight": 7, "preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}}]}}),
               plugin(TaintToleration, cluster), plugin(ImageLocality, cluster)]
    for key in pods:
        p = cluster.pods[key]
        for _round in range(2):  # the second round reads the shape caches
            for pl in filters:
                state = CycleState()
                if hasattr(pl, "pre_filter"):
                    _res, st_ = pl.pre_filter(state, p, cluster)
                    if not st_.is_success:
                        continue
                vec = pl.filter_nodes(state, p, cluster, rows)
                per = [pl.filter(state, p, cluster.node_infos[r]).is_success for r in rows]
                assert vec.tolist() == per, (pl.name, key)
            for spl in scorers:
                state = CycleState()
                if hasattr(spl, "pre_score") and spl.pre_score(state, p, cluster, rows).code is not Code.SUCCESS:
                    continue
                vec_s = spl.score_nodes(state, p, cluster, rows)
                per_s = [spl.score(state, p, cluster.node_infos[r])[0] for r in rows]
                assert vec_s.tolist() == per_s, (spl.name, key)
