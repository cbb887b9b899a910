"""The API server's validation of the objects kubesched reads, with its wording.

Mirrors k8s.io/kubernetes `pkg/apis/core/validation/validation.go` (ValidateObjectMeta, ValidatePodSpec's
containers, ports, resources and tolerations, ValidateNode, ValidatePriorityClass) and k8s.io/apimachinery
`pkg/util/validation` (IsDNS1123Subdomain/Label, qualified names, label values), for the fields kubesched
reads. Messages are rendered like `field.Error.ErrorBody()`: `Required value`, `Invalid value: "x": ...`,
`Duplicate value: "x"`, `Unsupported value: "x": supported values: ...`.

Two kinds of problems, two treatments:

- values kubesched cannot compute with (a negative or too large quantity, a wrong type) are refused wherever
  they come from, by the parsers in `objects.py`;
- everything else here (names, containers required, requests above limits, ...) is returned as a list.
  Objects kubesched creates — pods of workloads it expands, `capacity` copies, scenario objects — are refused
  on any of them, as the API server refuses them on create. Objects read from a snapshot are stored objects
  that some API server already accepted (or upstream unit tests' fixtures, which bypass validation): they
  are reported as warnings and read as they are.

Beyond the API server, a node whose allocatable exceeds its capacity is reported: no kubelet reports one
(allocatable is capacity minus reservations).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kubesched.api.quantity import format_quantity, parse_quantity
from kubesched.errors import InputError

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE_FMT = "(" + LABEL_KEY_FMT + ")?"

_DNS1123_LABEL = re.compile("^" + DNS1123_LABEL_FMT + "$")
_DNS1123_SUBDOMAIN = re.compile("^" + DNS1123_SUBDOMAIN_FMT + "$")
_DNS1035_LABEL = re.compile("^" + DNS1035_LABEL_FMT + "$")
_LABEL_KEY = re.compile("^" + LABEL_KEY_FMT + "$")
_LABEL_VALUE = re.compile("^" + LABEL_VALUE_FMT + "$")

HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_PRIORITY_CLASS_PREFIX = "system-"

# helper.IsIntegerResourceName: these and every extended resource take whole numbers only.
_INTEGER_RESOURCES = frozenset({"pods", "services", "replicationcontrollers", "resourcequotas", "secrets",
                                "configmaps", "persistentvolumeclaims", "services.nodeports",
                                "services.loadbalancers"})


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}'" for e in examples)
    return f"{msg} (e.g. {shown}, regex used for validation is '{fmt}')"


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append(_max_len(253))
    if not _DNS1123_SUBDOMAIN.match(value):
        errs.append(_regex_error("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                                 "'-' or '.', and must start and end with an alphanumeric character",
                                 DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1123_label(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append(_max_len(63))
    if not _DNS1123_LABEL.match(value):
        if _DNS1123_SUBDOMAIN.match(value):
            errs.append("must not contain dots")
        else:
            errs.append(_regex_error("a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                                     "or '-', and must start and end with an alphanumeric character",
                                     DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1035_label(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append(_max_len(63))
    if not _DNS1035_LABEL.match(value):
        errs.append(_regex_error("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
                                 "with an alphabetic character, and end with an alphanumeric character",
                                 DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    """A label key (or any qualified name): an optional DNS subdomain prefix and '/', then a name."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return ["a valid label key " + _regex_error(
            "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
            "character", LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + _max_len(63))
    if not _LABEL_KEY.match(name):
        errs.append("name part " + _regex_error(
            "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
            "character", LABEL_KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_label_value(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append(_max_len(63))
    if not _LABEL_VALUE.match(value):
        errs.append(_regex_error("a valid label must be an empty string or consist of alphanumeric characters, '-', "
                                 "'_' or '.', and must start and end with an alphanumeric character",
                                 LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


# ---------------------------------------------------------------- field errors


@dataclass(frozen=True, slots=True)
class FieldError:
    """One field.Error: the path and the body upstream prints after it."""

    field: str
    body: str
    # Who would refuse it: the API server, or (allocatable above capacity) no kubelet would report it.
    by: str = "api-server"

    def __str__(self) -> str:
        return f"{self.field}: {self.body}"


def _quote(v: Any) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(path, "Required value" + (f": {detail}" if detail else ""))


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path, f"Invalid value: {_quote(value)}: {detail}")


def duplicate(path: str, value: Any) -> FieldError:
    return FieldError(path, f"Duplicate value: {_quote(value)}")


def not_supported(path: str, value: Any, supported: tuple[str, ...]) -> FieldError:
    return FieldError(path, f"Unsupported value: {_quote(value)}: supported values: "
                            + ", ".join(_quote(s) for s in supported))


# ---------------------------------------------------------------- objects

# The name rule of each kind (ValidateXName in validation.go and the apps/batch/policy/scheduling validations).
_DNS1035_KINDS = frozenset({"Service"})
_DNS1123_LABEL_KINDS = frozenset({"Namespace"})


def _d(raw: Any) -> Mapping[str, Any]:
    return raw if isinstance(raw, dict) else {}


def validate_object_meta(raw: Mapping[str, Any], kind: str, namespaced: bool, path: str = "metadata") -> list[FieldError]:
    meta = _d(raw.get("metadata")) if path == "metadata" else _d(raw)
    errs: list[FieldError] = []
    name = meta.get("name")
    if isinstance(name, str) and name:
        check = is_dns1035_label if kind in _DNS1035_KINDS else (
            is_dns1123_label if kind in _DNS1123_LABEL_KINDS else is_dns1123_subdomain)
        errs.extend(invalid(f"{path}.name", name, m) for m in check(name))
    ns = meta.get("namespace")
    if namespaced and isinstance(ns, str) and ns:
        errs.extend(invalid(f"{path}.namespace", ns, m) for m in is_dns1123_label(ns))
    errs.extend(validate_labels(meta.get("labels"), f"{path}.labels"))
    return errs


def validate_labels(labels: Any, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if not isinstance(labels, dict):
        return errs
    for k, v in labels.items():
        k = str(k)
        errs.extend(invalid(path, k, m) for m in is_qualified_name(k))
        value = "" if v is None else str(v) if not isinstance(v, bool) else ("true" if v else "false")
        errs.extend(invalid(path, value, m) for m in is_label_value(value))
    return errs


def _shown(v: Any, q: Fraction) -> str:
    """A quantity as the user wrote it (Quantity.String() keeps a canonical input's form)."""
    return v.strip() if isinstance(v, str) else format_quantity(q)


def _quantity(v: Any) -> Fraction | None:
    try:
        return parse_quantity(v)
    except ValueError:
        return None


def _is_extended(name: str) -> bool:
    # v1helper.IsExtendedResourceName: a domain-prefixed name outside kubernetes.io and not requests.*.
    if "/" not in name or name.startswith("requests."):
        return False
    prefix = name.split("/", 1)[0]
    return not (prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io"))


def _validate_resource_values(rl: Any, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for name, v in _d(rl).items():
        name = str(name)
        if not (name in _INTEGER_RESOURCES or _is_extended(name)):
            continue
        q = _quantity(v)
        if q is not None and q.denominator != 1:
            errs.append(invalid(f"{path}.{name}", _shown(v, q), "must be an integer"))
    return errs


def validate_resources(res: Any, path: str) -> list[FieldError]:
    """ValidateContainerResourceRequirements for the fields the scheduler reads (negative values are refused
    earlier, when they are parsed)."""
    r = _d(res)
    limits, requests = _d(r.get("limits")), _d(r.get("requests"))
    errs = _validate_resource_values(limits, f"{path}.limits") + _validate_resource_values(requests, f"{path}.requests")
    for name, v in requests.items():
        q = _quantity(v)
        if q is None:
            continue
        name = str(name)
        if name in limits:
            lim = _quantity(limits[name])
            if lim is None:
                continue
            if _is_extended(name) and q != lim:
                errs.append(invalid(f"{path}.requests", _shown(v, q),
                                    f"must be equal to {name} limit of {_shown(limits[name], lim)}"))
            elif q > lim:
                errs.append(invalid(f"{path}.requests", _shown(v, q),
                                    f"must be less than or equal to {name} limit of {_shown(limits[name], lim)}"))
        elif _is_extended(name):
            errs.append(required(f"{path}.limits", "Limit must be set for non overcommitable resources"))
    return errs


_PROTOCOLS = ("SCTP", "TCP", "UDP")


def _validate_container(c: Mapping[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    name = c.get("name")
    if not name:
        errs.append(required(f"{path}.name"))
    elif isinstance(name, str):
        errs.extend(invalid(f"{path}.name", name, m) for m in is_dns1123_label(name))
    for i, p in enumerate(c.get("ports") or [] if isinstance(c.get("ports"), list) else []):
        if not isinstance(p, dict):
            continue
        pp = f"{path}.ports[{i}]"
        cp = p.get("containerPort")
        if not cp:
            errs.append(required(f"{pp}.containerPort"))
        elif isinstance(cp, int) and not 1 <= cp <= 65535:
            errs.append(invalid(f"{pp}.containerPort", cp, "must be between 1 and 65535, inclusive"))
        hp = p.get("hostPort")
        if isinstance(hp, int) and hp != 0 and not 1 <= hp <= 65535:
            errs.append(invalid(f"{pp}.hostPort", hp, "must be between 1 and 65535, inclusive"))
        proto = p.get("protocol")
        if proto is not None and proto not in _PROTOCOLS:
            errs.append(not_supported(f"{pp}.protocol", proto, _PROTOCOLS))
    errs.extend(validate_resources(c.get("resources"), f"{path}.resources"))
    return errs


def validate_tolerations(tolerations: Any, path: str) -> list[FieldError]:
    """ValidateTolerations."""
    errs: list[FieldError] = []
    if not isinstance(tolerations, list):
        return errs
    for i, t in enumerate(tolerations):
        if not isinstance(t, dict):
            continue
        p = f"{path}[{i}]"
        key = str(t.get("key") or "")
        op = t.get("operator") or ""
        value = "" if t.get("value") is None else str(t.get("value"))
        if key:
            errs.extend(invalid(f"{p}.key", key, m) for m in is_qualified_name(key))
        if not key and op != "Exists":
            errs.append(invalid(f"{p}.operator", op, 'operator must be Exists when `key` is empty, which means '
                                                     '"match all values and all keys"'))
        if t.get("tolerationSeconds") is not None and t.get("effect") != "NoExecute":
            errs.append(invalid(f"{p}.effect", t.get("effect") or "",
                                "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        if op in ("", "Equal"):
            msgs = is_label_value(value)
            if msgs:
                errs.append(invalid(f"{p}.operator", value, ";".join(msgs)))
        elif op == "Exists" and value:
            errs.append(invalid(f"{p}.operator", value, "value must be empty when `operator` is 'Exists'"))
    return errs


def validate_pod_spec(spec: Any, path: str = "spec") -> list[FieldError]:
    """ValidatePodSpec, for what kubesched reads: containers (required, names unique and valid, ports,
    resources), init containers, overhead, tolerations."""
    s = _d(spec)
    errs: list[FieldError] = []
    containers = s.get("containers")
    if not isinstance(containers, list) or not containers:
        errs.append(required(f"{path}.containers"))
        containers = containers if isinstance(containers, list) else []
    names: set[str] = set()
    for key, items in (("initContainers", s.get("initContainers")), ("containers", containers)):
        for i, c in enumerate(items if isinstance(items, list) else []):
            if not isinstance(c, dict):
                continue
            cp = f"{path}.{key}[{i}]"
            errs.extend(_validate_container(c, cp))
            name = c.get("name")
            if isinstance(name, str) and name:
                if name in names:
                    errs.append(duplicate(f"{cp}.name", name))
                names.add(name)
    errs.extend(_validate_resource_values(s.get("overhead"), f"{path}.overhead"))
    errs.extend(validate_tolerations(s.get("tolerations"), f"{path}.tolerations"))
    return errs


def validate_pod(raw: Mapping[str, Any]) -> list[FieldError]:
    return validate_object_meta(raw, "Pod", True) + validate_pod_spec(raw.get("spec"))


def validate_node(raw: Mapping[str, Any]) -> list[FieldError]:
    """ValidateNode's names, taints and resources; and allocatable within capacity (what a kubelet reports)."""
    errs = validate_object_meta(raw, "Node", False)
    spec, status = _d(raw.get("spec")), _d(raw.get("status"))
    seen: set[tuple[str, str]] = set()
    for i, t in enumerate(spec.get("taints") or [] if isinstance(spec.get("taints"), list) else []):
        if not isinstance(t, dict):
            continue
        key, effect = str(t.get("key") or ""), str(t.get("effect") or "")
        errs.extend(invalid(f"spec.taints[{i}].key", key, m) for m in is_qualified_name(key) if key)
        value = "" if t.get("value") is None else str(t.get("value"))
        errs.extend(invalid(f"spec.taints[{i}].value", value, m) for m in is_label_value(value))
        if (key, effect) in seen:
            errs.append(duplicate(f"spec.taints[{i}]", f"{key}:{effect}"))
        seen.add((key, effect))
    capacity, allocatable = _d(status.get("capacity")), _d(status.get("allocatable"))
    errs.extend(_validate_resource_values(capacity, "status.capacity"))
    errs.extend(_validate_resource_values(allocatable, "status.allocatable"))
    for name, v in allocatable.items():
        if name not in capacity:
            continue
        a, c = _quantity(v), _quantity(capacity[name])
        if a is not None and c is not None and a > c:
            e = invalid(f"status.allocatable.{name}", _shown(v, a),
                        f"must be less than or equal to capacity {_shown(capacity[name], c)}")
            errs.append(FieldError(e.field, e.body, by="kubelet"))
    return errs


def validate_priority_class(raw: Mapping[str, Any]) -> list[FieldError]:
    errs = validate_object_meta(raw, "PriorityClass", False)
    name = str(_d(raw.get("metadata")).get("name") or "")
    value = raw.get("value")
    if isinstance(value, int) and not isinstance(value, bool) and value > HIGHEST_USER_DEFINABLE_PRIORITY \
            and not name.startswith(SYSTEM_PRIORITY_CLASS_PREFIX):
        errs.append(FieldError("value", f"Forbidden: maximum allowed value of a user defined priority is "
                                        f"{HIGHEST_USER_DEFINABLE_PRIORITY}"))
    policy = raw.get("preemptionPolicy")
    if policy is not None and policy not in ("Never", "PreemptLowerPriority"):
        errs.append(not_supported("preemptionPolicy", policy, ("Never", "PreemptLowerPriority")))
    return errs


def validate_pdb(raw: Mapping[str, Any]) -> list[FieldError]:
    errs = validate_object_meta(raw, "PodDisruptionBudget", True)
    spec = _d(raw.get("spec"))
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        errs.append(invalid("spec", "", "minAvailable and maxUnavailable cannot be both set"))
    for key in ("minAvailable", "maxUnavailable"):
        v = spec.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v < 0:
            errs.append(invalid(f"spec.{key}", v, "must be greater than or equal to 0"))
        if isinstance(v, str) and v.endswith("%"):
            try:
                pct = int(v[:-1])
            except ValueError:
                continue
            if not 0 <= pct <= 100:
                errs.append(invalid(f"spec.{key}", v, "must be a valid percent value between 0 and 100"))
    return errs


_VALIDATORS = {"Pod": validate_pod, "Node": validate_node, "PriorityClass": validate_priority_class,
               "PodDisruptionBudget": validate_pdb}
_NAMESPACED = frozenset({"Pod", "PodDisruptionBudget", "PersistentVolumeClaim", "Service", "ReplicaSet", "Deployment",
                         "StatefulSet", "DaemonSet", "Job", "CronJob", "ReplicationController", "ConfigMap"})


def validate(raw: Mapping[str, Any]) -> list[FieldError]:
    """Every problem the API server (or, for nodes, a kubelet) would have with this object."""
    kind = str(raw.get("kind") or "")
    fn = _VALIDATORS.get(kind)
    if fn is not None:
        return fn(raw)
    return validate_object_meta(raw, kind, kind in _NAMESPACED)


def check_create(raw: Mapping[str, Any], *, file: str | None = None, obj: str | None = None,
                 field_prefix: str | None = None) -> None:
    """Refuse an object kubesched is about to create, as the API server refuses it on create (first problem
    named, the number of others counted)."""
    problems = validate(raw)
    if not problems:
        return
    first = problems[0]
    more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    field = f"{field_prefix}.{first.field}" if field_prefix else first.field
    raise InputError(first.body + more, file=file, obj=obj, field=field)
