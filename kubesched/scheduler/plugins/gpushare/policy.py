"""What the six GPU-sharing Score policies share: their args (`GpuPolicyArgs`: upstream's dimension-extension
and normalisation options) and the cluster's per-device GPU table, which each policy scores from."""

from __future__ import annotations

from kubesched.cluster.gpu import GpuTable
from kubesched.scheduler.framework import Handle, ScorePlugin
from kubesched.scheduler.plugins.gpushare.args import GpuPolicyArgs


class GpuPolicyScore(ScorePlugin):
    Args = GpuPolicyArgs
    args: GpuPolicyArgs

    def __init__(self, args: GpuPolicyArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        self.gpu = GpuTable.of(handle.cluster)
