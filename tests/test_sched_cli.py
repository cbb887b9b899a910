"""The scheduler's command line (schedule, capacity, explain), bad input, and the plugin registry's extension points."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.cli import main
from kubesched.scheduler.registry import ENTRY_POINT_GROUP, Registry

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "plugins"
EXAMPLE_SPEC = "kubesched_example_scheduler_plugins.node_label_preference:NodeLabelPreference"
BASE_PLUGINS = ["SchedulingGates", "PrioritySort", "NodeResourcesFit", "DefaultPreemption", "DefaultBinder"]


def node(name: str, cpu: str = "2", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
            "status": {"allocatable": {"cpu": cpu, "memory": "4Gi", "pods": "110"}}}


def pod(name: str, cpu: str = "1", node_name: str = "", prio: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
    if node_name:
        spec["nodeName"] = node_name
    if prio is not None:
        spec["priority"] = prio
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec,
            "status": {"phase": "Running" if node_name else "Pending"}}


def config(plugins: list[str] | None = None, score: list[dict[str, Any]] | None = None,
           plugin_config: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    profile: dict[str, Any] = {"plugins": {"multiPoint": {"disabled": [{"name": "*"}],
                                                          "enabled": [{"name": n} for n in plugins or BASE_PLUGINS]}}}
    if score:
        profile["plugins"]["score"] = {"enabled": score}
    if plugin_config:
        profile["pluginConfig"] = plugin_config
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", "profiles": [profile]}


def write(tmp: Path, name: str, obj: Any) -> str:
    p = tmp / name
    p.write_text(yaml.safe_dump(obj) if name.endswith((".yaml", ".yml")) else json.dumps(obj))
    return str(p)


def snapshot(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": items}


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    code, out, err = cli(capsys, *argv, "-o", "json")
    assert code == 0, err
    return json.loads(out)


# ---------------------------------------------------------------- JSON shapes


def test_schedule_json_shape_with_preemption(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = write(tmp_path, "snap.yaml", snapshot([node("n1"), node("n2", cpu="1"), pod("low", "2", "n1", prio=1),
                                                 pod("web", "1"), pod("big", "2", prio=100), pod("huge", "8")]))
    cfg = write(tmp_path, "cfg.yaml", config())
    out = cli_json(capsys, "schedule", "--snapshot", snap, "--config", cfg, "--now", "2024-01-01T00:00:00Z")
    res = {p["pod"]: p for p in out["placements"]}
    assert set(out) == {"placements"}
    assert res["default/big"] == {"pod": "default/big", "node": "n1", "nominatedNode": "n1", "preempted": ["default/low"]}
    assert res["default/web"] == {"pod": "default/web", "node": "n2", "nominatedNode": None, "preempted": []}
    assert res["default/huge"]["node"] is None
    assert res["default/huge"]["reason"].startswith("0/2 nodes are available: 2 Insufficient cpu.")


def test_capacity_json_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = write(tmp_path, "snap.json", snapshot([node("n1", cpu="2"), node("n2", cpu="3"), pod("x", "1", "n2")]))
    tpl = write(tmp_path, "pod.yaml", pod("copy", "500m"))
    cfg = write(tmp_path, "cfg.yaml", config())
    out = cli_json(capsys, "capacity", "--snapshot", snap, "--pod-template", tpl, "--config", cfg)
    # Copies take 500m and 1Gi: n1 fills up on both, n2 (with x on it) runs out of memory first.
    assert out == {"instances": 7, "perNode": {"n1": 4, "n2": 3},
                   "reason": "0/2 nodes are available: 1 Insufficient cpu, 2 Insufficient memory."}
    limited = cli_json(capsys, "capacity", "--snapshot", snap, "--pod-template", tpl, "--config", cfg, "--max", "3")
    assert limited["instances"] == 3 and sum(limited["perNode"].values()) == 3


def test_explain_json_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = write(tmp_path, "snap.yaml", snapshot([node("n1", cpu="2"), node("n2", cpu="4"), pod("x", "1", "n1"),
                                                 pod("p", "2")]))
    cfg = write(tmp_path, "cfg.yaml", config())
    out = cli_json(capsys, "explain", "--snapshot", snap, "--config", cfg, "--pod", "default/p")
    assert out["pod"] == "default/p" and out["selected"] == "n2"
    n1, n2 = out["nodes"]["n1"], out["nodes"]["n2"]
    assert n1["feasible"] is False and n1["total"] is None
    assert n1["filters"]["NodeResourcesFit"] == {"code": "Unschedulable", "reasons": ["Insufficient cpu"]}
    assert n2["feasible"] is True
    assert n2["filters"]["NodeResourcesFit"] == {"code": "Success", "reasons": []}
    fit = n2["scores"]["NodeResourcesFit"]
    assert set(fit) == {"raw", "normalized", "weighted"} and n2["total"] == fit["weighted"]


def test_table_output_is_the_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = write(tmp_path, "snap.yaml", snapshot([node("n1"), pod("p")]))
    cfg = write(tmp_path, "cfg.yaml", config())
    code, out, err = cli(capsys, "schedule", "--snapshot", snap, "--config", cfg)
    assert code == 0 and "1/1 pods placed" in out and err == ""


# ---------------------------------------------------------------- bad input: one line, exit 2


def _bad_inputs(tmp: Path) -> dict[str, tuple[list[str], str]]:
    good_snap = write(tmp, "snap.yaml", snapshot([node("n1"), pod("p")]))
    good_cfg = write(tmp, "cfg.yaml", config())
    (tmp / "broken.yaml").write_text("apiVersion: v1\nkind: List\nitems:\n- {kind: Node, metadata: {name: a}\n")
    (tmp / "broken.json").write_text('{"apiVersion": "v1", "kind": "List", "items": [')
    bad_q = snapshot([node("n1", cpu="2 cores"), pod("p")])
    return {
        "malformed YAML": (["schedule", "--snapshot", str(tmp / "broken.yaml"), "--config", good_cfg], "broken.yaml"),
        "malformed JSON": (["schedule", "--snapshot", str(tmp / "broken.json"), "--config", good_cfg], "broken.json"),
        "bad quantity": (["schedule", "--snapshot", write(tmp, "badq.yaml", bad_q), "--config", good_cfg],
                         "status.allocatable.cpu"),
        "unknown plugin": (["schedule", "--snapshot", good_snap, "--config",
                            write(tmp, "unknown.yaml", config(BASE_PLUGINS + ["NoSuchPlugin"]))], "NoSuchPlugin"),
        "pluginConfig of a disabled plugin": (
            ["schedule", "--snapshot", good_snap, "--config",
             write(tmp, "pc.yaml", config(plugin_config=[{"name": "NodeResourcesBalancedAllocation", "args": {}}]))],
            "pluginConfig"),
        "bad plugin args": (
            ["schedule", "--snapshot", good_snap, "--config",
             write(tmp, "args.yaml", config(plugin_config=[{"name": "DefaultPreemption",
                                                             "args": {"minCandidateNodesPercentage": 200}}]))],
            "minCandidateNodesPercentage"),
        "pod not in snapshot": (["explain", "--snapshot", good_snap, "--config", good_cfg, "--pod", "default/nope"],
                                "default/nope"),
        "missing snapshot": (["schedule", "--snapshot", str(tmp / "missing.yaml"), "--config", good_cfg], "missing.yaml"),
        "missing config": (["explain", "--snapshot", good_snap, "--config", str(tmp / "nocfg.yaml"), "--pod", "p"],
                           "nocfg.yaml"),
        "missing template": (["capacity", "--snapshot", good_snap, "--pod-template", str(tmp / "nopod.yaml"),
                              "--config", good_cfg],
                             "nopod.yaml"),
        "template without a pod": (["capacity", "--snapshot", good_snap, "--pod-template", good_cfg, "--config", good_cfg],
                                   "expected exactly one Pod"),
        "--plugin not importable": (["schedule", "--snapshot", good_snap, "--config", good_cfg, "--plugin", "no_mod:X"],
                                    "no_mod"),
        "--plugin not a plugin": (["schedule", "--snapshot", good_snap, "--config", good_cfg, "--plugin", "json:dumps"],
                                  "json:dumps"),
    }


def test_every_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for case, (argv, needle) in _bad_inputs(tmp_path).items():
        code, out, err = cli(capsys, *argv, "-o", "json")
        assert code == 2, (case, code, err)
        assert out == "", case
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (case, err)
        assert needle in lines[0], (case, lines[0])
        assert "Traceback" not in err


def test_bad_input_through_the_real_command(tmp_path: Path) -> None:
    argv, _ = _bad_inputs(tmp_path)["missing snapshot"]
    proc = subprocess.run([sys.executable, "-m", "kubesched", *argv, "-o", "json"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


# ---------------------------------------------------------------- plugins from outside kubesched


def _dist_info(root: Path) -> None:
    """A throwaway installed distribution declaring the example plugin's entry point."""
    info = root / "kubesched_example_scheduler_plugins-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kubesched-example-scheduler-plugins\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nNodeLabelPreference = {EXAMPLE_SPEC}\n")


def _label_snapshot(tmp: Path) -> str:
    return write(tmp, "snap.yaml", snapshot([node("plain"), node("silver", labels={"example.com/tier": "silver"}),
                                             node("gold", labels={"example.com/tier": "gold"}), pod("p", "1")]))


def _label_config(tmp: Path) -> str:
    return write(tmp, "cfg.yaml", config(
        BASE_PLUGINS, score=[{"name": "NodeLabelPreference", "weight": 5}],
        plugin_config=[{"name": "NodeLabelPreference",
                        "args": {"labelKey": "example.com/tier", "preferredValues": ["gold", "silver"]}}]))


def test_entry_point_plugin_is_found_and_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    _dist_info(tmp_path / "site")
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    reg = Registry()
    assert "NodeLabelPreference" in reg
    assert reg.get("NodeLabelPreference").__name__ == "NodeLabelPreference"
    out = cli_json(capsys, "explain", "--snapshot", _label_snapshot(tmp_path), "--config", _label_config(tmp_path),
                   "--pod", "default/p")
    assert out["selected"] == "gold"
    scores = {n: e["scores"]["NodeLabelPreference"] for n, e in out["nodes"].items()}
    assert scores["gold"] == {"raw": 100, "normalized": 100, "weighted": 500}
    assert scores["silver"] == {"raw": 50, "normalized": 50, "weighted": 250}
    assert scores["plain"]["raw"] == 0


def test_entry_point_plugin_in_a_fresh_process(tmp_path: Path) -> None:
    _dist_info(tmp_path / "site")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "site"), str(EXAMPLES)]))
    proc = subprocess.run([sys.executable, "-m", "kubesched", "schedule", "--snapshot", _label_snapshot(tmp_path),
                           "--config", _label_config(tmp_path), "-o", "json"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["placements"][0]["node"] == "gold"


def test_plugin_option_loads_a_module_class(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    out = cli_json(capsys, "schedule", "--snapshot", _label_snapshot(tmp_path), "--config", _label_config(tmp_path),
                   "--plugin", EXAMPLE_SPEC)
    assert out["placements"][0]["node"] == "gold"


def test_example_plugin_bad_args_are_input_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    cfg = write(tmp_path, "cfg.yaml", config(BASE_PLUGINS, score=[{"name": "NodeLabelPreference"}],
                                             plugin_config=[{"name": "NodeLabelPreference", "args": {"labelKey": 3}}]))
    code, out, err = cli(capsys, "schedule", "--snapshot", _label_snapshot(tmp_path), "--config", cfg,
                         "--plugin", EXAMPLE_SPEC)
    assert code == 2 and out == ""
    assert "pluginConfig[NodeLabelPreference].args.labelKey" in err and len(err.strip().splitlines()) == 1


def test_registry_register_and_unknown_names() -> None:
    from kubesched.scheduler.plugins.priority_sort import PrioritySort

    reg = Registry(specs={}, include_entry_points=False)
    assert "PrioritySort" not in reg
    reg.register("MySort", PrioritySort)
    assert reg.get("MySort") is PrioritySort and reg.names() == ["MySort"]
    with pytest.raises(KeyError):
        reg.get("Nope")
