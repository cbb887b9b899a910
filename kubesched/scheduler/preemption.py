"""The preemption Evaluator: find nodes where removing lower-priority pods lets a pod fit, pick one, preempt.

Follows kube-scheduler's `framework/preemption`: a preemption plugin supplies the policy (who may preempt,
how victims are chosen on one node, how many candidates to look for); the Evaluator runs the common
flow — eligibility, candidate nodes (those whose Filter status is Unschedulable), a dry run on copies of
their NodeInfo and CycleState, `pickOneNodeForPreemption`, then the victims are deleted through the
ClusterState and lower-priority pods nominated to the chosen node lose their nomination.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kubesched.api.objects import Pod, PodDisruptionBudget, parse_time
from kubesched.client.interface import ApiError, KubeEvent, NotFound
from kubesched.cluster.events import Cause
from kubesched.cluster.state import NodeInfo
from kubesched.errors import InputError
from kubesched.scheduler.framework import Code, CycleState, Diagnosis, FitError, Handle, PostFilterResult, Status

if TYPE_CHECKING:
    from kubesched.scheduler.runtime import Framework

INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
NOT_HELPFUL = "Preemption is not helpful for scheduling"


@dataclass(slots=True)
class Victims:
    """extenderv1.Victims: the pods to preempt on one node (most important first) and their PDB violations."""

    pods: list[Pod]
    num_pdb_violations: int = 0


@dataclass(slots=True)
class Candidate:
    """A node the preemptor could be nominated to, with the victims that must go."""

    name: str
    victims: Victims


class PreemptionPolicy(Protocol):
    """What a preemption plugin decides (upstream's preemption.Interface)."""

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]: ...

    def pod_eligible_to_preempt_others(self, pod: Pod, nominated_node_status: Status) -> tuple[bool, str]: ...

    def select_victims_on_node(self, state: CycleState, pod: Pod, node_info: NodeInfo,
                               pdbs: Sequence[PodDisruptionBudget]) -> tuple[list[Pod], int, Status]: ...

    def quick_reject(self, pod: Pod, node_info: NodeInfo | None) -> Status | None:
        """Without copying the node: the status select_victims_on_node would return when it is sure to find
        no victim there (None: run it); with no node, that status when it holds for every node."""
        ...

    def ordered_score_funcs(self, nodes_to_victims: dict[str, Victims]) -> list[Callable[[str], int]] | None: ...


# ---------------------------------------------------------------- pod helpers


def pod_start_time(pod: Pod, now: float) -> float:
    """util.GetPodStartTime: status.startTime, or now for pods that have not started (seconds since the epoch)."""
    cached = pod.cache.get("start_time")
    if cached is None:
        raw = pod.status.get("startTime")
        try:
            t = parse_time(raw, "status.startTime")
        except InputError as e:
            raise e.located(obj=f"Pod {pod.key}") from None
        cached = t.timestamp() if t is not None else False
        pod.cache["start_time"] = cached
    return now if cached is False else float(cached)


def more_important_key(now: float) -> Callable[[Pod], tuple[int, float]]:
    """Sort key for util.MoreImportantPod: higher priority first, then the earlier start time."""
    return lambda p: (-p.effective_priority, pod_start_time(p, now))


def earliest_start_of_highest_priority(victims: Victims, now: float) -> float | None:
    """util.GetEarliestPodStartTime: the earliest start among the victims with the highest priority."""
    if not victims.pods:
        return None
    best_prio = victims.pods[0].effective_priority
    earliest = pod_start_time(victims.pods[0], now)
    for p in victims.pods:
        prio = p.effective_priority
        if prio == best_prio:
            earliest = min(earliest, pod_start_time(p, now))
        elif prio > best_prio:
            best_prio = prio
            earliest = pod_start_time(p, now)
    return earliest


def pdb_matches(pdb: PodDisruptionBudget, pod: Pod) -> bool:
    """Whether the PDB covers the pod for preemption: same namespace; a nil or empty selector matches nothing."""
    if pdb.meta.namespace != pod.namespace:
        return False
    sel = pdb.selector
    if sel.nothing or sel.empty:
        return False
    return sel.matches(pod.labels)


def filter_pods_with_pdb_violation(pods: Sequence[Pod], pdbs: Sequence[PodDisruptionBudget]) -> tuple[list[Pod], list[Pod]]:
    """Split `pods` (order kept) into those whose eviction would exceed a PDB's disruptionsAllowed and the rest.

    A pod already listed in a PDB's status.disruptedPods was counted by the API server and does not use
    up the budget again.
    """
    allowed = [pdb.disruptions_allowed for pdb in pdbs]
    violating: list[Pod] = []
    non_violating: list[Pod] = []
    for pod in pods:
        violated = False
        if pod.labels:
            for i, pdb in enumerate(pdbs):
                if not pdb_matches(pdb, pod) or pod.name in pdb.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else non_violating).append(pod)
    return violating, non_violating


def reprieve_in_order(violating: Sequence[Pod], non_violating: Sequence[Pod],
                      reprieve: Callable[[Pod], tuple[bool, Status]], victims: list[Pod],
                      key: Callable[[Pod], tuple[int, float]]) -> tuple[list[Pod], int, Status]:
    """The end of selectVictimsOnNode: try to keep each pod — those whose eviction would violate a PDB
    first, then the others, each group most important first — counting the PDB-violating ones that must
    go anyway; `reprieve(p)` puts p back and says whether the preemptor still fits (appending p to
    `victims` when it does not). Victims come out ordered by importance when both groups gave some."""
    num_violating = 0
    for p in violating:
        kept, st = reprieve(p)
        if not st.is_success:
            return [], 0, Status(Code.ERROR, [st.message])
        if not kept:
            num_violating += 1
    for p in non_violating:
        _, st = reprieve(p)
        if not st.is_success:
            return [], 0, Status(Code.ERROR, [st.message])
    if violating and non_violating:
        victims.sort(key=key)
    return victims, num_violating, Status()


def pod_terminating_by_preemption(pod: Pod) -> bool:
    """Being deleted, with a DisruptionTarget condition set by scheduler preemption."""
    if pod.meta.deletion_timestamp is None:
        return False
    for c in pod.status.get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == "DisruptionTarget":
            return c.get("status") == "True" and c.get("reason") == "PreemptionByScheduler"
    return False


# ---------------------------------------------------------------- choosing a node


def pick_one_node_for_preemption(nodes_to_victims: dict[str, Victims], now: float,
                                 score_funcs: list[Callable[[str], int]] | None = None) -> str:
    """pickOneNodeForPreemption: apply ordered criteria, keeping the ties of each for the next.

    Defaults: fewest PDB violations, lowest highest-victim priority, smallest sum of priorities, fewest
    victims, latest start time of the highest-priority victims; then the first node.
    """
    if not nodes_to_victims:
        return ""
    candidates = list(nodes_to_victims)
    if not score_funcs:
        def min_pdb(node: str) -> int:
            return -nodes_to_victims[node].num_pdb_violations

        def min_highest_priority(node: str) -> int:
            return -nodes_to_victims[node].pods[0].effective_priority

        def min_sum_priorities(node: str) -> int:
            # Shifted by MaxInt32+1 so that more pods of a negative priority never look cheaper.
            return -sum(p.effective_priority + INT32_MAX + 1 for p in nodes_to_victims[node].pods)

        def min_num_pods(node: str) -> int:
            return -len(nodes_to_victims[node].pods)

        def latest_start_time(node: str) -> int:
            t = earliest_start_of_highest_priority(nodes_to_victims[node], now)
            return INT64_MIN if t is None else int(round(t * 1e9))

        score_funcs = [min_pdb, min_highest_priority, min_sum_priorities, min_num_pods, latest_start_time]
    for f in score_funcs:
        best = INT64_MIN
        selected: list[str] = []
        for node in candidates:
            s = f(node)
            if s > best:
                best = s
                selected = []
            if s == best:
                selected.append(node)
        if len(selected) == 1:
            return selected[0]
        candidates = selected
    return candidates[0]


# ---------------------------------------------------------------- the evaluator


class Evaluator:
    """The preemption flow shared by preemption plugins (upstream's preemption.Evaluator, synchronous)."""

    def __init__(self, plugin_name: str, handle: Handle, policy: PreemptionPolicy) -> None:
        self.plugin_name = plugin_name
        self.handle = handle
        self.policy = policy

    @property
    def framework(self) -> Framework:
        fwk = self.handle.framework
        assert fwk is not None, "the framework sets itself on its handle"
        return fwk

    # -------------------------------------------------------- the nominator

    def nominated_pods_for(self, node_name: str, pod: Pod) -> list[Pod]:
        """Pods nominated to the node with priority at least the pod's (what Filter must leave room for)."""
        return self.handle.nominator.nominated_pods_for(node_name, pod)

    def lower_priority_nominated_pods(self, pod: Pod, node_name: str) -> list[Pod]:
        return self.handle.nominator.lower_priority_pods(pod, node_name)

    def _clear_nomination(self, pods: Sequence[Pod]) -> None:
        """ClearNominatedNodeName: in the nominator, and in each pod's status through the API server."""
        cluster = self.handle.cluster
        for p in pods:
            self.handle.nominator.delete(p.key)
            cur = cluster.pods.get(p.key)
            if cur is not None and cur.nominated_node_name:
                try:
                    self.handle.client.update_pod_status(cur, cause=Cause.PREEMPTION, nominatedNodeName=None)
                except ApiError:
                    pass  # upstream logs it and goes on

    # -------------------------------------------------------- Preempt

    def preempt(self, state: CycleState, pod: Pod, statuses: dict[str, Status]) -> tuple[PostFilterResult | None, Status]:
        """Preempt: <result, Success> nominates a node; <None, Unschedulable> keeps the nomination as it is;
        <result with no node, Unschedulable> clears it (preemption cannot help)."""
        cluster = self.handle.cluster
        pod = cluster.pods.get(pod.key, pod)

        nominated_status = statuses.get(pod.nominated_node_name) if pod.nominated_node_name else None
        if nominated_status is None:
            nominated_status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        ok, msg = self.policy.pod_eligible_to_preempt_others(pod, nominated_status)
        if not ok:
            return None, Status(Code.UNSCHEDULABLE, [msg] if msg else [])

        num_all = cluster.num_nodes
        if num_all == 0:
            return None, Status(Code.ERROR, ["no nodes available"])
        candidates, node_statuses, errors = self.find_candidates(state, pod, statuses)
        if errors and not candidates:
            return None, Status(Code.ERROR, [errors[0]])
        if not candidates:
            return PostFilterResult(""), Status(Code.UNSCHEDULABLE, [self._fit_error_message(pod, node_statuses)])

        best = self.select_candidate(candidates)
        if best is None or not best.name:
            return None, Status(Code.UNSCHEDULABLE, ["no candidate node for preemption"])
        st = self.prepare_candidate(best, pod)
        if not st.is_success:
            return None, st
        return PostFilterResult(best.name, list(best.victims.pods)), Status()

    def _fit_error_message(self, pod: Pod, node_statuses: dict[str, Status]) -> str:
        """FitError.Error() over the dry run's statuses; nodes it did not record count as 'not helpful'."""
        diagnosis = Diagnosis()
        absent = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [NOT_HELPFUL])
        for name in self.framework.node_names():
            diagnosis.node_to_status[name] = node_statuses.get(name, absent)
        return FitError(pod, self.handle.cluster.num_nodes, diagnosis).message()

    def find_candidates(self, state: CycleState, pod: Pod,
                        statuses: dict[str, Status]) -> tuple[list[Candidate], dict[str, Status], list[str]]:
        """Nodes whose Filter status is Unschedulable (removing pods may help), in node order, dry-run."""
        cluster = self.handle.cluster
        infos = cluster.node_infos
        potential: list[NodeInfo] = []
        names = self.framework.node_names()
        for r in cluster.node_order().tolist():
            st = statuses.get(names[r])
            if st is not None and st.code is Code.UNSCHEDULABLE:
                potential.append(infos[r])
        if not potential:
            return [], {}, []
        pdbs = list(cluster.pdbs.values())
        offset, num_candidates = self.policy.get_offset_and_num_candidates(len(potential))
        return self.dry_run_preemption(state, pod, potential, pdbs, offset, num_candidates)

    def dry_run_preemption(self, state: CycleState, pod: Pod, potential: Sequence[NodeInfo],
                           pdbs: Sequence[PodDisruptionBudget], offset: int,
                           num_candidates: int) -> tuple[list[Candidate], dict[str, Status], list[str]]:
        """DryRunPreemption, sequentially: from `offset`, stop once there are `num_candidates` candidates of
        which at least one violates no PDB. Candidates without PDB violations come first."""
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        node_statuses: dict[str, Status] = {}
        errors: list[str] = []
        n = len(potential)
        everywhere = self.policy.quick_reject(pod, None)
        if everywhere is not None:
            return [], {info.node.name: everywhere for info in potential}, []
        for i in range(n):
            orig = potential[(offset + i) % n]
            quick = self.policy.quick_reject(pod, orig)
            if quick is not None:
                node_statuses[orig.name] = quick
                continue
            info = orig.clone()
            pods, num_violations, st = self.policy.select_victims_on_node(state.clone(), pod, info, pdbs)
            if st.is_success and pods:
                c = Candidate(info.name, Victims(pods, num_violations))
                target = non_violating if num_violations == 0 else violating
                if len(target) < num_candidates:
                    target.append(c)
                if non_violating and len(non_violating) + len(violating) >= num_candidates:
                    break
                continue
            if st.is_success:
                st = Status(Code.ERROR, [f"expected at least one victim pod on node {info.name!r}"])
            if st.code is Code.ERROR:
                errors.append(st.message)
            node_statuses[info.name] = st
        return non_violating + violating, node_statuses, errors

    def select_candidate(self, candidates: list[Candidate]) -> Candidate | None:
        if not candidates:
            return None
        if len(candidates) == 1:
            return candidates[0]
        victims = {c.name: c.victims for c in candidates}
        funcs = self.policy.ordered_score_funcs(victims)
        name = pick_one_node_for_preemption(victims, self.handle.now(), funcs)
        for c in candidates:
            if c.name == name:
                return c
        return candidates[0]

    def prepare_candidate(self, c: Candidate, pod: Pod) -> Status:
        """prepareCandidate: each victim not already being deleted gets the DisruptionTarget condition
        (PreemptionByScheduler), is deleted through the API (gracefully) and a Preempted event is recorded;
        then the nominations of lower-priority pods on the node are cleared."""
        cluster = self.handle.cluster
        client = self.handle.client
        for victim in c.victims.pods:
            if victim.meta.deletion_timestamp is not None:
                # Graceful deletion already started: whoever deletes it finishes the job.
                continue
            cur = cluster.pods.get(victim.key)
            if cur is None:
                continue
            try:
                conditions = [x for x in cur.status.get("conditions") or [] if isinstance(x, dict)
                              and x.get("type") != "DisruptionTarget"]
                conditions.append({"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                                   "message": f"{pod.scheduler_name}: preempting to accommodate a higher priority pod"})
                cur = client.update_pod_status(cur, cause=Cause.PREEMPTION, conditions=conditions)
                client.delete_pod(cur, cause=Cause.PREEMPTION)
            except ApiError as e:
                if not isinstance(e, NotFound):
                    return Status(Code.ERROR, [f"preempting {victim.key}: {e.message}"])
                continue
            client.create_event(KubeEvent(f"Pod {victim.key}", "Preempted",
                                          f"Preempted by pod {pod.uid} on node {c.name}",
                                          component=pod.scheduler_name))
        self._clear_nomination(self.lower_priority_nominated_pods(pod, c.name))
        return Status()
