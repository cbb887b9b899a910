"""The Kubernetes API server test double speaks the real protocol: Debian's kubectl and the official Python
client work against it unchanged, and it answers as the real server does for the verbs kubesched uses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from tests.kube_apiserver_double import KubeAPIServerDouble


def require_kubectl() -> str:
    path = shutil.which("kubectl")
    if path:
        return path
    msg = "kubectl is not installed: install Debian's kubernetes-client package (scripts/install-system-deps.sh does)"
    if os.environ.get("CI"):
        pytest.fail(msg + " — required under CI")
    pytest.skip(msg)


def node(name: str, cpu: str = "4") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                       "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, node_name: str = "", ns: str = "default", labels: dict[str, str] | None = None,
        phase: str = "Running", ready: bool = True) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if ready:
        status["conditions"] = [{"type": "Ready", "status": "True"}]
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels or {"app": "web"}}, "spec": spec,
            "status": status}


@pytest.fixture()
def api(tmp_path: Path) -> Iterator[KubeAPIServerDouble]:
    with KubeAPIServerDouble(bookmark_interval=0.2) as server:
        server.kubeconfig(tmp_path / "kubeconfig")
        yield server


@pytest.fixture()
def v1(api: KubeAPIServerDouble, tmp_path: Path) -> Iterator[k8s_client.CoreV1Api]:
    c = k8s_config.new_client_from_config(str(tmp_path / "kubeconfig"))
    yield k8s_client.CoreV1Api(c)
    c.close()


def kubectl(tmp_path: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    exe = require_kubectl()
    return subprocess.run([exe, "--kubeconfig", str(tmp_path / "kubeconfig"), "--cache-dir", str(tmp_path / "kcache"),
                           *args], capture_output=True, text=True, timeout=60, check=check)


# ---------------------------------------------------------------- kubectl


def test_kubectl_gets_creates_and_deletes(api: KubeAPIServerDouble, tmp_path: Path) -> None:
    api.add(node("n1"), node("n2"), pod("web-1", "n1"))
    out = kubectl(tmp_path, "get", "nodes", "-o", "name").stdout.split()
    assert out == ["node/n1", "node/n2"]
    manifest = tmp_path / "p.yaml"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: made, labels: {app: made}}\n"
                        "spec: {containers: [{name: c, image: nginx, resources: {requests: {cpu: 100m}}}]}\n")
    # The double serves no OpenAPI schema: kubectl's client-side validation is turned off (documented).
    assert "pod/made created" in kubectl(tmp_path, "create", "-f", str(manifest), "--validate=false").stdout
    got = json.loads(kubectl(tmp_path, "get", "pod", "made", "-o", "json").stdout)
    # The API server's defaulting and admission happened: a default scheduler, priority 0, tolerations.
    assert got["spec"]["schedulerName"] == "default-scheduler" and got["spec"]["priority"] == 0
    assert got["status"]["phase"] == "Pending" and got["metadata"]["uid"]
    again = kubectl(tmp_path, "create", "-f", str(manifest), "--validate=false", check=False)
    assert again.returncode == 1 and 'pods "made" already exists' in again.stderr
    assert 'pod "made" deleted' in kubectl(tmp_path, "delete", "pod", "made").stdout
    missing = kubectl(tmp_path, "get", "pod", "made", check=False)
    assert missing.returncode == 1 and 'pods "made" not found' in missing.stderr
    # Paged LIST as kubectl does it (--chunk-size), and label selectors.
    for i in range(2, 8):
        api.add(pod(f"web-{i}", "n2"))
    listed = kubectl(tmp_path, "get", "pods", "--chunk-size=2", "-o", "name", "-v=6")
    assert listed.stdout.split() == [f"pod/web-{i}" for i in range(1, 8)]
    assert listed.stderr.count("limit=2") >= 4 and "continue=" in listed.stderr
    assert kubectl(tmp_path, "get", "pods", "-l", "app!=web", "-o", "name").stdout.strip() == ""


def test_kubectl_sees_a_missing_namespace_as_the_real_server_says(api: KubeAPIServerDouble, tmp_path: Path) -> None:
    manifest = tmp_path / "p.json"
    manifest.write_text(json.dumps(pod("x", ns="nowhere")))
    res = kubectl(tmp_path, "create", "-f", str(manifest), "--validate=false", check=False)
    assert res.returncode == 1 and 'namespaces "nowhere" not found' in res.stderr


# ---------------------------------------------------------------- the official Python client


def test_python_client_lists_in_pages_and_watches_with_bookmarks(api: KubeAPIServerDouble,
                                                                 v1: k8s_client.CoreV1Api) -> None:
    api.add([pod(f"p{i}", "n1") for i in range(5)])
    first = v1.list_namespaced_pod("default", limit=2)
    assert [p.metadata.name for p in first.items] == ["p0", "p1"]
    assert first.metadata.remaining_item_count == 3 and first.metadata._continue
    # A write between pages does not show up: the pages come from one consistent snapshot.
    api.add(pod("p00", "n1"))
    second = v1.list_namespaced_pod("default", limit=2, _continue=first.metadata._continue)
    assert [p.metadata.name for p in second.items] == ["p2", "p3"]
    rv = first.metadata.resource_version

    def later() -> None:
        time.sleep(0.3)
        api.store.delete(api.resource("Pod"), "default", "p1")

    threading.Thread(target=later).start()
    events = []
    for ev in k8s_watch.Watch().stream(v1.list_namespaced_pod, "default", resource_version=rv,
                                       allow_watch_bookmarks=True, timeout_seconds=2):
        events.append((ev["type"], ev["raw_object"]["metadata"].get("name"), ev["raw_object"]["metadata"]["resourceVersion"]))
    kinds = [e[0] for e in events]
    # Everything after rv, in order: the pod added between the pages, the deletion; bookmarks in between.
    assert [e[:2] for e in events if e[0] != "BOOKMARK"] == [("ADDED", "p00"), ("DELETED", "p1")]
    assert "BOOKMARK" in kinds
    rvs = [int(e[2]) for e in events]
    assert rvs == sorted(rvs)


def test_watch_from_a_compacted_version_is_410_gone(api: KubeAPIServerDouble, v1: k8s_client.CoreV1Api) -> None:
    api.add(pod("a", "n1"))
    rv = v1.list_namespaced_pod("default").metadata.resource_version
    api.add(pod("b", "n1"))
    api.store.compact()
    with pytest.raises(ApiException) as e:
        for _ in k8s_watch.Watch().stream(v1.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=2):
            pass
    assert e.value.status == 410 and "too old resource version" in str(e.value.reason)


def test_continue_token_of_an_expired_snapshot_is_410(api: KubeAPIServerDouble, v1: k8s_client.CoreV1Api) -> None:
    api.add([pod(f"p{i}") for i in range(4)])
    first = v1.list_namespaced_pod("default", limit=2)
    api.store.expire_snapshots()
    with pytest.raises(ApiException) as e:
        v1.list_namespaced_pod("default", limit=2, _continue=first.metadata._continue)
    assert e.value.status == 410 and "continue parameter is too old" in e.value.body


# ---------------------------------------------------------------- writes for live mode


def test_binding_and_its_409(api: KubeAPIServerDouble, v1: k8s_client.CoreV1Api) -> None:
    api.add(node("n1"), pod("p", phase="Pending", ready=False))
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}}
    api_client = v1.api_client
    req = api_client.param_serialize("POST", "/api/v1/namespaces/default/pods/p/binding", body=body,
                                     header_params={"Content-Type": "application/json"}, auth_settings=["BearerToken"])
    resp = api_client.call_api(*req)
    resp.read()
    assert resp.status == 201
    got = v1.read_namespaced_pod("p", "default")
    assert got.spec.node_name == "n1"
    assert any(c.type == "PodScheduled" and c.status == "True" for c in got.status.conditions)
    resp = api_client.call_api(*api_client.param_serialize(
        "POST", "/api/v1/namespaces/default/pods/p/binding", body={**body, "target": {"name": "n2"}},
        header_params={"Content-Type": "application/json"}))
    data = json.loads(resp.read())
    assert resp.status == 409 and data["reason"] == "Conflict"
    assert data["message"] == 'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "n1"'


def _evict(v1: k8s_client.CoreV1Api, name: str) -> tuple[int, dict[str, Any]]:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}}
    c = v1.api_client
    resp = c.call_api(*c.param_serialize("POST", f"/api/v1/namespaces/default/pods/{name}/eviction", body=body,
                                         header_params={"Content-Type": "application/json"}))
    return resp.status, json.loads(resp.read())


def test_eviction_respects_the_disruption_budget(api: KubeAPIServerDouble, v1: k8s_client.CoreV1Api) -> None:
    api.add([pod(f"w{i}", "n1") for i in range(3)])
    api.add({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": "default"},
             "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})
    api.sync_pdbs()
    assert _evict(v1, "w0")[0] == 201
    pdb = api.store.get(api.resource("PodDisruptionBudget"), "default", "web")
    assert pdb["status"]["currentHealthy"] == 2 and pdb["status"]["disruptionsAllowed"] == 0
    code, status = _evict(v1, "w1")
    assert code == 429 and status["reason"] == "TooManyRequests"
    assert status["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert status["details"]["causes"] == [{"reason": "DisruptionBudget",
                                            "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}]
    assert {p.metadata.name for p in v1.list_namespaced_pod("default").items} == {"w1", "w2"}
    # A pending pod is deleted without asking the budget, as upstream.
    api.add(pod("w9", phase="Pending", ready=False))
    assert _evict(v1, "w9")[0] == 201


def test_leases_use_optimistic_concurrency(api: KubeAPIServerDouble, tmp_path: Path) -> None:
    c = k8s_config.new_client_from_config(str(tmp_path / "kubeconfig"))
    coord = k8s_client.CoordinationV1Api(c)
    lease = k8s_client.V1Lease(metadata=k8s_client.V1ObjectMeta(name="kubesched", namespace="kube-system"),
                               spec=k8s_client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15))
    created = coord.create_namespaced_lease("kube-system", lease)
    created.spec.holder_identity = "b"
    updated = coord.replace_namespaced_lease("kubesched", "kube-system", created)
    assert updated.spec.holder_identity == "b"
    created.spec.holder_identity = "c"  # still carries the old resourceVersion
    with pytest.raises(ApiException) as e:
        coord.replace_namespaced_lease("kubesched", "kube-system", created)
    assert e.value.status == 409 and "the object has been modified" in e.value.body
    # Events are plain objects; status patches touch only status.
    v1 = k8s_client.CoreV1Api(c)
    api.add(node("n1"))
    v1.patch_node_status("n1", {"status": {"conditions": [{"type": "MemoryPressure", "status": "True"}]}})
    got = v1.read_node("n1")
    assert {x.type for x in got.status.conditions} == {"Ready", "MemoryPressure"}
    v1.create_namespaced_event("default", {"metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "name": "p"},
                                           "reason": "Scheduled", "message": "ok", "type": "Normal"})
    assert [e.reason for e in v1.list_namespaced_event("default").items] == ["Scheduled"]
    c.close()


def test_faults_can_be_injected(api: KubeAPIServerDouble, v1: k8s_client.CoreV1Api) -> None:
    api.add(pod("a", "n1"))
    api.faults.fail(500, times=1, path="/pods$")
    with pytest.raises(ApiException) as e:
        v1.list_namespaced_pod("default")
    assert e.value.status == 500
    assert [p.metadata.name for p in v1.list_namespaced_pod("default").items] == ["a"]
    api.faults.drop_watch_after(1, path="/pods$")
    api.add(pod("b", "n1"))
    seen = []
    with pytest.raises(urllib3.exceptions.ProtocolError, match="ended prematurely"):
        for ev in k8s_watch.Watch().stream(v1.list_namespaced_pod, "default", timeout_seconds=2):
            seen.append(ev["object"].metadata.name)
    assert seen == ["a"]  # the stream broke after one event, as a dropped connection does
