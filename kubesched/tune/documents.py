"""The documents a variant is made of, as one tree that tune and sweep parameters address by path.

The tree is the `spec` of a kubesched.io/v1alpha1 Variant: `scheduler.config` (KubeSchedulerConfiguration),
`descheduler.policy` (DeschedulerPolicy or koordinator DeschedulerConfiguration), `descheduler.interval`,
`kubelet.config` (KubeletConfiguration). `descheduler: null` means "no descheduler"; an absent key means
"the scenario's own". A path names one value in the tree, for example

    descheduler.policy.profiles[name=balance].pluginConfig[name=LowNodeUtilization].args.thresholds.cpu

where `[key=value]` picks the one list element whose `key` is `value` and `[N]` the element at index N.
Setting a value creates missing mapping keys (a `memory` threshold the base does not have yet) but never
list elements: a selector that matches nothing is an error naming the path.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubesched.errors import InputError
from kubesched.sim.scenario import (
    API_VERSION,
    VARIANT_KIND,
    ComponentConfig,
    DeschedulerSpec,
    Scenario,
    VariantSpec,
)
from kubesched.sim.units import format_duration, parse_duration

ROOTS = ("scheduler", "descheduler", "kubelet")
# File names of the documents written for the chosen point (what `kubesched schedule --config`,
# `kubesched deschedule --policy` and the real components read), and the Variant for `simulate --variant`.
FILE_NAMES = {"scheduler": "scheduler-config.yaml", "descheduler": "policy.yaml", "kubelet": "kubelet-config.yaml"}
VARIANT_FILE = "variant.yaml"

_STEP = re.compile(r"([^.\[\]]+)|\[([^\]=]+)=([^\]]*)\]|\[(\d+)\]|(\.)")


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a path: a mapping key, a list index, or a list element chosen by `key=value`."""

    key: str | None = None
    index: int | None = None
    match: tuple[str, str] | None = None

    def __str__(self) -> str:
        if self.key is not None:
            return self.key
        if self.index is not None:
            return f"[{self.index}]"
        assert self.match is not None
        return f"[{self.match[0]}={self.match[1]}]"


def parse_path(text: Any, where: str, file: str | None = None) -> tuple[Step, ...]:
    """A path in the variant tree; the first step must be one of the roots."""
    if not isinstance(text, str) or not text:
        raise InputError(f"expected a path such as descheduler.policy.profiles[name=p].pluginConfig[name=X].args.y, "
                         f"got {text!r}", file=file, field=where)
    steps: list[Step] = []
    pos = 0
    expect_key = True
    for m in _STEP.finditer(text):
        if m.start() != pos:
            break
        pos = m.end()
        if m.group(5):  # a dot
            if expect_key:
                break
            expect_key = True
            continue
        if m.group(1) is not None:
            if not expect_key:
                break
            steps.append(Step(key=m.group(1)))
        elif m.group(4) is not None:
            steps.append(Step(index=int(m.group(4))))
        else:
            steps.append(Step(match=(m.group(2), m.group(3))))
        expect_key = False
    if pos != len(text) or expect_key or not steps:
        raise InputError(f"invalid path {text!r} near character {pos + 1}", file=file, field=where)
    if steps[0].key not in ROOTS:
        raise InputError(f"a path starts with one of {', '.join(ROOTS)}, got {text!r}", file=file, field=where)
    if steps[0].key == "descheduler" and (len(steps) < 2 or steps[1].key not in ("policy", "interval")):
        raise InputError(f"expected descheduler.policy... or descheduler.interval, got {text!r}", file=file, field=where)
    if steps[0].key in ("scheduler", "kubelet") and (len(steps) < 2 or steps[1].key != "config"):
        raise InputError(f"expected {steps[0].key}.config..., got {text!r}", file=file, field=where)
    return tuple(steps)


def path_text(steps: tuple[Step, ...]) -> str:
    out = ""
    for s in steps:
        out += ("." if out and s.key is not None else "") + str(s)
    return out


def set_path(tree: dict[str, Any], steps: tuple[Step, ...], value: Any, where: str, file: str | None = None) -> None:
    """Set the value the path names, in place (missing mapping keys are created)."""
    node: Any = tree
    for i, step in enumerate(steps):
        last = i == len(steps) - 1
        so_far = path_text(steps[: i + 1])
        if step.key is not None:
            if not isinstance(node, dict):
                raise InputError(f"{path_text(steps[:i]) or 'the variant'} is not a mapping, cannot set {so_far}",
                                 file=file, field=where)
            if last:
                node[step.key] = value
                return
            if node.get(step.key) is None:
                if i == 0 or (i == 1 and steps[0].key != "descheduler"):
                    raise InputError(f"the base variant has no {so_far} to change (give a base that has it)",
                                     file=file, field=where)
                node[step.key] = {} if steps[i + 1].key is not None else []
            node = node[step.key]
            continue
        if not isinstance(node, list):
            raise InputError(f"{path_text(steps[:i])} is not a list", file=file, field=where)
        if step.index is not None:
            if step.index >= len(node):
                raise InputError(f"{path_text(steps[:i])} has {len(node)} element(s), no index {step.index}", file=file,
                                 field=where)
            pos = step.index
        else:
            assert step.match is not None
            k, v = step.match
            found = [j for j, e in enumerate(node) if isinstance(e, dict) and str(e.get(k)) == v]
            if len(found) != 1:
                raise InputError(f"{path_text(steps[:i])} has {len(found)} element(s) with {k}={v}, expected one",
                                 file=file, field=where)
            pos = found[0]
        if last:
            node[pos] = value
            return
        node = node[pos]


def get_path(tree: dict[str, Any], steps: tuple[Step, ...]) -> Any:
    """The value at the path, or None where the tree does not have it."""
    node: Any = tree
    for step in steps:
        if step.key is not None:
            node = node.get(step.key) if isinstance(node, dict) else None
        elif isinstance(node, list):
            if step.index is not None:
                node = node[step.index] if step.index < len(node) else None
            else:
                assert step.match is not None
                k, v = step.match
                found = [e for e in node if isinstance(e, dict) and str(e.get(k)) == v]
                node = found[0] if len(found) == 1 else None
        else:
            node = None
        if node is None:
            return None
    return node


# ---------------------------------------------------------------- variants ↔ trees


def from_variant(v: VariantSpec, s: Scenario) -> dict[str, Any]:
    """The tree of a variant, the scenario's own documents filling what the variant leaves out."""
    tree: dict[str, Any] = {}
    sched = v.scheduler or s.scheduler
    if sched is not None:
        tree["scheduler"] = {"config": copy.deepcopy(sched.raw)}
    desched = v.descheduler if v.descheduler_set else s.descheduler
    tree["descheduler"] = None if desched is None else {"policy": copy.deepcopy(desched.policy.raw),
                                                        "interval": format_duration(desched.interval)}
    kub = v.kubelet or (s.kubelet.config if s.kubelet else None)
    if kub is not None:
        tree["kubelet"] = {"config": copy.deepcopy(kub.raw)}
    return tree


def to_variant(name: str, tree: dict[str, Any], source: str, description: str = "") -> VariantSpec:
    """A VariantSpec the simulator runs (documents are parsed and validated when the run starts)."""
    v = VariantSpec(name=name, description=description)
    if tree.get("scheduler") is not None:
        v.scheduler = ComponentConfig(tree["scheduler"]["config"], f"{source}#scheduler.config")
    if "descheduler" in tree:
        v.descheduler_set = True
        d = tree["descheduler"]
        if d is not None:
            interval = parse_duration(d.get("interval", 300), f"{source}#descheduler.interval", allow_zero=False)
            v.descheduler = DeschedulerSpec(ComponentConfig(d["policy"], f"{source}#descheduler.policy"), interval)
    if tree.get("kubelet") is not None:
        v.kubelet = ComponentConfig(tree["kubelet"]["config"], f"{source}#kubelet.config")
    return v


def variant_document(name: str, tree: dict[str, Any], description: str) -> dict[str, Any]:
    """The tree as a kubesched.io Variant document (what `kubesched simulate --variant NAME=FILE` reads)."""
    spec: dict[str, Any] = {"description": description} if description else {}
    for root in ROOTS:
        if root in tree:
            spec[root] = copy.deepcopy(tree[root])
    return {"apiVersion": API_VERSION, "kind": VARIANT_KIND, "metadata": {"name": name}, "spec": spec}


def write_documents(out: Path, name: str, tree: dict[str, Any], description: str) -> dict[str, str]:
    """Write the tree's documents ready to apply, and the Variant; returns {role: path}."""
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    for root in ROOTS:
        node = tree.get(root)
        if node is None:
            continue
        doc = node["policy"] if root == "descheduler" else node["config"]
        path = out / FILE_NAMES[root]
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        files[root] = str(path)
    path = out / VARIANT_FILE
    path.write_text(yaml.safe_dump(variant_document(name, tree, description), sort_keys=False))
    files["variant"] = str(path)
    return files
