"""RandomScore: one feasible node, chosen uniformly at PreScore, scores 100; every other node 0.

Mirrors hkust-adsl/kubernetes-scheduler-simulator `pkg/simulator/plugin/random_score.go`: PreScore draws
`rand.Intn(len(nodes))` over the nodes that passed Filter and Score reads the choice back from the cycle
state (a profile must enable the plugin at preScore as well, as upstream's configs do). The draw uses
the scheduler's seeded RNG.
"""

from __future__ import annotations

import numpy as np

from kubesched.api.objects import Pod
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.scheduler.framework import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    CycleState,
    Handle,
    PreScorePlugin,
    ScorePlugin,
    Status,
    error,
)
from kubesched.scheduler.plugins.gpushare.args import GpuPolicyArgs

PRE_SCORE_STATE_KEY = "PreScore-RandomScorePlugin"


class RandomScore(PreScorePlugin, ScorePlugin):
    name = "RandomScore"
    Args = GpuPolicyArgs
    args: GpuPolicyArgs

    def __init__(self, args: GpuPolicyArgs, handle: Handle) -> None:
        super().__init__(args, handle)

    def pre_score(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> Status:
        if len(rows):
            state.write(PRE_SCORE_STATE_KEY, int(rows[int(self.handle.rng.integers(len(rows)))]))
        return Status()

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        chosen = state.read(PRE_SCORE_STATE_KEY)
        if chosen is None:
            return 0, error(f"reading {PRE_SCORE_STATE_KEY!r} from cycleState: not found")
        return (MAX_NODE_SCORE if node_info.index == chosen else MIN_NODE_SCORE), Status()

    def score_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray | None:
        chosen = state.read(PRE_SCORE_STATE_KEY)
        if chosen is None:
            return None  # the per-node form reports the error
        return np.where(rows == chosen, MAX_NODE_SCORE, MIN_NODE_SCORE).astype(np.int64)
