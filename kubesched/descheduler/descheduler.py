"""The descheduling cycle: profiles built from a policy, every Deschedule plugin, then every Balance plugin.

Upstream's `runProfiles`: the nodes are the Ready nodes matching the policy's global nodeSelector; a cycle
with too few of them is skipped (upstream: fewer than two; `--min-ready-nodes`); then the Deschedule
plugins of all profiles run, profile by profile, and then the Balance plugins of all profiles. One
PodEvictor (the limits) is shared by every plugin of every profile and its counters reset each cycle.
Evictions go to the API server through the client as they are decided (see evictor.py).

One Descheduler may run many cycles (strategies keep state across them: LowNodeLoad's anomaly detectors).
`run_cycle(now, metrics=..., usage=...)` moves it to the cycle's moment and hands every profile the
metrics of that moment first; a one-shot run (`kubesched deschedule`) makes the same call once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from kubesched.api.objects import Node
from kubesched.api.selectors import parse_label_selector_string
from kubesched.client.inprocess import InProcessAPIServer
from kubesched.client.interface import Client
from kubesched.cluster.state import ClusterState
from kubesched.config.descheduler_policy import DeschedulerPolicy, ProfileConfig
from kubesched.config.plugin_args import build_args
from kubesched.descheduler import nodeutil
from kubesched.descheduler.evictor import EvictionRecord, PodEvictor, ProfileEvictor
from kubesched.descheduler.framework import (
    BalancePlugin,
    DeschedulePlugin,
    DeschedulerPlugin,
    DeschedulerServices,
    EvictorPlugin,
    Handle,
    SortPlugin,
)
from kubesched.descheduler.registry import Registry, default_registry
from kubesched.errors import InputError
from kubesched.metrics.base import Metrics

DEFAULT_MIN_READY_NODES = 2


@dataclass
class CycleResult:
    evictions: list[EvictionRecord] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    skipped: str | None = None
    errors: list[str] = field(default_factory=list)


@dataclass
class Profile:
    """One built profile: its plugins per extension point and its evictor."""

    name: str
    handle: Handle
    evictor: ProfileEvictor
    deschedule: list[DeschedulePlugin]
    balance: list[BalancePlugin]
    plugins: dict[str, DeschedulerPlugin]


_T = TypeVar("_T", bound=DeschedulerPlugin)


def _of(plugins: dict[str, DeschedulerPlugin], names: list[str], kind: type[_T]) -> list[_T]:
    """The named plugins that implement `kind` (the policy loader already checked that they do)."""
    return [p for n in names if isinstance(p := plugins[n], kind)]


class Descheduler:
    def __init__(self, cluster: ClusterState, policy: DeschedulerPolicy, *, now: datetime, metrics: Any = None,
                 client: Client | None = None, dry_run: bool = True, registry: Registry | None = None,
                 min_ready_nodes: int = DEFAULT_MIN_READY_NODES, services: DeschedulerServices | None = None) -> None:
        """`client` is how evictions reach the cluster: by default an in-process API server that, like
        upstream's plugin tests and dry-run mode, enforces no PodDisruptionBudget; `services` what plugins
        may use besides the cluster (the policy is filled in)."""
        self.cluster = cluster
        self.policy = policy
        self.now = now
        self.registry = registry or default_registry()
        self.min_ready_nodes = min_ready_nodes
        self.node_selector = parse_label_selector_string(policy.node_selector, "nodeSelector")
        self.client: Client = (client if client is not None else
                               InProcessAPIServer(cluster, lambda: self.now.timestamp(), enforce_pdbs=False))
        self.pod_evictor = PodEvictor(self.client, max_pods_to_evict_per_node=policy.max_pods_to_evict_per_node,
                                      max_pods_to_evict_per_namespace=policy.max_pods_to_evict_per_namespace,
                                      max_pods_to_evict_total=policy.max_pods_to_evict_total, dry_run=dry_run,
                                      grace_period_seconds=policy.grace_period_seconds)
        self.metrics_collector = metrics
        self.services = services if services is not None else DeschedulerServices()
        self.services.policy = policy
        self.services.metrics_collector = metrics
        self.profiles = [self._build_profile(p) for p in policy.profiles]

    def _build_profile(self, cfg: ProfileConfig) -> Profile:
        evictor = ProfileEvictor(cfg.name, self.pod_evictor)
        handle = Handle(cluster=self.cluster, evictor=evictor, now=self.now, profile=cfg.name,
                        metrics=self.metrics_collector if self.policy.kubernetes_metrics_enabled else None,
                        services=self.services)
        plugins: dict[str, DeschedulerPlugin] = {}
        names: list[str] = []
        for point in ("deschedule", "balance", "filter", "preEvictionFilter", "sort"):
            for n in cfg.plugins[point].enabled:
                if n not in names:
                    names.append(n)
        for n in names:
            cls = self.registry.get(n)
            where = f"{cfg.field}.pluginConfig[{n}].args"
            try:
                # The policy loader built every enabled plugin's args once; a policy assembled in code may lack some.
                args = cfg.plugin_config[n] if n in cfg.plugin_config else build_args(cls, None, where)
            except InputError as e:
                raise e.located(file=self.policy.source, obj=self.policy.kind) from None
            try:
                plugins[n] = cls(args, handle)
            except InputError as e:
                raise e.located(file=self.policy.source, obj=self.policy.kind, field_prefix=where) from None
        evictor.filters = _of(plugins, cfg.plugins["filter"].enabled, EvictorPlugin)
        evictor.pre_eviction_filters = _of(plugins, cfg.plugins["preEvictionFilter"].enabled, EvictorPlugin)
        evictor.sorters = _of(plugins, cfg.plugins["sort"].enabled, SortPlugin)
        for f in evictor.pre_eviction_filters:
            fit = getattr(f, "node_fit_function", None)
            if callable(fit):
                fn = fit()
                if fn is not None:
                    handle.node_fit = fn
        return Profile(
            name=cfg.name, handle=handle, evictor=evictor,
            deschedule=_of(plugins, cfg.plugins["deschedule"].enabled, DeschedulePlugin),
            balance=_of(plugins, cfg.plugins["balance"].enabled, BalancePlugin),
            plugins=plugins)

    def cycle_nodes(self) -> list[Node]:
        """The Ready nodes matching the policy's nodeSelector, in the cluster's order."""
        return nodeutil.ready_nodes(n for n in self.cluster.nodes.values() if self.node_selector.matches(n.labels))

    def run_cycle(self, now: datetime | None = None, *, metrics: Any = None,
                  usage: Metrics | None = None) -> CycleResult:
        """One descheduling cycle, first moved to its inputs (each left None stays as it was):

        - `now`: the cycle's time (every profile handle's `now`);
        - `metrics`: the actual-usage MetricsCollector of this moment (`handle.metrics` when the policy
          enables KubernetesMetrics, and `services.metrics_collector` for the sorters);
        - `usage`: a usage reading for load-aware strategies (`services.usage`: LowNodeLoad).
        """
        self._advance(now, metrics, usage)
        self.pod_evictor.reset_counters()
        # Plugins memoise per-cycle answers under this number.
        self.services.cycle += 1
        nodes = self.cycle_nodes()
        result = CycleResult(nodes=nodes)
        if len(nodes) < self.min_ready_nodes:
            result.skipped = (f"{len(nodes)} ready node(s) match the policy, fewer than --min-ready-nodes "
                              f"{self.min_ready_nodes}: the cycle is skipped")
            return result
        for prof in self.profiles:
            for pl in prof.deschedule:
                self._run(prof, pl, "deschedule", nodes, result)
        for prof in self.profiles:
            for bp in prof.balance:
                self._run(prof, bp, "balance", nodes, result)
        result.evictions = self.pod_evictor.records  # this cycle's alone: the next cycle starts a new list
        return result

    def _advance(self, now: datetime | None, metrics: Any, usage: Metrics | None) -> None:
        if now is not None:
            self.now = now
            for prof in self.profiles:
                prof.handle.now = now
        if metrics is not None:
            self.metrics_collector = metrics
            self.services.metrics_collector = metrics
            for prof in self.profiles:
                prof.handle.metrics = metrics if self.policy.kubernetes_metrics_enabled else None
        if usage is not None:
            self.services.usage = usage

    def _run(self, prof: Profile, pl: DeschedulerPlugin, point: str, nodes: list[Node], result: CycleResult) -> None:
        prof.evictor.current_plugin = pl.name or type(pl).__name__
        if point == "deschedule":
            assert isinstance(pl, DeschedulePlugin)
            status = pl.deschedule(list(nodes))
        else:
            assert isinstance(pl, BalancePlugin)
            status = pl.balance(list(nodes))
        prof.evictor.current_plugin = ""
        if status is not None and status.error:
            result.errors.append(f"profile {prof.name}: plugin {pl.name!r} finished with error: {status.error}")
