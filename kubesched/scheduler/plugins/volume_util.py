"""Storage objects for the volume plugins: PersistentVolumes, StorageClasses, CSINodes, CSIDrivers.

A snapshot keeps these kinds as generic objects (ClusterState.others, raw dicts). The index here finds
them by name and is rebuilt after any change to a non-Pod, non-Node object. Also the small
component-helpers functions the volume plugins share (claim class, ephemeral claim names, not-found
messages as the API server words them).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

from kubesched.api.objects import PersistentVolumeClaim, Pod
from kubesched.cluster.events import Event
from kubesched.cluster.state import ClusterState

ANN_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_MIGRATED_PLUGINS = "storage.alpha.kubernetes.io/migrated-plugins"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


def pvc_not_found(name: str) -> str:
    return f'persistentvolumeclaim "{name}" not found'


def pv_not_found(name: str) -> str:
    return f'persistentvolume "{name}" not found'


def storage_class_not_found(name: str) -> str:
    return f'storageclass.storage.k8s.io "{name}" not found'


def _d(raw: Any, *path: str) -> dict[str, Any]:
    """raw[path...] as a dict ({} when absent or not an object)."""
    cur = raw
    for p in path:
        cur = cur.get(p) if isinstance(cur, dict) else None
    return cur if isinstance(cur, dict) else {}


def spec_of(raw: dict[str, Any]) -> dict[str, Any]:
    return _d(raw, "spec")


def labels_of(raw: dict[str, Any]) -> dict[str, str]:
    return {str(k): "" if v is None else str(v) for k, v in _d(raw, "metadata", "labels").items()}


def annotations_of(raw: dict[str, Any]) -> dict[str, str]:
    return {str(k): "" if v is None else str(v) for k, v in _d(raw, "metadata", "annotations").items()}


def name_of(raw: dict[str, Any]) -> str:
    return str(_d(raw, "metadata").get("name") or "")


def pvc_class(pvc: PersistentVolumeClaim) -> str:
    """GetPersistentVolumeClaimClass: the beta annotation first, then spec.storageClassName."""
    ann = pvc.meta.annotations.get(ANN_STORAGE_CLASS)
    if ann is not None:
        return ann
    return pvc.storage_class_name or ""


def pv_class(pv: dict[str, Any]) -> str:
    """GetPersistentVolumeClass: the beta annotation first, then spec.storageClassName."""
    ann = annotations_of(pv).get(ANN_STORAGE_CLASS)
    if ann is not None:
        return ann
    return str(spec_of(pv).get("storageClassName") or "")


def ephemeral_claim_name(pod: Pod, volume: dict[str, Any]) -> str:
    """ephemeral.VolumeClaimName: <pod name>-<volume name>."""
    return f"{pod.name}-{volume.get('name', '')}"


def ephemeral_not_for_pod(pod: Pod, pvc: PersistentVolumeClaim) -> str | None:
    """ephemeral.VolumeIsForPod: the claim must be controlled by the pod; the error otherwise."""
    for o in pvc.meta.owner_references:
        if o.controller and o.uid == pod.uid:
            return None
    return f"PVC {pvc.meta.namespace}/{pvc.meta.name} was not created for pod {pod.namespace}/{pod.name} (pod is not owner)"


def pod_claims(pod: Pod) -> list[tuple[str, bool, dict[str, Any]]]:
    """(claim name, is ephemeral, volume) for every volume backed by a PVC, in spec order."""
    out = []
    for v in pod.volumes:
        pvc = v.get("persistentVolumeClaim")
        if isinstance(pvc, dict):
            out.append((str(pvc.get("claimName") or ""), False, v))
        elif v.get("ephemeral") is not None:
            out.append((ephemeral_claim_name(pod, v), True, v))
    return out


@dataclass
class StorageIndex:
    """Storage objects by name; `dirty` after a change to any non-Pod, non-Node object."""

    pvs: dict[str, dict[str, Any]] = field(default_factory=dict)
    storage_classes: dict[str, dict[str, Any]] = field(default_factory=dict)
    csi_nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    csi_drivers: dict[str, dict[str, Any]] = field(default_factory=dict)
    csi_storage_capacities: list[dict[str, Any]] = field(default_factory=list)
    dirty: bool = True

    def rebuild(self, cluster: ClusterState) -> None:
        by_kind: dict[str, dict[str, dict[str, Any]]] = {
            "PersistentVolume": {}, "StorageClass": {}, "CSINode": {}, "CSIDriver": {}}
        capacities: list[dict[str, Any]] = []
        for obj in cluster.others.values():
            kind = getattr(obj, "kind", "")
            raw = getattr(obj, "raw", None)
            if kind == "CSIStorageCapacity" and isinstance(raw, dict):
                capacities.append(raw)
            target = by_kind.get(kind)
            if target is not None and isinstance(raw, dict):
                # These kinds are cluster-scoped: their name is the key, whatever namespace parsing added.
                target[name_of(raw)] = raw
        self.pvs = by_kind["PersistentVolume"]
        self.storage_classes = by_kind["StorageClass"]
        self.csi_nodes = by_kind["CSINode"]
        self.csi_drivers = by_kind["CSIDriver"]
        self.csi_storage_capacities = capacities
        self.dirty = False


_INDEXES: weakref.WeakKeyDictionary[ClusterState, StorageIndex] = weakref.WeakKeyDictionary()


def storage_index(cluster: ClusterState) -> StorageIndex:
    idx = _INDEXES.get(cluster)
    if idx is None:
        idx = StorageIndex()
        _INDEXES[cluster] = idx
        ref = weakref.ref(idx)

        def on_event(ev: Event) -> None:
            if ev.kind not in ("Pod", "Node"):
                target = ref()
                if target is not None:
                    target.dirty = True

        cluster.subscribe(on_event, index=True)
    if idx.dirty:
        idx.rebuild(cluster)
    return idx


def get_pvc(cluster: ClusterState, namespace: str, name: str) -> PersistentVolumeClaim | None:
    return cluster.pvcs.get(f"{namespace}/{name}")


def pod_uses_volumes(pod: Pod) -> bool:
    return bool(pod.volumes)
