"""Typed plugin args (kubesched.config.plugin_args) and the field readers they use (kubesched.api.fields)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kubesched.api import fields
from kubesched.cluster.state import ClusterState
from kubesched.config.descheduler_policy import parse_descheduler_policy
from kubesched.config.plugin_args import NoArgs, PluginArgs, build_args
from kubesched.config.scheduler_config import default_config
from kubesched.descheduler.registry import BUILTIN as DESCHEDULER_BUILTIN
from kubesched.descheduler.registry import default_registry as descheduler_registry
from kubesched.errors import InputError
from kubesched.scheduler.framework import Handle
from kubesched.scheduler.registry import BUILTIN as SCHEDULER_BUILTIN
from kubesched.scheduler.registry import default_registry as scheduler_registry
from kubesched.scheduler.runtime import Framework

SCHEDULER_PLUGINS = sorted(SCHEDULER_BUILTIN)
DESCHEDULER_PLUGINS = sorted(DESCHEDULER_BUILTIN)


def _class(name: str) -> Any:
    return scheduler_registry().get(name) if name in SCHEDULER_BUILTIN else descheduler_registry().get(name)


@pytest.mark.parametrize("name", SCHEDULER_PLUGINS + DESCHEDULER_PLUGINS)
def test_every_builtin_plugin_declares_frozen_typed_args(name: str) -> None:
    cls = _class(name)
    args_type = cls.Args
    assert isinstance(args_type, type) and issubclass(args_type, PluginArgs), name
    default = args_type()
    assert not hasattr(default, "__dict__")  # slotted
    for f in dataclasses.fields(default)[:1]:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(default, f.name, None)
    with pytest.raises(InputError) as e:
        args_type.from_raw({"surelyNotAField": 1}, "profiles[0].pluginConfig[0].args")
    # The unknown field is named (as the error's field, or in the message of the args object's error).
    assert e.value.field == "profiles[0].pluginConfig[0].args.surelyNotAField" or (
        e.value.field == "profiles[0].pluginConfig[0].args" and "surelyNotAField" in e.value.message)


@pytest.mark.parametrize("name", SCHEDULER_PLUGINS + DESCHEDULER_PLUGINS)
def test_type_meta_is_allowed_in_args(name: str) -> None:
    args_type = _class(name).Args
    try:
        args_type.from_raw({"apiVersion": "v1", "kind": "X"})
    except InputError as e:  # a plugin whose args need a field reports that field, never apiVersion/kind
        assert e.field not in ("apiVersion", "kind"), e


def test_the_framework_hands_each_plugin_its_typed_args() -> None:
    cfg = default_config()
    fwk = Framework(cfg.profiles[0], scheduler_registry(), Handle(ClusterState()))
    assert fwk.plugins
    for pl in fwk.plugins.values():
        assert isinstance(pl.args, type(pl).Args), pl.name


def test_the_policy_loader_builds_each_plugin_s_args_once() -> None:
    doc = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [{
        "name": "p", "plugins": {"balance": {"enabled": ["LowNodeUtilization", "RemoveDuplicates"]},
                                 "deschedule": {"enabled": ["PodLifeTime"]}},
        "pluginConfig": [
            {"name": "LowNodeUtilization", "args": {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 70}}},
            {"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 60}},
            {"name": "DefaultEvictor", "args": {"minPodAge": "5m", "priorityThreshold": {"value": 100}}}]}]}
    prof = parse_descheduler_policy(doc, "<t>", descheduler_registry()).profiles[0]
    lnu = prof.plugin_config["LowNodeUtilization"]
    assert type(lnu).__name__ == "LowNodeUtilizationArgs" and lnu.target_thresholds == {"cpu": 70.0}
    assert prof.plugin_config["PodLifeTime"].max_pod_life_time_seconds == 60
    evictor = prof.plugin_config["DefaultEvictor"]
    assert evictor.min_pod_age == 300 * 10**9 and evictor.priority_threshold.value == 100
    assert type(prof.plugin_config["RemoveDuplicates"]).__name__ == "RemoveDuplicatesArgs"


@pytest.mark.parametrize(("name", "want"), [
    ("NodeResourcesFit", {"scoringStrategy": {"type": "LeastAllocated", "resources": [
        {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}}),
    ("DefaultPreemption", {"minCandidateNodesPercentage": 10, "minCandidateNodesAbsolute": 100}),
    ("VolumeBinding", {"bindTimeoutSeconds": 600}),
    ("DynamicResources", {"filterTimeout": "10s"}),
    ("TargetLoadPacking", {"metricProvider": {"type": "KubernetesMetricsServer"}, "defaultRequests": {"cpu": "1000m"},
                           "defaultRequestsMultiplier": "1.5", "targetUtilization": 40}),
    ("LoadAwareScheduling", {"filterExpiredNodeMetrics": True, "nodeMetricExpirationSeconds": 180,
                             "enableScheduleWhenNodeMetricsExpired": False, "resourceWeights": {"cpu": 1, "memory": 1},
                             "usageThresholds": {"cpu": 65, "memory": 95},
                             "estimatedScalingFactors": {"cpu": 85, "memory": 70}}),
    ("RemoveFailedPods", {"minPodLifetimeSeconds": 3600}),
    ("DefaultEvictor", {}),
    ("NodeName", None),
])
def test_default_args_are_the_typed_defaults(name: str, want: Any) -> None:
    cls = _class(name)
    assert cls.default_args() == want
    if want is not None:
        # The printed defaults read back as the defaults.
        assert cls.Args.from_raw(want) == cls.Args.from_raw(None)


def test_plugins_without_args_name_themselves() -> None:
    with pytest.raises(InputError, match="unknown field 'x': plugin NodePorts takes no args") as e:
        build_args(_class("NodePorts"), {"x": 1}, "args")
    assert e.value.field == "args.x"
    assert issubclass(_class("PrioritySort").Args, NoArgs)


def test_a_plugin_without_args_type_gets_the_document() -> None:
    class Mine:
        pass

    assert build_args(Mine, {"a": [1]}, "args") == {"a": [1]}
    assert build_args(Mine, None, "args") == {}


# ---------------------------------------------------------------- the readers


def test_readers_name_the_path_and_what_was_expected() -> None:
    a = fields.Fields({"n": "ten", "items": [1, "x"], "o": {"k": 1}}, "spec", allowed=("n", "items", "o"))
    with pytest.raises(InputError) as e:
        a.integer("n")
    assert (e.value.field, e.value.message) == ("spec.n", "expected an integer, got 'ten'")
    with pytest.raises(InputError) as e:
        a.strings("items")
    assert (e.value.field, e.value.message) == ("spec.items[0]", "expected a string, got 1")
    with pytest.raises(InputError) as e:
        a.object("o", ("j",))
    assert e.value.field == "spec.o.k" and e.value.message.startswith("unknown field 'k'")
    with pytest.raises(InputError) as e:
        fields.Fields({"x": 1}, "args", allowed=("a", "b"))
    assert e.value.message == "unknown field 'x'; expected one of a, b"
    fields.Fields({"kind": "X", "apiVersion": "v"}, "args", allowed=("a",))  # type meta is allowed by default


def test_integer_ranges_and_go_types() -> None:
    assert fields.integer(3.0, "f", whole_floats=True) == 3
    with pytest.raises(InputError, match="expected an integer, got 3.5"):
        fields.integer(3.5, "f", whole_floats=True)
    with pytest.raises(InputError, match="expected an integer from 0 to 100, got 101"):
        fields.integer(101, "f", lo=0, hi=100)
    with pytest.raises(InputError, match="integer 2147483648 out of range for int32"):
        fields.integer(2**31, "f", bits=32)
    with pytest.raises(InputError, match="expected a 32-bit integer, got 2147483648"):
        fields.integer(2**31, "f", bits=32, what="a 32-bit integer")
    with pytest.raises(InputError, match="expected true or false, got 'yes'"):
        fields.boolean("yes", "f")
    assert fields.integer("42", "f", strings=True) == 42
    assert fields.label_map({"a": None, "b": True, "c": 3}, "f") == {"a": "", "b": "true", "c": "3"}
