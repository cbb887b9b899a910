"""The API resources the test double serves, as discovery describes them.

Each entry is what `kubectl api-resources` shows for a kind kubesched reads or writes: group, version,
plural, namespaced or not, kind, verbs, short names, and its subresources. Discovery documents
(/api, /api/v1, /apis, /apis/GROUP/VERSION) are built from this table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

READ = ("get", "list", "watch")
ALL = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    verbs: tuple[str, ...] = ALL
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    # Whether a PUT/PATCH of the main resource leaves status alone (the resource has a status subresource).
    status_subresource: bool = False
    singular: str = field(default="")

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_version(self) -> str:
        return self.group_version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def path_prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


def _r(group: str, version: str, plural: str, kind: str, namespaced: bool, **kw: object) -> Resource:
    subs = tuple(kw.pop("subresources", ()))  # type: ignore[arg-type]
    return Resource(group, version, plural, kind, namespaced, subresources=subs,
                    status_subresource="status" in subs, singular=kind.lower(), **kw)  # type: ignore[arg-type]


RESOURCES: tuple[Resource, ...] = (
    _r("", "v1", "namespaces", "Namespace", False, short_names=("ns",), subresources=("status",)),
    _r("", "v1", "nodes", "Node", False, short_names=("no",), subresources=("status",)),
    _r("", "v1", "pods", "Pod", True, short_names=("po",), subresources=("binding", "eviction", "status")),
    _r("", "v1", "services", "Service", True, short_names=("svc",), subresources=("status",)),
    _r("", "v1", "persistentvolumes", "PersistentVolume", False, short_names=("pv",), subresources=("status",)),
    _r("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, short_names=("pvc",),
       subresources=("status",)),
    _r("", "v1", "replicationcontrollers", "ReplicationController", True, short_names=("rc",),
       subresources=("status",)),
    _r("", "v1", "events", "Event", True, short_names=("ev",)),
    _r("", "v1", "configmaps", "ConfigMap", True, short_names=("cm",)),
    _r("", "v1", "secrets", "Secret", True),
    _r("apps", "v1", "deployments", "Deployment", True, short_names=("deploy",), subresources=("status",)),
    _r("apps", "v1", "replicasets", "ReplicaSet", True, short_names=("rs",), subresources=("status",)),
    _r("apps", "v1", "statefulsets", "StatefulSet", True, short_names=("sts",), subresources=("status",)),
    _r("apps", "v1", "daemonsets", "DaemonSet", True, short_names=("ds",), subresources=("status",)),
    _r("batch", "v1", "jobs", "Job", True, subresources=("status",)),
    _r("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, short_names=("pdb",),
       subresources=("status",)),
    _r("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, short_names=("pc",)),
    _r("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, short_names=("sc",)),
    _r("storage.k8s.io", "v1", "csinodes", "CSINode", False),
    _r("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False),
    _r("storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", True),
    _r("coordination.k8s.io", "v1", "leases", "Lease", True),
    _r("events.k8s.io", "v1", "events", "Event", True, short_names=("ev",)),
    _r("metrics.k8s.io", "v1beta1", "nodes", "NodeMetrics", False, verbs=READ),
    _r("metrics.k8s.io", "v1beta1", "pods", "PodMetrics", True, verbs=READ),
)

# Groups in the order discovery lists them, each with its versions (the first is preferred).
GROUP_ORDER = ("apps", "events.k8s.io", "batch", "policy", "scheduling.k8s.io", "storage.k8s.io", "coordination.k8s.io",
               "metrics.k8s.io")


def by_path(group: str, version: str, plural: str) -> Resource | None:
    for r in RESOURCES:
        if r.group == group and r.version == version and r.plural == plural:
            return r
    return None


def by_kind(api_version: str, kind: str) -> Resource | None:
    for r in RESOURCES:
        if r.group_version == api_version and r.kind == kind:
            return r
    return None
