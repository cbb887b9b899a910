"""DeschedulerPolicy (descheduler/v1alpha2) → a validated, defaulted policy.

Follows kubernetes-sigs/descheduler's loader: a strict decode (unknown fields are errors), every
pluginConfig validated by its plugin's validator and defaulted by its defaulter, the metrics providers
checked, DefaultEvictor always added to the filter and preEvictionFilter extension points (with default
args when the policy gives none), and every enabled plugin checked against the extension points it
implements. kubesched adds a `sort` extension point; upstream's lower-case `preevictionfilter` tag and
the camel-case `preEvictionFilter` are both accepted.

A koordinator `DeschedulerConfiguration` is handed to `kubesched.descheduler.koordinator_config.convert`.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from kubesched.config.convert import convert_descheduler_policy, is_old_descheduler_policy
from kubesched.diagnostics import warn
from kubesched.errors import InputError

API_VERSIONS = ("descheduler/v1alpha2",)
KIND = "DeschedulerPolicy"
KOORDINATOR_KIND = "DeschedulerConfiguration"

# Extension points in the order a profile lists them; `sort` is kubesched's.
POINTS = ("sort", "deschedule", "balance", "filter", "preEvictionFilter")
_POINT_ALIASES = {"preevictionfilter": "preEvictionFilter", "preEvictionFilter": "preEvictionFilter",
                  "sort": "sort", "deschedule": "deschedule", "balance": "balance", "filter": "filter"}
# Upstream accepts a presort set that no plugin implements; it is read and ignored.
_IGNORED_POINTS = ("presort", "preSort")

DEFAULT_EVICTOR = "DefaultEvictor"
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
KUBERNETES_METRICS = "KubernetesMetrics"
PROMETHEUS_METRICS = "Prometheus"


@dataclass(slots=True)
class PluginSet:
    enabled: list[str] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ProfileConfig:
    name: str
    # Plugin name → its defaulted, validated args (JSON form); every enabled plugin has an entry.
    plugin_config: dict[str, dict[str, Any]]
    plugins: dict[str, PluginSet]
    field: str = "profiles[0]"

    def enabled(self, point: str) -> list[str]:
        return list(self.plugins[point].enabled)


@dataclass(slots=True)
class MetricsProvider:
    source: str
    prometheus: dict[str, Any] | None = None


@dataclass(slots=True)
class DeschedulerPolicy:
    profiles: list[ProfileConfig] = field(default_factory=list)
    node_selector: str | None = None
    max_pods_to_evict_per_node: int | None = None
    max_pods_to_evict_per_namespace: int | None = None
    max_pods_to_evict_total: int | None = None
    eviction_failure_event_notification: bool | None = None
    metrics_collector_enabled: bool = False
    metrics_providers: list[MetricsProvider] = field(default_factory=list)
    grace_period_seconds: int | None = None
    source: str = "<policy>"
    # The document kind it came from (DeschedulerPolicy, or koordinator's DeschedulerConfiguration).
    kind: str = KIND

    def metrics_provider(self, source: str) -> MetricsProvider | None:
        for p in self.metrics_providers:
            if p.source == source:
                return p
        return None

    @property
    def kubernetes_metrics_enabled(self) -> bool:
        """Whether upstream would create the metrics client (and its MetricsCollector)."""
        return self.metrics_collector_enabled or self.metrics_provider(KUBERNETES_METRICS) is not None


# ---------------------------------------------------------------- typed field readers


def _obj(raw: Any, fld: str, allowed: tuple[str, ...] | None = None) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InputError(f"expected an object, got {type(raw).__name__}", field=fld)
    if allowed is not None:
        for k in raw:
            if k not in allowed:
                raise InputError(f"unknown field {k!r}; expected one of {', '.join(allowed)}",
                                 field=f"{fld}.{k}" if fld else str(k))
    return raw


def _bool(raw: Any, fld: str) -> bool:
    if not isinstance(raw, bool):
        raise InputError(f"expected true or false, got {raw!r}", field=fld)
    return raw


def _integral(raw: Any) -> Any:
    # YAML/JSON numbers such as 3.0 decode into Go integers; 3.5 does not.
    return int(raw) if isinstance(raw, float) and raw.is_integer() else raw


def _uint(raw: Any, fld: str) -> int:
    raw = _integral(raw)
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise InputError(f"expected a non-negative integer, got {raw!r}", field=fld)
    return raw


def _int(raw: Any, fld: str, bits: int = 32) -> int:
    raw = _integral(raw)
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise InputError(f"expected an integer, got {raw!r}", field=fld)
    if not -(2 ** (bits - 1)) <= raw < 2 ** (bits - 1):
        raise InputError(f"integer {raw} out of range for int{bits}", field=fld)
    return raw


def _str(raw: Any, fld: str) -> str:
    if not isinstance(raw, str):
        raise InputError(f"expected a string, got {raw!r}", field=fld)
    return raw


def _str_list(raw: Any, fld: str) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InputError(f"expected a list of strings, got {type(raw).__name__}", field=fld)
    return [_str(v, f"{fld}[{i}]") for i, v in enumerate(raw)]


def _int_list(raw: Any, fld: str) -> list[int]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InputError(f"expected a list of integers, got {type(raw).__name__}", field=fld)
    return [_int(v, f"{fld}[{i}]") for i, v in enumerate(raw)]


def _number(raw: Any, fld: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise InputError(f"expected a number, got {raw!r}", field=fld)
    return float(raw)


_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration_seconds(raw: Any, fld: str) -> float:
    """A Go duration (`90s`, `1h30m`, `500ms`) as seconds; a bare number is taken as nanoseconds upstream,
    so only strings are accepted."""
    text = _str(raw, fld).strip()
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    if body == "0":
        return 0.0
    pos = 0
    total = 0.0
    while pos < len(body):
        m = _DURATION_PART.match(body, pos)
        if m is None:
            raise InputError(f"expected a duration such as 30s, 5m or 1h30m, got {raw!r}", field=fld)
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if not body:
        raise InputError(f"expected a duration such as 30s, 5m or 1h30m, got {raw!r}", field=fld)
    return sign * total


def _label_selector(raw: Any, fld: str) -> dict[str, Any] | None:
    """A metav1.LabelSelector, checked the way LabelSelectorAsSelector checks it."""
    if raw is None:
        return None
    from kubesched.api.selectors import parse_label_selector

    _obj(raw, fld, ("matchLabels", "matchExpressions"))
    parse_label_selector(raw, fld)
    return raw


def _namespaces(raw: Any, fld: str, *, include_allowed: bool = True, both_allowed: bool = False) -> dict[str, Any] | None:
    if raw is None:
        return None
    d = _obj(raw, fld, ("include", "exclude"))
    inc = _str_list(d.get("include"), f"{fld}.include")
    exc = _str_list(d.get("exclude"), f"{fld}.exclude")
    if inc and not include_allowed:
        raise InputError("only Exclude namespaces can be set, inclusion is not supported", field=f"{fld}.include")
    if inc and exc and not both_allowed:
        raise InputError("only one of Include/Exclude namespaces can be set", field=fld)
    return {"include": inc, "exclude": exc}


_TYPE_META = ("apiVersion", "kind")


def _args(raw: Any, fld: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    d = _obj(raw, fld, allowed + _TYPE_META)
    return {k: copy.deepcopy(v) for k, v in d.items() if k not in _TYPE_META}


# ---------------------------------------------------------------- per-plugin validation and defaults


def _validate_default_evictor(raw: Any, fld: str) -> dict[str, Any]:
    a = _args(raw, fld, ("nodeSelector", "labelSelector", "namespaceLabelSelector", "priorityThreshold", "nodeFit",
                         "minReplicas", "minPodAge", "noEvictionPolicy", "podProtections", "evictLocalStoragePods",
                         "evictDaemonSetPods", "evictSystemCriticalPods", "ignorePvcPods", "ignorePodsWithoutPDB",
                         "evictFailedBarePods", "nodeFitProfile"))
    if a.get("nodeSelector") is not None:
        from kubesched.descheduler.nodeutil import parse_label_selector_string

        parse_label_selector_string(_str(a["nodeSelector"], f"{fld}.nodeSelector"), f"{fld}.nodeSelector")
    _label_selector(a.get("labelSelector"), f"{fld}.labelSelector")
    _label_selector(a.get("namespaceLabelSelector"), f"{fld}.namespaceLabelSelector")
    pt = a.get("priorityThreshold")
    if pt is not None:
        ptd = _obj(pt, f"{fld}.priorityThreshold", ("value", "name"))
        if ptd.get("value") is not None:
            value = _int(ptd["value"], f"{fld}.priorityThreshold.value")
            if value > SYSTEM_CRITICAL_PRIORITY:
                raise InputError(f"priority threshold can't be greater than {SYSTEM_CRITICAL_PRIORITY}",
                                 field=f"{fld}.priorityThreshold.value")
        if ptd.get("name") is not None:
            _str(ptd["name"], f"{fld}.priorityThreshold.name")
        if ptd.get("value") is not None and ptd.get("name"):
            raise InputError("priority threshold misconfigured, only one of priorityThreshold fields can be set",
                             field=f"{fld}.priorityThreshold")
    for b in ("nodeFit", "evictLocalStoragePods", "evictDaemonSetPods", "evictSystemCriticalPods", "ignorePvcPods",
              "ignorePodsWithoutPDB", "evictFailedBarePods"):
        if b in a and a[b] is not None:
            _bool(a[b], f"{fld}.{b}")
    if a.get("minReplicas") is not None:
        _uint(a["minReplicas"], f"{fld}.minReplicas")
    if a.get("minPodAge") is not None:
        parse_duration_seconds(a["minPodAge"], f"{fld}.minPodAge")
    nep = a.get("noEvictionPolicy")
    if nep not in (None, "", "Preferred", "Mandatory"):
        raise InputError(f'noEvictionPolicy accepts only ["Preferred" "Mandatory"] values, got {nep!r}',
                         field=f"{fld}.noEvictionPolicy")
    if a.get("nodeFitProfile") is not None:
        _str(a["nodeFitProfile"], f"{fld}.nodeFitProfile")
    pp = _obj(a.get("podProtections"), f"{fld}.podProtections", ("extraEnabled", "defaultDisabled", "config"))
    extra = _str_list(pp.get("extraEnabled"), f"{fld}.podProtections.extraEnabled")
    disabled = _str_list(pp.get("defaultDisabled"), f"{fld}.podProtections.defaultDisabled")
    deprecated = [b for b in ("evictLocalStoragePods", "evictDaemonSetPods", "evictSystemCriticalPods", "ignorePvcPods",
                              "evictFailedBarePods", "ignorePodsWithoutPDB") if a.get(b)]
    if deprecated and (extra or disabled):
        raise InputError(f"cannot use Deprecated fields ({', '.join(deprecated)}) alongside "
                         "PodProtections.ExtraEnabled or PodProtections.DefaultDisabled", field=f"{fld}.podProtections")
    from kubesched.descheduler.plugins.default_evictor import DEFAULT_POD_PROTECTIONS, EXTRA_POD_PROTECTIONS

    for i, p in enumerate(extra):
        if p not in EXTRA_POD_PROTECTIONS:
            raise InputError(f"invalid pod protection policy in ExtraEnabled: {p!r}. Valid options are: "
                             f"{', '.join(EXTRA_POD_PROTECTIONS)}", field=f"{fld}.podProtections.extraEnabled[{i}]")
    for i, p in enumerate(disabled):
        if p not in DEFAULT_POD_PROTECTIONS:
            raise InputError(f"invalid pod protection policy in DefaultDisabled: {p!r}. Valid options are: "
                             f"{', '.join(DEFAULT_POD_PROTECTIONS)}", field=f"{fld}.podProtections.defaultDisabled[{i}]")
    if len(set(disabled)) != len(disabled):
        raise InputError("PodProtections.DefaultDisabled contains duplicate entries",
                         field=f"{fld}.podProtections.defaultDisabled")
    if len(set(extra)) != len(extra):
        raise InputError("PodProtections.ExtraEnabled contains duplicate entries", field=f"{fld}.podProtections.extraEnabled")
    cfg = _obj(pp.get("config"), f"{fld}.podProtections.config", ("PodsWithPVC",))
    pvc = _obj(cfg.get("PodsWithPVC"), f"{fld}.podProtections.config.PodsWithPVC", ("protectedStorageClasses",))
    scs = pvc.get("protectedStorageClasses")
    if scs is not None:
        if not isinstance(scs, list):
            raise InputError("expected a list", field=f"{fld}.podProtections.config.PodsWithPVC.protectedStorageClasses")
        for i, sc in enumerate(scs):
            f2 = f"{fld}.podProtections.config.PodsWithPVC.protectedStorageClasses[{i}]"
            scd = _obj(sc, f2, ("name",))
            if "PodsWithPVC" in extra and not scd.get("name"):
                raise InputError(f"PodProtections.Config.PodsWithPVC.ProtectedStorageClasses[{i}] name cannot be empty",
                                 field=f"{f2}.name")
    return a


def _thresholds(raw: Any, fld: str) -> dict[str, float]:
    d = _obj(raw, fld)
    if not d:
        raise InputError("no resource threshold is configured", field=fld)
    out: dict[str, float] = {}
    for name, v in d.items():
        pct = _number(v, f"{fld}.{name}")
        if pct < 0 or pct > 100:
            raise InputError(f"{name} threshold not in [0, 100] range", field=f"{fld}.{name}")
        out[str(name)] = pct
    return out


def _metrics_utilization(raw: Any, fld: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    d = _obj(raw, fld, ("metricsServer", "source", "prometheus"))
    out: dict[str, Any] = {}
    if d.get("metricsServer") is not None:
        out["metricsServer"] = _bool(d["metricsServer"], f"{fld}.metricsServer")
    source = d.get("source")
    if source is not None:
        source = _str(source, f"{fld}.source")
        if source not in ("", KUBERNETES_METRICS, PROMETHEUS_METRICS):
            raise InputError(f"unrecognized metrics source {source!r}; expected {KUBERNETES_METRICS} or "
                             f"{PROMETHEUS_METRICS}", field=f"{fld}.source")
        out["source"] = source
    if d.get("prometheus") is not None:
        prom = _obj(d["prometheus"], f"{fld}.prometheus", ("query",))
        out["prometheus"] = {"query": _str(prom.get("query", ""), f"{fld}.prometheus.query")}
    if out.get("source") == KUBERNETES_METRICS and out.get("metricsServer"):
        raise InputError(f"it is not allowed to set both {KUBERNETES_METRICS!r} source and metricsServer", field=fld)
    if out.get("source") == KUBERNETES_METRICS and out.get("prometheus") is not None:
        raise InputError(f"prometheus configuration is not allowed to set when source is set to {KUBERNETES_METRICS!r}",
                         field=f"{fld}.prometheus")
    if out.get("source") == PROMETHEUS_METRICS and not (out.get("prometheus") or {}).get("query"):
        raise InputError(f"prometheus query is required when metrics source is set to {PROMETHEUS_METRICS!r}",
                         field=f"{fld}.prometheus.query")
    return out


def _validate_low_node_utilization(raw: Any, fld: str) -> dict[str, Any]:
    a = _args(raw, fld, ("useDeviationThresholds", "thresholds", "targetThresholds", "numberOfNodes",
                         "metricsUtilization", "evictableNamespaces", "evictionLimits"))
    out: dict[str, Any] = {
        "useDeviationThresholds": _bool(a.get("useDeviationThresholds", False), f"{fld}.useDeviationThresholds"),
        "numberOfNodes": _int(a.get("numberOfNodes", 0), f"{fld}.numberOfNodes", 64),
    }
    out["evictableNamespaces"] = _namespaces(a.get("evictableNamespaces"), f"{fld}.evictableNamespaces",
                                             include_allowed=False)
    try:
        out["thresholds"] = _thresholds(a.get("thresholds"), f"{fld}.thresholds")
    except InputError as e:
        raise InputError(f"thresholds config is not valid: {e.message}", field=e.field) from None
    try:
        out["targetThresholds"] = _thresholds(a.get("targetThresholds"), f"{fld}.targetThresholds")
    except InputError as e:
        raise InputError(f"targetThresholds config is not valid: {e.message}", field=e.field) from None
    low, high = out["thresholds"], out["targetThresholds"]
    if len(low) != len(high) or any(name not in high for name in low):
        raise InputError("thresholds and targetThresholds configured different resources", field=f"{fld}.targetThresholds")
    if not out["useDeviationThresholds"]:
        for name, v in low.items():
            if v > high[name]:
                raise InputError(f"thresholds' {name} percentage is greater than targetThresholds'",
                                 field=f"{fld}.thresholds.{name}")
    out["metricsUtilization"] = _metrics_utilization(a.get("metricsUtilization"), f"{fld}.metricsUtilization")
    el = a.get("evictionLimits")
    if el is not None:
        eld = _obj(el, f"{fld}.evictionLimits", ("node",))
        out["evictionLimits"] = {"node": None if eld.get("node") is None else _uint(eld["node"], f"{fld}.evictionLimits.node")}
    else:
        out["evictionLimits"] = None
    mu = out["metricsUtilization"]
    if mu is not None and mu.get("source") == PROMETHEUS_METRICS:
        for key in ("thresholds", "targetThresholds"):
            names = list(out[key])
            if names != ["MetricResource"]:
                raise InputError(f'{key} are expected to specify a single instance of "MetricResource" resource, '
                                 f"got {names} instead", field=f"{fld}.{key}")
    return out


def _validate_high_node_utilization(raw: Any, fld: str) -> dict[str, Any]:
    a = _args(raw, fld, ("thresholds", "numberOfNodes", "evictionModes", "evictableNamespaces"))
    out: dict[str, Any] = {"numberOfNodes": _int(a.get("numberOfNodes", 0), f"{fld}.numberOfNodes", 64)}
    out["evictableNamespaces"] = _namespaces(a.get("evictableNamespaces"), f"{fld}.evictableNamespaces",
                                             include_allowed=False)
    out["thresholds"] = _thresholds(a.get("thresholds"), f"{fld}.thresholds")
    modes = _str_list(a.get("evictionModes"), f"{fld}.evictionModes")
    for i, m in enumerate(modes):
        if m != "OnlyThresholdingResources":
            raise InputError(f"invalid eviction mode {m}", field=f"{fld}.evictionModes[{i}]")
    out["evictionModes"] = modes
    return out


def _common(a: dict[str, Any], fld: str, out: dict[str, Any], label_selector: bool = True) -> None:
    out["namespaces"] = _namespaces(a.get("namespaces"), f"{fld}.namespaces")
    if label_selector:
        out["labelSelector"] = _label_selector(a.get("labelSelector"), f"{fld}.labelSelector")


# Upstream's validators and defaulters per plugin; other plugins validate through their class's
# `validate_args(args, field)` classmethod when they define one.
VALIDATORS: dict[str, Any] = {
    DEFAULT_EVICTOR: _validate_default_evictor,
    "LowNodeUtilization": _validate_low_node_utilization,
    "HighNodeUtilization": _validate_high_node_utilization,
}


# Plugins that receive the validated, defaulted args produced here (the others get the policy's args).
NORMALIZED = (DEFAULT_EVICTOR, "LowNodeUtilization", "HighNodeUtilization")


def validate_plugin_args(name: str, raw: Any, fld: str, registry: Any = None) -> dict[str, Any]:
    """The defaulted, validated args of one plugin (InputError naming the field when invalid)."""
    validator = VALIDATORS.get(name)
    if validator is not None:
        out = validator(raw, fld)
        if name in NORMALIZED:
            return out  # type: ignore[no-any-return]
        # The other strategies read their own args (and default them); they get the document's args,
        # checked here so that a bad policy fails at load with the field named.
        return {k: copy.deepcopy(v) for k, v in _obj(raw, fld).items() if k not in _TYPE_META}
    args = _obj(raw, fld)
    if registry is not None and name in registry:
        cls = registry.get(name)
        hook = getattr(cls, "validate_args", None)
        if callable(hook):
            out = hook({k: v for k, v in args.items() if k not in _TYPE_META}, fld)
            return dict(out) if out is not None else {}
    return {k: copy.deepcopy(v) for k, v in args.items() if k not in _TYPE_META}


# ---------------------------------------------------------------- the policy


def _plugin_set(raw: Any, fld: str) -> PluginSet:
    d = _obj(raw, fld, ("enabled", "disabled"))

    def names(v: Any, f: str) -> list[str]:
        if v is None:
            return []
        if not isinstance(v, list):
            raise InputError(f"expected a list of plugin names, got {type(v).__name__}", field=f)
        out = []
        for i, item in enumerate(v):
            # Upstream lists names; koordinator-style {name: X} entries are accepted too.
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                item = item["name"]
            out.append(_str(item, f"{f}[{i}]"))
        return out

    return PluginSet(names(d.get("enabled"), f"{fld}.enabled"), names(d.get("disabled"), f"{fld}.disabled"))


def _parse_profile(raw: Any, fld: str, registry: Any) -> ProfileConfig:
    d = _obj(raw, fld, ("name", "pluginConfig", "plugins"))
    name = d.get("name")
    if not isinstance(name, str) or not name:
        raise InputError("expected a non-empty profile name", field=f"{fld}.name")
    plugins: dict[str, PluginSet] = {p: PluginSet() for p in POINTS}
    praw = _obj(d.get("plugins"), f"{fld}.plugins")
    for key, value in praw.items():
        if key in _IGNORED_POINTS:
            _plugin_set(value, f"{fld}.plugins.{key}")
            continue
        point = _POINT_ALIASES.get(key)
        if point is None:
            raise InputError(f"unknown extension point {key!r}; expected one of sort, deschedule, balance, filter, "
                             "preEvictionFilter (or preevictionfilter)", field=f"{fld}.plugins.{key}")
        ps = _plugin_set(value, f"{fld}.plugins.{key}")
        plugins[point].enabled.extend(n for n in ps.enabled if n not in plugins[point].enabled)
        plugins[point].disabled.extend(ps.disabled)

    raw_configs = d.get("pluginConfig")
    if raw_configs is not None and not isinstance(raw_configs, list):
        raise InputError("expected a list of {name, args}", field=f"{fld}.pluginConfig")
    configs: dict[str, dict[str, Any]] = {}
    for i, pc in enumerate(raw_configs or []):
        f2 = f"{fld}.pluginConfig[{i}]"
        pcd = _obj(pc, f2, ("name", "args"))
        pname = pcd.get("name")
        if not isinstance(pname, str) or not pname:
            raise InputError("expected a plugin name", field=f"{f2}.name")
        if pname not in registry:
            raise InputError(f"in profile {name}: plugin {pname} in pluginConfig not registered; known plugins: "
                             f"{', '.join(registry.names())}", field=f"{f2}.name")
        args = validate_plugin_args(pname, pcd.get("args"), f"{f2}.args", registry)
        # Upstream uses the first pluginConfig of a name.
        configs.setdefault(pname, args)

    # setDefaultEvictor: DefaultEvictor always filters, with default args when none are given.
    for point in ("filter", "preEvictionFilter"):
        if DEFAULT_EVICTOR not in plugins[point].enabled:
            plugins[point].enabled.insert(0, DEFAULT_EVICTOR)
    if DEFAULT_EVICTOR not in configs:
        configs = {DEFAULT_EVICTOR: validate_plugin_args(DEFAULT_EVICTOR, {}, f"{fld}.pluginConfig[DefaultEvictor].args"),
                   **configs}

    from kubesched.descheduler.registry import POINT_TYPES

    for point in POINTS:
        for j, pname in enumerate(plugins[point].enabled):
            f2 = f"{fld}.plugins.{'preevictionfilter' if point == 'preEvictionFilter' else point}.enabled[{j}]"
            if pname not in registry:
                raise InputError(f"profile {name!r} configures {point} extension point of non-existing plugin "
                                 f"{pname!r}; known plugins: {', '.join(registry.names())}", field=f2)
            cls = registry.get(pname)
            if not issubclass(cls, POINT_TYPES[point]):
                raise InputError(f"profile {name!r} configures {point} extension point of plugin {pname!r}, which does "
                                 f"not implement it", field=f2)
            if pname not in configs:
                # Upstream requires a pluginConfig for every enabled plugin; kubesched uses the plugin's defaults
                # when they are valid on their own.
                try:
                    configs[pname] = validate_plugin_args(pname, {}, f"{fld}.pluginConfig[{pname}].args", registry)
                except InputError as e:
                    raise InputError(f"plugin {pname} is enabled but has no pluginConfig, and its defaults are not "
                                     f"enough: {e.message}", field=f"{fld}.pluginConfig") from None
    return ProfileConfig(name=name, plugin_config=configs, plugins=plugins, field=fld)


def parse_descheduler_policy(raw: Any, source: str = "<policy>", registry: Any = None) -> DeschedulerPolicy:
    """Validate and default a DeschedulerPolicy document (or convert a koordinator DeschedulerConfiguration)."""
    if registry is None:
        from kubesched.descheduler.registry import default_registry

        registry = default_registry()
    try:
        if is_old_descheduler_policy(raw):
            raw, notes = convert_descheduler_policy(raw)
            for note in notes:
                warn(note, file=source, obj=KIND)
            warn(f"write the v1alpha2 file with: kubesched convert {source} -o yaml (from descheduler/v1alpha1)",
                 file=source, obj=KIND)
        return _parse(raw, source, registry)
    except InputError as e:
        raise e.located(file=source, obj=_kind_of(raw)) from None


def _kind_of(raw: Any) -> str:
    kind = raw.get("kind") if isinstance(raw, dict) else None
    return kind if isinstance(kind, str) and kind else KIND


def _parse(raw: Any, source: str, registry: Any) -> DeschedulerPolicy:
    if not isinstance(raw, dict):
        raise InputError(f"expected a {KIND} object, got {type(raw).__name__}")
    kind = raw.get("kind")
    if kind == KOORDINATOR_KIND:
        # The load-aware helper's converter, imported only for this kind.
        import importlib

        try:
            koordinator_config = importlib.import_module("kubesched.descheduler.koordinator_config")
        except ImportError as e:
            raise InputError(f"koordinator {KOORDINATOR_KIND} is not supported in this installation ({e})",
                             field="kind") from None
        converted = koordinator_config.convert(raw, source)
        if isinstance(converted, DeschedulerPolicy):
            converted.kind = KOORDINATOR_KIND
            return converted
        policy = _parse(converted, source, registry)
        policy.kind = KOORDINATOR_KIND
        return policy
    if kind != KIND:
        raise InputError(f"expected kind {KIND} (or koordinator's {KOORDINATOR_KIND}), got {kind!r}", field="kind")
    api = raw.get("apiVersion")
    if api not in API_VERSIONS:
        raise InputError(f"expected apiVersion {' or '.join(API_VERSIONS)}, got {api!r}", field="apiVersion")
    d = _obj(raw, "", ("apiVersion", "kind", "profiles", "nodeSelector", "maxNoOfPodsToEvictPerNode",
                       "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal", "evictionFailureEventNotification",
                       "metricsCollector", "metricsProviders", "gracePeriodSeconds", "metadata"))
    policy = DeschedulerPolicy(source=source)
    if d.get("nodeSelector") is not None:
        from kubesched.descheduler.nodeutil import parse_label_selector_string

        policy.node_selector = _str(d["nodeSelector"], "nodeSelector")
        parse_label_selector_string(policy.node_selector, "nodeSelector")
    for key, attr in (("maxNoOfPodsToEvictPerNode", "max_pods_to_evict_per_node"),
                      ("maxNoOfPodsToEvictPerNamespace", "max_pods_to_evict_per_namespace"),
                      ("maxNoOfPodsToEvictTotal", "max_pods_to_evict_total")):
        if d.get(key) is not None:
            setattr(policy, attr, _uint(d[key], key))
    if d.get("evictionFailureEventNotification") is not None:
        policy.eviction_failure_event_notification = _bool(d["evictionFailureEventNotification"],
                                                            "evictionFailureEventNotification")
    if d.get("gracePeriodSeconds") is not None:
        policy.grace_period_seconds = _int(d["gracePeriodSeconds"], "gracePeriodSeconds", 64)
    mc = _obj(d.get("metricsCollector"), "metricsCollector", ("enabled",))
    if mc.get("enabled") is not None:
        policy.metrics_collector_enabled = _bool(mc["enabled"], "metricsCollector.enabled")

    raw_profiles = d.get("profiles")
    if raw_profiles is not None and not isinstance(raw_profiles, list):
        raise InputError("expected a list of profiles", field="profiles")
    names: set[str] = set()
    for i, p in enumerate(raw_profiles or []):
        prof = _parse_profile(p, f"profiles[{i}]", registry)
        if prof.name in names:
            raise InputError(f"duplicate profile name {prof.name!r}", field=f"profiles[{i}].name")
        names.add(prof.name)
        policy.profiles.append(prof)

    raw_providers = d.get("metricsProviders")
    if raw_providers is not None and not isinstance(raw_providers, list):
        raise InputError("expected a list of metrics providers", field="metricsProviders")
    seen: set[str] = set()
    for i, mp in enumerate(raw_providers or []):
        f2 = f"metricsProviders[{i}]"
        mpd = _obj(mp, f2, ("source", "prometheus"))
        src = _str(mpd.get("source", ""), f"{f2}.source")
        if src in seen:
            raise InputError(f"metric provider {src!r} is already configured, each source can be configured only once",
                             field=f"{f2}.source")
        seen.add(src)
        if src not in ("", KUBERNETES_METRICS, PROMETHEUS_METRICS):
            raise InputError(f"unrecognized metrics source {src!r}; expected {KUBERNETES_METRICS} or {PROMETHEUS_METRICS}",
                             field=f"{f2}.source")
        prom = None
        if mpd.get("prometheus") is not None:
            prom = _obj(mpd["prometheus"], f"{f2}.prometheus", ("url", "authToken"))
        if src == PROMETHEUS_METRICS:
            if prom is None:
                raise InputError("prometheus configuration is required when prometheus source is enabled",
                                 field=f"{f2}.prometheus")
            url = prom.get("url")
            if not url:
                raise InputError("prometheus URL is required when prometheus is enabled", field=f"{f2}.prometheus.url")
            _str(url, f"{f2}.prometheus.url")
            if prom.get("authToken") is not None:
                at = _obj(prom["authToken"], f"{f2}.prometheus.authToken", ("secretReference",))
                ref = at.get("secretReference")
                if ref is None:
                    raise InputError("prometheus authToken secret is expected to be set when authToken field is",
                                     field=f"{f2}.prometheus.authToken.secretReference")
                refd = _obj(ref, f"{f2}.prometheus.authToken.secretReference", ("namespace", "name"))
                if not refd.get("name") or not refd.get("namespace"):
                    raise InputError("prometheus authToken secret reference does not set both namespace and name",
                                     field=f"{f2}.prometheus.authToken.secretReference")
        policy.metrics_providers.append(MetricsProvider(src, prom))
    if policy.metrics_provider(KUBERNETES_METRICS) is not None and policy.metrics_collector_enabled:
        raise InputError("it is not allowed to combine metrics provider when metrics collector is enabled",
                         field="metricsCollector.enabled")
    return policy


def load_descheduler_policy(path: str, registry: Any = None) -> DeschedulerPolicy:
    from kubesched.api.documents import read_document

    raw = read_document(path, KIND, (KIND, KOORDINATOR_KIND))
    return parse_descheduler_policy(raw, str(path), registry)
