"""The descheduler's fast paths agree with the plain ones: DefaultEvictor's inlined Filter against its reason
list, over pods with every kind of protection and several evictor configurations."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

import pytest

from kubesched.api.objects import parse_node, parse_pod
from kubesched.api.snapshot import Snapshot
from kubesched.cluster.state import ClusterState
from kubesched.descheduler.framework import Handle
from kubesched.descheduler.plugins.default_evictor import DefaultEvictor


def _pod(i: int, *, owner: str | None, priority: int | None, volume: str | None, annotation: str | None,
         phase: str, terminating: bool, labels: dict[str, str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"p{i}", "namespace": "default", "labels": labels}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": f"o-{owner}", "uid": owner,
                                    "controller": True}]
    if annotation is not None:
        key, _, value = annotation.partition("=")
        meta["annotations"] = {key: value}
    if terminating:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    spec: dict[str, Any] = {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}
    if priority is not None:
        spec["priority"] = priority
    if volume is not None:
        spec["volumes"] = [{"name": "v", volume: {"claimName": "c"} if volume == "persistentVolumeClaim" else {}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def _pods() -> list[dict[str, Any]]:
    out = []
    combos = itertools.product(
        (None, "ReplicaSet", "DaemonSet"), (None, 0, 1000, 2_000_000_000),
        (None, "emptyDir", "hostPath", "persistentVolumeClaim"),
        (None, "descheduler.alpha.kubernetes.io/evict=", "descheduler.alpha.kubernetes.io/prefer-no-eviction=",
         "kubernetes.io/config.mirror=x", "kubernetes.io/config.source=file", "kubernetes.io/config.source=api"),
        ("Running", "Failed"), (False, True), ({"app": "a"}, {}))
    for i, (owner, prio, vol, ann, phase, term, labels) in enumerate(combos):
        out.append(_pod(i, owner=owner, priority=prio, volume=vol, annotation=ann, phase=phase, terminating=term,
                        labels=labels))
    return out


CONFIGS: list[dict[str, Any]] = [
    {},
    {"evictSystemCriticalPods": True, "evictLocalStoragePods": True, "evictDaemonSetPods": True},
    {"evictFailedBarePods": True, "ignorePvcPods": True},
    {"priorityThreshold": {"value": 500}},
    {"priorityThreshold": {"value": -5}, "evictDaemonSetPods": True},
    {"noEvictionPolicy": "Mandatory", "labelSelector": {"matchLabels": {"app": "a"}}},
    {"podProtections": {"defaultDisabled": ["DaemonSetPods", "FailedBarePods"],
                        "extraEnabled": ["PodsWithPVC", "PodsWithoutPDB"]}},
    {"podProtections": {"defaultDisabled": ["PodsWithLocalStorage", "SystemCriticalPods"]}, "minReplicas": 2},
]


@pytest.mark.parametrize("args", CONFIGS)
def test_inlined_filter_agrees_with_the_reasons(args: dict[str, Any]) -> None:
    snap = Snapshot()
    snap.nodes.append(parse_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                                  "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10000"}}}))
    snap.pods.extend(parse_pod(p) for p in _pods())
    cluster = ClusterState.from_snapshot(snap)
    handle = Handle(cluster=cluster, evictor=None, now=datetime(2024, 6, 1, tzinfo=UTC))  # type: ignore[arg-type]
    ev = DefaultEvictor(DefaultEvictor.Args.from_raw(args), handle)
    allowed = 0
    for pod in cluster.pods.values():
        reasons = ev.filter_reasons(pod)
        assert ev.filter(pod) == (not reasons), (pod.key, reasons)
        allowed += not reasons
    assert 0 < allowed < len(cluster.pods)  # both answers occur
