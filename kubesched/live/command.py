"""`kubesched capture --kubeconfig K [--context C] --out DIR [--prometheus URL --since 24h --step 1m]`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from kubesched.api.documents import TOKEN_BYTES, read_text
from kubesched.api.duration import read_duration_seconds
from kubesched.api.objects import parse_time
from kubesched.errors import InputError
from kubesched.live.capture import CaptureOptions, Progress, RichProgress, capture, summary, summary_table
from kubesched.live.client import KubeClient, RetryPolicy
from kubesched.live.history import Queries, parquet_available


def capture_command(*, kubeconfig: str | None, context: str | None, out: str, fmt: str, prometheus: str | None,
                    prometheus_token_file: str | None, since: str, step: str, queries: dict[str, str | None],
                    max_points: int, page_size: int, request_timeout: str, max_retries: int, duration: str, now: str | None,
                    tables: str, progress: bool | None) -> dict[str, Any]:
    """Capture the cluster into `out`; returns the summary (the CLI prints it with -o or as a table)."""
    since_s = _positive(since, "--since")
    step_s = _positive(step, "--step")
    if step_s > since_s:
        raise InputError(f"the step ({step}) is longer than the window ({since})", field="--step")
    timeout = _positive(request_timeout, "--request-timeout")
    if page_size < 1:
        raise InputError(f"expected a page size of at least 1, got {page_size}", field="--page-size")
    if not 1 <= max_points <= 11000:
        raise InputError(f"expected 1 to 11000 points per range query, got {max_points}", field="--max-points")
    if max_retries < 0:
        raise InputError(f"expected a number of retries of at least 0, got {max_retries}", field="--max-retries")
    if prometheus is not None and not prometheus.startswith(("http://", "https://")):
        raise InputError(f"expected the Prometheus server's http(s):// address, got {prometheus!r}", field="--prometheus")
    if tables == "parquet":
        if not parquet_available():
            raise InputError("writing Parquet needs pyarrow (pip install 'kubesched[parquet]')", field="--tables")
    token = None
    if prometheus_token_file:
        try:
            token = read_text(prometheus_token_file, TOKEN_BYTES).strip()
        except InputError as e:
            raise e.located(field_prefix="--prometheus-token-file") from None
    at = None
    if now is not None:
        t = parse_time(now, "--now")
        assert t is not None
        at = t.timestamp()
    q = Queries(**{k: v for k, v in queries.items() if v})
    opts = CaptureOptions(out=Path(out), fmt=fmt, prometheus=prometheus, prometheus_token=token, since=since_s,
                          step=step_s, queries=q, page_size=page_size,
                          duration=_positive(duration, "--duration"), now=at, table_format=tables,
                          max_points=max_points)
    client = KubeClient.connect(kubeconfig, context, RetryPolicy(attempts=max_retries + 1, timeout=timeout))
    show = sys.stderr.isatty() if progress is None else progress
    bar: Progress = RichProgress() if show else Progress()
    try:
        result = capture(client, opts, bar)
    finally:
        client.close()
    data: dict[str, Any] = summary(result)
    data["requests"] = client.requests
    data["retries"] = client.retries
    return data


def capture_table(data: dict[str, Any]) -> None:
    summary_table(data, click.echo)


def _positive(value: str, flag: str) -> float:
    """A positive duration flag ("24h", "30s") in seconds."""
    return read_duration_seconds(value, flag, example="10s, 5m or 1h30m", negative=False, zero=False)
