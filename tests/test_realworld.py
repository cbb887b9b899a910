"""Every real document of ../shared/realworld/docs through the command that takes its kind.

What the corpus README asks, per document:
- a valid document of a kind and version the real component accepts today: exit 0 and *used* (its pods
  appear, its nodes are scored, its plugins run), with whatever it skipped said on stderr;
- an older version (KubeSchedulerConfiguration v1beta1/v1beta3, DeschedulerPolicy v1alpha1): converted, with a
  deprecation warning that names `kubesched convert`;
- a document naming a plugin kubesched does not have: exit 2, one line naming the plugin and what exists. Which
  plugins are missing is asked of the registries, so when the out-of-tree plugins land (issue 14) these
  documents are expected to run instead, with no change here;
- a document that is itself wrong (INVALID below, each with the field the error must name): exit 2, one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.api.documents import read_documents
from kubesched.cli import main
from kubesched.config import koordinator_descheduler
from kubesched.config.convert import (
    convert_descheduler_policy,
    convert_scheduler_config,
    is_old_descheduler_policy,
    is_old_scheduler_config,
)
from kubesched.descheduler.registry import default_registry as descheduler_registry
from kubesched.errors import InputError
from kubesched.scheduler.registry import Registry

REALWORLD = Path(__file__).resolve().parents[2] / "shared" / "realworld"
DOCS = REALWORLD / "docs"
NOW = "2025-06-01T12:00:00Z"

# Documents wrong as written (kept so in the corpus), and what the one error line must name.
INVALID = {
    "cc__config_default-scheduler.yaml": "got an object without kind",  # a dump of the Go struct, not a document
    "desched__README_block01.yaml": "invalid YAML",  # "..." placeholders
    "koordweb__load-aware-descheduling_md_raw.yaml": "invalid YAML",
    "koordweb__load-aware-scheduling_md_raw.yaml": "invalid YAML",
    "k8sweb_ja__node-pressure-eviction_md_soft-hard.yaml": "evictionMaxPodGracePeriod",  # an int32 given as "60s"
    "ksim__docs_api-samples_v1_import_md_schedulerConfig_wrapped-v1.json": "healthzBindAddress",  # not a v1 field
    "os__example_application_simple_rs-calico.yaml": "spec.selector",  # apps/v1 requires it
}
# Documents of kinds no kubesched command reads: accepted, with a warning that they were not read.
NOT_READ = {"hkust__example_test-cluster-config.yaml": "Config"}
# A koordinator plugin named in pluginConfig that no profile enables (koordinator's descheduler registers it).
CONFIG_ONLY_PLUGINS = {"koordweb__custom-priority-descheduling_md.yaml": "CustomPriority"}

SCHEDULER_KINDS = ("KubeSchedulerConfiguration",)
DESCHEDULER_KINDS = ("DeschedulerPolicy", "DeschedulerConfiguration")
WORKLOADS = ("Deployment", "ReplicaSet", "ReplicationController", "StatefulSet", "DaemonSet", "Job")


def _docs() -> list[Path]:
    if not DOCS.is_dir():
        pytest.fail(f"the real-world corpus is missing: {DOCS} (the repository must sit beside ../shared)")
    return sorted(DOCS.iterdir())


def _kind(path: Path) -> str:
    try:
        docs = read_documents(path)
    except InputError:
        return "unreadable"
    for d in docs:
        if isinstance(d, dict) and isinstance(d.get("kind"), str):
            return str(d["kind"])
    return "none"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    return lines[0]


def _node(name: str, zone: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone,
                                                  "kubernetes.io/os": "linux"}},
            "status": {"capacity": {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi"},
                       "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(name: str, node: str | None, cpu: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "app:1",
                                            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                              "uid": "web-uid", "controller": True}]},
            "spec": spec, "status": {"phase": "Running" if node else "Pending"}}


def _priority_classes(raw: Any) -> set[str]:
    """PriorityClass names a policy refers to (the test cluster has them, as the policy's cluster would)."""
    found: set[str] = set()

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                if k == "thresholdPriorityClassName" and isinstance(x, str) and x:
                    found.add(x)
                if k == "priorityThreshold" and isinstance(x, dict) and isinstance(x.get("name"), str) and x["name"]:
                    found.add(x["name"])
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(raw)
    return found


def _base_cluster(tmp: Path, extra: list[dict[str, Any]] | None = None, classes: set[str] | None = None) -> str:
    nodes = [_node(f"node-{i}", f"zone-{i % 2}") for i in range(4)]
    pods = [_pod(f"web-{i}", f"node-{i % 3}", "2") for i in range(6)] + [_pod("web-pending", None, "1")]
    pcs = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": c}, "value": 1000}
           for c in sorted(classes or ())]
    path = tmp / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes + pods + pcs + (extra or [])}))
    return str(path)


def _scheduler_plugins(raw: dict[str, Any]) -> list[str]:
    if is_old_scheduler_config(raw):
        raw, _ = convert_scheduler_config(raw)
    names: list[str] = []
    for prof in raw.get("profiles") or []:
        for ps in (prof.get("plugins") or {}).values():
            names += [p["name"] for p in (ps or {}).get("enabled") or [] if isinstance(p, dict)]
        names += [pc["name"] for pc in prof.get("pluginConfig") or [] if isinstance(pc, dict)]
    return names


def _descheduler_plugins(raw: dict[str, Any]) -> list[str]:
    if is_old_descheduler_policy(raw):
        raw, _ = convert_descheduler_policy(raw)
    if raw.get("kind") == "DeschedulerConfiguration":
        # koord-descheduler's evictor (MigrationController) becomes the policy's DefaultEvictor.
        try:
            converted = koordinator_descheduler.convert(raw, "<test>")
        except InputError:
            converted = raw
        if isinstance(converted, dict):
            raw = converted
    names: list[str] = []
    for prof in raw.get("profiles") or []:
        for ps in (prof.get("plugins") or {}).values():
            for p in (ps or {}).get("enabled") or []:
                names.append(p["name"] if isinstance(p, dict) else str(p))
        names += [pc["name"] for pc in prof.get("pluginConfig") or [] if isinstance(pc, dict)]
    return names


def _missing(names: list[str], known: Any) -> list[str]:
    return [n for n in dict.fromkeys(names) if n not in known and n != "*"]


def _check_old_version_warning(raw: dict[str, Any], err: str) -> None:
    if is_old_scheduler_config(raw) or is_old_descheduler_policy(raw):
        assert "converted to v1" in err and "kubesched convert" in err, err


CORPUS = _docs() if DOCS.is_dir() else []


@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_realworld_document(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = path.name
    kind = _kind(path)
    docs = read_documents(path) if kind != "unreadable" else []
    raw = next((d for d in docs if isinstance(d, dict) and d.get("kind") == kind), docs[0] if docs else {})

    if kind in SCHEDULER_KINDS or (kind in ("unreadable", "none") and "desched" not in name
                                   and "node-pressure" not in name and name.endswith((".yaml", ".yml", ".json"))
                                   and ("sched" in name or "config" in name)):
        code, out, err = _run(capsys, "schedule", "--snapshot", _base_cluster(tmp_path), "--config", str(path),
                              "--now", NOW, "-o", "json")
        if name in INVALID:
            assert code == 2 and INVALID[name] in _one_error_line(err), err
            return
        missing = _missing(_scheduler_plugins(raw), Registry())
        if missing:
            line = _one_error_line(err)
            assert code == 2 and any(m in line for m in missing) and "known plugins" in line, err
            return
        assert code == 0, err
        _check_old_version_warning(raw, err)
        result = json.loads(out)
        # Used: the pending pod went through the configuration's profile (it names the default scheduler's
        # profile or, when the file has none, is reported unschedulable by it).
        assert any(p["pod"] == "default/web-pending" for p in result["placements"]), result
        return

    if kind in DESCHEDULER_KINDS or (kind in ("unreadable", "none") and "desched" in name):
        cluster = _base_cluster(tmp_path, classes=_priority_classes(raw))
        code, out, err = _run(capsys, "deschedule", "--snapshot", cluster, "--policy", str(path), "--now", NOW,
                              "-o", "json")
        if name in INVALID:
            assert code == 2 and INVALID[name] in _one_error_line(err), err
            return
        registry = descheduler_registry()
        missing = [m for m in _missing(_descheduler_plugins(raw), registry) if m not in CONFIG_ONLY_PLUGINS.values()]
        if missing or name in CONFIG_ONLY_PLUGINS:
            line = _one_error_line(err)
            assert code == 2 and any(m in line for m in missing + [CONFIG_ONLY_PLUGINS.get(name, "")]), err
            assert "known plugins" in line, err
            return
        assert code == 0, err
        _check_old_version_warning(raw, err)
        result = json.loads(out)
        assert set(result["utilization"]) == {f"node-{i}" for i in range(4)}, result
        return

    if kind == "KubeletConfiguration" or name in INVALID and "node-pressure" in name:
        code, out, err = _run(capsys, "node-pressure", "--kubelet-config", str(path), "--now", NOW, "-o", "json")
        if name in INVALID:
            assert code == 2 and INVALID[name] in _one_error_line(err), err
            return
        assert code == 0, err
        assert json.loads(out)["thresholds"], "the kubelet configuration's eviction thresholds were not read"
        return

    if kind == "none" and name.startswith("lw__"):
        # load-watcher's schema example keeps nodes directly under data, not under data.NodeMetricsMap.
        code, out, err = _run(capsys, "schedule", "--snapshot", _base_cluster(tmp_path), "--metrics", str(path),
                              "--now", NOW, "-o", "json")
        assert code == 0, err
        assert "NodeMetricsMap" in err and "node-1" in err, err
        return

    # Cluster objects: a snapshot on their own, or beside the test cluster's nodes.
    code, out, err = _run(capsys, "qos", "--snapshot", str(path), "--now", NOW, "-o", "json")
    if name in INVALID:
        assert code == 2 and INVALID[name] in _one_error_line(err), err
        return
    assert code == 0, err
    if name in NOT_READ:
        assert "not read" in err and NOT_READ[name] in err, err
        return
    assert "not read" not in err, err
    pods = json.loads(out)["pods"]
    objects = [d for d in docs if isinstance(d, dict)]
    if kind == "Pod":
        for o in objects:
            assert f"{o['metadata'].get('namespace') or 'default'}/{o['metadata']['name']}" in pods, pods
    elif kind in WORKLOADS:
        o = objects[0]
        ns = o["metadata"].get("namespace") or "default"
        made = [k for k in pods if k.startswith(f"{ns}/{o['metadata']['name']}-")]
        spec = o.get("spec") or {}
        if kind == "DaemonSet":
            assert made == [], "a DaemonSet alone has no node to run on"
        elif kind == "Job":
            assert len(made) == min(spec.get("parallelism", 1), spec.get("completions", 1)), pods
        else:
            assert len(made) == spec.get("replicas", 1), pods
    elif kind == "Node":
        # Used: every node of the file is considered for a pod.
        pod = _pod("probe", None, "10m")
        pod["metadata"]["ownerReferences"] = []
        snap = tmp_path / "with-pod.yaml"
        snap.write_text(yaml.safe_dump_all([d for d in docs if isinstance(d, dict)] + [pod]))
        code, out, err = _run(capsys, "explain", "--snapshot", str(snap), "--pod", "default/probe", "--now", NOW,
                              "-o", "json")
        assert code == 0, err
        assert set(json.loads(out)["nodes"]) == {o["metadata"]["name"] for o in objects}


def test_realworld_workloads_become_pods_and_are_placed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """open-simulator's demo cluster and its applications in one snapshot: every workload's pods are made as its
    controller makes them (a Deployment's through its ReplicaSet, a StatefulSet's by ordinal, a DaemonSet's one per
    eligible node, pinned there) and the scheduler places them."""
    files = sorted(DOCS.glob("os__example_cluster_demo_1_*.yaml"))
    files += [p for p in sorted(DOCS.glob("os__example_application_simple_*.yaml")) if "calico" not in p.name]
    docs = [d for f in files for d in read_documents(f) if isinstance(d, dict)]
    snap = tmp_path / "demo.yaml"
    snap.write_text(yaml.safe_dump_all(docs))
    code, out, err = _run(capsys, "schedule", "--snapshot", str(snap), "--now", NOW, "-o", "json")
    assert code == 0, err
    placed = {p["pod"]: p["node"] for p in json.loads(out)["placements"]}
    nodes = {d["metadata"]["name"] for d in docs if d.get("kind") == "Node"}

    def made(prefix: str) -> list[str]:
        return sorted(k for k in placed if k.split("/", 1)[1].startswith(prefix))

    assert len(made("busybox-deploy-")) == 4  # replicas: 4, named <deployment>-<pod-template-hash>-<suffix>
    assert made("busybox-sts-new-") == sorted(f"simple/busybox-sts-new-{i}" for i in range(8))
    assert len(made("pi-")) == 1
    for ds in ("coredns-", "kube-proxy-master-", "kube-proxy-worker-", "busybox-ds-"):
        pods = made(ds)
        bound = [placed[p] for p in pods if placed[p] is not None]
        assert len(set(bound)) == len(bound), f"{ds} pods share a node: {bound}"
        assert set(bound) <= nodes
    assert made("kube-proxy-worker-") and made("kube-proxy-master-")
    assert len(made("kube-proxy-master-")) + len(made("kube-proxy-worker-")) == len(nodes)
