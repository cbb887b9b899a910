"""What `scheduler` and `descheduler` share: the flags of a live process, named as kube-scheduler's and the
descheduler's, and the one line when the 'live' extra is not installed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from kubesched.api.duration import read_duration_seconds
from kubesched.errors import InputError

# The distributions of the 'live' extra, by the name they are imported under.
LIVE_EXTRA = ("kubernetes", "prometheus_client")


def live_options(port: int, lease: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The flags both live processes take, named as kube-scheduler's and the descheduler's."""
    opts = [
        click.option("--kubeconfig", type=click.Path(), default=None,
                     help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the pod's service account)"),
        click.option("--context", default=None, help="the kubeconfig context to use"),
        click.option("--leader-elect/--no-leader-elect", default=False, show_default=True,
                     help="run only while holding a coordination.k8s.io/v1 Lease"),
        click.option("--leader-elect-lease-duration", "lease_duration", default="15s", show_default=True),
        click.option("--leader-elect-renew-deadline", "renew_deadline", default="10s", show_default=True),
        click.option("--leader-elect-retry-period", "retry_period", default="2s", show_default=True),
        click.option("--leader-elect-resource-name", "lease_name", default=lease, show_default=True),
        click.option("--leader-elect-resource-namespace", "lease_namespace", default="kube-system", show_default=True),
        click.option("--bind-address", default="0.0.0.0", show_default=True, help="address of /healthz /readyz /metrics"),
        click.option("--port", type=click.IntRange(0, 65535), default=port, show_default=True,
                     help="port of /healthz /readyz /metrics (plain HTTP; 0: off)"),
        click.option("-v", "--v", "verbosity", type=click.IntRange(0, 10), default=0, show_default=True,
                     help="log verbosity"),
        click.option("--logging-format", type=click.Choice(["text", "json"]), default="text", show_default=True),
        click.option("--request-timeout", default="30s", show_default=True, metavar="DURATION"),
    ]

    def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
        for o in reversed(opts):
            f = o(f)
        return f

    return wrap


def flag_duration(value: str, flag: str) -> float:
    """A duration flag in seconds: a Go duration ("30s", "2m", "0"), never negative."""
    return read_duration_seconds(value, flag, example="30s or 2m", negative=False)


def process_flags(kw: dict[str, Any]) -> dict[str, Any]:
    """The `live_options` values as `kubesched.live.process.ProcessOptions` takes them (durations in seconds)."""
    out = dict(kw)
    for k, flag in (("lease_duration", "leader-elect-lease-duration"), ("renew_deadline", "leader-elect-renew-deadline"),
                    ("retry_period", "leader-elect-retry-period"), ("request_timeout", "request-timeout")):
        out[k] = flag_duration(kw[k], f"--{flag}")
    return out


def missing_live_extra(command: str, e: ImportError, needs: str = "the kubernetes client") -> InputError:
    """The one line for a live command run without the 'live' extra; `e` is re-raised when it is anything else
    (a missing module of kubesched itself is a bug, not an extra to install)."""
    if (e.name or "").split(".")[0] not in LIVE_EXTRA:
        raise e
    return InputError(f"{command} needs {needs} ({e.name} is missing): pip install 'kubesched[live]'")
