"""The single-numa-node admission the Filter runs: can the kubelet's Topology Manager align the pod?

Mirrors kubernetes-sigs/scheduler-plugins `pkg/noderesourcetopology/filter.go`: only nodes whose
Topology Manager policy is single-numa-node are checked. At container scope every init container must fit
some NUMA zone on its own ("cannot align init container" / "cannot align sidecar container") and the app
containers are placed one by one in the lowest zone that fits, each taking its share ("cannot align
container"); at pod scope the pod's effective request must fit one zone ("cannot align pod"). A resource
the node does not report at all fails; one no zone reports that is host-level (ephemeral-storage, storage,
extended) passes; for pods that are not Guaranteed, cpu, memory and hugepages fit any zone.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from kubesched.api.objects import Pod
from kubesched.cluster.state import NodeInfo
from kubesched.scheduler.framework import Code, Status
from kubesched.scheduler.plugins.framework_resource import Resource
from kubesched.scheduler.plugins.noderesourcetopology.numa import (
    SCOPE_CONTAINER,
    SCOPE_POD,
    NUMANode,
    TopologyManager,
    is_host_level_resource,
    is_numa_affine_resource,
    is_resource_set_suitable,
    pod_effective_request,
)

_ALL_BITS = (1 << 64) - 1


def node_resource_names(info: NodeInfo) -> set[str]:
    """The names util.ResourceList(nodeInfo.Allocatable) has: cpu, memory, pods, ephemeral-storage, scalars."""
    rl = Resource(0, 0, 0, 0, {k: v for k, v in info.allocatable.items()
                               if k not in ("cpu", "memory", "ephemeral-storage", "pods")}).to_resource_list()
    return set(rl)


def resources_available_in_any_numa_node(numa_nodes: list[NUMANode], node_resources: set[str], qos: str,
                                         resources: Mapping[str, Fraction]) -> tuple[int, bool]:
    """The NUMA id the kubelet would pick (the lowest that fits) and whether one fits."""
    bitmask = _ALL_BITS
    for name, quantity in resources.items():
        if quantity == 0:
            continue
        if name not in node_resources:
            return -1, False
        has_affinity = False
        fits = 0
        for numa in numa_nodes:
            available = numa.resources.get(name)
            if available is None:
                continue
            has_affinity = True
            if is_resource_set_suitable(qos, name, quantity, available):
                fits |= 1 << numa.numa_id
        if not has_affinity and is_host_level_resource(name):
            continue
        bitmask &= fits
        if not bitmask:
            return -1, False
    lowest = (bitmask & -bitmask).bit_length() - 1
    return lowest, bitmask != 0


def subtract_from_numa(numa_nodes: list[NUMANode], numa_id: int, qos: str,
                       requests: Mapping[str, Fraction]) -> str | None:
    """subtractResourcesFromNUMANodeList: the container takes its requests from zone `numa_id`."""
    for numa in numa_nodes:
        if numa.numa_id != numa_id:
            continue
        for name, q in requests.items():
            if qos != "Guaranteed" and is_numa_affine_resource(name):
                continue
            if q == 0 or name not in numa.resources:
                continue
            left = numa.resources[name] - q
            if left < 0:
                return f"resource {name!r} request exceeds NUMA {numa_id} availability"
            numa.resources[name] = left
    return None


def single_numa_container_level(pod: Pod, numa_nodes: list[NUMANode], node_resources: set[str], qos: str) -> Status:
    for c in pod.init_containers:
        _, ok = resources_available_in_any_numa_node(numa_nodes, node_resources, qos, c.requests)
        if not ok:
            kind = "sidecar" if c.is_sidecar else "init"
            return Status(Code.UNSCHEDULABLE, [f"cannot align {kind} container"])
    for c in pod.containers:
        numa_id, ok = resources_available_in_any_numa_node(numa_nodes, node_resources, qos, c.requests)
        if not ok:
            return Status(Code.UNSCHEDULABLE, ["cannot align container"])
        err = subtract_from_numa(numa_nodes, numa_id, qos, c.requests)
        if err is not None:
            return Status(Code.ERROR, ["inconsistent resource accounting", err])
    return Status()


def single_numa_pod_level(pod: Pod, numa_nodes: list[NUMANode], node_resources: set[str], qos: str) -> Status:
    _, ok = resources_available_in_any_numa_node(numa_nodes, node_resources, qos, pod_effective_request(pod))
    if not ok:
        return Status(Code.UNSCHEDULABLE, ["cannot align pod"])
    return Status()


def filter_handler(conf: TopologyManager) -> str | None:
    """Which handler applies: only single-numa-node is checked, at its scope."""
    if conf.policy != "single-numa-node":
        return None
    return SCOPE_POD if conf.scope == SCOPE_POD else SCOPE_CONTAINER
