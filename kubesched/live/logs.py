"""Structured logs as Kubernetes components write them (klog's text format, or JSON), with `-v` levels.

Text lines look like klog's structured output (k8s.io/klog/v2 `InfoS`/`ErrorS`)::

    I0102 15:04:05.123456   12345 scheduler_process.py:88] "Successfully bound pod to node" pod="default/web-1" node="n3"

— severity letter and date, time, process id, source file and line, the quoted message, then key="value"
pairs. `--logging-format json` writes one JSON object a line (`ts`, `v`, `msg`, `caller` and the pairs, with
`err` for errors), as component-base's JSON logger does. A message logged at level V(n) is written when
`-v` is at least n (0: always; 2: a line per pod scheduled or evicted; 4: per request and watch event).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any, TextIO

_LOGGER = "kubesched.live"


class _KlogText(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        t = record.created
        stamp = time.strftime("%m%d %H:%M:%S", time.localtime(t)) + f".{int((t % 1) * 1e6):06d}"
        letter = {"ERROR": "E", "WARNING": "W"}.get(record.levelname, "I")
        pairs = "".join(f" {k}={_value(v)}" for k, v in getattr(record, "kv", {}).items())
        return f'{letter}{stamp} {os.getpid():>7} {record.filename}:{record.lineno}] {json.dumps(record.getMessage())}{pairs}'


class _Json(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {"ts": round(record.created, 6), "caller": f"{record.filename}:{record.lineno}",
                               "msg": record.getMessage(), "v": getattr(record, "v", 0)}
        for k, v in getattr(record, "kv", {}).items():
            doc[k] = v if isinstance(v, (int, float, bool, str, type(None), list, dict)) else str(v)
        return json.dumps(doc)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(str(v))


class Log:
    """klog's InfoS/ErrorS with V levels, over the standard logging module (logger `kubesched.live`)."""

    def __init__(self, verbosity: int = 0) -> None:
        self.verbosity = verbosity
        self.logger = logging.getLogger(_LOGGER)

    def enabled(self, v: int) -> bool:
        return v <= self.verbosity

    def info(self, msg: str, v: int = 0, **kv: Any) -> None:
        if v <= self.verbosity:
            self.logger.info(msg, extra={"kv": kv, "v": v}, stacklevel=2)

    def warning(self, msg: str, **kv: Any) -> None:
        self.logger.warning(msg, extra={"kv": kv, "v": 0}, stacklevel=2)

    def error(self, msg: str, err: object = None, **kv: Any) -> None:
        if err is not None:
            kv = {"err": str(err), **kv}
        self.logger.error(msg, extra={"kv": kv, "v": 0}, stacklevel=2)


def setup(verbosity: int = 0, fmt: str = "text", stream: TextIO | None = None) -> Log:
    """Send the live components' logs to stderr (or `stream`) in klog text or JSON."""
    logger = logging.getLogger(_LOGGER)
    for h in list(logger.handlers):
        logger.removeHandler(h)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_Json() if fmt == "json" else _KlogText())
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return Log(verbosity)
