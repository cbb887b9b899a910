"""Pods waiting at Permit: kube-scheduler's waiting pods map, with timers on the scheduler's clock.

Mirrors kubernetes/kubernetes `pkg/scheduler/framework/runtime/waiting_pods_map.go` (and the parts of
`framework.go` that use it: RunPermitPlugins clamps each plugin's timeout to 15 minutes; WaitOnPermit;
IterateOverWaitingPods, GetWaitingPod, RejectWaitingPod). A pod is added when a Permit plugin answered
Wait and none rejected; each waiting plugin gets a timer. `allow(plugin)` removes that plugin's timer and,
once no plugin is pending, signals success; `reject(plugin, msg)` stops every timer and signals
Unschedulable; a timer that fires rejects with "rejected due to timeout after waiting <d> at plugin <p>".
Only the first signal counts (upstream sends on a channel of size 1 without blocking).

Upstream's timers are goroutines; here they are deadlines on the scheduler's clock that `fire_timers(now)`
fires in (deadline, arrival) order, so the one-shot commands and the simulator run them on their virtual
clock, deterministically. Pods that received their signal are handed back in signal order by
`take_signalled()`; the scheduler then finishes (or fails) their binding cycle. Iteration follows arrival
order (upstream iterates a Go map, in no particular order).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kubesched.api.duration import SECOND, format_go_duration
from kubesched.api.objects import Pod

# framework.go maxTimeout: no plugin may make a pod wait longer than this.
MAX_PERMIT_TIMEOUT = 15 * 60.0


@dataclass(frozen=True, slots=True)
class PermitSignal:
    """What a waiting pod was told: allowed, or rejected by `plugin` with `message`."""

    allowed: bool
    plugin: str = ""
    message: str = ""
    timed_out: bool = False


def waiting_key(pod: Pod) -> str:
    """Waiting pods are keyed by UID, as upstream; pods without one (hand-written snapshots) by namespace/name."""
    return pod.uid or pod.key


class WaitingPod:
    """framework.WaitingPod: a pod assumed on `node_name`, waiting for its Permit plugins to allow it."""

    __slots__ = ("pod", "node_name", "since", "timeouts", "_deadlines", "_signal", "_on_signal", "seq", "binding")

    def __init__(self, pod: Pod, node_name: str, plugin_timeouts: dict[str, float], now: float, seq: int,
                 on_signal: Callable[[WaitingPod], None]) -> None:
        self.pod = pod
        self.node_name = node_name
        self.since = now
        self.timeouts = dict(plugin_timeouts)
        self._deadlines = {name: now + t for name, t in plugin_timeouts.items()}
        self._signal: PermitSignal | None = None
        self._on_signal = on_signal
        self.seq = seq
        # The scheduler's parked binding cycle (opaque here).
        self.binding: Any = None

    # ------------------------------------------------------------ upstream's WaitingPod interface

    def get_pod(self) -> Pod:
        return self.pod

    def get_pending_plugins(self) -> list[str]:
        return list(self._deadlines)

    def allow(self, plugin: str) -> None:
        """Allow by `plugin`; success is signalled once no plugin is pending."""
        self._deadlines.pop(plugin, None)
        if not self._deadlines:
            self._send(PermitSignal(True))

    def reject(self, plugin: str, message: str) -> None:
        """Declare the pod unschedulable (every timer stops)."""
        self._deadlines.clear()
        self._send(PermitSignal(False, plugin, message))

    # ------------------------------------------------------------ timers and the signal

    @property
    def signal(self) -> PermitSignal | None:
        return self._signal

    def next_deadline(self) -> float | None:
        if self._signal is not None or not self._deadlines:
            return None
        return min(self._deadlines.values())

    def fire_due(self, now: float) -> bool:
        """Fire the earliest timer if it is due: the pod is rejected for timing out."""
        due = self.next_deadline()
        if due is None or due > now:
            return False
        plugin = min(self._deadlines, key=lambda name: self._deadlines[name])
        message = (f"rejected due to timeout after waiting {format_go_duration(round(self.timeouts[plugin] * SECOND))} "
                   f"at plugin {plugin}")
        self._deadlines.clear()
        self._send(PermitSignal(False, plugin, message, timed_out=True))
        return True

    def _send(self, signal: PermitSignal) -> None:
        if self._signal is None:  # a full channel drops later sends
            self._signal = signal
            self._on_signal(self)


class WaitingPods:
    """The waiting pods of every profile of one scheduler (upstream shares one map between profiles)."""

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}
        self._signalled: list[WaitingPod] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._pods)

    def __bool__(self) -> bool:
        return bool(self._pods)

    def __iter__(self) -> Iterator[WaitingPod]:
        return iter(list(self._pods.values()))

    def add(self, pod: Pod, node_name: str, plugin_timeouts: dict[str, float], now: float) -> WaitingPod:
        """A pod starts waiting: one timer per waiting plugin, each at most MAX_PERMIT_TIMEOUT."""
        self._seq += 1
        timeouts = {name: min(max(t, 0.0), MAX_PERMIT_TIMEOUT) for name, t in plugin_timeouts.items()}
        wp = WaitingPod(pod, node_name, timeouts, now, self._seq, self._note_signal)
        self._pods[waiting_key(pod)] = wp
        return wp

    def _note_signal(self, wp: WaitingPod) -> None:
        self._signalled.append(wp)

    def remove(self, wp: WaitingPod) -> None:
        key = waiting_key(wp.pod)
        if self._pods.get(key) is wp:
            del self._pods[key]

    def get(self, uid: str) -> WaitingPod | None:
        """GetWaitingPod: by UID (or namespace/name for pods without one)."""
        return self._pods.get(uid)

    def of(self, pod: Pod) -> WaitingPod | None:
        return self._pods.get(waiting_key(pod))

    def iterate(self, callback: Callable[[WaitingPod], None]) -> None:
        """IterateOverWaitingPods."""
        for wp in list(self._pods.values()):
            callback(wp)

    def reject_removed(self, pod: Pod) -> bool:
        """RejectWaitingPod for a pod that was deleted: rejected with "removed"; False if it was not waiting."""
        wp = self._pods.get(waiting_key(pod))
        if wp is None:
            return False
        wp.reject("", "removed")
        return True

    def next_deadline(self) -> float | None:
        deadlines = [d for wp in self._pods.values() if (d := wp.next_deadline()) is not None]
        return min(deadlines) if deadlines else None

    def fire_timers(self, now: float) -> int:
        """Fire every timer due at `now`, earliest first (ties: the pod that started waiting first)."""
        due = sorted((d, wp.seq, wp) for wp in self._pods.values()
                     if (d := wp.next_deadline()) is not None and d <= now)
        fired = 0
        for _, _, wp in due:
            fired += wp.fire_due(now)
        return fired

    def take_signalled(self) -> list[WaitingPod]:
        """Pods that received their signal since the last call, in signal order, removed from the map."""
        out = [wp for wp in self._signalled if self._pods.get(waiting_key(wp.pod)) is wp]
        self._signalled = []
        for wp in out:
            self.remove(wp)
        return out

    @property
    def has_signalled(self) -> bool:
        return bool(self._signalled)

    @property
    def used(self) -> bool:
        """Whether any pod ever waited here."""
        return self._seq > 0
