"""`kubesched node-pressure` on the bundled example: the JSON contract and the readable tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubesched.cli import main

EXAMPLE = Path(__file__).parent.parent / "examples" / "kubelet"
ARGS = ["node-pressure", "--kubelet-config", str(EXAMPLE / "kubelet-config.yaml"), "--snapshot",
        str(EXAMPLE / "snapshot.yaml"), "--timeline", str(EXAMPLE / "timeline.json"), "--now", "2025-06-01T12:00:00Z"]


def test_example_timeline_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*ARGS, "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["node"] == "worker-1"
    steps = {s["at"]: s for s in out["steps"]}
    # Soft memory pressure from +30s: the condition at once, the eviction after the 1m30s grace period.
    assert steps[30]["conditions"] == ["MemoryPressure"] and steps[30]["evicted"] == []
    assert steps[30]["taints"] == [{"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"}]
    assert steps[30]["admit"] == {"batch/adhoc": False}
    assert steps[130]["thresholdsMet"] == ["memory.available"]
    assert steps[130]["evicted"] == ["shop/cache-0"]
    assert steps[130]["gracePeriodSeconds"] == {"shop/cache-0": 10}  # min(30, terminationGracePeriodSeconds 10)
    assert steps[130]["rankOrder"] == ["shop/cache-0", "batch/report-7", "shop/api-0"]
    assert "Container redis was using 4Gi, request is 512Mi" in steps[130]["podStatus"]["shop/cache-0"]["message"]
    # Held for the 2m transition period after the last observation at +130s.
    assert steps[140]["conditions"] == ["MemoryPressure"]
    assert steps[300]["conditions"] == [] and steps[300]["admit"] == {"batch/adhoc": True}


def test_example_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(ARGS) == 0
    out = capsys.readouterr().out
    assert "eviction thresholds" in out and "memory.available" in out and "MemoryPressure" in out
    assert "shop/cache-0: Failed (Evicted)" in out


def test_thresholds_only_without_timeline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    k = tmp_path / "k.yaml"
    k.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                 "evictionHard: {memory.available: 10%}\nenforceNodeAllocatable: []\n")
    assert main(["node-pressure", "--kubelet-config", str(k), "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["steps"] == []
    assert out["thresholds"] == [{"signal": "memory.available", "operator": "LessThan",
                                  "value": {"percentage": pytest.approx(0.1)}, "gracePeriod": "0s", "minReclaim": None}]
