"""NodeLabelPreference: an example Score plugin that prefers nodes carrying a label value.

A third-party plugin implements only the per-node form (`score`); the framework calls it for every
feasible node. Args come from the profile's pluginConfig:

    pluginConfig:
    - name: NodeLabelPreference
      args:
        labelKey: example.com/tier        # required
        preferredValues: [gold, silver]   # earlier values score higher; default: any value of the key

A node whose label value is the i-th of n preferred values scores 100 * (n - i) / n; a node with the
key and no preferred values set scores 100; other nodes score 0.
"""

from __future__ import annotations

from typing import Any

from kubesched.api.objects import Pod
from kubesched.cluster.state import NodeInfo
from kubesched.errors import InputError
from kubesched.scheduler.framework import MAX_NODE_SCORE, CycleState, ScorePlugin, Status


class NodeLabelPreference(ScorePlugin):
    name = "NodeLabelPreference"

    def __init__(self, args: dict[str, Any] | None, handle: Any) -> None:
        super().__init__(args, handle)
        unknown = set(self.args) - {"labelKey", "preferredValues", "apiVersion", "kind"}
        if unknown:
            # Raising InputError with the field makes the CLI print one clear line and exit 2.
            raise InputError(f"unknown field {sorted(unknown)[0]!r}", field=sorted(unknown)[0])
        key = self.args.get("labelKey")
        if not isinstance(key, str) or not key:
            raise InputError("expected a non-empty label key", field="labelKey")
        values = self.args.get("preferredValues") or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise InputError("expected a list of label values", field="preferredValues")
        self.label_key = key
        self.preferred = {v: i for i, v in enumerate(values)}

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        value = node_info.node.labels.get(self.label_key)
        if value is None:
            return 0, Status()
        if not self.preferred:
            return MAX_NODE_SCORE, Status()
        rank = self.preferred.get(value)
        if rank is None:
            return 0, Status()
        n = len(self.preferred)
        return MAX_NODE_SCORE * (n - rank) // n, Status()
