"""Where the plugin reads a node's NodeResourceTopology: the three caches upstream chooses between.

Mirrors kubernetes-sigs/scheduler-plugins `pkg/noderesourcetopology/cache/`: `passthrough.go` (the
default: the object as stored), `discardreserved.go` (discardReservedNodes: a node with a pod reserved and
not yet bound has no usable data — Filter says "invalid node topology data", Score 0) and
`overreserve.go` / `store.go` (cacheResyncPeriodSeconds > 0: the effective requests of pods reserved on a
node are taken from *every* zone of its object, since which zone the kubelet picks is unknown). kubesched's
overreserve forgets a node's reservations when its NodeResourceTopology object is updated (upstream resyncs
by pod fingerprint and also marks nodes with foreign pods; neither is modelled).
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

from kubesched.api.objects import Pod
from kubesched.api.topology import NodeResourceTopology, ResourceInfo
from kubesched.cluster.events import Event, EventType
from kubesched.cluster.state import ClusterState
from kubesched.scheduler.plugins.noderesourcetopology.numa import pod_effective_request


class NRTCache:
    """Passthrough: the stored object, always fresh."""

    def __init__(self, cluster: ClusterState) -> None:
        self.cluster = cluster

    def stored(self, node_name: str) -> NodeResourceTopology | None:
        obj = self.cluster.others.get(f"NodeResourceTopology/{node_name}")
        return obj if isinstance(obj, NodeResourceTopology) else None

    def get(self, node_name: str) -> tuple[NodeResourceTopology | None, bool]:
        """GetCachedNRTCopy: the object (None when there is none) and whether the data is fresh."""
        return self.stored(node_name), True

    def reserve(self, node_name: str, pod: Pod) -> None:
        return None

    def unreserve(self, node_name: str, pod: Pod) -> None:
        return None

    def post_bind(self, node_name: str, pod: Pod) -> None:
        return None


class DiscardReservedCache(NRTCache):
    def __init__(self, cluster: ClusterState) -> None:
        super().__init__(cluster)
        self.reserved: dict[str, set[str]] = {}

    def get(self, node_name: str) -> tuple[NodeResourceTopology | None, bool]:
        if self.reserved.get(node_name):
            return None, False
        return self.stored(node_name), True

    def reserve(self, node_name: str, pod: Pod) -> None:
        self.reserved.setdefault(node_name, set()).add(pod.uid)

    def unreserve(self, node_name: str, pod: Pod) -> None:
        self.reserved.get(node_name, set()).discard(pod.uid)

    def post_bind(self, node_name: str, pod: Pod) -> None:
        self.reserved.get(node_name, set()).discard(pod.uid)


class OverReserveCache(NRTCache):
    def __init__(self, cluster: ClusterState) -> None:
        super().__init__(cluster)
        self.assumed: dict[str, dict[str, dict[str, Fraction]]] = {}  # node → pod key → effective request
        cluster.subscribe(self._on_event, index=True)

    def _on_event(self, ev: Event) -> None:
        obj = ev.obj
        if isinstance(obj, NodeResourceTopology) and ev.type in (EventType.UPDATED, EventType.DELETED):
            self.assumed.pop(obj.meta.name, None)

    def get(self, node_name: str) -> tuple[NodeResourceTopology | None, bool]:
        nrt = self.stored(node_name)
        assumed = self.assumed.get(node_name)
        if nrt is None or not assumed:
            return nrt, True
        zones = []
        for zone in nrt.zones:
            resources = []
            for r in zone.resources:
                available = r.available
                for req in assumed.values():
                    q = req.get(r.name)
                    if q is not None:
                        available = available - q if available >= q else Fraction(0)
                resources.append(ResourceInfo(r.name, r.capacity, r.allocatable, available))
            zones.append(dataclasses.replace(zone, resources=tuple(resources)))
        return dataclasses.replace(nrt, zones=tuple(zones)), True

    def reserve(self, node_name: str, pod: Pod) -> None:
        if self.stored(node_name) is None:
            return
        self.assumed.setdefault(node_name, {})[pod.key] = pod_effective_request(pod)

    def unreserve(self, node_name: str, pod: Pod) -> None:
        self.assumed.get(node_name, {}).pop(pod.key, None)
