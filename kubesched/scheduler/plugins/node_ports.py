"""NodePorts: a node fits when none of the pod's host ports is already in use there.

PreFilter collects the pod's host ports (regular containers and sidecars, schedutil.GetHostPorts) and
skips pods without any. Filter applies HostPortInfo.CheckConflict: a wanted 0.0.0.0 port conflicts
with the same protocol/port on any IP; a specific IP conflicts with the same IP or 0.0.0.0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kubesched.api.objects import Pod
from kubesched.cluster.state import ClusterState, NodeInfo, host_ports_of
from kubesched.config.plugin_args import no_args
from kubesched.scheduler.framework import (
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    Status,
    skip,
)

PRE_FILTER_KEY = "PreFilterNodePorts"
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
DEFAULT_BIND_ALL_HOST_IP = "0.0.0.0"

HostPort = tuple[str, str, int]  # (hostIP, protocol, hostPort), sanitised like HostPortInfo


def check_conflict(used: dict[HostPort, int], ip: str, protocol: str, port: int) -> bool:
    """HostPortInfo.CheckConflict over NodeInfo.used_ports."""
    if port <= 0 or not used:
        return False
    ip = ip or DEFAULT_BIND_ALL_HOST_IP
    protocol = protocol or "TCP"
    if ip == DEFAULT_BIND_ALL_HOST_IP:
        return any(p == port and proto == protocol for (_ip, proto, p) in used)
    return (DEFAULT_BIND_ALL_HOST_IP, protocol, port) in used or (ip, protocol, port) in used


def fits_ports(wanted: tuple[HostPort, ...], node_info: NodeInfo) -> bool:
    used = node_info.used_ports
    if not used:
        return True
    return not any(check_conflict(used, ip, proto, port) for ip, proto, port in wanted)


class NodePorts(PreFilterPlugin, FilterPlugin):
    name = "NodePorts"
    Args = no_args("NodePorts")

    def __init__(self, args: Any, handle: Any) -> None:
        super().__init__(args, handle)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", ("delete",)), ClusterEvent("Node", ("add", "update"))]

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> tuple[PreFilterResult | None, Status]:
        ports = host_ports_of(pod)
        if not ports:
            return None, skip()
        state.write(PRE_FILTER_KEY, ports)
        return None, SUCCESS

    def _wanted(self, state: CycleState, pod: Pod) -> tuple[HostPort, ...]:
        ports = state.read(PRE_FILTER_KEY)
        return ports if ports is not None else host_ports_of(pod)

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        if not fits_ports(self._wanted(state, pod), node_info):
            return Status(Code.UNSCHEDULABLE, [ERR_REASON])
        return SUCCESS

    def filter_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray:
        wanted = self._wanted(state, pod)
        mask = np.ones(len(rows), dtype=bool)
        if not wanted:
            return mask
        infos = cluster.node_infos
        for i, r in enumerate(rows):
            used = infos[r].used_ports
            # Most nodes have no host ports in use; only those that do need the conflict check.
            if used and not fits_ports(wanted, infos[r]):
                mask[i] = False
        return mask
