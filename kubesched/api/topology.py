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

from kubesched.api import fields
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


def _name(f: fields.Fields) -> str:
    name = f.string("name", "")
    if not name:
        raise f.error("name", "expected a non-empty name")
    return name  # type: ignore[no-any-return]


def _attributes(raw: Any, fld: str) -> tuple[tuple[str, str], ...]:
    out = []
    for i, a in enumerate(fields.sequence(raw, fld)):
        item = fields.Fields(a, fields.join(fld, i))
        out.append((_name(item), item.string("value", "")))
    return tuple(out)


def _quantity(f: fields.Fields, key: str) -> Fraction:
    raw = f.raw.get(key)
    if raw is None:
        return Fraction(0)
    try:
        q = parse_quantity(raw)
    except ValueError as e:
        raise f.error(key, str(e)) from None
    if q < 0:
        raise f.error(key, f"must be greater than or equal to 0, got {raw!r}")
    return q


def _zone(raw: Any, fld: str) -> Zone:
    z = fields.Fields(raw, fld)
    costs = []
    for i, c in enumerate(z.sequence("costs")):
        item = fields.Fields(c, fields.join(z.path("costs"), i))
        costs.append(CostInfo(_name(item), item.integer("value", 0, bits=fields.INT64)))
    resources = []
    for i, r in enumerate(z.sequence("resources")):
        item = fields.Fields(r, fields.join(z.path("resources"), i))
        resources.append(ResourceInfo(_name(item), _quantity(item, "capacity"), _quantity(item, "allocatable"),
                                      _quantity(item, "available")))
    return Zone(_name(z), z.string("type", ""), z.string("parent", ""), tuple(costs),
                _attributes(z.raw.get("attributes"), z.path("attributes")), tuple(resources))


def parse_node_resource_topology(raw: dict[str, Any]) -> NodeResourceTopology:
    meta = parse_meta(raw, "NodeResourceTopology", namespaced=False)
    try:
        version = raw.get("apiVersion")
        if version != API_VERSION:
            raise InputError(f"expected apiVersion {API_VERSION}, got {version!r}", field="apiVersion")
        doc = fields.Fields(raw)
        policies = doc.strings("topologyPolicies")
        zones = tuple(_zone(z, fields.join("zones", i)) for i, z in enumerate(doc.sequence("zones")))
        return NodeResourceTopology(meta, tuple(policies), zones, _attributes(raw.get("attributes"), "attributes"),
                                    raw, API_VERSION)
    except InputError as e:
        raise e.located(obj=f"NodeResourceTopology {meta.name}") from None
