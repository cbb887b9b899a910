"""Every scenario validation error: `kubesched simulate` exits 2 with one line naming the file and field.

Each case mutates a small valid scenario; nothing is simulated (validation runs before any variant).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.cli import main

NODE = {"status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                   "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}
DEPLOY = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
          "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                   "template": {"metadata": {"labels": {"app": "web"}},
                                "spec": {"containers": [{"name": "c", "image": "web:1",
                                                         "resources": {"requests": {"cpu": "1"}}}]}}}}
BASE: dict[str, Any] = {
    "apiVersion": "kubesched.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "t"},
    "spec": {"duration": "10m", "cluster": {"nodeTemplates": [{"name": "n", "count": 2, "node": NODE}]},
             "workloads": [{"object": DEPLOY, "usage": {"cpu": 0.5}}]},
}

Mutation = Callable[[dict[str, Any], Path], None]


def _set(path: str, value: Any) -> Mutation:
    def apply(doc: dict[str, Any], tmp: Path) -> None:
        cur: Any = doc
        keys = path.split(".")
        for k in keys[:-1]:
            cur = cur[int(k)] if isinstance(cur, list) else cur.setdefault(k, {})
        last = keys[-1]
        if isinstance(cur, list):
            if int(last) == len(cur):
                cur.append(value)
            else:
                cur[int(last)] = value
        elif value is _DELETE:
            cur.pop(last, None)
        else:
            cur[last] = value
    return apply


_DELETE = object()


def _file(name: str, docs: list[Any], path: str) -> Mutation:
    """Write a file beside the scenario and point `path` at it."""
    def apply(doc: dict[str, Any], tmp: Path) -> None:
        (tmp / name).write_text(yaml.safe_dump_all(docs))
        _set(path, name)(doc, tmp)
    return apply


def _both(*ms: Mutation) -> Mutation:
    def apply(doc: dict[str, Any], tmp: Path) -> None:
        for m in ms:
            m(doc, tmp)
    return apply


BAD_POLICY = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
              "profiles": [{"name": "p", "pluginConfig": [{"name": "LowNodeUtilization",
                                                          "args": {"thresholds": {"cpu": 120},
                                                                   "targetThresholds": {"cpu": 130}}}],
                            "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}]}
SCHED_UNKNOWN_PLUGIN = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                        "profiles": [{"plugins": {"score": {"enabled": [{"name": "NoSuchPlugin"}]}}}]}

CASES: list[tuple[str, Mutation, str]] = [
    ("api-version", _set("apiVersion", "v1"), "field apiVersion: expected kubesched.io/v1alpha1"),
    ("kind", _set("kind", "Pod"), "field kind: expected Scenario"),
    ("unknown-top-field", _set("extra", 1), "unknown field 'extra'"),
    ("no-spec", _set("spec", _DELETE), "field spec: required field is missing"),
    ("unknown-spec-field", _set("spec.durration", "1h"), "field spec.durration: unknown field"),
    ("no-duration", _set("spec.duration", _DELETE), "field spec.duration: required field is missing"),
    ("bad-duration", _set("spec.duration", "ten minutes"), "field spec.duration: expected a duration"),
    ("zero-duration", _set("spec.duration", "0s"), "field spec.duration: expected a positive duration"),
    ("negative-seed", _set("spec.seed", -1), "field spec.seed: expected an integer of at least 0"),
    ("bad-start", _set("spec.start", "yesterday"), "field spec.start: expected an RFC 3339 timestamp"),
    ("no-nodes", _set("spec.cluster", {}), "the cluster has no nodes"),
    ("missing-snapshot", _set("spec.cluster.snapshot", "nope.yaml"), "field spec.cluster.snapshot: file 'nope.yaml'"),
    ("template-node-and-file", _set("spec.cluster.nodeTemplates.0.nodeFile", "x.yaml"),
     "field spec.cluster.nodeTemplates[0]: expected exactly one of node or nodeFile"),
    ("template-no-capacity", _set("spec.cluster.nodeTemplates.0.node", {"metadata": {}}),
     "the node template has no status.capacity or status.allocatable"),
    ("template-bad-quantity", _set("spec.cluster.nodeTemplates.0.node", {"status": {"capacity": {"cpu": "lots"}}}),
     "status.capacity.cpu"),
    ("duplicate-template", _set("spec.cluster.nodeTemplates.1", {"name": "n", "node": NODE}),
     "duplicate node template 'n'"),
    ("workload-two-sources", _set("spec.workloads.0.file", "x.yaml"),
     "field spec.workloads[0]: expected exactly one of file, object or podTrace"),
    ("workload-missing-file", _set("spec.workloads", [{"file": "missing.yaml"}]),
     "field spec.workloads[0].file: file"),
    ("workload-unsupported-kind", _set("spec.workloads", [{"object": {"kind": "CronJob", "metadata": {"name": "c"}}}]),
     "unsupported kind 'CronJob'"),
    ("workload-no-name", _set("spec.workloads.0.object.metadata", {}), "expected metadata.name"),
    ("duplicate-workload", _set("spec.workloads.1", {"object": DEPLOY}), "duplicate workload Deployment/default/web"),
    ("selector-mismatch", _set("spec.workloads.0.object.spec.selector", {"matchLabels": {"app": "other"}}),
     "`selector` does not match template `labels`"),
    ("job-restart-always", _set("spec.workloads", [{"object": {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "j"}]}}}}}]),
     "spec.template.spec.restartPolicy"),
    ("unknown-priority-class", _set("spec.workloads.0.object.spec.template.spec.priorityClassName", "gold"),
     "no PriorityClass with name 'gold'"),
    ("usage-unknown-model", _set("spec.workloads.0.usage", {"cpu": {"model": "sine"}}),
     "field spec.workloads[0].usage.cpu.model: expected one of constant, diurnal, randomWalk, spikes"),
    ("usage-missing-param", _set("spec.workloads.0.usage", {"cpu": {"model": "diurnal"}}),
     "field spec.workloads[0].usage.cpu.mean: required field is missing"),
    ("usage-bad-level", _set("spec.workloads.0.usage", {"memory": "lots"}),
     "field spec.workloads[0].usage.memory: expected a quantity"),
    ("usage-negative", _set("spec.workloads.0.usage", {"cpu": -0.5}),
     "field spec.workloads[0].usage.cpu: expected a non-negative fraction"),
    ("usage-unknown-param", _set("spec.workloads.0.usage", {"cpu": {"model": "constant", "value": 1, "amp": 2}}),
     "unknown field 'amp'"),
    ("usage-walk-min-max", _set("spec.workloads.0.usage",
                                {"cpu": {"model": "randomWalk", "start": 0.5, "step": 0.1, "min": 0.9, "max": 0.2}}),
     "min (0.9) is greater than max (0.2)"),
    ("usage-spread", _set("spec.workloads.0.usage", {"cpu": {"model": "constant", "value": 1, "spread": 2}}),
     "field spec.workloads[0].usage.cpu.spread: expected a number of at most 1"),
    ("usage-unknown-resource", _set("spec.workloads.0.usage", {"gpu": 1}), "unknown field 'gpu'"),
    ("rule-workload-and-selector", _set("spec.usage", [{"workload": "Deployment/default/web", "selector": {},
                                                        "cpu": 1}]),
     "field spec.usage[0]: expected exactly one of workload or selector"),
    ("rule-unknown-workload", _set("spec.usage", [{"workload": "Deployment/default/nope", "cpu": 1}]),
     "field spec.usage[0].workload: no workload 'Deployment/default/nope'"),
    ("rule-no-resources", _set("spec.usage", [{"workload": "Deployment/default/web"}]),
     "field spec.usage[0]: expected cpu and/or memory"),
    ("trace-missing-file", _set("spec.usageTraces", [{"file": "usage.csv"}]), "field spec.usageTraces[0].file"),
    ("trace-bad-extension", _both(_file("usage.txt", [], "spec.usageTraces"),
                                  _set("spec.usageTraces", [{"file": "usage.txt"}])),
     "expected a .csv or .parquet file"),
    ("scheduler-missing-file", _set("spec.scheduler", {"config": "sched.yaml"}),
     "field spec.scheduler.config: file 'sched.yaml' does not exist"),
    ("scheduler-wrong-kind", _set("spec.scheduler", {"config": {"kind": "DeschedulerPolicy"}}),
     "field spec.scheduler.config.kind: expected kind KubeSchedulerConfiguration"),
    ("scheduler-unknown-plugin", _set("spec.scheduler", {"config": SCHED_UNKNOWN_PLUGIN}),
     "unknown plugin 'NoSuchPlugin'"),
    ("descheduler-no-policy", _set("spec.descheduler", {"interval": "5m"}),
     "field spec.descheduler.policy: required field is missing"),
    ("descheduler-zero-interval", _set("spec.descheduler", {"policy": BAD_POLICY, "interval": "0s"}),
     "field spec.descheduler.interval: expected a positive duration"),
    ("descheduler-bad-policy", _set("spec.descheduler", {"policy": BAD_POLICY}), "threshold not in [0, 100] range"),
    ("kubelet-bad-config", _set("spec.kubelet", {"config": {"apiVersion": "kubelet.config.k8s.io/v1beta1",
                                                           "kind": "KubeletConfiguration",
                                                           "evictionHard": {"memory.avail": "1Gi"}}}),
     "KubeletConfiguration"),
    ("metrics-unknown-field", _set("spec.metrics", {"sampling": "15s"}), "field spec.metrics.sampling: unknown field"),
    ("metrics-bad-window", _set("spec.metrics", {"window": "soon"}), "field spec.metrics.window: expected a duration"),
    ("event-no-action", _set("spec.events", [{"at": "1m"}]), "field spec.events[0]: expected exactly one action"),
    ("event-two-actions", _set("spec.events", [{"at": "1m", "cordon": {"nodes": ["n-0"]},
                                                "drain": {"nodes": ["n-0"]}}]),
     "expected exactly one action"),
    ("event-after-end", _set("spec.events", [{"at": "2h", "cordon": {"nodes": ["n-0"]}}]),
     "field spec.events[0].at: the event is at 7200s, after the end"),
    ("event-unknown-workload", _set("spec.events", [{"at": "1m", "scale": {"workload": "Deployment/default/x",
                                                                           "replicas": 3}}]),
     "field spec.events[0].scale.workload: no workload"),
    ("event-scale-no-replicas", _set("spec.events", [{"at": "1m", "scale": {"workload": "Deployment/default/web"}}]),
     "field spec.events[0].scale.replicas: required field is missing"),
    ("event-unknown-template", _set("spec.events", [{"at": "1m", "addNodes": {"template": "big"}}]),
     "field spec.events[0].addNodes.template: no node template 'big'"),
    ("event-unknown-node", _set("spec.events", [{"at": "1m", "drain": {"nodes": ["n-7"]}}]),
     "field spec.events[0].drain.nodes: no node 'n-7' exists"),
    ("event-bad-count", _set("spec.events", [{"at": "1m", "addNodes": {"template": "n", "count": 0}}]),
     "field spec.events[0].addNodes.count: expected an integer of at least 1"),
    ("report-bad-threshold", _set("spec.report", {"hotThreshold": -1}),
     "field spec.report.hotThreshold: expected a number of at least 0"),
    ("variant-no-name", _set("spec.variants", [{"descheduler": None}]),
     "field spec.variants[0].name: required field is missing"),
    ("variant-bad-name", _set("spec.variants", [{"name": "a b"}]), "field spec.variants[0].name: expected letters"),
    ("variant-duplicate", _set("spec.variants", [{"name": "a"}, {"name": "a"}]), "duplicate variant name 'a'"),
    ("variant-missing-file", _set("spec.variants", [{"name": "a", "file": "a.yaml"}]), "a.yaml"),
    ("variant-file-kind", _both(_file("v.yaml", [{"kind": "ConfigMap"}], "spec.variants"),
                                _set("spec.variants", [{"name": "a", "file": "v.yaml"}])),
     "expected a Variant, KubeSchedulerConfiguration"),
    ("pod-trace-no-requests", _set("spec.workloads", [{"podTrace": {"file": "scenario.yaml",
                                                                   "columns": {"arrival": "t"}}}]),
     "field spec.workloads[0].podTrace.requests: required field is missing"),
    ("node-table-missing-file", _set("spec.cluster.nodeTable", {"file": "nodes.csv", "capacity": {"cpu": "c"}}),
     "field spec.cluster.nodeTable.file: file 'nodes.csv' does not exist"),
]


def _write(tmp_path: Path, mutate: Mutation) -> Path:
    doc = copy.deepcopy(BASE)
    mutate(doc, tmp_path)
    p = tmp_path / "scenario.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


@pytest.mark.parametrize("name,mutate,expected", CASES, ids=[c[0] for c in CASES])
def test_scenario_error_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, mutate: Mutation,
                                expected: str) -> None:
    path = _write(tmp_path, mutate)
    rc = main(["simulate", str(path), "--out", str(tmp_path / "out"), "--no-progress"])
    out, err = capsys.readouterr()
    assert rc == 2, f"{name}: rc={rc}\nstdout={out}\nstderr={err}"
    assert out == ""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and "Traceback" not in err
    assert expected in lines[0], lines[0]
    assert not (tmp_path / "out" / "report.html").exists()


def test_cli_variant_argument_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, lambda d, t: None)
    assert main(["simulate", str(path), "--variant", "nofile", "--no-progress"]) == 2
    assert "expected NAME=FILE" in capsys.readouterr().err
    assert main(["simulate", str(path), "--variant", "x=missing.yaml", "--no-progress"]) == 2
    assert "file 'missing.yaml' does not exist" in capsys.readouterr().err
    assert main(["simulate", str(path), "--duration", "forever", "--no-progress"]) == 2
    assert "--duration" in capsys.readouterr().err
    assert main(["simulate", str(tmp_path / "absent.yaml"), "--no-progress"]) == 2
    assert "cannot read file" in capsys.readouterr().err


def test_invalid_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "s.yaml"
    p.write_text("apiVersion: [unclosed\n")
    assert main(["simulate", str(p), "--no-progress"]) == 2
    assert "invalid YAML" in capsys.readouterr().err
