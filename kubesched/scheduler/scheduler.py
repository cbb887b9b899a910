"""The scheduler: schedule one pod (filter, score, select, assume, bind), the loop over the queue, explain.

`schedule_pod` follows kube-scheduler's `schedulePod`: the nominated node first, then Filter over nodes
in NodeTree order from a rotating start index until `numFeasibleNodesToFind` feasible nodes are found,
then PreScore/Score/NormalizeScore with weights and a random choice among the best (one seeded RNG).

A pod a Permit plugin makes wait stays assumed on its node and its binding cycle is parked
(`schedule_one` returns an Outcome with `waiting_on`); `settle_permits()` fires the Permit timers due on
the scheduler's clock and finishes the binding cycle of every pod that was allowed or rejected
(kubernetes/kubernetes pkg/scheduler/schedule_one.go: bindingCycle, handleBindingCycleError).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubesched.api.objects import Pod
from kubesched.api.snapshot import gc_frozen
from kubesched.client.inprocess import InProcessAPIServer
from kubesched.client.interface import ApiError, Client
from kubesched.cluster.events import Cause, Event, EventType
from kubesched.cluster.state import ClusterState
from kubesched.config.scheduler_config import SchedulerConfig, default_config
from kubesched.scheduler.framework import (
    PODS_TO_ACTIVATE_KEY,
    Code,
    CycleState,
    Diagnosis,
    FitError,
    Handle,
    PodsToActivate,
    PostFilterResult,
    QueuedPodInfo,
    SchedulerServices,
    Status,
)
from kubesched.scheduler.nominator import Nominator
from kubesched.scheduler.queue import SchedulingQueue
from kubesched.scheduler.registry import Registry, default_registry
from kubesched.scheduler.runtime import Framework, ScoreBreakdown, build_frameworks
from kubesched.scheduler.waiting_pods import WaitingPod, WaitingPods

# How select_host breaks a tie among the best nodes: kube-scheduler draws one at random each time;
# the fork of kube-scheduler 1.20.5 the FGD paper's simulator runs takes the lowest node name, its node
# names carrying a seeded random prefix — a fixed preference order over the nodes, drawn from the seed.
TIE_BREAKS = ("random", "seededNodeOrder")

MIN_FEASIBLE_NODES_TO_FIND = 100
# What a cluster event is, for the plugins' registered events (EventsToRegister).
_ACTIONS = {EventType.ADDED: "add", EventType.UPDATED: "update", EventType.DELETED: "delete",
            EventType.ASSUMED: "add", EventType.BOUND: "add", EventType.UNBOUND: "delete"}
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


@dataclass
class ScheduleResult:
    suggested_host: str
    evaluated_nodes: int
    feasible_nodes: int


@dataclass
class Outcome:
    """What one scheduling attempt did (or, for a pod that waited at Permit, how its binding cycle ended)."""

    pod: Pod
    node: str | None
    nominated_node: str | None = None
    preempted: list[str] = field(default_factory=list)
    reason: str = ""
    status: Status | None = None
    waiting_on: str | None = None  # the node the pod is assumed on while it waits at Permit
    waited: float | None = None  # seconds the pod waited at Permit (outcomes of settle_permits)
    timed_out: bool = False  # a Permit timer rejected it


@dataclass(slots=True)
class _ParkedBinding:
    """The binding cycle of a pod waiting at Permit, resumed when the pod is allowed or rejected."""

    fwk: Framework
    state: CycleState
    qpi: QueuedPodInfo
    host: str
    cycle: int


class Scheduler:
    def __init__(self, cluster: ClusterState, config: SchedulerConfig | None = None,
                 registry: Registry | None = None, seed: int = 0, clock: Callable[[], float] | None = None,
                 services: SchedulerServices | None = None, client: Client | None = None,
                 only_own_pods: bool = False, tie_break: str = "random") -> None:
        """`only_own_pods`: pods whose schedulerName no profile serves never enter the queue, as a
        kube-scheduler running beside others ignores them (`responsibleForPod`); one-shot runs keep them
        and report that no profile serves them. `tie_break`: one of TIE_BREAKS."""
        if tie_break not in TIE_BREAKS:
            raise ValueError(f"tie_break must be one of {TIE_BREAKS}, got {tie_break!r}")
        self.cluster = cluster
        self.only_own_pods = only_own_pods
        self.seed = seed
        self.tie_break = tie_break
        self._rank: np.ndarray | None = None
        self._rank_generation = -1
        self.config = config or default_config()
        self.registry = registry or default_registry()
        self.rng = np.random.default_rng(seed)
        self.clock = clock or (lambda: 0.0)
        self.services = services if services is not None else SchedulerServices()
        self.client: Client = client if client is not None else InProcessAPIServer(cluster, self.clock)
        # The nominator: pods nominated to a node by preemption (and snapshot status.nominatedNodeName).
        self.nominator = Nominator(cluster)
        # One waiting-pods map for every profile, as upstream's scheduler shares it.
        self.waiting_pods = WaitingPods()
        self.frameworks: dict[str, Framework] = build_frameworks(
            self.config, self.registry,
            lambda: Handle(cluster, None, self.clock, self.rng, self.services, nominator=self.nominator,
                           client=self.client, waiting_pods=self.waiting_pods))
        self.queue = SchedulingQueue(self.frameworks, self.clock, self.config.pod_initial_backoff_seconds,
                                     self.config.pod_max_backoff_seconds)
        self.next_start_node_index = 0
        # node_order() and each row's position in it (for PreFilterResult's named nodes).
        self._order_of: np.ndarray | None = None
        self._position = np.zeros(0, dtype=np.int64)
        # Pod assumptions are the scheduler's own (its cache); its handlers react to everything else.
        cluster.subscribe(self._on_event, types=(EventType.ADDED, EventType.UPDATED, EventType.DELETED, EventType.BOUND))
        self.enqueue_pending()

    @property
    def nominated(self) -> dict[str, str]:
        return self.nominator.nominated

    # ------------------------------------------------------------ events

    def _on_event(self, ev: Event) -> None:
        """The scheduler's event handlers: pending pods enter the queue, changes move rejected pods back."""
        kind = ev.kind
        if kind != "Pod":
            if kind:
                self.queue.on_cluster_event(kind, _ACTIONS[ev.type])
            return
        pod: Pod = ev.obj
        t = ev.type
        if t is EventType.DELETED:
            self.nominator.delete(pod.key)
            if self.waiting_pods:
                # RejectWaitingPod: a deleted pod stops waiting (its binding cycle fails at settle_permits).
                self.waiting_pods.reject_removed(pod)
            if pod.node_name:
                self.queue.on_cluster_event("Pod", "delete")
            else:
                self.queue.delete(pod)
        elif t is EventType.BOUND:
            if pod.key in self.queue.infos and self.queue.where.get(pod.key) != "inflight":
                # Bound by someone else: it leaves the queue.
                self.queue.delete(pod)
            self.queue.on_cluster_event("Pod", "add")
        elif t is EventType.ADDED:
            if pod.node_name:
                self.queue.on_cluster_event("Pod", "add")
            elif not pod.is_terminal and not pod.is_terminating and self.responsible_for(pod):
                self.queue.add(pod)
        elif t is EventType.UPDATED:
            if pod.node_name:
                self.queue.on_cluster_event("Pod", "update")
            elif pod.key in self.queue.infos:
                if pod.is_terminal or pod.is_terminating:
                    self.queue.delete(pod)
                else:
                    # A pending pod changed (e.g. its scheduling gates were removed).
                    self.queue.update(pod, spec_changed=_spec_changed(ev.old, pod))

    def enqueue_pending(self) -> None:
        """Every pending pod of the state not in the queue yet enters it (in the state's order)."""
        for p in self.cluster.pending_pods():
            if p.key not in self.queue.infos and self.responsible_for(p):
                self.queue.add(p)

    def responsible_for(self, pod: Pod) -> bool:
        """Whether this scheduler takes the pod (with `only_own_pods`, only pods one of its profiles serves)."""
        return not self.only_own_pods or pod.scheduler_name in self.frameworks

    def framework_for(self, pod: Pod) -> Framework | None:
        return self.frameworks.get(pod.scheduler_name)

    def nominated_pods_for(self, node_name: str, pod: Pod) -> list[Pod]:
        return self.nominator.nominated_pods_for(node_name, pod)

    # ------------------------------------------------------------ finding nodes

    def num_feasible_nodes_to_find(self, fwk: Framework, num_all_nodes: int) -> int:
        if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
            return num_all_nodes
        pct = fwk.profile.percentage_of_nodes_to_score
        if pct is None:
            pct = self.config.percentage_of_nodes_to_score or 0
        if pct == 0:
            pct = 50 - num_all_nodes // 125
            if pct < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
                pct = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
        num = num_all_nodes * pct // 100
        return max(num, MIN_FEASIBLE_NODES_TO_FIND)

    def nodes_passing(self, fwk: Framework, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray:
        mask = fwk.filter_mask(state, pod, rows)
        if self.nominator:
            # Only nodes with nominated pods need the slower check with those pods added.
            target_rows = self.nominator.rows_with_nominations(excluding=pod.key)
            if target_rows:
                infos = self.cluster.node_infos
                for i in np.flatnonzero(np.isin(rows, np.fromiter(target_rows, dtype=np.int64))):
                    if not mask[i]:
                        continue
                    r = int(rows[i])
                    nominated = self.nominated_pods_for(target_rows[r], pod)
                    if nominated:
                        mask[i] = fwk.run_filter_with_nominated_pods(state, pod, infos[r], nominated).is_success
        return mask

    @staticmethod
    def _segment(rows: np.ndarray, start: int, lo: int, hi: int) -> np.ndarray:
        """Positions lo..hi of `rows` rotated to begin at `start` (without building the whole rotation)."""
        n = len(rows)
        a, b = start + lo, start + hi
        if b <= n:
            return rows[a:b]
        if a >= n:
            return rows[a - n:b - n]
        return np.concatenate((rows[a:], rows[:b - n]))

    def find_nodes_that_fit(self, fwk: Framework, state: CycleState, pod: Pod,
                            diagnosis: Diagnosis) -> tuple[np.ndarray, int]:
        """Feasible rows (in evaluation order) and how many nodes were evaluated."""
        cluster = self.cluster
        all_rows = cluster.node_order()
        pre_res, st = fwk.run_pre_filter(state, pod)
        if not st.is_success:
            if st.code is Code.ERROR:
                raise PluginError(st, f"running PreFilter plugin {st.plugin!r}: {st.message}")
            for info in cluster.node_infos:
                diagnosis.node_to_status[info.name] = st
            diagnosis.pre_filter_msg = st.message
            if st.plugin:
                (diagnosis.pending_plugins if st.code is Code.PENDING else diagnosis.unschedulable_plugins).add(st.plugin)
            return np.zeros(0, dtype=np.int64), 0

        if pod.nominated_node_name:
            nominated_info = cluster.node_info_by_name.get(pod.nominated_node_name)
            if nominated_info is not None and (pre_res.all_nodes() or nominated_info.name in (pre_res.node_names or ())):
                rows = np.array([nominated_info.index], dtype=np.int64)
                if self.nodes_passing(fwk, state, pod, rows)[0]:
                    return rows, 1

        rows = all_rows
        names: set[str] | None = None
        if not pre_res.all_nodes():
            # Only the nodes PreFilter named (and that exist) are evaluated, in node order; the others get
            # one status (upstream's SetAbsentNodesStatus), written only if the pod fits nowhere, since
            # nothing reads it otherwise.
            names = pre_res.node_names or set()
            rows = self._rows_named(names)
        n = len(rows)
        if n == 0:
            if names is not None:
                self._record_absent(state, names, diagnosis)
            return rows, 0
        to_find = self.num_feasible_nodes_to_find(fwk, n)
        start = self.next_start_node_index % n
        # Nodes are evaluated in segments from the start index and the search stops once `to_find`
        # feasible nodes are known, as upstream's cancelled parallel loop does; a segment grows when it
        # had too few feasible nodes, so a mostly-full cluster needs only a few passes.
        feasible_parts: list[np.ndarray] = []
        failed_parts: list[np.ndarray] = []
        found = 0
        processed = 0
        chunk = to_find
        while processed < n:
            hi = min(n, processed + chunk)
            seg = self._segment(rows, start, processed, hi)
            mask = self.nodes_passing(fwk, state, pod, seg)
            pos = mask.nonzero()[0]
            need = to_find - found
            if len(pos) >= need:
                pos = pos[:need]
                last = int(pos[-1]) + 1
                feasible_parts.append(seg[pos])
                if last > len(pos):
                    failed_parts.append(seg[:last][~mask[:last]])
                processed += last
                found = to_find
                break
            feasible_parts.append(seg[pos])
            if len(pos) < len(seg):
                failed_parts.append(seg[~mask])
            found += len(pos)
            processed = hi
            chunk *= 2
        self.next_start_node_index = (start + processed) % n
        feasible = feasible_parts[0] if len(feasible_parts) == 1 else np.concatenate(feasible_parts)
        if failed_parts:
            failed = failed_parts[0] if len(failed_parts) == 1 else np.concatenate(failed_parts)
            if len(feasible):
                # The pod will be placed: nothing reads why the other nodes failed, and finding out
                # node by node (the per-node forms) would cost more than the whole vectorised cycle.
                diagnosis.unresolved_failed_rows = failed
            else:
                if names is not None:
                    self._record_absent(state, names, diagnosis)
                self._record_failures(fwk, state, pod, failed, diagnosis)
        elif not len(feasible) and names is not None:
            self._record_absent(state, names, diagnosis)
        return feasible, processed

    def _rows_named(self, names: set[str]) -> np.ndarray:
        """The rows of the nodes named (those that exist), in node order (`node_order`)."""
        cluster = self.cluster
        order = cluster.node_order()
        if self._order_of is not order:
            pos = np.empty(len(order), dtype=np.int64)
            pos[order] = np.arange(len(order), dtype=np.int64)
            self._order_of, self._position = order, pos
        by_name = cluster.node_info_by_name
        found = [by_name[name].index for name in names if name in by_name]
        rows = np.array(found, dtype=np.int64)
        if len(rows) > 1:
            rows = rows[np.argsort(self._position[rows], kind="stable")]
        return rows

    def _record_absent(self, state: CycleState, names: set[str], diagnosis: Diagnosis) -> None:
        """The status of every node PreFilter did not name (written before the evaluated nodes' statuses)."""
        # Go's %v of a string slice: "[A B]".
        reason = f"node(s) didn't satisfy plugin(s) [{' '.join(self._prefilter_result_plugins(state))}]"
        statuses = diagnosis.node_to_status
        for info in self.cluster.node_infos:
            if info.name not in names:
                statuses[info.name] = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [reason])

    def _record_failures(self, fwk: Framework, state: CycleState, pod: Pod, failed: np.ndarray,
                         diagnosis: Diagnosis) -> None:
        """The status of the first rejecting plugin on each failed node, and the plugins that rejected."""
        statuses = fwk.first_failure_statuses(state, pod, failed)
        for name, fst in statuses.items():
            if fst.code is Code.SUCCESS:
                # Failed only with nominated pods counted: upstream reports the plugin's status then too.
                statuses[name] = fst = fwk.run_filter_with_nominated_pods(
                    state, pod, self.cluster.node_info_by_name[name], self.nominated_pods_for(name, pod))
            if fst.code is Code.ERROR:
                raise PluginError(fst, f"running Filter plugin {fst.plugin!r}: {fst.message}")
        diagnosis.node_to_status.update(statuses)
        for plugin, pending in {(st.plugin, st.code is Code.PENDING) for st in statuses.values()}:
            if plugin:
                (diagnosis.pending_plugins if pending else diagnosis.unschedulable_plugins).add(plugin)

    @staticmethod
    def _prefilter_result_plugins(state: CycleState) -> list[str]:
        return sorted(k.split("/", 1)[1] for k in state._data if k.startswith("PreFilterResult/"))

    # ------------------------------------------------------------ scoring

    def select_host(self, rows: np.ndarray, total: np.ndarray) -> int:
        first = int(total.argmax())
        ties = (total == total[first]).nonzero()[0]
        if len(ties) == 1:
            pick = first
        elif self.tie_break == "seededNodeOrder":
            pick = ties[int(self.node_rank()[rows[ties]].argmin())]
        else:
            pick = ties[int(self.rng.integers(len(ties)))]
        return int(rows[pick])

    def node_rank(self) -> np.ndarray:
        """Per table row, the node's place in a preference order drawn from the seed and the node's name."""
        if self._rank is None or self._rank_generation != self.cluster.node_generation:
            seed = str(self.seed).encode()
            self._rank = np.array([int.from_bytes(hashlib.blake2b(seed + b"\0" + info.name.encode(), digest_size=8)
                                                  .digest(), "big") >> 1 for info in self.cluster.node_infos],
                                  dtype=np.int64)
            self._rank_generation = self.cluster.node_generation
        return self._rank

    def prioritize(self, fwk: Framework, state: CycleState, pod: Pod, rows: np.ndarray) -> ScoreBreakdown:
        if not fwk.score:
            return ScoreBreakdown(rows, total=np.ones(len(rows), dtype=np.int64))
        st = fwk.run_pre_score(state, pod, rows)
        if not st.is_success:
            raise PluginError(st, f"running PreScore plugin {st.plugin!r}: {st.message}")
        breakdown, st = fwk.run_score(state, pod, rows, detail=False)
        if not st.is_success:
            raise PluginError(st, f"running Score plugin {st.plugin!r}: {st.message}")
        return breakdown

    def schedule_pod(self, fwk: Framework, state: CycleState, pod: Pod) -> ScheduleResult:
        if self.cluster.num_nodes == 0:
            raise FitError(pod, 0, Diagnosis())
        diagnosis = Diagnosis()
        feasible, evaluated = self.find_nodes_that_fit(fwk, state, pod, diagnosis)
        if len(feasible) == 0:
            raise FitError(pod, self.cluster.num_nodes, diagnosis)
        if len(feasible) == 1:
            return ScheduleResult(self.cluster.node_infos[int(feasible[0])].name, evaluated, 1)
        breakdown = self.prioritize(fwk, state, pod, feasible)
        assert breakdown.total is not None
        row = self.select_host(feasible, breakdown.total)
        return ScheduleResult(self.cluster.node_infos[row].name, evaluated, len(feasible))

    # ------------------------------------------------------------ one attempt

    def schedule_one(self, qpi: Any) -> Outcome:
        """A scheduling cycle and a binding cycle for one queued pod."""
        pod = qpi.pod
        fwk = self.framework_for(pod)
        if fwk is None:
            self.queue.delete(pod)
            return Outcome(pod, None, reason=f"no profile for schedulerName {pod.scheduler_name!r}")
        cycle = self.queue.scheduling_cycle
        state = CycleState()
        state.write(PODS_TO_ACTIVATE_KEY, PodsToActivate())
        try:
            result = self.schedule_pod(fwk, state, pod)
        except PluginError as pe:
            # A plugin failed (not a verdict on the pod): this attempt fails and the pod backs off; the
            # other pods go on (upstream's handleSchedulingFailure with an Error status).
            qpi.unschedulable_plugins = set()
            self.queue.add_unschedulable(qpi, cycle, error=True)
            return Outcome(pod, None, reason=pe.message, status=pe.status)
        except FitError as fe:
            outcome = Outcome(pod, None)
            d = fe.diagnosis
            if fwk.post_filter and d.node_to_status:
                pf, pst = fwk.run_post_filter(state, pod, d.node_to_status)
                if pst.message:
                    d.post_filter_msg = pst.message
                if pst.code is Code.ERROR:
                    qpi.unschedulable_plugins = set()
                    self.queue.add_unschedulable(qpi, cycle, error=True)
                    return Outcome(pod, None, reason=f"running PostFilter plugin {pst.plugin!r}: {pst.message}",
                                   status=pst)
                if pf is not None:
                    # ModeOverride: a result nominates its node, or clears the nomination when it names none.
                    if pf.nominated_node_name:
                        outcome.nominated_node = pf.nominated_node_name
                        outcome.preempted = [v.key for v in pf.victims]
                    self._nominate(pod, pf)
            outcome.reason = fe.message()
            qpi.unschedulable_plugins = set(d.unschedulable_plugins)
            qpi.pending_plugins = set(d.pending_plugins)
            self.queue.add_unschedulable(qpi, cycle)
            return outcome
        return self._assume_and_bind(fwk, state, qpi, result.suggested_host, cycle)

    def _nominate(self, pod: Pod, pf: PostFilterResult) -> None:
        """Record (or clear) the pod's nomination, in the nominator and in its status."""
        node = pf.nominated_node_name
        if node:
            self.nominator.add(pod.key, node)
        else:
            self.nominator.delete(pod.key)
        cur = self.cluster.pods.get(pod.key)
        if cur is not None and cur.nominated_node_name != node:
            self._patch_status(cur, nominatedNodeName=node or None)

    def _patch_status(self, pod: Pod, **status: Any) -> None:
        """A status write through the API server (upstream's PatchPodStatus); a refusal is not fatal: the
        nomination stays in the nominator and the next attempt writes it again."""
        try:
            self.client.update_pod_status(pod, cause=Cause.SCHEDULER, **status)
        except ApiError:
            pass

    def _assume_and_bind(self, fwk: Framework, state: CycleState, qpi: Any, host: str, cycle: int) -> Outcome:
        # Assume: the pod counts on the node from now on, before binding completes (a pod that waits at
        # Permit stays assumed, and unbound, until it is allowed or rejected).
        pod = self.cluster.assume(qpi.pod, host)
        qpi.pod = pod
        st = fwk.run_reserve(state, pod, host)
        if st.is_success:
            st = fwk.run_permit(state, pod, host)
        if st.code is Code.WAIT:
            self._activate(state)
            wp = self.waiting_pods.of(pod)
            if wp is not None:
                wp.binding = _ParkedBinding(fwk, state, qpi, host, cycle)
            return Outcome(pod, None, waiting_on=host, reason=st.message, status=st)
        if not st.is_success:
            fwk.run_unreserve(state, pod, host)
            qpi.pod = self.cluster.unbind(pod)
            qpi.unschedulable_plugins = {st.plugin} if st.plugin else set()
            self.queue.add_unschedulable(qpi, cycle, error=st.code is Code.ERROR)
            return Outcome(qpi.pod, None, reason=self._rejection_message(pod, host, st), status=st)
        self._activate(state)
        return self._binding_cycle(fwk, state, qpi, host, cycle)

    def _binding_cycle(self, fwk: Framework, state: CycleState, qpi: Any, host: str, cycle: int) -> Outcome:
        """PreBind, Bind, PostBind of an assumed pod that Permit allowed."""
        pod = qpi.pod
        st = fwk.run_pre_bind(state, pod, host)
        if st.is_success:
            st = fwk.run_bind(state, pod, host)
        if not st.is_success:
            return self._binding_failed(fwk, state, qpi, host, cycle, st)
        bound = self.cluster.pods.get(pod.key, pod)
        fwk.run_post_bind(state, bound, host)
        self.nominator.delete(pod.key)
        if bound.nominated_node_name:
            self._patch_status(bound, nominatedNodeName=None)
        self.queue.done(bound)
        self._activate(state)
        return Outcome(bound, host)

    def _binding_failed(self, fwk: Framework, state: CycleState, qpi: Any, host: str, cycle: int,
                        st: Status) -> Outcome:
        """handleBindingCycleError: unreserve, forget the assumed pod, requeue it, and since its resources
        are free again move the other unschedulable pods (AssignedPodDelete)."""
        pod = qpi.pod
        fwk.run_unreserve(state, pod, host)
        reason = self._rejection_message(pod, host, st)
        if pod.key not in self.cluster.pods:
            self.queue.delete(pod)  # deleted while it waited: nothing to forget, nothing to retry
            return Outcome(pod, None, reason=reason, status=st)
        qpi.pod = pod = self.cluster.unbind(pod)
        out = Outcome(pod, None, reason=reason, status=st)
        self._nominate(pod, PostFilterResult())
        qpi.unschedulable_plugins = {st.plugin} if st.plugin else set()
        self.queue.add_unschedulable(qpi, cycle, error=st.code is Code.ERROR)
        self.queue.on_cluster_event("Pod", "delete", exclude=pod.key)
        return out

    @staticmethod
    def _rejection_message(pod: Pod, host: str, st: Status) -> str:
        """A rejection after the node was chosen reads as a FitError over that one node."""
        if not st.is_rejected:
            return st.message
        return FitError(pod, 1, Diagnosis(node_to_status={host: st})).message()

    def _activate(self, state: CycleState) -> None:
        """Move the pods plugins asked to activate (PodsToActivate) to activeQ."""
        pta = state.read(PODS_TO_ACTIVATE_KEY)
        if pta is not None and pta.pods:
            self.queue.activate(pta.pods)
            pta.pods = {}

    # ------------------------------------------------------------ Permit: waiting pods

    def settle_permits(self) -> list[Outcome]:
        """Fire the Permit timers due now, then finish the binding cycle of every pod that was allowed or
        rejected since (in signal order, including pods a finished cycle rejects in turn)."""
        waiting = self.waiting_pods
        if not waiting:
            return []
        waiting.fire_timers(self.clock())
        out: list[Outcome] = []
        while waiting.has_signalled:
            for wp in waiting.take_signalled():
                done = self._finish_waiting(wp)
                if done is not None:
                    out.append(done)
        return out

    def _finish_waiting(self, wp: WaitingPod) -> Outcome | None:
        """WaitOnPermit returned for `wp`: bind it, or fail its binding cycle with the rejection."""
        b = wp.binding
        sig = wp.signal
        if not isinstance(b, _ParkedBinding) or sig is None:
            return None
        if sig.allowed:
            out = self._binding_cycle(b.fwk, b.state, b.qpi, b.host, b.cycle)
        else:
            st = Status(Code.UNSCHEDULABLE, [sig.message], sig.plugin)
            out = self._binding_failed(b.fwk, b.state, b.qpi, b.host, b.cycle, st)
        out.waited = self.clock() - wp.since
        out.timed_out = sig.timed_out
        return out

    # ------------------------------------------------------------ the loop

    def run_until_idle(self, advance: Callable[[float], None] | None = None,
                       on_outcome: Callable[[Outcome], None] | None = None, max_attempts: int = 1_000_000,
                       give_up_after: float | None = None) -> None:
        """Schedule until nothing more can change: activeQ empty, no pod waiting at Permit, and no backoff
        or graceful deletion left to wait for. `advance(t)` moves the virtual clock to t (then terminations
        due by t finish, Permit timers due by t fire).

        A pod whose attempt failed with a plugin error is retried after its backoff only if the cluster
        changed since (upstream retries forever; a one-shot run would never end). `give_up_after`: once
        pods have waited at Permit, stop when that many seconds pass without a binding (a gang that cannot
        be placed is retried for ever too)."""
        with gc_frozen():  # the cluster's objects live through the run
            self._run_until_idle(advance, on_outcome, max_attempts, give_up_after)

    def _run_until_idle(self, advance: Callable[[float], None] | None, on_outcome: Callable[[Outcome], None] | None,
                        max_attempts: int, give_up_after: float | None) -> None:
        attempts = 0
        errored: dict[str, int] = {}
        server = self.client if isinstance(self.client, InProcessAPIServer) else None
        waiting = self.waiting_pods
        last_bound = self.clock()
        while attempts < max_attempts:
            if waiting:  # only profiles with Permit plugins that wait ever have waiting pods
                for late in self.settle_permits():
                    if late.node is not None:
                        last_bound = self.clock()
                    if on_outcome is not None:
                        on_outcome(late)
            qpi = self.queue.pop()
            if qpi is None:
                waits = [t for t in (self.queue.next_backoff_expiry(), waiting.next_deadline(),
                                     server.next_deadline() if server is not None else None) if t is not None]
                if not waits or advance is None:
                    return
                t = min(waits)
                if give_up_after is not None and waiting.used and t - last_bound > give_up_after:
                    return
                advance(t)
                if server is not None:
                    server.advance(t)
                continue
            key = qpi.pod.key
            if errored.get(key) == self.cluster.revision:
                self.queue.delete(qpi.pod)
                continue
            attempts += 1
            out = self.schedule_one(qpi)
            if out.status is not None and out.status.code is Code.ERROR:
                errored[key] = self.cluster.revision
            else:
                errored.pop(key, None)
            if give_up_after is not None and out.node is not None:
                last_bound = self.clock()
            if on_outcome is not None:
                on_outcome(out)


class PluginError(Exception):
    """A plugin returned an Error status: the attempt fails, the pod backs off."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _spec_changed(old: Pod | None, new: Pod) -> bool:
    """isPodUpdated: anything but the status (and bookkeeping metadata) differs."""
    if old is None:
        return True
    if old.raw.get("spec") is not new.raw.get("spec") and old.raw.get("spec") != new.raw.get("spec"):
        return True
    return old.meta.labels != new.meta.labels or old.meta.annotations != new.meta.annotations
