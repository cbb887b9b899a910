"""KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) → typed settings.

Profiles are merged with the default plugin set exactly as upstream's `mergePlugins` does (defaults
first, `disabled` names or `*` removed, a re-enabled default replaced in place, other custom plugins
appended); plugin args stay documents here: the Framework builds each plugin's typed args (its `Args`)
once, with the plugin's defaults and validation.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubesched.api import fields
from kubesched.api.documents import read_document
from kubesched.config.convert import V1_INVALID_PLUGINS, convert_scheduler_config, is_old_scheduler_config
from kubesched.diagnostics import warn
from kubesched.errors import InputError

API_VERSIONS = ("kubescheduler.config.k8s.io/v1",)
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER = "default-scheduler"

POINTS = ("multiPoint", "preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score",
          "reserve", "permit", "preBind", "bind", "postBind")

# getDefaultPlugins (v1): the multiPoint set and its score weights, in upstream order.
DEFAULT_MULTIPOINT: tuple[tuple[str, int | None], ...] = (
    ("SchedulingGates", None),
    ("PrioritySort", None),
    ("NodeUnschedulable", None),
    ("NodeName", None),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", None),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", None),
    ("NodeVolumeLimits", None),
    ("VolumeBinding", None),
    ("VolumeZone", None),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", None),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", None),
)


@dataclass(frozen=True, slots=True)
class PluginRef:
    name: str
    weight: int | None = None


@dataclass(slots=True)
class PluginSet:
    enabled: list[PluginRef] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Profile:
    scheduler_name: str
    plugins: dict[str, PluginSet]
    plugin_config: dict[str, dict[str, Any]]
    percentage_of_nodes_to_score: int | None = None


@dataclass(slots=True)
class SchedulerConfig:
    profiles: list[Profile]
    percentage_of_nodes_to_score: int | None = None
    pod_initial_backoff_seconds: float = 1.0
    pod_max_backoff_seconds: float = 10.0
    source: str = "<default>"
    raw: dict[str, Any] = field(default_factory=dict)

    def profile_for(self, scheduler_name: str) -> Profile | None:
        for p in self.profiles:
            if p.scheduler_name == scheduler_name:
                return p
        return None


def default_plugins() -> dict[str, PluginSet]:
    plugins = {p: PluginSet() for p in POINTS}
    plugins["multiPoint"] = PluginSet([PluginRef(n, w) for n, w in DEFAULT_MULTIPOINT])
    return plugins


def merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet:
    """mergePluginSet: upstream's rules for combining a profile's plugin set with the default one."""
    disabled = list(custom.disabled) + list(default.disabled)
    disabled_set = set(disabled)
    custom_index = {p.name: i for i, p in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[PluginRef] = []
    if "*" not in disabled_set:
        for d in default.enabled:
            if d.name in disabled_set:
                continue
            if d.name in custom_index:
                i = custom_index[d.name]
                d = custom.enabled[i]
                replaced.add(i)
            enabled.append(d)
    for i, p in enumerate(custom.enabled):
        if i not in replaced:
            enabled.append(p)
    return PluginSet(enabled, disabled)


# The fields of v1's types; kube-scheduler decodes its configuration strictly, so any other field is an error.
TOP_FIELDS = ("apiVersion", "kind", "parallelism", "leaderElection", "clientConnection", "enableProfiling",
              "enableContentionProfiling", "percentageOfNodesToScore", "podInitialBackoffSeconds",
              "podMaxBackoffSeconds", "profiles", "extenders", "delayCacheUntilActive")
PROFILE_FIELDS = ("schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig")


# kube-scheduler decodes its configuration strictly: any other field is an error.
STRICT = 'unknown field "{key}" (kube-scheduler decodes its configuration strictly); expected one of {allowed}'


def _strict(raw: dict[str, Any], allowed: tuple[str, ...], field: str) -> None:
    fields.check_known(raw, field, allowed, message=STRICT, meta=False)


def _parse_plugin_set(raw: Any, field: str) -> PluginSet:
    if raw is None:
        return PluginSet()
    if not isinstance(raw, dict):
        raise InputError("expected an object with enabled and disabled lists", field=field)
    out = PluginSet()
    for which in ("enabled", "disabled"):
        items = raw.get(which) or []
        if not isinstance(items, list):
            raise InputError("expected a list of plugins", field=f"{field}.{which}")
        for i, item in enumerate(items):
            f = f"{field}.{which}[{i}]"
            if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item.get("name"):
                raise InputError("expected a plugin with a name", field=f)
            _strict(item, ("name", "weight"), f)
            if which == "enabled":
                w = fields.optional_integer(item.get("weight"), f"{f}.weight", lo=0, bits=fields.INT32,
                                            what="a non-negative int32 weight")
                if item["name"] in V1_INVALID_PLUGINS:
                    raise InputError(f'Invalid value: "{item["name"]}": was invalid in version "{API_VERSIONS[0]}" '
                                     f'(KubeSchedulerConfiguration is version "{API_VERSIONS[0]}")', field=f)
                out.enabled.append(PluginRef(item["name"], w))
            else:
                out.disabled.append(item["name"])
    unknown = set(raw) - {"enabled", "disabled"}
    if unknown:
        raise InputError(f"unknown field {sorted(unknown)[0]!r}", field=field)
    return out


def _percentage(raw: Any, field: str) -> int | None:
    value = fields.optional_integer(raw, field, what="an integer from 0 to 100")
    if value is not None and not 0 <= value <= 100:
        raise InputError(f"Invalid value: {value}: not in valid range [0-100]", field=field)
    return value


def parse_profile(raw: Any, field: str, only: bool = True) -> Profile:
    if not isinstance(raw, dict):
        raise InputError("expected a profile object", field=field)
    _strict(raw, PROFILE_FIELDS, field)
    name = raw.get("schedulerName")
    if name is None and only:
        name = DEFAULT_SCHEDULER  # SetDefaults: only a lone profile gets the default name
    if not isinstance(name, str) or not name:
        raise InputError("Required value", field=f"{field}.schedulerName")
    plugins_raw = raw.get("plugins")
    if plugins_raw is not None and not isinstance(plugins_raw, dict):
        raise InputError("expected an object of extension points", field=f"{field}.plugins")
    plugins_raw = plugins_raw or {}
    unknown = set(plugins_raw) - set(POINTS)
    if unknown:
        raise InputError(f"unknown extension point {sorted(unknown)[0]!r}; expected one of {', '.join(POINTS)}",
                         field=f"{field}.plugins")
    defaults = default_plugins()
    plugins = {p: merge_plugin_set(defaults[p], _parse_plugin_set(plugins_raw.get(p), f"{field}.plugins.{p}"))
               for p in POINTS}
    plugin_config: dict[str, dict[str, Any]] = {}
    pcs = raw.get("pluginConfig") or []
    if not isinstance(pcs, list):
        raise InputError("expected a list", field=f"{field}.pluginConfig")
    for i, pc in enumerate(pcs):
        f = f"{field}.pluginConfig[{i}]"
        if not isinstance(pc, dict) or not isinstance(pc.get("name"), str):
            raise InputError("expected an object with name and args", field=f)
        _strict(pc, ("name", "args"), f)
        if pc["name"] in plugin_config:
            raise InputError(f'Duplicate value: "{pc["name"]}"', field=f)
        if pc["name"] in V1_INVALID_PLUGINS:
            raise InputError(f'Invalid value: "{pc["name"]}": was invalid in version "{API_VERSIONS[0]}" '
                             f'(KubeSchedulerConfiguration is version "{API_VERSIONS[0]}")', field=f)
        args = pc.get("args") or {}
        if not isinstance(args, dict):
            raise InputError("expected an object", field=f"{f}.args")
        plugin_config[pc["name"]] = copy.deepcopy(args)
    return Profile(name, plugins, plugin_config,
                   _percentage(raw.get("percentageOfNodesToScore"), f"{field}.percentageOfNodesToScore"))


def default_config() -> SchedulerConfig:
    return SchedulerConfig([Profile(DEFAULT_SCHEDULER, default_plugins(), {})])


def parse_scheduler_config(raw: Any, source: str = "<config>") -> SchedulerConfig:
    """A v1 configuration; an old version (v1beta1/2/3) is converted first, with warnings that say so."""
    try:
        if is_old_scheduler_config(raw):
            version = raw["apiVersion"]
            raw, notes = convert_scheduler_config(raw)
            for note in notes:
                warn(note, file=source, obj=KIND)
            if Path(source).is_file():  # not for a document inside another (a variant, a sweep's grid point)
                warn(f"write the v1 file with: kubesched convert {source} -o yaml (from {version})", file=source,
                     obj=KIND)
        return _parse(raw, source)
    except InputError as e:
        raise e.located(file=source, obj=KIND) from None


def _parse(raw: Any, source: str) -> SchedulerConfig:
    if not isinstance(raw, dict):
        raise InputError("expected a KubeSchedulerConfiguration object")
    if raw.get("kind") != KIND:
        raise InputError(f"expected kind {KIND}, got {raw.get('kind')!r}", field="kind")
    if raw.get("apiVersion") not in API_VERSIONS:
        raise InputError(f"expected apiVersion {API_VERSIONS[0]}, got {raw.get('apiVersion')!r}", field="apiVersion")
    _strict(raw, TOP_FIELDS, "")
    profiles_raw = raw.get("profiles") or [{}]
    if not isinstance(profiles_raw, list):
        raise InputError("expected a list of profiles", field="profiles")
    profiles = [parse_profile(p, f"profiles[{i}]", only=len(profiles_raw) == 1) for i, p in enumerate(profiles_raw)]
    names = [p.scheduler_name for p in profiles]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise InputError(f'Duplicate value: "{n}"', field=f"profiles[{i}].schedulerName")
    _common_queue_sort(profiles_raw, profiles)
    parallelism = fields.optional_integer(raw.get("parallelism"), "parallelism", bits=fields.INT32)
    if parallelism is not None and parallelism <= 0:
        raise InputError(f"Invalid value: {parallelism}: should be an integer value greater than zero",
                         field="parallelism")
    if raw.get("extenders"):
        warn("extenders are not run by kubesched: the scheduling here is what the profiles' plugins decide alone",
             file=source, obj=KIND, field="extenders")

    def seconds(key: str, default: float) -> float:
        v = fields.optional_integer(raw.get(key), key, bits=fields.INT64, whole_floats=True,
                                    what="an integer number of seconds")
        if v is None:
            return default
        if v <= 0:
            raise InputError(f"Invalid value: {v}: must be greater than 0", field=key)
        return float(v)

    initial = seconds("podInitialBackoffSeconds", 1.0)
    maximum = seconds("podMaxBackoffSeconds", 10.0)
    if maximum < initial:
        raise InputError(f"Invalid value: {int(maximum)}: must be greater than or equal to PodInitialBackoffSeconds",
                         field="podMaxBackoffSeconds")
    return SchedulerConfig(profiles, _percentage(raw.get("percentageOfNodesToScore"), "percentageOfNodesToScore"),
                           initial, maximum, source, raw)


def _common_queue_sort(raw_profiles: list[Any], profiles: list[Profile]) -> None:
    """validateCommonQueueSort: one queue sort plugin, the same (with the same args) in every profile."""
    def queue_sort(p: Any) -> Any:
        plugins = p.get("plugins") if isinstance(p, dict) else None
        return plugins.get("queueSort") if isinstance(plugins, dict) else None

    first = queue_sort(raw_profiles[0])
    enabled = first.get("enabled") if isinstance(first, dict) else None
    if isinstance(enabled, list) and len(enabled) > 1:
        raise InputError(f"Invalid value: {len(enabled)}: only one queue sort plugin can be enabled",
                         field="profiles[0].plugins.queueSort.Enabled")
    name = enabled[0].get("name") if isinstance(enabled, list) and enabled and isinstance(enabled[0], dict) else None
    for i in range(1, len(raw_profiles)):
        if (queue_sort(raw_profiles[i]) or {}) != (first or {}):
            raise InputError("must be the same for all profiles", field=f"profiles[{i}].plugins.queueSort")
        if name and profiles[i].plugin_config.get(name) != profiles[0].plugin_config.get(name):
            raise InputError("queueSort must be the same for all profiles", field=f"profiles[{i}].pluginConfig.args")


def load_scheduler_config(path: str | None) -> SchedulerConfig:
    if path is None:
        return default_config()
    return parse_scheduler_config(read_document(path, KIND), source=path)
