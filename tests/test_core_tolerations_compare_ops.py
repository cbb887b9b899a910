"""Gt/Lt tolerations (TaintTolerationComparisonOperators, alpha and off by default): parsed, tolerate nothing."""

from __future__ import annotations

import pytest

from kubesched.api.objects import Taint, parse_pod
from kubesched.errors import InputError


def _pod(tolerations: list[dict]) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [], "tolerations": tolerations}}


def test_gt_lt_tolerations_parse_and_tolerate_nothing() -> None:
    pod = parse_pod(_pod([{"key": "sla", "operator": "Gt", "value": "750", "effect": "NoSchedule"},
                          {"key": "sla", "operator": "Lt", "value": "950", "effect": "NoSchedule"},
                          {"key": "dedicated", "operator": "Equal", "value": "user1", "effect": "NoSchedule"}]))
    gt, lt, eq = pod.tolerations
    assert (gt.operator, lt.operator) == ("Gt", "Lt")
    # With the gate off a numeric toleration does not tolerate even a taint it would satisfy numerically.
    assert not gt.tolerates(Taint("sla", "950", "NoSchedule"))
    assert not lt.tolerates(Taint("sla", "800", "NoSchedule"))
    assert eq.tolerates(Taint("dedicated", "user1", "NoSchedule"))


def test_unknown_toleration_operator_is_an_input_error() -> None:
    with pytest.raises(InputError, match="operator"):
        parse_pod(_pod([{"key": "k", "operator": "Contains", "value": "v"}]))
