"""The pods counted on nodes, by owner name and node: what RemoveDuplicates reads instead of listing every pod.

Upstream's RemoveDuplicates lists every node's pods each cycle (informer listers) and looks for two pods of
one owner on one node. Almost no owner has two pods on one node, so listing 150,000 pods to find the few
that do makes a cycle's cost grow with the cluster. This index, kept from the cluster state's events (an
index listener, like a client-go informer's indexer), holds for each owner name the pods of that owner on
each node, and the nodes where an owner name has two pods or more (`repeated`): a cycle starts from those.

It mirrors NodeInfo membership exactly: a pod is held while `node_info.pods[key]` is that very pod object
(assigned, not terminal, on an existing node; assumed pods included, as in `ClusterState.pods_on`). A node
added adopts the pods that named it; a node removed drops the whole index, rebuilt on the next read.
"""

from __future__ import annotations

import weakref

from kubesched.api.objects import Pod
from kubesched.cluster.events import Event, EventType
from kubesched.cluster.state import ClusterState


class OwnerIndex:
    """owner name → node name → {pod key: pod}, and owner name → the nodes holding two or more of its pods."""

    def __init__(self, cluster: ClusterState) -> None:
        self._cluster = weakref.ref(cluster)
        self.by_owner: dict[str, dict[str, dict[str, Pod]]] = {}
        self.repeated: dict[str, set[str]] = {}
        # pod key → (node name, the pod's distinct owner names): what to take out when the pod changes.
        self._records: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._valid = False

    # ------------------------------------------------------------ reading

    def current(self) -> OwnerIndex:
        """The index, rebuilt first if a node was removed since the last read."""
        if not self._valid:
            self._rebuild()
        return self

    # ------------------------------------------------------------ keeping up

    def on_event(self, ev: Event) -> None:
        if not self._valid:
            return  # rebuilt from the state on the next read
        kind = ev.kind
        if kind == "Pod":
            self._reconcile(ev.obj.key)
        elif kind == "Node":
            if ev.type is EventType.DELETED:
                self._valid = False
            elif ev.type is EventType.ADDED:
                cluster = self._cluster()
                info = cluster.node_info_by_name.get(ev.obj.name) if cluster is not None else None
                if info is not None:
                    for key in list(info.pods):
                        self._reconcile(key)

    def _reconcile(self, key: str) -> None:
        rec = self._records.pop(key, None)
        if rec is not None:
            self._remove(key, rec)
        cluster = self._cluster()
        if cluster is None:
            return
        pod = cluster.pods.get(key)
        if pod is None or not pod.node_name or not pod.meta.owner_references:
            return
        info = cluster.node_info_by_name.get(pod.node_name)
        if info is None or info.pods.get(key) is not pod:
            return
        self._add(key, pod)

    def _add(self, key: str, pod: Pod) -> None:
        node = pod.node_name
        names = tuple(dict.fromkeys(o.name for o in pod.meta.owner_references))
        self._records[key] = (node, names)
        for name in names:
            per_node = self.by_owner.get(name)
            if per_node is None:
                self.by_owner[name] = per_node = {}
            here = per_node.get(node)
            if here is None:
                per_node[node] = here = {}
            here[key] = pod
            if len(here) == 2:
                self.repeated.setdefault(name, set()).add(node)

    def _remove(self, key: str, rec: tuple[str, tuple[str, ...]]) -> None:
        node, names = rec
        for name in names:
            per_node = self.by_owner[name]
            here = per_node[node]
            del here[key]
            if len(here) == 1:
                nodes = self.repeated[name]
                nodes.discard(node)
                if not nodes:
                    del self.repeated[name]
            elif not here:
                del per_node[node]
                if not per_node:
                    del self.by_owner[name]

    def _rebuild(self) -> None:
        self.by_owner = {}
        self.repeated = {}
        self._records = {}
        cluster = self._cluster()
        if cluster is not None:
            for info in cluster.node_infos:
                for key, pod in info.pods.items():
                    if pod.meta.owner_references:
                        self._add(key, pod)
        self._valid = True


_INDEXES: weakref.WeakKeyDictionary[ClusterState, OwnerIndex] = weakref.WeakKeyDictionary()


def owner_index_for(cluster: ClusterState) -> OwnerIndex:
    """The cluster's owner index, built (and subscribed to its events) on first use."""
    idx = _INDEXES.get(cluster)
    if idx is None:
        idx = _INDEXES[cluster] = OwnerIndex(cluster)
        cluster.subscribe(idx.on_event, index=True, kinds=("Pod", "Node"))
        idx.current()
    return idx
