"""The eight upstream descheduler strategies: key semantics (with a small fake evictor) and args validation.

The upstream cases as data run through the CLI in test_golden.py; these tests pin the rules each strategy
is built on, directly against the plugin classes.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kubesched.api.objects import Pod
from kubesched.api.snapshot import parse_objects
from kubesched.cluster.state import ClusterState
from kubesched.descheduler.framework import EvictionLimitError, EvictOptions, Handle
from kubesched.descheduler.plugins._gosort import go_sort_slice
from kubesched.descheduler.plugins.pod_life_time import PodLifeTime
from kubesched.descheduler.plugins.remove_duplicates import RemoveDuplicates
from kubesched.descheduler.plugins.remove_failed_pods import RemoveFailedPods
from kubesched.descheduler.plugins.remove_pods_having_too_many_restarts import RemovePodsHavingTooManyRestarts
from kubesched.descheduler.plugins.remove_pods_violating_inter_pod_anti_affinity import (
    RemovePodsViolatingInterPodAntiAffinity,
)
from kubesched.descheduler.plugins.remove_pods_violating_node_affinity import RemovePodsViolatingNodeAffinity
from kubesched.descheduler.plugins.remove_pods_violating_node_taints import RemovePodsViolatingNodeTaints
from kubesched.descheduler.plugins.remove_pods_violating_topology_spread_constraint import (
    RemovePodsViolatingTopologySpreadConstraint,
)
from kubesched.errors import InputError

NOW = datetime(2024, 1, 1, tzinfo=UTC)
ZONE = "topology.kubernetes.io/zone"
RS_OWNER = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs-1", "uid": "u1", "controller": True}]

ALL = [RemoveDuplicates, RemovePodsViolatingInterPodAntiAffinity, RemovePodsViolatingNodeAffinity,
       RemovePodsViolatingNodeTaints, RemovePodsViolatingTopologySpreadConstraint, RemovePodsHavingTooManyRestarts,
       PodLifeTime, RemoveFailedPods]


# ---------------------------------------------------------------- building blocks


def node(name: str, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
         cpu: str = "2", unschedulable: bool = False) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"taints": taints or [], "unschedulable": unschedulable},
            "status": {"allocatable": {"cpu": cpu, "memory": "4Gi", "pods": "10"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, node_name: str, *, ns: str = "default", labels: dict[str, str] | None = None,
        owners: list[dict[str, Any]] | None = RS_OWNER, image: str = "img", cpu: str = "100m",
        created: datetime | None = None, status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels or {},
                            "creationTimestamp": (created or NOW - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if owners:
        meta["ownerReferences"] = owners
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": image,
                                                             "resources": {"requests": {"cpu": cpu}}}], **spec},
            "status": status if status is not None else {"phase": "Running"}}


class FakeEvictor:
    """Evicts (records) pods with an owner, under optional per-node and total limits."""

    def __init__(self, max_per_node: int | None = None, max_total: int | None = None) -> None:
        self.max_per_node = max_per_node
        self.max_total = max_total
        self.evicted: list[str] = []
        self.per_node: dict[str, int] = {}

    def filter(self, pod: Pod) -> bool:
        return bool(pod.meta.owner_references)

    def pre_eviction_filter(self, pod: Pod) -> bool:
        return True

    def sort(self, pods: list[Pod]) -> list[Pod]:
        return pods

    has_sorters = False
    filters_read_only_the_pod = True  # `filter` reads the pod's own fields

    def evict(self, pod: Pod, opts: EvictOptions) -> bool:
        if self.max_total is not None and len(self.evicted) >= self.max_total:
            raise EvictionLimitError("total", "total limit")
        if self.max_per_node is not None and self.per_node.get(pod.node_name, 0) >= self.max_per_node:
            raise EvictionLimitError("node", "node limit")
        self.per_node[pod.node_name] = self.per_node.get(pod.node_name, 0) + 1
        self.evicted.append(pod.key)
        return True


def run(plugin_cls: Any, args: dict[str, Any] | None, objects: list[dict[str, Any]],
        evictor: FakeEvictor | None = None) -> list[str]:
    cluster = ClusterState.from_snapshot(parse_objects(objects, "test"))
    ev = evictor or FakeEvictor()
    handle = Handle(cluster=cluster, evictor=ev, now=NOW, profile="test")
    full = dict(plugin_cls.default_args())
    full.update(args or {})
    plugin = plugin_cls(plugin_cls.Args.from_raw(full), handle)
    nodes = list(cluster.nodes.values())
    status = plugin.balance(nodes) if hasattr(plugin, "balance") else plugin.deschedule(nodes)
    assert status.ok
    return ev.evicted


def invalid(plugin_cls: Any, args: dict[str, Any]) -> InputError:
    full = dict(plugin_cls.default_args())
    full.update(args)
    with pytest.raises(InputError) as e:
        plugin_cls.Args.from_raw(full)
    return e.value


# ---------------------------------------------------------------- common args


@pytest.mark.parametrize("cls", ALL)
def test_every_strategy_rejects_unknown_fields_and_both_namespace_lists(cls: Any) -> None:
    err = invalid(cls, {"bogus": 1})
    assert err.field == "bogus" and "unknown field" in err.message
    base: dict[str, Any] = {}
    if cls is RemovePodsViolatingNodeAffinity:
        base = {"nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]}
    if cls is RemovePodsHavingTooManyRestarts:
        base = {"podRestartThreshold": 1}
    if cls is PodLifeTime:
        base = {"maxPodLifeTimeSeconds": 1}
    err = invalid(cls, {**base, "namespaces": {"include": ["a"], "exclude": ["b"]}})
    assert err.field == "namespaces" and "only one of Include/Exclude namespaces" in err.message
    err = invalid(cls, {**base, "namespaces": {"include": "a"}})
    assert err.field == "namespaces.include"
    if cls is not RemoveDuplicates:  # RemoveDuplicates has no labelSelector
        err = invalid(cls, {**base, "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Nope"}]}})
        assert err.field is not None and err.field.startswith("labelSelector")
    else:
        assert invalid(cls, {"labelSelector": {}}).field == "labelSelector"
    cls.Args.from_raw({**base})  # the defaults (plus the required fields) are valid


def test_namespaces_include_and_exclude_filter_pods() -> None:
    objs = [node("n1"), node("n2")] + [pod(f"p{i}", "n1", ns=ns) for i, ns in enumerate(["a", "a", "b", "b"])]
    assert sorted(run(RemoveDuplicates, {}, objs)) == ["a/p1", "b/p3"]
    assert run(RemoveDuplicates, {"namespaces": {"include": ["a"]}}, objs) == ["a/p1"]
    assert run(RemoveDuplicates, {"namespaces": {"exclude": ["a"]}}, objs) == ["b/p3"]


# ---------------------------------------------------------------- RemoveDuplicates


def test_remove_duplicates_keeps_the_upper_average_per_node() -> None:
    # 5, 3 and 1 replicas over 3 feasible nodes: ceil(9/3) = 3 per node, so n1 gives up 2.
    objs = [node("n1"), node("n2"), node("n3")]
    objs += [pod(f"a{i}", "n1") for i in range(5)] + [pod(f"b{i}", "n2") for i in range(3)] + [pod("c0", "n3")]
    assert run(RemoveDuplicates, {}, objs) == ["default/a3", "default/a4"]


def test_remove_duplicates_needs_same_images_and_two_feasible_nodes() -> None:
    objs = [node("n1"), node("n2")] + [pod("p1", "n1", image="x"), pod("p2", "n1", image="y")]
    assert run(RemoveDuplicates, {}, objs) == []
    tainted = [node("n1"), node("n2", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])]
    objs = tainted + [pod("p1", "n1"), pod("p2", "n1")]
    assert run(RemoveDuplicates, {}, objs) == []  # only n1 is feasible
    assert run(RemoveDuplicates, {}, [node("n1"), node("n2")] + objs[2:]) == ["default/p2"]


def test_remove_duplicates_excludes_owner_kinds_and_pods_without_owner() -> None:
    objs = [node("n1"), node("n2"), pod("p1", "n1"), pod("p2", "n1")]
    assert run(RemoveDuplicates, {"excludeOwnerKinds": ["ReplicaSet"]}, objs) == []
    bare = [node("n1"), node("n2"), pod("p1", "n1", owners=None), pod("p2", "n1", owners=None)]
    assert run(RemoveDuplicates, {}, bare) == []
    assert invalid(RemoveDuplicates, {"excludeOwnerKinds": "ReplicaSet"}).field == "excludeOwnerKinds"


def test_remove_duplicates_stops_at_the_node_limit() -> None:
    objs = [node("n1"), node("n2"), node("n3")] + [pod(f"p{i}", "n1") for i in range(6)]
    assert len(run(RemoveDuplicates, {}, objs)) == 4
    assert len(run(RemoveDuplicates, {}, objs, FakeEvictor(max_per_node=1))) == 1


# ---------------------------------------------------------------- RemovePodsViolatingInterPodAntiAffinity


def anti(key: str, value: str, topology_key: str = "region") -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]},
         "topologyKey": topology_key}]}}


def test_anti_affinity_evicts_the_pod_carrying_the_violated_term() -> None:
    objs = [node("n1", {"region": "r"}), node("n2", {"region": "r"}), node("n3", {"region": "s"}),
            pod("p1", "n1", affinity=anti("foo", "bar")), pod("p2", "n2", labels={"foo": "bar"})]
    assert run(RemovePodsViolatingInterPodAntiAffinity, {}, objs) == ["default/p1"]  # same region
    objs[4] = pod("p2", "n3", labels={"foo": "bar"})
    assert run(RemovePodsViolatingInterPodAntiAffinity, {}, objs) == []  # other region


def test_anti_affinity_evicted_pod_no_longer_counts() -> None:
    # p1 and p2 repel each other; the lower-priority one goes first and then p2 is fine.
    objs = [node("n1", {"region": "r"}),
            pod("p1", "n1", labels={"foo": "bar"}, affinity=anti("foo", "bar"), priority=10),
            pod("p2", "n1", labels={"foo": "bar"}, affinity=anti("foo", "bar"), priority=100)]
    assert run(RemovePodsViolatingInterPodAntiAffinity, {}, objs) == ["default/p1"]


def test_anti_affinity_label_selector_limits_candidates_and_partners() -> None:
    objs = [node("n1", {"region": "r"}), pod("p1", "n1", affinity=anti("foo", "bar"), labels={"app": "x"}),
            pod("p2", "n1", labels={"foo": "bar", "app": "x"})]
    assert run(RemovePodsViolatingInterPodAntiAffinity, {"labelSelector": {"matchLabels": {"app": "y"}}}, objs) == []
    assert run(RemovePodsViolatingInterPodAntiAffinity, {"labelSelector": {"matchLabels": {"app": "x"}}}, objs) \
        == ["default/p1"]
    # Upstream lists pods through the selector, so a partner outside it is not seen either.
    objs[2] = pod("p2", "n1", labels={"foo": "bar"})
    assert run(RemovePodsViolatingInterPodAntiAffinity, {"labelSelector": {"matchLabels": {"app": "x"}}}, objs) == []


# ---------------------------------------------------------------- RemovePodsViolatingNodeAffinity

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"
WANT = {"matchExpressions": [{"key": "desired", "operator": "In", "values": ["yes"]}]}


def test_node_affinity_required() -> None:
    required = {"nodeAffinity": {REQ: {"nodeSelectorTerms": [WANT]}}}
    objs = [node("n1"), node("n2", {"desired": "yes"}), pod("p1", "n1", affinity=required), pod("p2", "n1")]
    assert run(RemovePodsViolatingNodeAffinity, {"nodeAffinityType": [REQ]}, objs) == ["default/p1"]
    # No node where it could go: not evicted.
    objs[1] = node("n2", {"desired": "yes"}, unschedulable=True)
    assert run(RemovePodsViolatingNodeAffinity, {"nodeAffinityType": [REQ]}, objs) == []
    # Satisfied where it runs.
    objs = [node("n1", {"desired": "yes"}), node("n2"), pod("p1", "n1", affinity=required)]
    assert run(RemovePodsViolatingNodeAffinity, {"nodeAffinityType": [REQ]}, objs) == []


def test_node_affinity_preferred_needs_a_better_node() -> None:
    preferred = {"nodeAffinity": {PREF: [{"weight": 10, "preference": WANT}]}}
    objs = [node("n1"), node("n2", {"desired": "yes"}), pod("p1", "n1", affinity=preferred)]
    assert run(RemovePodsViolatingNodeAffinity, {"nodeAffinityType": [PREF]}, objs) == ["default/p1"]
    assert run(RemovePodsViolatingNodeAffinity, {"nodeAffinityType": [REQ]}, objs) == []
    objs[0] = node("n1", {"desired": "yes"})
    assert run(RemovePodsViolatingNodeAffinity, {"nodeAffinityType": [PREF]}, objs) == []


def test_node_affinity_type_validation() -> None:
    err = invalid(RemovePodsViolatingNodeAffinity, {})
    assert err.field == "nodeAffinityType" and "needs to be set" in err.message
    assert invalid(RemovePodsViolatingNodeAffinity, {"nodeAffinityType": []}).field == "nodeAffinityType"
    assert invalid(RemovePodsViolatingNodeAffinity, {"nodeAffinityType": [3]}).field == "nodeAffinityType[0]"
    # An unknown type passes validation and is skipped (upstream logs it), evicting nothing.
    required = {"nodeAffinity": {REQ: {"nodeSelectorTerms": [WANT]}}}
    objs = [node("n1"), node("n2", {"desired": "yes"}), pod("p1", "n1", affinity=required)]
    assert run(RemovePodsViolatingNodeAffinity, {"nodeAffinityType": ["requiredDuringSchedulingRequiredDuringExecution"]},
               objs) == []


# ---------------------------------------------------------------- RemovePodsViolatingNodeTaints


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


def test_node_taints_evicts_pods_not_tolerating_no_schedule() -> None:
    tol = [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}]
    objs = [node("n1", taints=[taint("dedicated", "db")]), pod("p1", "n1"), pod("p2", "n1", tolerations=tol)]
    assert run(RemovePodsViolatingNodeTaints, {}, objs) == ["default/p1"]


def test_node_taints_prefer_no_schedule_only_when_included() -> None:
    objs = [node("n1", taints=[taint("soft", "x", "PreferNoSchedule")]), pod("p1", "n1")]
    assert run(RemovePodsViolatingNodeTaints, {}, objs) == []
    assert run(RemovePodsViolatingNodeTaints, {"includePreferNoSchedule": True}, objs) == ["default/p1"]


def test_node_taints_excluded_and_included() -> None:
    objs = [node("n1", taints=[taint("a", "1")]), pod("p1", "n1")]
    assert run(RemovePodsViolatingNodeTaints, {"excludedTaints": ["a"]}, objs) == []
    assert run(RemovePodsViolatingNodeTaints, {"excludedTaints": ["a=1"]}, objs) == []
    assert run(RemovePodsViolatingNodeTaints, {"excludedTaints": ["a=2"]}, objs) == ["default/p1"]
    assert run(RemovePodsViolatingNodeTaints, {"includedTaints": ["b"]}, objs) == []
    assert run(RemovePodsViolatingNodeTaints, {"includedTaints": ["a=1"]}, objs) == ["default/p1"]
    err = invalid(RemovePodsViolatingNodeTaints, {"includedTaints": ["a"], "excludedTaints": ["b"]})
    assert "either includedTaints or excludedTaints" in err.message
    assert invalid(RemovePodsViolatingNodeTaints, {"includePreferNoSchedule": "yes"}).field == "includePreferNoSchedule"


def test_node_taints_total_limit_stops() -> None:
    objs = [node("n1", taints=[taint("a")]), node("n2", taints=[taint("a")]), pod("p1", "n1"), pod("p2", "n2")]
    assert run(RemovePodsViolatingNodeTaints, {}, objs, FakeEvictor(max_total=1)) == ["default/p1"]


# ---------------------------------------------------------------- RemovePodsHavingTooManyRestarts


def restarts(n: int, init: int = 0, waiting: str | None = None) -> dict[str, Any]:
    cs: dict[str, Any] = {"name": "c", "restartCount": n}
    if waiting:
        cs["state"] = {"waiting": {"reason": waiting}}
    return {"phase": "Running", "containerStatuses": [cs], "initContainerStatuses": [{"name": "i", "restartCount": init}]}


def test_too_many_restarts_threshold_and_init_containers() -> None:
    objs = [node("n1"), pod("p1", "n1", status=restarts(2)), pod("p2", "n1", status=restarts(1, init=5)),
            pod("p3", "n1", status=restarts(5))]
    args = {"podRestartThreshold": 3}
    assert run(RemovePodsHavingTooManyRestarts, args, objs) == ["default/p3"]
    # Most restarts first: p2 (6) before p3 (5), then p1 would follow (2 < 3, not counted).
    assert run(RemovePodsHavingTooManyRestarts, {**args, "includingInitContainers": True}, objs,
               FakeEvictor(max_per_node=1)) == ["default/p2"]


def test_too_many_restarts_states() -> None:
    objs = [node("n1"), pod("p1", "n1", status=restarts(5, waiting="CrashLoopBackOff")),
            pod("p2", "n1", status=restarts(5))]
    args = {"podRestartThreshold": 1, "states": ["CrashLoopBackOff"]}
    assert run(RemovePodsHavingTooManyRestarts, args, objs) == ["default/p1"]
    assert sorted(run(RemovePodsHavingTooManyRestarts, {"podRestartThreshold": 1, "states": ["Running"]}, objs)) \
        == ["default/p1", "default/p2"]


def test_too_many_restarts_validation() -> None:
    err = invalid(RemovePodsHavingTooManyRestarts, {})
    assert err.field == "podRestartThreshold" and "threshold" in err.message
    assert invalid(RemovePodsHavingTooManyRestarts, {"podRestartThreshold": 0}).field == "podRestartThreshold"
    assert invalid(RemovePodsHavingTooManyRestarts, {"podRestartThreshold": "3"}).field == "podRestartThreshold"
    assert invalid(RemovePodsHavingTooManyRestarts, {"podRestartThreshold": 2**31}).field == "podRestartThreshold"
    err = invalid(RemovePodsHavingTooManyRestarts, {"podRestartThreshold": 1, "states": ["Pending"]})
    assert err.field == "states[0]" and "CrashLoopBackOff Running" in err.message
    err = invalid(RemovePodsHavingTooManyRestarts, {"podRestartThreshold": 1, "includingInitContainers": 1})
    assert err.field == "includingInitContainers"


# ---------------------------------------------------------------- PodLifeTime


def test_pod_life_time_is_strict_and_evicts_oldest_first() -> None:
    objs = [node("n1"), node("n2"),
            pod("young", "n1", created=NOW - timedelta(seconds=600)),
            pod("old", "n2", created=NOW - timedelta(seconds=601)),
            pod("oldest", "n1", created=NOW - timedelta(days=3))]
    assert run(PodLifeTime, {"maxPodLifeTimeSeconds": 600}, objs) == ["default/oldest", "default/old"]
    assert run(PodLifeTime, {"maxPodLifeTimeSeconds": 600}, objs, FakeEvictor(max_total=1)) == ["default/oldest"]
    # A node limit only skips that pod; the next oldest elsewhere still goes.
    objs.append(pod("older", "n1", created=NOW - timedelta(days=2)))
    assert run(PodLifeTime, {"maxPodLifeTimeSeconds": 600}, objs, FakeEvictor(max_per_node=1)) \
        == ["default/oldest", "default/old"]


def test_pod_life_time_states_cover_every_phase_and_reason() -> None:
    objs = [node("n1"), pod("done", "n1", status={"phase": "Succeeded"}),
            pod("pending", "n1", status={"phase": "Pending"}),
            pod("evicted", "n1", status={"phase": "Failed", "reason": "Evicted"}),
            pod("oom", "n1", status={"phase": "Running", "containerStatuses": [
                {"name": "c", "state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}]})]
    assert run(PodLifeTime, {"states": ["Succeeded"]}, objs) == ["default/done"]
    assert run(PodLifeTime, {"states": ["Evicted"]}, objs) == ["default/evicted"]
    assert run(PodLifeTime, {"states": ["OOMKilled"]}, objs) == ["default/oom"]
    assert run(PodLifeTime, {"exitCodes": [137]}, objs) == ["default/oom"]
    assert run(PodLifeTime, {"states": ["Pending"], "maxPodLifeTimeSeconds": 10 * 86400}, objs) == []


def test_pod_life_time_owner_kinds_and_conditions() -> None:
    job = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "j", "controller": True}]
    cond = {"phase": "Running", "conditions": [{"type": "Ready", "status": "False",
                                                "lastTransitionTime": "2023-12-31T23:00:00Z"}]}
    objs = [node("n1"), pod("rs", "n1"), pod("job", "n1", owners=job, status=cond)]
    assert run(PodLifeTime, {"maxPodLifeTimeSeconds": 1, "ownerKinds": {"include": ["Job"]}}, objs) == ["default/job"]
    assert run(PodLifeTime, {"maxPodLifeTimeSeconds": 1, "ownerKinds": {"exclude": ["Job"]}}, objs) == ["default/rs"]
    ready_false = {"type": "Ready", "status": "False"}
    assert run(PodLifeTime, {"conditions": [ready_false]}, objs) == ["default/job"]
    assert run(PodLifeTime, {"conditions": [{**ready_false, "minTimeSinceLastTransitionSeconds": 3600}]}, objs) \
        == ["default/job"]
    assert run(PodLifeTime, {"conditions": [{**ready_false, "minTimeSinceLastTransitionSeconds": 3601}]}, objs) == []


def test_pod_life_time_validation() -> None:
    err = invalid(PodLifeTime, {})
    assert "at least one filtering criterion" in err.message
    assert invalid(PodLifeTime, {"maxPodLifeTimeSeconds": -1}).field == "maxPodLifeTimeSeconds"
    err = invalid(PodLifeTime, {"states": ["Sleeping"]})
    assert err.field == "states[0]" and "states must be one of" in err.message
    err = invalid(PodLifeTime, {"maxPodLifeTimeSeconds": 1, "ownerKinds": {"include": ["A"], "exclude": ["B"]}})
    assert err.field == "ownerKinds" and "ownerKinds" in err.message
    err = invalid(PodLifeTime, {"conditions": [{}]})
    assert err.field == "conditions[0]" and "at least one of type, status, reason" in err.message
    assert invalid(PodLifeTime, {"conditions": [{"typo": "Ready"}]}).field == "conditions[0].typo"
    assert invalid(PodLifeTime, {"conditions": [{"minTimeSinceLastTransitionSeconds": -5}]}).field \
        == "conditions[0].minTimeSinceLastTransitionSeconds"
    assert invalid(PodLifeTime, {"exitCodes": ["1"]}).field == "exitCodes[0]"


# ---------------------------------------------------------------- RemoveFailedPods


def failed(reason: str = "", exit_code: int | None = None, init: bool = False, pod_reason: str = "") -> dict[str, Any]:
    cs: dict[str, Any] = {"name": "c", "state": {"terminated": {"reason": reason, "exitCode": exit_code or 0}}}
    key = "initContainerStatuses" if init else "containerStatuses"
    out: dict[str, Any] = {"phase": "Failed", key: [cs]}
    if pod_reason:
        out["reason"] = pod_reason
    return out


def test_remove_failed_pods_only_failed_and_old_enough() -> None:
    objs = [node("n1"), pod("f", "n1", status=failed("Error", 1), created=NOW - timedelta(minutes=30)),
            pod("r", "n1")]
    assert run(RemoveFailedPods, {}, objs) == []  # default minimum age 3600s
    assert run(RemoveFailedPods, {"minPodLifetimeSeconds": 1800}, objs) == ["default/f"]
    assert run(RemoveFailedPods, {"minPodLifetimeSeconds": 1801}, objs) == []


def test_remove_failed_pods_reasons_exit_codes_and_owner_kinds() -> None:
    objs = [node("n1"), pod("a", "n1", status=failed("Error", 2)),
            pod("b", "n1", status=failed("", 3, init=True)),
            pod("c", "n1", status=failed(pod_reason="NodeAffinity"))]
    base = {"minPodLifetimeSeconds": 0}
    assert run(RemoveFailedPods, {**base, "reasons": ["Error"]}, objs) == ["default/a"]
    assert run(RemoveFailedPods, {**base, "reasons": ["NodeAffinity"]}, objs) == ["default/c"]
    assert run(RemoveFailedPods, {**base, "exitCodes": [3]}, objs) == []
    assert run(RemoveFailedPods, {**base, "exitCodes": [3], "includingInitContainers": True}, objs) == ["default/b"]
    assert run(RemoveFailedPods, {**base, "excludeOwnerKinds": ["ReplicaSet"]}, objs) == []


def test_remove_failed_pods_validation() -> None:
    assert RemoveFailedPods.default_args() == {"minPodLifetimeSeconds": 3600}
    assert RemoveFailedPods.Args.from_raw({}).min_pod_lifetime_seconds == 3600
    assert invalid(RemoveFailedPods, {"minPodLifetimeSeconds": -1}).field == "minPodLifetimeSeconds"
    assert invalid(RemoveFailedPods, {"minPodLifetimeSeconds": 1.5}).field == "minPodLifetimeSeconds"
    assert invalid(RemoveFailedPods, {"reasons": "Error"}).field == "reasons"
    assert invalid(RemoveFailedPods, {"exitCodes": [True]}).field == "exitCodes[0]"
    assert invalid(RemoveFailedPods, {"excludeOwnerKinds": [1]}).field == "excludeOwnerKinds[0]"


# ---------------------------------------------------------------- RemovePodsViolatingTopologySpreadConstraint


def spread(max_skew: int = 1, when: str = "DoNotSchedule", **extra: Any) -> list[dict[str, Any]]:
    return [{"maxSkew": max_skew, "topologyKey": ZONE, "whenUnsatisfiable": when,
             "labelSelector": {"matchLabels": {"foo": "bar"}}, **extra}]


def zones(*names: str) -> list[dict[str, Any]]:
    return [node(f"n{i}", {ZONE: z}) for i, z in enumerate(names)]


def test_topology_spread_moves_from_the_big_domain() -> None:
    # [3, 1]: one pod moves; only pod-0 carries the constraint, all four count.
    objs = zones("a", "b") + [pod("pod-0", "n0", labels={"foo": "bar"}, topologySpreadConstraints=spread())]
    objs += [pod(f"pod-{i}", "n0", labels={"foo": "bar"}) for i in (1, 2)] + [pod("pod-3", "n1", labels={"foo": "bar"})]
    assert len(run(RemovePodsViolatingTopologySpreadConstraint, {}, objs)) == 1
    # Balanced within maxSkew 2: nothing moves.
    objs[2] = pod("pod-0", "n0", labels={"foo": "bar"}, topologySpreadConstraints=spread(2))
    assert run(RemovePodsViolatingTopologySpreadConstraint, {}, objs) == []


def test_topology_spread_large_domains_arithmetic() -> None:
    # [0, 1, 100] with maxSkew 1: the two-pointer walk marks 66 pods.
    objs = zones("a", "b", "c") + [pod("pod-0", "n1", labels={"foo": "bar"}, topologySpreadConstraints=spread())]
    objs += [pod(f"pod-{i}", "n2", labels={"foo": "bar"}, topologySpreadConstraints=spread()) for i in range(1, 101)]
    objs = [o if o["kind"] == "Pod" else {**o, "status": {**o["status"], "allocatable": {"cpu": "100", "memory": "4Gi",
                                                                                           "pods": "200"}}}
            for o in objs]
    assert len(run(RemovePodsViolatingTopologySpreadConstraint, {}, objs)) == 66


def test_topology_spread_constraint_kinds_and_node_fit() -> None:
    objs = zones("a", "b") + [pod(f"pod-{i}", "n0", labels={"foo": "bar"},
                                  topologySpreadConstraints=spread(when="ScheduleAnyway")) for i in range(3)]
    assert run(RemovePodsViolatingTopologySpreadConstraint, {}, objs) == []
    assert len(run(RemovePodsViolatingTopologySpreadConstraint, {"constraints": ["ScheduleAnyway"]}, objs)) == 1
    # The below-average zone has no cpu left: the balancer does not mark unless told to ignore node fit.
    objs = [node("n0", {ZONE: "a"}), node("n1", {ZONE: "b"}, cpu="150m")]
    objs += [pod(f"pod-{i}", "n0", labels={"foo": "bar"}, topologySpreadConstraints=spread()) for i in range(3)]
    objs += [pod("filler", "n1", owners=None)]
    assert run(RemovePodsViolatingTopologySpreadConstraint, {}, objs) == []
    assert len(run(RemovePodsViolatingTopologySpreadConstraint, {"topologyBalanceNodeFit": False}, objs)) == 1


def test_topology_spread_node_inclusion_and_match_label_keys() -> None:
    # nodeAffinityPolicy Honor (default): nodes the pods' nodeSelector excludes form no domain.
    sel = {"os": "linux"}
    objs = [node("n0", {ZONE: "a", "os": "linux"}), node("n1", {ZONE: "b", "os": "windows"})]
    objs += [pod(f"pod-{i}", "n0", labels={"foo": "bar"}, nodeSelector=sel, topologySpreadConstraints=spread())
             for i in range(3)]
    assert run(RemovePodsViolatingTopologySpreadConstraint, {}, objs) == []
    ignore = spread(nodeAffinityPolicy="Ignore")
    objs[2:] = [pod(f"pod-{i}", "n0", labels={"foo": "bar"}, topologySpreadConstraints=ignore) for i in range(3)]
    assert len(run(RemovePodsViolatingTopologySpreadConstraint, {"topologyBalanceNodeFit": False}, objs)) == 1
    # matchLabelKeys narrows the selector to the carrier's own value of the key.
    keyed = spread(matchLabelKeys=["rev"])
    objs = zones("a", "b") + [pod(f"pod-{i}", "n0", labels={"foo": "bar", "rev": str(i % 2)},
                                  topologySpreadConstraints=keyed) for i in range(4)]
    assert len(run(RemovePodsViolatingTopologySpreadConstraint, {}, objs)) == 2  # two groups of [2, 0]: one each
    objs += [pod(f"pod-{i}", "n1", labels={"foo": "bar", "rev": "0"}) for i in (4, 5)]
    assert len(run(RemovePodsViolatingTopologySpreadConstraint, {}, objs)) == 1  # rev=0 is [2, 2] now


def test_topology_spread_validation_and_defaults() -> None:
    assert RemovePodsViolatingTopologySpreadConstraint.default_args() == {
        "constraints": ["DoNotSchedule"], "topologyBalanceNodeFit": True}
    p = RemovePodsViolatingTopologySpreadConstraint.Args.from_raw({"constraints": []})
    assert p.constraints == ("DoNotSchedule",) and p.topology_balance_node_fit
    err = invalid(RemovePodsViolatingTopologySpreadConstraint, {"constraints": ["Sometimes"]})
    assert err.field == "constraints[0]" and "is not one of" in err.message
    assert invalid(RemovePodsViolatingTopologySpreadConstraint, {"topologyBalanceNodeFit": "no"}).field \
        == "topologyBalanceNodeFit"


# ---------------------------------------------------------------- Go's sort.Slice


def test_go_sort_slice_sorts_and_permutes() -> None:
    rng = random.Random(7)
    for n in list(range(0, 30)) + [50, 51, 200, 1000]:
        data = [rng.randrange(max(1, n // 3)) for _ in range(n)]
        items = list(enumerate(data))
        go_sort_slice(items, lambda a, b: a[1] < b[1])
        assert [v for _, v in items] == sorted(data)
        assert sorted(i for i, _ in items) == list(range(n))
    desc = list(range(100, 0, -1))
    go_sort_slice(desc, lambda a, b: a < b)
    assert desc == list(range(1, 101))


def test_go_sort_slice_with_an_always_less_comparator_reverses_short_slices() -> None:
    # Insertion sort (<= 12 elements) moves each element before every "equal" one.
    items = list(range(10))
    go_sort_slice(items, lambda a, b: True)
    assert items == list(range(9, -1, -1))


def test_typed_args_name_the_field_from_the_policy_root() -> None:
    with pytest.raises(InputError) as e:
        RemovePodsViolatingNodeTaints.Args.from_raw({"includedTaints": ["a"], "excludedTaints": ["b"]},
                                                    "profiles[0].pluginConfig[1].args")
    assert e.value.field == "profiles[0].pluginConfig[1].args.includedTaints"
    assert e.value.message.startswith("RemovePodsViolatingNodeTaints args: either includedTaints or excludedTaints")
    assert RemoveFailedPods.Args.from_raw({"reasons": ["Error"]}, "args").reasons == ("Error",)
