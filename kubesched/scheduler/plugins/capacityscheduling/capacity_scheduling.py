"""CapacityScheduling: per-namespace ElasticQuotas — guaranteed `min`, borrowing up to `max` — and the
preemption that reclaims borrowed capacity.

Mirrors kubernetes-sigs/scheduler-plugins `pkg/capacityscheduling/capacity_scheduling.go` (quotas in
`elastic_quota.py`). The quota of a namespace counts the requests of its assigned pods (and of pods being
reserved); a quota is "over min" when its use exceeds `min` in any resource.

- PreFilter: with the requests of the pod plus those of the pods nominated in its namespace with at least
  its priority, the namespace's use must stay within `max` ("Pod ns/name is rejected in PreFilter because
  ElasticQuota ns is more than Max"); with also the pods nominated in other namespaces that are not over
  their min, the use of all quotas must stay within the sum of all `min` ("... because total ElasticQuota
  used is more than min"). Both are Unschedulable, so PostFilter may preempt. Pods of namespaces without
  a quota pass. AddPod/RemovePod keep a per-cycle copy of the quotas right during preemption.
- PostFilter: preemption through the shared Evaluator with this plugin's victim choice: a preemptor whose
  quota would go over its min may only preempt lower-priority pods of its own namespace; one within its
  min reclaims from pods of *other* namespaces that borrow (their quota is over min) whatever their
  priority; a preemptor without a quota preempts lower-priority pods that have none. Victims are then
  reprieved most important first (PDB-violating ones first) while the pod still fits and the quotas hold.
  Every node with an Unschedulable status is a candidate (offset 0, all nodes).
- Reserve/Unreserve: the pod counts in its quota while assumed.
No args (any pluginConfig args are refused).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kubesched.api.objects import Pod, PodDisruptionBudget
from kubesched.api.scheduling import ElasticQuota
from kubesched.cluster.events import Event, EventType
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.config.plugin_args import no_args
from kubesched.scheduler.framework import (
    ClusterEvent,
    Code,
    CycleState,
    Handle,
    PostFilterPlugin,
    PostFilterResult,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
    Status,
)
from kubesched.scheduler.plugins.capacityscheduling.elastic_quota import (
    ElasticQuotaInfo,
    ElasticQuotaInfos,
    pod_request,
)
from kubesched.scheduler.plugins.framework_resource import Resource
from kubesched.scheduler.preemption import (
    Evaluator,
    Victims,
    filter_pods_with_pdb_violation,
    more_important_key,
    reprieve_in_order,
)

NAME = "CapacityScheduling"
PRE_FILTER_STATE_KEY = "PreFilter" + NAME
SNAPSHOT_KEY = "ElasticQuotaSnapshot"
_RUNNING_OR_PENDING = ("Running", "Pending")


class PreFilterState:
    """podReq and the two sums with nominated pods (shared by clones, as upstream's Clone returns itself)."""

    __slots__ = ("pod_req", "nominated_in_eq_with_pod", "nominated_with_pod")

    def __init__(self, pod_req: Resource, in_eq: Resource, total: Resource) -> None:
        self.pod_req = pod_req
        self.nominated_in_eq_with_pod = in_eq
        self.nominated_with_pod = total

    def clone(self) -> PreFilterState:
        return self


class ElasticQuotaSnapshotState:
    __slots__ = ("infos",)

    def __init__(self, infos: ElasticQuotaInfos) -> None:
        self.infos = infos

    def clone(self) -> ElasticQuotaSnapshotState:
        return ElasticQuotaSnapshotState(self.infos.clone())


class _QuotaExtensions(PreFilterExtensions):
    """AddPod/RemovePod on the cycle's copy of the quotas."""

    def add_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_add: Pod, node_info: NodeInfo) -> Status:
        snap = state.read(SNAPSHOT_KEY)
        if not isinstance(snap, ElasticQuotaSnapshotState):
            return Status(Code.ERROR, [f'error reading "{SNAPSHOT_KEY}" from cycleState'])
        info = snap.infos.get(pod_to_add.namespace)
        if info is not None:
            info.add_pod_if_not_present(pod_to_add)
        return Status()

    def remove_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_remove: Pod, node_info: NodeInfo) -> Status:
        snap = state.read(SNAPSHOT_KEY)
        if not isinstance(snap, ElasticQuotaSnapshotState):
            return Status(Code.ERROR, [f'error reading "{SNAPSHOT_KEY}" from cycleState'])
        info = snap.infos.get(pod_to_remove.namespace)
        if info is not None:
            info.delete_pod_if_present(pod_to_remove)
        return Status()


class CapacityScheduling(PreFilterPlugin, PostFilterPlugin, ReservePlugin):
    name = NAME
    Args = no_args(NAME)

    def __init__(self, args: Any, handle: Handle) -> None:
        super().__init__(args, handle)
        self.infos = ElasticQuotaInfos()
        self._extensions = _QuotaExtensions()
        cluster = handle.cluster
        for obj in cluster.others.values():
            if isinstance(obj, ElasticQuota) and obj.meta.namespace not in self.infos:
                self.infos[obj.meta.namespace] = ElasticQuotaInfo(obj.meta.namespace, obj.min, obj.max)
        for pod in cluster.pods.values():
            if pod.node_name:
                self._add_pod(pod)
        cluster.subscribe(self._on_event, index=True)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", ("delete",)), ClusterEvent("ElasticQuota")]

    # ------------------------------------------------------------ the informers

    def _add_pod(self, pod: Pod) -> None:
        info = self.infos.get(pod.namespace)
        if info is not None:
            info.add_pod_if_not_present(pod)

    def _delete_pod(self, pod: Pod) -> None:
        info = self.infos.get(pod.namespace)
        if info is not None:
            info.delete_pod_if_present(pod)

    def _on_event(self, ev: Event) -> None:
        obj, t = ev.obj, ev.type
        if ev.kind == "Pod":
            # The assigned-pod informer: a pod that appears bound or gets bound counts, a pod that finishes
            # or is deleted stops counting (Reserve and Unreserve account the scheduler's assumptions).
            if t in (EventType.ADDED, EventType.BOUND) and obj.node_name:
                self._add_pod(obj)
            elif t is EventType.UPDATED and obj.node_name and obj.phase not in _RUNNING_OR_PENDING:
                self._delete_pod(obj)
            elif t is EventType.DELETED and obj.node_name:
                self._delete_pod(obj)
        elif ev.kind == "ElasticQuota" and isinstance(obj, ElasticQuota):
            ns = obj.meta.namespace
            if t is EventType.ADDED and ns not in self.infos:
                self.infos[ns] = ElasticQuotaInfo(ns, obj.min, obj.max)
            elif t is EventType.UPDATED:
                new = ElasticQuotaInfo(ns, obj.min, obj.max)
                old = self.infos.get(ns)
                if old is not None:
                    new.pods, new.used = old.pods, old.used
                self.infos[ns] = new
            elif t is EventType.DELETED:
                self.infos.pop(ns, None)

    # ------------------------------------------------------------ PreFilter

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> tuple[PreFilterResult | None, Status]:
        snapshot = ElasticQuotaSnapshotState(self.infos.clone())
        pod_req = pod_request(pod)
        state.write(SNAPSHOT_KEY, snapshot)
        eq = snapshot.infos.get(pod.namespace)
        if eq is None:
            state.write(PRE_FILTER_STATE_KEY, PreFilterState(pod_req, Resource(), Resource()))
            return None, Status()
        in_eq = Resource()
        total = Resource()
        nominator = self.handle.nominator
        prio = pod.effective_priority
        for info in cluster.node_infos:
            for p in nominator.pods_for_node(info.name):
                if p.uid == pod.uid:
                    continue
                q = self.infos.get(p.namespace)
                if q is None:
                    continue
                if p.namespace == pod.namespace and p.effective_priority >= prio:
                    req = pod_request(p)
                    in_eq.add_resource(req)
                    total.add_resource(req)
                elif p.namespace != pod.namespace and not q.used_over_min():
                    total.add_resource(pod_request(p))
        in_eq.add_resource(pod_req)
        total.add_resource(pod_req)
        state.write(PRE_FILTER_STATE_KEY, PreFilterState(pod_req, in_eq, total))
        if eq.used_over_max_with(in_eq):
            return None, Status(Code.UNSCHEDULABLE, [f"Pod {pod.namespace}/{pod.name} is rejected in PreFilter "
                                                     f"because ElasticQuota {eq.namespace} is more than Max"])
        if snapshot.infos.aggregated_used_over_min_with(total):
            return None, Status(Code.UNSCHEDULABLE, [f"Pod {pod.namespace}/{pod.name} is rejected in PreFilter "
                                                     "because total ElasticQuota used is more than min"])
        return None, Status()

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self._extensions

    # ------------------------------------------------------------ PostFilter

    def post_filter(self, state: CycleState, pod: Pod,
                    statuses: dict[str, Status]) -> tuple[PostFilterResult | None, Status]:
        return Evaluator(self.name, self.handle, _Preemptor(self, state)).preempt(state, pod, statuses)

    # ------------------------------------------------------------ Reserve

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        self._add_pod(pod)
        return Status()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self._delete_pod(pod)


def _states(state: CycleState) -> tuple[ElasticQuotaSnapshotState | None, PreFilterState | None]:
    snap = state.read(SNAPSHOT_KEY)
    pfs = state.read(PRE_FILTER_STATE_KEY)
    return (snap if isinstance(snap, ElasticQuotaSnapshotState) else None,
            pfs if isinstance(pfs, PreFilterState) else None)


class _Preemptor:
    """The preemption policy of one PostFilter call (upstream's `preemptor`, which holds the cycle state)."""

    def __init__(self, plugin: CapacityScheduling, state: CycleState) -> None:
        self.plugin = plugin
        self.state = state

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        return 0, num_nodes

    def ordered_score_funcs(self, nodes_to_victims: dict[str, Victims]) -> list[Callable[[str], int]] | None:
        return None

    def quick_reject(self, pod: Pod, node_info: NodeInfo | None) -> Status | None:
        # No shortcut: which pods are victims depends on the elastic quotas, so every candidate is dry-run.
        return None

    def pod_eligible_to_preempt_others(self, pod: Pod, nominated_node_status: Status) -> tuple[bool, str]:
        if pod.preemption_policy == "Never":
            return False, "not eligible due to preemptionPolicy=Never."
        snap, pfs = _states(self.state)
        if pfs is None:
            return False, "not eligible due to failed to read from cycleState"
        nominated = pod.nominated_node_name
        if not nominated:
            return True, ""
        if nominated_node_status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return True, ""
        if snap is None:
            return True, ""
        info = self.plugin.handle.cluster.node_info_by_name.get(nominated)
        if info is None:
            return True, ""
        prio = pod.effective_priority
        own = snap.infos.get(pod.namespace)
        terminating = "not eligible due to a terminating pod on the nominated node."
        if own is not None:
            over_min = own.used_over_min_with(pfs.nominated_in_eq_with_pod)
            for p in info.pods.values():
                if p.meta.deletion_timestamp is None:
                    continue
                q = snap.infos.get(p.namespace)
                if q is None:
                    continue
                if p.namespace == pod.namespace and p.effective_priority < prio:
                    return False, terminating
                if p.namespace != pod.namespace and not over_min and q.used_over_min():
                    return False, terminating
        else:
            for p in info.pods.values():
                if p.namespace in snap.infos:
                    continue
                if p.meta.deletion_timestamp is not None and p.effective_priority < prio:
                    return False, terminating
        return True, ""

    def select_victims_on_node(self, state: CycleState, pod: Pod, node_info: NodeInfo,
                               pdbs: Sequence[PodDisruptionBudget]) -> tuple[list[Pod], int, Status]:
        fwk = self.plugin.handle.framework
        assert fwk is not None
        snap, pfs = _states(state)
        if snap is None:
            return [], 0, Status(Code.UNSCHEDULABLE, ["Failed to read elasticQuotaSnapshot from cycleState"])
        if pfs is None:
            return [], 0, Status(Code.UNSCHEDULABLE, ["Failed to read preFilterState from cycleState"])
        nominator = self.plugin.handle.nominator
        nominated = [p for p in nominator.pods_for_node(node_info.name)
                     if p.key != pod.key and p.effective_priority >= pod.effective_priority]

        def remove(p: Pod) -> Status:
            if not node_info.remove_pod(p):
                return Status(Code.ERROR, [f"no corresponding pod {p.name} in pods of node {node_info.name}"])
            return fwk.run_pre_filter_extension_remove(state, pod, p, node_info)

        def add(p: Pod) -> Status:
            node_info.add_pod(p)
            return fwk.run_pre_filter_extension_add(state, pod, p, node_info)

        def fits() -> bool:
            return fwk.run_filter_with_nominated_pods(state, pod, node_info, nominated).is_success

        infos = snap.infos
        prio = pod.effective_priority
        own = infos.get(pod.namespace)
        key = more_important_key(self.plugin.handle.now())
        # Least important first, as upstream sorts the node's pods before looking for victims.
        pods = sorted(node_info.pods.values(), key=key, reverse=True)
        potential: list[Pod] = []
        if own is not None:
            over_min = own.used_over_min_with(pfs.nominated_in_eq_with_pod)
            for p in pods:
                q = infos.get(p.namespace)
                if q is None:
                    continue
                if over_min:
                    # Its guarantee is not borrowed by others: only its own lower-priority pods may go.
                    chosen = p.namespace == pod.namespace and p.effective_priority < prio
                else:
                    # Within its min: reclaim from quotas that borrow, whatever their priority.
                    chosen = p.namespace != pod.namespace and q.used_over_min()
                if chosen:
                    potential.append(p)
                    st = remove(p)
                    if not st.is_success:
                        return [], 0, st
        else:
            for p in pods:
                if p.namespace in infos:
                    continue
                if p.effective_priority < prio:
                    potential.append(p)
                    st = remove(p)
                    if not st.is_success:
                        return [], 0, st
        if not potential:
            return [], 0, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                 [f"No victims found on node {node_info.name} for preemptor pod {pod.name}"])
        st = fwk.run_filter_with_nominated_pods(state, pod, node_info, nominated)
        if not st.is_success:
            return [], 0, st
        if own is not None and (own.used_over_max_with(pfs.pod_req)
                                or infos.aggregated_used_over_min_with(pfs.pod_req)):
            return [], 0, Status(Code.UNSCHEDULABLE, ["global quota max exceeded"])

        victims: list[Pod] = []
        potential.sort(key=key)
        violating, non_violating = filter_pods_with_pdb_violation(potential, pdbs)

        def reprieve(p: Pod) -> tuple[bool, Status]:
            st = add(p)
            if not st.is_success:
                return False, st
            ok = fits()
            if not ok:
                st = remove(p)
                if not st.is_success:
                    return False, st
                victims.append(p)
            if own is not None and (own.used_over_max_with(pfs.nominated_in_eq_with_pod)
                                    or infos.aggregated_used_over_min_with(pfs.nominated_with_pod)):
                st = remove(p)
                if not st.is_success:
                    return False, st
                victims.append(p)
            return ok, Status()

        return reprieve_in_order(violating, non_violating, reprieve, victims, key)
