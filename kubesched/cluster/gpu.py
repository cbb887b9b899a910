"""GPU devices: every node's GPUs as individual devices in NumPy columns, kept in step with ClusterState.

The model is the one the FGD paper's simulator (hkust-adsl/kubernetes-scheduler-simulator) inherits
from Alibaba's open-gpu-share: `pkg/type/open-gpu-share/utils/{const,node,pod}.go` (how nodes and pods
state GPUs) and `pkg/type/open-gpu-share/cache/{gpunodeinfo,deviceinfo}.go` (per-device accounting).

- A node has `alibabacloud.com/gpu-count` GPUs (status.capacity; allocatable when capacity lacks it),
  each of 1000 milli-GPU, all of the model in its label `alibabacloud.com/gpu-card-model`.
- A pod asks through annotations: `alibabacloud.com/gpu-count` GPUs of `alibabacloud.com/gpu-milli`
  each (1000 = a whole GPU; less = a share of one GPU), optionally restricted to the models listed in
  `alibabacloud.com/gpu-card-model` (`V100M16|V100M32`).
- A bound pod holds the devices named by its annotation `alibabacloud.com/gpu-index` (`"3"`, `"0-1-2"`);
  each listed device gives up the pod's per-GPU milli. The GPU-share plugin's Reserve writes that
  annotation (a patch of the pod's annotations through the client); this table only reads it. So the device state
  is a function of the pods in the cluster state, and follows every event (bind, update, delete,
  evict, unbind) without anyone changing it behind the state's back.

`GpuTable.of(cluster)` attaches one table to a cluster state (created on first use, then listening).
Rows are the NodeTable's rows, so plugins index both with the same `rows` vector.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from kubesched.api.objects import Node, Pod
from kubesched.api.quantity import milli_value_of, parse_quantity, value_of
from kubesched.cluster.events import Event, EventType
from kubesched.cluster.state import ClusterState

GPU_MILLI = "alibabacloud.com/gpu-milli"  # per-GPU milli a pod asks for; a node's total milli-GPU capacity
GPU_COUNT = "alibabacloud.com/gpu-count"  # GPUs a pod asks for; GPUs a node has
GPU_MODEL = "alibabacloud.com/gpu-card-model"  # a node's model (label); the models a pod accepts (annotation)
GPU_INDEX = "alibabacloud.com/gpu-index"  # the devices a bound pod holds, e.g. "0-1"
DEV_SEP = "-"
MILLI = 1000
MAX_SPEC_CPU = 128000  # utils.MaxSpecCpu: the largest node's milli-CPU, for normalisation
MAX_SPEC_GPU = 8000  # utils.MaxSpecGpu: the largest node's milli-GPU
NO_GPU_TAG = "no-gpu"
SHARE_GPU_TAG = "share-gpu"


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """What a pod asks of GPUs (the GPU half of upstream's PodResource)."""

    milli: int  # per GPU, 0..1000
    count: int
    model: str  # "" = any model; else models separated by "|"

    @property
    def total(self) -> int:
        return self.milli * self.count

    @property
    def is_share(self) -> bool:
        return self.count == 1 and self.milli < MILLI

    @property
    def affinity(self) -> str:
        """GetGpuAffinityFromPodAnnotation: the tag GpuClusteringScore groups pods by."""
        if self.count == 0:
            return NO_GPU_TAG
        if self.count == 1 and self.milli < MILLI:
            return SHARE_GPU_TAG
        if self.milli == MILLI:
            return f"{self.count}-gpu"
        # Upstream panics ("unknown gpu affinity") for several GPUs of less than 1000 milli each.
        return f"{self.count}x{self.milli}m-gpu"


NO_GPU = GpuRequest(0, 0, "")


def _annotation_int_quantity(value: str) -> int:
    """resource.ParseQuantity(value).Value(); 0 when it does not parse (upstream ignores the error)."""
    try:
        return value_of(parse_quantity(value))
    except ValueError:
        return 0


def gpu_request(pod: Pod) -> GpuRequest:
    """The pod's GPU request from its annotations, as GetGpuMilli/Count/ModelFromPodAnnotation read them."""
    cached = pod.cache.get("ann:gpu_request")
    if cached is None:
        ann = pod.meta.annotations
        milli = _annotation_int_quantity(ann[GPU_MILLI]) if GPU_MILLI in ann else 0
        count = 0
        raw = ann.get(GPU_COUNT)
        if raw is not None:
            try:
                n = int(str(raw).strip())
                count = n if n >= 0 else 0
            except ValueError:
                count = 0
        model = str(ann.get(GPU_MODEL) or "")
        cached = NO_GPU if milli == 0 and count == 0 and not model else GpuRequest(milli, count, model)
        pod.cache["ann:gpu_request"] = cached
    return cached  # type: ignore[no-any-return]


def pod_milli_cpu(pod: Pod) -> int:
    """PodResource.MilliCpu: the containers' CPU requests, 100m for a container that states none
    (schedutil.GetNonzeroRequests, summed over spec.containers as utils.GetPodResource does)."""
    cached = pod.cache.get("gpu_pod_cpu")
    if cached is None:
        cached = 0
        for c in pod.containers:
            q = c.requests.get("cpu")
            cached += milli_value_of(q) if q is not None else 100
        pod.cache["gpu_pod_cpu"] = cached
    return cached  # type: ignore[no-any-return]


def parse_gpu_index(value: str) -> tuple[int, ...] | None:
    """GpuIdStrToIntList: "0-1-2" → (0, 1, 2); None when malformed, () when empty."""
    if not value:
        return ()
    out = []
    for part in value.split(DEV_SEP):
        try:
            out.append(int(part))
        except ValueError:
            return None
    return tuple(out)


def format_gpu_index(devices: tuple[int, ...] | list[int]) -> str:
    return DEV_SEP.join(str(d) for d in devices)


def pod_gpu_index(pod: Pod) -> tuple[int, ...] | None:
    cached = pod.cache.get("ann:gpu_index")
    if cached is None:
        raw = pod.meta.annotations.get(GPU_INDEX)
        cached = () if raw is None else (parse_gpu_index(str(raw)) or ())
        pod.cache["ann:gpu_index"] = cached
    return cached  # type: ignore[no-any-return]


def with_gpu_index(pod: Pod, devices: tuple[int, ...] | None) -> Pod:
    """A new Pod like `pod` whose annotation `alibabacloud.com/gpu-index` names `devices` (None: removed)."""
    return pod.with_annotations({GPU_INDEX: None if devices is None else format_gpu_index(devices)})


def _node_quantity(node: Node, name: str) -> int:
    q = node.capacity.get(name)
    if q is None:
        q = node.allocatable.get(name)
    return value_of(q) if q is not None else 0


def node_gpu_count(node: Node) -> int:
    """GetGpuCountOfNode."""
    return max(0, _node_quantity(node, GPU_COUNT))


def node_gpu_milli(node: Node) -> int:
    """GetGpuMilliOfNode: the node's milli-GPU capacity (what the tuning measures capacity with)."""
    return max(0, _node_quantity(node, GPU_MILLI))


def node_gpu_model(node: Node) -> str:
    return node.labels.get(GPU_MODEL, "")


def model_allows(node_model: str, pod_models: str) -> bool:
    """IsNodeAccessibleToPodByType: a pod without models goes anywhere; a CPU node takes no model."""
    if not pod_models:
        return True
    if not node_model:
        return False
    wanted = [m for m in pod_models.split("|") if m]
    if not wanted:
        return True
    return node_model in wanted


@dataclass(frozen=True, slots=True)
class TypicalPod:
    """One pod shape of the target workload and its share (upstream's TargetPod)."""

    cpu: int  # milli-CPU (non-zero request)
    milli: int  # per-GPU milli
    count: int
    model: str
    freq: float  # 0..1, the shares sum to 1


_TABLES: weakref.WeakKeyDictionary[ClusterState, GpuTable] = weakref.WeakKeyDictionary()


class GpuTable:
    """Per-node GPU devices as columns over the NodeTable's rows.

    `count[r]` GPUs, model code `model_code[r]` (into `models`), `left[r, d]` milli-GPU free on device d
    (0 beyond the node's count), `version[r]` bumped on every change of row r (for caches),
    `tags[r, k]` how many pods of GPU-affinity tag `tag_names[k]` the node holds (GpuClusteringScore).
    `target` is the target workload FGD measures fragmentation against (None: not set).
    """

    def __init__(self, cluster: ClusterState) -> None:
        self.cluster = cluster
        self.target: tuple[TypicalPod, ...] | None = None
        self.models: list[str] = [""]
        self._model_codes: dict[str, int] = {"": 0}
        self.tag_names: list[str] = []
        self._tag_cols: dict[str, int] = {}
        self._rebuild()
        # An index: it must agree with the state at every event (and it never changes the state).
        cluster.subscribe(self._on_event, index=True)

    @classmethod
    def of(cls, cluster: ClusterState) -> GpuTable:
        """The cluster's table, attached (and filled from the current state) on first use."""
        table = _TABLES.get(cluster)
        if table is None:
            table = cls(cluster)
            _TABLES[cluster] = table
        return table

    # ------------------------------------------------------------ building

    def _rebuild(self) -> None:
        n = max(self.cluster.num_nodes, 1)
        width = max([node_gpu_count(i.node) for i in self.cluster.node_infos] + [1])
        self.count = np.zeros(n, dtype=np.int64)
        self.model_code = np.zeros(n, dtype=np.int64)
        self.left = np.zeros((n, width), dtype=np.int64)
        self.version = np.zeros(n, dtype=np.int64)
        self.tags = np.zeros((n, max(len(self.tag_names), 1)), dtype=np.int64)
        self.capacity_milli = 0  # Σ count × 1000
        self.used_milli = 0  # Σ milli-GPU held by pods
        self.node_capacity_milli = 0  # Σ of the nodes' gpu-milli capacity (tuning's nodeTotalMilliGpu)
        self._rows_known = 0
        self._assigned: dict[str, tuple[int, tuple[int, ...], int]] = {}
        self._tagged: dict[str, tuple[int, int]] = {}
        self._node_milli: dict[str, int] = {}
        for info in self.cluster.node_infos:
            self._set_node_row(info.index, info.node)
        for key in list(self.cluster.pods):
            self._sync_pod(key)

    def _ensure_rows(self, n: int) -> None:
        cur = len(self.count)
        if n <= cur:
            return
        new = max(n, 2 * cur)

        def grow(a: np.ndarray) -> np.ndarray:
            out = np.zeros((new,) + a.shape[1:], dtype=a.dtype)
            out[:cur] = a
            return out

        self.count = grow(self.count)
        self.model_code = grow(self.model_code)
        self.left = grow(self.left)
        self.version = grow(self.version)
        self.tags = grow(self.tags)

    def _ensure_width(self, width: int) -> None:
        if width <= self.left.shape[1]:
            return
        out = np.zeros((self.left.shape[0], width), dtype=np.int64)
        out[:, : self.left.shape[1]] = self.left
        self.left = out

    def model_code_of(self, model: str) -> int:
        code = self._model_codes.get(model)
        if code is None:
            code = self._model_codes[model] = len(self.models)
            self.models.append(model)
        return code

    def tag_col(self, tag: str) -> int:
        col = self._tag_cols.get(tag)
        if col is None:
            col = self._tag_cols[tag] = len(self.tag_names)
            self.tag_names.append(tag)
            if col >= self.tags.shape[1]:
                out = np.zeros((self.tags.shape[0], col + 1), dtype=np.int64)
                out[:, : self.tags.shape[1]] = self.tags
                self.tags = out
        return col

    def _set_node_row(self, row: int, node: Node) -> None:
        self._ensure_rows(row + 1)
        count = node_gpu_count(node)
        self._ensure_width(max(count, 1))
        old_count = int(self.count[row]) if row < self._rows_known else 0
        self.capacity_milli += (count - old_count) * MILLI
        milli = node_gpu_milli(node)
        self.node_capacity_milli += milli - self._node_milli.get(node.name, 0)
        self._node_milli[node.name] = milli
        self.count[row] = count
        self.model_code[row] = self.model_code_of(node_gpu_model(node))
        held = [a for a in self._assigned.values() if a[0] == row]
        self.left[row, :] = 0
        self.left[row, :count] = MILLI
        for _, devs, m in held:
            for d in devs:
                if d < count:
                    self.left[row, d] -= m
        self.version[row] += 1
        self._rows_known = max(self._rows_known, row + 1)

    # ------------------------------------------------------------ events

    def _on_event(self, ev: Event) -> None:
        if ev.kind == "Pod":
            self._sync_pod(ev.obj.key)
        elif ev.kind == "Node":
            if ev.type is EventType.DELETED or len(self.cluster.node_infos) < self._rows_known:
                self._rebuild()  # the state renumbers its rows when a node goes
            else:
                info = self.cluster.node_info_by_name.get(ev.obj.name)
                if info is not None:
                    self._set_node_row(info.index, info.node)

    def _sync_pod(self, key: str) -> None:
        """Make the table hold what the pod now holds (its devices while bound, its tag while on a node)."""
        pod = self.cluster.pods.get(key)
        row = -1
        if pod is not None and pod.node_name and not pod.is_terminal:
            info = self.cluster.node_info_by_name.get(pod.node_name)
            row = info.index if info is not None else -1
        req = gpu_request(pod) if pod is not None else NO_GPU
        want: tuple[int, tuple[int, ...], int] | None = None
        if row >= 0 and req.milli > 0:
            devs = pod_gpu_index(pod) if pod is not None else ()
            if devs:
                want = (row, devs, req.milli)
        have = self._assigned.get(key)
        if have != want:
            if have is not None:
                self._hold(have, -1)
                del self._assigned[key]
            if want is not None:
                self._hold(want, +1)
                self._assigned[key] = want
        tag_want = (row, self.tag_col(req.affinity)) if row >= 0 and req.affinity != NO_GPU_TAG else None
        tag_have = self._tagged.get(key)
        if tag_have != tag_want:
            if tag_have is not None:
                self.tags[tag_have] -= 1
                self.version[tag_have[0]] += 1
                del self._tagged[key]
            if tag_want is not None:
                self.tags[tag_want] += 1
                self.version[tag_want[0]] += 1
                self._tagged[key] = tag_want

    def _hold(self, assignment: tuple[int, tuple[int, ...], int], sign: int) -> None:
        row, devs, milli = assignment
        count = int(self.count[row])
        for d in devs:
            if 0 <= d < count:
                self.left[row, d] -= sign * milli
                self.used_milli += sign * milli
        self.version[row] += 1

    # ------------------------------------------------------------ reading

    @property
    def n(self) -> int:
        return self.cluster.num_nodes

    def devices(self, pod_key: str) -> tuple[int, ...]:
        """The devices the pod holds (empty when it holds none)."""
        a = self._assigned.get(pod_key)
        return a[1] if a is not None else ()

    def cpu_left(self, rows: np.ndarray) -> np.ndarray:
        """Allocatable milli-CPU minus what the node's pods request (NodeResource.MilliCpuLeft)."""
        t = self.cluster.table
        col = t.column["cpu"]
        return t.alloc[rows, col] - t.requested[rows, col]  # type: ignore[no-any-return]

    def cpu_capacity(self, rows: np.ndarray) -> np.ndarray:
        t = self.cluster.table
        return t.alloc[rows, t.column["cpu"]]  # type: ignore[no-any-return]

    def model_mask(self, models: str) -> np.ndarray:
        """Over model codes: which node models a pod restricted to `models` may use."""
        return np.array([model_allows(m, models) for m in self.models], dtype=bool)

    def total_left(self, rows: np.ndarray) -> np.ndarray:
        return self.left[rows].sum(axis=1)  # type: ignore[no-any-return]

    def fully_free(self, rows: np.ndarray) -> np.ndarray:
        return (self.left[rows] == MILLI).sum(axis=1)  # type: ignore[no-any-return]

    def node_devices(self, row: int) -> list[int]:
        """The free milli-GPU of each of the node's devices, in device order (NodeResource.MilliGpuLeftList)."""
        return [int(x) for x in self.left[row, : int(self.count[row])]]

