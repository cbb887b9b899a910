"""deploy/: the manifests are valid Kubernetes objects (the API's own schemas, strict), their configs load,
their command lines parse, and the RBAC grants exactly what the processes do."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import click
import kubernetes_validate
import pytest
import yaml

from kubesched.cli import main_group
from kubesched.config.descheduler_policy import load_descheduler_policy
from kubesched.config.scheduler_config import load_scheduler_config
from kubesched.descheduler.registry import default_registry
from kubesched.live.informer import CORE_KINDS

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
K8S_VERSION = "1.32.0"
MANIFESTS = ("scheduler.yaml", "descheduler.yaml", "capture-clusterrole.yaml")

READS = {(rt.group, rt.plural, v) for rt in CORE_KINDS for v in ("list", "watch")}
WRITES = {
    "scheduler.yaml": {("", "pods", "get"), ("", "pods", "delete"), ("", "pods/binding", "create"),
                       ("", "pods/status", "patch"), ("", "events", "create"), ("", "events", "patch"),
                       ("metrics.k8s.io", "nodes", "list"), ("metrics.k8s.io", "pods", "list")},
    "descheduler.yaml": {("", "pods/eviction", "create"), ("", "events", "create"), ("", "events", "patch"),
                         ("metrics.k8s.io", "nodes", "list"), ("metrics.k8s.io", "pods", "list")},
}
LEASES = {"scheduler.yaml": "kubesched-scheduler", "descheduler.yaml": "descheduler"}


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


@pytest.mark.parametrize("name", MANIFESTS)
def test_manifests_validate_against_the_kubernetes_schemas(name: str) -> None:
    docs = documents(name)
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_the_validator_rejects_a_broken_manifest() -> None:
    doc = documents("scheduler.yaml")[-1]
    broken = {**doc, "spec": {**doc["spec"], "replicas": "two"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def granted(docs: list[dict[str, Any]], kind: str) -> set[tuple[str, str, str]]:
    out = set()
    for role in of_kind(docs, kind):
        for rule in role["rules"]:
            for g in rule["apiGroups"]:
                for r in rule["resources"]:
                    for v in rule["verbs"]:
                        out.add((g, r, v))
    return out


@pytest.mark.parametrize("name", ["scheduler.yaml", "descheduler.yaml"])
def test_rbac_grants_exactly_the_verbs_used(name: str) -> None:
    docs = documents(name)
    assert granted(docs, "ClusterRole") == READS | WRITES[name]
    lease_rules = [r for role in of_kind(docs, "Role") for r in role["rules"]]
    assert {(v, tuple(r.get("resourceNames") or ())) for r in lease_rules for v in r["verbs"]} == {
        ("create", ()), ("get", (LEASES[name],)), ("update", (LEASES[name],))}
    sa = of_kind(docs, "ServiceAccount")[0]["metadata"]
    for binding in of_kind(docs, "ClusterRoleBinding") + of_kind(docs, "RoleBinding"):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]}]


def _load_policy(path: str) -> Any:
    return load_descheduler_policy(path, default_registry())


def live_command(name: str) -> click.Command:
    """The command `kubesched NAME` runs (its module imported as when it runs)."""
    cmd = main_group.get_command(click.Context(main_group), name)
    assert cmd is not None, name
    return cmd


@pytest.mark.parametrize("name,command,loader", [("scheduler.yaml", "scheduler", load_scheduler_config),
                                                 ("descheduler.yaml", "descheduler", _load_policy)])
def test_deployment_command_lines_parse_and_mounted_configs_load(name: str, command: str, loader: Any,
                                                                 tmp_path: Path) -> None:
    docs = documents(name)
    deploy = of_kind(docs, "Deployment")[0]
    pod = deploy["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == of_kind(docs, "ServiceAccount")[0]["metadata"]["name"]
    container = pod["containers"][0]
    args = container["args"]
    assert args[0] == command
    ctx = live_command(command).make_context(command, list(args[1:]))
    assert ctx.params["leader_elect"] is True
    assert ctx.params["port"] == container["ports"][0]["containerPort"]
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["port"] == ctx.params["port"]
    # The file the command reads is the ConfigMap key mounted where the flag points.
    flag = "config" if command == "scheduler" else "policy"
    path = Path(ctx.params[flag])
    mount = next(m for m in container["volumeMounts"] if str(path).startswith(m["mountPath"]))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    cm = next(c for c in of_kind(docs, "ConfigMap") if c["metadata"]["name"] == volume["configMap"]["name"])
    f = tmp_path / path.name
    f.write_text(cm["data"][path.name])
    loader(str(f))
    with pytest.raises(click.UsageError):
        live_command(command).make_context(command, [*args[1:], "--no-such-flag"])


def test_containerfile_installs_what_the_manifests_run() -> None:
    text = (DEPLOY / "Containerfile").read_text()
    for src in re.findall(r"^COPY (.+) \S+$", text, re.M):
        for part in src.split():
            assert (ROOT / part).exists(), part
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "'.[live]'" in text and any(d.startswith("prometheus-client") for d in extras["live"])
    image = re.search(r"-t (\S+) ", text)
    assert image is not None
    for name in ("scheduler.yaml", "descheduler.yaml"):
        assert of_kind(documents(name), "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["image"] == image[1]
