"""Typed events: what `ClusterState.apply` tells its listeners after every change, and who caused it.

An informer tells its handlers that an object was added, updated or deleted; kubesched's state also tells
bindings apart (the scheduler's assumption, or a pod that arrived bound) because the scheduling queue,
the recorders and the simulated kubelets react to those. Every event carries its *cause*, the component
whose action made the change, so that a recorder never has to guess whether a pod went away because the
descheduler evicted it, preemption deleted it or its kubelet killed it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, NamedTuple


class EventType(enum.Enum):
    ADDED = "added"
    UPDATED = "updated"
    # The scheduler assumed a pod on a node (`Event.node`): it counts there from now on, before its
    # binding is made. Only the scheduler's own cache sees this; the API server has not been told.
    ASSUMED = "assumed"
    # The pod is bound to `Event.node` through the API (the Binding subresource, or a watch showing it).
    BOUND = "bound"
    # The scheduler forgot an assumed pod (its binding cycle failed); `Event.node` names the node it left.
    UNBOUND = "unbound"
    DELETED = "deleted"

    # Members are singletons: identity hashing is exact, and much cheaper than Enum's (a Python-level
    # hash of the name) on the path every event takes (listener routes, watcher tables are keyed by it).
    __hash__ = object.__hash__


class Cause(enum.Enum):
    """Who made a change (the component acting through the client seam, or where an object came from)."""

    USER = "user"                      # the snapshot, the scenario, a command-line user
    SCHEDULER = "scheduler"            # assume, bind, nominate
    PREEMPTION = "preemption"          # the scheduler deleting victims
    DESCHEDULER = "descheduler"        # evictions through the Eviction API
    KUBELET = "kubelet"                # pod status, node conditions, node-pressure evictions
    CONTROLLER = "controller"          # workload controllers creating and deleting pods
    NODE_LIFECYCLE = "node-lifecycle"  # cordon, drain, taints, node removal
    DISRUPTION = "disruption"          # the disruption controller's PDB status
    POD_GC = "pod-gc"                  # the pod garbage collector
    TRACE = "trace"                    # pods arriving and leaving as a trace says
    API = "api"                        # the API server itself (termination finished, eviction bookkeeping)


class Event(NamedTuple):
    """One change. `obj` is the object after it (for DELETED: as it was last); `old` the one it replaced.
    A named tuple: immutable like a frozen dataclass, and made in a third of the time (two per binding)."""

    type: EventType
    kind: str
    obj: Any
    old: Any = None
    cause: Cause = Cause.USER
    node: str = ""

    @property
    def key(self) -> str:
        meta = getattr(self.obj, "meta", None)
        return meta.key if meta is not None else ""


Listener = Callable[[Event], None]
