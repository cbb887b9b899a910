"""InterPodAffinity and PodTopologySpread: tricky semantics, the AddPod/RemovePod extensions, the
per-node and vectorised forms agreeing on random clusters, the shared index staying current, args errors."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kubesched.api.objects import Pod, parse_namespace, parse_node, parse_pod, parse_workload
from kubesched.api.selectors import parse_label_selector
from kubesched.cluster.state import ClusterState
from kubesched.config.plugin_args import build_args
from kubesched.errors import InputError
from kubesched.scheduler.framework import Code, CycleState, Handle, Status
from kubesched.scheduler.plugins.gomath import go_round
from kubesched.scheduler.plugins.inter_pod_affinity import InterPodAffinity
from kubesched.scheduler.plugins.pod_topology_spread import PodTopologySpread
from kubesched.scheduler.plugins.topology_index import (
    PodMatcher,
    index_for,
    merge_namespaces,
    pod_terms,
    required_node_affinity_matches,
    tolerates_node_taints,
)

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


# ---------------------------------------------------------------- building clusters


def node(name: str, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name, "labels": {HOST: name, **(labels or {})}},
            "spec": {"taints": taints or []}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def pod(name: str, labels: dict[str, str] | None = None, ns: str = "default", node_name: str = "",
        terminating: bool = False, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels or {}}
    if terminating:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {"kind": "Pod", "metadata": meta, "spec": {"containers": [], "nodeName": node_name, **spec},
            "status": {"phase": "Running" if node_name else "Pending"}}


def cluster_of(*objs: dict[str, Any]) -> ClusterState:
    c = ClusterState()
    for o in objs:
        if o["kind"] == "Node":
            c.add(parse_node(o))
        elif o["kind"] == "Namespace":
            c.add(parse_namespace(o))
        elif o["kind"] == "Pod":
            c.add(parse_pod(o))
        else:
            c.add(parse_workload(o, o["kind"]))
    return c


def term(selector: dict[str, Any] | None, key: str, **extra: Any) -> dict[str, Any]:
    return {"labelSelector": selector, "topologyKey": key, **extra}


def match(**labels: str) -> dict[str, Any]:
    return {"matchLabels": labels}


def run_filter(pl: Any, cluster: ClusterState, p: Pod) -> dict[str, Status]:
    """PreFilter then Filter on every node; asserts the vectorised form agrees. Skip shows as Skip."""
    state = CycleState()
    _, st = pl.pre_filter(state, p, cluster)
    if st.is_skip:
        return {i.name: st for i in cluster.node_infos}
    assert st.is_success, st
    per_node = {i.name: pl.filter(state, p, i) for i in cluster.node_infos}
    rows = np.arange(cluster.num_nodes)
    mask = pl.filter_nodes(state, p, cluster, rows)
    assert mask is not None
    assert [bool(m) for m in mask] == [per_node[cluster.node_infos[r].name].is_success for r in rows]
    return per_node


def run_score(pl: Any, cluster: ClusterState, p: Pod, names: list[str] | None = None) -> dict[str, int] | None:
    """PreScore, Score (both forms, compared) and NormalizeScore over `names` (default: every node)."""
    infos = cluster.node_infos
    rows = np.array([cluster.node_info_by_name[n].index for n in names] if names else range(len(infos)),
                    dtype=np.int64)
    state = CycleState()
    st = pl.pre_score(state, p, cluster, rows)
    if st.is_skip:
        return None
    assert st.is_success, st
    per_node = [pl.score(state, p, infos[r])[0] for r in rows]
    vec = pl.score_nodes(state, p, cluster, rows)
    assert vec is not None and list(vec) == per_node
    # Other rows than PreScore's (equal, not the same array): what PreScore gathered is not reused.
    assert list(pl.score_nodes(state, p, cluster, rows.copy())) == per_node
    scores = np.array(per_node, dtype=np.int64)
    pl.normalize_score(state, p, scores, rows)
    if isinstance(pl, PodTopologySpread):
        # Upstream's NormalizeScore, node by node: ignored nodes 0, the others reversed over [min, max].
        ps = state.read("PreScorePodTopologySpread")
        kept = [s for r, s in zip(rows, per_node, strict=True) if int(r) not in ps.ignored_rows]
        lo, hi = (min(kept), max(max(kept), 0)) if kept else (0, 0)
        want = [0 if int(r) in ps.ignored_rows else (100 if hi == 0 else 100 * (hi + lo - s) // hi)
                for r, s in zip(rows, per_node, strict=True)]
        assert scores.tolist() == want
    return {infos[r].name: int(s) for r, s in zip(rows, scores, strict=True)}


def codes(statuses: dict[str, Status]) -> dict[str, str]:
    return {n: s.code.value for n, s in statuses.items()}


def ipa(cluster: ClusterState, **args: Any) -> InterPodAffinity:
    return InterPodAffinity(build_args(InterPodAffinity, args), Handle(cluster))


def pts(cluster: ClusterState, **args: Any) -> PodTopologySpread:
    return PodTopologySpread(build_args(PodTopologySpread, args), Handle(cluster))


# ---------------------------------------------------------------- InterPodAffinity


def test_no_affinity_anywhere_skips_prefilter_and_prescore() -> None:
    c = cluster_of(node("n1"), pod("a", {"app": "x"}, node_name="n1"))
    p = parse_pod(pod("p", {"app": "x"}))
    pl = ipa(c)
    _, st = pl.pre_filter(CycleState(), p, c)
    assert st.code is Code.SKIP
    assert pl.pre_score(CycleState(), p, c, np.arange(1)).code is Code.SKIP


def test_self_affinity_first_pod_may_schedule_only_where_topology_exists() -> None:
    c = cluster_of(node("n1", {"zone": "a"}), node("n2"))
    aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(match(app="db"), "zone")]}}
    p = parse_pod(pod("p", {"app": "db"}, affinity=aff))
    got = run_filter(ipa(c), c, p)
    assert codes(got) == {"n1": "Success", "n2": "UnschedulableAndUnresolvable"}
    assert got["n2"].reasons == ["node(s) didn't match pod affinity rules"]
    # A pod not matching its own term gets no such pass.
    other = parse_pod(pod("q", {"app": "web"}, affinity=aff))
    assert codes(run_filter(ipa(c), c, other))["n1"] == "UnschedulableAndUnresolvable"


def test_self_affinity_no_longer_applies_once_a_pod_matches_somewhere() -> None:
    c = cluster_of(node("n1", {"zone": "a"}), node("n2", {"zone": "b"}),
                   pod("db-0", {"app": "db"}, node_name="n2"))
    aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(match(app="db"), "zone")]}}
    got = run_filter(ipa(c), c, parse_pod(pod("p", {"app": "db"}, affinity=aff)))
    assert codes(got) == {"n1": "UnschedulableAndUnresolvable", "n2": "Success"}


def test_anti_affinity_and_existing_pods_anti_affinity_reasons() -> None:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(match(app="web"), "zone")]}}
    c = cluster_of(node("n1", {"zone": "a"}), node("n2", {"zone": "a"}), node("n3", {"zone": "b"}),
                   pod("w", {"app": "web"}, node_name="n1"),
                   pod("guard", {"role": "guard"}, node_name="n3", affinity=anti))
    got = run_filter(ipa(c), c, parse_pod(pod("p", {"app": "web"}, affinity=anti)))
    assert codes(got) == {"n1": "Unschedulable", "n2": "Unschedulable", "n3": "Unschedulable"}
    assert got["n2"].reasons == ["node(s) didn't match pod anti-affinity rules"]
    assert got["n3"].reasons == ["node(s) didn't satisfy existing pods anti-affinity rules"]
    # Without its own terms the pod is still kept off zone b by the guard's anti-affinity.
    got = run_filter(ipa(c), c, parse_pod(pod("p2", {"app": "web"})))
    assert codes(got) == {"n1": "Success", "n2": "Success", "n3": "Unschedulable"}


def test_namespace_selector_of_incoming_and_existing_terms() -> None:
    nss = [{"kind": "Namespace", "metadata": {"name": n, "labels": {"team": t}}}
           for n, t in (("ns1", "a"), ("ns2", "a"), ("ns3", "b"))]
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term(match(app="x"), HOST, namespaceSelector=match(team="a"))]}}
    c = cluster_of(*nss, node("n1"), node("n2"), node("n3"),
                   pod("x1", {"app": "x"}, ns="ns2", node_name="n1"),
                   pod("x3", {"app": "x"}, ns="ns3", node_name="n2"))
    got = run_filter(ipa(c), c, parse_pod(pod("p", {"app": "y"}, ns="ns1", affinity=anti)))
    # ns2 is selected (team=a), ns3 is not; the pod's own namespace only counts if selected.
    assert codes(got) == {"n1": "Unschedulable", "n2": "Success", "n3": "Success"}
    # An existing pod's namespaceSelector is matched against the incoming pod's Namespace labels.
    c2 = cluster_of(*nss, node("n1"), node("n2"),
                    pod("guard", {"app": "g"}, ns="ns3", node_name="n1", affinity=anti))
    assert codes(run_filter(ipa(c2), c2, parse_pod(pod("p", {"app": "x"}, ns="ns1")))) == \
        {"n1": "Unschedulable", "n2": "Success"}
    # From ns3 (team=b) nothing matches: the plugin has nothing to check.
    assert codes(run_filter(ipa(c2), c2, parse_pod(pod("p", {"app": "x"}, ns="ns3")))) == \
        {"n1": "Skip", "n2": "Skip"}
    # An empty namespaceSelector selects every namespace.
    everywhere = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term(match(app="x"), HOST, namespaceSelector={})]}}
    got = run_filter(ipa(c), c, parse_pod(pod("p", {"app": "y"}, ns="ns1", affinity=everywhere)))
    assert codes(got) == {"n1": "Unschedulable", "n2": "Unschedulable", "n3": "Success"}


def test_match_label_keys_merge_into_the_selector() -> None:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, HOST, matchLabelKeys=["app"])]}}
    c = cluster_of(node("n1"), node("n2"), pod("a", {"app": "a"}, node_name="n1"),
                   pod("b", {"app": "b"}, node_name="n2"))
    assert codes(run_filter(ipa(c), c, parse_pod(pod("p", {"app": "a"}, affinity=anti)))) == \
        {"n1": "Unschedulable", "n2": "Success"}
    mismatch = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, HOST, mismatchLabelKeys=["app"])]}}
    assert codes(run_filter(ipa(c), c, parse_pod(pod("p", {"app": "a"}, affinity=mismatch)))) == \
        {"n1": "UnschedulableAndUnresolvable", "n2": "Success"}


def test_terminating_pods_count_for_affinity() -> None:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(match(app="x"), HOST)]}}
    c = cluster_of(node("n1"), node("n2"), pod("x", {"app": "x"}, node_name="n1", terminating=True))
    assert codes(run_filter(ipa(c), c, parse_pod(pod("p", affinity=anti)))) == {"n1": "Unschedulable", "n2": "Success"}


def test_score_preferred_terms_hard_weight_and_ignore_existing() -> None:
    req = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(match(app="web"), "zone")]}}
    pref = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "podAffinityTerm": term(match(app="web"), "zone")}]}}
    c = cluster_of(node("n1", {"zone": "a"}), node("n2", {"zone": "b"}), node("n3", {"zone": "c"}),
                   pod("needs-web", {"app": "x"}, node_name="n1", affinity=req),
                   pod("avoids-web", {"app": "y"}, node_name="n2", affinity=pref))
    web = parse_pod(pod("p", {"app": "web"}))
    # Existing required affinity (hard weight 1) pulls to zone a, existing preferred anti (-5) pushes from b.
    assert run_score(ipa(c), c, web) == {"n1": 100, "n2": 0, "n3": 83}
    assert run_score(ipa(c, hardPodAffinityWeight=0), c, web) == {"n1": 100, "n2": 0, "n3": 100}
    assert run_score(ipa(c, ignorePreferredTermsOfExistingPods=True), c, web) is None
    # The incoming pod's own preferred terms still count when existing pods' preferences are ignored —
    # and then existing pods' terms are processed as usual.
    own = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "podAffinityTerm": term(match(app="y"), "zone")}]}}
    got = run_score(ipa(c, ignorePreferredTermsOfExistingPods=True), c, parse_pod(pod("q", {"app": "web"}, affinity=own)))
    assert got == {"n1": 20, "n2": 100, "n3": 0}  # raw 1, -5 + 10, 0


def test_interpodaffinity_args_validation() -> None:
    c = ClusterState()
    assert InterPodAffinity.default_args() == {"hardPodAffinityWeight": 1, "ignorePreferredTermsOfExistingPods": False}
    with pytest.raises(InputError, match=r"hardPodAffinityWeight.*not in valid range \[0, 100\]"):
        ipa(c, hardPodAffinityWeight=101)
    with pytest.raises(InputError, match="hardPodAffinityWeight"):
        ipa(c, hardPodAffinityWeight=-1)
    with pytest.raises(InputError, match="ignorePreferredTermsOfExistingPods"):
        ipa(c, ignorePreferredTermsOfExistingPods="yes")
    with pytest.raises(InputError, match="unknown field 'hardWeight'"):
        ipa(c, hardWeight=3)


# ---------------------------------------------------------------- PodTopologySpread


def spread(key: str, skew: int = 1, when: str = "DoNotSchedule", selector: dict[str, Any] | None = None,
           **extra: Any) -> dict[str, Any]:
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
            "labelSelector": selector if selector is not None else match(app="x"), **extra}


def zoned(*spec: tuple[str, str, int], **node_extra: Any) -> list[dict[str, Any]]:
    """Nodes (name, zone) each with `count` matching pods."""
    out: list[dict[str, Any]] = []
    for name, zone, count in spec:
        out.append(node(name, {"zone": zone}, **node_extra))
        out += [pod(f"{name}-p{i}", {"app": "x"}, node_name=name) for i in range(count)]
    return out


def test_min_domains_treats_global_minimum_as_zero() -> None:
    c = cluster_of(*zoned(("a1", "a", 1), ("b1", "b", 1)))
    p = parse_pod(pod("p", {"app": "x"}, topologySpreadConstraints=[spread("zone", 1)]))
    assert codes(run_filter(pts(c), c, p)) == {"a1": "Success", "b1": "Success"}
    p3 = parse_pod(pod("p", {"app": "x"}, topologySpreadConstraints=[spread("zone", 1, minDomains=3)]))
    got = run_filter(pts(c), c, p3)
    assert codes(got) == {"a1": "Unschedulable", "b1": "Unschedulable"}
    assert got["a1"].reasons == ["node(s) didn't match pod topology spread constraints"]


def test_missing_topology_label_is_unresolvable() -> None:
    c = cluster_of(node("n1", {"zone": "a"}), node("n2"))
    p = parse_pod(pod("p", {"app": "x"}, topologySpreadConstraints=[spread("zone")]))
    got = run_filter(pts(c), c, p)
    assert got["n2"].code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert got["n2"].reasons == ["node(s) didn't match pod topology spread constraints (missing required label)"]


def test_node_affinity_policy_honor_and_ignore() -> None:
    objs = zoned(("a1", "a", 0), ("b1", "b", 2))
    objs[0]["metadata"]["labels"]["pool"] = "x"
    c = cluster_of(*objs)
    honor = parse_pod(pod("p", {"app": "x"}, nodeSelector={"pool": "x"}, topologySpreadConstraints=[spread("zone")]))
    ignore = parse_pod(pod("p", {"app": "x"}, nodeSelector={"pool": "x"},
                           topologySpreadConstraints=[spread("zone", nodeAffinityPolicy="Ignore")]))
    # Honor: zone b is not a domain for this pod, so b1 alone is not skewed (this plugin does not filter
    # on the nodeSelector itself).
    assert codes(run_filter(pts(c), c, honor)) == {"a1": "Success", "b1": "Success"}
    assert codes(run_filter(pts(c), c, ignore)) == {"a1": "Success", "b1": "Unschedulable"}


def test_node_taints_policy() -> None:
    taint = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    c = cluster_of(node("a1", {"zone": "a"}, taint), *zoned(("b1", "b", 1)))
    ignore = parse_pod(pod("p", {"app": "x"}, topologySpreadConstraints=[spread("zone")]))
    honor = parse_pod(pod("p", {"app": "x"}, topologySpreadConstraints=[spread("zone", nodeTaintsPolicy="Honor")]))
    tolerant = parse_pod(pod("p", {"app": "x"}, tolerations=[{"key": "dedicated", "operator": "Exists"}],
                             topologySpreadConstraints=[spread("zone", nodeTaintsPolicy="Honor")]))
    assert codes(run_filter(pts(c), c, ignore)) == {"a1": "Success", "b1": "Unschedulable"}
    assert codes(run_filter(pts(c), c, honor)) == {"a1": "Success", "b1": "Success"}
    assert codes(run_filter(pts(c), c, tolerant)) == {"a1": "Success", "b1": "Unschedulable"}


def test_terminating_and_other_namespace_pods_do_not_count_for_spreading() -> None:
    c = cluster_of(*zoned(("a1", "a", 0), ("b1", "b", 0)),
                   pod("t", {"app": "x"}, node_name="b1", terminating=True),
                   pod("o", {"app": "x"}, ns="other", node_name="b1"))
    p = parse_pod(pod("p", {"app": "x"}, topologySpreadConstraints=[spread("zone", 1)]))
    assert codes(run_filter(pts(c), c, p)) == {"a1": "Success", "b1": "Success"}


def test_match_label_keys_in_spreading() -> None:
    c = cluster_of(node("a1", {"zone": "a"}), node("b1", {"zone": "b"}),
                   *[pod(f"v1-{i}", {"app": "x", "rev": "1"}, node_name="b1") for i in range(3)])
    p = parse_pod(pod("p", {"app": "x", "rev": "2"},
                      topologySpreadConstraints=[spread("zone", 1, matchLabelKeys=["rev"])]))
    assert codes(run_filter(pts(c), c, p)) == {"a1": "Success", "b1": "Success"}


def test_system_defaults_apply_only_to_pods_of_a_workload() -> None:
    svc = {"kind": "Service", "metadata": {"name": "s", "namespace": "default"}, "spec": {"selector": {"app": "x"}}}
    c = cluster_of(svc, node("n1", {ZONE: "a"}), node("n2", {ZONE: "b"}), node("n3"),
                   *[pod(f"x{i}", {"app": "x"}, node_name="n1") for i in range(3)])
    pl = pts(c)
    assert pl.pre_filter(CycleState(), parse_pod(pod("p", {"app": "x"})), c)[1].code is Code.SKIP
    got = run_score(pl, c, parse_pod(pod("p", {"app": "x"})))
    # n3 has no zone label but still takes part (hostname spreading) under system defaulting.
    assert got is not None and got["n1"] < got["n2"] and got["n3"] == 100
    assert run_score(pl, c, parse_pod(pod("lonely", {"app": "y"}))) is None


def test_list_defaulting_uses_args_constraints_and_controller_selector() -> None:
    rs = {"kind": "ReplicaSet", "metadata": {"name": "rs", "namespace": "default"},
          "spec": {"selector": match(app="x")}}
    owner = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True}]
    c = cluster_of(rs, *zoned(("a1", "a", 0), ("b1", "b", 2)))
    pl = pts(c, defaultingType="List", defaultConstraints=[
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}])
    raw = pod("p", {"app": "x"})
    raw["metadata"]["ownerReferences"] = owner
    assert codes(run_filter(pl, c, parse_pod(raw))) == {"a1": "Success", "b1": "Unschedulable"}
    # Without a controller (and no Service) there is no default selector: no constraints.
    assert pl.pre_filter(CycleState(), parse_pod(pod("q", {"app": "x"})), c)[1].code is Code.SKIP


def test_spread_score_ignores_nodes_without_the_key() -> None:
    c = cluster_of(*zoned(("a1", "a", 2), ("b1", "b", 0)), node("x1"))
    p = parse_pod(pod("p", {"app": "x"}, topologySpreadConstraints=[spread("zone", 1, "ScheduleAnyway")]))
    assert run_score(pts(c), c, p) == {"a1": 0, "b1": 100, "x1": 0}
    assert pts(c).pre_score(CycleState(), parse_pod(pod("q", {"app": "x"})), c, np.arange(3)).code is Code.SKIP


@pytest.mark.parametrize("args,fragment", [
    ({"defaultingType": "Fancy"}, "defaultingType: Unsupported value"),
    ({"defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
     "defaultingType: Invalid value: \"System\""),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 0, "topologyKey": "zone",
                                                        "whenUnsatisfiable": "DoNotSchedule"}]},
     r"defaultConstraints\[0\].maxSkew"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "",
                                                        "whenUnsatisfiable": "DoNotSchedule"}]},
     r"defaultConstraints\[0\].topologyKey: Required value"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "bad key!",
                                                        "whenUnsatisfiable": "DoNotSchedule"}]},
     r"defaultConstraints\[0\].topologyKey: Invalid value"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                                        "whenUnsatisfiable": "Sometimes"}]},
     r"defaultConstraints\[0\].whenUnsatisfiable: Unsupported value"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                                        "whenUnsatisfiable": "DoNotSchedule",
                                                        "labelSelector": {"matchLabels": {"a": "b"}}}]},
     r"defaultConstraints\[0\].labelSelector: Forbidden"),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
     r"defaultConstraints\[1\]: Duplicate value"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                                        "whenUnsatisfiable": "DoNotSchedule", "skew": 2}]},
     "unknown field 'skew'"),
    ({"defaults": []}, "unknown field 'defaults'"),
])
def test_podtopologyspread_args_validation(args: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        build_args(PodTopologySpread, args)


def test_podtopologyspread_default_args() -> None:
    assert PodTopologySpread.default_args() == {"defaultingType": "System"}
    pl = PodTopologySpread(build_args(PodTopologySpread, None), Handle(ClusterState()))
    assert pl.system_defaulted and [c.max_skew for c in pl.default_constraints] == [3, 5]


# ---------------------------------------------------------------- AddPod / RemovePod


def _verdicts(pl: Any, state: CycleState, p: Pod, c: ClusterState) -> list[tuple[str, tuple[str, ...]]]:
    return [(s.code.value, tuple(s.reasons)) for s in (pl.filter(state, p, i) for i in c.node_infos)]


def test_add_then_remove_restores_prefilter_state() -> None:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(match(app="x"), "zone")]}}
    aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(match(app="x"), "zone")]}}
    c = cluster_of(*zoned(("a1", "a", 1), ("b1", "b", 0), ("c1", "c", 2)))
    incoming = parse_pod(pod("p", {"app": "x"}, affinity=aff, topologySpreadConstraints=[spread("zone", 1)]))
    to_add = parse_pod(pod("v", {"app": "x"}, node_name="b1", affinity=anti))
    b1 = c.node_info_by_name["b1"]
    for pl in (ipa(c), pts(c)):
        state = CycleState()
        assert pl.pre_filter(state, incoming, c)[1].is_success
        before = _verdicts(pl, state, incoming, c)
        work = state.clone()
        assert pl.add_pod(work, incoming, to_add, b1).is_success
        assert _verdicts(pl, work, incoming, c) != before, pl.name
        assert _verdicts(pl, state, incoming, c) == before  # the clone is independent
        assert pl.remove_pod(work, incoming, to_add, b1).is_success
        assert _verdicts(pl, work, incoming, c) == before
        # And the other way round: remove an existing pod, add it back.
        victim = next(iter(c.node_info_by_name["c1"].pods.values()))
        work = state.clone()
        pl.remove_pod(work, incoming, victim, c.node_info_by_name["c1"])
        pl.add_pod(work, incoming, victim, c.node_info_by_name["c1"])
        assert _verdicts(pl, work, incoming, c) == before


def test_remove_pod_unblocks_existing_anti_affinity() -> None:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(match(app="x"), HOST)]}}
    c = cluster_of(node("n1"), pod("guard", {"app": "g"}, node_name="n1", affinity=anti))
    pl = ipa(c)
    incoming = parse_pod(pod("p", {"app": "x"}))
    state = CycleState()
    assert pl.pre_filter(state, incoming, c)[1].is_success
    info = c.node_infos[0]
    assert not pl.filter(state, incoming, info).is_success
    pl.remove_pod(state, incoming, c.pods["default/guard"], info)
    assert pl.filter(state, incoming, info).is_success
    mask = pl.filter_nodes(state, incoming, c, np.arange(1))
    assert mask is not None and mask[0]


# ---------------------------------------------------------------- the index stays current


def test_index_counts_follow_binds_evictions_and_new_nodes() -> None:
    c = cluster_of(node("n1"), node("n2"), pod("a", {"app": "x"}, node_name="n1"))
    idx = index_for(c)
    m = PodMatcher(((frozenset({"default"}), parse_label_selector(match(app="x"), "s")),), skip_terminating=True)
    assert list(idx.counts(m)) == [1, 0]
    b = parse_pod(pod("b", {"app": "x"}))
    c.add(b)
    c.bind(b, "n2")
    assert list(idx.counts(m)) == [1, 1]
    c.delete(c.pods["default/a"])
    assert list(idx.counts(m)) == [0, 1]
    c.add(parse_node(node("n3")))
    c.add(parse_pod(pod("d", {"app": "x"}, node_name="n3")))
    assert list(idx.counts(m)) == [0, 1, 1]
    c.delete(c.nodes["n1"])
    assert list(idx.counts(m)) == [1, 1]
    c.update(parse_pod(pod("b", {"app": "y"}, node_name="n2")))
    assert list(idx.counts(m)) == [0, 1]



@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["bind", "evict", "relabel", "terminate", "add-node"]),
                          st.integers(0, 5), st.integers(0, 3)), max_size=25))
# A deletion starting on a counted pod (the same record but for the terminating mark), with and without
# affinity terms, then the pod relabelled or gone.
@example([("bind", 1, 0), ("terminate", 1, 0)])
@example([("bind", 1, 0), ("bind", 5, 1), ("terminate", 5, 0), ("evict", 5, 0), ("terminate", 1, 1)])
@example([("bind", 3, 1), ("terminate", 3, 0), ("relabel", 3, 1)])
def test_index_matches_a_fresh_scan_after_any_event_sequence(ops: list[tuple[str, int, int]]) -> None:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(match(app="x"), HOST)]}}
    c = cluster_of(node("n0", {"zone": "z0"}), node("n1", {"zone": "z1"}))
    idx = index_for(c)
    sel = parse_label_selector(match(app="x"), "s")
    m = PodMatcher(((frozenset({"default"}), sel),), skip_terminating=True)
    idx.counts(m)  # tracked from the start, then kept current by events
    idx.domain_counts(m, idx.topology("zone"))
    rebuilds = idx.rebuilds
    for op, i, j in ops:
        key = f"default/p{i}"
        if op == "bind":
            p = c.pods.get(key) or parse_pod(pod(f"p{i}", {"app": "x" if i % 2 else "y"},
                                                 affinity=anti if i % 3 == 0 else None))
            if key not in c.pods:
                c.add(p)
            c.bind(p, f"n{j % c.num_nodes}")
        elif op == "evict" and key in c.pods:
            c.delete(c.pods[key])
        elif op == "relabel" and key in c.pods:
            old = c.pods[key]
            c.update(parse_pod(pod(f"p{i}", {"app": "y" if old.labels.get("app") == "x" else "x"},
                                   node_name=old.node_name, affinity=anti if j % 2 else None)))
        elif op == "terminate" and key in c.pods:
            old = c.pods[key]
            c.update(parse_pod(pod(f"p{i}", dict(old.labels), node_name=old.node_name, terminating=True)))
        elif op == "add-node":
            c.add(parse_node(node(f"n{c.num_nodes}", {"zone": f"z{c.num_nodes % 3}"})))
            idx.counts(m)
            rebuilds += 1  # rows grew: one full rescan
        # Keep the per-domain caches alive so the next events must move them along.
        idx.domain_counts(m, idx.topology("zone"))
        for _t, _w, tc in idx.existing_terms("requiredAntiAffinity"):
            idx.term_domain_counts(tc, idx.topology("zone"))
    idx.counts(m)
    assert idx.rebuilds == rebuilds  # pod events were applied incrementally
    want = [sum(1 for p in info.pods.values() if not p.is_terminating and sel.matches(p.labels))
            for info in c.node_infos]
    assert list(idx.counts(m)) == want
    zone = idx.topology("zone")
    want_zones = [sum(w for w, info in zip(want, c.node_infos, strict=True) if info.node.labels["zone"] == v)
                  for v in zone.values]
    assert list(idx.domain_counts(m, zone)) == want_zones
    carriers = [sum(1 for p in info.pods.values() if p.affinity.pod_anti_affinity_required) for info in c.node_infos]
    got = np.zeros(c.num_nodes, dtype=np.int64)
    got_zones = np.zeros(zone.size, dtype=np.int64)
    for _t, _w, tc in idx.existing_terms("requiredAntiAffinity"):
        got += idx.term_rows(tc)
        got_zones += idx.term_domain_counts(tc, zone)
    assert list(got) == carriers
    assert list(got_zones) == [sum(w for w, info in zip(carriers, c.node_infos, strict=True)
                                   if info.node.labels["zone"] == v) for v in zone.values]


# ---------------------------------------------------------------- reference: upstream's loops over every pod


def ref_ipa_filter(c: ClusterState, p: Pod) -> dict[str, str] | None:
    """interpodaffinity PreFilter + Filter as upstream writes them (maps of topology pairs, every pod)."""
    ns_labels = c.namespace_labels(p.namespace)
    terms = pod_terms(p)
    req_aff = [merge_namespaces(t, c) for t in terms.required_affinity]
    req_anti = [merge_namespaces(t, c) for t in terms.required_anti_affinity]
    existing: Counter[tuple[str, str]] = Counter()
    aff: Counter[tuple[str, str]] = Counter()
    anti: Counter[tuple[str, str]] = Counter()
    for info in c.node_infos:
        labels = info.node.labels
        for e in info.pods.values():
            for t in pod_terms(e).required_anti_affinity:
                if t.matches(p, ns_labels) and t.topology_key in labels:
                    existing[(t.topology_key, labels[t.topology_key])] += 1
            if req_aff and all(t.matches(e, {}) for t in req_aff):
                for t in req_aff:
                    if t.topology_key in labels:
                        aff[(t.topology_key, labels[t.topology_key])] += 1
            for t in req_anti:
                if t.matches(e, {}) and t.topology_key in labels:
                    anti[(t.topology_key, labels[t.topology_key])] += 1
    if not existing and not req_aff and not req_anti:
        return None
    out = {}
    for info in c.node_infos:
        labels = info.node.labels
        verdict = "Success"
        exist, missing = True, False
        for t in req_aff:
            if t.topology_key not in labels:
                missing = True
            elif aff[(t.topology_key, labels[t.topology_key])] <= 0:
                exist = False
        if missing or (not exist and not (not aff and all(t.matches(p, {}) for t in req_aff))):
            verdict = "UnschedulableAndUnresolvable"
        elif any(t.topology_key in labels and anti[(t.topology_key, labels[t.topology_key])] > 0 for t in req_anti):
            verdict = "Unschedulable"
        elif any(existing[(k, v)] > 0 for k, v in labels.items()):
            verdict = "Unschedulable"
        out[info.name] = verdict
    return out


def ref_ipa_raw_scores(c: ClusterState, p: Pod, pl: InterPodAffinity) -> dict[str, int] | None:
    """interpodaffinity PreScore + Score: processExistingPod over every pod."""
    terms = pod_terms(p)
    has = bool(terms.preferred_affinity or terms.preferred_anti_affinity)
    if pl.args.ignore_preferred_terms_of_existing_pods and not has:
        return None
    ns_labels = c.namespace_labels(p.namespace)
    pref = [(w, merge_namespaces(t, c)) for w, t in terms.preferred_affinity]
    pref_anti = [(w, merge_namespaces(t, c)) for w, t in terms.preferred_anti_affinity]
    topo: dict[str, Counter[str]] = {}

    def process(t: Any, weight: int, target: Pod, nsl: Any, labels: dict[str, str]) -> None:
        if t.matches(target, nsl) and t.topology_key in labels:
            topo.setdefault(t.topology_key, Counter())[labels[t.topology_key]] += weight

    for info in c.node_infos:
        labels = info.node.labels
        if not labels:
            continue
        for e in info.pods.values():
            if not has and not (e.affinity.has_pod_affinity or e.affinity.has_pod_anti_affinity):
                continue
            for w, t in pref:
                process(t, w, e, {}, labels)
            for w, t in pref_anti:
                process(t, -w, e, {}, labels)
            et = pod_terms(e)
            if pl.args.hard_pod_affinity_weight > 0:
                for t in et.required_affinity:
                    process(t, pl.args.hard_pod_affinity_weight, p, ns_labels, labels)
            for w, t in et.preferred_affinity:
                process(t, w, p, ns_labels, labels)
            for w, t in et.preferred_anti_affinity:
                process(t, -w, p, ns_labels, labels)
    if not topo:
        return None
    return {i.name: sum(vals[i.node.labels[k]] for k, vals in topo.items() if k in i.node.labels)
            for i in c.node_infos}


def _ref_count(info: Any, con: Any, ns: str) -> int:
    if con.selector.empty or con.selector.nothing:
        return 0
    return sum(1 for e in info.pods.values()
               if not e.is_terminating and e.namespace == ns and con.selector.matches(e.labels))


def _ref_included(con: Any, p: Pod, node_obj: Any) -> bool:
    if con.node_affinity_honor and not required_node_affinity_matches(p, node_obj):
        return False
    return not (con.node_taints_honor and not tolerates_node_taints(p, node_obj))


def ref_pts_filter(c: ClusterState, p: Pod, pl: PodTopologySpread) -> dict[str, str] | None:
    cons = pl.constraints(p, "DoNotSchedule", c)
    if not cons:
        return None
    counts: list[dict[str, int]] = [{} for _ in cons]
    for info in c.node_infos:
        labels = info.node.labels
        if not all(k.topology_key in labels for k in cons):
            continue
        for i, con in enumerate(cons):
            if _ref_included(con, p, info.node):
                v = labels[con.topology_key]
                counts[i][v] = counts[i].get(v, 0) + _ref_count(info, con, p.namespace)
    out = {}
    for info in c.node_infos:
        labels = info.node.labels
        verdict = "Success"
        for i, con in enumerate(cons):
            if con.topology_key not in labels:
                verdict = "UnschedulableAndUnresolvable"
                break
            low = 0 if len(counts[i]) < con.min_domains else min(counts[i].values(), default=0)
            skew = counts[i].get(labels[con.topology_key], 0) + int(con.selector.matches(p.labels)) - low
            if skew > con.max_skew:
                verdict = "Unschedulable"
                break
        out[info.name] = verdict
    return out


def ref_pts_raw_scores(c: ClusterState, p: Pod, pl: PodTopologySpread, names: list[str]) -> dict[str, int] | None:
    cons = pl.constraints(p, "ScheduleAnyway", c)
    if not cons:
        return None
    require_all = bool(p.topology_spread_constraints) or not pl.system_defaulted
    filtered = [c.node_info_by_name[n] for n in names]
    ignored = {i.name for i in filtered if require_all and not all(k.topology_key in i.node.labels for k in cons)}
    counts: list[dict[str, int]] = [{} for _ in cons]
    for i, con in enumerate(cons):
        for info in filtered:
            if info.name not in ignored and con.topology_key != HOST:
                counts[i].setdefault(info.node.labels.get(con.topology_key, ""), 0)
    for info in c.node_infos:
        labels = info.node.labels
        if require_all and not all(k.topology_key in labels for k in cons):
            continue
        for i, con in enumerate(cons):
            v = labels.get(con.topology_key, "")
            if _ref_included(con, p, info.node) and v in counts[i]:
                counts[i][v] += _ref_count(info, con, p.namespace)
    weights = [math.log((len(filtered) - len(ignored) if con.topology_key == HOST else len(counts[i])) + 2)
               for i, con in enumerate(cons)]
    out = {}
    for info in filtered:
        if info.name in ignored:
            out[info.name] = 0
            continue
        total = 0.0
        for i, con in enumerate(cons):
            if con.topology_key in info.node.labels:
                cnt = _ref_count(info, con, p.namespace) if con.topology_key == HOST \
                    else counts[i][info.node.labels[con.topology_key]]
                total += cnt * weights[i] + float(con.max_skew - 1)
        out[info.name] = go_round(total)
    return out


# ---------------------------------------------------------------- random clusters: both forms agree


LABEL_VALUES = ("x", "y")
KEYS = ("zone", HOST, "rack")


@st.composite
def affinity_terms(draw: st.DrawFn) -> dict[str, Any]:
    def one() -> dict[str, Any]:
        sel = draw(st.sampled_from([match(app="x"), match(app="y"), {},
                                    {"matchExpressions": [{"key": "app", "operator": "Exists"}]}]))
        t = term(sel, draw(st.sampled_from(KEYS)))
        if draw(st.booleans()):
            t["namespaces"] = draw(st.lists(st.sampled_from(["n1", "n2"]), max_size=2))
        if draw(st.integers(0, 4)) == 0:
            t["namespaceSelector"] = draw(st.sampled_from([{}, match(team="a")]))
        return t

    out: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        req = [one() for _ in range(draw(st.integers(0, 2 if kind == "podAntiAffinity" else 1)))]
        pref = [{"weight": draw(st.integers(1, 100)), "podAffinityTerm": one()} for _ in range(draw(st.integers(0, 2)))]
        if req or pref:
            out[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": req,
                         "preferredDuringSchedulingIgnoredDuringExecution": pref}
    return out


@st.composite
def spread_constraints(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for _ in range(draw(st.integers(0, 3))):
        c = spread(draw(st.sampled_from(KEYS)), draw(st.integers(1, 3)),
                   draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])),
                   draw(st.sampled_from([match(app="x"), {}, {"matchExpressions": [
                       {"key": "app", "operator": "In", "values": ["x", "y"]}]}])))
        if draw(st.booleans()):
            c["minDomains"] = draw(st.integers(1, 4))
        if draw(st.booleans()):
            c["nodeAffinityPolicy"] = draw(st.sampled_from(["Honor", "Ignore"]))
        if draw(st.booleans()):
            c["nodeTaintsPolicy"] = draw(st.sampled_from(["Honor", "Ignore"]))
        out.append(c)
    return out


@st.composite
def random_cluster(draw: st.DrawFn) -> tuple[ClusterState, Pod]:
    objs: list[dict[str, Any]] = [{"kind": "Namespace", "metadata": {"name": "n1", "labels": {"team": "a"}}},
                                  {"kind": "Namespace", "metadata": {"name": "n2", "labels": {"team": "b"}}}]
    n = draw(st.integers(1, 6))
    for i in range(n):
        labels = {}
        if draw(st.integers(0, 4)):
            labels["zone"] = draw(st.sampled_from(["a", "b", "c", ""]))
        if draw(st.booleans()):
            labels["rack"] = draw(st.sampled_from(["r1", "r2"]))
        if draw(st.booleans()):
            labels["pool"] = "p"
        taints = [{"key": "t", "value": "v", "effect": "NoSchedule"}] if draw(st.integers(0, 3)) == 0 else None
        nd = node(f"node{i}", labels, taints)
        if draw(st.integers(0, 5)) == 0:
            del nd["metadata"]["labels"][HOST]
        objs.append(nd)
    for j in range(draw(st.integers(0, 10))):
        spec: dict[str, Any] = {}
        if draw(st.integers(0, 2)) == 0:
            spec["affinity"] = draw(affinity_terms())
        objs.append(pod(f"e{j}", {"app": draw(st.sampled_from(LABEL_VALUES))}, ns=draw(st.sampled_from(["n1", "n2"])),
                        node_name=f"node{draw(st.integers(0, n - 1))}", terminating=draw(st.integers(0, 5)) == 0,
                        **spec))
    spec = {"affinity": draw(affinity_terms()), "topologySpreadConstraints": draw(spread_constraints())}
    if draw(st.booleans()):
        spec["nodeSelector"] = {"pool": "p"}
    if draw(st.booleans()):
        spec["tolerations"] = [{"key": "t", "operator": "Exists"}]
    incoming = parse_pod(pod("incoming", {"app": draw(st.sampled_from(LABEL_VALUES))},
                             ns=draw(st.sampled_from(["n1", "n2"])), **spec))
    return cluster_of(*objs), incoming


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_cluster(), st.data())
def test_vectorised_and_per_node_forms_agree(case: tuple[ClusterState, Pod], data: st.DataObject) -> None:
    c, incoming = case
    names = [i.name for i in c.node_infos]
    subset = data.draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
    a, s = ipa(c, hardPodAffinityWeight=data.draw(st.integers(0, 3)),
               ignorePreferredTermsOfExistingPods=data.draw(st.booleans())), pts(c)
    # Against upstream's plain loops over every pod.
    verdicts = run_filter(a, c, incoming)
    want = ref_ipa_filter(c, incoming)
    assert (None if all(v.is_skip for v in verdicts.values()) else codes(verdicts)) == want
    verdicts = run_filter(s, c, incoming)
    assert (None if all(v.is_skip for v in verdicts.values()) else codes(verdicts)) == ref_pts_filter(c, incoming, s)
    for pl, ref in ((a, ref_ipa_raw_scores(c, incoming, a)), (s, ref_pts_raw_scores(c, incoming, s, subset))):
        state = CycleState()
        rows = np.array([c.node_info_by_name[n].index for n in subset], dtype=np.int64)
        st_ = pl.pre_score(state, incoming, c, rows)
        got = None if st_.is_skip else {n: pl.score(state, incoming, c.node_info_by_name[n])[0] for n in subset}
        assert got == (None if ref is None else {n: ref[n] for n in subset}), pl.name
    for pl in (a, s):
        scores = run_score(pl, c, incoming, subset)
        if scores is not None:
            assert all(0 <= v <= 100 for v in scores.values())
        # Preemption's extensions: removing then re-adding an existing pod leaves every verdict unchanged.
        state = CycleState()
        if pl.pre_filter(state, incoming, c)[1].is_success and c.pods:
            victim = data.draw(st.sampled_from(sorted(c.pods)))
            vp = c.pods[victim]
            info = c.node_info_by_name.get(vp.node_name)
            if info is not None:
                before = _verdicts(pl, state, incoming, c)
                work = state.clone()
                pl.remove_pod(work, incoming, vp, info)
                mask = pl.filter_nodes(work, incoming, c, np.arange(c.num_nodes))
                assert mask is not None
                assert [bool(m) for m in mask] == [pl.filter(work, incoming, i).is_success for i in c.node_infos]
                pl.add_pod(work, incoming, vp, info)
                assert _verdicts(pl, work, incoming, c) == before
