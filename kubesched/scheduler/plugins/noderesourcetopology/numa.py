"""NUMA zones of a node as the plugin sees them, and the resource arithmetic over them.

Mirrors kubernetes-sigs/scheduler-plugins `pkg/noderesourcetopology/numaresources.go`,
`pluginhelpers.go` (createNUMANodeList, extractResources/Costs, onlyNonNUMAResources),
`nodeconfig/topologymanager.go` (the kubelet Topology Manager configuration an NRT object reports) and
`pkg/util/resource.go` (GetPodEffectiveRequest). Quantities are exact (Fractions); `Value()` rounds up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from kubesched.api.objects import Pod
from kubesched.api.resources import CPU, EPHEMERAL_STORAGE, MEMORY, is_hugepages, is_native_resource
from kubesched.api.topology import ZONE_TYPE_NUMA_NODE, NodeResourceTopology, numa_id_of

MAX_NUMA_ID = 64  # pluginhelpers.maxNUMAId (ids 64 and above would overflow upstream's table: skipped)
DEFAULT_MAX_NUMA_NODES = 8
LIMIT_NUMA_NODES = 1024

SCOPE_CONTAINER = "container"
SCOPE_POD = "pod"
POLICY_NONE = "none"
POLICY_BEST_EFFORT = "best-effort"
POLICY_RESTRICTED = "restricted"
POLICY_SINGLE_NUMA_NODE = "single-numa-node"

ATTRIBUTE_SCOPE = "topologyManagerScope"
ATTRIBUTE_POLICY = "topologyManagerPolicy"
ATTRIBUTE_MAX_NUMA_NODES = "topologyManagerMaxNUMANodes"

# The deprecated topologyPolicies values (v1alpha2 TopologyManagerPolicy) → (policy, scope).
_LEGACY_POLICIES = {
    "SingleNUMANodePodLevel": (POLICY_SINGLE_NUMA_NODE, SCOPE_POD),
    "SingleNUMANodeContainerLevel": (POLICY_SINGLE_NUMA_NODE, SCOPE_CONTAINER),
    "BestEffortPodLevel": (POLICY_BEST_EFFORT, SCOPE_POD),
    "BestEffortContainerLevel": (POLICY_BEST_EFFORT, SCOPE_CONTAINER),
    "RestrictedPodLevel": (POLICY_RESTRICTED, SCOPE_POD),
    "RestrictedContainerLevel": (POLICY_RESTRICTED, SCOPE_CONTAINER),
}

ResourceList = dict[str, Fraction]


@dataclass(frozen=True, slots=True)
class TopologyManager:
    scope: str = SCOPE_CONTAINER
    policy: str = POLICY_NONE
    max_numa_nodes: int = DEFAULT_MAX_NUMA_NODES


def topology_manager_of(nrt: NodeResourceTopology) -> TopologyManager:
    """TopologyManagerFromNodeResourceTopology: defaults, then the legacy policy, then the attributes."""
    scope, policy, max_numa = SCOPE_CONTAINER, POLICY_NONE, DEFAULT_MAX_NUMA_NODES
    if nrt.topology_policies:
        legacy = _LEGACY_POLICIES.get(nrt.topology_policies[0])
        if legacy is not None:
            policy, scope = legacy
    for name, value in nrt.attributes:
        if name == ATTRIBUTE_SCOPE and value in (SCOPE_CONTAINER, SCOPE_POD):
            scope = value
        elif name == ATTRIBUTE_POLICY and value in (POLICY_NONE, POLICY_BEST_EFFORT, POLICY_RESTRICTED,
                                                     POLICY_SINGLE_NUMA_NODE):
            policy = value
        elif name == ATTRIBUTE_MAX_NUMA_NODES:
            try:
                n = int(value)
            except ValueError:
                continue
            if n > 1:
                max_numa = min(n, LIMIT_NUMA_NODES)
    return TopologyManager(scope, policy, max_numa)


@dataclass(slots=True)
class NUMANode:
    numa_id: int
    resources: ResourceList
    costs: dict[int, int] = field(default_factory=dict)


def numa_node_list(nrt: NodeResourceTopology) -> list[NUMANode]:
    """createNUMANodeList: the zones of type Node named node-<id>, with their available resources and costs."""
    out = []
    for zone in nrt.zones:
        if zone.type != ZONE_TYPE_NUMA_NODE:
            continue
        numa_id = numa_id_of(zone.name)
        if numa_id is None or numa_id >= MAX_NUMA_ID:
            continue
        costs: dict[int, int] = {}
        for c in zone.costs:
            cid = numa_id_of(c.name)
            if cid is not None and cid <= MAX_NUMA_ID:
                costs[cid] = c.value
        out.append(NUMANode(numa_id, {r.name: r.available for r in zone.resources}, costs))
    return out


def is_host_level_resource(name: str) -> bool:
    return name in (EPHEMERAL_STORAGE, "storage") or not is_native_resource(name)


def is_numa_affine_resource(name: str) -> bool:
    return name in (CPU, MEMORY) or is_hugepages(name)


def is_resource_set_suitable(qos: str, name: str, quantity: Fraction, numa_quantity: Fraction) -> bool:
    """Non-Guaranteed pods do not get exclusive cpu, memory or hugepages: any zone will do for them."""
    if qos != "Guaranteed" and is_numa_affine_resource(name):
        return True
    return numa_quantity >= quantity


def only_non_numa_resources(numa_nodes: Iterable[NUMANode], resources: Mapping[str, Fraction]) -> bool:
    nodes = list(numa_nodes)
    return not any(name in n.resources for name in resources for n in nodes)


def pod_effective_request(pod: Pod) -> ResourceList:
    """util.GetPodEffectiveRequest: max(Σ containers, each init container) per resource, plus overhead."""
    init: ResourceList = {}
    for c in pod.init_containers:
        for name, q in c.requests.items():
            if name not in init or q > init[name]:
                init[name] = q
    total: ResourceList = {}
    for c in pod.containers:
        for name, q in c.requests.items():
            total[name] = total.get(name, Fraction(0)) + q
    for name, q in init.items():
        if name not in total or q > total[name]:
            total[name] = q
    for name, q in pod.overhead.items():
        total[name] = total.get(name, Fraction(0)) + q
    return total


def include_non_native(pod: Pod) -> bool:
    """resourcerequests.IncludeNonNative: some container requests a non-native (device, extended) resource."""
    return any(not is_native_resource(name) for c in [*pod.init_containers, *pod.containers] for name in c.requests)
