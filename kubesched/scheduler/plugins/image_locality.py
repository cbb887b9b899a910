"""ImageLocality: prefer nodes that already hold the pod's container images, weighted by how widely spread.

Each image present on the node (under its normalised name) adds its size scaled by
NumNodes-having-it / all nodes, for init and regular containers; the sum is clamped to
[23 MiB, 1000 MiB × number of containers] and mapped linearly onto 0..100. No NormalizeScore.
Scores depend only on node objects and the pod's images: memoised per pod shape.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kubesched.api.objects import Node, Pod
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.config.plugin_args import no_args
from kubesched.scheduler.framework import MAX_NODE_SCORE, SUCCESS, ClusterEvent, CycleState, ScorePlugin, ShapeCache, Status
from kubesched.scheduler.plugins.gomath import go_div, go_div_array
from kubesched.scheduler.plugins.helper import node_static_mask, pod_cache_key

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def normalized_image_name(name: str) -> str:
    """normalizedImageName: append ':latest' when the name has no tag (no other registry rewriting)."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def node_image_sizes(node: Node) -> dict[str, int]:
    """NodeInfo.ImageStates sizes: every name of every image; a later entry for the same name wins."""
    out: dict[str, int] = {}
    for image in node.images:
        for n in image.names:
            out[n] = image.size_bytes
    return out


def scaled_image_score(size: int, num_nodes: int, total_num_nodes: int) -> int:
    """int64(float64(size) * (float64(numNodes) / float64(totalNumNodes)))."""
    return int(float(size) * (float(num_nodes) / float(total_num_nodes)))


def calculate_priority(sum_scores: int, num_containers: int) -> int:
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    if sum_scores < MIN_THRESHOLD:
        sum_scores = MIN_THRESHOLD
    elif sum_scores > max_threshold:
        sum_scores = max_threshold
    return go_div(MAX_NODE_SCORE * (sum_scores - MIN_THRESHOLD), max_threshold - MIN_THRESHOLD)


def calculate_priority_array(sums: np.ndarray, num_containers: int) -> np.ndarray:
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    clamped = np.where(sums < MIN_THRESHOLD, MIN_THRESHOLD, np.where(sums > max_threshold, max_threshold, sums))
    return go_div_array(MAX_NODE_SCORE * (clamped - MIN_THRESHOLD), max_threshold - MIN_THRESHOLD)


def pod_images(pod: Pod) -> tuple[str, ...]:
    """Normalised image names of init containers then regular containers (one entry per container)."""
    return pod_cache_key(pod, "ImageLocality/images",  # type: ignore[return-value]
                         lambda: tuple(normalized_image_name(c.image) for c in pod.init_containers + pod.containers))


class ImageLocality(ScorePlugin):
    name = "ImageLocality"
    Args = no_args("ImageLocality")
    # calculatePriority clamps the sum to [minThreshold, maxThreshold] before scaling it to [0, 100].
    scores_in_range = True

    def __init__(self, args: Any, handle: Any) -> None:
        super().__init__(args, handle)
        self._cache = ShapeCache(limit=1024)  # int64 vectors over all nodes: bound the memory

    def events_to_register(self) -> list[ClusterEvent]:
        return []

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        cluster = self.handle.cluster
        total = cluster.num_nodes
        num_nodes = cluster.image_num_nodes()
        sizes = node_image_sizes(node_info.node)
        images = pod_images(pod)
        total_score = 0
        for name in images:
            size = sizes.get(name)
            if size is not None:
                total_score += scaled_image_score(size, num_nodes.get(name, 0), total)
        return calculate_priority(total_score, len(images)), SUCCESS

    def _all_sizes(self, cluster: ClusterState) -> list[dict[str, int]]:
        """Every node's image sizes by table row, built once per node generation."""
        sizes: list[dict[str, int]] = self._cache.get(
            cluster, (id(cluster), "sizes"), lambda: [node_image_sizes(i.node) for i in cluster.node_infos])
        return sizes

    def _image_column(self, cluster: ClusterState, name: str) -> np.ndarray:
        """The scaled score of one image name on every table row (0 where the node lacks it)."""
        def compute() -> np.ndarray:
            total = cluster.num_nodes
            spread = float(cluster.image_num_nodes().get(name, 0)) / float(total)
            sizes = np.zeros(total, dtype=np.float64)
            for row, node_sizes in enumerate(self._all_sizes(cluster)):
                size = node_sizes.get(name)
                if size is not None:
                    sizes[row] = float(size)
            return (sizes * spread).astype(np.int64)  # float64 → int64 truncates, as Go's conversion
        return node_static_mask(self._cache, cluster, ("image", name), compute)

    def score_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray:
        if not cluster.image_num_nodes():
            # No node reports an image: every sum is 0, below the threshold, so every score is 0.
            return np.zeros(len(rows), dtype=np.int64)
        images = pod_images(pod)

        def compute() -> np.ndarray:
            sums = np.zeros(cluster.num_nodes, dtype=np.int64)
            for name in images:
                sums += self._image_column(cluster, name)
            return calculate_priority_array(sums, len(images))

        return node_static_mask(self._cache, cluster, ("score", images), compute)[rows]
