"""RemoveDuplicates (Balance): spread pods of one owner (and one set of images) evenly over feasible nodes.

A pod is a duplicate when another pod on the same node has the same namespace, owner kinds/names and
container images. For every owner with duplicates, the feasible nodes are those matching the pods'
taint tolerations and node selection (only sets of more than one node count); each node keeps at most
ceil(occurrences / feasible nodes) of the owner's pods and the rest are evicted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from kubesched.api.objects import Node, Pod
from kubesched.config.plugin_args import PluginArgs
from kubesched.descheduler.framework import BalancePlugin, Handle, Status
from kubesched.descheduler.nodeutil import pod_match_node_selector, tolerations_tolerate_taints_with_filter
from kubesched.descheduler.owner_index import owner_index_for
from kubesched.descheduler.plugins._common import (
    NODE_LIMIT,
    TOTAL_LIMIT,
    IncludeExclude,
    all_of,
    evict,
    namespaces,
    no_schedule_or_execute,
    optional_strings,
    strategy_fields,
)

PLUGIN_NAME = "RemoveDuplicates"


@dataclass(frozen=True, slots=True)
class RemoveDuplicatesArgs(PluginArgs):
    """RemoveDuplicatesArgs (types.go); ValidateRemoveDuplicatesArgs checks the namespaces."""

    namespaces: IncludeExclude | None = None
    exclude_owner_kinds: tuple[str, ...] = ()

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> RemoveDuplicatesArgs:
        a = strategy_fields(PLUGIN_NAME, raw, field, ("namespaces", "excludeOwnerKinds"))
        return cls(namespaces=namespaces(a), exclude_owner_kinds=tuple(optional_strings(a, "excludeOwnerKinds") or ()))


# (namespace, owner kind, owner name, images joined by "#")
OwnerKey = tuple[str, str, str, str]


class RemoveDuplicates(BalancePlugin):
    name: ClassVar[str] = PLUGIN_NAME
    Args = RemoveDuplicatesArgs
    args: RemoveDuplicatesArgs

    def __init__(self, args: RemoveDuplicatesArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        ev = handle.evictor
        # The namespaces and owners are checked first (cheaply); then both evictor filters, as upstream lists.
        self.evictable = all_of(ev.filter, ev.pre_eviction_filter)
        self.index = owner_index_for(handle.cluster)

    def balance(self, nodes: list[Node]) -> Status:
        excluded_kinds = frozenset(self.args.exclude_owner_kinds)
        ns = self.args.namespaces
        include = frozenset(ns.include) if ns else frozenset()
        exclude = frozenset(ns.exclude) if ns else frozenset()

        def listed(pod: Pod) -> bool:
            """The pods upstream's listing keeps before the evictor's filters: owned, in the namespaces."""
            meta = pod.meta
            if excluded_kinds and any(o.kind in excluded_kinds for o in meta.owner_references):
                return False
            return not ((include and meta.namespace not in include) or (exclude and meta.namespace in exclude))

        index = self.index.current()
        by_owner = index.by_owner
        position = {node.name: i for i, node in enumerate(nodes)}

        # Pass 1: only where an owner name has two pods on one node can a signature repeat on that node
        # (equal signatures have equal owners), so the owners' repeated nodes are all there is to compare.
        possible: set[OwnerKey] = set()
        collided: set[str] = set()
        for name, repeated_on in index.repeated.items():
            per_node = by_owner[name]
            for node_name in repeated_on:
                if node_name not in position:
                    continue
                seen_here: set[Any] = set()
                for pod in per_node[node_name].values():
                    if not listed(pod):
                        continue
                    owner_keys, signature = _signature(pod)
                    if signature is None:
                        continue
                    if signature in seen_here:
                        possible.update(owner_keys)
                        collided.add(node_name)
                    else:
                        seen_here.add(signature)
        if not possible:
            return Status()

        # Pass 2, on the nodes with a collision, in the nodes' order, each node's pods by name: which pods
        # are duplicates (the first of each signature stays), per owner key and node.
        evictable = self.evictable
        possible_names = {owner_key[2] for owner_key in possible}
        on_collided: dict[str, dict[str, Pod]] = {}
        for name in possible_names:
            for node_name, members in by_owner[name].items():
                if node_name in collided:
                    on_collided.setdefault(node_name, {}).update(members)
        duplicate_pods: dict[OwnerKey, dict[str, list[Pod]]] = {}
        for node_name in sorted(on_collided, key=position.__getitem__):
            kept = []
            for pod in on_collided[node_name].values():
                if not listed(pod):
                    continue
                owner_keys, signature = _signature(pod)
                if not possible.isdisjoint(owner_keys) and evictable(pod):
                    kept.append((pod, owner_keys, signature))
            kept.sort(key=_name_order)
            seen: set[Any] = set()
            for pod, owner_keys, signature in kept:
                if signature is None:
                    continue  # a pod without containers: upstream would index an empty list
                if signature not in seen:
                    seen.add(signature)
                    continue
                for owner_key in owner_keys:
                    duplicate_pods.setdefault(owner_key, {}).setdefault(node_name, []).append(pod)
        if not duplicate_pods:
            return Status()

        # Each owner key's occurrences: its evictable pods on every node given.
        occurrences: dict[OwnerKey, int] = {}
        for name in {owner_key[2] for owner_key in duplicate_pods}:
            for node_name, members in by_owner[name].items():
                if node_name not in position:
                    continue
                for pod in members.values():
                    if not listed(pod):
                        continue
                    for owner_key in _signature(pod)[0]:
                        if owner_key[2] == name and owner_key in duplicate_pods and evictable(pod):
                            occurrences[owner_key] = occurrences.get(owner_key, 0) + 1

        targets = _TargetNodes(nodes)
        for owner_key, pod_nodes in duplicate_pods.items():
            feasible = targets.count(pod_nodes)
            if feasible < 2:
                continue
            n = occurrences[owner_key]
            upper_avg = -(-n // feasible)  # math.Ceil(n / feasible)
            for pods in pod_nodes.values():
                if len(pods) + 1 <= upper_avg:
                    continue
                for pod in pods[upper_avg - 1:]:
                    outcome = evict(self.handle, pod, PLUGIN_NAME)
                    if outcome == NODE_LIMIT:
                        break
                    if outcome == TOTAL_LIMIT:
                        return Status()
        return Status()


def _name_order(entry: tuple[Pod, tuple[OwnerKey, ...], Any]) -> tuple[str, str]:
    meta = entry[0].meta
    return (meta.name, meta.namespace)


def _signature(pod: Pod) -> tuple[tuple[OwnerKey, ...], Any]:
    """The pod's owner keys (namespace, owner kind, owner name, sorted images joined by "#") and its
    duplicate signature: the sorted namespace/kind/name/image combinations (None without containers).
    Memoised on the pod. A pod with one owner and one container (the usual case) has the single combination
    itself as signature; any other pod a tuple of combinations, so the two forms never compare equal."""
    cached = pod.cache.get("desched_duplicate_signature")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    owners = pod.meta.owner_references
    ns = pod.meta.namespace
    containers = pod.containers
    if len(owners) == 1 and len(containers) == 1:
        o = owners[0]
        key = (ns, o.kind, o.name, containers[0].image)
        cached = ((key,), key)
    else:
        images = sorted(c.image for c in containers)
        images_hash = "#".join(images)
        owner_keys = tuple((ns, o.kind, o.name, images_hash) for o in owners)
        combos = sorted((ns, o.kind, o.name, image) for o in owners for image in images)
        cached = (owner_keys, tuple(combos) if combos else None)
    pod.cache["desched_duplicate_signature"] = cached
    return cached


class _TargetNodes:
    """getTargetNodes, counted only: the union over distinct pod shapes of the nodes each shape may land on
    (taints with NoSchedule/NoExecute tolerated and node selection matched), counting only shapes with more
    than one such node. Node sets are memoised per shape and held as boolean masks over `nodes`."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.by_shape: dict[Any, np.ndarray | None] = {}
        self.union_cache: dict[frozenset[Any], int] = {}
        # Nodes grouped by their taints: tolerations are checked once per group.
        self.taint_groups: dict[tuple[Any, ...], list[int]] = {}
        for i, node in enumerate(nodes):
            self.taint_groups.setdefault(node.taints, []).append(i)

    @staticmethod
    def shape(pod: Pod) -> Any:
        # What utils.TolerationsEqual / NodeSelectorsEqual / the nodeSelector comparison look at.
        tolerations = frozenset((t.key, t.operator, t.value, t.effect) for t in pod.tolerations)
        return (tolerations, pod.affinity.node_required, tuple(sorted(pod.node_selector.items())),
                bool(pod.node_selector) or pod.affinity.node_required is not None)

    def mask(self, pod: Pod) -> np.ndarray | None:
        key = self.shape(pod)
        if key in self.by_shape:
            return self.by_shape[key]
        m = np.zeros(len(self.nodes), dtype=bool)
        selects = key[3]
        for taints, rows in self.taint_groups.items():
            if not tolerations_tolerate_taints_with_filter(pod.tolerations, taints, no_schedule_or_execute):
                continue
            if not selects:
                m[rows] = True
                continue
            for i in rows:
                if pod_match_node_selector(pod, self.nodes[i]):
                    m[i] = True
        result = m if int(m.sum()) > 1 else None
        self.by_shape[key] = result
        return result

    def count(self, pod_nodes: dict[str, list[Pod]]) -> int:
        shapes: dict[Any, Pod] = {}
        for pods in pod_nodes.values():
            for pod in pods:
                shapes.setdefault(self.shape(pod), pod)
        key = frozenset(shapes)
        cached = self.union_cache.get(key)
        if cached is not None:
            return cached
        union: np.ndarray | None = None
        for pod in shapes.values():
            m = self.mask(pod)
            if m is None:
                continue
            union = m.copy() if union is None else (union | m)
        total = 0 if union is None else int(union.sum())
        self.union_cache[key] = total
        return total
