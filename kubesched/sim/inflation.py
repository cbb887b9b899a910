"""Inflating (or thinning) a pod trace to a target demand: the published FGD simulator's workload tuning.

Follows hkust-adsl/kubernetes-scheduler-simulator `pkg/simulator/simulator.go` (TunePodsByNodeTotalResource,
tuneUpPods, tuneDownPods), which its experiments run with ratio 1.3 ("arrived GPU demand reaches 130 %
of the cluster's GPU capacity"):

- above the target, pods drawn at random leave the list until the demand is at most the target;
- below it, pods drawn at random from the trace sorted by name are appended as clones named
  `<name>-tuned-<i>`, until the next draw would pass the target: the draw that would is discarded and
  sampling stops. Upstream tests the next draw with its per-GPU milli while adding its total, so a
  multi-GPU clone can end the list slightly past the target; that is kept.

The draws use the run's seeded NumPy generator (upstream uses Go's math/rand seeded with the seed).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kubesched.sim.traces import TracePod


def tune_pods(pods: list[TracePod], demand: Callable[[TracePod], float], step: Callable[[TracePod], float],
              target: float, rng: np.random.Generator, interval: float) -> list[TracePod]:
    """`pods` thinned or extended to `target` demand; clones arrive `interval` apart after the last pod."""
    total = sum(demand(p) for p in pods)
    out = list(pods)
    if total > target:
        while total > target and out:
            i = int(rng.integers(len(out)))
            total -= demand(out.pop(i))
        return out
    if total == target or not any(step(p) > 0 for p in pods):
        return out
    by_name = sorted(pods, key=lambda p: p.name)
    t = out[-1].arrival
    i = 0
    while True:
        src = by_name[int(rng.integers(len(by_name)))]
        if total + step(src) > target:
            break
        total += demand(src)
        t += interval
        out.append(TracePod(f"{src.name}-tuned-{i}", t, None, dict(src.requests), list(src.affinity_values),
                            dict(src.annotations), src.gpu_shape))
        i += 1
    return out
