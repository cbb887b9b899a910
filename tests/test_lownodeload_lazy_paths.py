"""LowNodeLoad's fast paths evict exactly what a straightforward per-pod LowNodeLoad evicts.

`Reference` below is LowNodeLoad written the plain way, close to koordinator's utilization_util.go: every
node's pods, prod pods, usage and prod usage worked out per pod when the usage is read, thresholds per
node, classification on the exact prod usage, both passes' budgets worked out up front, and
podFitsAnyNodeWithThreshold one destination at a time with the comparator sort (`pod_sort_less`).
The plugin instead makes prod usage only when needed (deciding from bounds when it can), shares
thresholds between nodes of one size, works NodeFit's requests out for the destinations it reaches, and
books on exact integer columns. On random small clusters (prod and batch pods, fractional, negative and
missing usage, pods reported without their node, stale readings, tainted and unschedulable nodes, prod
thresholds, deviation thresholds, node fit on and off, dry and real runs) both evict the same pods in the
same order, and NodeUsage's lazy answers equal the eager ones.
"""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import pytest

from kubesched.api import koordinator as koord
from kubesched.api.objects import Node, Pod, parse_node, parse_pod
from kubesched.api.snapshot import Snapshot
from kubesched.cluster.state import ClusterState
from kubesched.config.descheduler_policy import parse_descheduler_policy
from kubesched.descheduler import nodeutil
from kubesched.descheduler.descheduler import Descheduler
from kubesched.descheduler.plugins._gosort import go_sort_slice
from kubesched.descheduler.plugins.low_node_load import (
    MIN_PERCENTAGE,
    LowNodeLoad,
    NodeInfo,
    NodeThresholds,
    NodeUsage,
    Usage,
    _above,
    _Destinations,
    _normalize,
    _units_value,
    is_overutilized,
    is_underutilized,
    pod_sort_less,
    raw_allocatable_units,
    resource_threshold,
)
from kubesched.descheduler.registry import default_registry
from kubesched.metrics.base import Metrics, PodUsage, reference_time
from kubesched.metrics.base import NodeUsage as NodeReading
from kubesched.metrics.kubernetes_metrics import attach_nodes

NOW = datetime(2024, 1, 1, tzinfo=UTC)
ZERO = Fraction(0)


class Reference(LowNodeLoad):
    """LowNodeLoad computed per pod and per destination, the way upstream's code reads."""

    def node_usages(self, nodes: list[Node], resources: list[str], metrics: Metrics | None) -> dict[str, NodeUsage]:
        out: dict[str, NodeUsage] = {}
        if metrics is None:
            return out
        if not all(p.node for p in metrics.pods.values()):
            attach_nodes(metrics, {p.key: p.node_name for p in self.handle.cluster.pods.values() if p.node_name})
        ref = reference_time(self.handle.now, metrics)
        expiration = self.args.node_metric_expiration_seconds
        for node in nodes:
            pods = list(self.handle.cluster.pods_on(node.name))
            prod_pods = [p for p in pods if koord.priority_class(p) == koord.PRIORITY_PROD]
            nm = metrics.node(node.name)
            if nm is None:
                continue
            ts = metrics.node_timestamp(node.name)
            if ts is None or (expiration > 0 and ref - ts >= expiration):
                continue
            pod_metrics: dict[str, Usage] = {}
            for pu in metrics.pods.values():
                if pu.node == node.name:
                    pod_metrics[pu.key] = dict(pu.exact) if pu.exact else {k: Fraction(v) for k, v in pu.usage.items()}
            prod_keys = {p.key for p in prod_pods}
            if nm.system_exact is not None:
                system = dict(nm.system_exact)
            else:
                total = dict(nm.exact) if nm.exact else {k: Fraction(v) for k, v in nm.usage.items()}
                system = {r: max(ZERO, used - sum((m.get(r, ZERO) for m in pod_metrics.values()), ZERO))
                          for r, used in total.items()}
            usage: Usage = {}
            prod_usage: Usage = {}
            for r in resources:
                usage[r] = system.get(r, ZERO) + sum((m.get(r, ZERO) for m in pod_metrics.values()), ZERO)
                prod_usage[r] = sum((m.get(r, ZERO) for k, m in pod_metrics.items() if k in prod_keys), ZERO)
            usage["pods"] = Fraction(len(pods))
            prod_usage["pods"] = Fraction(len(prod_pods))
            out[node.name] = NodeUsage(node, pods, prod_pods, usage, prod_usage, pod_metrics,
                                       raw_allocatable_units(node))
        return out

    def node_thresholds(self, usages: dict[str, NodeUsage], low: dict[str, float], high: dict[str, float],
                        prod_low: dict[str, float], prod_high: dict[str, float], resources: list[str],
                        use_deviation: bool) -> dict[str, NodeThresholds]:
        avg: dict[str, float] = {}
        prod_avg: dict[str, float] = {}
        if use_deviation:
            for nu in usages.values():
                for usage, acc in ((nu.usage, avg), (nu.prod_usage, prod_avg)):
                    for r, used in usage.items():
                        cap = _units_value(r, nu.allocatable.get(r, ZERO))
                        if cap:
                            acc[r] = acc.get(r, 0.0) + float(_units_value(r, used)) / float(cap) * 100.0
            avg = {r: v / len(usages) for r, v in avg.items()}
            prod_avg = {r: v / len(usages) for r, v in prod_avg.items()}
        out = {}
        for name, nu in usages.items():
            t = NodeThresholds()
            alloc = nu.allocatable
            for r in resources:
                for lo, hi, a, tl, th in ((low, high, avg, t.low, t.high),
                                          (prod_low, prod_high, prod_avg, t.prod_low, t.prod_high)):
                    if not use_deviation:
                        tl[r] = resource_threshold(alloc, r, lo[r])
                        th[r] = resource_threshold(alloc, r, hi[r])
                    elif lo[r] == MIN_PERCENTAGE:
                        tl[r] = th[r] = alloc.get(r, ZERO)
                    else:
                        tl[r] = resource_threshold(alloc, r, _normalize(a.get(r, 0.0) - lo[r]))
                        th[r] = resource_threshold(alloc, r, _normalize(a.get(r, 0.0) + hi[r]))
            out[name] = t
        return out

    def classify(self, usages: dict[str, NodeUsage], thresholds: dict[str, NodeThresholds]
                 ) -> tuple[list[NodeInfo], list[NodeInfo], list[NodeInfo], list[NodeInfo], list[NodeInfo]]:
        low: list[NodeInfo] = []
        high: list[NodeInfo] = []
        prod_low: list[NodeInfo] = []
        prod_high: list[NodeInfo] = []
        both: list[NodeInfo] = []
        for name, nu in usages.items():
            t = thresholds[name]
            info = NodeInfo(nu, t)
            schedulable = not nu.node.unschedulable
            over_prod = bool(is_overutilized(nu.prod_usage, t.prod_high))
            prod_is_low = schedulable and is_underutilized(nu.prod_usage, t.prod_low)
            if schedulable and is_underutilized(nu.usage, t.low):
                (prod_high if over_prod else both if prod_is_low else low).append(info)
            elif is_overutilized(nu.usage, t.high):
                high.append(info)
            elif over_prod:
                prod_high.append(info)
            elif prod_is_low:
                prod_low.append(info)
        return low, high, prod_low, prod_high, both

    def evict_from_sources(self, sources: list[NodeInfo], destinations: list[NodeInfo], prod_sources: list[NodeInfo],
                           prod_destinations: list[NodeInfo], both: list[NodeInfo], usages: dict[str, NodeUsage],
                           thresholds: dict[str, NodeThresholds], weights: dict[str, int], resources: list[str],
                           reason: Any) -> None:
        def available(nodes: list[NodeInfo], prod: bool) -> tuple[Usage, list[Node]]:
            total = {r: ZERO for r in resources}
            for d in nodes:
                for r in resources:
                    total[r] += (d.thresholds.prod_high if prod else d.thresholds.high)[r]
                    total[r] -= (d.usage.prod_usage if prod else d.usage.usage)[r]
            return total, [d.usage.node for d in nodes]

        total, targets = available(destinations, False)
        prod_avail, prod_targets = available(prod_destinations, True)
        both_total, both_nodes = available(both, False)
        prod_both, prod_both_nodes = available(both, True)
        node_total = {r: total[r] + both_total[r] for r in resources}
        self.balance_pods(sources, targets + both_nodes, usages, thresholds, node_total, False, weights, resources,
                          reason)
        for r in resources:
            both_total[r] = min(both_total[r], node_total[r])
        prod_total = {r: prod_avail[r] + min(prod_both[r], both_total[r]) for r in resources}
        self.balance_pods(prod_sources, prod_targets + prod_both_nodes, usages, thresholds, prod_total, True, weights,
                          resources, reason)

    def balance_pods(self, sources: list[NodeInfo], targets: list[Node], usages: dict[str, NodeUsage],
                     thresholds: dict[str, NodeThresholds], available: Usage, prod: bool, weights: dict[str, int],
                     resources: list[str], reason: Any) -> None:
        if not targets:
            return
        for src in sources:
            removable = []
            for pod in src.usage.prod_pods if prod else src.usage.all_pods:
                if not self.pod_filter(pod):
                    continue
                if self.args.node_fit:
                    metric = src.usage.pod_metrics.get(pod.key)
                    if metric is None or not self.fits_any_with_threshold(pod, targets, usages, thresholds, prod,
                                                                          metric):
                        continue
                removable.append(pod)
            if removable:
                self.sort_pods(src, removable, weights, prod)
                self.evict_pods(removable, src, available, prod, resources, reason)

    def sort_pods(self, src: NodeInfo, pods: list[Pod], weights: dict[str, int], prod: bool) -> None:
        usage = src.usage.prod_usage if prod else src.usage.usage
        limits = src.thresholds.prod_high if prod else src.thresholds.high
        over = is_overutilized(usage, limits)
        exceeded = {r: used - limits[r] for r, used in over.items()}
        go_sort_slice(pods, pod_sort_less(src.usage.pod_metrics, exceeded, {r: weights.get(r, 0) for r in over}))


def _quantity(rng: random.Random, fractional: bool) -> str:
    if fractional and rng.random() < 0.3:
        return f"{rng.randrange(50, 2000)}500u"  # half millicores
    return f"{rng.randrange(0, 2500)}m"


def cluster_and_metrics(seed: int) -> tuple[list[dict[str, Any]], Metrics, dict[str, Any]]:
    """Objects of a random small cluster, a reading of its usage, and LowNodeLoad args."""
    rng = random.Random(seed)
    fractional = rng.random() < 0.5
    objs: list[dict[str, Any]] = []
    names = [f"n{i}" for i in range(rng.randrange(4, 11))]
    for name in names:
        alloc = {"cpu": rng.choice(("4", "8", "4500m")), "memory": rng.choice(("8Gi", "16Gi")),
                 "pods": rng.choice(("110", "8"))}
        meta: dict[str, Any] = {"name": name, "labels": {"kubernetes.io/hostname": name}}
        if rng.random() < 0.15:
            meta["annotations"] = {koord.ANNOTATION_RAW_ALLOCATABLE: '{"cpu": "6", "memory": "12Gi"}'}
        taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if rng.random() < 0.15 else []
        objs.append({"apiVersion": "v1", "kind": "Node", "metadata": meta,
                     "spec": {"taints": taints, "unschedulable": rng.random() < 0.1},
                     "status": {"allocatable": alloc, "capacity": alloc,
                                "conditions": [{"type": "Ready", "status": "True"}]}})
    nodes_usage: dict[str, NodeReading] = {}
    pods_usage: dict[str, PodUsage] = {}
    stamp = NOW.timestamp()
    k = 0
    for name in names:
        hot = rng.random() < 0.4
        for _ in range(rng.randrange(0, 14 if hot else 6)):
            k += 1
            pod_name = f"p{k}"
            labels: dict[str, str] = {"app": f"a{k % 5}"}
            if rng.random() < 0.4:
                labels[koord.LABEL_PRIORITY_CLASS] = rng.choice(("koord-prod", "koord-batch", "koord-mid"))
            spec: dict[str, Any] = {"nodeName": name, "containers": [{"name": "c", "resources": {
                "requests": {"cpu": rng.choice(("100m", "500m", "1", "2", "3")),
                             "memory": rng.choice(("128Mi", "1Gi", "6Gi"))}}}]}
            if rng.random() < 0.3:
                spec["priority"] = rng.choice((9500, 5500, 0, 100))
            if rng.random() < 0.2:
                limits = dict(spec["containers"][0]["resources"]["requests"])
                spec["containers"][0]["resources"]["limits"] = limits  # Guaranteed: LSR, prod by default
            if rng.random() < 0.1:
                spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
            objs.append({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": pod_name, "namespace": "default", "labels": labels,
                                      "creationTimestamp": f"2023-12-31T0{rng.randrange(3)}:00:00Z",
                                      "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                           "name": "rs", "uid": "rs", "controller": True}]},
                         "spec": spec, "status": {"phase": "Running"}})
            if rng.random() < 0.9:
                cpu = Fraction(rng.randrange(0, 3000 if hot else 800)) + (Fraction(1, 2) if fractional and
                                                                         rng.random() < 0.3 else 0)
                if rng.random() < 0.1:
                    cpu = -cpu  # a negative reading: no bounds, the exact prod usage decides
                mem = Fraction(rng.randrange(1, 2048) * 2**20)
                exact = {"cpu": cpu, "memory": mem}
                reported_on = "" if rng.random() < 0.1 else name  # metrics.k8s.io style: no node reported
                pods_usage[f"default/{pod_name}"] = PodUsage(
                    key=f"default/{pod_name}", usage={"cpu": int(cpu), "memory": int(mem)}, exact=exact,
                    node=reported_on, timestamp=stamp)
        if rng.random() < 0.2:  # a pod the cluster does not have, reported on the node
            k += 1
            pods_usage[f"default/gone{k}"] = PodUsage(key=f"default/gone{k}", usage={"cpu": 300, "memory": 2**20},
                                                      exact={"cpu": Fraction(300), "memory": Fraction(2**20)},
                                                      node=name, timestamp=stamp)
        if rng.random() < 0.9:
            system = {"cpu": Fraction(rng.randrange(0, 800)), "memory": Fraction(rng.randrange(0, 2**31))}
            stale = rng.random() < 0.1
            nodes_usage[name] = NodeReading(name=name, usage={r: int(v) for r, v in system.items()},
                                            exact=dict(system), system_usage={r: int(v) for r, v in system.items()},
                                            system_exact=dict(system), timestamp=stamp - (600 if stale else 0))
    metrics = Metrics("koordinator", nodes_usage, pods_usage, timestamp=stamp)
    low, high = rng.randrange(10, 50), rng.randrange(50, 95)
    args: dict[str, Any] = {"lowThresholds": {"cpu": low, "memory": low}, "highThresholds": {"cpu": high, "memory": high},
                            "anomalyCondition": {"consecutiveAbnormalities": 1}, "nodeFit": rng.random() < 0.8}
    if rng.random() < 0.2:
        args["lowThresholds"]["pods"] = 5
        args["highThresholds"]["pods"] = 10
    if rng.random() < 0.5:
        plow = rng.randrange(5, 40)
        args["prodLowThresholds"] = {"cpu": plow, "memory": plow}
        args["prodHighThresholds"] = {"cpu": min(high, plow + rng.randrange(5, 40)), "memory": min(high, plow + 20)}
    if rng.random() < 0.25:
        args["useDeviationThresholds"] = True
        args["lowThresholds"] = {"cpu": 10, "memory": 10}
        args["highThresholds"] = {"cpu": 10, "memory": 20}
        if "prodLowThresholds" in args:
            args["prodLowThresholds"] = {"cpu": 5, "memory": 5}
            args["prodHighThresholds"] = {"cpu": 5, "memory": 10}
    return objs, metrics, args


def _copy(metrics: Metrics) -> Metrics:
    return Metrics(metrics.source, {n: NodeReading(name=u.name, usage=dict(u.usage), exact=dict(u.exact),
                                                   system_usage=u.system_usage, system_exact=u.system_exact,
                                                   timestamp=u.timestamp) for n, u in (metrics.nodes or {}).items()},
                   {k: PodUsage(key=p.key, usage=dict(p.usage), exact=dict(p.exact), node=p.node, timestamp=p.timestamp)
                    for k, p in metrics.pods.items()}, timestamp=metrics.timestamp)


def snapshot(objs: list[dict[str, Any]]) -> Snapshot:
    snap = Snapshot()
    for o in objs:
        if o["kind"] == "Node":
            snap.nodes.append(parse_node(o))
        else:
            snap.pods.append(parse_pod(o))
    return snap


def run(objs: list[dict[str, Any]], metrics: Metrics, args: dict[str, Any], reference: bool,
        dry_run: bool) -> list[str]:
    cluster = ClusterState.from_snapshot(snapshot(objs))
    policy = parse_descheduler_policy({
        "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
        "profiles": [{"name": "p", "pluginConfig": [{"name": "DefaultEvictor", "args": {}},
                                                    {"name": "LowNodeLoad", "args": args}],
                      "plugins": {"balance": {"enabled": ["LowNodeLoad"]}}}]}, "<test>", default_registry())
    d = Descheduler(cluster, policy, now=NOW, dry_run=dry_run, min_ready_nodes=0)
    if reference:
        d.profiles[0].plugins["LowNodeLoad"].__class__ = Reference
    result = d.run_cycle(usage=_copy(metrics))
    assert not result.errors
    return [f"{r.plugin} {r.pod.key} {r.reason}" for r in result.evictions]


@pytest.mark.parametrize("seed", range(60))
def test_low_node_load_evicts_what_the_per_pod_reference_evicts(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Small blocks and chunks: the walks over the destinations go through their block and chunk steps.
    monkeypatch.setattr(nodeutil.NodeFitColumns, "BLOCK", 1 + seed % 3)
    monkeypatch.setattr(_Destinations, "CHUNK", 1 + seed % 4)
    objs, metrics, args = cluster_and_metrics(seed)
    dry_run = seed % 3 != 0
    expected = run(objs, metrics, args, reference=True, dry_run=dry_run)
    assert run(objs, metrics, args, reference=False, dry_run=dry_run) == expected


def test_the_random_clusters_evict_in_both_passes() -> None:
    """The clusters above exercise both passes (not a vacuous comparison)."""
    node_pass = prod_pass = 0
    for seed in range(60):
        objs, metrics, args = cluster_and_metrics(seed)
        for line in run(objs, metrics, args, reference=True, dry_run=True):
            if "prod " in line:
                prod_pass += 1
            else:
                node_pass += 1
    assert node_pass > 20 and prod_pass > 0


def check_lazy_node_usage(seed: int) -> tuple[int, int]:
    """NodeUsage's lazy answers against the eager reference on one random cluster; how many prod questions
    the bounds decided and how many the exact prod usage did."""
    objs, metrics, _ = cluster_and_metrics(seed)
    cluster = ClusterState.from_snapshot(snapshot(objs))
    policy = parse_descheduler_policy({
        "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
        "profiles": [{"name": "p", "pluginConfig": [{"name": "LowNodeLoad", "args": {}}],
                      "plugins": {"balance": {"enabled": ["LowNodeLoad"]}}}]}, "<test>", default_registry())
    d = Descheduler(cluster, policy, now=NOW, min_ready_nodes=0)
    plugin = d.profiles[0].plugins["LowNodeLoad"]
    assert isinstance(plugin, LowNodeLoad)
    resources = ["cpu", "memory", "pods"] if seed % 2 else ["cpu", "memory"]
    nodes = list(cluster.nodes.values())
    lazy = plugin.node_usages(nodes, resources, _copy(metrics))
    reference = Reference.node_usages(plugin, nodes, resources, _copy(metrics))
    assert lazy.keys() == reference.keys()
    by_bounds = exact = 0
    for name, eager in reference.items():
        # Every combination of limits around the node's own numbers: just under, at and over the prod usage, at
        # and under the sum over every reported pod (the bound), and far above everything.
        total = {r: sum((m.get(r, ZERO) for m in eager.pod_metrics.values()), ZERO) for r in resources}
        total["pods"] = Fraction(len(eager.all_pods))
        choices = [sorted({eager.prod_usage[r] - 1, eager.prod_usage[r], eager.prod_usage[r] + 1, total[r] - 1,
                           total[r], Fraction(2**40)}) for r in resources]
        for values in itertools.product(*choices):
            limits = dict(zip(resources, values, strict=True))
            fresh = plugin.node_usages([cluster.nodes[name]], resources, _copy(metrics))[name]
            assert fresh.prod_over(limits) == bool(is_overutilized(eager.prod_usage, limits))
            fresh = plugin.node_usages([cluster.nodes[name]], resources, _copy(metrics))[name]
            assert fresh.prod_under(limits) == is_underutilized(eager.prod_usage, limits)
            if fresh._prod_usage is None:
                by_bounds += 1
            else:
                exact += 1
        got = lazy[name]
        assert got.usage == eager.usage
        assert got.prod_usage == eager.prod_usage
        assert got.prod_pods == eager.prod_pods and got.all_pods == eager.all_pods
        assert got.pod_metrics == eager.pod_metrics
        assert got.allocatable == eager.allocatable
    return by_bounds, exact


@pytest.mark.parametrize("seed", range(30))
def test_lazy_node_usage_answers_like_the_eager_one(seed: int) -> None:
    check_lazy_node_usage(seed)


def test_the_bounds_decide_some_prod_questions_and_the_exact_usage_others() -> None:
    counts = [check_lazy_node_usage(seed) for seed in range(30)]
    assert sum(b for b, _ in counts) > 100 and sum(e for _, e in counts) > 100


def test_above_is_fraction_comparison() -> None:
    rng = random.Random(7)
    values = [Fraction(rng.randrange(-5, 6), rng.choice((1, 1, 2, 3))) for _ in range(40)] + [Fraction(2**70)]
    for a in values:
        for b in values:
            assert _above(a, b) == (a > b)
