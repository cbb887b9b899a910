"""koordinator's own descheduler configuration (koord-descheduler `DeschedulerConfiguration`) → a DeschedulerPolicy.

koord-descheduler reads a `descheduler/v1alpha2` `DeschedulerConfiguration` — the same group/version as
kubernetes-sigs/descheduler's DeschedulerPolicy, but another kind and shape: profiles with `deschedule`,
`balance`, `evict` and `filter` plugin sets of `{name}` entries merged with koordinator's defaults (evict
and filter: MigrationController), a label-selector `nodeSelector`, and component settings (leader election,
client connection, descheduling interval) that a one-shot run does not need.

`convert` turns it into the DeschedulerPolicy document the policy loader validates:

- `balance`/`deschedule` plugins and their `pluginConfig` carry over (LowNodeLoad's v1alpha2 args are
  defaulted and converted by the plugin itself: the top-level thresholds become `__default_node_pool__`);
- the evictor — koordinator's `DefaultEvictor`, or its default `MigrationController` — becomes the
  policy's DefaultEvictor with the same pod filters. MigrationController's migration limits
  (maxMigratingPerNode, default 2; maxMigratingPerNamespace; maxMigratingGlobally) become the policy's
  eviction limits where the document sets none; its reservation-first migration jobs, arbitration and
  per-workload limits are not modelled;
- `nodeSelector` (a LabelSelector) becomes the policy's selector string; `maxNoOfPodsToEvict*` carry over.
"""

from __future__ import annotations

from typing import Any

from kubesched.api import fields
from kubesched.errors import InputError

API_VERSIONS = ("descheduler/v1alpha2",)
KIND = "DeschedulerConfiguration"
DEFAULT_PROFILE = "koord-descheduler"
MIGRATION_CONTROLLER = "MigrationController"
DEFAULT_EVICTOR = "DefaultEvictor"
EVICTORS = (MIGRATION_CONTROLLER, DEFAULT_EVICTOR)
POINTS = ("deschedule", "balance", "evict", "filter")
_TYPE_META = ("apiVersion", "kind")

# Component settings koord-descheduler reads that do not change what one cycle evicts.
_COMPONENT_KEYS = ("leaderElection", "clientConnection", "enableProfiling", "enableContentionProfiling",
                   "healthzBindAddress", "metricsBindAddress", "deschedulingInterval", "dryRun", "metadata")
_TOP_KEYS = (*_TYPE_META, *_COMPONENT_KEYS, "profiles", "nodeSelector", "maxNoOfPodsToEvictPerNode",
             "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal")

# MigrationController's pod filters that DefaultEvictor has under the same names.
_SHARED_FILTER_ARGS = ("evictFailedBarePods", "evictLocalStoragePods", "evictSystemCriticalPods", "ignorePvcPods",
                       "priorityThreshold", "labelSelector", "nodeFit", "nodeSelector")
_MIGRATION_ARGS = (*_SHARED_FILTER_ARGS, "dryRun", "maxConcurrentReconciles", "evictAllBarePods", "namespaces",
                   "skipEvictionGates", "maxMigratingGlobally", "maxMigratingPerNode", "maxMigratingPerNamespace",
                   "maxMigratingPerWorkload", "maxUnavailablePerWorkload", "skipCheckExpectedReplicas",
                   "objectLimiters", "defaultJobMode", "defaultJobTTL", "schedulerNames", "evictQPS", "evictBurst",
                   "evictionPolicy", "defaultDeleteOptions", "arbitrationArgs")
DEFAULT_MAX_MIGRATING_PER_NODE = 2


def _obj(raw: Any, field: str, allowed: tuple[str, ...] | None = None) -> dict[str, Any]:
    """An object of the document (None reads as empty); with `allowed`, other fields are errors."""
    return fields.Fields(raw, field, allowed=tuple(sorted(allowed)) if allowed is not None else None, meta=False).raw


def _names(raw: Any, field: str) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InputError("expected a list of {name} entries", field=field)
    out = []
    for i, item in enumerate(raw):
        name = item.get("name") if isinstance(item, dict) else item
        if not isinstance(name, str) or not name:
            raise InputError("expected a plugin {name}", field=f"{field}[{i}]")
        out.append(name)
    return out


def merge_plugin_set(default: list[str], enabled: list[str], disabled: list[str]) -> list[str]:
    """mergePluginSet: defaults not disabled (re-configured ones keep their place), then the other custom ones."""
    out: list[str] = []
    replaced: set[int] = set()
    if "*" not in disabled:
        for d in default:
            if d in disabled:
                continue
            if d in enabled:
                replaced.add(enabled.index(d))
            out.append(d)
    out.extend(n for i, n in enumerate(enabled) if i not in replaced)
    return out


def label_selector_string(raw: Any, field: str) -> str | None:
    """A metav1.LabelSelector as the selector string a DeschedulerPolicy takes."""
    if raw is None:
        return None
    d = _obj(raw, field, ("matchLabels", "matchExpressions"))
    parts: list[str] = []
    for k, v in sorted(_obj(d.get("matchLabels"), f"{field}.matchLabels").items()):
        parts.append(f"{k}={v}")
    for i, e in enumerate(d.get("matchExpressions") or []):
        f = f"{field}.matchExpressions[{i}]"
        ed = _obj(e, f, ("key", "operator", "values"))
        key, op, values = ed.get("key"), ed.get("operator"), [str(v) for v in ed.get("values") or []]
        if not isinstance(key, str) or not key:
            raise InputError("expected a non-empty key", field=f"{f}.key")
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
        else:
            raise InputError(f"expected one of In, NotIn, Exists, DoesNotExist, got {op!r}", field=f"{f}.operator")
    return ",".join(parts)


def _evictor_args(name: str, args: dict[str, Any], field: str, limits: dict[str, int]) -> dict[str, Any]:
    """DefaultEvictor args for koordinator's evictor; MigrationController's limits go to `limits`."""
    body = {k: v for k, v in args.items() if k not in _TYPE_META}
    if name == DEFAULT_EVICTOR:
        return body
    _obj(body, field, _MIGRATION_ARGS)
    for key, limit in (("maxMigratingPerNode", "maxNoOfPodsToEvictPerNode"),
                       ("maxMigratingPerNamespace", "maxNoOfPodsToEvictPerNamespace"),
                       ("maxMigratingGlobally", "maxNoOfPodsToEvictTotal")):
        value = body.get(key, DEFAULT_MAX_MIGRATING_PER_NODE if key == "maxMigratingPerNode" else None)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InputError(f"expected a non-negative integer, got {value!r}", field=f"{field}.{key}")
            limits[limit] = value
    return {k: body[k] for k in _SHARED_FILTER_ARGS if body.get(k) is not None}


def _profile(raw: Any, field: str, single: bool, limits: dict[str, int]) -> dict[str, Any]:
    d = _obj(raw, field, ("name", "pluginConfig", "plugins", "nodeSelector"))
    name = d.get("name") or (DEFAULT_PROFILE if single else None)
    if not isinstance(name, str) or not name:
        raise InputError("expected a non-empty profile name", field=f"{field}.name")
    if d.get("nodeSelector") is not None:
        raise InputError("a per-profile nodeSelector is not supported; use the top-level nodeSelector",
                         field=f"{field}.nodeSelector")
    praw = _obj(d.get("plugins"), f"{field}.plugins", POINTS)
    sets: dict[str, list[str]] = {}
    for point in POINTS:
        ps = _obj(praw.get(point), f"{field}.plugins.{point}", ("enabled", "disabled"))
        default = [MIGRATION_CONTROLLER] if point in ("evict", "filter") else []
        sets[point] = merge_plugin_set(default, _names(ps.get("enabled"), f"{field}.plugins.{point}.enabled"),
                                       _names(ps.get("disabled"), f"{field}.plugins.{point}.disabled"))
    configs: dict[str, Any] = {}
    raw_configs = d.get("pluginConfig")
    if raw_configs is not None and not isinstance(raw_configs, list):
        raise InputError("expected a list of {name, args}", field=f"{field}.pluginConfig")
    for i, pc in enumerate(raw_configs or []):
        pcd = _obj(pc, f"{field}.pluginConfig[{i}]", ("name", "args"))
        pname = pcd.get("name")
        if not isinstance(pname, str) or not pname:
            raise InputError("expected a plugin name", field=f"{field}.pluginConfig[{i}].name")
        configs.setdefault(pname, (i, _obj(pcd.get("args"), f"{field}.pluginConfig[{i}].args")))

    for point in ("evict", "filter"):
        others = [n for n in sets[point] if n not in EVICTORS]
        if others:
            raise InputError(f"{point} plugin {others[0]!r} is not available in kubesched (only DefaultEvictor and "
                             "MigrationController)", field=f"{field}.plugins.{point}")
    evictors = [n for n in sets["filter"] + sets["evict"] if n in EVICTORS]
    evictor = evictors[0] if evictors else None
    plugin_config: list[dict[str, Any]] = []
    if evictor is not None:
        i, args = configs.get(evictor, (None, {}))
        f = f"{field}.pluginConfig[{i}].args" if i is not None else f"{field}.pluginConfig[{evictor}]"
        plugin_config.append({"name": DEFAULT_EVICTOR, "args": _evictor_args(evictor, args, f, limits)})
    for pname, (_i, args) in configs.items():
        if pname in EVICTORS:
            continue
        plugin_config.append({"name": pname, "args": {k: v for k, v in args.items() if k not in _TYPE_META}})
    return {"name": name, "plugins": {"deschedule": {"enabled": sets["deschedule"]},
                                      "balance": {"enabled": sets["balance"]}},
            "pluginConfig": plugin_config}


def convert(raw: Any, source: str = "<policy>") -> dict[str, Any]:
    """A koordinator DeschedulerConfiguration as an equivalent descheduler/v1alpha2 DeschedulerPolicy."""
    d = _obj(raw, "", _TOP_KEYS)
    api = d.get("apiVersion")
    if api not in API_VERSIONS:
        raise InputError(f"expected apiVersion {' or '.join(API_VERSIONS)}, got {api!r}", field="apiVersion")
    limits: dict[str, int] = {}
    raw_profiles = d.get("profiles")
    if raw_profiles is not None and not isinstance(raw_profiles, list):
        raise InputError("expected a list of profiles", field="profiles")
    profiles_in = list(raw_profiles or [{}])
    profiles = [_profile(p, f"profiles[{i}]", len(profiles_in) == 1, limits) for i, p in enumerate(profiles_in)]
    out: dict[str, Any] = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": profiles}
    selector = label_selector_string(d.get("nodeSelector"), "nodeSelector")
    if selector:
        out["nodeSelector"] = selector
    for key in ("maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal"):
        if d.get(key) is not None:
            out[key] = d[key]
        elif key in limits:
            out[key] = limits[key]
    return out
