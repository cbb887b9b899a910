"""Node fit answered by the scheduler itself (kubesched's `nodeFitProfile`), not by upstream's NodeFit copy.

Upstream's nodeFit re-implements a few scheduler predicates and drifts from kube-scheduler (seed 003
lists the issues: pod anti-affinity symmetry, topology spread, ignored resources, custom profiles...).
Here the DefaultEvictor asks the scheduler framework of a named profile of a KubeSchedulerConfiguration,
with the same plugins and args:

1. the pod is taken off its node (in a shadow copy of the cluster) and a replacement without a node is
   run through PreFilter and Filter on the candidate nodes;
2. no other node passes → the pod is not evicted (it would stay Pending);
3. the feasible nodes are scored; if the pod's own node scores best → not evicted (the scheduler would
   put it straight back);
4. otherwise the chosen target is remembered and, once the pod is evicted, the replacement is bound
   there in the shadow cluster, so its capacity counts for the rest of the cycle.

The shadow cluster shares pod and node objects with the real one but is changed only through its own
`apply`, so the cycle's view (where evicted pods stay, as upstream's tests see them) is untouched.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from kubesched.api.objects import Node, Pod, parse_pod
from kubesched.cluster.state import ClusterState
from kubesched.config.scheduler_config import default_config
from kubesched.descheduler.framework import Handle
from kubesched.errors import InputError
from kubesched.scheduler.framework import CycleState, SchedulerServices
from kubesched.scheduler.scheduler import PluginError, Scheduler


def clone_cluster(cluster: ClusterState) -> ClusterState:
    """A separate ClusterState holding the same objects (adding objects never mutates them)."""
    shadow = ClusterState()
    for n in cluster.nodes.values():
        shadow.add(n)
    for store in (cluster.namespaces, cluster.priority_classes, cluster.pdbs, cluster.pvcs, cluster.workloads):
        for obj in store.values():
            shadow.add(obj)
    for p in cluster.pods.values():
        shadow.add(p)
    shadow.others = dict(cluster.others)
    return shadow


def replacement_of(pod: Pod) -> Pod:
    """The pod its controller would create: same spec and labels, no node, no nomination, Pending."""
    raw = copy.deepcopy(pod.raw)
    spec = raw.setdefault("spec", {})
    if isinstance(spec, dict):
        spec.pop("nodeName", None)
    raw["status"] = {"phase": "Pending"}
    meta = raw.setdefault("metadata", {})
    if isinstance(meta, dict):
        meta.pop("deletionTimestamp", None)
    return parse_pod(raw)


class SchedulerNodeFit:
    """One scheduler profile answering node-fit questions over a shadow copy of the cluster."""

    def __init__(self, cluster: ClusterState, config: Any, profile: str, seed: int = 0, now: Any = None) -> None:
        self.shadow = clone_cluster(cluster)
        t = now.timestamp() if now is not None else 0.0
        self.scheduler = Scheduler(self.shadow, config, seed=seed, clock=lambda: t,
                                   services=SchedulerServices(start=now))
        fwk = self.scheduler.frameworks.get(profile)
        if fwk is None:
            raise InputError(f"no scheduler profile named {profile!r} in the scheduler configuration (profiles: "
                             f"{', '.join(self.scheduler.frameworks)})", field="nodeFitProfile")
        self.framework = fwk
        self.pending: dict[str, tuple[Pod, str]] = {}
        # Why the last `place` refused, for reports and tests.
        self.last_reason = ""

    def _rows(self, nodes: list[Node]) -> np.ndarray:
        infos = self.shadow.node_info_by_name
        return np.array([infos[n.name].index for n in nodes if n.name in infos], dtype=np.int64)

    def _feasible(self, pod: Pod, nodes: list[Node]) -> tuple[Any, Pod, np.ndarray] | None:
        repl = replacement_of(pod)
        state = CycleState()
        pre, st = self.framework.run_pre_filter(state, repl)
        if not st.is_success:
            self.last_reason = f"PreFilter {st.plugin}: {st.message or st.code.value}"
            return None
        rows = self._rows(nodes)
        if not pre.all_nodes():
            names = pre.node_names or set()
            rows = np.array([r for r in rows if self.shadow.node_infos[r].name in names], dtype=np.int64)
        if len(rows) == 0:
            self.last_reason = "no candidate node"
            return None
        try:
            mask = self.scheduler.nodes_passing(self.framework, state, repl, rows)
        except PluginError as e:
            self.last_reason = e.message
            return None
        return state, repl, rows[mask]

    def _without(self, pod: Pod) -> Pod | None:
        cur = self.shadow.pods.get(pod.key)
        if cur is not None:
            self.shadow.delete(cur)
        return cur

    def _restore(self, cur: Pod | None) -> None:
        if cur is not None:
            self.shadow.add(cur)

    def fits_other_node(self, pod: Pod, nodes: list[Node]) -> bool:
        """Some node other than the pod's own passes the profile's PreFilter and Filter."""
        cur = self._without(pod)
        try:
            found = self._feasible(pod, nodes)
            if found is None:
                return False
            feasible = found[2]
            return any(self.shadow.node_infos[r].name != pod.node_name for r in feasible)
        finally:
            self._restore(cur)

    def place(self, pod: Pod, nodes: list[Node]) -> str | None:
        """Where the scheduler would put the pod's replacement if the pod were evicted now, or None when
        it fits no other node or would come straight back to its own."""
        cur = self._without(pod)
        try:
            found = self._feasible(pod, nodes)
            if found is None:
                return None
            state, repl, feasible = found
            infos = self.shadow.node_infos
            own = [i for i, r in enumerate(feasible) if infos[r].name == pod.node_name]
            others = [i for i, r in enumerate(feasible) if infos[r].name != pod.node_name]
            if not others:
                self.last_reason = "no other node passes the scheduler's filters"
                return None
            if len(feasible) == 1:
                target = infos[feasible[others[0]]].name
            else:
                try:
                    breakdown = self.scheduler.prioritize(self.framework, state, repl, feasible)
                except PluginError as e:
                    self.last_reason = e.message
                    return None
                total = breakdown.total
                assert total is not None
                best = total.max()
                if own and total[own[0]] == best:
                    self.last_reason = f"the scheduler would put it back on {pod.node_name}"
                    return None
                best_others = [i for i in others if total[i] == best]
                target = infos[feasible[best_others[0]]].name
            self.pending[pod.key] = (repl, target)
            self.last_reason = ""
            return target
        finally:
            self._restore(cur)

    def commit(self, pod: Pod) -> None:
        """The pod was evicted: it leaves its node and its replacement takes room on the chosen target."""
        cur = self.shadow.pods.get(pod.key)
        if cur is not None:
            self.shadow.delete(cur)
        placed = self.pending.pop(pod.key, None)
        if placed is not None:
            repl, target = placed
            self.shadow.add(repl)
            self.shadow.bind(repl, target)


def scheduler_node_fit(handle: Handle, profile: str) -> SchedulerNodeFit:
    """The shared SchedulerNodeFit of a scheduler profile for this cycle (across the descheduler's profiles;
    a new cycle starts from the cluster as it is then)."""
    services = handle.services
    cached = services.node_fits.get(profile)
    if cached is None or cached[0] != services.cycle:
        fit = SchedulerNodeFit(handle.cluster, scheduler_config_of(handle), profile, services.seed, handle.now)
        services.node_fits[profile] = (services.cycle, fit)
        return fit
    return cached[1]  # type: ignore[no-any-return]


def scheduler_config_of(handle: Handle) -> Any:
    """The KubeSchedulerConfiguration given to the descheduler (`--scheduler-config`), or the default one."""
    config = handle.services.scheduler_config
    return config if config is not None else default_config()


def check_profile(handle: Handle, profile: str) -> None:
    """InputError unless the scheduler configuration has a profile of that scheduler name."""
    config = scheduler_config_of(handle)
    if config.profile_for(profile) is None:
        raise InputError(f"no scheduler profile named {profile!r} in the scheduler configuration (profiles: "
                         f"{', '.join(p.scheduler_name for p in config.profiles)})", field="nodeFitProfile")
