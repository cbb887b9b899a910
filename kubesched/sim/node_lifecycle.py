"""Nodes: where they come from, and what happens to them — cordon, drain, pressure taints, removal.

- The nodes at the start come from the snapshot, the scenario's node templates (`<template>-<i>`, Ready,
  labelled with their hostname) and a node table; `addNodes` adds more from a template.
- The node lifecycle controller keeps the pressure taints (`node.kubernetes.io/memory-pressure` …,
  NoSchedule) in step with the conditions the node's kubelet reports (TaintNodesByCondition).
- `cordon`/`uncordon` set `spec.unschedulable` and the `node.kubernetes.io/unschedulable` taint;
  `drain` is `kubectl drain`: cordon, then evict every pod but DaemonSet pods through the Eviction API,
  retrying every 5 s the pods a PodDisruptionBudget protects (429).
- `removeNodes` deletes the node object; the pod garbage collector deletes its pods.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from kubesched.api.objects import Node, parse_node
from kubesched.client.interface import ApiError
from kubesched.cluster.events import Cause
from kubesched.errors import InputError
from kubesched.kubelet.admission import CONDITION_TAINT
from kubesched.sim.context import ORDER_SCENARIO, Sim
from kubesched.sim.loops import Eviction
from kubesched.sim.traces import load_node_table

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
PRESSURE_TAINTS = ("node.kubernetes.io/memory-pressure", "node.kubernetes.io/disk-pressure",
                   "node.kubernetes.io/pid-pressure")
PRESSURE_CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure")
DRAIN_RETRY = 5.0


class NodeLifecycle:
    def __init__(self, sim: Sim, sync_pdbs: Callable[[], None]) -> None:
        self.sim = sim
        self.sync_pdbs = sync_pdbs
        self._templates = {t.name: t for t in sim.scenario.cluster.templates}
        self._template_next: dict[str, int] = {t.name: 0 for t in sim.scenario.cluster.templates}

    # ------------------------------------------------------------ nodes at the start and added later

    def initial_nodes(self, snapshot_nodes: list[Node]) -> None:
        s = self.sim.scenario
        for n in snapshot_nodes:
            self.sim.cluster.add(n)
        for t in s.cluster.templates:
            for _ in range(t.count):
                self.sim.cluster.add(self.from_template(t.name))
        if s.cluster.node_table is not None:
            for raw in load_node_table(s.cluster.node_table):
                try:
                    node = parse_node(raw)
                except InputError as e:
                    raise e.located(file=s.cluster.node_table.file) from None
                self.sim.cluster.add(node)

    def from_template(self, name: str) -> Node:
        t = self._templates[name]
        i = self._template_next[name]
        self._template_next[name] = i + 1
        raw = copy.deepcopy(t.node)
        meta = raw.setdefault("metadata", {})
        node_name = f"{name}-{i}"
        meta["name"] = node_name
        meta.setdefault("labels", {})["kubernetes.io/hostname"] = node_name
        meta.setdefault("uid", self.sim.server.new_uid(f"Node/{node_name}"))
        status = raw.setdefault("status", {})
        if not status.get("conditions"):
            status["conditions"] = [{"type": "Ready", "status": "True"}]
        return parse_node(raw)

    def add_nodes(self, template: str, count: int) -> None:
        for _ in range(count):
            node = self.from_template(template)
            self.sim.cluster.add(node, cause=Cause.NODE_LIFECYCLE)
            self.sim.rec.event(self.sim.t, "nodeAdded", node=node.name)

    # ------------------------------------------------------------ taints and conditions

    def set_pressure(self, name: str, conditions: list[str]) -> None:
        """The kubelet reports pressure conditions; the controller keeps the taints in step."""
        node = self.sim.cluster.nodes.get(name)
        if node is None:
            return
        taints = _raw_taints(node, lambda key: key not in PRESSURE_TAINTS)
        taints += [{"key": CONDITION_TAINT[c], "effect": "NoSchedule"} for c in conditions if c in CONDITION_TAINT]
        self.sim.server.patch_node(node, taints=taints, cause=Cause.NODE_LIFECYCLE,
                                   conditions={c: "True" if c in conditions else "False" for c in PRESSURE_CONDITIONS})

    def cordon(self, name: str, on: bool) -> None:
        node = self.sim.cluster.nodes.get(name)
        if node is None:
            return
        taints = _raw_taints(node, lambda key: key != UNSCHEDULABLE_TAINT)
        if on:
            taints.append({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"})
        self.sim.server.patch_node(node, taints=taints, unschedulable=on, cause=Cause.NODE_LIFECYCLE)
        self.sim.rec.event(self.sim.t, "cordon" if on else "uncordon", node=name)

    # ------------------------------------------------------------ drain and removal

    def drain(self, name: str) -> None:
        """kubectl drain: cordon, then evict every pod but DaemonSet pods, retrying while a PDB refuses."""
        sim = self.sim
        node = sim.cluster.nodes.get(name)
        if node is None:
            return
        if not node.unschedulable:
            self.cordon(name, True)
        self.sync_pdbs()
        left = False
        for sp in sorted((p for p in sim.pods.on_node(name) if not p.terminating
                          and p.phase not in ("Succeeded", "Failed")), key=lambda p: p.key):
            ref = sp.pod.controller_ref()
            if ref is not None and ref.kind == "DaemonSet":
                continue
            workload, node_name, terminal = sp.workload, sp.node, sp.phase in ("Succeeded", "Failed")
            try:
                sim.server.evict(sp.pod, cause=Cause.NODE_LIFECYCLE)
            except ApiError:
                left = True
                continue
            sim.rec.evictions.append(Eviction(sim.t, sp.key, workload, node_name, "drain", "Drain", terminal))
        if left:
            sim.push(sim.t + DRAIN_RETRY, ORDER_SCENARIO, self.drain, name)

    def remove(self, name: str) -> None:
        node = self.sim.cluster.nodes.get(name)
        if node is None:
            return
        self.sim.cluster.delete(node, cause=Cause.NODE_LIFECYCLE)
        self.sim.rec.event(self.sim.t, "nodeRemoved", node=name)


def _raw_taints(node: Node, keep: Callable[[str], bool]) -> list[dict[str, Any]]:
    spec = node.raw.get("spec") or {}
    return [dict(t) for t in spec.get("taints") or [] if isinstance(t, dict) and keep(str(t.get("key")))]
