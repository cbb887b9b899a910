"""The scheduling framework: statuses, cycle state, the extension points and the plugin base classes.

Mirrors kube-scheduler's `framework/interface.go`. Every plugin has a per-node form (what third-party
plugins implement); built-in plugins also offer a vectorised form over NumPy rows of the NodeTable
(`filter_nodes`, `score_nodes`) that the framework prefers when present. Both forms must agree.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from kubesched.api.objects import Pod
from kubesched.api.snapshot import Snapshot
from kubesched.client.inprocess import InProcessAPIServer
from kubesched.client.interface import Client
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.config.plugin_args import NoArgs, PluginArgs
from kubesched.metrics.base import Metrics, MetricsFeed, MetricsSource
from kubesched.scheduler.nominator import Nominator
from kubesched.scheduler.waiting_pods import WaitingPods

if TYPE_CHECKING:
    from kubesched.scheduler.runtime import Framework

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


class Code(enum.Enum):
    SUCCESS = "Success"
    ERROR = "Error"
    UNSCHEDULABLE = "Unschedulable"
    UNSCHEDULABLE_AND_UNRESOLVABLE = "UnschedulableAndUnresolvable"
    WAIT = "Wait"
    SKIP = "Skip"
    PENDING = "Pending"


@dataclass(slots=True)
class Status:
    """A plugin's answer: a code, upstream's reason strings, and the plugin that gave it."""

    code: Code = Code.SUCCESS
    reasons: list[str] = field(default_factory=list)
    plugin: str = ""
    # One object answered by many calls (`SUCCESS`, `skip()`): never changed, `with_plugin` copies it.
    shared: bool = field(default=False, compare=False, repr=False)

    @property
    def is_success(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def is_skip(self) -> bool:
        return self.code is Code.SKIP

    @property
    def is_rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING)

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, name: str) -> Status:
        """This status, attributed to plugin `name` unless it names one already (use the return value)."""
        if not self.plugin:
            if self.shared:
                return Status(self.code, list(self.reasons), name)
            self.plugin = name
        return self

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code.value, "reasons": list(self.reasons)}


# Shared answers for the hot extension points (a plugin may return them; nobody changes them).
SUCCESS = Status(shared=True)
_SKIP = Status(Code.SKIP, shared=True)


def success() -> Status:
    return Status()


def unschedulable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE, list(reasons))


def unresolvable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, list(reasons))


def skip() -> Status:
    return _SKIP


def error(reason: str) -> Status:
    return Status(Code.ERROR, [reason])


class CycleState:
    """Data plugins keep for one scheduling cycle, plus which plugins were skipped at PreFilter/PreScore."""

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter_plugins: set[str] = set()
        self.skip_score_plugins: set[str] = set()

    def read(self, key: str) -> Any:
        return self._data.get(key)

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def clone(self) -> CycleState:
        """Each value is cloned with its own `clone()` when it has one (upstream's StateData.Clone)."""
        out = CycleState()
        for k, v in self._data.items():
            out._data[k] = v.clone() if hasattr(v, "clone") else copy.copy(v)
        out.skip_filter_plugins = set(self.skip_filter_plugins)
        out.skip_score_plugins = set(self.skip_score_plugins)
        return out


# framework.PodsToActivateKey: plugins put pods here to move them to activeQ when the cycle ends.
PODS_TO_ACTIVATE_KEY = "kubernetes.io/pods-to-activate"


@dataclass(slots=True)
class PodsToActivate:
    """framework.PodsToActivate: pods (by namespace/name) to move to activeQ at the end of a cycle."""

    pods: dict[str, Pod] = field(default_factory=dict)

    def clone(self) -> PodsToActivate:
        return self  # shared between clones, as upstream's


@dataclass(slots=True)
class PreFilterResult:
    """Restricts the nodes the Filter phase evaluates; None means all nodes."""

    node_names: set[str] | None = None

    def all_nodes(self) -> bool:
        return self.node_names is None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.all_nodes():
            return self
        if self.all_nodes():
            return PreFilterResult(set(other.node_names or ()))
        return PreFilterResult((self.node_names or set()) & (other.node_names or set()))


@dataclass(slots=True)
class PostFilterResult:
    nominated_node_name: str = ""
    victims: list[Pod] = field(default_factory=list)


NO_NODE_AVAILABLE = "0/{} nodes are available"


@dataclass
class Diagnosis:
    """Why a pod fits nowhere: each node's status and the plugins that rejected it (framework.Diagnosis)."""

    node_to_status: dict[str, Status] = field(default_factory=dict)
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""
    # Rows that failed Filter in a cycle that found feasible nodes; their statuses are not computed.
    unresolved_failed_rows: np.ndarray | None = None


class FitError(Exception):
    """framework.FitError: its message is the "0/N nodes are available: ..." the scheduler reports."""

    def __init__(self, pod: Pod, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        self.pod = pod
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis
        self._histogram: str | None = None
        super().__init__()

    def __str__(self) -> str:
        return self.message()

    def message(self) -> str:
        msg = NO_NODE_AVAILABLE.format(self.num_all_nodes) + ":"
        d = self.diagnosis
        if d.pre_filter_msg:
            msg += f" {d.pre_filter_msg}."
        else:
            if self._histogram is None:
                # The reasons of every node, counted (computed once: the statuses do not change).
                counts: dict[str, int] = {}
                for st in d.node_to_status.values():
                    for r in st.reasons:
                        counts[r] = counts.get(r, 0) + 1
                self._histogram = ", ".join(sorted(f"{v} {k}" for k, v in counts.items()))
            if self._histogram:
                msg += f" {self._histogram}."
        if d.post_filter_msg:
            msg += f" {d.post_filter_msg}."
        return msg


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """A kind of change that may make a rejected pod schedulable (EventsToRegister)."""

    resource: str  # Pod, Node, PersistentVolumeClaim, Namespace, ...
    actions: tuple[str, ...] = ("add", "update", "delete")


@dataclass
class SchedulerServices:
    """What the scheduler's caller provides to plugins, by name and type (upstream's Handle pieces).

    `start` is the run's moment (`--now`, the scenario's start, or the marked wall clock) that clock
    readings are anchored to; `snapshot` the objects the cluster came from (metrics objects for load-aware
    plugins); `metrics` a fixed `Metrics` reading or a `MetricsFeed` whose latest reading is asked each
    time; `load_watcher` a live load-watcher source that Trimaran polls on the scheduler's clock.
    """

    start: datetime | None = None
    snapshot: Snapshot | None = None
    metrics: Metrics | MetricsFeed | None = None
    load_watcher: MetricsSource | None = None


class Handle:
    """What plugins may use of the scheduler: the cluster (read), the client (write), the framework, the
    clock, the RNG, the nominator, the caller's typed services, and the pods waiting at Permit
    (`waiting_pods`: IterateOverWaitingPods / GetWaitingPod, one map shared by every profile)."""

    def __init__(self, cluster: ClusterState, framework: Framework | None = None,
                 now: Callable[[], float] | None = None, rng: np.random.Generator | None = None,
                 services: SchedulerServices | None = None, nominator: Nominator | None = None,
                 client: Client | None = None, waiting_pods: WaitingPods | None = None) -> None:
        self.cluster = cluster
        self.framework = framework
        self.now = now or (lambda: 0.0)
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.services = services if services is not None else SchedulerServices()
        # The PodNominator (preemption's nominations); a scheduler-less handle gets an empty one.
        self.nominator = nominator if nominator is not None else Nominator(cluster)
        # How plugins act on the cluster (bind, delete victims, patch status); in process by default.
        self.client: Client = client if client is not None else InProcessAPIServer(cluster, self.now)
        # Pods waiting at Permit (IterateOverWaitingPods, GetWaitingPod): one map for every profile.
        self.waiting_pods = waiting_pods if waiting_pods is not None else WaitingPods()


# ---------------------------------------------------------------- plugins


class Plugin:
    """Base of every scheduler plugin.

    A plugin with typed args declares `Args` (a PluginArgs subclass); the Framework builds them once from
    the profile's pluginConfig (`build_args`) and passes them. A plugin without `Args` gets the raw
    pluginConfig args as a dict.
    """

    name: ClassVar[str] = ""
    Args: ClassVar[type[PluginArgs] | None] = None
    args: Any

    def __init__(self, args: Any, handle: Handle) -> None:
        self.args = args if args is not None else {}
        self.handle = handle

    @classmethod
    def default_args(cls) -> dict[str, Any] | None:
        """Upstream's defaulted args for this plugin (from its typed defaults), or None when it takes none."""
        if cls.Args is None or issubclass(cls.Args, NoArgs):
            return None
        return cls.Args().to_raw()

    def events_to_register(self) -> list[ClusterEvent]:
        """Cluster events that may make a pod this plugin rejected schedulable again."""
        return [ClusterEvent("Pod"), ClusterEvent("Node")]


class PreEnqueuePlugin(Plugin):
    def pre_enqueue(self, pod: Pod) -> Status:
        raise NotImplementedError


class QueueSortPlugin(Plugin):
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        raise NotImplementedError

    def sort_key(self, qpi: QueuedPodInfo) -> Any:
        """A key consistent with `less`, used by the heap; None to fall back on `less`."""
        return None


class PreFilterExtensions:
    """AddPod/RemovePod: keep PreFilter state right when preemption adds or removes pods on a node."""

    def add_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_add: Pod, node_info: NodeInfo) -> Status:
        return Status()

    def remove_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_remove: Pod, node_info: NodeInfo) -> Status:
        return Status()


class PreFilterPlugin(Plugin):
    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> tuple[PreFilterResult | None, Status]:
        raise NotImplementedError

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None


class FilterPlugin(Plugin):
    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        raise NotImplementedError

    def filter_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray | None:
        """Vectorised Filter: a bool mask over `rows` (True = passes). None: use the per-node form."""
        return None

    def filter_statuses(self, state: CycleState, pod: Pod, cluster: ClusterState,
                        rows: np.ndarray) -> list[Status] | None:
        """The per-node form's statuses for `rows` (nodes this plugin rejects), in bulk. None: ask `filter`."""
        return None


class PostFilterPlugin(Plugin):
    def post_filter(self, state: CycleState, pod: Pod,
                    statuses: dict[str, Status]) -> tuple[PostFilterResult | None, Status]:
        raise NotImplementedError


class PreScorePlugin(Plugin):
    def pre_score(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> Status:
        raise NotImplementedError


class ScorePlugin(Plugin):
    # True when the plugin's scores (after its NormalizeScore) lie in [MinNodeScore, MaxNodeScore] by
    # construction, so the framework's range check cannot fail for it and is not run (it is a reduction
    # over every scored node, per plugin and pod). Plugins that do not promise it are checked.
    scores_in_range: bool = False

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        raise NotImplementedError

    def score_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray | None:
        """Vectorised Score: int64 scores for `rows`. None: use the per-node form."""
        return None

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray, rows: np.ndarray) -> Status | None:
        """NormalizeScore over the scores of all feasible nodes, in place. None: the plugin has none."""
        return None


class ReservePlugin(Plugin):
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return Status()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        return None


class PermitPlugin(Plugin):
    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        """Success, a rejection, or Wait with a timeout in seconds (the pod then waits for allow/reject)."""
        return Status(), 0.0

    def wait_reason(self, pod: Pod) -> str:
        """Why `pod` waits at this plugin, in words (for explain); empty when the plugin cannot say."""
        return ""


class PreBindPlugin(Plugin):
    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return Status()


class BindPlugin(Plugin):
    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        raise NotImplementedError


class PostBindPlugin(Plugin):
    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        return None


EXTENSION_POINTS: dict[str, type[Plugin]] = {
    "preEnqueue": PreEnqueuePlugin,
    "queueSort": QueueSortPlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin,
    "postFilter": PostFilterPlugin,
    "preScore": PreScorePlugin,
    "score": ScorePlugin,
    "reserve": ReservePlugin,
    "permit": PermitPlugin,
    "preBind": PreBindPlugin,
    "bind": BindPlugin,
    "postBind": PostBindPlugin,
}


@dataclass(slots=True)
class QueuedPodInfo:
    """A pod in the scheduling queue, with its queue bookkeeping."""

    pod: Pod
    timestamp: float  # when it was added to the queue (upstream's Timestamp)
    initial_attempt_timestamp: float | None = None
    attempts: int = 0
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    gated: bool = False
    seq: int = 0


# ---------------------------------------------------------------- helpers plugins share


class ShapeEntry:
    """One memoised value over every table row, with its per-row form (None: recomputed whole)."""

    __slots__ = ("value", "per_row", "every", "zero")

    def __init__(self, value: Any, per_row: Callable[[NodeInfo], Any] | None) -> None:
        self.value = value
        self.per_row = per_row
        self.every: bool | None = None  # whether every row is True (filter masks), computed when asked
        self.zero: bool | None = None  # whether every row is 0 (score vectors), computed when asked


class ShapeCache:
    """Memoises per-pod-shape, node-static results (e.g. a filter mask over all table rows).

    Pods of one workload share their selectors, tolerations and affinity; a mask that depends only on
    that shape and on the node objects is computed once per shape. When node objects change, an entry
    with a per-row form (`per_row(node_info)`, the value of one row) recomputes only the rows of the
    nodes that changed (`ClusterState.node_change_log`); others are dropped. A node added or removed
    (rows renumbered) drops everything.
    """

    def __init__(self, limit: int = 4096) -> None:
        self._data: dict[Hashable, ShapeEntry] = {}
        self._generation = -1
        self._cluster_id = -1
        self._epoch = -1
        self._log_pos = 0
        self._limit = limit

    def _catch_up(self, cluster: ClusterState) -> None:
        if cluster.node_generation == self._generation and id(cluster) == self._cluster_id:
            return
        log = cluster.node_change_log
        changed = sorted(set(log[self._log_pos:])) if cluster.node_change_epoch == self._epoch else []
        if (id(cluster) != self._cluster_id or cluster.node_change_epoch != self._epoch
                or len(self._data) > self._limit or 4 * len(changed) > cluster.num_nodes):
            # Most nodes changed: computing the entries again when next asked costs no more.
            self._data.clear()
        else:
            infos = cluster.node_infos
            for key, e in list(self._data.items()):
                per_row = e.per_row
                if per_row is None:
                    del self._data[key]
                    continue
                value = e.value
                for r in changed:
                    value[r] = per_row(infos[r])
                e.every = e.zero = None
        self._generation = cluster.node_generation
        self._cluster_id = id(cluster)
        self._epoch = cluster.node_change_epoch
        self._log_pos = len(log)

    def peek(self, cluster: ClusterState, key: Hashable) -> Any:
        """The value kept for `key` if it is still current, else None (computes nothing)."""
        self._catch_up(cluster)
        e = self._data.get(key)
        return None if e is None else e.value

    def entry(self, cluster: ClusterState, key: Hashable, compute: Callable[[], Any],
              per_row: Callable[[NodeInfo], Any] | None = None) -> ShapeEntry:
        self._catch_up(cluster)
        e = self._data.get(key)
        if e is None:
            if len(self._data) >= self._limit:
                self._data.clear()
            e = self._data[key] = ShapeEntry(compute(), per_row)
        return e

    def get(self, cluster: ClusterState, key: Hashable, compute: Callable[[], Any],
            per_row: Callable[[NodeInfo], Any] | None = None) -> Any:
        """The value for `key`, computed by `compute()` (a vector over every row when `per_row` is given)."""
        return self.entry(cluster, key, compute, per_row).value


_ALL_PASS: dict[int, np.ndarray] = {}


def all_pass(n: int) -> np.ndarray:
    """A read-only all-True mask of length n that Filter plugins return when every row passes: the
    framework recognises it (`is_all_pass`) and skips the conjunction."""
    m = _ALL_PASS.get(n)
    if m is None:
        if len(_ALL_PASS) > 64:
            _ALL_PASS.clear()
        m = np.ones(n, dtype=bool)
        m.flags.writeable = False
        _ALL_PASS[n] = m
    return m


def is_all_pass(mask: np.ndarray) -> bool:
    return _ALL_PASS.get(len(mask)) is mask


def rows_of(node_infos: Iterable[NodeInfo]) -> np.ndarray:
    return np.fromiter((n.index for n in node_infos), dtype=np.int64)
