"""KubeletConfiguration eviction settings: defaults, merging, and every validation error (exit 2, one line)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kubesched.cli import main
from kubesched.errors import InputError
from kubesched.kubelet.kubelet_config import parse_kubelet_config
from kubesched.kubelet.thresholds import ALLOCATABLE_MEMORY_AVAILABLE, MEMORY_AVAILABLE

BASE = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}


def cfg(**fields: object) -> dict[str, object]:
    return {**BASE, **fields}


def signals(c: dict[str, object]) -> list[tuple[str, str, float]]:
    return [(t.signal, str(t.value), t.grace_period) for t in parse_kubelet_config(c).thresholds]


def test_absent_eviction_hard_gets_linux_defaults_and_allocatable_copy() -> None:
    got = signals(cfg())
    assert ("memory.available", "100Mi", 0.0) in got
    assert ("nodefs.available", "10%", 0.0) in got
    assert ("nodefs.inodesFree", "5%", 0.0) in got
    assert ("imagefs.available", "15%", 0.0) in got
    # enforceNodeAllocatable defaults to [pods]: the hard memory threshold is copied.
    assert (ALLOCATABLE_MEMORY_AVAILABLE, "100Mi", 0.0) in got
    assert len(got) == 5


def test_explicit_empty_map_has_no_threshold_and_merge_fills_missing_defaults() -> None:
    assert signals(cfg(evictionHard={}, enforceNodeAllocatable=[])) == []
    merged = signals(cfg(evictionHard={"memory.available": "1Gi"}, mergeDefaultEvictionSettings=True,
                         enforceNodeAllocatable=[]))
    assert ("memory.available", "1Gi", 0.0) in merged and ("memory.available", "100Mi", 0.0) not in merged
    assert {s for s, _, _ in merged} == {"memory.available", "nodefs.available", "nodefs.inodesFree",
                                          "imagefs.available"}
    alone = signals(cfg(evictionHard={"memory.available": "1Gi"}, enforceNodeAllocatable=[]))
    assert alone == [("memory.available", "1Gi", 0.0)]


def test_soft_thresholds_get_grace_periods_and_min_reclaim_applies_to_all_of_a_signal() -> None:
    c = parse_kubelet_config(cfg(evictionHard={"memory.available": "1Gi"}, evictionSoft={"memory.available": "2Gi"},
                                 evictionSoftGracePeriod={"memory.available": "1m30s"},
                                 evictionMinimumReclaim={"memory.available": "500Mi"}))
    by = {(t.signal, t.is_hard): t for t in c.thresholds}
    assert by[(MEMORY_AVAILABLE, False)].grace_period == 90.0
    assert str(by[(MEMORY_AVAILABLE, True)].min_reclaim) == "500Mi"
    assert str(by[(MEMORY_AVAILABLE, False)].min_reclaim) == "500Mi"
    # The allocatable copy is made of hard thresholds only, and keeps the minimum reclaim.
    assert str(by[(ALLOCATABLE_MEMORY_AVAILABLE, True)].min_reclaim) == "500Mi"
    assert (ALLOCATABLE_MEMORY_AVAILABLE, False) not in by


def test_percentages_are_float32_and_zero_or_hundred_percent_disable() -> None:
    t = parse_kubelet_config(cfg(evictionHard={"nodefs.available": "10.5%"})).thresholds[0]
    assert t.value.percentage == float(np.float32(np.float32(10.5) / np.float32(100)))
    assert t.value.percentage != 0.105
    assert signals(cfg(evictionHard={"memory.available": "0%", "nodefs.available": "100%"},
                       evictionSoft={"memory.available": "0%"}, enforceNodeAllocatable=[])) == []


def test_other_settings_and_defaults() -> None:
    c = parse_kubelet_config(cfg(evictionMaxPodGracePeriod=30, evictionPressureTransitionPeriod="30s",
                                 localStorageCapacityIsolation=False, featureGates={"PodLevelResources": False}))
    assert c.max_pod_grace_period_seconds == 30
    assert c.pressure_transition_period == 30.0
    assert c.local_storage_capacity_isolation is False
    assert c.feature_enabled("PodLevelResources") is False
    d = parse_kubelet_config(cfg())
    assert d.pressure_transition_period == 300.0
    assert d.local_storage_capacity_isolation is True
    assert d.feature_enabled("PodLevelResources") is True


INVALID = [
    ("unsupported signal", {"evictionHard": {"mem.available": "150Mi"}}, "evictionHard.mem.available"),
    ("valid and invalid", {"evictionHard": {"memory.available": "150Mi", "invalid.foo": "1"}}, "invalid.foo"),
    ("negative hard", {"evictionHard": {"memory.available": "-150Mi"}}, "must be positive"),
    ("zero hard", {"evictionHard": {"memory.available": "0"}}, "must be positive"),
    ("negative percent", {"evictionHard": {"memory.available": "-15%"}}, ">= 0%"),
    ("percent over 100", {"evictionHard": {"memory.available": "150%"}}, "<= 100%"),
    ("malformed percent", {"evictionHard": {"memory.available": "ten%"}}, "percentage"),
    ("malformed quantity", {"evictionHard": {"memory.available": "lots"}}, "quantity"),
    ("soft negative", {"evictionSoft": {"memory.available": "-150Mi"},
                       "evictionSoftGracePeriod": {"memory.available": "30s"}}, "must be positive"),
    ("soft without grace", {"evictionSoft": {"memory.available": "150Mi"}}, "grace period must be specified"),
    ("negative grace", {"evictionSoft": {"memory.available": "150Mi"},
                        "evictionSoftGracePeriod": {"memory.available": "-30s"}}, "must be a positive value"),
    ("malformed grace", {"evictionSoft": {"memory.available": "150Mi"},
                         "evictionSoftGracePeriod": {"memory.available": "30"}}, "missing unit in duration"),
    ("grace unknown signal", {"evictionSoftGracePeriod": {"memory.free": "30s"}}, "unsupported eviction signal"),
    ("negative reclaim", {"evictionMinimumReclaim": {"memory.available": "-300Mi"}}, "negative eviction minimum"),
    ("zero percent reclaim", {"evictionMinimumReclaim": {"memory.available": "0%"}}, "must be positive"),
    ("reclaim unknown signal", {"evictionMinimumReclaim": {"disk.available": "1Gi"}}, "unsupported eviction signal"),
    ("number not string", {"evictionHard": {"pid.available": 1200}}, "expected a string"),
    ("map expected", {"evictionHard": ["memory.available<1Gi"]}, "expected a map"),
    ("max grace not int", {"evictionMaxPodGracePeriod": "30"}, "32-bit integer"),
    ("bad transition", {"evictionPressureTransitionPeriod": "5 minutes"}, 'unknown unit " minutes"'),
    ("unknown field", {"evictionHrad": {}}, "unknown field 'evictionHrad'"),
    ("bad allocatable option", {"enforceNodeAllocatable": ["pods", "bogus"]}, "not valid"),
    ("duplicated enforcement", {"enforceNodeAllocatable": ["pods", "pods"]}, "duplicated"),
    ("none with others", {"enforceNodeAllocatable": ["none", "pods"]}, "none"),
    ("system-reserved without cgroup", {"enforceNodeAllocatable": ["system-reserved"]}, "systemReservedCgroup"),
    ("bad kind", {"kind": "KubeletConfig"}, "expected kind KubeletConfiguration"),
    ("bad apiVersion", {"apiVersion": "kubelet.config.k8s.io/v1"}, "expected apiVersion"),
    ("bad bool", {"mergeDefaultEvictionSettings": "yes"}, "true or false"),
    ("bad gate", {"featureGates": {"PodLevelResources": "on"}}, "true or false"),
]


@pytest.mark.parametrize(("name", "fields", "needle"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_configuration_raises_input_error(name: str, fields: dict[str, object], needle: str) -> None:
    with pytest.raises(InputError) as e:
        parse_kubelet_config(cfg(**fields), "k.yaml")
    text = e.value.render()
    assert needle in text
    assert text.startswith("k.yaml: KubeletConfiguration")


@pytest.mark.parametrize(("name", "fields", "needle"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_configuration_exits_2_with_one_line(name: str, fields: dict[str, object], needle: str,
                                                     tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "kubelet.json"
    path.write_text(json.dumps(cfg(**fields)))
    code = main(["node-pressure", "--kubelet-config", str(path), "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("error: ") and str(path) in err and needle in err
    assert "Traceback" not in err


def test_bad_timeline_and_stats_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    k = tmp_path / "k.json"
    k.write_text(json.dumps(cfg()))
    cases = [
        ({"at": 0, "stat": {}}, "unknown field 'stat'"),
        ({"at": "soon"}, "expected seconds"),
        ({"at": 0, "stats": {"node": {"memory": {"availableBytes": -1}}}}, "stats.node.memory.availableBytes"),
        ({"at": 0, "stats": {"pods": {}}}, "expected a list"),
        ({"at": 0, "diskLayout": {"dedicatedImageFs": "yes"}}, "diskLayout"),
    ]
    for step, needle in cases:
        t = tmp_path / "t.json"
        t.write_text(json.dumps([step]))
        code = main(["node-pressure", "--kubelet-config", str(k), "--timeline", str(t), "-o", "json"])
        _, err = capsys.readouterr()
        assert code == 2, step
        assert len(err.strip().splitlines()) == 1 and needle in err and "Traceback" not in err, err
