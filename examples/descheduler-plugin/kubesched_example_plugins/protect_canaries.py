"""ProtectCanaries: an evictor filter that keeps pods labelled `track: canary` where they are.

Enable it next to DefaultEvictor:

    plugins:
      filter: {enabled: [DefaultEvictor, ProtectCanaries]}
"""

from __future__ import annotations

from typing import Any

from kubesched.api.objects import Pod
from kubesched.descheduler.framework import EvictorPlugin


class ProtectCanaries(EvictorPlugin):
    name = "ProtectCanaries"

    @classmethod
    def validate_args(cls, args: dict[str, Any], field: str) -> dict[str, Any]:
        return {"label": str(args.get("label", "track")), "value": str(args.get("value", "canary"))}

    def filter(self, pod: Pod) -> bool:
        return pod.labels.get(self.args.get("label", "track")) != self.args.get("value", "canary")
