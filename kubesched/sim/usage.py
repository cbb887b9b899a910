"""Actual usage: models and traces evaluated for every pod at once, on the virtual clock.

Usage belongs to a *replica identity*, not to a pod object: the k-th replica of a workload keeps its
load when its pod is evicted and recreated (the replacement takes the evicted pod's identity), and
every variant of a scenario sees the same load for the same replica. All randomness (noise, spread,
random walks, spikes) is a hash of (seed, identity, step), so usage never depends on event order and
identical inputs give identical numbers.

Models (levels are fractions of the request, or absolute quantities):
- constant: `value`.
- diurnal: mean + amplitude·cos(2π (t_of_day − peakAt) / period).
- randomWalk: start, then + N(0, step) each usage step, clamped to [min, max].
- spikes: base, and `peak` during spikes that start at `ratePerHour` (a Poisson process per replica)
  and last `duration`.
Every model takes `noise` (multiplicative N(0, noise) each step) and `spread` (a per-replica factor
drawn once, uniform in [1 − spread, 1 + spread]).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubesched.api.hashing import stable_hash64
from kubesched.sim.scenario import ModelSpec

CONSTANT, DIURNAL, RANDOM_WALK, SPIKES, TRACE = 0, 1, 2, 3, 4
CODES = {"constant": CONSTANT, "diurnal": DIURNAL, "randomWalk": RANDOM_WALK, "spikes": SPIKES}

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_SHIFT_53 = np.uint64(11)  # the top 53 bits make the double


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The SplitMix64 finaliser over uint64 arrays (wrapping arithmetic), into a new array."""
    return _splitmix64_inplace(x + _GOLDEN, np.empty(x.shape, dtype=np.uint64))


def _splitmix64_inplace(z: np.ndarray, t: np.ndarray) -> np.ndarray:
    """SplitMix64's mixing of z (already offset by the golden gamma) in place; t is scratch of z's shape."""
    np.right_shift(z, np.uint64(30), out=t)
    z ^= t
    z *= _M1
    np.right_shift(z, np.uint64(27), out=t)
    z ^= t
    z *= _M2
    np.right_shift(z, np.uint64(31), out=t)
    z ^= t
    return z


def uniform(keys: np.ndarray, salt: int, scratch: np.ndarray | None = None) -> np.ndarray:
    """A uniform number in (0, 1) per key, the same in every run (`scratch`: a uint64 buffer to reuse)."""
    z = keys ^ np.uint64(salt & 0xFFFFFFFFFFFFFFFF)
    z += _GOLDEN
    _splitmix64_inplace(z, scratch if scratch is not None else np.empty(z.shape, dtype=np.uint64))
    z >>= _SHIFT_53
    u = z.astype(np.float64)
    u += 0.5
    u *= 1.0 / 9007199254740992.0
    return u


_MASK64 = 0xFFFFFFFFFFFFFFFF
# The same constants as Python integers, for the scalar form.
_GOLDEN_INT, _M1_INT, _M2_INT = int(_GOLDEN), int(_M1), int(_M2)


def uniform_one(key: int, salt: int) -> float:
    """`uniform` of one key in Python integers (the same bits: the 53-bit integer, + 0.5 and the scaling are
    exact in float64); a pod's identity draws it once, where the array form's set-up costs more."""
    z = ((key ^ (salt & _MASK64)) + _GOLDEN_INT) & _MASK64
    z = ((z ^ (z >> 30)) * _M1_INT) & _MASK64
    z = ((z ^ (z >> 27)) * _M2_INT) & _MASK64
    z ^= z >> 31
    return (float(z >> 11) + 0.5) * (1.0 / 9007199254740992.0)


def gaussian(keys: np.ndarray, salt: int) -> np.ndarray:
    """A standard normal number per key (Box-Muller over two hashed uniforms).

    Worked out in blocks whose temporaries stay in the core's cache (a day at 150,000 identities draws
    three such vectors a minute; streamed whole, each of the dozens of passes goes out to memory)."""
    out = np.empty(len(keys))
    for _ in _normal_blocks(keys, salt, out):
        pass
    return out


def scale_by_noise(out: np.ndarray, keys: np.ndarray, salt: int, noise: np.ndarray) -> None:
    """out *= 1 + noise * gaussian(keys, salt), in place, block by block (the same operations in the same
    order per element, so the same bits, without three more passes over the whole vectors)."""
    for s, e, g in _normal_blocks(keys, salt):
        g *= noise[s:e]
        g += 1.0
        out[s:e] *= g


def _normal_blocks(keys: np.ndarray, salt: int, out: np.ndarray | None = None) -> Iterator[tuple[int, int, np.ndarray]]:
    """(start, end, the normals of keys[start:end]) block by block, the normals written into out[start:end]
    when `out` is given (else into a buffer reused by the next block)."""
    n = len(keys)
    m = min(n, _BLOCK)
    g, u2 = np.empty(m), np.empty(m)
    z, scratch = np.empty(m, dtype=np.uint64), np.empty(m, dtype=np.uint64)
    for s in range(0, n, _BLOCK):
        e = min(n, s + _BLOCK)
        k = e - s
        gb = out[s:e] if out is not None else g[:k]
        _box_muller(keys[s:e], salt, gb, u2[:k], z[:k], scratch[:k])
        yield s, e, gb


# Elements per block of `gaussian`: four 256 KiB buffers.
_BLOCK = 32768


def _uniform_into(keys: np.ndarray, salt: int, u: np.ndarray, z: np.ndarray, scratch: np.ndarray) -> None:
    """`uniform` into u (z, scratch: uint64 buffers of keys' shape); the same operations, so the same bits."""
    np.bitwise_xor(keys, np.uint64(salt & 0xFFFFFFFFFFFFFFFF), out=z)
    z += _GOLDEN
    _splitmix64_inplace(z, scratch)
    z >>= _SHIFT_53
    u[...] = z  # below 2**53: exact, as astype
    u += 0.5
    u *= 1.0 / 9007199254740992.0


def _box_muller(keys: np.ndarray, salt: int, u1: np.ndarray, u2: np.ndarray, z: np.ndarray,
                scratch: np.ndarray) -> None:
    _uniform_into(keys, salt, u1, z, scratch)
    _uniform_into(keys, salt ^ 0x5DEECE66D, u2, z, scratch)
    np.log(u1, out=u1)
    u1 *= -2.0
    np.sqrt(u1, out=u1)
    u2 *= 2.0 * np.pi
    np.cos(u2, out=u2)
    u1 *= u2


@dataclass(slots=True)
class TraceGrid:
    """Series resampled on the usage-step grid: values[series, step] (NaN: no value)."""

    names: list[str]
    cpu: np.ndarray | None  # millicores
    memory: np.ndarray | None  # bytes
    positions: dict[str, int] | None = None

    def index(self, name: str) -> int | None:
        if self.positions is None:
            self.positions = {n: i for i, n in enumerate(self.names)}
        return self.positions.get(name)


class _Resource:
    """One resource's model parameters for every identity (growable columns)."""

    def __init__(self, cap: int) -> None:
        self.code = np.zeros(cap, dtype=np.int8)
        self.a = np.zeros(cap)  # constant value / diurnal mean / walk start / spike base
        self.b = np.zeros(cap)  # diurnal amplitude / walk step / spike peak
        self.c = np.zeros(cap)  # diurnal period / walk min / spike rate per second
        self.d = np.zeros(cap)  # diurnal peak offset / walk max / spike duration
        self.noise = np.zeros(cap)
        self.factor = np.ones(cap)
        self.state = np.zeros(cap)  # walk position / spike end time
        self.started = np.zeros(cap, dtype=bool)
        self.last_step = np.full(cap, -1, dtype=np.int64)
        self.trace = np.full(cap, -1, dtype=np.int64)  # (grid id << 32) | series
        self.value = np.zeros(cap)
        # Positions of each model (and of the noisy rows) among the first n rows, while no model changes.
        self._groups: tuple[int, dict[int, np.ndarray]] | None = None
        # Values worked out from the model parameters of those rows, kept as long as the positions.
        self._derived: dict[str, Any] = {}

    def changed(self) -> None:
        """A row's model, noise or trace changed: the cached positions go."""
        self._groups = None

    def groups(self, n: int) -> dict[int, np.ndarray]:
        if self._groups is None or self._groups[0] != n:
            self._groups = (n, _groups(self.code[:n], self.noise[:n]))
            self._derived = {}
        return self._groups[1]

    def derived(self, name: str, compute: Callable[..., Any], *args: Any) -> Any:
        """compute(*args), a value of the parameters of the rows `groups` last gave, kept until the positions
        go (the parameters change only with a row's model)."""
        v = self._derived.get(name)
        if v is None:
            v = self._derived[name] = compute(*args)
        return v

    def grow(self, cap: int) -> None:
        for name in ("code", "a", "b", "c", "d", "noise", "factor", "state", "started", "last_step", "trace", "value"):
            old = getattr(self, name)
            new = np.full(cap, -1, dtype=old.dtype) if name in ("trace", "last_step") else (
                np.ones(cap, dtype=old.dtype) if name == "factor" else np.zeros(cap, dtype=old.dtype))
            new[: len(old)] = old
            setattr(self, name, new)
        self.changed()


NOISY = -1  # the key of the noisy rows' positions in a _groups map


def _distinct_pairs(r: _Resource, ix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (period, peak) pairs of rows ix as two arrays, and for each row the index of its pair."""
    pairs, which = np.unique(np.stack([r.c[ix], r.d[ix]], axis=1), axis=0, return_inverse=True)
    return pairs[:, 0].copy(), pairs[:, 1].copy(), which.reshape(-1)


def _spike_start_chance(r: _Resource, ix: np.ndarray, step: float) -> np.ndarray:
    """The chance that a spike starts within one step, per row of ix (a Poisson process at the row's rate)."""
    return 1.0 - np.exp(-r.c[ix] * step)  # type: ignore[no-any-return]


def _groups(code: np.ndarray, noise: np.ndarray) -> dict[int, np.ndarray]:
    """Positions (into the given rows) of each model present, and of the rows with noise."""
    out = {c: np.flatnonzero(code == c) for c in (CONSTANT, DIURNAL, RANDOM_WALK, SPIKES, TRACE)}
    out = {c: pos for c, pos in out.items() if len(pos)}
    noisy = np.flatnonzero(noise > 0)
    if len(noisy):
        out[NOISY] = noisy
    return out


class UsageTable:
    """Usage of every replica identity, evaluated step by step."""

    def __init__(self, seed: int, start_epoch: float, step: float) -> None:
        self.seed = seed
        self.start_epoch = start_epoch
        self.step_seconds = step
        self.n = 0
        cap = 64
        self.keys = np.zeros(cap, dtype=np.uint64)
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.res = {"cpu": _Resource(cap), "memory": _Resource(cap)}
        self.grids: list[TraceGrid] = []
        self.step_index = -1

    # ------------------------------------------------------------ identities

    def identity(self, name: str) -> int:
        """The row of a replica identity (created on first use)."""
        i = self.index.get(name)
        if i is not None:
            return i
        if self.n == len(self.keys):
            cap = len(self.keys) * 2
            keys = np.zeros(cap, dtype=np.uint64)
            keys[: self.n] = self.keys
            self.keys = keys
            for r in self.res.values():
                r.grow(cap)
        i = self.n
        self.n += 1
        self.keys[i] = np.uint64(stable_hash64(self.seed, name))
        self.names.append(name)
        self.index[name] = i
        return i

    def add_grid(self, grid: TraceGrid) -> int:
        self.grids.append(grid)
        return len(self.grids) - 1

    def assign(self, i: int, resource: str, spec: ModelSpec | None, request: float) -> None:
        """Give identity i the model for a resource; None means usage equals the request."""
        r = self.res[resource]
        r.changed()
        r.trace[i] = -1
        r.started[i] = False
        if spec is None:
            r.code[i], r.a[i], r.noise[i], r.factor[i] = CONSTANT, request, 0.0, 1.0
            return
        lv = spec.levels
        code = CODES[spec.model]
        r.code[i] = code
        if code == CONSTANT:
            r.a[i] = lv["value"].resolve(request)
        elif code == DIURNAL:
            r.a[i] = lv["mean"].resolve(request)
            r.b[i] = lv["amplitude"].resolve(request) if "amplitude" in lv else 0.0
            r.c[i] = spec.period
            r.d[i] = spec.peak_at
        elif code == RANDOM_WALK:
            r.a[i] = lv["start"].resolve(request)
            r.b[i] = lv["step"].resolve(request)
            r.c[i] = lv["min"].resolve(request) if "min" in lv else 0.0
            r.d[i] = lv["max"].resolve(request) if "max" in lv else np.inf
        else:  # spikes
            r.a[i] = lv["base"].resolve(request)
            r.b[i] = lv["peak"].resolve(request)
            r.c[i] = spec.rate_per_hour / 3600.0
            r.d[i] = spec.spike_duration
            r.state[i] = -1.0
        r.noise[i] = spec.noise
        salt = 0xA5A5 if resource == "cpu" else 0x5A5A
        if spec.spread > 0:
            u = uniform_one(int(self.keys[i]), salt)
            r.factor[i] = 1.0 - spec.spread + 2.0 * spec.spread * u
        else:
            r.factor[i] = 1.0

    def restart(self, i: int, resource: str) -> None:
        """A process restarted: its random walk starts again from the start value, a spike in progress ends."""
        r = self.res[resource]
        if r.code[i] == RANDOM_WALK:
            r.started[i] = False
            r.last_step[i] = -1
        elif r.code[i] == SPIKES:
            r.state[i] = -1.0

    def assign_trace(self, i: int, resource: str, grid_id: int, series: int) -> None:
        r = self.res[resource]
        r.changed()
        r.code[i] = TRACE
        r.trace[i] = (grid_id << 32) | series
        r.noise[i] = 0.0
        r.factor[i] = 1.0

    # ------------------------------------------------------------ evaluation

    def evaluate(self, t: float, rows: np.ndarray | None = None) -> None:
        """Usage of every identity (or of `rows`) at virtual time t (seconds since the start).

        Evaluating a row twice in one usage step gives the same value (random walks move once per step),
        so identities that appear between steps can be evaluated on their own.
        """
        k = int(t // self.step_seconds) if self.step_seconds > 0 else 0
        full = rows is None
        if rows is None:
            self.step_index = k
            rows = np.arange(self.n)
        if len(rows) == 0:
            return
        n = self.n
        # Every identity: slices and cached per-model positions instead of gathers and masks (same values).
        keys = self.keys[:n] if full else self.keys[rows]
        step_key = keys ^ np.uint64((k * 0x632BE59BD9B4E019) & 0xFFFFFFFFFFFFFFFF)
        for name, r in self.res.items():
            salt = 0x1000 if name == "cpu" else 0x2000
            groups = r.groups(n) if full else _groups(r.code[rows], r.noise[rows])
            out = np.zeros(len(rows))
            pos = groups.get(CONSTANT)
            if pos is not None:
                if full and len(pos) == n:
                    out[:] = r.a[:n]  # every identity constant (pos is 0..n-1): a copy, not a gather
                else:
                    out[pos] = r.a[rows[pos]] if not full else r.a[pos]
            pos = groups.get(DIURNAL)
            if pos is not None:
                ix = pos if full else rows[pos]
                tod = self.start_epoch + t
                if full:
                    # The wave depends on the period and the peak only, which the rows of a workload share:
                    # worked out once per distinct pair and gathered (the same operations on the same numbers).
                    periods, peaks, which = r.derived("diurnal", _distinct_pairs, r, ix)
                    wave = np.cos(2.0 * np.pi * np.mod(tod - peaks, periods) / periods)[which]
                else:
                    wave = np.cos(2.0 * np.pi * np.mod(tod - r.d[ix], r.c[ix]) / r.c[ix])
                out[pos] = r.a[ix] + r.b[ix] * wave
            pos = groups.get(RANDOM_WALK)
            if pos is not None:
                ix = pos if full else rows[pos]
                fresh = ~r.started[ix]
                r.state[ix[fresh]] = r.a[ix[fresh]]
                r.started[ix[fresh]] = True
                moving = (~fresh) & (r.last_step[ix] < k)
                if moving.any():
                    mv = ix[moving]
                    g = gaussian(step_key[pos[moving]], salt + 1)
                    r.state[mv] = np.clip(r.state[mv] + r.b[mv] * g, r.c[mv], r.d[mv])
                r.last_step[ix] = k
                out[pos] = r.state[ix]
            pos = groups.get(SPIKES)
            if pos is not None:
                ix = pos if full else rows[pos]
                active = r.state[ix] > t
                # The chance of a spike starting in a step: fixed by the rate, so worked out once over every row.
                p = r.derived("spike_start", _spike_start_chance, r, ix, self.step_seconds) if full \
                    else _spike_start_chance(r, ix, self.step_seconds)
                starts = (~active) & (r.last_step[ix] < k) & (uniform(step_key[pos], salt + 2) < p)
                r.state[ix[starts]] = t + r.d[ix[starts]]
                r.last_step[ix] = k
                out[pos] = np.where(r.state[ix] > t, r.b[ix], r.a[ix])
            pos = groups.get(TRACE)
            if pos is not None:
                ix = pos if full else rows[pos]
                tr = r.trace[ix]
                grid_of = tr >> 32
                vals = np.zeros(len(ix))
                for gid in np.unique(grid_of):
                    sel = grid_of == gid
                    grid = self.grids[int(gid)]
                    values = grid.cpu if name == "cpu" else grid.memory
                    if values is None or values.shape[1] == 0:
                        continue
                    col = min(k, values.shape[1] - 1)
                    vals[sel] = np.nan_to_num(values[tr[sel] & 0xFFFFFFFF, col], nan=0.0)
                out[pos] = vals
            noisy = groups.get(NOISY)
            if noisy is not None:
                if len(noisy) == len(rows):
                    scale_by_noise(out, step_key, salt + 3, r.noise[:n] if full else r.noise[rows])
                else:
                    g = gaussian(step_key[noisy], salt + 3)
                    out[noisy] *= 1.0 + (r.noise[noisy] if full else r.noise[rows[noisy]]) * g
            out *= r.factor[:n] if full else r.factor[rows]
            np.maximum(out, 0.0, out=out)
            if full:
                r.value[:n] = out
            else:
                r.value[rows] = out

    def values(self, resource: str) -> np.ndarray:
        return self.res[resource].value[: self.n]
