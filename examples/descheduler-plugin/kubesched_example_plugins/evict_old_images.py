"""EvictOldImages: a Deschedule strategy that moves pods still running an image older than a minimum tag.

    pluginConfig:
    - name: EvictOldImages
      args:
        images: {"registry.example.com/web": "2.0"}

Tags are compared as dotted numbers (`1.10` > `1.9`); a tag that is not numeric is left alone.
"""

from __future__ import annotations

from typing import Any

from kubesched.api.objects import Node, Pod
from kubesched.descheduler.framework import DeschedulePlugin, EvictionLimitError, EvictOptions, Status
from kubesched.errors import InputError


def _version(tag: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(x) for x in tag.split("."))
    except ValueError:
        return None


class EvictOldImages(DeschedulePlugin):
    name = "EvictOldImages"

    @classmethod
    def validate_args(cls, args: dict[str, Any], field: str) -> dict[str, Any]:
        """Called by the policy loader: the defaulted args, or an InputError naming the field."""
        images = args.get("images")
        if not isinstance(images, dict) or not images:
            raise InputError("expected a map of image name to minimum tag", field=f"{field}.images")
        for name, tag in images.items():
            if not isinstance(tag, str) or _version(tag) is None:
                raise InputError(f"expected a dotted numeric tag, got {tag!r}", field=f"{field}.images.{name}")
        return {"images": dict(images)}

    def _outdated(self, pod: Pod) -> str | None:
        for c in pod.containers:
            name, _, tag = c.image.rpartition(":")
            minimum = self.args.get("images", {}).get(name)
            have, want = _version(tag), _version(minimum) if minimum else None
            if have is not None and want is not None and have < want:
                return f"container {c.name} runs {c.image}, older than {name}:{minimum}"
        return None

    def deschedule(self, nodes: list[Node]) -> Status:
        evictor = self.handle.evictor
        for node in nodes:
            for pod in self.handle.pods_on_node(node.name, evictor.filter):
                why = self._outdated(pod)
                if why is None or not evictor.pre_eviction_filter(pod):
                    continue
                try:
                    evictor.evict(pod, EvictOptions(reason=why))
                except EvictionLimitError as e:
                    if e.limit == "node":
                        break
                    if e.limit == "total":
                        return Status()
        return Status()
