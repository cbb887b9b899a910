"""Where runs execute: a local process pool (the default) or Ray tasks on a Ray cluster.

Both take the scenario inputs once and then run `kubesched.tune.runs.RunTask`s, yielding results as they
complete. Results are pure functions of (inputs, task), so neither the engine nor the number of workers
changes them; only the order in which they arrive does, and callers never depend on that order.

- `local`: a `multiprocessing` pool of spawned processes, one per core by default; each worker receives the
  inputs once (the pool's initializer) and keeps them. With one worker the runs happen in this process.
  An interruption terminates the workers at once (the runs in flight are redone on resume).
- `ray`: connects to a running cluster (`address`, as `ray.init` takes it) or, without one, starts a local
  instance (and stops it at the end). The inputs are put in Ray's object store once; every task carries a
  reference, and each worker process fetches and unpickles them once (kept in a per-process cache). The
  driver submits every task of a batch at once and collects results with `ray.wait` as they finish.
  Workers must be able to import this version of kubesched (the same install, or a runtime environment).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import socket
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from kubesched.diagnostics import relay
from kubesched.errors import InputError
from kubesched.tune.inputs import ScenarioInputs
from kubesched.tune.runs import RunTask, execute

ENGINES = ("local", "ray")

Inputs = Mapping[str, ScenarioInputs]


class EngineError(RuntimeError):
    """The engine cannot run (a Ray cluster that cannot be reached): the command exits 1 with one line."""


class Engine(Protocol):
    name: str
    workers: int

    def run(self, tasks: Sequence[RunTask]) -> Iterator[dict[str, Any]]:
        """Run the tasks; yield each result as it completes."""
        ...

    def close(self) -> None: ...


def _relayed(result: dict[str, Any]) -> dict[str, Any]:
    """The run's result, its warnings reported in the driver (once each)."""
    relay(result.pop("warnings", ()))
    return result


# ---------------------------------------------------------------- local

_INPUTS: Inputs | None = None


def _init_local(inputs: Inputs) -> None:
    global _INPUTS
    _INPUTS = inputs


def _local_task(task: RunTask) -> dict[str, Any]:
    assert _INPUTS is not None
    return execute(_INPUTS, task)


class LocalEngine:
    name = "local"

    def __init__(self, inputs: Inputs, workers: int | None = None) -> None:
        self.inputs = inputs
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._pool: Any = None

    def run(self, tasks: Sequence[RunTask]) -> Iterator[dict[str, Any]]:
        if self.workers == 1:
            for t in tasks:
                yield _relayed(execute(self.inputs, t))
            return
        if self._pool is None:
            self._pool = mp.get_context("spawn").Pool(self.workers, initializer=_init_local, initargs=(self.inputs,))
        for result in self._pool.imap_unordered(_local_task, tasks):
            yield _relayed(result)

    def close(self) -> None:
        # Terminate rather than wait: after an interruption, runs in flight are abandoned (they are redone
        # on resume); after a normal end the workers are idle anyway.
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None


# ---------------------------------------------------------------- Ray

_RAY_CACHE: dict[str, Inputs] = {}


def _ray_task(holder: list[Any], task: RunTask) -> dict[str, Any]:
    """A Ray task: the inputs come as a reference inside a list (so Ray does not resolve it for every task)
    and are fetched once per worker process."""
    import ray

    ref = holder[0]
    key = ref.hex()
    inputs = _RAY_CACHE.get(key)
    if inputs is None:
        inputs = ray.get(ref)
        _RAY_CACHE.clear()
        _RAY_CACHE[key] = inputs
    return execute(inputs, task)


class RayEngine:
    name = "ray"

    def __init__(self, inputs: Inputs, workers: int | None = None, address: str | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise InputError("the Ray engine needs Ray: pip install 'kubesched[ray]'", field="--engine") from None
        self._ray = ray
        self._owns = not ray.is_initialized()
        if self._owns and address:
            _check_reachable(address)
        if self._owns:
            try:
                if address:
                    ray.init(address=address, include_dashboard=False, log_to_driver=False,
                             logging_level=logging.WARNING)
                else:
                    ray.init(num_cpus=max(1, workers or os.cpu_count() or 1), include_dashboard=False,
                             log_to_driver=False, logging_level=logging.WARNING)
            except ConnectionError as e:
                raise EngineError(f"cannot reach the Ray cluster at {address}: {e}") from None
        self.workers = int(ray.cluster_resources().get("CPU", 1))
        self._ref = ray.put(dict(inputs))
        self._remote = ray.remote(num_cpus=1, max_retries=1)(_ray_task)

    def run(self, tasks: Sequence[RunTask]) -> Iterator[dict[str, Any]]:
        ray = self._ray
        pending = [self._remote.remote([self._ref], t) for t in tasks]
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                yield _relayed(ray.get(done[0]))
        finally:
            for r in pending:
                ray.cancel(r, force=True)

    def close(self) -> None:
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()


def _check_reachable(address: str) -> None:
    """Fail at once when nothing listens at a host:port address (ray.init would retry for minutes)."""
    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return  # "auto", a cluster found through the environment: let Ray resolve it
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as e:
        raise EngineError(f"cannot reach the Ray cluster at {address}: {e.strerror or e}") from None


def check_options(kind: str, address: str | None) -> None:
    """Engine options that cannot work together (checked before anything is written)."""
    if kind not in ENGINES:
        raise InputError(f"expected one of {', '.join(ENGINES)}, got {kind!r}", field="--engine")
    if kind == "local" and address:
        raise InputError("--address is for --engine ray", field="--address")


def make_engine(kind: str, inputs: Inputs, workers: int | None = None, address: str | None = None) -> Engine:
    check_options(kind, address)
    if kind == "ray":
        return RayEngine(inputs, workers, address)
    return LocalEngine(inputs, workers)
