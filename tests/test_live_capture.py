"""`kubesched capture` through the command line, against the API server test double."""

from __future__ import annotations

import contextlib
import io
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.api.snapshot import iter_objects, load_snapshot, read_documents
from kubesched.errors import RemoteError
from kubesched.live.capture import CAPTURED
from kubesched.live.client import KubeClient, ResourceType, RetryPolicy, load_configuration
from tests.kube_apiserver_double import KubeAPIServerDouble
from tests.test_live_double import kubectl, node, pod


def run(*args: str) -> tuple[int, str, str]:
    from kubesched.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def owned(kind: str, name: str, uid: str) -> list[dict[str, Any]]:
    api = "batch/v1" if kind == "Job" else ("v1" if kind == "ReplicationController" else "apps/v1")
    return [{"apiVersion": api, "kind": kind, "name": name, "uid": uid, "controller": True, "blockOwnerDeletion": True}]


def cluster() -> list[dict[str, Any]]:
    """One object of every kind capture reads (some with managedFields), and metrics."""
    mf = [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {}}]
    tmpl = {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "250m",
                                                                                                 "memory": "256Mi"}}}]}}
    sel = {"matchLabels": {"app": "web"}}
    objs: list[dict[str, Any]] = [
        node("n1"), node("n2"),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps", "managedFields": mf}},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": "apps"},
         "spec": {"minAvailable": 1, "selector": sel}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "apps"},
         "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}},
        {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc", "namespace": "apps"},
         "spec": {"replicas": 0, "selector": {"app": "rc"}, "template": {**tmpl, "metadata": {"labels": {"app": "rc"}}}}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "apps", "uid": "d-uid"},
         "spec": {"replicas": 2, "selector": sel, "template": tmpl}},
        {"apiVersion": "apps/v1", "kind": "ReplicaSet",
         "metadata": {"name": "web-5f7b9", "namespace": "apps", "uid": "rs-uid",
                      "ownerReferences": owned("Deployment", "web", "d-uid")},
         "spec": {"replicas": 2, "selector": sel, "template": tmpl}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "apps"},
         "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "db"}}, "serviceName": "db",
                  "template": {**tmpl, "metadata": {"labels": {"app": "db"}}}}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "apps"},
         "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {**tmpl, "metadata": {"labels": {"app": "agent"}}}}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once", "namespace": "apps"},
         "spec": {"template": {**tmpl, "spec": {**tmpl["spec"], "restartPolicy": "Never"}}}},
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"},
         "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                  "hostPath": {"path": "/tmp"}}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "apps"},
         "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                  "storageClassName": "fast", "volumeName": "pv1"}, "status": {"phase": "Bound"}},
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"},
         "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer"},
        {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "n1"},
         "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 25}}]}},
        {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "ebs.csi.aws.com"},
         "spec": {"attachRequired": True}},
        {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity", "metadata": {"name": "cap", "namespace": "apps"},
         "storageClassName": "fast", "capacity": "100Gi"},
        {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics", "metadata": {"name": "n1"},
         "timestamp": "2024-01-01T00:00:00Z", "window": "20s", "usage": {"cpu": "1500m", "memory": "3Gi"}},
        {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
         "metadata": {"name": "web-5f7b9-aaaaa", "namespace": "apps"},
         "timestamp": "2024-01-01T00:00:00Z", "window": "20s",
         "containers": [{"name": "c", "usage": {"cpu": "400m", "memory": "300Mi"}}]},
    ]
    for i, n in enumerate(["aaaaa", "bbbbb"]):
        p = pod(f"web-5f7b9-{n}", f"n{i + 1}", ns="apps")
        p["metadata"]["ownerReferences"] = owned("ReplicaSet", "web-5f7b9", "rs-uid")
        p["metadata"]["managedFields"] = mf
        p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "250m", "memory": "256Mi"}}
        objs.append(p)
    objs.append(pod("pending", ns="apps", phase="Pending", ready=False))
    objs.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token", "namespace": "apps"},
                 "data": {"t": "c2VjcmV0"}})
    return objs


@pytest.fixture()
def api(tmp_path: Path) -> Iterator[KubeAPIServerDouble]:
    with KubeAPIServerDouble() as server:
        server.add(cluster())
        server.kubeconfig(tmp_path / "kubeconfig")
        yield server


def test_capture_round_trips_every_kind_with_kubectl(api: KubeAPIServerDouble, tmp_path: Path) -> None:
    out = tmp_path / "cap"
    code, stdout, err = run("capture", "--kubeconfig", str(tmp_path / "kubeconfig"), "--out", str(out),
                            "--page-size", "2", "--no-progress", "--json")
    assert code == 0, err
    capture_requests = list(api.requests)
    summary = json.loads(stdout)
    assert summary["objects"]["Pod"] == 3 and summary["objects"]["Namespace"] == 5
    assert summary["metrics"] == {"NodeMetrics": 1, "PodMetrics": 1}
    assert sorted(summary["files"]) == ["scenario.yaml", "snapshot.yaml"]
    docs = read_documents(out / "snapshot.yaml")
    assert len(docs) == 1 and docs[0]["kind"] == "List"
    snap = [o for o in docs[0]["items"] if not o["kind"].endswith("List")]
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for o in snap:
        by_kind.setdefault(o["kind"], []).append(o)
    for rt in CAPTURED:
        listed = json.loads(kubectl(tmp_path, "get", f"{rt.plural}.{rt.group}" if rt.group else rt.plural, "-A",
                                    "-o", "json").stdout)["items"]
        for o in listed:
            o["metadata"].pop("managedFields", None)
        # Object for object, field for field: what kubectl prints is what the snapshot holds.
        assert by_kind.get(rt.kind, []) == listed, rt.kind
        assert listed or rt.kind in ("Secret",), f"the test cluster has no {rt.kind}"
    assert "Secret" not in by_kind and not any("secrets" in r.path for r in api.requests)
    assert not any("managedFields" in o["metadata"] for o in snap)
    # The metrics lists as `kubectl get --raw` returns them (items without kind), nested in the List.
    raw_nodes = json.loads(kubectl(tmp_path, "get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes").stdout)
    nested = [o for o in docs[0]["items"] if o["kind"] == "NodeMetricsList"]
    assert nested == [raw_nodes] and "kind" not in raw_nodes["items"][0]
    # Paged: every LIST of pods asked for 2 at a time and followed the continue tokens.
    pod_lists = [r for r in capture_requests if r.path == "/api/v1/pods"]
    assert [r.query.get("limit") for r in pod_lists] == ["2", "2"] and "continue" in pod_lists[1].query
    # Every command reads it: the loaders accept the kind-less metrics items.
    loaded = load_snapshot(out / "snapshot.yaml")
    assert len(loaded.pods) == 3 and len(loaded.of_kind("PodMetrics")) == 1
    code, stdout, err = run("deschedule", "--snapshot", str(out / "snapshot.yaml"), "--metrics",
                            str(out / "snapshot.yaml"), "--policy", str(_policy(tmp_path)), "-o", "json")
    assert code == 0, err
    # The scenario runs as written, with no editing.
    code, stdout, err = run("simulate", str(out / "scenario.yaml"), "--json", "--no-progress", "--no-html",
                            "--duration", "10m")
    assert code == 0, err
    assert [v["name"] for v in json.loads(stdout)["variants"]] == ["baseline", "lnu-usage"]


def _policy(tmp_path: Path) -> Path:
    p = tmp_path / "policy.yaml"
    p.write_text(yaml.safe_dump({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [
        {"name": "p", "pluginConfig": [{"name": "LowNodeUtilization", "args": {
            "thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50}, "metricsUtilization": {"metricsServer": True}}}],
         "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}]}))
    return p


def test_json_snapshot_by_flag(api: KubeAPIServerDouble, tmp_path: Path) -> None:
    code, _, err = run("capture", "--kubeconfig", str(tmp_path / "kubeconfig"), "--out", str(tmp_path / "c"),
                       "--format", "json", "--no-progress")
    assert code == 0, err
    doc = json.loads((tmp_path / "c" / "snapshot.json").read_text())
    assert doc["kind"] == "List" and sum(1 for o in doc["items"] if o["kind"] == "Pod") == 3
    assert "snapshot: snapshot.json" in (tmp_path / "c" / "scenario.yaml").read_text()


def test_capture_retries_429_500_and_dropped_connections(api: KubeAPIServerDouble, tmp_path: Path) -> None:
    api.faults.fail(429, times=2, path="^/api/v1/pods$", retry_after=0)
    api.faults.fail(500, times=1, path="^/api/v1/nodes$")
    api.faults.drop(times=1, path="^/apis/apps/v1/deployments$")
    code, stdout, err = run("capture", "--kubeconfig", str(tmp_path / "kubeconfig"), "--out", str(tmp_path / "c"),
                            "--no-progress", "-o", "json")
    assert code == 0, err
    s = json.loads(stdout)
    assert s["retries"] == 4 and s["objects"]["Pod"] == 3 and s["objects"]["Deployment"] == 1
    assert sum(1 for r in api.requests if r.path == "/api/v1/pods") == 3


def test_a_server_that_keeps_failing_is_exit_1_and_leaves_nothing(api: KubeAPIServerDouble, tmp_path: Path) -> None:
    api.faults.fail(503, times=-1, path="/jobs$")
    code, stdout, err = run("capture", "--kubeconfig", str(tmp_path / "kubeconfig"), "--out", str(tmp_path / "c"),
                            "--no-progress", "--max-retries", "2")
    assert code == 1 and stdout == ""
    assert err.count("\n") == 1 and "failed after 3 attempts: " in err and "503" in err
    assert not (tmp_path / "c").exists() and not list(tmp_path.glob(".capture-*"))


def test_forbidden_is_exit_1_with_what_rbac_is_needed(api: KubeAPIServerDouble, tmp_path: Path) -> None:
    api.faults.fail(403, times=1, path="/nodes$")
    code, _, err = run("capture", "--kubeconfig", str(tmp_path / "kubeconfig"), "--out", str(tmp_path / "c"),
                       "--no-progress")
    assert code == 1 and "forbidden" in err and "deploy/capture-clusterrole.yaml" in err and err.count("\n") == 1


def test_unreachable_server_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kc = tmp_path / "kubeconfig"
    kc.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "x",
                                  "clusters": [{"name": "x", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                                  "users": [{"name": "x", "user": {}}],
                                  "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}]}))
    code, stdout, err = run("capture", "--kubeconfig", str(kc), "--out", str(tmp_path / "c"), "--no-progress",
                            "--max-retries", "1")
    assert code == 1 and stdout == ""
    assert err == f"error: http://127.0.0.1:{port}: GET /api/v1/namespaces failed after 2 attempts: connection refused\n"
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize(("args", "expected"), [
    (["--kubeconfig", "{tmp}/missing"], "{tmp}/missing: cannot read kubeconfig: No such file or directory"),
    (["--kubeconfig", "{tmp}/bad.yaml"], "{tmp}/bad.yaml: invalid kubeconfig: invalid YAML"),
    (["--kubeconfig", "{tmp}/kubeconfig", "--context", "prod"], "field --context: no context 'prod' in the kubeconfig; "
                                                                   "it has: double"),
    (["--kubeconfig", "{tmp}/kubeconfig", "--since", "yesterday"], "field --since: expected a duration"),
    (["--kubeconfig", "{tmp}/kubeconfig", "--since", "1h", "--step", "2h"], "field --step: the step (2h) is longer"),
    (["--kubeconfig", "{tmp}/kubeconfig", "--prometheus", "localhost:9090"], "field --prometheus: expected the "
                                                                            "Prometheus server's http(s):// address"),
    (["--kubeconfig", "{tmp}/kubeconfig", "--page-size", "0"], "field --page-size"),
    (["--kubeconfig", "{tmp}/kubeconfig", "--format", "xml"], "Invalid value for '--format'"),
])
def test_bad_flags_and_kubeconfigs_exit_2(api: KubeAPIServerDouble, tmp_path: Path, args: list[str],
                                          expected: str) -> None:
    (tmp_path / "bad.yaml").write_text("clusters: [\n")
    code, stdout, err = run("capture", *[a.format(tmp=tmp_path) for a in args], "--out", str(tmp_path / "c"),
                            "--no-progress")
    assert code == 2 and stdout == ""
    assert expected.format(tmp=tmp_path) in err and "Traceback" not in err
    assert not (tmp_path / "c").exists() and not api.requests


def test_kubeconfig_rules_and_in_cluster_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kubernetes.config import incluster_config

    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(Exception, match="no kubeconfig"):
        load_configuration()
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("sa-token")
    ca.write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    cfg, where = load_configuration()
    assert where == "in-cluster service account" and cfg.host == "https://10.0.0.1:443"
    assert cfg.api_key["BearerToken"] == "bearer sa-token"


def test_tokens_from_the_kubeconfig_are_sent_and_a_rejected_one_is_exit_1(tmp_path: Path) -> None:
    with KubeAPIServerDouble(token="s3cret") as server:
        server.add(node("n1"))
        server.kubeconfig(tmp_path / "kubeconfig")
        code, stdout, err = run("capture", "--kubeconfig", str(tmp_path / "kubeconfig"), "--out", str(tmp_path / "c"),
                                "--no-progress", "--json")
        assert code == 0, err and json.loads(stdout)["objects"]["Node"] == 1
        server.token = "rotated"
        code, _, err = run("capture", "--kubeconfig", str(tmp_path / "kubeconfig"), "--out", str(tmp_path / "d"),
                           "--no-progress")
        assert code == 1 and "rejected the credentials (401 Unauthorized)" in err


def test_client_pages_fall_back_to_a_full_list_when_the_continue_token_expires(api: KubeAPIServerDouble,
                                                                               tmp_path: Path) -> None:
    client = KubeClient.connect(str(tmp_path / "kubeconfig"), retry=RetryPolicy(attempts=1))
    rt = ResourceType("", "v1", "namespaces", "Namespace", False)
    pages = client.list_pages(rt, limit=2)
    first = next(pages)
    assert len(first.items) == 2 and first.continue_token
    api.store.expire_snapshots()
    rest = list(pages)
    # As client-go's pager: one full LIST (no limit) replaces the rest.
    assert len(rest) == 1 and len(rest[0].items) == 5
    assert "limit" not in api.requests[-1].query
    with pytest.raises(RemoteError, match="never reads Secrets"):
        client.get("/api/v1/namespaces/apps/secrets/token")
    client.close()


def test_client_watch_resumes_and_reports_410(api: KubeAPIServerDouble, tmp_path: Path) -> None:
    from kubesched.live.client import ConnectionLost, ResourceExpired

    client = KubeClient.connect(str(tmp_path / "kubeconfig"))
    rt = ResourceType("", "v1", "pods", "Pod", True)
    items, rv = client.list(rt, "apps")
    assert len(items) == 3
    api.add(pod("late", "n1", ns="apps"))
    api.faults.drop_watch_after(1, path="/pods$")
    api.add(pod("later", "n1", ns="apps"))
    seen = []
    with pytest.raises(ConnectionLost):
        for ev in client.watch(rt, rv, "apps", timeout_seconds=2):
            seen.append(ev)
    assert [e.object["metadata"]["name"] for e in seen] == ["late"]
    # Resume from the last resourceVersion seen: nothing lost, nothing twice.
    rest = [e for e in client.watch(rt, seen[-1].resource_version, "apps", timeout_seconds=1) if e.type != "BOOKMARK"]
    assert [(e.type, e.object["metadata"]["name"]) for e in rest] == [("ADDED", "later")]
    api.store.compact()
    with pytest.raises(ResourceExpired):
        list(client.watch(rt, rv, "apps", timeout_seconds=1))
    client.close()


def test_snapshot_loader_accepts_items_without_kind(tmp_path: Path) -> None:
    f = tmp_path / "pods.json"
    f.write_text(json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": [pod("a", "n1")]}))
    # The typed list's kind and apiVersion go to its items, whatever they lacked.
    doc = read_documents(f)
    doc[0]["items"][0].pop("kind")
    doc[0]["items"][0].pop("apiVersion")
    assert [(o["kind"], o["apiVersion"]) for o in iter_objects(doc, str(f))] == [("Pod", "v1")]


def test_the_clusterrole_in_deploy_grants_exactly_what_capture_reads() -> None:
    from kubesched.live.capture import METRICS

    doc = yaml.safe_load((Path(__file__).parent.parent / "deploy" / "capture-clusterrole.yaml").read_text())
    granted = {(g, r) for rule in doc["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert all(rule["verbs"] == ["get", "list"] for rule in doc["rules"])
    assert granted == {(rt.group, rt.plural) for rt in CAPTURED + METRICS}
    assert not any(r in ("secrets", "configmaps") for _, r in granted)
