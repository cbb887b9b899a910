"""VolumeBinding: the pod's claims must exist, and be bound to (or bindable/provisionable for) the node.

PreFilter: every claim must exist (else UnschedulableAndUnresolvable `persistentvolumeclaim "x" not
found`), not be Lost or being deleted; unbound claims without WaitForFirstConsumer are rejected ("pod
has unbound immediate PersistentVolumeClaims"); bound local PVs (kubernetes.io/hostname In ...) narrow
the nodes. Filter (FindPodVolumes): bound PVs' node affinity must match the node; each unbound
WaitForFirstConsumer claim needs the smallest matching available PV on the node, or else a provisioner
whose StorageClass allowedTopologies (and CSIStorageCapacity, when the driver opts in) admit the node.
Reserve records the chosen PVs and selected nodes so later pods see them taken; PreBind then succeeds
(no PV controller runs in a simulation). Pods without claims are skipped. Score (StorageCapacityScoring)
is an alpha feature, off: PreScore skips.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from kubesched.api import fields
from kubesched.api.objects import PersistentVolumeClaim, Pod
from kubesched.api.quantity import parse_quantity, value_of
from kubesched.api.selectors import NodeSelector, parse_label_selector, parse_node_selector
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.config.plugin_args import PluginArgs
from kubesched.errors import InputError
from kubesched.scheduler.framework import (
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    FilterPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
    ShapeCache,
    Status,
    all_pass,
    skip,
    unresolvable,
)
from kubesched.scheduler.plugins.helper import node_static_filter
from kubesched.scheduler.plugins.volume_util import (
    ANN_BIND_COMPLETED,
    ANN_SELECTED_NODE,
    NOT_SUPPORTED_PROVISIONER,
    WAIT_FOR_FIRST_CONSUMER,
    StorageIndex,
    ephemeral_not_for_pod,
    get_pvc,
    labels_of,
    name_of,
    pod_claims,
    pv_class,
    pvc_class,
    pvc_not_found,
    spec_of,
    storage_index,
)

STATE_KEY = "VolumeBinding"
HOSTNAME_LABEL = "kubernetes.io/hostname"
DEFAULT_BIND_TIMEOUT_SECONDS = 600
ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"


class _BinderError(Exception):
    """An error FindPodVolumes returns (the Filter status is Error)."""


@dataclass
class PodVolumeClaims:
    bound: list[PersistentVolumeClaim] = field(default_factory=list)
    unbound_immediate: list[PersistentVolumeClaim] = field(default_factory=list)
    unbound_delay: list[PersistentVolumeClaim] = field(default_factory=list)
    unbound_pvs_by_class: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


@dataclass
class PodVolumes:
    static_bindings: list[tuple[str, PersistentVolumeClaim]] = field(default_factory=list)  # (pv name, claim)
    dynamic_provisions: list[PersistentVolumeClaim] = field(default_factory=list)


@dataclass
class _State:
    claims: PodVolumeClaims | None
    by_node: dict[str, PodVolumes] = field(default_factory=dict)
    all_bound: bool = True

    def clone(self) -> _State:
        return self  # upstream shares it: Filter results are per node and never undone


def _storage_request(spec: dict[str, Any]) -> Fraction:
    req = ((spec.get("resources") or {}).get("requests") or {}) if isinstance(spec.get("resources"), dict) else {}
    try:
        return parse_quantity(req.get("storage", 0)) if isinstance(req, dict) else Fraction(0)
    except ValueError:
        return Fraction(0)


def _pv_capacity(pv: dict[str, Any]) -> Fraction:
    cap = spec_of(pv).get("capacity") or {}
    try:
        return parse_quantity(cap.get("storage", 0)) if isinstance(cap, dict) else Fraction(0)
    except ValueError:
        return Fraction(0)


def local_pv_node_names(pv: dict[str, Any]) -> set[str]:
    """util.GetLocalPersistentVolumeNodeNames: hostname-label values named by every term (union of terms)."""
    na = spec_of(pv).get("nodeAffinity")
    req = na.get("required") if isinstance(na, dict) else None
    if not isinstance(req, dict):
        return set()
    result: set[str] = set()
    for term in req.get("nodeSelectorTerms") or []:
        nodes: set[str] | None = None
        exprs = term.get("matchExpressions") if isinstance(term, dict) else None
        for e in exprs or []:
            if isinstance(e, dict) and e.get("key") == HOSTNAME_LABEL and e.get("operator") == "In":
                vals = {str(v) for v in e.get("values") or []}
                nodes = vals if nodes is None else nodes & vals
        result |= nodes or set()
    return result


@dataclass(frozen=True, slots=True)
class VolumeBindingArgs(PluginArgs):
    """VolumeBindingArgs: bindTimeoutSeconds (v1 default 600, not negative); `shape` only with
    StorageCapacityScoring, which kubesched does not model (ValidateVolumeBindingArgs refuses it then)."""

    bind_timeout_seconds: int = DEFAULT_BIND_TIMEOUT_SECONDS

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> VolumeBindingArgs:
        a = fields.Fields(raw, field, allowed={"bindTimeoutSeconds", "shape"})
        timeout = a.integer("bindTimeoutSeconds", DEFAULT_BIND_TIMEOUT_SECONDS, lo=0)
        if a.has("shape"):
            raise a.error("shape", "unsupported when the StorageCapacityScoring feature is disabled")
        return cls(timeout)


class VolumeBinding(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, ReservePlugin, PreBindPlugin):
    name = "VolumeBinding"
    Args = VolumeBindingArgs
    args: VolumeBindingArgs

    def __init__(self, args: VolumeBindingArgs, handle: Any) -> None:
        super().__init__(args, handle)
        # The assume cache: PVs chosen for claims and nodes selected for provisioning, kept across cycles.
        self.assumed_claim_ref: dict[str, tuple[str, str, str]] = {}  # pv name -> (namespace, name, uid)
        self.assumed_selected_node: dict[str, str] = {}  # claim key -> node name
        self._affinity: dict[int, tuple[dict[str, Any], NodeSelector | None, bool]] = {}
        self._masks = ShapeCache(limit=256)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent(kind, ("add", "update")) for kind in (
            "PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode", "CSIDriver",
            "CSIStorageCapacity", "Node")] + [ClusterEvent("Pod", ("delete",))]

    # ------------------------------------------------------------ claims

    def _check_claims_exist(self, cluster: ClusterState, pod: Pod) -> tuple[bool, str | None]:
        """podHasPVCs: whether the pod has claims, and the rejection when one is unusable."""
        claims = pod_claims(pod)
        for name, ephemeral, _vol in claims:
            pvc = get_pvc(cluster, pod.namespace, name)
            if pvc is None:
                if ephemeral:
                    return True, f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
                return True, pvc_not_found(name)
            if pvc.phase == "Lost":
                return True, f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume "{pvc.volume_name}"'
            if pvc.meta.deletion_timestamp is not None:
                return True, f'persistentvolumeclaim "{name}" is being deleted'
            if ephemeral:
                err = ephemeral_not_for_pod(pod, pvc)
                if err is not None:
                    return True, err
        return bool(claims), None

    def _delay_binding(self, idx: StorageIndex, pvc: PersistentVolumeClaim) -> bool:
        """IsDelayBindingMode (raises for a class without volumeBindingMode)."""
        cls = pvc_class(pvc)
        if not cls:
            return False
        sc = idx.storage_classes.get(cls)
        if sc is None:
            return False
        mode = sc.get("volumeBindingMode")
        if mode is None:
            raise _BinderError(f'VolumeBindingMode not set for StorageClass "{cls}"')
        return bool(mode == WAIT_FOR_FIRST_CONSUMER)

    def pod_volume_claims(self, cluster: ClusterState, pod: Pod) -> PodVolumeClaims:
        """GetPodVolumeClaims: the pod's claims sorted into bound, unbound immediate and unbound delayed."""
        idx = storage_index(cluster)
        out = PodVolumeClaims()
        for name, _eph, _vol in pod_claims(pod):
            pvc = get_pvc(cluster, pod.namespace, name)
            if pvc is None:
                raise _BinderError(f'error getting PVC "{pod.namespace}/{name}": {pvc_not_found(name)}')
            if pvc.volume_name and ANN_BIND_COMPLETED in pvc.meta.annotations:
                out.bound.append(pvc)
            elif self._delay_binding(idx, pvc) and not pvc.volume_name:
                out.unbound_delay.append(pvc)
            else:
                out.unbound_immediate.append(pvc)  # prebound claims wait for the PV controller too
        for pvc in out.unbound_delay:
            cls = pvc_class(pvc)
            if cls not in out.unbound_pvs_by_class:
                out.unbound_pvs_by_class[cls] = [pv for pv in idx.pvs.values() if pv_class(pv) == cls]
        return out

    # ------------------------------------------------------------ PreFilter

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> tuple[PreFilterResult | None, Status]:
        if not pod.volumes:
            state.write(STATE_KEY, _State(None))
            return None, skip()
        has_pvc, err = self._check_claims_exist(cluster, pod)
        if err is not None:
            return None, unresolvable(err)
        if not has_pvc:
            state.write(STATE_KEY, _State(None))
            return None, skip()
        try:
            claims = self.pod_volume_claims(cluster, pod)
        except _BinderError as e:
            return None, Status(Code.ERROR, [str(e)])
        if claims.unbound_immediate:
            return None, unresolvable(ERR_UNBOUND_IMMEDIATE)
        state.write(STATE_KEY, _State(claims))
        eligible = self._eligible_nodes(cluster, claims.bound)
        return (PreFilterResult(eligible) if eligible is not None else None), Status()

    def _eligible_nodes(self, cluster: ClusterState, bound: list[PersistentVolumeClaim]) -> set[str] | None:
        idx = storage_index(cluster)
        eligible: set[str] | None = None
        for pvc in bound:
            pv = idx.pvs.get(pvc.volume_name)
            if pv is None:
                continue
            names = local_pv_node_names(pv)
            if names:
                eligible = set(names) if eligible is None else eligible & names
        return eligible

    # ------------------------------------------------------------ Filter

    def _node_affinity(self, pv: dict[str, Any]) -> tuple[NodeSelector | None, bool]:
        """The PV's required node affinity (None: none) and whether it parsed."""
        cached = self._affinity.get(id(pv))
        if cached is not None and cached[0] is pv:
            return cached[1], cached[2]
        req = None
        na = spec_of(pv).get("nodeAffinity")
        if isinstance(na, dict):
            req = na.get("required")
        sel: NodeSelector | None = None
        ok = True
        if req is not None:
            try:
                sel = parse_node_selector(req, "spec.nodeAffinity.required")
            except InputError:
                ok = False
        self._affinity[id(pv)] = (pv, sel, ok)
        return sel, ok

    def _check_node_affinity(self, pv: dict[str, Any], node_labels: dict[str, str]) -> bool:
        """volume.CheckNodeAffinity: matched against the node's labels only (no name)."""
        sel, ok = self._node_affinity(pv)
        if not ok:
            return False
        return sel is None or sel.matches(node_labels, "")

    def _claim_ref(self, pv: dict[str, Any]) -> tuple[str, str, str] | None:
        assumed = self.assumed_claim_ref.get(name_of(pv))
        if assumed is not None:
            return assumed
        ref = spec_of(pv).get("claimRef")
        if not isinstance(ref, dict):
            return None
        return str(ref.get("namespace") or ""), str(ref.get("name") or ""), str(ref.get("uid") or "")

    def _bound_to_claim(self, pv: dict[str, Any], pvc: PersistentVolumeClaim) -> bool:
        """IsVolumeBoundToClaim."""
        ref = self._claim_ref(pv)
        if ref is None:
            return False
        ns, name, uid = ref
        return name == pvc.meta.name and ns == pvc.meta.namespace and (not uid or uid == pvc.meta.uid)

    def find_matching_volume(self, pvc: PersistentVolumeClaim, pvs: list[dict[str, Any]], node_labels: dict[str, str],
                             excluded: set[str]) -> dict[str, Any] | None:
        """volume.FindMatchingVolume on the scheduler path (a node is given, delayed binding)."""
        spec = spec_of(pvc.raw)
        requested = _storage_request(spec)
        requested_class = pvc_class(pvc)
        selector = None
        if spec.get("selector") is not None:
            try:
                selector = parse_label_selector(spec.get("selector"), "spec.selector")
            except InputError as e:
                raise _BinderError(f"error creating internal label selector for claim: "
                                   f"{pvc.meta.namespace}/{pvc.meta.name}: {e.message}") from None
        claim_mode = spec.get("volumeMode") or "Filesystem"
        claim_vac = spec.get("volumeAttributesClassName") or ""
        smallest: dict[str, Any] | None = None
        smallest_qty = Fraction(0)
        for pv in pvs:
            pv_name = name_of(pv)
            if pv_name in excluded:
                continue
            bound_to_claim = self._bound_to_claim(pv, pvc)
            if self._claim_ref(pv) is not None and not bound_to_claim:
                continue
            pv_spec = spec_of(pv)
            qty = _pv_capacity(pv)
            if qty < requested:
                continue
            if (pv_spec.get("volumeMode") or "Filesystem") != claim_mode:
                continue
            if claim_vac != (pv_spec.get("volumeAttributesClassName") or ""):
                continue
            if (pv.get("metadata") or {}).get("deletionTimestamp"):
                continue
            affinity_ok = self._check_node_affinity(pv, node_labels)
            if bound_to_claim:
                # A PV prebound to this claim is the answer, or nothing fits on this node.
                return pv if affinity_ok else None
            phase = (pv.get("status") or {}).get("phase") if isinstance(pv.get("status"), dict) else None
            if phase != "Available":
                continue
            if selector is not None and not selector.matches(labels_of(pv)):
                continue
            if pv_class(pv) != requested_class or not affinity_ok:
                continue
            pv_modes = set(pv_spec.get("accessModes") or [])
            if not all(m in pv_modes for m in pvc.access_modes):
                continue
            if smallest is None or smallest_qty > qty:
                smallest, smallest_qty = pv, qty
        return smallest

    def _has_enough_capacity(self, idx: StorageIndex, provisioner: str, pvc: PersistentVolumeClaim,
                             sc_name: str, node_labels: dict[str, str]) -> bool:
        spec = spec_of(pvc.raw)
        req = ((spec.get("resources") or {}).get("requests") or {}) if isinstance(spec.get("resources"), dict) else {}
        if not isinstance(req, dict) or "storage" not in req:
            return True
        driver = idx.csi_drivers.get(provisioner)
        if driver is None or spec_of(driver).get("storageCapacity") is not True:
            return True
        size = value_of(_storage_request(spec))
        for cap in idx.csi_storage_capacities:
            if cap.get("storageClassName") != sc_name:
                continue
            limit = cap.get("maximumVolumeSize") if cap.get("maximumVolumeSize") is not None else cap.get("capacity")
            try:
                if limit is None or value_of(parse_quantity(limit)) < size:
                    continue
            except ValueError:
                continue
            topo = cap.get("nodeTopology")
            if topo is None:
                continue
            try:
                if parse_label_selector(topo, "nodeTopology").matches(node_labels):
                    return True
            except InputError:
                continue
        return False

    def _check_provisions(self, idx: StorageIndex, claims: list[PersistentVolumeClaim],
                          node_labels: dict[str, str]) -> tuple[bool, bool, list[PersistentVolumeClaim]]:
        """checkVolumeProvisions: (provision satisfied, sufficient storage, claims to provision)."""
        for pvc in claims:
            cls = pvc_class(pvc)
            if not cls:
                raise _BinderError(f'no class for claim "{pvc.meta.namespace}/{pvc.meta.name}"')
            sc = idx.storage_classes.get(cls)
            if sc is None:
                raise _BinderError(f'failed to find storage class "{cls}"')
            provisioner = str(sc.get("provisioner") or "")
            if not provisioner or provisioner == NOT_SUPPORTED_PROVISIONER:
                return False, True, []
            if not _match_topology_terms(sc.get("allowedTopologies"), node_labels):
                return False, True, []
            if not self._has_enough_capacity(idx, provisioner, pvc, cls, node_labels):
                return True, False, []
        return True, True, list(claims)

    def find_pod_volumes(self, cluster: ClusterState, claims: PodVolumeClaims,
                         node_info: NodeInfo) -> tuple[PodVolumes, list[str]]:
        """FindPodVolumes: what the node needs for the pod's claims, and the reasons it cannot."""
        idx = storage_index(cluster)
        node = node_info.node
        labels = node.labels
        volumes = PodVolumes()
        bound_ok = unbound_ok = storage_ok = pvs_found = True

        def reasons() -> list[str]:
            out = []
            if not bound_ok:
                out.append(ERR_REASON_NODE_CONFLICT)
            if not unbound_ok:
                out.append(ERR_REASON_BIND_CONFLICT)
            if not storage_ok:
                out.append(ERR_REASON_NOT_ENOUGH_SPACE)
            if not pvs_found:
                out.append(ERR_REASON_PV_NOT_EXIST)
            return out

        for pvc in claims.bound:  # checkBoundClaims; its verdict does not stop the unbound checks
            pv = idx.pvs.get(pvc.volume_name)
            if pv is None:
                pvs_found = False
                break
            if not self._check_node_affinity(pv, labels):
                bound_ok = False
                break
        if claims.unbound_delay:
            to_match: list[PersistentVolumeClaim] = []
            to_provision: list[PersistentVolumeClaim] = []
            for pvc in claims.unbound_delay:
                selected = self.assumed_selected_node.get(pvc.meta.key, pvc.meta.annotations.get(ANN_SELECTED_NODE))
                if selected is not None:
                    if selected != node.name:
                        unbound_ok = False
                        return volumes, reasons()
                    to_provision.append(pvc)
                else:
                    to_match.append(pvc)
            if to_match:
                # Smallest requests first, so each gets the smallest PV that fits.
                ordered = sorted(to_match, key=lambda c: _storage_request(
                    spec_of(c.raw)))
                chosen: set[str] = set()
                for pvc in ordered:
                    pv = self.find_matching_volume(pvc, claims.unbound_pvs_by_class.get(pvc_class(pvc), []),
                                                   labels, chosen)
                    if pv is None:
                        to_provision.append(pvc)
                        unbound_ok = False
                        continue
                    chosen.add(name_of(pv))
                    volumes.static_bindings.append((name_of(pv), pvc))
            if to_provision:
                unbound_ok, storage_ok, provisions = self._check_provisions(idx, to_provision, labels)
                volumes.dynamic_provisions = provisions
        return volumes, reasons()

    def _claims(self, state: CycleState, pod: Pod, cluster: ClusterState) -> tuple[_State | None, Status]:
        s = state.read(STATE_KEY)
        if s is not None:
            return s, SUCCESS
        # PreFilter did not run (e.g. a profile without it): compute the same state here.
        tmp = CycleState()
        _res, st = self.pre_filter(tmp, pod, cluster)
        if not st.is_success and not st.is_skip:
            return None, st
        s = tmp.read(STATE_KEY)
        state.write(STATE_KEY, s)
        return s, SUCCESS

    def _filter(self, state: CycleState, pod: Pod, cluster: ClusterState, node_info: NodeInfo) -> Status:
        s, st = self._claims(state, pod, cluster)
        if s is None:
            return st
        if s.claims is None:
            return SUCCESS
        try:
            volumes, reasons = self.find_pod_volumes(cluster, s.claims, node_info)
        except _BinderError as e:
            return Status(Code.ERROR, [str(e)])
        if reasons:
            return unresolvable(*reasons)
        s.by_node[node_info.node.name] = volumes
        return SUCCESS

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        return self._filter(state, pod, self.handle.cluster, node_info)

    def filter_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray:
        s, _st = self._claims(state, pod, cluster)
        if s is None:
            return np.zeros(len(rows), dtype=bool)
        if s.claims is None:
            return all_pass(len(rows))
        if not s.claims.unbound_delay:
            # Every claim is bound: a node fits when each bound PV exists and its node affinity matches the
            # node's labels — node-static for these PV objects. Reserve then finds every claim bound whether
            # or not the node's (empty) PodVolumes were recorded, so none are.
            idx = storage_index(cluster)
            pvs = [idx.pvs.get(pvc.volume_name) for pvc in s.claims.bound]
            if any(pv is None for pv in pvs):
                return np.zeros(len(rows), dtype=bool)
            found = [pv for pv in pvs if pv is not None]

            def passes(info: NodeInfo) -> bool:
                return all(self._check_node_affinity(pv, info.node.labels) for pv in found)

            # The PV objects themselves key the mask (a changed PV is a new object): the entry keeps them alive.
            key = ("bound", tuple((name_of(pv), id(pv)) for pv in found))
            return node_static_filter(self._masks, cluster, key, passes, rows)
        infos = cluster.node_infos
        return np.fromiter((self._filter(state, pod, cluster, infos[r]).is_success for r in rows),
                           dtype=bool, count=len(rows))

    # ------------------------------------------------------------ Score (StorageCapacityScoring is off)

    def pre_score(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> Status:
        return skip()

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        return 0, SUCCESS

    # ------------------------------------------------------------ Reserve / PreBind

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        s = state.read(STATE_KEY)
        if s is None or s.claims is None:
            return SUCCESS
        volumes = s.by_node.get(node_name)
        if volumes is None:
            s.all_bound = True
            return SUCCESS
        s.all_bound = not s.claims.unbound_delay
        if s.all_bound:
            return SUCCESS
        for pv_name, pvc in volumes.static_bindings:
            self.assumed_claim_ref[pv_name] = (pvc.meta.namespace, pvc.meta.name, pvc.meta.uid)
        for pvc in volumes.dynamic_provisions:
            self.assumed_selected_node[pvc.meta.key] = node_name
        return SUCCESS

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        s = state.read(STATE_KEY)
        if s is None or s.claims is None:
            return
        volumes = s.by_node.get(node_name)
        if volumes is None:
            return
        for pv_name, _pvc in volumes.static_bindings:
            self.assumed_claim_ref.pop(pv_name, None)
        for pvc in volumes.dynamic_provisions:
            self.assumed_selected_node.pop(pvc.meta.key, None)

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        s = state.read(STATE_KEY)
        if s is not None and s.claims is not None and not s.all_bound and node_name not in s.by_node:
            return Status(Code.ERROR, [f'no pod volumes found for node "{node_name}"'])
        return SUCCESS


def _match_topology_terms(terms: Any, node_labels: dict[str, str]) -> bool:
    """v1helper.MatchTopologySelectorTerms over a StorageClass's allowedTopologies."""
    if not terms:
        return True
    for term in terms:
        exprs = term.get("matchLabelExpressions") if isinstance(term, dict) else None
        if not exprs:
            continue  # an empty term selects nothing
        if all(isinstance(e, dict) and node_labels.get(str(e.get("key"))) in {str(v) for v in e.get("values") or []}
               for e in exprs):
            return True
    return False
