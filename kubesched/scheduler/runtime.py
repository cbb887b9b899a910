"""The framework runtime of one profile: plugins per extension point, weights, and how each point runs.

Built from a `Profile` the way upstream's `NewFramework` builds it: specific extension points first,
then the multiPoint expansion (explicit entries override, a point with `*` disabled takes none),
one QueueSort plugin, at least one Bind plugin, score weights from the score point then multiPoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubesched.api.objects import Pod
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.config.plugin_args import build_args
from kubesched.config.scheduler_config import POINTS, Profile, SchedulerConfig
from kubesched.errors import InputError
from kubesched.scheduler.framework import (
    EXTENSION_POINTS,
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    BindPlugin,
    Code,
    CycleState,
    FilterPlugin,
    Handle,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
    Status,
    is_all_pass,
)
from kubesched.scheduler.registry import Registry


@dataclass
class ScoreBreakdown:
    """Scores of the feasible `rows`: per plugin raw, normalized and weighted, and the total."""

    rows: np.ndarray
    raw: dict[str, np.ndarray] = field(default_factory=dict)
    normalized: dict[str, np.ndarray] = field(default_factory=dict)
    weighted: dict[str, np.ndarray] = field(default_factory=dict)
    total: np.ndarray | None = None


class Framework:
    """One profile's plugins, ready to run."""

    def __init__(self, profile: Profile, registry: Registry, handle: Handle, field_prefix: str = "profiles[0]") -> None:
        self.profile = profile
        self.handle = handle
        handle.framework = self
        self.scheduler_name = profile.scheduler_name
        self.plugins: dict[str, Plugin] = {}
        needed: list[str] = []
        for point in POINTS:
            for ref in profile.plugins[point].enabled:
                if ref.name not in needed:
                    needed.append(ref.name)
        for name in needed:
            if name not in registry:
                raise InputError(f"unknown plugin {name!r}; known plugins: {', '.join(registry.names())}",
                                 field=f"{field_prefix}.plugins")
        for name in profile.plugin_config:
            if name not in needed:
                raise InputError(f"pluginConfig for plugin {name!r}, which the profile does not enable",
                                 field=f"{field_prefix}.pluginConfig")
        for name in needed:
            cls = registry.get(name)
            # The plugin's args are built once, here: typed (and validated) for plugins that declare `Args`.
            where = f"{field_prefix}.pluginConfig[{name}].args"
            args = build_args(cls, profile.plugin_config.get(name), where)
            try:
                self.plugins[name] = cls(args, handle)
            except InputError as e:
                raise e.located(field_prefix=where) from None

        self.points: dict[str, list[Plugin]] = {}
        for point, iface in EXTENSION_POINTS.items():
            specific = [r.name for r in profile.plugins[point].enabled]
            for name in specific:
                if not isinstance(self.plugins[name], iface):
                    raise InputError(f"plugin {name!r} does not extend the {point} extension point",
                                     field=f"{field_prefix}.plugins.{point}")
            self.points[point] = self._expand(point, iface, specific)

        if len(self.points["queueSort"]) != 1:
            raise InputError(f"only one queue sort plugin required for profile with scheduler name "
                             f"{self.scheduler_name!r}, but got {len(self.points['queueSort'])}",
                             field=f"{field_prefix}.plugins.queueSort")
        if not self.points["bind"]:
            raise InputError(f"at least one bind plugin is needed for profile with scheduler name "
                             f"{self.scheduler_name!r}", field=f"{field_prefix}.plugins.bind")
        self.weights: dict[str, int] = {}
        for ref in list(profile.plugins["score"].enabled) + list(profile.plugins["multiPoint"].enabled):
            if not isinstance(self.plugins[ref.name], ScorePlugin) or ref.name in self.weights:
                continue
            self.weights[ref.name] = ref.weight or 1
        self.pre_enqueue: list[PreEnqueuePlugin] = self.points["preEnqueue"]  # type: ignore[assignment]
        self.queue_sort: QueueSortPlugin = self.points["queueSort"][0]  # type: ignore[assignment]
        self.pre_filter: list[PreFilterPlugin] = self.points["preFilter"]  # type: ignore[assignment]
        self.filter: list[FilterPlugin] = self.points["filter"]  # type: ignore[assignment]
        self.post_filter: list[PostFilterPlugin] = self.points["postFilter"]  # type: ignore[assignment]
        self.pre_score: list[PreScorePlugin] = self.points["preScore"]  # type: ignore[assignment]
        self.score: list[ScorePlugin] = self.points["score"]  # type: ignore[assignment]
        self.reserve: list[ReservePlugin] = self.points["reserve"]  # type: ignore[assignment]
        self.permit: list[PermitPlugin] = self.points["permit"]  # type: ignore[assignment]
        self.pre_bind: list[PreBindPlugin] = self.points["preBind"]  # type: ignore[assignment]
        self.bind: list[BindPlugin] = self.points["bind"]  # type: ignore[assignment]
        self.post_bind: list[PostBindPlugin] = self.points["postBind"]  # type: ignore[assignment]
        self._names: list[str] = []
        self._names_generation = -1
        # Score plugins that define NormalizeScore (the others need no call).
        self._normalizing = {pl.name for pl in self.score
                             if getattr(type(pl), "normalize_score", None) is not ScorePlugin.normalize_score}

    def _expand(self, point: str, iface: type[Plugin], specific: list[str]) -> list[Plugin]:
        """expandMultiPointPlugins for one extension point."""
        disabled = set(self.profile.plugins[point].disabled)
        if "*" in disabled:
            return [self.plugins[n] for n in specific]
        multi: list[str] = []
        overrides: list[str] = []
        for ref in self.profile.plugins["multiPoint"].enabled:
            if not isinstance(self.plugins[ref.name], iface) or ref.name in disabled:
                continue
            if ref.name in specific:
                overrides.append(ref.name)
                continue
            if ref.name in multi:
                raise InputError(f"plugin {ref.name!r} already registered as {point} plugin")
            multi.append(ref.name)
        order = [n for n in specific if n in overrides] + multi + [n for n in specific if n not in overrides]
        return [self.plugins[n] for n in order]

    @property
    def cluster(self) -> ClusterState:
        return self.handle.cluster

    # ------------------------------------------------------------ PreEnqueue

    def run_pre_enqueue(self, pod: Pod) -> Status:
        for pl in self.pre_enqueue:
            st = pl.pre_enqueue(pod)
            if not st.is_success:
                return st.with_plugin(pl.name)
        return Status()

    # ------------------------------------------------------------ PreFilter

    def run_pre_filter(self, state: CycleState, pod: Pod,
                       statuses: dict[str, Status] | None = None) -> tuple[PreFilterResult, Status]:
        """Run every PreFilter plugin. Stops at the first rejection unless `statuses` collects them all."""
        result = PreFilterResult()
        first_failure: Status | None = None
        cluster = self.cluster
        for pl in self.pre_filter:
            res, st = pl.pre_filter(state, pod, cluster)
            if statuses is None:
                # The common cases, kept cheap.
                if st.code is Code.SUCCESS and (res is None or res.node_names is None):
                    continue
                if st.code is Code.SKIP:
                    state.skip_filter_plugins.add(pl.name)
                    continue
            st = st.with_plugin(pl.name)
            if statuses is not None:
                statuses[pl.name] = st
            if st.is_skip:
                state.skip_filter_plugins.add(pl.name)
                continue
            if not st.is_success:
                if first_failure is None:
                    first_failure = st
                if statuses is None:
                    return result, st
                continue
            if res is not None and not res.all_nodes():
                result = result.merge(res)
                state.write(f"PreFilterResult/{pl.name}", res)
        if first_failure is not None:
            return result, first_failure
        return result, Status()

    # ------------------------------------------------------------ Filter

    def active_filters(self, state: CycleState) -> list[FilterPlugin]:
        return [pl for pl in self.filter if pl.name not in state.skip_filter_plugins]

    def filter_mask(self, state: CycleState, pod: Pod, rows: np.ndarray,
                    per_plugin: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """The conjunction of every active Filter plugin over `rows`, vectorised where plugins allow."""
        cluster = self.cluster
        skipped = state.skip_filter_plugins
        mask: np.ndarray | None = None
        for pl in self.filter:
            if pl.name in skipped:
                continue
            m = pl.filter_nodes(state, pod, cluster, rows)
            if m is None:
                m = np.ones(len(rows), dtype=bool)
                infos = cluster.node_infos
                # Per-node plugins only need to look at nodes still feasible (unless every verdict is wanted).
                todo = range(len(rows)) if per_plugin is not None or mask is None else np.flatnonzero(mask)
                for i in todo:
                    m[i] = pl.filter(state, pod, infos[rows[i]]).is_success
            if per_plugin is not None:
                per_plugin[pl.name] = m
            elif is_all_pass(m):
                continue
            if mask is None:
                mask = m.copy()  # a plugin's mask may be cached: never write into it
            else:
                mask &= m
        return mask if mask is not None else np.ones(len(rows), dtype=bool)  # callers may write into it

    def run_filter_plugins(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        """RunFilterPlugins on one node: the first rejecting plugin's status (per-node form)."""
        for pl in self.active_filters(state):
            st = pl.filter(state, pod, node_info)
            if not st.is_success:
                return st.with_plugin(pl.name)
        return Status()

    def first_failure_statuses(self, state: CycleState, pod: Pod, rows: np.ndarray) -> dict[str, Status]:
        """For nodes that failed, the status of the first plugin (in order) that rejects each (Success for a
        node every plugin passes). Every plugin's verdict comes from its mask over `rows`; only the first
        rejecting plugin of each node is asked why (in bulk when it offers `filter_statuses`)."""
        infos = self.cluster.node_infos
        per: dict[str, np.ndarray] = {}
        self.filter_mask(state, pod, rows, per)
        found: dict[int, Status] = {}
        pending = np.ones(len(rows), dtype=bool)
        for pl in self.active_filters(state):
            fail = pending & ~per[pl.name]
            if not fail.any():
                continue
            idx = np.flatnonzero(fail)
            sub = rows[idx]
            sts = pl.filter_statuses(state, pod, self.cluster, sub)
            if sts is None:
                sts = [pl.filter(state, pod, infos[r]) for r in sub]
            for i, st in zip(idx.tolist(), sts, strict=True):
                if not st.is_success:
                    found[i] = st.with_plugin(pl.name)
                    pending[i] = False
        names = self.node_names()
        return {names[r]: found.get(i) or Status() for i, r in enumerate(rows.tolist())}

    def node_names(self) -> list[str]:
        """Node names by table row (kept until a node changes)."""
        cluster = self.cluster
        if self._names_generation != cluster.node_generation or len(self._names) != cluster.num_nodes:
            self._names = [info.node.name for info in cluster.node_infos]
            self._names_generation = cluster.node_generation
        return self._names

    def run_filter_with_nominated_pods(self, state: CycleState, pod: Pod, node_info: NodeInfo,
                                       nominated: list[Pod]) -> Status:
        """RunFilterPluginsWithNominatedPods: pass with the higher-or-equal priority nominated pods added,
        and without them."""
        if nominated:
            state2 = state.clone()
            info2 = node_info.clone()
            for p in nominated:
                info2.add_pod(p)
                st = self.run_pre_filter_extension_add(state2, pod, p, info2)
                if not st.is_success:
                    return st
            st = self.run_filter_plugins(state2, pod, info2)
            if not st.is_success:
                return st
        return self.run_filter_plugins(state, pod, node_info)

    def run_pre_filter_extension_add(self, state: CycleState, pod: Pod, to_add: Pod, info: NodeInfo) -> Status:
        for pl in self.pre_filter:
            if pl.name in state.skip_filter_plugins:
                continue
            ext = pl.pre_filter_extensions()
            if ext is not None:
                st = ext.add_pod(state, pod, to_add, info)
                if not st.is_success:
                    return st.with_plugin(pl.name)
        return Status()

    def run_pre_filter_extension_remove(self, state: CycleState, pod: Pod, to_remove: Pod, info: NodeInfo) -> Status:
        for pl in self.pre_filter:
            if pl.name in state.skip_filter_plugins:
                continue
            ext = pl.pre_filter_extensions()
            if ext is not None:
                st = ext.remove_pod(state, pod, to_remove, info)
                if not st.is_success:
                    return st.with_plugin(pl.name)
        return Status()

    # ------------------------------------------------------------ PostFilter

    def run_post_filter(self, state: CycleState, pod: Pod,
                        statuses: dict[str, Status]) -> tuple[PostFilterResult | None, Status]:
        reasons: list[str] = []
        result: PostFilterResult | None = None
        last = Status(Code.UNSCHEDULABLE)
        for pl in self.post_filter:
            res, st = pl.post_filter(state, pod, statuses)
            st = st.with_plugin(pl.name)
            if st.is_success:
                return res, st
            if st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return res, st
            if st.code is Code.ERROR:
                return None, st
            reasons.extend(st.reasons)
            if res is not None:
                result = res
            last = st
        if not self.post_filter:
            return None, Status(Code.UNSCHEDULABLE)
        return result, Status(last.code, reasons, last.plugin)

    # ------------------------------------------------------------ Score

    def run_pre_score(self, state: CycleState, pod: Pod, rows: np.ndarray,
                      statuses: dict[str, Status] | None = None) -> Status:
        cluster = self.cluster
        for pl in self.pre_score:
            st = pl.pre_score(state, pod, cluster, rows)
            if statuses is None:
                if st.code is Code.SUCCESS:
                    continue
                if st.code is Code.SKIP:
                    state.skip_score_plugins.add(pl.name)
                    continue
            st = st.with_plugin(pl.name)
            if statuses is not None:
                statuses[pl.name] = st
            if st.is_skip:
                state.skip_score_plugins.add(pl.name)
                continue
            if not st.is_success:
                return st
        return Status()

    def run_score(self, state: CycleState, pod: Pod, rows: np.ndarray,
                  detail: bool = True) -> tuple[ScoreBreakdown, Status]:
        """Score, NormalizeScore and weights over `rows`. Without `detail` only the total is kept."""
        out = ScoreBreakdown(rows)
        total: np.ndarray | None = None
        infos = self.cluster.node_infos
        skipped = state.skip_score_plugins
        for pl in self.score:
            name = pl.name
            if name in skipped:
                continue
            scores = pl.score_nodes(state, pod, self.cluster, rows)
            if scores is None:
                scores = np.zeros(len(rows), dtype=np.int64)
                for i, r in enumerate(rows):
                    s, st = pl.score(state, pod, infos[r])
                    if not st.is_success:
                        return out, st.with_plugin(name)
                    scores[i] = s
            else:
                scores = np.asarray(scores, dtype=np.int64)
            if detail:
                out.raw[name] = scores.copy()
            if name in self._normalizing:
                st2 = pl.normalize_score(state, pod, scores, rows)
                if st2 is not None and not st2.is_success:
                    return out, st2.with_plugin(name)
            # One reduction checks both bounds: negative int64 values are huge as uint64.
            if (not pl.scores_in_range and len(scores)
                    and int(scores.view(np.uint64).max()) > MAX_NODE_SCORE):
                bad = int(np.flatnonzero((scores > MAX_NODE_SCORE) | (scores < MIN_NODE_SCORE))[0])
                return out, Status(Code.ERROR, [f"plugin {name!r} returns an invalid score {int(scores[bad])}, "
                                                f"it should in the range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] "
                                                "after normalizing"], name)
            weight = self.weights.get(name, 1)
            if detail:
                out.normalized[name] = scores
                weighted = scores * weight
                out.weighted[name] = weighted
                total = weighted.copy() if total is None else total + weighted
            elif total is None:
                # The first weighted scores start the sum (a new array: `scores` may be a plugin's own).
                total = scores * weight if weight != 1 else scores.copy()
            elif weight == 1:
                total += scores
            else:
                total += scores * weight
        if total is None:
            total = np.zeros(len(rows), dtype=np.int64)
        out.total = total
        return out, Status()

    # ------------------------------------------------------------ Reserve .. PostBind

    def run_reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        for pl in self.reserve:
            st = pl.reserve(state, pod, node_name)
            if not st.is_success:
                return st.with_plugin(pl.name)
        return Status()

    def run_unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for pl in reversed(self.reserve):
            pl.unreserve(state, pod, node_name)

    def run_permit(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """RunPermitPlugins: the first rejection or error stops; Wait adds the pod to the waiting pods."""
        waits: dict[str, float] = {}
        for pl in self.permit:
            st, timeout = pl.permit(state, pod, node_name)
            if st.is_success:
                continue
            if st.is_rejected:
                return st.with_plugin(pl.name)
            if st.code is Code.WAIT:
                waits[pl.name] = timeout
                continue
            return Status(Code.ERROR, [f'running Permit plugin "{pl.name}": {st.message}'], pl.name)
        if waits:
            self.handle.waiting_pods.add(pod, node_name, waits, self.handle.now())
            return Status(Code.WAIT, [f'one or more plugins asked to wait and no plugin rejected pod "{pod.name}"'])
        return Status()

    def run_pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        for pl in self.pre_bind:
            st = pl.pre_bind(state, pod, node_name)
            if not st.is_success:
                return st.with_plugin(pl.name)
        return Status()

    def run_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        for pl in self.bind:
            st = pl.bind(state, pod, node_name)
            if st.is_skip:
                continue
            return st.with_plugin(pl.name)
        return Status(Code.ERROR, ["no bind plugin bound the pod"])

    def run_post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for pl in self.post_bind:
            pl.post_bind(state, pod, node_name)


def build_frameworks(config: SchedulerConfig, registry: Registry, handle_factory: Any) -> dict[str, Framework]:
    """One Framework per profile, keyed by scheduler name. `handle_factory()` gives each its Handle."""
    out: dict[str, Framework] = {}
    for i, profile in enumerate(config.profiles):
        try:
            out[profile.scheduler_name] = Framework(profile, registry, handle_factory(), f"profiles[{i}]")
        except InputError as e:
            raise e.located(file=config.source, obj="KubeSchedulerConfiguration") from None
    return out
