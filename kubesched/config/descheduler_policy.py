"""DeschedulerPolicy (descheduler/v1alpha2) → a validated, defaulted policy.

Follows kubernetes-sigs/descheduler's loader: a strict decode (unknown fields are errors), every
pluginConfig validated by its plugin's validator and defaulted by its defaulter, the metrics providers
checked, DefaultEvictor always added to the filter and preEvictionFilter extension points (with default
args when the policy gives none), and every enabled plugin checked against the extension points it
implements. kubesched adds a `sort` extension point; upstream's lower-case `preevictionfilter` tag and
the camel-case `preEvictionFilter` are both accepted.

A koordinator `DeschedulerConfiguration` is converted first (kubesched.config.koordinator_descheduler).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubesched.api import fields
from kubesched.api.documents import read_document
from kubesched.api.selectors import parse_label_selector_string
from kubesched.config import koordinator_descheduler
from kubesched.config.convert import convert_descheduler_policy, is_old_descheduler_policy
from kubesched.config.plugin_args import build_args
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
KUBERNETES_METRICS = "KubernetesMetrics"
PROMETHEUS_METRICS = "Prometheus"


@dataclass(slots=True)
class PluginSet:
    enabled: list[str] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ProfileConfig:
    name: str
    # Plugin name → its args as the loader built them (typed for plugins with `Args`, else a dict); every
    # enabled plugin has an entry.
    plugin_config: dict[str, Any]
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


# ---------------------------------------------------------------- reading the document


class PluginCatalog(Protocol):
    """What the loader needs of the descheduler's plugin registry (kubesched.descheduler.registry.Registry)."""

    def __contains__(self, name: str) -> bool: ...

    def names(self) -> list[str]: ...

    def get(self, name: str) -> type[Any]: ...

    def implements(self, name: str, point: str) -> bool: ...


def _obj(raw: Any, fld: str, allowed: tuple[str, ...] | None = None) -> dict[str, Any]:
    """An object of the policy (None reads as empty); with `allowed`, other fields are errors."""
    return fields.Fields(raw, fld, allowed=allowed, meta=False).raw


def _uint(raw: Any, fld: str) -> int:
    return fields.integer(raw, fld, lo=0, what="a non-negative integer", whole_floats=True)


def validate_plugin_args(name: str, raw: Any, fld: str, registry: PluginCatalog) -> Any:
    """One plugin's args, built once: typed (defaulted and validated) for a plugin that declares `Args`; for a
    third-party plugin without, the args object — checked by its `validate_args(args, field)` when it has one."""
    cls = registry.get(name)
    if getattr(cls, "Args", None) is not None:
        return build_args(cls, raw, fld)
    args = {k: copy.deepcopy(v) for k, v in _obj(raw, fld).items() if k not in fields.META_KEYS}
    hook = getattr(cls, "validate_args", None)
    if callable(hook):
        out = hook(args, fld)
        return dict(out) if out is not None else {}
    return args


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
            out.append(fields.string(item, f"{f}[{i}]"))
        return out

    return PluginSet(names(d.get("enabled"), f"{fld}.enabled"), names(d.get("disabled"), f"{fld}.disabled"))


def _parse_profile(raw: Any, fld: str, registry: PluginCatalog) -> ProfileConfig:
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
    configs: dict[str, Any] = {}
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
        configs = {DEFAULT_EVICTOR: validate_plugin_args(DEFAULT_EVICTOR, {}, f"{fld}.pluginConfig[DefaultEvictor].args",
                                                       registry),
                   **configs}

    for point in POINTS:
        for j, pname in enumerate(plugins[point].enabled):
            f2 = f"{fld}.plugins.{'preevictionfilter' if point == 'preEvictionFilter' else point}.enabled[{j}]"
            if pname not in registry:
                raise InputError(f"profile {name!r} configures {point} extension point of non-existing plugin "
                                 f"{pname!r}; known plugins: {', '.join(registry.names())}", field=f2)
            if not registry.implements(pname, point):
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


def parse_descheduler_policy(raw: Any, source: str, registry: PluginCatalog) -> DeschedulerPolicy:
    """Validate and default a DeschedulerPolicy document (or convert a koordinator DeschedulerConfiguration);
    every plugin's args are built with `registry`'s classes (kubesched.descheduler.registry.default_registry())."""
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


def _parse(raw: Any, source: str, registry: PluginCatalog) -> DeschedulerPolicy:
    if not isinstance(raw, dict):
        raise InputError(f"expected a {KIND} object, got {type(raw).__name__}")
    kind = raw.get("kind")
    if kind == KOORDINATOR_KIND:
        converted = koordinator_descheduler.convert(raw, source)
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
        policy.node_selector = fields.string(d["nodeSelector"], "nodeSelector")
        parse_label_selector_string(policy.node_selector, "nodeSelector")
    for key, attr in (("maxNoOfPodsToEvictPerNode", "max_pods_to_evict_per_node"),
                      ("maxNoOfPodsToEvictPerNamespace", "max_pods_to_evict_per_namespace"),
                      ("maxNoOfPodsToEvictTotal", "max_pods_to_evict_total")):
        if d.get(key) is not None:
            setattr(policy, attr, _uint(d[key], key))
    if d.get("evictionFailureEventNotification") is not None:
        policy.eviction_failure_event_notification = fields.boolean(d["evictionFailureEventNotification"],
                                                            "evictionFailureEventNotification")
    if d.get("gracePeriodSeconds") is not None:
        policy.grace_period_seconds = fields.integer(d["gracePeriodSeconds"], "gracePeriodSeconds", bits=fields.INT64,
                                                   whole_floats=True)
    mc = _obj(d.get("metricsCollector"), "metricsCollector", ("enabled",))
    if mc.get("enabled") is not None:
        policy.metrics_collector_enabled = fields.boolean(mc["enabled"], "metricsCollector.enabled")

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
        src = fields.string(mpd.get("source", ""), f"{f2}.source")
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
            fields.string(url, f"{f2}.prometheus.url")
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


def load_descheduler_policy(path: str, registry: PluginCatalog) -> DeschedulerPolicy:
    raw = read_document(path, KIND, (KIND, KOORDINATOR_KIND))
    return parse_descheduler_policy(raw, str(path), registry)
