"""What every simulated component sees of the simulation: the clock, the event heap, the shared parts.

The engine implements `Sim`; drivers take it (and never import the engine), so the wiring has one owner
and no import cycles.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kubesched.client.simulated import SimulatedAPIServer
    from kubesched.cluster.state import ClusterState
    from kubesched.sim.pods import PodRegistry
    from kubesched.sim.recorder import Recorder
    from kubesched.sim.scenario import Scenario

# Events at one instant run in this order; the scheduler drains its queue before the clock moves on.
(ORDER_SCENARIO, ORDER_POD, ORDER_USAGE, ORDER_SAMPLE, ORDER_KUBELET, ORDER_DESCHEDULER, ORDER_WAKE,
 ORDER_RECORD) = range(8)


class Sim(Protocol):
    scenario: Scenario
    cluster: ClusterState
    server: SimulatedAPIServer
    pods: PodRegistry
    rec: Recorder
    epoch: float
    t: float

    def push(self, t: float, order: int, fn: Callable[..., None], *args: Any) -> None:
        """Run `fn(*args)` at simulated time `t` (seconds since the start), after earlier orders."""
        ...

    def clock(self) -> float:
        """Unix seconds now."""
        ...

    def now_dt(self) -> datetime:
        ...
