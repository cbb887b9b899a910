"""NodeResourceTopology (topology.node.k8s.io/v1alpha2): a node's NUMA zones and what each has available.

Mirrors k8stopologyawareschedwg/noderesourcetopology-api `pkg/apis/topology/v1alpha2/types.go`: a
cluster-scoped object named after its node with top-level `zones` (name, type, costs, attributes,
resources: name, capacity, allocatable, available), `attributes` (name/value: topologyManagerPolicy,
topologyManagerScope, topologyManagerMaxNUMANodes) and the deprecated `topologyPolicies`. What the
resource-topology exporter on each node publishes; NodeResourceTopologyMatch reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kubesched.api.objects import ObjectMeta, parse_meta
from kubesched.api.quantity import parse_quantity
from kubesched.errors import InputError

GROUP = "topology.node.k8s.io"
API_VERSION = f"{GROUP}/v1alpha2"
ZONE_TYPE_NUMA_NODE = "Node"  # helper.ZoneTypeNUMANode


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    name: str
    capacity: Fraction
    allocatable: Fraction
    available: Fraction


@dataclass(frozen=True, slots=True)
class CostInfo:
    name: str
    value: int


@dataclass(frozen=True, slots=True)
class Zone:
    name: str
    type: str
    parent: str
    costs: tuple[CostInfo, ...]
    attributes: tuple[tuple[str, str], ...]
    resources: tuple[ResourceInfo, ...]


@dataclass(frozen=True, slots=True)
class NodeResourceTopology:
    meta: ObjectMeta
    topology_policies: tuple[str, ...]
    zones: tuple[Zone, ...]
    attributes: tuple[tuple[str, str], ...]
    raw: dict[str, Any] = field(repr=False)
    api_version: str = API_VERSION
    kind = "NodeResourceTopology"

    @property
    def name(self) -> str:
        return self.meta.name


def numa_id_of(zone_name: str) -> int | None:
    """numanode.NameToID: "node-<id>" → id, None when the name has another form."""
    prefix, _, digits = zone_name.rpartition("-")
    if prefix != "node" or not digits.isdigit():
        return None
    return int(digits)


def _list(raw: Any, fld: str) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InputError(f"expected a list, got {type(raw).__name__}", field=fld)
    return raw


def _item(raw: Any, fld: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise InputError(f"expected an object, got {type(raw).__name__}", field=fld)
    return raw


def _name(raw: dict[str, Any], fld: str) -> str:
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise InputError("expected a non-empty name", field=f"{fld}.name")
    return name


def _attributes(raw: Any, fld: str) -> tuple[tuple[str, str], ...]:
    out = []
    for i, a in enumerate(_list(raw, fld)):
        item = _item(a, f"{fld}[{i}]")
        value = item.get("value", "")
        if not isinstance(value, str):
            raise InputError(f"expected a string, got {value!r}", field=f"{fld}[{i}].value")
        out.append((_name(item, f"{fld}[{i}]"), value))
    return tuple(out)


def _quantity(raw: Any, fld: str) -> Fraction:
    if raw is None:
        return Fraction(0)
    try:
        q = parse_quantity(raw)
    except ValueError as e:
        raise InputError(str(e), field=fld) from None
    if q < 0:
        raise InputError(f"must be greater than or equal to 0, got {raw!r}", field=fld)
    return q


def _zone(raw: Any, fld: str) -> Zone:
    z = _item(raw, fld)
    costs = []
    for i, c in enumerate(_list(z.get("costs"), f"{fld}.costs")):
        item = _item(c, f"{fld}.costs[{i}]")
        value = item.get("value", 0)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"expected an integer, got {value!r}", field=f"{fld}.costs[{i}].value")
        costs.append(CostInfo(_name(item, f"{fld}.costs[{i}]"), value))
    resources = []
    for i, r in enumerate(_list(z.get("resources"), f"{fld}.resources")):
        item = _item(r, f"{fld}.resources[{i}]")
        f = f"{fld}.resources[{i}]"
        resources.append(ResourceInfo(_name(item, f), _quantity(item.get("capacity"), f"{f}.capacity"),
                                      _quantity(item.get("allocatable"), f"{f}.allocatable"),
                                      _quantity(item.get("available"), f"{f}.available")))
    ztype = z.get("type", "")
    if not isinstance(ztype, str):
        raise InputError(f"expected a string, got {ztype!r}", field=f"{fld}.type")
    return Zone(_name(z, fld), ztype, str(z.get("parent") or ""), tuple(costs),
                _attributes(z.get("attributes"), f"{fld}.attributes"), tuple(resources))


def parse_node_resource_topology(raw: dict[str, Any]) -> NodeResourceTopology:
    meta = parse_meta(raw, "NodeResourceTopology", namespaced=False)
    try:
        version = raw.get("apiVersion")
        if version != API_VERSION:
            raise InputError(f"expected apiVersion {API_VERSION}, got {version!r}", field="apiVersion")
        policies = _list(raw.get("topologyPolicies"), "topologyPolicies")
        for i, p in enumerate(policies):
            if not isinstance(p, str):
                raise InputError(f"expected a string, got {p!r}", field=f"topologyPolicies[{i}]")
        zones = tuple(_zone(z, f"zones[{i}]") for i, z in enumerate(_list(raw.get("zones"), "zones")))
        return NodeResourceTopology(meta, tuple(policies), zones, _attributes(raw.get("attributes"), "attributes"),
                                    raw, API_VERSION)
    except InputError as e:
        raise e.located(obj=f"NodeResourceTopology {meta.name}") from None
