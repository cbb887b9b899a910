"""VolumeRestrictions: disk conflicts between pods on a node, and ReadWriteOncePod claims in use.

Filter rejects a node (Unschedulable) where an existing pod mounts the same GCE PD (unless both are
read-only), AWS EBS volume, Ceph RBD image (overlapping monitors, same pool and image, unless both
read-only) or iSCSI IQN (unless both read-only). PreFilter looks up the pod's claims (a missing one is
UnschedulableAndUnresolvable) and counts scheduled pods that already use its ReadWriteOncePod claims;
any such use makes every node Unschedulable (preemption may free the claim: AddPod/RemovePod keep the
count right). Pods without such volumes are skipped at PreFilter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kubesched.api.objects import Pod
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.config.plugin_args import no_args
from kubesched.scheduler.framework import (
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    FilterPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    Status,
    skip,
    unresolvable,
)
from kubesched.scheduler.plugins.volume_util import get_pvc, pvc_not_found

PRE_FILTER_KEY = "PreFilterVolumeRestrictions"
ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_RWOP_CONFLICT = "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
_DISK_KINDS = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")


def _src(volume: dict[str, Any], kind: str) -> dict[str, Any] | None:
    v = volume.get(kind)
    return v if isinstance(v, dict) else None


def needs_restrictions_check(volume: dict[str, Any]) -> bool:
    return any(_src(volume, k) is not None for k in _DISK_KINDS)


def is_volume_conflict(volume: dict[str, Any], existing_pod: Pod) -> bool:
    """isVolumeConflict: does `volume` clash with any volume of `existing_pod`?"""
    for ev in existing_pod.volumes:
        a, b = _src(volume, "gcePersistentDisk"), _src(ev, "gcePersistentDisk")
        if a is not None and b is not None:
            if a.get("pdName", "") == b.get("pdName", "") and not (a.get("readOnly") and b.get("readOnly")):
                return True
        a, b = _src(volume, "awsElasticBlockStore"), _src(ev, "awsElasticBlockStore")
        if a is not None and b is not None and a.get("volumeID", "") == b.get("volumeID", ""):
            return True
        a, b = _src(volume, "iscsi"), _src(ev, "iscsi")
        if a is not None and b is not None:
            if a.get("iqn", "") == b.get("iqn", "") and not (a.get("readOnly") and b.get("readOnly")):
                return True
        a, b = _src(volume, "rbd"), _src(ev, "rbd")
        if a is not None and b is not None:
            mons = set(a.get("monitors") or [])
            if (mons & set(b.get("monitors") or []) and a.get("pool", "") == b.get("pool", "")
                    and a.get("image", "") == b.get("image", "") and not (a.get("readOnly") and b.get("readOnly"))):
                return True
    return False


def satisfy_volume_conflicts(pod: Pod, node_info: NodeInfo) -> bool:
    for v in pod.volumes:
        if not needs_restrictions_check(v):
            continue
        for ep in node_info.pods.values():
            if is_volume_conflict(v, ep):
                return False
    return True


def _rwop_refs(pod: Pod, claims: frozenset[str]) -> int:
    """How many of `pod`'s PVC volumes name one of the ReadWriteOncePod `claims` (same namespace assumed)."""
    n = 0
    for v in pod.volumes:
        pvc = v.get("persistentVolumeClaim")
        if isinstance(pvc, dict) and pvc.get("claimName") in claims:
            n += 1
    return n


@dataclass
class _State:
    rwop_claims: frozenset[str]
    conflicting_pvc_ref_count: int

    def clone(self) -> _State:
        return _State(self.rwop_claims, self.conflicting_pvc_ref_count)


class _Extensions(PreFilterExtensions):
    def add_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_add: Pod, node_info: NodeInfo) -> Status:
        s = state.read(PRE_FILTER_KEY)
        if s is not None:
            s.conflicting_pvc_ref_count += _rwop_refs(pod_to_add, s.rwop_claims)
        return SUCCESS

    def remove_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_remove: Pod, node_info: NodeInfo) -> Status:
        s = state.read(PRE_FILTER_KEY)
        if s is not None:
            s.conflicting_pvc_ref_count -= _rwop_refs(pod_to_remove, s.rwop_claims)
        return SUCCESS


class VolumeRestrictions(PreFilterPlugin, FilterPlugin):
    name = "VolumeRestrictions"
    Args = no_args("VolumeRestrictions")

    def __init__(self, args: Any, handle: Any) -> None:
        super().__init__(args, handle)
        self._ext = _Extensions()

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", ("delete",)), ClusterEvent("Node", ("add", "update")),
                ClusterEvent("PersistentVolumeClaim", ("add",))]

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> tuple[PreFilterResult | None, Status]:
        if not pod.volumes:
            return None, skip()
        needs_check = any(needs_restrictions_check(v) for v in pod.volumes)
        rwop: set[str] = set()
        for v in pod.volumes:
            ref = v.get("persistentVolumeClaim")
            if not isinstance(ref, dict):
                continue
            name = str(ref.get("claimName") or "")
            pvc = get_pvc(cluster, pod.namespace, name)
            if pvc is None:
                return None, unresolvable(pvc_not_found(name))
            if "ReadWriteOncePod" in pvc.access_modes:
                rwop.add(pvc.meta.name)
        conflicts = 0
        if rwop:
            # StorageInfos().IsPVCUsedByPods: claims referenced by pods assigned to nodes.
            used: set[str] = set()
            for info in cluster.node_infos:
                for p in info.pods.values():
                    if p.namespace != pod.namespace:
                        continue
                    for v in p.volumes:
                        ref = v.get("persistentVolumeClaim")
                        if isinstance(ref, dict):
                            used.add(str(ref.get("claimName") or ""))
            conflicts = sum(1 for c in rwop if c in used)
        if not needs_check and conflicts == 0:
            return None, skip()
        state.write(PRE_FILTER_KEY, _State(frozenset(rwop), conflicts))
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self._ext

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        if not satisfy_volume_conflicts(pod, node_info):
            return Status(Code.UNSCHEDULABLE, [ERR_REASON_DISK_CONFLICT])
        s = state.read(PRE_FILTER_KEY)
        if s is not None and s.conflicting_pvc_ref_count > 0:
            return Status(Code.UNSCHEDULABLE, [ERR_REASON_RWOP_CONFLICT])
        return SUCCESS

    def filter_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray:
        s = state.read(PRE_FILTER_KEY)
        if s is not None and s.conflicting_pvc_ref_count > 0:
            return np.zeros(len(rows), dtype=bool)
        mask = np.ones(len(rows), dtype=bool)
        if not any(needs_restrictions_check(v) for v in pod.volumes):
            return mask
        infos = cluster.node_infos
        for i, r in enumerate(rows):
            if infos[r].pods and not satisfy_volume_conflicts(pod, infos[r]):
                mask[i] = False
        return mask
