"""The Kubernetes objects kubesched reads, parsed from what `kubectl get -o yaml` prints.

Objects are *stored* objects: no API defaulting is applied (a pod with limits and no requests has no
requests). Each object keeps its `raw` dict so that components can read fields not modelled here and
so that output can echo the input. Parse errors are InputErrors naming the object and the field.

A pod loaded from a large JSON snapshot keeps its document undecoded (`RawDocument`, a view of the file's
bytes) until something reads `raw`: the modelled fields are all most components read, and 150,000 decoded
pod documents would hold several times the file's size in memory.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import msgspec

from kubesched.api.fields import INT32, INT64, integer, label_map, mapping, sequence
from kubesched.api.quantity import format_quantity, milli_value_of, parse_quantity, value_of
from kubesched.api.selectors import (
    NOTHING,
    LabelSelector,
    NodeSelector,
    NodeSelectorTerm,
    Requirement,
    parse_label_selector,
    parse_node_selector,
    parse_node_selector_term,
)
from kubesched.errors import InputError

ResourceList = dict[str, Fraction]

DEFAULT_SCHEDULER_NAME = "default-scheduler"


# ---------------------------------------------------------------- small helpers


_JSON = msgspec.json.Decoder()


class LazyDocument:
    """A document (or part of one) kept in a form that `decode()` makes into the dict it stands for; equal
    to that dict, and as unhashable."""

    __slots__ = ()

    def decode(self) -> dict[str, Any]:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyDocument):
            return self.decode() == other.decode()
        if isinstance(other, dict):
            return self.decode() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class RawDocument(LazyDocument):
    """An object's JSON document, not yet decoded: `data` is its bytes (a `msgspec.Raw` view of the file),
    `first` the fields a typed list gives its items (apiVersion and kind of a PodList's items), put first.
    Decoded once, when first read."""

    __slots__ = ("data", "first", "decoded")

    def __init__(self, data: msgspec.Raw | bytes, first: dict[str, Any] | None = None) -> None:
        self.data = data
        self.first = first
        self.decoded: dict[str, Any] | None = None

    def decode(self) -> dict[str, Any]:
        doc = self.decoded
        if doc is None:
            doc = _JSON.decode(self.data)
            if self.first:
                doc = {**self.first, **doc}
            self.decoded = doc
        return doc

    def __repr__(self) -> str:
        return f"RawDocument({bytes(self.data)[:60]!r}...)"


class RawPart(LazyDocument):
    """A part of an undecoded document (a container of a pod): `path` from the document's root."""

    __slots__ = ("document", "path")

    def __init__(self, document: RawDocument, path: tuple[str | int, ...]) -> None:
        self.document = document
        self.path = path

    def decode(self) -> dict[str, Any]:
        node: Any = self.document.decode()
        for step in self.path:
            node = node[step]
        return node  # type: ignore[no-any-return]


class BoundDocument(LazyDocument):
    """A pod's document after a binding: `base` with spec.nodeName set to `node_name` (removed when empty),
    made when first read. A binding happens once per pod in the scheduler's hot path and most bound pods
    are never printed, so the copy of the document is put off until someone reads it."""

    __slots__ = ("base", "node_name")

    def __init__(self, base: dict[str, Any] | RawDocument | BoundDocument, node_name: str) -> None:
        self.base = base
        self.node_name = node_name

    def decode(self) -> dict[str, Any]:
        base = self.base
        raw = base if type(base) is dict else base.decode()  # type: ignore[union-attr]
        spec = dict(raw.get("spec") or {})
        if self.node_name:
            spec["nodeName"] = self.node_name
        else:
            spec.pop("nodeName", None)
        return {**raw, "spec": spec}


_intern = sys.intern
# Values many objects of a snapshot share (timestamps, owner references, resource lists, tolerations), each
# parsed once; cleared when large. Every entry is immutable, or (resource lists) read-only by convention.
_CACHE_LIMIT = 1 << 16
_TIMES: dict[str, datetime | None] = {}


def parse_time(value: Any, field: str) -> datetime | None:
    """An RFC 3339 timestamp as an aware datetime (UTC)."""
    if type(value) is str:
        t = _TIMES.get(value)
        if t is None:
            t = _parse_time(value, field)
            if len(_TIMES) >= _CACHE_LIMIT:
                _TIMES.clear()
            _TIMES[value] = t
        return t
    return _parse_time(value, field)


def _parse_time(value: Any, field: str) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str):
        raise InputError(f"expected an RFC 3339 timestamp, got {value!r}", field=field)
    text = value.strip()
    if text.endswith("Z") or text.endswith("z"):
        text = text[:-1] + "+00:00"
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"expected an RFC 3339 timestamp, got {value!r}", field=field) from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t


def _int(raw: Any, field: str, default: int | None = None, bits: int = INT64) -> int | None:
    """An integer field of a Go type of `bits` bits (int32 or int64): out-of-range values are errors, as the
    API server's decoder makes them (numeric strings and whole floats too, as kubectl-made documents may
    carry them)."""
    if raw is None:
        return default
    if type(raw) is int and -(1 << (bits - 1)) <= raw < (1 << (bits - 1)):
        return raw  # the common case, kept cheap
    return integer(raw, field, bits=bits, whole_floats=True, strings=True)


INT64_MAX = 2**63 - 1


_RESOURCE_LISTS: dict[tuple[Any, ...], tuple[ResourceList, tuple[Any, ...]]] = {}


def resource_list_and_key(raw: Any, field: str) -> tuple[ResourceList, tuple[Any, ...]]:
    """parse_resource_list, and the written (name, value) pairs as a key (pods of one template share both:
    the ResourceList returned is shared and must not be changed)."""
    if type(raw) is dict:
        key = tuple(raw.items())
        try:
            hit = _RESOURCE_LISTS.get(key)
        except TypeError:  # an unhashable value: not a quantity, reported below
            hit = None
        if hit is not None:
            return hit
        out = parse_resource_list(raw, field)
        # Only string values are remembered: a hit is then the same strings (no 1 == 1.0 == True confusion).
        if all(type(v) is str for v in raw.values()):
            if len(_RESOURCE_LISTS) >= _CACHE_LIMIT:
                _RESOURCE_LISTS.clear()
            _RESOURCE_LISTS[key] = (out, key)
        return out, key
    out = parse_resource_list(raw, field)
    return out, () if raw is None else tuple(out.items())


def parse_resource_list(raw: Any, field: str) -> ResourceList:
    """A ResourceList: every quantity non-negative (ValidateResourceQuantityValue) and within the int64 units the
    scheduler counts in (millicores for cpu, Value() for the rest)."""
    out: ResourceList = {}
    for name, value in mapping(raw, field).items():
        try:
            q = parse_quantity(value)
        except ValueError as e:
            raise InputError(str(e), field=f"{field}.{name}") from None
        if q < 0:
            raise InputError(f'Invalid value: "{format_quantity(q)}": must be greater than or equal to 0',
                             field=f"{field}.{name}")
        units = milli_value_of(q) if name == "cpu" else value_of(q)
        if units > INT64_MAX:
            unit = "millicores" if name == "cpu" else "units"
            raise InputError(f'Invalid value: "{value}": too large; the scheduler counts {name} in 64-bit {unit} '
                             f"(at most {INT64_MAX})", field=f"{field}.{name}")
        out[str(name)] = q
    return out


@dataclass(frozen=True, slots=True)
class ObjectMeta:
    name: str
    namespace: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    owner_references: list[OwnerReference]
    creation_timestamp: datetime | None
    deletion_timestamp: datetime | None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True, slots=True)
class OwnerReference:
    kind: str
    name: str
    uid: str
    controller: bool
    api_version: str = ""


_OWNERS: dict[tuple[Any, ...], OwnerReference] = {}
_OWNER_BOOLS = ("controller", "blockOwnerDeletion")


def _owner_reference(o: dict[str, Any]) -> OwnerReference:
    # Replicas of one controller share their owner reference object.
    key = tuple(o.items())
    try:
        ref = _OWNERS.get(key)
    except TypeError:
        ref = None
    if ref is None:
        ref = OwnerReference(kind=str(o.get("kind", "")), name=str(o.get("name", "")), uid=str(o.get("uid", "")),
                             controller=bool(o.get("controller", False)), api_version=str(o.get("apiVersion", "")))
        # Remembered only when every value is a string (the two flags booleans): a hit then reads the same.
        if all(type(v) is (bool if k in _OWNER_BOOLS else str) for k, v in o.items()):
            if len(_OWNERS) >= _CACHE_LIMIT:
                _OWNERS.clear()
            _OWNERS[key] = ref
    return ref


def _labels(raw: Any, field: str) -> dict[str, str]:
    """label_map, with the strings interned (label keys and values repeat across a workload's pods)."""
    if not raw:
        return label_map(raw, field)
    if type(raw) is dict:
        try:
            return {_intern(k): _intern(v) for k, v in raw.items()}
        except TypeError:  # a value that is not a string: label_map converts it
            pass
    return label_map(raw, field)


def parse_meta(raw: dict[str, Any], kind: str, namespaced: bool) -> ObjectMeta:
    meta = mapping(raw.get("metadata"), "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise InputError("expected a non-empty name", obj=kind, field="metadata.name")
    namespace = _intern(str(meta.get("namespace") or ("default" if namespaced else "")))
    owners = []
    for i, o in enumerate(sequence(meta.get("ownerReferences"), "metadata.ownerReferences")):
        if not isinstance(o, dict):
            raise InputError("expected an owner reference object", field=f"metadata.ownerReferences[{i}]")
        owners.append(_owner_reference(o))
    return ObjectMeta(
        name=name,
        namespace=namespace,
        uid=str(meta.get("uid") or f"{namespace}/{name}"),
        labels=_labels(meta.get("labels"), "metadata.labels"),
        annotations=_labels(meta.get("annotations"), "metadata.annotations"),
        owner_references=owners,
        creation_timestamp=parse_time(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        deletion_timestamp=parse_time(meta.get("deletionTimestamp"), "metadata.deletionTimestamp"),
    )


# ---------------------------------------------------------------- taints and tolerations


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str
    time_added: datetime | None = None


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """core/v1 Toleration.ToleratesTaint."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        if self.operator == "Exists":
            return True
        # Gt/Lt compare numerically only under the alpha TaintTolerationComparisonOperators gate, which is off by
        # default: with it off such a toleration tolerates nothing.
        return False


TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def parse_taint(raw: Any, field: str) -> Taint:
    d = mapping(raw, field)
    effect = d.get("effect")
    if effect not in TAINT_EFFECTS:
        raise InputError(f"expected one of {', '.join(TAINT_EFFECTS)}, got {effect!r}", field=f"{field}.effect")
    key = d.get("key")
    if not isinstance(key, str) or not key:
        raise InputError("expected a non-empty taint key", field=f"{field}.key")
    return Taint(key, "" if d.get("value") is None else str(d.get("value")), effect,
                 parse_time(d.get("timeAdded"), f"{field}.timeAdded"))


_TOLERATIONS: dict[tuple[Any, ...], Toleration] = {}


def _toleration(raw: Any, field: str) -> Toleration:
    """parse_toleration, shared by the pods that write the same toleration (every pod carries the default
    not-ready and unreachable ones)."""
    if type(raw) is not dict:
        return parse_toleration(raw, field)
    key = tuple(raw.items())
    try:
        t = _TOLERATIONS.get(key)
    except TypeError:
        t = None
    # tolerationSeconds true would equal a remembered 1: read it the long way (and fail there).
    if t is not None and type(raw.get("tolerationSeconds")) is not bool:
        return t
    t = parse_toleration(raw, field)
    if all(type(v) is (int if k == "tolerationSeconds" else str) for k, v in raw.items()):
        if len(_TOLERATIONS) >= _CACHE_LIMIT:
            _TOLERATIONS.clear()
        _TOLERATIONS[key] = t
    return t


def parse_toleration(raw: Any, field: str) -> Toleration:
    d = mapping(raw, field)
    op = d.get("operator") or ""
    if op not in ("", "Equal", "Exists", "Gt", "Lt"):
        raise InputError(f"expected Equal, Exists, Gt or Lt, got {op!r}", field=f"{field}.operator")
    effect = d.get("effect") or ""
    if effect and effect not in TAINT_EFFECTS:
        raise InputError(f"expected one of {', '.join(TAINT_EFFECTS)}, got {effect!r}", field=f"{field}.effect")
    return Toleration(str(d.get("key") or ""), op, "" if d.get("value") is None else str(d.get("value")), effect,
                      _int(d.get("tolerationSeconds"), f"{field}.tolerationSeconds"))


def tolerations_tolerate_taint(tolerations: tuple[Toleration, ...] | list[Toleration], taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


def find_untolerated_taint(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...],
                           effects: tuple[str, ...]) -> Taint | None:
    """The first taint with one of `effects` that no toleration tolerates (v1helper.FindMatchingUntoleratedTaint)."""
    for taint in taints:
        if taint.effect not in effects:
            continue
        if not tolerations_tolerate_taint(tolerations, taint):
            return taint
    return None


# ---------------------------------------------------------------- affinity


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerm:
    weight: int
    preference: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    label_selector: LabelSelector
    namespaces: tuple[str, ...]
    topology_key: str
    namespace_selector: LabelSelector | None  # None: nil (only `namespaces`, or the pod's own namespace)
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class Affinity:
    node_required: NodeSelector | None = None
    node_preferred: tuple[PreferredSchedulingTerm, ...] = ()
    pod_affinity_required: tuple[PodAffinityTerm, ...] = ()
    pod_affinity_preferred: tuple[WeightedPodAffinityTerm, ...] = ()
    pod_anti_affinity_required: tuple[PodAffinityTerm, ...] = ()
    pod_anti_affinity_preferred: tuple[WeightedPodAffinityTerm, ...] = ()

    @property
    def has_pod_affinity(self) -> bool:
        return bool(self.pod_affinity_required or self.pod_affinity_preferred)

    @property
    def has_pod_anti_affinity(self) -> bool:
        return bool(self.pod_anti_affinity_required or self.pod_anti_affinity_preferred)


NO_AFFINITY = Affinity()


def _parse_pod_affinity_term(raw: Any, field: str) -> PodAffinityTerm:
    d = mapping(raw, field)
    ns_sel = d.get("namespaceSelector")
    return PodAffinityTerm(
        label_selector=parse_label_selector(d.get("labelSelector"), f"{field}.labelSelector"),
        namespaces=tuple(str(n) for n in sequence(d.get("namespaces"), f"{field}.namespaces")),
        topology_key=str(d.get("topologyKey") or ""),
        namespace_selector=None if ns_sel is None else parse_label_selector(ns_sel, f"{field}.namespaceSelector"),
        match_label_keys=tuple(str(k) for k in sequence(d.get("matchLabelKeys"), f"{field}.matchLabelKeys")),
        mismatch_label_keys=tuple(str(k) for k in sequence(d.get("mismatchLabelKeys"), f"{field}.mismatchLabelKeys")),
    )


def _parse_weighted_terms(raw: Any, field: str) -> tuple[WeightedPodAffinityTerm, ...]:
    out = []
    for i, w in enumerate(sequence(raw, field)):
        f = f"{field}[{i}]"
        wd = mapping(w, f)
        out.append(WeightedPodAffinityTerm(_int(wd.get("weight"), f"{f}.weight", 0, bits=INT32) or 0,
                                           _parse_pod_affinity_term(wd.get("podAffinityTerm"), f"{f}.podAffinityTerm")))
    return tuple(out)


def parse_affinity(raw: Any, field: str) -> Affinity:
    if raw is None:
        return NO_AFFINITY
    d = mapping(raw, field)
    na = mapping(d.get("nodeAffinity"), f"{field}.nodeAffinity")
    pa = mapping(d.get("podAffinity"), f"{field}.podAffinity")
    paa = mapping(d.get("podAntiAffinity"), f"{field}.podAntiAffinity")
    req = na.get("requiredDuringSchedulingIgnoredDuringExecution")
    pref = []
    for i, p in enumerate(sequence(na.get("preferredDuringSchedulingIgnoredDuringExecution"),
                                f"{field}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution")):
        f = f"{field}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        pd = mapping(p, f)
        pref.append(PreferredSchedulingTerm(_int(pd.get("weight"), f"{f}.weight", 0, bits=INT32) or 0,
                                            parse_node_selector_term(pd.get("preference"), f"{f}.preference")))
    rk = "requiredDuringSchedulingIgnoredDuringExecution"
    pk = "preferredDuringSchedulingIgnoredDuringExecution"
    return Affinity(
        node_required=None if req is None else parse_node_selector(req, f"{field}.nodeAffinity.{rk}"),
        node_preferred=tuple(pref),
        pod_affinity_required=tuple(_parse_pod_affinity_term(t, f"{field}.podAffinity.{rk}[{i}]")
                                    for i, t in enumerate(sequence(pa.get(rk), f"{field}.podAffinity.{rk}"))),
        pod_affinity_preferred=_parse_weighted_terms(pa.get(pk), f"{field}.podAffinity.{pk}"),
        pod_anti_affinity_required=tuple(_parse_pod_affinity_term(t, f"{field}.podAntiAffinity.{rk}[{i}]")
                                         for i, t in enumerate(sequence(paa.get(rk), f"{field}.podAntiAffinity.{rk}"))),
        pod_anti_affinity_preferred=_parse_weighted_terms(paa.get(pk), f"{field}.podAntiAffinity.{pk}"),
    )


# ---------------------------------------------------------------- topology spread


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    label_selector: LabelSelector
    min_domains: int | None
    node_affinity_policy: str | None  # None: unset (Honor is the default)
    node_taints_policy: str | None  # None: unset (Ignore is the default)
    match_label_keys: tuple[str, ...]


def parse_topology_spread_constraint(raw: Any, field: str) -> TopologySpreadConstraint:
    d = mapping(raw, field)
    wu = d.get("whenUnsatisfiable")
    if wu not in ("DoNotSchedule", "ScheduleAnyway"):
        raise InputError(f"expected DoNotSchedule or ScheduleAnyway, got {wu!r}", field=f"{field}.whenUnsatisfiable")
    max_skew = _int(d.get("maxSkew"), f"{field}.maxSkew", bits=INT32)
    if max_skew is None or max_skew <= 0:
        raise InputError("expected a positive integer", field=f"{field}.maxSkew")
    key = d.get("topologyKey")
    if not isinstance(key, str) or not key:
        raise InputError("expected a non-empty topology key", field=f"{field}.topologyKey")
    for pol in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
        if d.get(pol) not in (None, "Honor", "Ignore"):
            raise InputError(f"expected Honor or Ignore, got {d.get(pol)!r}", field=f"{field}.{pol}")
    return TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=key,
        when_unsatisfiable=wu,
        label_selector=parse_label_selector(d.get("labelSelector"), f"{field}.labelSelector"),
        min_domains=_int(d.get("minDomains"), f"{field}.minDomains", bits=INT32),
        node_affinity_policy=d.get("nodeAffinityPolicy"),
        node_taints_policy=d.get("nodeTaintsPolicy"),
        match_label_keys=tuple(str(k) for k in sequence(d.get("matchLabelKeys"), f"{field}.matchLabelKeys")),
    )


# ---------------------------------------------------------------- containers and pods


@dataclass(frozen=True, slots=True)
class ContainerPort:
    container_port: int
    host_port: int
    protocol: str
    host_ip: str


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    image: str
    requests: ResourceList
    limits: ResourceList
    ports: tuple[ContainerPort, ...]
    restart_policy: str | None  # "Always" marks a sidecar among init containers
    # The container as written: a dict, or where it is in its pod's undecoded document (decoded when read).
    document: dict[str, Any] | RawPart
    # The written (name, value) pairs of requests and of limits: a cheap key for pods of one shape.
    resources_key: tuple[tuple[Any, ...], tuple[Any, ...]] = ((), ())

    @property
    def is_sidecar(self) -> bool:
        return self.restart_policy == "Always"

    @property
    def raw(self) -> dict[str, Any]:
        doc = self.document
        if type(doc) is RawPart:
            doc = doc.decode()
            object.__setattr__(self, "document", doc)
        return doc  # type: ignore[return-value]


_NO_PORTS: tuple[ContainerPort, ...] = ()


def parse_container(raw: Any, field: str, where: RawPart | None = None) -> Container:
    """A container from its written dict; it keeps `where` (its place in the undecoded pod) instead when given."""
    d = mapping(raw, field)
    res = mapping(d.get("resources"), f"{field}.resources")
    ports: tuple[ContainerPort, ...] = _NO_PORTS
    if d.get("ports"):
        out = []
        for i, p in enumerate(sequence(d.get("ports"), f"{field}.ports")):
            f = f"{field}.ports[{i}]"
            pd = mapping(p, f)
            out.append(ContainerPort(_int(pd.get("containerPort"), f"{f}.containerPort", 0, bits=INT32) or 0,
                                     _int(pd.get("hostPort"), f"{f}.hostPort", 0, bits=INT32) or 0,
                                     _intern(str(pd.get("protocol") or "TCP")), str(pd.get("hostIP") or "")))
        ports = tuple(out)
    else:
        sequence(d.get("ports"), f"{field}.ports")  # the type check ([] and null are fine)
    requests, requests_key = resource_list_and_key(res.get("requests"), f"{field}.resources.requests")
    limits, limits_key = resource_list_and_key(res.get("limits"), f"{field}.resources.limits")
    return Container(
        name=_intern(str(d.get("name") or "")),
        image=_intern(str(d.get("image") or "")),
        requests=requests,
        limits=limits,
        ports=ports,
        restart_policy=d.get("restartPolicy"),
        document=d if where is None else where,
        resources_key=(requests_key, limits_key),
    )


@dataclass(frozen=True, slots=True)
class Pod:
    meta: ObjectMeta
    node_name: str
    scheduler_name: str
    priority: int | None
    priority_class_name: str
    preemption_policy: str | None
    containers: list[Container]
    init_containers: list[Container]
    overhead: ResourceList
    pod_requests: ResourceList | None  # spec.resources (pod-level resources), if set
    pod_limits: ResourceList | None
    node_selector: dict[str, str]
    affinity: Affinity
    tolerations: tuple[Toleration, ...]
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...]
    scheduling_gates: tuple[str, ...]
    volumes: list[dict[str, Any]]
    host_network: bool
    termination_grace_period_seconds: int | None
    restart_policy: str
    phase: str
    nominated_node_name: str
    # The stored document: a dict, or a RawDocument / BoundDocument made into one when `raw` is first read.
    document: dict[str, Any] | RawDocument | BoundDocument
    # Derived values computed once per pod object (requests, shape keys); never part of equality.
    cache: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)
    # namespace/name, made once: the key of every index, read a dozen times per pod per scheduling cycle.
    key: str = field(init=False, repr=False, compare=False)

    kind = "Pod"

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.meta.namespace}/{self.meta.name}")

    @property
    def raw(self) -> dict[str, Any]:
        """The pod as stored (what `kubectl get -o yaml` prints)."""
        doc = self.document
        if type(doc) is not dict:
            doc = doc.decode()  # type: ignore[union-attr]
            object.__setattr__(self, "document", doc)
        return doc  # type: ignore[return-value]

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def namespace(self) -> str:
        return self.meta.namespace

    @property
    def labels(self) -> dict[str, str]:
        return self.meta.labels

    @property
    def uid(self) -> str:
        return self.meta.uid

    @property
    def status(self) -> dict[str, Any]:
        s = self.raw.get("status")
        return s if isinstance(s, dict) else {}

    def controller_ref(self) -> OwnerReference | None:
        for o in self.meta.owner_references:
            if o.controller:
                return o
        return None

    @property
    def is_terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def is_terminating(self) -> bool:
        return self.meta.deletion_timestamp is not None

    @property
    def effective_priority(self) -> int:
        """corev1helpers.PodPriority: spec.priority, or 0 when unset."""
        return self.priority if self.priority is not None else 0

    # Changes make a new object (objects handed out by the cluster state are never mutated). The memo
    # `cache` is shared where what it holds cannot have changed (it is derived from the spec).

    def bound_to(self, node_name: str) -> Pod:
        """The pod after a binding (spec.nodeName set; empty: the assumption forgotten)."""
        return _evolve(self, node_name=node_name, document=BoundDocument(self.document, node_name))

    def with_status(self, **fields: Any) -> Pod:
        """The pod with status fields set (a value of None removes the field)."""
        status = dict(self.status)
        for k, v in fields.items():
            if v is None:
                status.pop(k, None)
            else:
                status[k] = v
        cache = dict(self.cache)
        for key in STATUS_DERIVED_CACHE_KEYS:
            cache.pop(key, None)
        return _evolve(self, phase=str(status.get("phase") or ""),
                       nominated_node_name=str(status.get("nominatedNodeName") or ""),
                       document={**self.raw, "status": status}, cache=cache)

    def copy_as(self, meta: ObjectMeta, document: dict[str, Any], cache: dict[Any, Any]) -> Pod:
        """Another pod of this pod's spec (a copy of an admitted template): its own identity and document,
        pending and unbound."""
        return _evolve(self, meta=meta, document=document, node_name="", phase="Pending", nominated_node_name="",
                       cache=cache, key=f"{meta.namespace}/{meta.name}")

    def with_annotations(self, changes: Mapping[str, str | None]) -> Pod:
        """The pod with metadata.annotations changed (a value of None removes the key); memo keys derived
        from annotations (those starting with "ann:") are dropped."""
        ann = dict(self.meta.annotations)
        for k, v in changes.items():
            if v is None:
                ann.pop(k, None)
            else:
                ann[k] = v
        meta = dict(self.raw.get("metadata") or {})
        if ann:
            meta["annotations"] = dict(ann)
        else:
            meta.pop("annotations", None)
        cache = {k: v for k, v in self.cache.items() if not (isinstance(k, str) and k.startswith("ann:"))}
        return _evolve(self, meta=replace(self.meta, annotations=ann), document={**self.raw, "metadata": meta},
                       cache=cache)

    def marked_for_deletion(self, at: datetime, grace_period_seconds: int) -> Pod:
        """The pod once a graceful deletion started: deletionTimestamp = start + grace period."""
        meta = dict(self.raw.get("metadata") or {})
        meta["deletionTimestamp"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        meta["deletionGracePeriodSeconds"] = grace_period_seconds
        return _evolve(self, meta=_evolve(self.meta, deletion_timestamp=at),
                       document={**self.raw, "metadata": meta})


# The descheduler's eviction-order key of a pod (priority, QoS class, prefer-no-eviction annotation): derived
# from the status and the annotations, so dropped with both ("ann:" keys go when the annotations change).
EVICTION_ORDER_KEY = "ann:eviction_order"

# Memo keys derived from a pod's status (dropped when the status changes): the start time, the QoS class
# (kubesched.api.qos.qos_class prefers status.qosClass) and koordinator's priority class (read from it).
STATUS_DERIVED_CACHE_KEYS: frozenset[Hashable] = frozenset({"start_time", ("qos_class", True), ("qos_class", False),
                                                           "koord_priority_class", EVICTION_ORDER_KEY})


def _evolve(obj: Any, **changes: Any) -> Any:
    """dataclasses.replace for a frozen slots dataclass whose fields need no validation: a field-by-field
    copy (a pod changes state several times in its life; replace() re-runs __init__ each time)."""
    clone = _CLONES.get(type(obj))
    if clone is None:
        clone = _CLONES[type(obj)] = _make_clone(type(obj))
    return clone(obj, changes)


def _make_clone(cls: type) -> Callable[[Any, dict[str, Any]], Any]:
    """A copier of cls's slots, written out field by field (as dataclasses writes its __init__): half the
    time of a loop over the slot descriptors. The descriptors' own setters are used, since a frozen
    dataclass's __setattr__ refuses."""
    names: tuple[str, ...] = cls.__slots__  # type: ignore[attr-defined]
    env: dict[str, Any] = {f"_set{i}": cls.__dict__[n].__set__ for i, n in enumerate(names)}
    env.update(_new=object.__new__, _cls=cls, _setattr=object.__setattr__)
    lines = [f"    _set{i}(new, obj.{n})" for i, n in enumerate(names)]
    src = ("def clone(obj, changes):\n    new = _new(_cls)\n" + "\n".join(lines)
           + "\n    for name, value in changes.items():\n        _setattr(new, name, value)\n    return new\n")
    exec(src, env)  # noqa: S102 - the source is built from the class's own slot names
    return env["clone"]  # type: ignore[no-any-return]


_CLONES: dict[type, Callable[[Any, dict[str, Any]], Any]] = {}


def _containers(spec: dict[str, Any], key: str, document: RawDocument | None) -> list[Container]:
    items = spec.get(key)
    if not items:
        sequence(items, f"spec.{key}")  # the type check ([] and null are fine)
        return []
    return [parse_container(c, f"spec.{key}[{i}]", None if document is None else RawPart(document, ("spec", key, i)))
            for i, c in enumerate(sequence(items, f"spec.{key}"))]


_NO_TOLERATIONS: tuple[Toleration, ...] = ()


def parse_pod(raw: dict[str, Any], document: RawDocument | None = None) -> Pod:
    """A Pod from its decoded document `raw`; the pod keeps `document` instead when given (the same
    document, undecoded: `raw` is then dropped once the model is built)."""
    meta = parse_meta(raw, "Pod", namespaced=True)
    try:
        spec = mapping(raw.get("spec"), "spec")
        status = mapping(raw.get("status"), "status")
        res = spec.get("resources")
        pod_requests = pod_limits = None
        if res is not None:
            rd = mapping(res, "spec.resources")
            if rd.get("requests") is not None:
                pod_requests = parse_resource_list(rd.get("requests"), "spec.resources.requests")
            if rd.get("limits") is not None:
                pod_limits = parse_resource_list(rd.get("limits"), "spec.resources.limits")
        # The fields most pods leave out are read only when written (each reader's type check included).
        g = spec.get
        tolerations = _NO_TOLERATIONS
        if g("tolerations") is not None:
            tolerations = tuple([_toleration(t, f"spec.tolerations[{i}]")
                                 for i, t in enumerate(sequence(g("tolerations"), "spec.tolerations"))])
        spread: tuple[TopologySpreadConstraint, ...] = ()
        if g("topologySpreadConstraints") is not None:
            spread = tuple(parse_topology_spread_constraint(t, f"spec.topologySpreadConstraints[{i}]")
                           for i, t in enumerate(sequence(g("topologySpreadConstraints"),
                                                          "spec.topologySpreadConstraints")))
        gates: tuple[str, ...] = ()
        if g("schedulingGates") is not None:
            gates = tuple(str(mapping(x, f"spec.schedulingGates[{i}]").get("name", ""))
                          for i, x in enumerate(sequence(g("schedulingGates"), "spec.schedulingGates")))
        overhead = g("overhead")
        node_selector = g("nodeSelector")
        volumes = g("volumes")
        return Pod(
            meta=meta,
            node_name=_intern(str(g("nodeName") or "")),
            scheduler_name=_intern(str(g("schedulerName") or DEFAULT_SCHEDULER_NAME)),
            priority=_int(g("priority"), "spec.priority", bits=INT32),
            priority_class_name=_intern(str(g("priorityClassName") or "")),
            preemption_policy=g("preemptionPolicy"),
            containers=_containers(spec, "containers", document),
            init_containers=_containers(spec, "initContainers", document),
            overhead={} if overhead is None else parse_resource_list(overhead, "spec.overhead"),
            pod_requests=pod_requests,
            pod_limits=pod_limits,
            node_selector={} if node_selector is None else _labels(node_selector, "spec.nodeSelector"),
            affinity=parse_affinity(g("affinity"), "spec.affinity"),
            tolerations=tolerations,
            topology_spread_constraints=spread,
            scheduling_gates=gates,
            volumes=[] if volumes is None else [mapping(v, f"spec.volumes[{i}]")
                                                for i, v in enumerate(sequence(volumes, "spec.volumes"))],
            host_network=bool(g("hostNetwork", False)),
            termination_grace_period_seconds=_int(g("terminationGracePeriodSeconds"),
                                                  "spec.terminationGracePeriodSeconds"),
            restart_policy=_intern(str(g("restartPolicy") or "Always")),
            phase=_intern(str(status.get("phase") or "")),
            nominated_node_name=str(status.get("nominatedNodeName") or ""),
            document=raw if document is None else document,
        )
    except InputError as e:
        raise e.located(obj=f"Pod {meta.namespace}/{meta.name}") from None


# ---------------------------------------------------------------- nodes


@dataclass(frozen=True, slots=True)
class ContainerImage:
    names: tuple[str, ...]
    size_bytes: int


@dataclass(frozen=True, slots=True)
class Node:
    meta: ObjectMeta
    unschedulable: bool
    taints: tuple[Taint, ...]
    capacity: ResourceList
    allocatable: ResourceList
    conditions: dict[str, str]  # type -> status
    images: tuple[ContainerImage, ...]
    raw: dict[str, Any]

    kind = "Node"

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def key(self) -> str:
        return self.meta.name

    @property
    def labels(self) -> dict[str, str]:
        return self.meta.labels

    @property
    def ready(self) -> bool:
        """The descheduler's notion: a Ready condition with status True (nodes without conditions are not ready)."""
        return self.conditions.get("Ready") == "True"


def parse_node(raw: dict[str, Any]) -> Node:
    meta = parse_meta(raw, "Node", namespaced=False)
    try:
        spec = mapping(raw.get("spec"), "spec")
        status = mapping(raw.get("status"), "status")
        conditions = {}
        for i, c in enumerate(sequence(status.get("conditions"), "status.conditions")):
            cd = mapping(c, f"status.conditions[{i}]")
            conditions[str(cd.get("type"))] = str(cd.get("status"))
        images = []
        for i, im in enumerate(sequence(status.get("images"), "status.images")):
            imd = mapping(im, f"status.images[{i}]")
            images.append(ContainerImage(tuple(str(n) for n in sequence(imd.get("names"), f"status.images[{i}].names")),
                                         _int(imd.get("sizeBytes"), f"status.images[{i}].sizeBytes", 0) or 0))
        capacity = parse_resource_list(status.get("capacity"), "status.capacity")
        allocatable = parse_resource_list(status.get("allocatable"), "status.allocatable") \
            if status.get("allocatable") is not None else dict(capacity)
        return Node(
            meta=meta,
            unschedulable=bool(spec.get("unschedulable", False)),
            taints=tuple(parse_taint(t, f"spec.taints[{i}]")
                         for i, t in enumerate(sequence(spec.get("taints"), "spec.taints"))),
            capacity=capacity,
            allocatable=allocatable,
            conditions=conditions,
            images=tuple(images),
            raw=raw,
        )
    except InputError as e:
        raise e.located(obj=f"Node {meta.name}") from None


# ---------------------------------------------------------------- other kinds


@dataclass(frozen=True, slots=True)
class Namespace:
    meta: ObjectMeta
    raw: dict[str, Any]
    kind = "Namespace"

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def labels(self) -> dict[str, str]:
        return self.meta.labels


@dataclass(frozen=True, slots=True)
class PriorityClass:
    meta: ObjectMeta
    value: int
    global_default: bool
    preemption_policy: str | None
    raw: dict[str, Any]
    kind = "PriorityClass"


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    meta: ObjectMeta
    selector: LabelSelector
    min_available: int | str | None
    max_unavailable: int | str | None
    disruptions_allowed: int
    current_healthy: int
    desired_healthy: int
    expected_pods: int
    disrupted_pods: dict[str, datetime | None]
    raw: dict[str, Any]
    kind = "PodDisruptionBudget"

    def with_status(self, *, disruptions_allowed: int, current_healthy: int | None = None,
                    desired_healthy: int | None = None, expected_pods: int | None = None,
                    disrupted_pods: dict[str, datetime | None] | None = None) -> PodDisruptionBudget:
        """The PDB with a new status (what the disruption controller and the eviction handler write)."""
        cur = self.current_healthy if current_healthy is None else current_healthy
        des = self.desired_healthy if desired_healthy is None else desired_healthy
        exp = self.expected_pods if expected_pods is None else expected_pods
        dis = self.disrupted_pods if disrupted_pods is None else disrupted_pods
        status = {**(self.raw.get("status") or {}), "disruptionsAllowed": disruptions_allowed,
                  "currentHealthy": cur, "desiredHealthy": des, "expectedPods": exp,
                  "disruptedPods": {k: (v.strftime("%Y-%m-%dT%H:%M:%SZ") if v else None) for k, v in dis.items()}}
        return replace(self, disruptions_allowed=disruptions_allowed, current_healthy=cur, desired_healthy=des,
                       expected_pods=exp, disrupted_pods=dict(dis), raw={**self.raw, "status": status})


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    meta: ObjectMeta
    storage_class_name: str | None
    access_modes: tuple[str, ...]
    volume_name: str
    phase: str
    raw: dict[str, Any]
    kind = "PersistentVolumeClaim"


@dataclass(frozen=True, slots=True)
class Workload:
    """A Service, ReplicaSet, ReplicationController, StatefulSet (or other controller) and its pod selector."""

    kind: str
    meta: ObjectMeta
    selector: LabelSelector
    raw: dict[str, Any] = field(repr=False)


@dataclass(frozen=True, slots=True)
class GenericObject:
    """Any other kind; kept whole so that components that understand it can read it."""

    kind: str
    api_version: str
    meta: ObjectMeta | None
    raw: dict[str, Any]


def _int_or_percent(v: Any, field: str) -> int | str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        raise InputError(f"expected an integer or a percentage, got {v!r}", field=field)
    if isinstance(v, int):
        number = v
    elif isinstance(v, str):
        try:
            number = int(v[:-1] if v.endswith("%") else v)
        except ValueError:
            raise InputError(f"expected an integer or a percentage, got {v!r}", field=field) from None
    else:
        raise InputError(f"expected an integer or a percentage, got {v!r}", field=field)
    if not -(2**31) <= number < 2**31:
        raise InputError(f"expected an int32 or a percentage, got {v!r} (out of range)", field=field)
    return v if isinstance(v, int) or v.endswith("%") else number


def parse_namespace(raw: dict[str, Any]) -> Namespace:
    return Namespace(parse_meta(raw, "Namespace", namespaced=False), raw)


def parse_priority_class(raw: dict[str, Any]) -> PriorityClass:
    meta = parse_meta(raw, "PriorityClass", namespaced=False)
    try:
        value = _int(raw.get("value"), "value", 0, bits=INT32) or 0
    except InputError as e:
        raise e.located(obj=f"PriorityClass {meta.name}") from None
    return PriorityClass(meta, value, bool(raw.get("globalDefault", False)), raw.get("preemptionPolicy"), raw)


def parse_pdb(raw: dict[str, Any]) -> PodDisruptionBudget:
    meta = parse_meta(raw, "PodDisruptionBudget", namespaced=True)
    try:
        spec = mapping(raw.get("spec"), "spec")
        status = mapping(raw.get("status"), "status")
        sel = spec.get("selector")
        disrupted = {str(k): parse_time(v, f"status.disruptedPods.{k}")
                     for k, v in mapping(status.get("disruptedPods"), "status.disruptedPods").items()}
        return PodDisruptionBudget(
            meta=meta,
            # policy/v1: a nil selector selects no pods, an empty one every pod in the namespace.
            selector=parse_label_selector(sel, "spec.selector") if sel is not None else NOTHING,
            min_available=_int_or_percent(spec.get("minAvailable"), "spec.minAvailable"),
            max_unavailable=_int_or_percent(spec.get("maxUnavailable"), "spec.maxUnavailable"),
            disruptions_allowed=_int(status.get("disruptionsAllowed"), "status.disruptionsAllowed", 0, bits=INT32) or 0,
            current_healthy=_int(status.get("currentHealthy"), "status.currentHealthy", 0, bits=INT32) or 0,
            desired_healthy=_int(status.get("desiredHealthy"), "status.desiredHealthy", 0, bits=INT32) or 0,
            expected_pods=_int(status.get("expectedPods"), "status.expectedPods", 0, bits=INT32) or 0,
            disrupted_pods=disrupted,
            raw=raw,
        )
    except InputError as e:
        raise e.located(obj=f"PodDisruptionBudget {meta.namespace}/{meta.name}") from None


def parse_pvc(raw: dict[str, Any]) -> PersistentVolumeClaim:
    meta = parse_meta(raw, "PersistentVolumeClaim", namespaced=True)
    spec = mapping(raw.get("spec"), "spec") if isinstance(raw.get("spec"), dict) else {}
    status = mapping(raw.get("status"), "status") if isinstance(raw.get("status"), dict) else {}
    res = spec.get("resources")
    try:
        if isinstance(res, dict):
            parse_resource_list(res.get("requests"), "spec.resources.requests")
            parse_resource_list(res.get("limits"), "spec.resources.limits")
        sequence(spec.get("accessModes"), "spec.accessModes")
    except InputError as e:
        raise e.located(obj=f"PersistentVolumeClaim {meta.key}") from None
    return PersistentVolumeClaim(meta, spec.get("storageClassName"), tuple(spec.get("accessModes") or ()),
                                 str(spec.get("volumeName") or ""), str(status.get("phase") or ""), raw)


def parse_workload(raw: dict[str, Any], kind: str) -> Workload:
    meta = parse_meta(raw, kind, namespaced=True)
    try:
        spec = mapping(raw.get("spec"), "spec")
        sel = spec.get("selector")
        if kind in ("Service", "ReplicationController"):
            # A map selector; an empty or missing one selects nothing for spreading purposes.
            m = label_map(sel, "spec.selector")
            selector = LabelSelector(tuple(Requirement(k, "In", (v,)) for k, v in sorted(m.items()))) if m else NOTHING
        else:
            selector = parse_label_selector(sel, "spec.selector")
    except InputError as e:
        raise e.located(obj=f"{kind} {meta.namespace}/{meta.name}") from None
    return Workload(kind, meta, selector, raw)


def labels_of(obj: Any) -> Mapping[str, str]:
    return obj.meta.labels
