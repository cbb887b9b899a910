"""Thresholds, Go quantities, and signals from a Summary API document (Go durations: test_core_duration.py)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kubesched.kubelet.quantities import BINARY_SI, DECIMAL_SI, binary, decimal, parse_go_quantity, quantity_string
from kubesched.kubelet.signals import make_signal_observations, parse_summary
from kubesched.kubelet.thresholds import (
    CONTAINERFS_AVAILABLE,
    IMAGEFS_AVAILABLE,
    MEMORY_AVAILABLE,
    NODEFS_AVAILABLE,
    OP_LESS_THAN,
    Observation,
    Threshold,
    ThresholdValue,
    by_eviction_priority,
    node_conditions_observed_since,
    parse_threshold_config,
    threshold_quantity,
    thresholds_met,
    thresholds_met_grace_period,
    thresholds_updated_stats,
    update_container_fs_thresholds,
)

GI = 2**30
MI = 2**20


@pytest.mark.parametrize(("raw", "printed"), [
    ("2Gi", "2Gi"), ("1.5Gi", "1536Mi"), ("1200", "1200"), ("1000", "1k"), ("100m", "100m"), ("1.5", "1500m"),
    ("0.5Ki", "512"), ("100M", "100M"), ("1e3", "1e3"), ("0", "0"),
])
def test_quantities_print_like_apimachinery(raw: str, printed: str) -> None:
    assert str(parse_go_quantity(raw)) == printed


def test_new_quantities_print_in_their_format() -> None:
    assert str(binary(1610612736)) == "1536Mi"
    assert str(binary(1100000000)) == "1100000000"  # not a multiple of 1024
    assert str(binary(512)) == "512"  # below 1024: DecimalSI
    assert str(decimal(500)) == "500"
    assert quantity_string(Fraction(-GI), BINARY_SI) == "-1Gi"
    assert quantity_string(Fraction(3000), DECIMAL_SI) == "3k"


def hard(signal: str, q: str, reclaim: str | None = None) -> Threshold:
    return Threshold(signal, OP_LESS_THAN, ThresholdValue(parse_go_quantity(q)), 0,
                     None if reclaim is None else ThresholdValue(parse_go_quantity(reclaim)))


def obs(available: int, capacity: int = 64 * GI) -> Observation:
    return Observation(binary(available), binary(capacity))


def test_threshold_is_met_strictly_below_and_held_by_min_reclaim() -> None:
    t = hard(MEMORY_AVAILABLE, "1Gi", "500Mi")
    assert thresholds_met([t], {MEMORY_AVAILABLE: obs(GI - 1)}, False) == [t]
    assert thresholds_met([t], {MEMORY_AVAILABLE: obs(GI)}, False) == []  # 1Gi is not < 1Gi
    # With minimum reclaim enforced, 1.2Gi is still below 1Gi + 500Mi.
    assert thresholds_met([t], {MEMORY_AVAILABLE: obs(int(1.2 * GI))}, True) == [t]
    assert thresholds_met([t], {MEMORY_AVAILABLE: obs(GI + 500 * MI)}, True) == []
    # No observation, no threshold met.
    assert thresholds_met([t], {}, False) == []


def test_percentage_threshold_truncates_float32_product() -> None:
    t = parse_threshold_config([], {"memory.available": "20%"}, {}, {}, {})[0]
    q = threshold_quantity(t.value, binary(1000 * MI))
    assert q.value == 209715203  # float32(0.2) is slightly above 0.2
    assert thresholds_met([t], {MEMORY_AVAILABLE: obs(209715202, 1000 * MI)}, False) == [t]
    assert thresholds_met([t], {MEMORY_AVAILABLE: obs(209715203, 1000 * MI)}, False) == []


def test_grace_period_and_transition_period_are_strict() -> None:
    soft = Threshold(MEMORY_AVAILABLE, OP_LESS_THAN, ThresholdValue(parse_go_quantity("2Gi")), 120 * 10**9)
    assert thresholds_met_grace_period({soft: 100.0}, 219.0) == []
    assert thresholds_met_grace_period({soft: 100.0}, 220.0) == [soft]
    assert node_conditions_observed_since({"MemoryPressure": 100.0}, 300.0, 399.0) == ["MemoryPressure"]
    assert node_conditions_observed_since({"MemoryPressure": 100.0}, 300.0, 400.0) == []


def test_updated_stats_needs_a_newer_observation_unless_time_is_zero() -> None:
    t = hard(MEMORY_AVAILABLE, "1Gi")
    old = {MEMORY_AVAILABLE: Observation(binary(1), binary(2), 50.0)}
    assert thresholds_updated_stats([t], {MEMORY_AVAILABLE: Observation(binary(1), binary(2), 50.0)}, old) == []
    assert thresholds_updated_stats([t], {MEMORY_AVAILABLE: Observation(binary(1), binary(2), 60.0)}, old) == [t]
    assert thresholds_updated_stats([t], {MEMORY_AVAILABLE: Observation(binary(1), binary(2))}, old) == [t]


def test_memory_thresholds_are_reclaimed_first() -> None:
    ordered = by_eviction_priority([hard(NODEFS_AVAILABLE, "1Gi"), hard(MEMORY_AVAILABLE, "1Gi")])
    assert [t.signal for t in ordered] == [MEMORY_AVAILABLE, NODEFS_AVAILABLE]


def test_containerfs_thresholds_follow_the_disk_layout() -> None:
    base = [hard(NODEFS_AVAILABLE, "1Gi"), hard(IMAGEFS_AVAILABLE, "5Gi")]

    def containerfs(image_fs: bool, split: bool) -> list[str]:
        return [str(t.value) for t in update_container_fs_thresholds(base, image_fs, split)
                if t.signal == CONTAINERFS_AVAILABLE and t.value.quantity is not None]

    assert containerfs(False, False) == ["1Gi"]  # one filesystem: copies of nodefs
    assert containerfs(True, True) == ["1Gi"]  # writable layers split from images: nodefs
    assert containerfs(True, False) == ["5Gi"]  # a dedicated imagefs holds the writable layers
    assert containerfs(False, True) == []


SUMMARY = {
    "node": {
        "nodeName": "n1",
        "memory": {"availableBytes": 1 * GI, "workingSetBytes": 3 * GI},
        "systemContainers": [{"name": "pods", "memory": {"availableBytes": 512 * MI, "workingSetBytes": 2 * GI}}],
        "fs": {"availableBytes": 10 * GI, "capacityBytes": 100 * GI, "inodesFree": 1000, "inodes": 5000},
        "runtime": {"imageFs": {"availableBytes": 20 * GI, "capacityBytes": 50 * GI}},
        "rlimit": {"maxpid": 4000, "curproc": 1500},
    },
    "pods": [],
}


def test_signals_from_a_summary() -> None:
    o = make_signal_observations(parse_summary(SUMMARY))
    assert o["memory.available"].available.value == GI and o["memory.available"].capacity.value == 4 * GI
    assert o["allocatableMemory.available"].available.value == 512 * MI
    assert o["nodefs.available"].capacity.value == 100 * GI
    assert str(o["nodefs.inodesFree"].available) == "1k"  # inodes are DecimalSI
    assert o["imagefs.available"].available.value == 20 * GI
    assert "imagefs.inodesFree" not in o  # no inode fields: no observation
    assert "containerfs.available" not in o
    assert o["pid.available"].available.value == 2500


def test_missing_fields_give_no_observation() -> None:
    o = make_signal_observations(parse_summary({"node": {"memory": {"availableBytes": GI}, "fs": {"availableBytes": 1}}}))
    assert o == {}
