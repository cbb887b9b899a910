"""VolumeZone: a pod's bound PersistentVolumes must be in the node's zone/region.

PreFilter collects the zone and region labels (beta and GA keys; "__" separates several zones) of the
PVs bound to the pod's claims; unbound WaitForFirstConsumer claims are left to VolumeBinding. A node
without any topology label fits (single-zone clusters); otherwise every collected label must match the
node's label of the same key (a beta PV key also matches the node's GA key). Pods without claims, or
whose PVs carry no topology labels, are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kubesched.api.objects import Pod
from kubesched.cluster.state import (
    REGION_LABEL,
    REGION_LABEL_BETA,
    ZONE_LABEL,
    ZONE_LABEL_BETA,
    ClusterState,
    NodeInfo,
)
from kubesched.config.plugin_args import no_args
from kubesched.scheduler.framework import (
    SUCCESS,
    ClusterEvent,
    CycleState,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    ShapeCache,
    Status,
    all_pass,
    skip,
    unresolvable,
)
from kubesched.scheduler.plugins.helper import node_static_filter
from kubesched.scheduler.plugins.volume_util import (
    WAIT_FOR_FIRST_CONSUMER,
    get_pvc,
    labels_of,
    pv_not_found,
    pvc_class,
    pvc_not_found,
    storage_class_not_found,
    storage_index,
)

PRE_FILTER_KEY = "PreFilterVolumeZone"
ERR_REASON_CONFLICT = "node(s) had no available volume zone"
TOPOLOGY_LABELS = (ZONE_LABEL_BETA, REGION_LABEL_BETA, ZONE_LABEL, REGION_LABEL)
_TO_GA = {REGION_LABEL_BETA: REGION_LABEL, ZONE_LABEL_BETA: ZONE_LABEL}
MULTI_ZONE_DELIMITER = "__"


@dataclass(frozen=True)
class PVTopology:
    pv_name: str
    key: str
    values: frozenset[str]


def label_zones_to_set(value: str) -> frozenset[str] | None:
    """volumehelpers.LabelZonesToSet: "__"-separated zones; None when one is empty."""
    out = set()
    for z in value.split(MULTI_ZONE_DELIMITER):
        z = z.strip()
        if not z:
            return None
        out.add(z)
    return frozenset(out)


def pv_topologies(cluster: ClusterState, pod: Pod) -> tuple[list[PVTopology], Status]:
    """getPVbyPod: the topology labels of the PVs bound to the pod's claims, or a rejection."""
    out: list[PVTopology] = []
    idx = None
    for v in pod.volumes:
        ref = v.get("persistentVolumeClaim")
        if not isinstance(ref, dict):
            continue
        name = str(ref.get("claimName") or "")
        if not name:
            return [], unresolvable("PersistentVolumeClaim had no name")
        pvc = get_pvc(cluster, pod.namespace, name)
        if pvc is None:
            return [], unresolvable(pvc_not_found(name))
        idx = idx or storage_index(cluster)
        pv_name = pvc.volume_name
        if not pv_name:
            sc_name = pvc_class(pvc)
            if not sc_name:
                return [], unresolvable("PersistentVolumeClaim had no pv name and storageClass name")
            sc = idx.storage_classes.get(sc_name)
            if sc is None:
                return [], unresolvable(storage_class_not_found(sc_name))
            mode = sc.get("volumeBindingMode")
            if mode is None:
                return [], unresolvable(f'VolumeBindingMode not set for StorageClass "{sc_name}"')
            if mode == WAIT_FOR_FIRST_CONSUMER:
                continue  # not bound yet: VolumeBinding decides
            return [], unresolvable("PersistentVolume had no name")
        pv = idx.pvs.get(pv_name)
        if pv is None:
            return [], unresolvable(pv_not_found(pv_name))
        labels = labels_of(pv)
        for key in TOPOLOGY_LABELS:
            value = labels.get(key)
            if value is None:
                continue
            zones = label_zones_to_set(value)
            if zones is not None:  # an unparsable label is ignored, as upstream logs and skips it
                out.append(PVTopology(pv_name, key, zones))
    return out, SUCCESS


def topologies_fit(topologies: list[PVTopology], node_labels: dict[str, str]) -> bool:
    if not any(k in node_labels for k in TOPOLOGY_LABELS):
        return True  # a node without topology labels: single-zone cluster
    for t in topologies:
        v = node_labels.get(t.key)
        if v is None:
            v = node_labels.get(_TO_GA.get(t.key, t.key))
        if v is None or v not in t.values:
            return False
    return True


class VolumeZone(PreFilterPlugin, FilterPlugin):
    name = "VolumeZone"
    Args = no_args("VolumeZone")

    def __init__(self, args: Any, handle: Any) -> None:
        super().__init__(args, handle)
        self._masks = ShapeCache(limit=256)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("StorageClass", ("add",)), ClusterEvent("Node", ("add", "update")),
                ClusterEvent("PersistentVolumeClaim", ("add", "update")),
                ClusterEvent("PersistentVolume", ("add", "update"))]

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> tuple[PreFilterResult | None, Status]:
        if not pod.volumes:
            return None, skip()
        topologies, st = pv_topologies(cluster, pod)
        if not st.is_success:
            return None, st
        if not topologies:
            return None, skip()
        state.write(PRE_FILTER_KEY, topologies)
        return None, SUCCESS

    def _topologies(self, state: CycleState, pod: Pod, cluster: ClusterState) -> tuple[list[PVTopology], Status]:
        t = state.read(PRE_FILTER_KEY)
        return (t, Status()) if t is not None else pv_topologies(cluster, pod)

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        if not pod.volumes:
            return SUCCESS
        topologies, st = self._topologies(state, pod, self.handle.cluster)
        if not st.is_success:
            return st
        if not topologies_fit(topologies, node_info.node.labels):
            return unresolvable(ERR_REASON_CONFLICT)
        return SUCCESS

    def filter_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray:
        if not pod.volumes:
            return all_pass(len(rows))
        topologies, st = self._topologies(state, pod, cluster)
        if not st.is_success:
            return np.zeros(len(rows), dtype=bool)
        # Whether a node fits reads only its labels: one mask per set of PV topologies, per changed node.
        return node_static_filter(self._masks, cluster, ("fit", tuple(topologies)),
                                  lambda info: topologies_fit(topologies, info.node.labels), rows)
