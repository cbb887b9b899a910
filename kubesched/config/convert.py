"""Old configuration versions → the versions kubesched reads, the way the components converted them.

KubeSchedulerConfiguration v1beta1/v1beta2/v1beta3 → v1. The scheduler decoded an old file into its internal
config with *that version's* defaults (kubernetes `pkg/scheduler/apis/config/v1beta{1,2,3}/default_plugins.go`
and `conversion.go`); the result here is a v1 document that gives the same profiles under v1's defaults:

- v1beta3 had v1's multiPoint defaults and weights: the document is kept, with the apiVersion (of the
  document and of typed args) changed and the plugins v1 removed (EBSLimits, GCEPDLimits, AzureDiskLimits,
  CinderLimits) dropped;
- v1beta1 and v1beta2 had per-extension-point defaults, other score weights (TaintToleration, NodeAffinity and
  InterPodAffinity 1 where v1 has 3, 2, 2) and, in v1beta1, custom plugins appended after the defaults instead
  of replacing them in place. Each profile's effective plugin list per extension point is computed under the
  old rules (`mergePlugins` of that version) and written out whole, with the v1 multiPoint defaults disabled,
  so nothing changes meaning. v1beta1's NodeResourcesLeastAllocated / NodeResourcesMostAllocated /
  RequestedToCapacityRatio become NodeResourcesFit's scoringStrategy (as v1beta2 did); NodePreferAvoidPods and
  SelectorSpread, removed later, are dropped; NodeLabel and ServiceAffinity (removed in 1.23, no equivalent)
  are refused.

DeschedulerPolicy v1alpha1 → v1alpha2 follows kubernetes-sigs/descheduler `pkg/api/v1alpha1/conversion.go`
(V1alpha1ToInternal) and `strategymigration.go`: one profile `strategy-<Name>-profile` per enabled strategy,
with DefaultEvictor args from the policy's evict* flags and the strategy's nodeFit and threshold priority, and
the strategy's params as its plugin's args. Upstream built the profiles in Go map order (random); here they
are sorted by strategy name. Like upstream, maxNoOfPodsToEvictTotal and a taint strategy's includedTaints are
not carried over (a warning says so).

Every conversion returns notes: what a user should know about the result (printed as warnings, and as
comments at the top of `kubesched convert`'s output).
"""

from __future__ import annotations

import copy
from typing import Any

from kubesched.api import fields
from kubesched.errors import InputError

SCHEDULER_GROUP = "kubescheduler.config.k8s.io"
SCHEDULER_V1 = f"{SCHEDULER_GROUP}/v1"
SCHEDULER_OLD = {f"{SCHEDULER_GROUP}/v1beta1": "1.23", f"{SCHEDULER_GROUP}/v1beta2": "1.28",
                 f"{SCHEDULER_GROUP}/v1beta3": "1.29"}
DESCHEDULER_V1ALPHA1 = "descheduler/v1alpha1"
DESCHEDULER_V1ALPHA2 = "descheduler/v1alpha2"

# Plugins v1 refuses ("was invalid in version ...") and plugins removed from kube-scheduler since.
V1_INVALID_PLUGINS = ("AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits")
_DROPPED = {
    **{p: "in-tree volume limits were removed in v1 (NodeVolumeLimits counts CSI volumes)" for p in V1_INVALID_PLUGINS},
    "NodePreferAvoidPods": "removed in Kubernetes 1.24 with the preferAvoidPods node annotation",
    "SelectorSpread": "removed in Kubernetes 1.27; PodTopologySpread's system default constraints spread the same "
                      "pods",
}
_NO_EQUIVALENT = {"NodeLabel": "removed in Kubernetes 1.23; use node affinity in the pods instead",
                  "ServiceAffinity": "removed in Kubernetes 1.23; use pod affinity instead"}
_FIT_STRATEGIES = {"NodeResourcesLeastAllocated": "LeastAllocated", "NodeResourcesMostAllocated": "MostAllocated",
                   "RequestedToCapacityRatio": "RequestedToCapacityRatio"}

OLD_POINTS = ("preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score", "reserve", "permit",
              "preBind", "bind", "postBind")

_Plugin = tuple[str, int | None]

# v1beta1/default_plugins.go (Kubernetes 1.22, the DefaultPodTopologySpread gate GA, VolumeCapacityPriority off).
_V1BETA1_DEFAULTS: dict[str, list[_Plugin]] = {
    "queueSort": [("PrioritySort", None)],
    "preFilter": [("NodeResourcesFit", None), ("NodePorts", None), ("PodTopologySpread", None),
                  ("InterPodAffinity", None), ("VolumeBinding", None), ("NodeAffinity", None)],
    "filter": [("NodeUnschedulable", None), ("NodeName", None), ("TaintToleration", None), ("NodeAffinity", None),
               ("NodePorts", None), ("NodeResourcesFit", None), ("VolumeRestrictions", None), ("EBSLimits", None),
               ("GCEPDLimits", None), ("NodeVolumeLimits", None), ("AzureDiskLimits", None), ("VolumeBinding", None),
               ("VolumeZone", None), ("PodTopologySpread", None), ("InterPodAffinity", None)],
    "postFilter": [("DefaultPreemption", None)],
    "preScore": [("InterPodAffinity", None), ("PodTopologySpread", None), ("TaintToleration", None),
                 ("NodeAffinity", None)],
    "score": [("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1), ("InterPodAffinity", 1),
              ("NodeResourcesLeastAllocated", 1), ("NodeAffinity", 1), ("NodePreferAvoidPods", 10000),
              ("PodTopologySpread", 2), ("TaintToleration", 1)],
    "reserve": [("VolumeBinding", None)],
    "preBind": [("VolumeBinding", None)],
    "bind": [("DefaultBinder", None)],
}

# v1beta2/default_plugins.go (Kubernetes 1.27, its last release: PodSchedulingReadiness beta, on).
_V1BETA2_DEFAULTS: dict[str, list[_Plugin]] = {
    "preEnqueue": [("SchedulingGates", None)],
    "queueSort": [("PrioritySort", None)],
    "preFilter": [("NodeResourcesFit", None), ("NodePorts", None), ("VolumeRestrictions", None),
                  ("PodTopologySpread", None), ("InterPodAffinity", None), ("VolumeBinding", None),
                  ("VolumeZone", None), ("NodeAffinity", None)],
    "filter": [("NodeUnschedulable", None), ("NodeName", None), ("TaintToleration", None), ("NodeAffinity", None),
               ("NodePorts", None), ("NodeResourcesFit", None), ("VolumeRestrictions", None), ("EBSLimits", None),
               ("GCEPDLimits", None), ("NodeVolumeLimits", None), ("AzureDiskLimits", None), ("VolumeBinding", None),
               ("VolumeZone", None), ("PodTopologySpread", None), ("InterPodAffinity", None)],
    "postFilter": [("DefaultPreemption", None)],
    "preScore": [("InterPodAffinity", None), ("PodTopologySpread", None), ("TaintToleration", None),
                 ("NodeAffinity", None)],
    "score": [("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1), ("InterPodAffinity", 1),
              ("NodeResourcesFit", 1), ("NodeAffinity", 1), ("PodTopologySpread", 2), ("TaintToleration", 1)],
    "reserve": [("VolumeBinding", None)],
    "preBind": [("VolumeBinding", None)],
    "bind": [("DefaultBinder", None)],
}

# Top-level fields the old versions had and v1 does not (they only configured the process, not scheduling).
_REMOVED_TOP = ("healthzBindAddress", "metricsBindAddress", "algorithmSource", "disablePreemption",
                "hardPodAffinitySymmetricWeight", "schedulerName", "bindTimeoutSeconds")


def is_old_scheduler_config(raw: Any) -> bool:
    return isinstance(raw, dict) and raw.get("kind") == "KubeSchedulerConfiguration" \
        and isinstance(raw.get("apiVersion"), str) and raw["apiVersion"] in SCHEDULER_OLD


def is_old_descheduler_policy(raw: Any) -> bool:
    return isinstance(raw, dict) and raw.get("kind") == "DeschedulerPolicy" \
        and raw.get("apiVersion") == DESCHEDULER_V1ALPHA1


def _plugins_of(ps: Any, field: str, which: str) -> list[_Plugin]:
    out: list[_Plugin] = []
    for i, p in enumerate(fields.sequence(fields.mapping(ps, field).get(which), f"{field}.{which}")):
        if not isinstance(p, dict) or not isinstance(p.get("name"), str) or not p.get("name"):
            raise InputError("expected a plugin with a name", field=f"{field}.{which}[{i}]")
        w = fields.optional_integer(p.get("weight"), f"{field}.{which}[{i}].weight", what="an integer weight")
        out.append((p["name"], w))
    return out


def _merge_old(defaults: list[_Plugin], custom: Any, field: str, append: bool) -> list[_Plugin]:
    """mergePluginSet of v1beta1 (custom plugins appended) or v1beta2 (a re-enabled default replaced in place)."""
    disabled = {n for n, _ in _plugins_of(custom, field, "disabled")}
    enabled = _plugins_of(custom, field, "enabled")
    out: list[_Plugin] = []
    replaced: set[int] = set()
    index = {n: i for i, (n, _) in enumerate(enabled)}
    if "*" not in disabled:
        for name, weight in defaults:
            if name in disabled:
                continue
            if not append and name in index:
                i = index[name]
                out.append(enabled[i])
                replaced.add(i)
            else:
                out.append((name, weight))
    out.extend(p for i, p in enumerate(enabled) if i not in replaced)
    return out


def _ref(name: str, weight: int | None) -> dict[str, Any]:
    return {"name": name} if weight is None else {"name": name, "weight": weight}


def _v1_args(args: Any) -> Any:
    """Typed args: the apiVersion of an old version becomes v1 (the fields are the same)."""
    if isinstance(args, dict) and isinstance(args.get("apiVersion"), str) and args["apiVersion"] in SCHEDULER_OLD:
        args = {**args, "apiVersion": SCHEDULER_V1}
    return args


def convert_scheduler_config(raw: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A v1 KubeSchedulerConfiguration equivalent to an old-version one, and notes about the conversion."""
    version = str(raw.get("apiVersion"))
    short = version.rsplit("/", 1)[-1]
    notes = [f"KubeSchedulerConfiguration {short} is no longer read by kube-scheduler (removed in Kubernetes "
             f"{SCHEDULER_OLD[version]}); converted to v1"]
    out: dict[str, Any] = {"apiVersion": SCHEDULER_V1, "kind": "KubeSchedulerConfiguration"}
    for key, value in raw.items():
        if key in ("apiVersion", "kind", "profiles"):
            continue
        if key in _REMOVED_TOP:
            notes.append(f"{key} is not a v1 field (it configured the process, not scheduling): dropped")
            continue
        out[key] = copy.deepcopy(value)
    profiles_raw = fields.sequence(raw.get("profiles"), "profiles") or [{}]
    profiles = []
    for i, p in enumerate(profiles_raw):
        field = f"profiles[{i}]"
        prof = fields.mapping(p, field)
        if short == "v1beta3":
            profiles.append(_convert_profile_v1beta3(prof, field, notes))
        else:
            profiles.append(_convert_profile_per_point(prof, field, short, notes))
    out["profiles"] = profiles
    if short != "v1beta3":
        notes.append(f"{short}'s default plugins and score weights are written out per extension point (v1's "
                     "multiPoint defaults are disabled), so each profile runs the plugins it ran under "
                     f"{short}: TaintToleration, NodeAffinity and InterPodAffinity keep weight 1 (v1's defaults "
                     "are 3, 2 and 2)")
    return out, notes


def _convert_profile_v1beta3(prof: dict[str, Any], field: str, notes: list[str]) -> dict[str, Any]:
    out = copy.deepcopy(prof)
    plugins = fields.mapping(out.get("plugins"), f"{field}.plugins")
    for point, ps in plugins.items():
        pset = fields.mapping(ps, f"{field}.plugins.{point}")
        enabled = fields.sequence(pset.get("enabled"), f"{field}.plugins.{point}.enabled")
        kept = [e for e in enabled if not (isinstance(e, dict) and e.get("name") in V1_INVALID_PLUGINS)]
        for e in enabled:
            if isinstance(e, dict) and e.get("name") in V1_INVALID_PLUGINS:
                notes.append(f"{field}.plugins.{point}: {e['name']} dropped ({_DROPPED[e['name']]})")
        if len(kept) != len(enabled):
            pset["enabled"] = kept
    pcs = fields.sequence(out.get("pluginConfig"), f"{field}.pluginConfig")
    out_pcs = []
    for pc in pcs:
        if isinstance(pc, dict):
            if pc.get("name") in V1_INVALID_PLUGINS:
                continue
            pc = {**pc, "args": _v1_args(pc.get("args"))} if "args" in pc else pc
        out_pcs.append(pc)
    if "pluginConfig" in out:
        out["pluginConfig"] = out_pcs
    return out


def _convert_profile_per_point(prof: dict[str, Any], field: str, version: str, notes: list[str]) -> dict[str, Any]:
    defaults = _V1BETA1_DEFAULTS if version == "v1beta1" else _V1BETA2_DEFAULTS
    plugins_raw = fields.mapping(prof.get("plugins"), f"{field}.plugins")
    for point in plugins_raw:
        if point not in OLD_POINTS or (point == "preEnqueue" and version == "v1beta1"):
            raise InputError(f"unknown extension point {point!r} in {version}", field=f"{field}.plugins.{point}")
    explicit = {n for point in plugins_raw for n, _ in _plugins_of(plugins_raw[point], f"{field}.plugins.{point}",
                                                                 "enabled")}
    effective = {point: _merge_old(defaults.get(point, []), plugins_raw.get(point), f"{field}.plugins.{point}",
                                   append=version == "v1beta1") for point in OLD_POINTS}
    configs: dict[str, Any] = {}
    order: list[str] = []
    for i, pc in enumerate(fields.sequence(prof.get("pluginConfig"), f"{field}.pluginConfig")):
        pcd = fields.mapping(pc, f"{field}.pluginConfig[{i}]")
        name = pcd.get("name")
        if not isinstance(name, str):
            raise InputError("expected a plugin name", field=f"{field}.pluginConfig[{i}].name")
        configs[name] = copy.deepcopy(pcd.get("args"))
        order.append(name)

    # v1beta1's resource scorers became NodeResourcesFit's scoringStrategy in v1beta2.
    strategies = [(n, w) for n, w in effective["score"] if n in _FIT_STRATEGIES]
    if len(strategies) > 1:
        raise InputError(f"{' and '.join(n for n, _ in strategies)} are both enabled; v1 has one NodeResourcesFit "
                         "scoringStrategy, so this profile has no v1 equivalent (keep one of them)",
                         field=f"{field}.plugins.score")
    if strategies:
        old, weight = strategies[0]
        effective["score"] = [("NodeResourcesFit", weight) if n == old else (n, w) for n, w in effective["score"]]
        fit_args = fields.mapping(configs.get("NodeResourcesFit"), f"{field}.pluginConfig[NodeResourcesFit].args")
        old_args = fields.mapping(configs.pop(old, None), f"{field}.pluginConfig[{old}].args")
        strategy: dict[str, Any] = {"type": _FIT_STRATEGIES[old]}
        resources = old_args.get("resources")
        strategy["resources"] = copy.deepcopy(resources) if resources is not None else \
            [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
        if old == "RequestedToCapacityRatio":
            strategy["requestedToCapacityRatio"] = {"shape": copy.deepcopy(old_args.get("shape") or [])}
        configs["NodeResourcesFit"] = {k: v for k, v in fit_args.items() if k not in ("apiVersion", "kind")}
        configs["NodeResourcesFit"]["scoringStrategy"] = strategy
        if "NodeResourcesFit" not in order:
            order.append("NodeResourcesFit")
        if old != "NodeResourcesLeastAllocated" or old in explicit:
            notes.append(f"{field}: {old} became NodeResourcesFit with scoringStrategy {strategy['type']}")
    dropped_defaults: list[str] = []
    for point, items in effective.items():
        kept = []
        for name, weight in items:
            if name in _NO_EQUIVALENT:
                raise InputError(f"plugin {name} has no v1 equivalent: {_NO_EQUIVALENT[name]}",
                                 field=f"{field}.plugins.{point}")
            if name in _DROPPED:
                if name in explicit:
                    notes.append(f"{field}.plugins.{point}: {name} dropped ({_DROPPED[name]})")
                elif name not in dropped_defaults:
                    dropped_defaults.append(name)
                continue
            kept.append((name, weight))
        effective[point] = kept
    if dropped_defaults:
        note = (f"{version}'s default plugins {', '.join(dropped_defaults)} are not in v1 and are left out "
                "(removed from kube-scheduler since)")
        if note not in notes:
            notes.append(note)
    out: dict[str, Any] = {k: copy.deepcopy(v) for k, v in prof.items() if k not in ("plugins", "pluginConfig")}
    plugins: dict[str, Any] = {"multiPoint": {"disabled": [{"name": "*"}]}}
    for point in OLD_POINTS:
        if effective[point]:
            plugins[point] = {"enabled": [_ref(n, w) for n, w in effective[point]]}
    out["plugins"] = plugins
    pcs = [{"name": n, "args": _v1_args(configs[n])} for n in order if n in configs and n not in _DROPPED
           and n not in _FIT_STRATEGIES]
    if pcs:
        out["pluginConfig"] = pcs
    return out


# ---------------------------------------------------------------- DeschedulerPolicy v1alpha1 → v1alpha2

_BALANCE = ("HighNodeUtilization", "LowNodeUtilization", "RemoveDuplicates", "RemovePodsViolatingTopologySpreadConstraint")
_DESCHEDULE = ("PodLifeTime", "RemoveFailedPods", "RemovePodsHavingTooManyRestarts",
               "RemovePodsViolatingInterPodAntiAffinity", "RemovePodsViolatingNodeAffinity",
               "RemovePodsViolatingNodeTaints")
_V1ALPHA1_TOP = ("apiVersion", "kind", "strategies", "nodeSelector", "evictFailedBarePods", "evictLocalStoragePods",
                 "evictSystemCriticalPods", "evictDaemonSetPods", "ignorePvcPods", "maxNoOfPodsToEvictPerNode",
                 "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal")
_PARAMS = ("nodeResourceUtilizationThresholds", "nodeAffinityType", "podsHavingTooManyRestarts", "podLifeTime",
           "removeDuplicates", "failedPods", "includeSoftConstraints", "namespaces", "thresholdPriority",
           "thresholdPriorityClassName", "labelSelector", "nodeFit", "includePreferNoSchedule", "excludedTaints",
           "includedTaints")


def _check_fields(d: dict[str, Any], allowed: tuple[str, ...], field: str) -> None:
    fields.check_known(d, field, allowed, message='unknown field "{key}"', meta=False)


def _namespaces(raw: Any, field: str) -> dict[str, Any] | None:
    """v1alpha1NamespacesToInternal: a nil namespaces stays nil."""
    if raw is None:
        return None
    d = fields.mapping(raw, field)
    _check_fields(d, ("include", "exclude"), field)
    out: dict[str, Any] = {}
    if d.get("include") is not None:
        out["include"] = copy.deepcopy(d["include"])
    if d.get("exclude") is not None:
        out["exclude"] = copy.deepcopy(d["exclude"])
    return out


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    if value is not None and value != [] and value is not False:
        out[key] = copy.deepcopy(value)


def _strategy_args(name: str, params: dict[str, Any], field: str, notes: list[str]) -> dict[str, Any]:
    """StrategyParamsToPluginArgs."""
    args: dict[str, Any] = {}
    ns = _namespaces(params.get("namespaces"), f"{field}.namespaces")
    label_selector = params.get("labelSelector")
    if name == "RemovePodsViolatingNodeTaints":
        _put(args, "namespaces", ns)
        _put(args, "labelSelector", label_selector)
        _put(args, "includePreferNoSchedule", params.get("includePreferNoSchedule"))
        _put(args, "excludedTaints", params.get("excludedTaints"))
        if params.get("includedTaints"):
            notes.append(f"{field}.includedTaints is not carried over by upstream's conversion: dropped")
    elif name == "RemoveFailedPods":
        fp = fields.mapping(params.get("failedPods"), f"{field}.failedPods")
        _put(args, "namespaces", ns)
        _put(args, "labelSelector", label_selector)
        _put(args, "includingInitContainers", fp.get("includingInitContainers"))
        _put(args, "minPodLifetimeSeconds", fp.get("minPodLifetimeSeconds"))
        _put(args, "excludeOwnerKinds", fp.get("excludeOwnerKinds"))
        _put(args, "reasons", fp.get("reasons"))
    elif name == "RemovePodsViolatingNodeAffinity":
        _put(args, "namespaces", ns)
        _put(args, "labelSelector", label_selector)
        _put(args, "nodeAffinityType", params.get("nodeAffinityType"))
    elif name == "RemovePodsViolatingInterPodAntiAffinity":
        _put(args, "namespaces", ns)
        _put(args, "labelSelector", label_selector)
    elif name == "RemovePodsHavingTooManyRestarts":
        tm = fields.mapping(params.get("podsHavingTooManyRestarts"), f"{field}.podsHavingTooManyRestarts")
        _put(args, "namespaces", ns)
        _put(args, "labelSelector", label_selector)
        _put(args, "podRestartThreshold", tm.get("podRestartThreshold"))
        _put(args, "includingInitContainers", tm.get("includingInitContainers"))
    elif name == "PodLifeTime":
        pl = fields.mapping(params.get("podLifeTime"), f"{field}.podLifeTime")
        states = list(fields.sequence(pl.get("podStatusPhases"), f"{field}.podLifeTime.podStatusPhases")) + \
            list(fields.sequence(pl.get("states"), f"{field}.podLifeTime.states"))
        _put(args, "namespaces", ns)
        _put(args, "labelSelector", label_selector)
        _put(args, "maxPodLifeTimeSeconds", pl.get("maxPodLifeTimeSeconds"))
        _put(args, "states", states)
    elif name == "RemoveDuplicates":
        _put(args, "namespaces", ns)
        rd = fields.mapping(params.get("removeDuplicates"), f"{field}.removeDuplicates")
        _put(args, "excludeOwnerKinds", rd.get("excludeOwnerKinds"))
    elif name == "RemovePodsViolatingTopologySpreadConstraint":
        _put(args, "namespaces", ns)
        _put(args, "labelSelector", label_selector)
        args["constraints"] = ["DoNotSchedule"] + (["ScheduleAnyway"] if params.get("includeSoftConstraints") else [])
        args["topologyBalanceNodeFit"] = True
    else:  # LowNodeUtilization, HighNodeUtilization
        th = fields.mapping(params.get("nodeResourceUtilizationThresholds"), f"{field}.nodeResourceUtilizationThresholds")
        _put(args, "evictableNamespaces", ns)
        args["thresholds"] = copy.deepcopy(th.get("thresholds") or {})
        if name == "LowNodeUtilization":
            args["targetThresholds"] = copy.deepcopy(th.get("targetThresholds") or {})
            _put(args, "useDeviationThresholds", th.get("useDeviationThresholds"))
        _put(args, "numberOfNodes", th.get("numberOfNodes"))
    return args


def convert_descheduler_policy(raw: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A v1alpha2 DeschedulerPolicy equivalent to a v1alpha1 one (V1alpha1ToInternal), and notes."""
    notes = ["DeschedulerPolicy descheduler/v1alpha1 was removed from the descheduler; converted to v1alpha2 (one "
             "profile per enabled strategy, as the descheduler converted it)"]
    _check_fields(raw, _V1ALPHA1_TOP, "")
    flags = {}
    for key in ("evictLocalStoragePods", "evictDaemonSetPods", "evictSystemCriticalPods", "ignorePvcPods",
                "evictFailedBarePods"):
        flags[key] = raw.get(key) is not None and fields.boolean(raw[key], key)
    out: dict[str, Any] = {"apiVersion": DESCHEDULER_V1ALPHA2, "kind": "DeschedulerPolicy"}
    for key in ("nodeSelector", "maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictPerNamespace"):
        if raw.get(key) is not None:
            out[key] = copy.deepcopy(raw[key])
    if raw.get("maxNoOfPodsToEvictTotal") is not None:
        notes.append("maxNoOfPodsToEvictTotal is not carried over by the descheduler's v1alpha1 conversion: dropped "
                     "(set it again in the v1alpha2 policy if you want it)")
    strategies = fields.mapping(raw.get("strategies"), "strategies")
    profiles = []
    for name in sorted(strategies, key=str):
        field = f"strategies.{name}"
        strategy = fields.mapping(strategies[name], field)
        _check_fields(strategy, ("enabled", "weight", "params"), field)
        if name not in _BALANCE and name not in _DESCHEDULE:
            raise InputError(f"unknown strategy name: {name}; known: {', '.join(sorted(_BALANCE + _DESCHEDULE))}",
                             field=field)
        enabled = strategy.get("enabled") is not None and fields.boolean(strategy["enabled"], f"{field}.enabled")
        if not enabled:
            continue
        params_raw = strategy.get("params")
        params = fields.mapping(params_raw, f"{field}.params")
        _check_fields(params, _PARAMS, f"{field}.params")
        if params.get("thresholdPriority") is not None and params.get("thresholdPriorityClassName"):
            raise InputError(f"priority threshold misconfigured for plugin {name}: only one of thresholdPriority and "
                             "thresholdPriorityClassName can be set", field=f"{field}.params")
        evictor: dict[str, Any] = {k: v for k, v in flags.items() if v}
        node_fit = params.get("nodeFit", False) if name != "PodLifeTime" else False
        if node_fit:
            evictor["nodeFit"] = node_fit
        if params_raw is not None:
            threshold: dict[str, Any] = {}
            if params.get("thresholdPriority") is not None:
                threshold["value"] = params["thresholdPriority"]
            if params.get("thresholdPriorityClassName"):
                threshold["name"] = params["thresholdPriorityClassName"]
            if threshold:
                evictor["priorityThreshold"] = threshold
        point = "balance" if name in _BALANCE else "deschedule"
        profiles.append({
            "name": f"strategy-{name}-profile",
            "pluginConfig": [{"name": "DefaultEvictor", "args": evictor},
                             {"name": name, "args": _strategy_args(name, params, f"{field}.params", notes)}],
            "plugins": {"filter": {"enabled": ["DefaultEvictor"]}, "preEvictionFilter": {"enabled": ["DefaultEvictor"]},
                        point: {"enabled": [name]}},
        })
    if len(profiles) > 1:
        notes.append("profiles are in strategy-name order (the descheduler built them in Go map order, which varies "
                     "run to run)")
    out["profiles"] = profiles
    return out, notes
