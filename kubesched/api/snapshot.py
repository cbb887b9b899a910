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
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import yaml

from kubesched.api.defaulting import with_admitted_priority
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
    parse_workload,
)
from kubesched.api.scheduling import ElasticQuota, PodGroup, parse_elastic_quota, parse_pod_group
from kubesched.api.topology import NodeResourceTopology, parse_node_resource_topology
from kubesched.errors import InputError

WORKLOAD_KINDS = ("Service", "ReplicaSet", "ReplicationController", "StatefulSet")

# Objects of other kinds kept with the cluster: parsed when kubesched understands them, else generic.
OtherObject = GenericObject | PodGroup | ElasticQuota | NodeResourceTopology
TYPED_OTHERS: dict[str, Callable[[dict[str, Any]], OtherObject]] = {
    "PodGroup": parse_pod_group,
    "ElasticQuota": parse_elastic_quota,
    "NodeResourceTopology": parse_node_resource_topology,
}


def _yaml_loader() -> type[yaml.SafeLoader]:
    # The C loader is several times faster on large snapshots; fall back where libyaml is missing.
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_documents(path: str | Path) -> list[Any]:
    """Every document in a YAML or JSON file (multi-document YAML gives several)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise InputError(f"cannot read file: {e.strerror or e}", file=str(path)) from None
    stripped = text.lstrip()
    if stripped.startswith("{") or stripped.startswith("["):
        try:
            return [json.loads(text)]
        except json.JSONDecodeError as e:
            # JSON is YAML too; only if YAML also fails is it an error.
            try:
                return [d for d in yaml.load_all(text, Loader=_yaml_loader()) if d is not None]
            except yaml.YAMLError:
                raise InputError(f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}", file=str(path)) from None
    try:
        return [d for d in yaml.load_all(text, Loader=_yaml_loader()) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise InputError(f"invalid YAML{where}: {problem}", file=str(path)) from None


def read_document(path: str | Path, what: str) -> dict[str, Any]:
    """Exactly one object document (a configuration file)."""
    docs = read_documents(path)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise InputError(f"expected one {what} object, found {len(docs)} document(s)", file=str(path))
    return docs[0]


def iter_objects(docs: list[Any], file: str) -> Iterator[dict[str, Any]]:
    """Flatten Lists (and JSON arrays) into objects."""
    for i, doc in enumerate(docs):
        if isinstance(doc, list):
            yield from iter_objects(doc, file)
            continue
        if not isinstance(doc, dict):
            raise InputError(f"document {i + 1}: expected an object with apiVersion and kind, got "
                             f"{type(doc).__name__}", file=file)
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
            yield from iter_objects(items, file)
            continue
        if not isinstance(kind, str) or not kind:
            name = (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), dict) else None
            raise InputError("expected a kind", file=file, obj=f"object {name}" if name else f"document {i + 1}",
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


def parse_objects(objects: list[dict[str, Any]], file: str, snap: Snapshot | None = None) -> Snapshot:
    return _parse_items(((raw, None) for raw in objects), file, snap)


def _parse_items(items: Iterable[tuple[dict[str, Any], RawDocument | None]], file: str,
                 snap: Snapshot | None = None) -> Snapshot:
    """Objects (each with its undecoded document when the pod should keep that instead) into a Snapshot."""
    snap = snap if snap is not None else Snapshot()
    seen: set[tuple[str, str]] = set()
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
                snap.others.append(GenericObject(kind, str(raw.get("apiVersion", "")), meta, raw))
                ident = (kind, meta.key) if meta else (kind, str(id(raw)))
        except InputError as e:
            raise e.located(file=file, obj=kind) from None
        if ident in seen and (kind in _PARSERS or kind in TYPED_OTHERS):
            raise InputError("duplicate object", file=file, obj=f"{kind} {ident[1]}")
        seen.add(ident)
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
        try:
            data = Path(path).read_bytes()
        except OSError as e:
            raise InputError(f"cannot read file: {e.strerror or e}", file=file) from None
        if _looks_like_json(data):
            try:
                return _parse_items(_fast_json_items(data), file)
            except (_NotFast, InputError):
                # The general path reads it, and reports the first error in the same order as always
                # (the whole document's shape before any object's fields).
                pass
        del data
        docs = read_documents(path)
        return parse_objects(list(iter_objects(docs, file)), file)
