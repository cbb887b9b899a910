"""Loading documents: a kubectl `List`, multi-document YAML, or JSON, into typed objects.

A snapshot of a large cluster (5,000 nodes, 150,000 pods: about 100 MB of JSON) is read without ever
holding the whole decoded document: msgspec splits the file's `items` into undecoded views of the bytes,
each item is decoded, parsed into its object and dropped, and a pod keeps only the view of its bytes
(`RawDocument`) for whoever reads its whole document later. The cyclic garbage collector is paused while
the objects are built (they hold no cycles; a collection pass over a growing heap of new containers every
few hundred allocations cost more than the parsing). A document that is not valid JSON, or whose shape is
not the one the fast path expects, is read by the general path below, which gives the same objects or the
same error.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from kubesched.api.defaulting import with_admitted_priority
from kubesched.api.documents import read_bytes, read_document, read_documents
from kubesched.api.fields import sequence
from kubesched.api.objects import (
    GenericObject,
    Namespace,
    Node,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    RawDocument,
    Workload,
    parse_meta,
    parse_namespace,
    parse_node,
    parse_pdb,
    parse_pod,
    parse_priority_class,
    parse_pvc,
    parse_resource_list,
    parse_workload,
)
from kubesched.api.scheduling import ElasticQuota, PodGroup, parse_elastic_quota, parse_pod_group
from kubesched.api.topology import NodeResourceTopology, parse_node_resource_topology
from kubesched.api.validation import validate
from kubesched.diagnostics import warn
from kubesched.errors import InputError

__all__ = ["Snapshot", "iter_objects", "load_snapshot", "parse_objects", "read_document", "read_documents"]

STORED_NOTE = {"api-server": "the API server would refuse this object",
               "kubelet": "no kubelet reports this: allocatable is capacity minus reservations"}

# Every kind some part of kubesched reads from a snapshot; any other kind is named in a warning (read nothing
# from it). A third-party plugin that reads another kind adds it here.
READ_KINDS: set[str] = {
    "Node", "Pod", "Namespace", "PriorityClass", "PodDisruptionBudget", "PersistentVolumeClaim",
    "Service", "ReplicaSet", "ReplicationController", "StatefulSet", "Deployment", "DaemonSet", "Job", "CronJob",
    "PersistentVolume", "StorageClass", "CSINode", "CSIDriver", "CSIStorageCapacity",
    "NodeMetrics", "PodMetrics", "NodeMetric",
}

WORKLOAD_KINDS = ("Service", "ReplicaSet", "ReplicationController", "StatefulSet")

# Objects of other kinds kept with the cluster: parsed when kubesched understands them, else generic.
OtherObject = GenericObject | PodGroup | ElasticQuota | NodeResourceTopology
TYPED_OTHERS: dict[str, Callable[[dict[str, Any]], OtherObject]] = {
    "PodGroup": parse_pod_group,
    "ElasticQuota": parse_elastic_quota,
    "NodeResourceTopology": parse_node_resource_topology,
}


def iter_objects(docs: list[Any], file: str, container: str = "") -> Iterator[dict[str, Any]]:
    """Flatten Lists (and JSON arrays) into objects."""
    for i, doc in enumerate(docs):
        where = f"{container} item {i + 1}" if container else f"document {i + 1}"
        if isinstance(doc, list):
            yield from iter_objects(doc, file)
            continue
        if not isinstance(doc, dict):
            raise InputError(f"{where}: expected an object with apiVersion and kind, got {type(doc).__name__}",
                             file=file)
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and "items" in doc:
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise InputError("expected a list", file=file, obj=kind, field="items")
            if kind != "List":
                # A typed list (PodList, NodeMetricsList, as the API and `kubectl get --raw` return them)
                # leaves kind and apiVersion out of its items: they are the list's.
                item_kind, api = kind[: -len("List")], doc.get("apiVersion")
                items = [{"apiVersion": api, "kind": item_kind, **i} if isinstance(i, dict) and "kind" not in i
                         else i for i in items]
            yield from iter_objects(items, file, kind)
            continue
        if not isinstance(kind, str) or not kind:
            meta = doc.get("metadata")
            name = meta.get("name") if isinstance(meta, dict) else None
            raise InputError("expected a kind", file=file, obj=f"object {name}" if isinstance(name, str) else where,
                             field="kind")
        yield doc


@dataclass
class Snapshot:
    """What a snapshot file holds, by kind. Order within each kind is file order."""

    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    namespaces: list[Namespace] = field(default_factory=list)
    priority_classes: list[PriorityClass] = field(default_factory=list)
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    pvcs: list[PersistentVolumeClaim] = field(default_factory=list)
    workloads: list[Workload] = field(default_factory=list)
    others: list[OtherObject] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[OtherObject]:
        return [o for o in self.others if o.kind == kind]


_PARSERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "Node": parse_node,
    "Pod": parse_pod,
    "Namespace": parse_namespace,
    "PriorityClass": parse_priority_class,
    "PodDisruptionBudget": parse_pdb,
    "PersistentVolumeClaim": parse_pvc,
}
_TARGET = {"Node": "nodes", "Pod": "pods", "Namespace": "namespaces", "PriorityClass": "priority_classes",
           "PodDisruptionBudget": "pdbs", "PersistentVolumeClaim": "pvcs"}


def check_quantities(raw: dict[str, Any]) -> None:
    """The quantities of the other kinds kubesched computes with (usage, volume sizes): non-negative and within
    the int64 units, like a Pod's or a Node's."""
    kind = raw.get("kind")
    if kind == "NodeMetrics":
        parse_resource_list(raw.get("usage"), "usage")
    elif kind == "PodMetrics":
        for i, c in enumerate(sequence(raw.get("containers"), "containers")):
            if not isinstance(c, dict):
                raise InputError("expected a container object", field=f"containers[{i}]")
            parse_resource_list(c.get("usage"), f"containers[{i}].usage")
    elif kind == "PersistentVolume":
        spec = raw.get("spec")
        if isinstance(spec, dict):
            parse_resource_list(spec.get("capacity"), "spec.capacity")


def parse_objects(objects: list[dict[str, Any]], file: str, snap: Snapshot | None = None) -> Snapshot:
    """Typed objects from decoded ones. What the API server would refuse but kubesched can read (a name that is
    not a DNS subdomain, a pod without containers — upstream's unit-test fixtures have both) is a warning:
    these are stored objects, read as they are."""
    return _parse_items(((raw, None) for raw in objects), file, snap)


def _parse_items(items: Iterable[tuple[dict[str, Any], RawDocument | None]], file: str,
                 snap: Snapshot | None = None) -> Snapshot:
    """Objects (each with its undecoded document when the pod should keep that instead) into a Snapshot."""
    snap = snap if snap is not None else Snapshot()
    seen: set[tuple[str, str]] = set()
    ignored: dict[str, int] = {}
    pods = snap.pods
    for raw, document in items:
        kind = raw["kind"]
        try:
            if kind == "Pod":
                pod = parse_pod(raw, document)
                pods.append(pod)
                ident = (kind, pod.key)
            elif kind in _PARSERS:
                obj = _PARSERS[kind](raw)
                getattr(snap, _TARGET[kind]).append(obj)
                ident = (kind, obj.meta.key)
            elif kind in WORKLOAD_KINDS:
                w = parse_workload(raw, kind)
                snap.workloads.append(w)
                other = GenericObject(kind, str(raw.get("apiVersion", "")), w.meta, raw)
                snap.others.append(other)
                ident = (kind, w.meta.key)
            elif kind in TYPED_OTHERS:
                typed = TYPED_OTHERS[kind](raw)
                snap.others.append(typed)
                ident = (kind, typed.meta.key if typed.meta is not None else "")
            else:
                meta = parse_meta(raw, kind, namespaced=True) if isinstance(raw.get("metadata"), dict) else None
                check_quantities(raw)
                snap.others.append(GenericObject(kind, str(raw.get("apiVersion", "")), meta, raw))
                ident = (kind, meta.key) if meta else (kind, str(id(raw)))
        except InputError as e:
            raise e.located(file=file, obj=kind) from None
        if ident in seen and (kind in _PARSERS or kind in TYPED_OTHERS):
            raise InputError("duplicate object", file=file, obj=f"{kind} {ident[1]}")
        seen.add(ident)
        if kind not in READ_KINDS:
            ignored[kind] = ignored.get(kind, 0) + 1
        if kind in _PARSERS or kind in WORKLOAD_KINDS:
            for problem in validate(raw):
                warn(f"{problem.body} ({STORED_NOTE[problem.by]}; read as given)", file=file,
                     obj=f"{kind} {ident[1]}", field=problem.field)
    if ignored:
        held = ", ".join(f"{n} {k}" for k, n in sorted(ignored.items()))
        warn(f"not read (no part of kubesched uses these kinds): {held}", file=file)
    if snap.pods:
        classes = {pc.meta.name: pc for pc in snap.priority_classes}
        snap.pods = [with_admitted_priority(p, classes) for p in snap.pods]
    return snap


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a bulk of new, acyclic objects is built."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_FROZEN_DEPTH = 0


class FrozenHeap:
    """The heap of a `gc_frozen` block. With `collect_after` set, the cyclic GC does not run by itself:
    `maybe_collect` collects once about that many GC-tracked objects were made since the last collection
    (CPython's count of the youngest generation, allocations less deallocations, while collections are
    off), then freezes the survivors, so each collection scans only what was made since the one before."""

    __slots__ = ("collect_after",)

    def __init__(self, collect_after: int | None) -> None:
        self.collect_after = collect_after

    def maybe_collect(self) -> None:
        if self.collect_after is not None and gc.get_count()[0] >= self.collect_after:
            gc.collect()
            gc.freeze()


@contextmanager
def gc_frozen(young_threshold: int | None = None, collect_after: int | None = None) -> Iterator[FrozenHeap]:
    """A run over objects built beforehand that live through it (the cluster, the snapshot): the cyclic GC
    stops rescanning them (gc.freeze), so a full collection during the run scans only what the run made —
    one full collection of a 5,000-node cluster's objects costs a quarter of a second. `young_threshold`
    spaces out young collections too.

    `collect_after` is for runs that replace their objects all the time but make almost no reference cycles
    (the simulator: a pod object per status change; a day of a 5,000-node cluster leaves a few hundred
    cyclic objects): CPython would rescan the whole heap every few million replacements (a tenth of such a
    run). Here the automatic GC is off and the run calls `maybe_collect` (see FrozenHeap); a cycle among
    frozen objects waits for the end of the block. Nested runs keep the outer one's policy (their
    `maybe_collect` does nothing)."""
    global _FROZEN_DEPTH
    if _FROZEN_DEPTH:
        yield FrozenHeap(None)
        return
    thresholds = gc.get_threshold()
    enabled = gc.isenabled()
    gc.freeze()
    if young_threshold is not None:
        gc.set_threshold(young_threshold, *thresholds[1:])
    if collect_after is not None:
        gc.disable()
    _FROZEN_DEPTH += 1
    try:
        yield FrozenHeap(collect_after)
    finally:
        _FROZEN_DEPTH -= 1
        if collect_after is not None:
            # What the run made since its last collection joins the old generation unscanned (freeze, then
            # unfreeze, moves it there and resets the young count): re-enabling the collector would otherwise
            # start with a young collection of up to `collect_after` objects, a second at 5,000 nodes. Cycles
            # among them wait for the next full collection.
            gc.freeze()
        gc.set_threshold(*thresholds)
        if enabled:
            gc.enable()
        gc.unfreeze()


class _NotFast(Exception):
    """The document is not one the fast JSON path reads; the general path reads it (and reports its errors)."""


_RAW_OBJECT = msgspec.json.Decoder(dict[str, msgspec.Raw] | list[msgspec.Raw])
_RAW_ITEMS = msgspec.json.Decoder(list[msgspec.Raw] | None)
_DECODE = msgspec.json.Decoder()


def _fast_json_items(data: bytes) -> Iterator[tuple[dict[str, Any], RawDocument | None]]:
    """Each object of a JSON document with its undecoded bytes, in file order; _NotFast where the document
    is not a List (or array) of objects with kinds, or not valid JSON."""
    try:
        top = _RAW_OBJECT.decode(data)
        if isinstance(top, list):
            elements, first = top, None
        else:
            kind = _DECODE.decode(top["kind"]) if "kind" in top else None
            if not (isinstance(kind, str) and kind.endswith("List") and "items" in top):
                raise _NotFast
            elements = _RAW_ITEMS.decode(top["items"]) or []
            first = None
            if kind != "List":
                api = _DECODE.decode(top["apiVersion"]) if "apiVersion" in top else None
                first = {"apiVersion": api, "kind": kind[: -len("List")]}
    except msgspec.DecodeError:
        raise _NotFast from None
    for element in elements:
        try:
            obj = _DECODE.decode(element)
        except msgspec.DecodeError:
            raise _NotFast from None
        if not isinstance(obj, dict):
            raise _NotFast
        item_first = first
        if first is not None:
            if "kind" in obj:
                item_first = None
            else:
                obj = {**first, **obj}
        kind = obj.get("kind")
        if not isinstance(kind, str) or not kind or (kind.endswith("List") and "items" in obj):
            raise _NotFast  # a list inside the list, or an object without a kind: the general path
        yield obj, (RawDocument(element, item_first) if kind == "Pod" else None)


def _looks_like_json(data: bytes) -> bool:
    head = data[:4096].lstrip()
    return head.startswith(b"{") or head.startswith(b"[")


def load_snapshot(path: str | Path) -> Snapshot:
    """Parse a snapshot file: what `kubectl get ... -o yaml` prints (a List), multi-document YAML or JSON."""
    file = str(path)
    with gc_paused():
        data = read_bytes(path)  # the same size bound and read errors as every document
        if _looks_like_json(data):
            try:
                return _parse_items(_fast_json_items(data), file)
            except (_NotFast, InputError, RecursionError, UnicodeDecodeError):
                # The general path reads it, and reports the first error in the same order as always
                # (the whole document's shape before any object's fields, nesting beyond its depth bound).
                pass
        del data
        docs = read_documents(path)
        return parse_objects(list(iter_objects(docs, file)), file)
