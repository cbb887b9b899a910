"""Inputs for the fuzz suite: valid documents of every kind the commands read, mutated by hypothesis.

A case is one command with its files: a snapshot, a scheduler configuration (v1 or an old version), a descheduler
policy (v1alpha2 or v1alpha1), a kubelet configuration, a timeline, metrics, a pod template or a scenario — one
of them mutated (a subtree replaced by an awkward value, a key dropped or added, a list grown, nesting deepened)
or its text damaged (cut short, bytes that are not UTF-8, brackets without end) — and sometimes awkward command
line values. `run_case` runs it in-process through click's CliRunner and checks what every run must satisfy:
exit 0 or 2, no traceback, one `error:` line and nothing on stdout on exit 2, JSON on stdout with `-o json`,
no half-written output (no temporary files left, no output folder or file after a failed run).
"""

from __future__ import annotations

import copy
import json
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner
from hypothesis import strategies as st

from kubesched.cli import main_group

NOW = "2025-03-01T10:00:00Z"

# ---------------------------------------------------------------- valid documents


def node(name: str, cpu: str = "4", memory: str = "8Gi", zone: str = "a") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}},
            "spec": {"taints": [{"key": "dedicated", "value": "x", "effect": "PreferNoSchedule"}]},
            "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": "20", "ephemeral-storage": "20Gi"},
                       "allocatable": {"cpu": cpu, "memory": memory, "pods": "20", "ephemeral-storage": "20Gi"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, node_name: str = "", cpu: str = "500m", owner: str | None = "web") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "image": "app:1", "ports": [{"containerPort": 80}],
                        "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}, "limits": {"memory": "512Mi"}}}],
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "preference": {"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}}]},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 5, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                                  "labelSelector": {"matchLabels": {"app": "web"}}}}]}},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                       "whenUnsatisfiable": "ScheduleAnyway",
                                       "labelSelector": {"matchLabels": {"app": "web"}}}],
        "priorityClassName": "normal", "priority": 100,
    }
    if node_name:
        spec["nodeName"] = node_name
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": {"app": "web"},
                            "creationTimestamp": "2025-03-01T08:00:00Z"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": f"{owner}-uid",
                                    "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": "Running" if node_name else "Pending",
                       "containerStatuses": [{"name": "app", "restartCount": 3}]}}


def snapshot() -> dict[str, Any]:
    items: list[dict[str, Any]] = [node("n1", zone="a"), node("n2", cpu="2", zone="b"), node("n3", zone="b")]
    items += [pod(f"web-{i}", f"n{1 + i % 3}") for i in range(4)] + [pod("pending", owner=None)]
    items += [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "normal"}, "value": 100},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": "default"},
         "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
         "status": {"disruptionsAllowed": 1, "currentHealthy": 4, "desiredHealthy": 1, "expectedPods": 4}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api", "namespace": "default"},
         "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "api"}},
                  "template": {"metadata": {"labels": {"app": "api"}},
                               "spec": {"containers": [{"name": "api", "image": "api:1",
                                                        "resources": {"requests": {"cpu": "250m"}}}]}}}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "default"},
         "spec": {"selector": {"matchLabels": {"app": "agent"}},
                  "template": {"metadata": {"labels": {"app": "agent"}},
                               "spec": {"containers": [{"name": "agent", "image": "agent:1"}]}}}},
        {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics", "metadata": {"name": "n1"},
         "timestamp": "2025-03-01T09:59:30Z", "window": "30s", "usage": {"cpu": "3", "memory": "4Gi"}},
        {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
         "metadata": {"name": "web-0", "namespace": "default"}, "timestamp": "2025-03-01T09:59:30Z", "window": "30s",
         "containers": [{"name": "app", "usage": {"cpu": "900m", "memory": "300Mi"}}]},
    ]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def scheduler_config(version: str = "v1") -> dict[str, Any]:
    if version == "v1beta1":
        return {"apiVersion": "kubescheduler.config.k8s.io/v1beta1", "kind": "KubeSchedulerConfiguration",
                "percentageOfNodesToScore": 50,
                "profiles": [{"schedulerName": "default-scheduler",
                              "plugins": {"score": {"disabled": [{"name": "NodeResourcesLeastAllocated"}],
                                                    "enabled": [{"name": "NodeResourcesMostAllocated", "weight": 2}]}},
                              "pluginConfig": [{"name": "NodeResourcesMostAllocated",
                                                "args": {"resources": [{"name": "cpu", "weight": 1}]}}]}]}
    doc: dict[str, Any] = {
        "apiVersion": f"kubescheduler.config.k8s.io/{version}", "kind": "KubeSchedulerConfiguration",
        "percentageOfNodesToScore": 100, "podInitialBackoffSeconds": 1, "podMaxBackoffSeconds": 10,
        "profiles": [{"schedulerName": "default-scheduler",
                      "plugins": {"score": {"enabled": [{"name": "NodeResourcesBalancedAllocation", "weight": 2}]}},
                      "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
                          "type": "MostAllocated", "resources": [{"name": "cpu", "weight": 1},
                                                                 {"name": "memory", "weight": 1}]}}},
                                       {"name": "PodTopologySpread", "args": {"defaultingType": "List"}}]}]}
    return doc


def policy(version: str = "v1alpha2") -> dict[str, Any]:
    if version == "v1alpha1":
        return {"apiVersion": "descheduler/v1alpha1", "kind": "DeschedulerPolicy", "evictLocalStoragePods": True,
                "maxNoOfPodsToEvictPerNode": 5,
                "strategies": {
                    "LowNodeUtilization": {"enabled": True, "params": {"nodeResourceUtilizationThresholds": {
                        "thresholds": {"cpu": 20, "memory": 20}, "targetThresholds": {"cpu": 50, "memory": 50}}}},
                    "RemovePodsHavingTooManyRestarts": {"enabled": True, "params": {
                        "podsHavingTooManyRestarts": {"podRestartThreshold": 2}}},
                    "PodLifeTime": {"enabled": True, "params": {"podLifeTime": {"maxPodLifeTimeSeconds": 60}}}}}
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "maxNoOfPodsToEvictPerNode": 3,
            "metricsProviders": [{"source": "KubernetesMetrics"}],
            "profiles": [{"name": "p",
                          "pluginConfig": [
                              {"name": "DefaultEvictor", "args": {"nodeFit": True, "evictLocalStoragePods": True}},
                              {"name": "LowNodeUtilization", "args": {
                                  "thresholds": {"cpu": 30, "memory": 30}, "targetThresholds": {"cpu": 60, "memory": 60},
                                  "metricsUtilization": {"metricsServer": True}}},
                              {"name": "RemovePodsViolatingTopologySpreadConstraint",
                               "args": {"constraints": ["DoNotSchedule", "ScheduleAnyway"]}},
                              {"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 600}}],
                          "plugins": {"balance": {"enabled": ["LowNodeUtilization",
                                                              "RemovePodsViolatingTopologySpreadConstraint"]},
                                      "deschedule": {"enabled": ["PodLifeTime"]}}}]}


def kubelet_config() -> dict[str, Any]:
    return {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "evictionHard": {"memory.available": "500Mi", "nodefs.available": "10%"},
            "evictionSoft": {"memory.available": "1Gi"}, "evictionSoftGracePeriod": {"memory.available": "1m"},
            "evictionMaxPodGracePeriod": 30, "evictionPressureTransitionPeriod": "5m",
            "evictionMinimumReclaim": {"memory.available": "100Mi"}}


def _stats(available_mi: int) -> dict[str, Any]:
    mi, gi = 2**20, 2**30
    return {"node": {"nodeName": "n1", "memory": {"availableBytes": available_mi * mi, "workingSetBytes": 6 * gi},
                     "fs": {"availableBytes": 10 * gi, "capacityBytes": 20 * gi}},
            "pods": [{"podRef": {"name": "web-0", "namespace": "default"},
                      "memory": {"workingSetBytes": 300 * mi}}]}


def timeline() -> list[dict[str, Any]]:
    return [{"at": 0, "stats": _stats(2048)}, {"at": 30, "stats": _stats(800)}, {"at": 120, "stats": _stats(300)}]


def watcher_metrics() -> dict[str, Any]:
    return {"timestamp": 1740823170, "window": {"duration": "15m", "start": 1740822270, "end": 1740823170},
            "source": "Prometheus",
            "data": {"NodeMetricsMap": {"n1": {"metrics": [{"type": "CPU", "operator": "AVG", "value": 70},
                                                           {"type": "Memory", "operator": "AVG", "value": 40}]},
                                        "n2": {"metrics": [{"type": "CPU", "operator": "AVG", "value": 10}]}}}}


def pod_template() -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "t", "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "t"}},
                     "template": {"metadata": {"labels": {"app": "t"}},
                                  "spec": {"containers": [{"name": "t", "image": "t:1",
                                                           "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}}


def scenario() -> dict[str, Any]:
    return {"apiVersion": "kubesched.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "fuzz"},
            "spec": {"duration": "10m", "seed": 3, "usageStep": "60s",
                     "cluster": {"nodeTemplates": [{"name": "node", "count": 2, "node": {
                         "metadata": {"labels": {"zone": "a"}},
                         "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "20"}}}}]},
                     "workloads": [{"object": {
                         "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                         "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                                  "template": {"metadata": {"labels": {"app": "web"}},
                                               "spec": {"containers": [{"name": "c", "resources": {
                                                   "requests": {"cpu": "500m", "memory": "256Mi"}}}]}}}},
                         "usage": {"cpu": {"model": "constant", "value": 0.8}}}],
                     "events": [{"at": "5m", "scale": {"workload": "Deployment/default/web", "replicas": 4}}],
                     "report": {"hotThreshold": 0.7}}}


# ---------------------------------------------------------------- mutations

AWKWARD: list[Any] = [
    None, True, False, 0, -1, 1, 7, 2**31, 2**63, -(2**63) - 1, 10**30, 1.5, -0.5, 1e308, "", "x", "-1", "0",
    "1e30", "1e999999999", "9223372036854775808", "1Gi", "-1Gi", "100m", "0.0000000001", "1.5Pi", "abc/def", "*",
    "Exists", "In", "NoExecute", "Ünïcödé ✓", "a" * 300, "UPPER_case", "2025-03-01T10:00:00Z", "not-a-time",
    "60s", "-5m", [], {}, [None], [1, 2], ["a", "b"], {"a": None}, {"name": "x"}, [[[]]], {"kind": "Pod"},
]
KEYS = ["name", "kind", "apiVersion", "spec", "status", "metadata", "x-unknown", "enabled", "args", "weight",
        "replicas", "count", "at", "requests", "nodeName", "containers"]


def _children(v: Any) -> list[Any]:
    if isinstance(v, dict):
        return list(v.keys())
    if isinstance(v, list):
        return list(range(len(v)))
    return []


@st.composite
def mutate(draw: Any, doc: Any) -> Any:
    """The document with 1-3 random mutations somewhere in it."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        # Walk down from the root to a random node (stopping early more often near the top).
        parent: Any = None
        key: Any = None
        cur = doc
        while _children(cur) and draw(st.integers(0, 4)) > 0:
            parent, key = cur, draw(st.sampled_from(_children(cur)))
            cur = cur[key]
        op = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add", "grow", "wrap", "deep",
                                   "stringify", "negate"]))
        if parent is None:
            if op in ("replace", "wrap", "deep"):
                doc = copy.deepcopy(draw(st.sampled_from(AWKWARD))) if op == "replace" else [doc] if op == "wrap" else \
                    {"items": [doc], "kind": "List"}
            continue
        if op == "replace":
            parent[key] = copy.deepcopy(draw(st.sampled_from(AWKWARD)))
        elif op == "delete":
            del parent[key]
        elif op == "add" and isinstance(cur, dict):
            cur[draw(st.sampled_from(KEYS))] = copy.deepcopy(draw(st.sampled_from(AWKWARD)))
        elif op == "grow" and isinstance(cur, list) and cur:
            cur.extend(copy.deepcopy(cur[: draw(st.integers(1, 3))]) * draw(st.integers(1, 5)))
        elif op == "wrap":
            parent[key] = [cur] if draw(st.booleans()) else {"x": cur}
        elif op == "deep":
            v: Any = cur
            for _ in range(draw(st.sampled_from([5, 50, 150, 400]))):
                v = [v]
            parent[key] = v
        elif op == "stringify" and isinstance(cur, (int, float)) and not isinstance(cur, bool):
            parent[key] = str(cur)
        elif op == "negate" and isinstance(cur, (int, float)) and not isinstance(cur, bool):
            parent[key] = -cur - 1
    return doc


def _depth(doc: Any) -> int:
    best, stack = 0, [(doc, 1)]
    while stack:
        v, d = stack.pop()
        best = max(best, d)
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return best


def render(doc: Any, fmt: str) -> bytes:
    if fmt == "json" or _depth(doc) > 100:  # PyYAML's emitter recurses in Python
        return json.dumps(doc).encode()
    if fmt == "json":
        return json.dumps(doc).encode()
    return yaml.safe_dump(doc, sort_keys=False).encode() if not isinstance(doc, list) or doc else b"[]\n"


@st.composite
def damage(draw: Any, data: bytes) -> bytes:
    """The text broken at the byte level."""
    op = draw(st.sampled_from(["truncate", "bytes", "brackets", "bom16", "tab", "duplicate", "alias", "empty"]))
    if op == "truncate":
        return data[: draw(st.integers(0, max(0, len(data) - 1)))]
    if op == "bytes":
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.sampled_from([b"\xff", b"\xc3(", b"\x00", b"\xed\xa0\x80", b"\x1b[31m"])) + data[at:]
    if op == "brackets":
        return data + b"\n" + b"[" * draw(st.sampled_from([10, 1000, 100000]))
    if op == "bom16":
        return b"\xff\xfe" + data
    if op == "tab":
        return data.replace(b"  ", b"\t", 1)
    if op == "duplicate":
        lines = data.split(b"\n")
        i = draw(st.integers(0, max(0, len(lines) - 1)))
        return b"\n".join(lines[: i + 1] + lines[i:])
    if op == "alias":
        return b"a: &a [x, x, x, x, x, x, x, x]\n" + b"".join(
            b"%s: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n" % ((bytes([98 + i]),) * 2 + (bytes([97 + i]),) * 8)
            for i in range(12))
    return b""


@dataclass
class Case:
    command: str
    argv: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    # An output path the command must leave absent when it fails.
    output: str | None = None
    changed: str = ""  # the input that was mutated or damaged

    def __repr__(self) -> str:
        data = self.files.get(self.changed, b"")
        shown = data if len(data) <= 3000 else data[:3000] + b"..."
        return f"Case({' '.join(self.argv)!r}, {self.changed}={shown!r})"


BASES: dict[str, Any] = {
    "snapshot": snapshot, "config": scheduler_config, "config-v1beta1": lambda: scheduler_config("v1beta1"),
    "config-v1beta3": lambda: scheduler_config("v1beta3"), "policy": policy,
    "policy-v1alpha1": lambda: policy("v1alpha1"), "kubelet": kubelet_config, "timeline": timeline,
    "metrics": watcher_metrics, "template": pod_template, "scenario": scenario,
}
# What each input is given to: (command, argv template); {x} is the file of input x, {out} an output path.
USES: dict[str, list[list[str]]] = {
    "snapshot": [["schedule", "--snapshot", "{snapshot}", "-o", "json"],
                 ["explain", "--snapshot", "{snapshot}", "--pod", "default/pending", "-o", "json"],
                 ["capacity", "--snapshot", "{snapshot}", "--pod-template", "{template}", "--max", "20", "-o", "json"],
                 ["qos", "--snapshot", "{snapshot}", "-o", "json"],
                 ["deschedule", "--snapshot", "{snapshot}", "--policy", "{policy}", "--metrics", "{metrics}", "-o",
                  "json"],
                 ["node-pressure", "--kubelet-config", "{kubelet}", "--snapshot", "{snapshot}", "--timeline",
                  "{timeline}", "-o", "json"]],
    "config": [["schedule", "--snapshot", "{snapshot}", "--config", "{config}", "-o", "json"],
               ["deschedule", "--snapshot", "{snapshot}", "--policy", "{policy}", "--scheduler-config", "{config}",
                "-o", "json"],
               ["convert", "{config}", "--out", "{out}"]],
    "policy": [["deschedule", "--snapshot", "{snapshot}", "--policy", "{policy}", "-o", "json"],
               ["convert", "{policy}", "-o", "json"]],
    "kubelet": [["node-pressure", "--kubelet-config", "{kubelet}", "--snapshot", "{snapshot}", "--timeline",
                 "{timeline}", "-o", "json"]],
    "timeline": [["node-pressure", "--kubelet-config", "{kubelet}", "--snapshot", "{snapshot}", "--timeline",
                  "{timeline}", "-o", "json"]],
    "metrics": [["schedule", "--snapshot", "{snapshot}", "--metrics", "{metrics}", "--config", "{loadaware}", "-o",
                 "json"],
                ["deschedule", "--snapshot", "{snapshot}", "--policy", "{policy}", "--metrics", "{metrics}", "-o",
                 "json"]],
    "template": [["capacity", "--snapshot", "{snapshot}", "--pod-template", "{template}", "--max", "20", "-o",
                  "json"]],
    "scenario": [["simulate", "{scenario}", "--json", "--jobs", "1", "--no-progress"],
                 ["simulate", "{scenario}", "--out", "{out}", "--jobs", "1", "--no-progress", "--no-html"]],
}
USES["config-v1beta1"] = USES["config-v1beta3"] = USES["config"]
USES["policy-v1alpha1"] = USES["policy"]

LOAD_AWARE = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
              "profiles": [{"schedulerName": "default-scheduler",
                            "plugins": {"score": {"enabled": [{"name": "TargetLoadPacking", "weight": 1}]}},
                            "pluginConfig": [{"name": "TargetLoadPacking", "args": {"targetUtilization": 60}}]}]}

AWKWARD_FLAGS: list[tuple[str, str]] = [
    ("--now", "yesterday"), ("--now", "2025-13-45T99:00:00Z"), ("--seed", "-1"), ("--seed", str(2**70)),
    ("--max", "-1"), ("--min-ready-nodes", "-3"), ("--duration", "-5m"), ("--duration", "1e30h"),
    ("--duration", "100000d"), ("--pod", "nope/nothing"), ("--variant", "=x"), ("--variant", "bad name=file"),
]


_BASE_FILES: dict[str, bytes] = {}


def base_files() -> dict[str, bytes]:
    """The valid inputs, rendered once (each case replaces one of them)."""
    if not _BASE_FILES:
        for name, make in BASES.items():
            if name not in ("config-v1beta1", "config-v1beta3", "policy-v1alpha1"):
                _BASE_FILES[name] = render(make(), "yaml")
        _BASE_FILES["loadaware"] = render(LOAD_AWARE, "yaml")
    return _BASE_FILES


@st.composite
def cases(draw: Any) -> Case:
    target = draw(st.sampled_from(sorted(BASES)))
    argv = list(draw(st.sampled_from(USES[target])))
    fmt = draw(st.sampled_from(["yaml", "json"]))
    files = dict(base_files())
    doc = BASES[target]()
    key = "config" if target.startswith("config") else "policy" if target.startswith("policy") else target
    how = draw(st.sampled_from(["mutate", "mutate", "mutate", "damage", "valid"]))
    if how == "mutate":
        files[key] = render(draw(mutate(doc)), fmt)
    elif how == "damage":
        files[key] = draw(damage(render(doc, fmt)))
    else:
        files[key] = render(doc, fmt)
    if draw(st.integers(0, 9)) == 0:
        flag, value = draw(st.sampled_from(AWKWARD_FLAGS))
        if (flag in ("--max",) and argv[0] == "capacity") or (flag in ("--duration", "--variant")
                                                              and argv[0] == "simulate") \
                or (flag == "--min-ready-nodes" and argv[0] == "deschedule") or (flag == "--pod" and argv[0] == "explain") \
                or (flag in ("--now", "--seed") and argv[0] in ("schedule", "explain", "capacity", "deschedule")):
            argv += [flag, value]
    if argv[0] != "simulate" and argv[0] != "convert" and "--now" not in argv:
        argv += ["--now", NOW]
    return Case(argv[0], argv, files, "{out}" if "{out}" in argv else None, key)


@dataclass
class Tally:
    cases: int = 0
    exits: Counter[tuple[str, int]] = field(default_factory=Counter)
    internal_errors: int = 0


def run_case(case: Case, tally: Tally | None = None) -> None:
    """Run one case in a fresh folder and check what every run must satisfy."""
    with tempfile.TemporaryDirectory(prefix="kubesched-fuzz-") as tmp:
        root = Path(tmp)
        paths = {}
        for name, data in case.files.items():
            p = root / f"{name}.{'json' if data.lstrip()[:1] in (b'{', b'[') else 'yaml'}"
            p.write_bytes(data)
            paths[name] = str(p)
        out = root / "results" / ("converted.yaml" if case.command == "convert" else "run")
        paths["out"] = str(out)
        argv = [a.format(**paths) if a.startswith("{") and a.endswith("}") else a for a in case.argv]
        result = CliRunner().invoke(main_group, argv, env={"KUBESCHED_DEBUG": None})
        stdout, stderr = result.stdout, result.stderr
        code = result.exit_code
        if tally is not None:
            tally.cases += 1
            tally.exits[(case.command, code)] += 1
            tally.internal_errors += "internal error" in stderr
        where = f"kubesched {' '.join(argv)}\n--- stderr:\n{stderr[-2000:]}"
        assert result.exception is None or isinstance(result.exception, SystemExit), \
            f"{where}\n--- exception: {result.exception!r}"
        assert code in (0, 2), f"exit {code}: {where}"
        assert "Traceback" not in stderr and "Traceback" not in stdout, where
        assert "internal error" not in stderr, where
        if code == 2:
            errors = [ln for ln in stderr.splitlines() if ln.startswith("error: ")]
            assert len(errors) == 1, where
            assert stdout == "", f"{where}\n--- stdout:\n{stdout[:500]}"
            if case.output is not None:
                assert not out.exists(), f"a failed run left {out}: {where}"
        elif "-o" in argv and argv[argv.index("-o") + 1] == "json" or "--json" in argv:
            json.loads(stdout)
        leftovers = [str(p) for p in root.rglob("*") if p.name.endswith((".partial", ".old"))]
        assert not leftovers, f"half-written files {leftovers}: {where}"
