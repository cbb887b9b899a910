"""NodeVolumeLimits (CSILimits): a node may attach at most its CSI drivers' allocatable count of volumes.

For each CSI driver, the unique volumes of the pods on the node plus the pod's new ones must not exceed
CSINode.spec.drivers[].allocatable.count (or a node `attachable-volumes-*` allocatable). Volumes come
from the pod's claims: a bound PV's CSI source (or an in-tree source migrated to CSI), else the claim's
StorageClass provisioner; inline in-tree volumes count when their plugin is migrated. Pods without
claims or migratable inline volumes are skipped at PreFilter.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
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
    PreFilterPlugin,
    PreFilterResult,
    ShapeCache,
    Status,
    all_pass,
    is_all_pass,
    skip,
    unresolvable,
)
from kubesched.scheduler.plugins.helper import node_static_filter
from kubesched.scheduler.plugins.volume_util import (
    ANN_MIGRATED_PLUGINS,
    StorageIndex,
    annotations_of,
    ephemeral_not_for_pod,
    get_pvc,
    pvc_class,
    pvc_not_found,
    spec_of,
    storage_index,
)

ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"
CSI_ATTACH_LIMIT_PREFIX = "attachable-volumes-csi-"
ATTACHABLE_VOLUMES_PREFIX = "attachable-volumes-"
RESOURCE_NAME_LENGTH_LIMIT = 63
# Stands in for upstream's random prefix: volumes still to be provisioned get unique, made-up handles.
UNBOUND_VOLUME_PREFIX = "kubesched-unbound"


def _aws_volume_id(v: dict[str, Any]) -> str:
    vid = str(v.get("volumeID") or "")
    return vid.rsplit("/", 1)[-1] if vid.startswith("aws://") else vid


# In-tree source → (in-tree plugin name, CSI driver it migrates to, volume handle).
IN_TREE: dict[str, tuple[str, str, Callable[[dict[str, Any]], str]]] = {
    "gcePersistentDisk": ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io",
                          lambda v: f"projects/UNSPECIFIED/zones/UNSPECIFIED/disks/{v.get('pdName', '')}"),
    "awsElasticBlockStore": ("kubernetes.io/aws-ebs", "ebs.csi.aws.com", _aws_volume_id),
    "azureDisk": ("kubernetes.io/azure-disk", "disk.csi.azure.com", lambda v: str(v.get("diskURI") or "")),
    "azureFile": ("kubernetes.io/azure-file", "file.csi.azure.com",
                  lambda v: f"#{v.get('secretName', '')}#{v.get('shareName', '')}#"),
    "cinder": ("kubernetes.io/cinder", "cinder.csi.openstack.org", lambda v: str(v.get("volumeID") or "")),
    "vsphereVolume": ("kubernetes.io/vsphere-volume", "csi.vsphere.vmware.com",
                      lambda v: str(v.get("volumePath") or "")),
    "portworxVolume": ("kubernetes.io/portworx-volume", "pxd.portworx.com", lambda v: str(v.get("volumeID") or "")),
}
PROVISIONER_DRIVER = {plugin: driver for plugin, driver, _ in IN_TREE.values()}
# Migration is GA for these; Portworx still needs the CSINode to list it as migrated.
_ANNOTATION_REQUIRED = {"kubernetes.io/portworx-volume"}


def csi_attach_limit_key(driver: str) -> str:
    """volumeutil.GetCSIAttachLimitKey: long driver names are shortened with a SHA-1 suffix."""
    if len(CSI_ATTACH_LIMIT_PREFIX) + len(driver) >= RESOURCE_NAME_LENGTH_LIMIT:
        digest = hashlib.sha1(driver.encode()).hexdigest()[:16]
        return CSI_ATTACH_LIMIT_PREFIX + driver[:23] + digest
    return CSI_ATTACH_LIMIT_PREFIX + driver


def is_csi_migration_on(csi_node: dict[str, Any] | None, plugin: str) -> bool:
    if csi_node is None or not plugin or plugin not in PROVISIONER_DRIVER:
        return False
    if plugin not in _ANNOTATION_REQUIRED:
        return True
    migrated = annotations_of(csi_node).get(ANN_MIGRATED_PLUGINS, "")
    return plugin in migrated.split(",")


def _in_tree_source(spec: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    for key in IN_TREE:
        v = spec.get(key)
        if isinstance(v, dict):
            return key, v
    return None


def get_volume_limits(node_info: NodeInfo, csi_node: dict[str, Any] | None) -> dict[str, int]:
    limits = {k: v for k, v in node_info.allocatable.items() if k.startswith(ATTACHABLE_VOLUMES_PREFIX)}
    if csi_node is not None:
        for d in spec_of(csi_node).get("drivers") or []:
            if not isinstance(d, dict):
                continue
            count = (d.get("allocatable") or {}).get("count") if isinstance(d.get("allocatable"), dict) else None
            if isinstance(count, int) and not isinstance(count, bool):
                limits[csi_attach_limit_key(str(d.get("name") or ""))] = count
    return limits


def _no_attach_limits(info: NodeInfo) -> bool:
    """Whether the node's allocatable names no attachable-volumes-* limit (then, without a CSINode, it
    admits any volume)."""
    return not any(k.startswith(ATTACHABLE_VOLUMES_PREFIX) for k in info.allocatable)


class _LookupError(Exception):
    def __init__(self, message: str, not_found: bool) -> None:
        super().__init__(message)
        self.not_found = not_found


class NodeVolumeLimits(PreFilterPlugin, FilterPlugin):
    name = "NodeVolumeLimits"
    Args = no_args("NodeVolumeLimits")

    def __init__(self, args: Any, handle: Any) -> None:
        super().__init__(args, handle)
        self._limits = ShapeCache(limit=4)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("CSINode", ("add", "update")), ClusterEvent("Pod", ("delete",)),
                ClusterEvent("PersistentVolumeClaim", ("add",))]

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> tuple[PreFilterResult | None, Status]:
        for v in pod.volumes:
            if (isinstance(v.get("persistentVolumeClaim"), dict) or v.get("ephemeral") is not None
                    or _in_tree_source(v) is not None):
                return None, SUCCESS
        return None, skip()

    # ------------------------------------------------------------ counting

    def _driver_info(self, idx: StorageIndex, csi_node: dict[str, Any] | None, pvc: Any) -> tuple[str, str]:
        """getCSIDriverInfo: (driver, volume handle) of a claim, or ("", "") when it does not count."""
        pv_name = pvc.volume_name
        pv = idx.pvs.get(pv_name) if pv_name else None
        if pv is None:
            return self._driver_info_from_sc(idx, csi_node, pvc)
        spec = spec_of(pv)
        csi = spec.get("csi")
        if isinstance(csi, dict):
            return str(csi.get("driver") or ""), str(csi.get("volumeHandle") or "")
        src = _in_tree_source(spec)
        if src is None:
            return "", ""
        plugin, driver, handle = IN_TREE[src[0]]
        if not is_csi_migration_on(csi_node, plugin):
            return "", ""
        return driver, handle(src[1])

    def _driver_info_from_sc(self, idx: StorageIndex, csi_node: dict[str, Any] | None, pvc: Any) -> tuple[str, str]:
        sc_name = pvc_class(pvc)
        if not sc_name:
            return "", ""
        sc = idx.storage_classes.get(sc_name)
        if sc is None:
            return "", ""
        handle = f"{UNBOUND_VOLUME_PREFIX}-{pvc.meta.namespace}/{pvc.meta.name}"
        provisioner = str(sc.get("provisioner") or "")
        if provisioner in PROVISIONER_DRIVER:
            if not is_csi_migration_on(csi_node, provisioner):
                return "", ""
            return PROVISIONER_DRIVER[provisioner], handle
        return provisioner, handle

    def _attachable(self, cluster: ClusterState, idx: StorageIndex, pod: Pod, csi_node: dict[str, Any] | None,
                    new_pod: bool, result: dict[str, str]) -> None:
        """filterAttachableVolumes: unique volume name → limit key, for one pod."""
        for v in pod.volumes:
            claim: str | None = None
            ephemeral = False
            ref = v.get("persistentVolumeClaim")
            if isinstance(ref, dict):
                claim = str(ref.get("claimName") or "")
            elif v.get("ephemeral") is not None:
                claim, ephemeral = f"{pod.name}-{v.get('name', '')}", True
            if claim is None:
                src = _in_tree_source(v)
                if src is not None:
                    plugin, csi_driver, to_handle = IN_TREE[src[0]]
                    if is_csi_migration_on(csi_node, plugin):
                        result[f"{csi_driver}/{to_handle(src[1])}"] = csi_attach_limit_key(csi_driver)
                continue
            if not claim:
                raise _LookupError("PersistentVolumeClaim had no name", False)
            pvc = get_pvc(cluster, pod.namespace, claim)
            if pvc is None:
                if new_pod:
                    raise _LookupError(f"looking up PVC {pod.namespace}/{claim}: {pvc_not_found(claim)}", True)
                continue
            if ephemeral:
                err = ephemeral_not_for_pod(pod, pvc)
                if err is not None:
                    raise _LookupError(err, False)
            driver, handle = self._driver_info(idx, csi_node, pvc)
            if not driver or not handle:
                continue
            result[f"{driver}/{handle}"] = csi_attach_limit_key(driver)

    def _filter(self, cluster: ClusterState, pod: Pod, node_info: NodeInfo) -> Status:
        if not pod.volumes:
            return SUCCESS
        idx = storage_index(cluster)
        csi_node = idx.csi_nodes.get(node_info.node.name)
        new_volumes: dict[str, str] = {}
        try:
            self._attachable(cluster, idx, pod, csi_node, True, new_volumes)
        except _LookupError as e:
            return unresolvable(str(e)) if e.not_found else Status(Code.ERROR, [str(e)])
        if not new_volumes:
            return SUCCESS
        limits = get_volume_limits(node_info, csi_node)
        if not limits:
            return SUCCESS
        attached: dict[str, str] = {}
        try:
            for p in node_info.pods.values():
                self._attachable(cluster, idx, p, csi_node, False, attached)
        except _LookupError as e:
            return Status(Code.ERROR, [str(e)])
        attached_count: Counter[str] = Counter()
        for unique, key in attached.items():
            new_volumes.pop(unique, None)  # a volume already attached for another pod does not count twice
            attached_count[key] += 1
        for key, count in Counter(new_volumes.values()).items():
            limit = limits.get(key)
            if limit is not None and attached_count[key] + count > limit:
                return Status(Code.UNSCHEDULABLE, [ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED])
        return SUCCESS

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        return self._filter(self.handle.cluster, pod, node_info)

    def filter_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray:
        if not pod.volumes:
            return all_pass(len(rows))
        idx = storage_index(cluster)
        infos = cluster.node_infos
        # Nodes without a CSINode object all see the pod's volumes alike (no migration, no CSI limits):
        # whether the pod adds countable volumes is worked out once, and only nodes that publish
        # attachable-volume limits need their pods' volumes counted.
        new_volumes: dict[str, str] = {}
        try:
            self._attachable(cluster, idx, pod, None, True, new_volumes)
        except _LookupError:
            plain = np.zeros(len(rows), dtype=bool)
        else:
            if not new_volumes:
                plain = all_pass(len(rows))
            else:
                unlimited = node_static_filter(self._limits, cluster, "unlimited", _no_attach_limits, rows)
                plain = unlimited
                if not is_all_pass(unlimited):
                    plain = np.ones(len(rows), dtype=bool)
                    for i in np.flatnonzero(~unlimited):
                        plain[i] = self._filter(cluster, pod, infos[rows[i]]).is_success
        if not idx.csi_nodes:
            return plain
        by_name = cluster.node_info_by_name
        csi_rows = np.fromiter((by_name[n].index for n in idx.csi_nodes if n in by_name), dtype=np.int64)
        special = np.flatnonzero(np.isin(rows, csi_rows))
        if not len(special):
            return plain
        out = plain.copy() if is_all_pass(plain) else plain
        for i in special:
            out[i] = self._filter(cluster, pod, infos[rows[i]]).is_success
        return out
