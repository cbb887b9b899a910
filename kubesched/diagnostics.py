"""Warnings: what kubesched skipped, ignored or converted in what a user gave it.

Errors stop a command (`kubesched.errors.InputError`, exit 2). A warning lets it go on but must not be
silent: the command line prints each on stderr as it happens (`warning: <file>: <object>: field <f>: ...`)
and adds them to the `-o json` document under `warnings`. Library code calls `warn(...)`; whoever runs a
command opens `collecting()` around it. Outside a collection a warning goes to stderr at once.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

# Past this many lines on stderr the rest are only counted (all of them still reach `-o json`, up to
# MAX_KEPT), so a snapshot of 100,000 questionable objects does not bury the result.
MAX_PRINTED = 20
MAX_KEPT = 1000


@dataclass
class Collector:
    """The warnings of one command run, in order, without repeats."""

    echo: bool = True
    messages: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    dropped: int = 0
    printed: int = 0

    def add(self, message: str) -> None:
        if message in self.seen:
            return
        self.seen.add(message)
        if len(self.messages) < MAX_KEPT:
            self.messages.append(message)
        else:
            self.dropped += 1
        if self.echo:
            if self.printed < MAX_PRINTED:
                print(f"warning: {message}", file=sys.stderr, flush=True)
            self.printed += 1

    def finish(self) -> None:
        """Say how many warnings were not printed."""
        hidden = self.printed - MAX_PRINTED
        if self.echo and hidden > 0:
            print(f"warning: {hidden} more warning(s) not shown (see -o json)", file=sys.stderr, flush=True)


_current: ContextVar[Collector | None] = ContextVar("kubesched_warnings", default=None)


def render(message: str, *, file: str | None = None, obj: str | None = None, field: str | None = None) -> str:
    """The same shape as an InputError: file, object, field, then what happened."""
    where = [p for p in (file, obj, f"field {field}" if field else None) if p]
    return ": ".join(where + [message])


def warn(message: str, *, file: str | None = None, obj: str | None = None, field: str | None = None) -> None:
    text = render(message, file=file, obj=obj, field=field)
    collector = _current.get()
    if collector is None:
        print(f"warning: {text}", file=sys.stderr, flush=True)
    else:
        collector.add(text)


def relay(messages: Iterable[str]) -> None:
    """Warnings another process collected (already rendered), reported here: a collector drops repeats, so
    a sweep's sixty runs of one document warn once."""
    collector = _current.get()
    for text in messages:
        if collector is None:
            print(f"warning: {text}", file=sys.stderr, flush=True)
        else:
            collector.add(text)


@contextmanager
def collecting(echo: bool = True) -> Iterator[Collector]:
    """Collect the warnings raised inside; `echo` prints them on stderr as they come."""
    collector = Collector(echo=echo)
    token = _current.set(collector)
    try:
        yield collector
    finally:
        _current.reset(token)
        collector.finish()


def current() -> Collector | None:
    return _current.get()


def silence() -> None:
    """Keep this context's further warnings to itself (worker processes re-reading inputs the parent checked)."""
    _current.set(Collector(echo=False))
