"""KubeletConfiguration (kubelet.config.k8s.io/v1beta1) → the eviction manager's settings.

Only the eviction fields are interpreted; every other v1beta1 field is accepted and ignored, and an
unknown field is an error as in the kubelet's strict decoding. Defaults are the kubelet's: evictionHard
absent (or null) means the Linux defaults; mergeDefaultEvictionSettings adds the default signals a given
evictionHard leaves out; evictionPressureTransitionPeriod 5m; enforceNodeAllocatable [pods], which
copies each hard memory.available threshold onto allocatableMemory.available;
localStorageCapacityIsolation true.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubesched.api import fields
from kubesched.api.duration import format_go_duration, read_duration
from kubesched.api.snapshot import read_document
from kubesched.errors import InputError
from kubesched.kubelet.thresholds import Threshold, parse_threshold_config

API_VERSION = "kubelet.config.k8s.io/v1beta1"
KIND = "KubeletConfiguration"

# pkg/kubelet/eviction/defaults_linux.go
DEFAULT_EVICTION_HARD: dict[str, str] = {
    "memory.available": "100Mi",
    "nodefs.available": "10%",
    "nodefs.inodesFree": "5%",
    "imagefs.available": "15%",
}
DEFAULT_PRESSURE_TRANSITION_PERIOD_NS = 5 * 60 * 10**9
DEFAULT_ENFORCE_NODE_ALLOCATABLE = ("pods",)

# Feature gates the eviction manager and QoS consult, with their defaults in today's kubelet.
FEATURE_DEFAULTS = {"PodLevelResources": True, "KubeletSeparateDiskGC": True}

# enforceNodeAllocatable options (pkg/kubelet/types).
NODE_ALLOCATABLE_OPTIONS = ("pods", "system-reserved", "system-reserved-compressible", "kube-reserved",
                            "kube-reserved-compressible", "none")

# Every field of kubelet.config.k8s.io/v1beta1 KubeletConfiguration (strict decoding rejects others).
KNOWN_FIELDS = frozenset("""
apiVersion kind enableServer staticPodPath podLogsDir syncFrequency fileCheckFrequency httpCheckFrequency
staticPodURL staticPodURLHeader address port readOnlyPort tlsCertFile tlsPrivateKeyFile tlsCipherSuites
tlsCurvePreferences tlsMinVersion rotateCertificates serverTLSBootstrap authentication authorization
registryPullQPS registryBurst imagePullCredentialsVerificationPolicy preloadedImagesVerificationAllowlist
eventRecordQPS eventBurst enableDebuggingHandlers enableContentionProfiling healthzPort healthzBindAddress
oomScoreAdj clusterDomain clusterDNS streamingConnectionIdleTimeout nodeStatusUpdateFrequency
nodeStatusReportFrequency nodeLeaseDurationSeconds imageMinimumGCAge imageMaximumGCAge
imageGCHighThresholdPercent imageGCLowThresholdPercent volumeStatsAggPeriod kubeletCgroups systemCgroups
cgroupRoot cgroupsPerQOS cgroupDriver cpuManagerPolicy singleProcessOOMKill cpuManagerPolicyOptions
cpuManagerReconcilePeriod memoryManagerPolicy topologyManagerPolicy topologyManagerScope
topologyManagerPolicyOptions qosReserved runtimeRequestTimeout hairpinMode maxPods podCIDR podPidsLimit
resolvConf runOnce cpuCFSQuota cpuCFSQuotaPeriod nodeStatusMaxImages maxOpenFiles contentType kubeAPIQPS
kubeAPIBurst serializeImagePulls maxParallelImagePulls evictionHard evictionSoft evictionSoftGracePeriod
evictionPressureTransitionPeriod evictionMaxPodGracePeriod evictionMinimumReclaim
mergeDefaultEvictionSettings podsPerCore enableControllerAttachDetach protectKernelDefaults
makeIPTablesUtilChains iptablesMasqueradeBit iptablesDropBit featureGates failSwapOn memorySwap
containerLogMaxSize containerLogMaxFiles containerLogMaxWorkers containerLogMonitorInterval
configMapAndSecretChangeDetectionStrategy systemReserved kubeReserved reservedSystemCPUs
showHiddenMetricsForVersion systemReservedCgroup kubeReservedCgroup enforceNodeAllocatable
allowedUnsafeSysctls defaultPodSysctls volumePluginDir providerID kernelMemcgNotification logging
enableSystemLogHandler enableSystemLogQuery shutdownGracePeriod shutdownGracePeriodCriticalPods
shutdownGracePeriodByPodPriority crashLoopBackOff reservedMemory enableProfilingHandler
enableDebugFlagsHandler seccompDefault memoryThrottlingFactor memoryReservationPolicy registerWithTaints
registerNode tracing localStorageCapacityIsolation containerRuntimeEndpoint imageServiceEndpoint
failCgroupV1 userNamespaces
""".split())


@dataclass(slots=True)
class KubeletEvictionConfig:
    """The eviction settings of one kubelet, after defaulting and validation."""

    thresholds: list[Threshold]
    eviction_hard: dict[str, str]
    eviction_soft: dict[str, str] = field(default_factory=dict)
    eviction_soft_grace_period: dict[str, str] = field(default_factory=dict)
    eviction_minimum_reclaim: dict[str, str] = field(default_factory=dict)
    max_pod_grace_period_seconds: int = 0
    pressure_transition_period_ns: int = DEFAULT_PRESSURE_TRANSITION_PERIOD_NS
    enforce_node_allocatable: list[str] = field(default_factory=lambda: list(DEFAULT_ENFORCE_NODE_ALLOCATABLE))
    local_storage_capacity_isolation: bool = True
    merge_default_eviction_settings: bool = False
    feature_gates: dict[str, bool] = field(default_factory=dict)
    source: str = "<default>"

    @property
    def pressure_transition_period(self) -> float:
        return self.pressure_transition_period_ns / 1e9

    def feature_enabled(self, name: str) -> bool:
        return self.feature_gates.get(name, FEATURE_DEFAULTS.get(name, False))

    def to_dict(self) -> dict[str, Any]:
        return {"thresholds": [t.to_dict() for t in self.thresholds],
                "evictionMaxPodGracePeriod": self.max_pod_grace_period_seconds,
                "evictionPressureTransitionPeriod": format_go_duration(self.pressure_transition_period_ns),
                "enforceNodeAllocatable": list(self.enforce_node_allocatable),
                "localStorageCapacityIsolation": self.local_storage_capacity_isolation}


def _string_map(a: fields.Fields, key: str) -> dict[str, Any] | None:
    """A map of signal name → value (None when unset)."""
    if not a.has(key):
        return None
    return {str(k): v for k, v in a.mapping(key, what="a map of signal names to values").items()}


def _duration(a: fields.Fields, key: str, default_ns: int) -> int:
    """A metav1.Duration in nanoseconds; metav1.Duration defaulting: zero means "unset"."""
    if not a.has(key):
        return default_ns
    ns = read_duration(a.raw[key], key, example='"5m0s" or "30s"')
    return ns if ns != 0 else default_ns


def _validate_enforce_node_allocatable(raw: dict[str, Any], values: list[str]) -> None:
    """The enforceNodeAllocatable part of ValidateKubeletConfiguration."""
    seen: set[str] = set()
    cgroups_per_qos = fields.Fields(raw).boolean("cgroupsPerQOS", True)
    for i, val in enumerate(values):
        f = f"enforceNodeAllocatable[{i}]"
        if val in seen:
            raise InputError(f"duplicated enforcements {val!r}", field=f)
        seen.add(val)
        if val not in NODE_ALLOCATABLE_OPTIONS:
            raise InputError(f"option {val!r} is not valid; valid options are {', '.join(NODE_ALLOCATABLE_OPTIONS)}",
                             field=f)
        if val == "none":
            if len(values) > 1:
                raise InputError("may not contain additional enforcements when 'none' is specified",
                                 field="enforceNodeAllocatable")
            continue
        if val.startswith("system-reserved") and not raw.get("systemReservedCgroup"):
            raise InputError(f"systemReservedCgroup must be specified when {val!r} is enforced", field=f)
        if val.startswith("kube-reserved") and not raw.get("kubeReservedCgroup"):
            raise InputError(f"kubeReservedCgroup must be specified when {val!r} is enforced", field=f)
        if not cgroups_per_qos:
            raise InputError(f"cgroupsPerQOS must be true when {val!r} is enforced", field=f)
    for a, b in (("system-reserved", "system-reserved-compressible"), ("kube-reserved", "kube-reserved-compressible")):
        if a in seen and b in seen:
            raise InputError(f"both {a!r} and {b!r} cannot be specified together", field="enforceNodeAllocatable")


def _parse(raw: Any) -> KubeletEvictionConfig:
    if not isinstance(raw, dict):
        raise InputError("expected a KubeletConfiguration object")
    if raw.get("kind") != KIND:
        raise InputError(f"expected kind {KIND}, got {raw.get('kind')!r}", field="kind")
    if raw.get("apiVersion") != API_VERSION:
        raise InputError(f"expected apiVersion {API_VERSION}, got {raw.get('apiVersion')!r}", field="apiVersion")
    unknown = sorted(set(raw) - KNOWN_FIELDS)
    if unknown:
        raise InputError(f"unknown field {unknown[0]!r}", field=unknown[0])
    a = fields.Fields(raw)
    merge = a.boolean("mergeDefaultEvictionSettings")
    hard = _string_map(a, "evictionHard")
    if hard is None:
        hard = dict(DEFAULT_EVICTION_HARD)
    elif merge:
        hard = {**{k: v for k, v in DEFAULT_EVICTION_HARD.items() if k not in hard}, **hard}
    soft = _string_map(a, "evictionSoft") or {}
    grace = _string_map(a, "evictionSoftGracePeriod") or {}
    reclaim = _string_map(a, "evictionMinimumReclaim") or {}
    ena_raw = raw.get("enforceNodeAllocatable")
    if ena_raw is None:
        enforce = list(DEFAULT_ENFORCE_NODE_ALLOCATABLE)
    else:
        if not isinstance(ena_raw, list) or not all(isinstance(x, str) for x in ena_raw):
            raise InputError("expected a list of strings such as [pods]", field="enforceNodeAllocatable")
        enforce = list(ena_raw)
    _validate_enforce_node_allocatable(raw, enforce)
    gates_raw = raw.get("featureGates") or {}
    if not isinstance(gates_raw, dict):
        raise InputError("expected a map of feature gate names to true or false", field="featureGates")
    gates: dict[str, bool] = {}
    for k, v in gates_raw.items():
        gates[str(k)] = fields.boolean(v, f"featureGates.{k}")
    thresholds = parse_threshold_config(enforce, hard, soft, grace, reclaim)
    return KubeletEvictionConfig(
        thresholds=thresholds,
        eviction_hard={k: str(v) for k, v in hard.items()},
        eviction_soft={k: str(v) for k, v in soft.items()},
        eviction_soft_grace_period={k: str(v) for k, v in grace.items()},
        eviction_minimum_reclaim={k: str(v) for k, v in reclaim.items()},
        max_pod_grace_period_seconds=a.integer("evictionMaxPodGracePeriod", 0, bits=fields.INT32,
                                               what="a 32-bit integer"),
        pressure_transition_period_ns=_duration(a, "evictionPressureTransitionPeriod",
                                                DEFAULT_PRESSURE_TRANSITION_PERIOD_NS),
        enforce_node_allocatable=enforce,
        local_storage_capacity_isolation=a.boolean("localStorageCapacityIsolation", True),
        merge_default_eviction_settings=merge,
        feature_gates=gates,
    )


def parse_kubelet_config(raw: Any, source: str = "<config>") -> KubeletEvictionConfig:
    """A KubeletConfiguration document → its eviction settings (InputError naming the field)."""
    try:
        cfg = _parse(raw)
    except InputError as e:
        raise e.located(file=source, obj=KIND) from None
    cfg.source = source
    return cfg


def default_kubelet_config() -> KubeletEvictionConfig:
    """What a kubelet runs with when its configuration sets no eviction field."""
    return parse_kubelet_config({"apiVersion": API_VERSION, "kind": KIND}, "<default>")


def load_kubelet_config(path: str) -> KubeletEvictionConfig:
    return parse_kubelet_config(read_document(path, KIND), source=path)
