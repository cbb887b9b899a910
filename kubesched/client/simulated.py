"""The simulated API server: the in-process one plus what the API server does to pods on create.

On create, a pod gets its uid and creationTimestamp, the defaults of SetDefaults_Pod and the Priority and
DefaultTolerationSeconds admission plugins (`kubesched.api.defaulting.admit_pod`: priority from its
PriorityClass or the globalDefault one), status Pending, and a name from `generateName` (five random
characters from the server's seeded generator, retried on a collision). Evictions always respect
PodDisruptionBudgets, as a real API server does.

Pods of one template (the same `shape`, given by the controller that creates them) are admitted once; the
next ones are copies of the first with their own name, uid and timestamps, which keeps a 150,000-pod
simulation from parsing 150,000 manifests.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Hashable
from datetime import UTC, datetime
from typing import Any

from kubesched.api.defaulting import admit_pod
from kubesched.api.hashing import stable_hash64, stable_hash64_hex
from kubesched.api.objects import ObjectMeta, Pod, parse_pod
from kubesched.api.resources import RESOURCE_SHAPE_VALUES, scheduler_request
from kubesched.client.inprocess import InProcessAPIServer
from kubesched.client.interface import AlreadyExists
from kubesched.cluster.events import Cause
from kubesched.cluster.state import ClusterState
from kubesched.errors import InputError

# Memo entries of a pod that depend only on its spec, so copies of an admitted pod may share them.
SPEC_CACHE_KEYS = ("sched_request", "non_zero", "host_ports", "sim_limits", "sim_request", "resource_shape",
                   RESOURCE_SHAPE_VALUES)


@functools.lru_cache(maxsize=256)
def rfc3339(epoch: float) -> str:
    """The timestamp as the API writes it; remembered, as many objects of one instant carry it."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class SimulatedAPIServer(InProcessAPIServer):
    def __init__(self, state: ClusterState, clock: Callable[[], float], seed: int, where: str = "") -> None:
        super().__init__(state, clock, enforce_pdbs=True, seed=stable_hash64("names", seed))
        self.seed = seed
        self.where = where
        self._uid_counter = 0
        self._protos: dict[Hashable, tuple[Pod, dict[str, Any]]] = {}

    def new_uid(self, name: str) -> str:
        """A deterministic UUID-shaped uid (the seed, the object's name, and how many came before)."""
        self._uid_counter += 1
        n = self._uid_counter
        h = stable_hash64_hex(self.seed, name, n) + stable_hash64_hex(name, n)
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

    def finish_termination(self, pod: Pod, cause: Cause = Cause.KUBELET) -> None:
        """The kubelet confirms the deletion; graceful deletions that are over leave the deadline queue (the
        simulator's kubelets finish them, nobody calls `advance`), so it holds the pods terminating, not
        every deletion of the run."""
        super().finish_termination(pod, cause)
        self.next_deadline()

    def create_pod(self, manifest: dict[str, Any], *, cause: Cause, shape: Hashable | None = None) -> Pod:
        meta = manifest.setdefault("metadata", {})
        ns = str(meta.get("namespace") or "default")
        generate = meta.get("generateName") if not meta.get("name") else None
        name = str(meta.get("name") or "")
        for _ in range(8 if generate else 1):
            if generate:
                name = f"{generate}{self.random_suffix()}"
            if f"{ns}/{name}" not in self.state.pods:
                break
        else:
            raise AlreadyExists(f'pods "{name}" already exists')
        if f"{ns}/{name}" in self.state.pods:
            raise AlreadyExists(f'pods "{name}" already exists')
        uid = self.new_uid(f"Pod/{ns}/{name}")
        now = self.clock()
        pod = self._instantiate(manifest, shape, name, ns, uid, now)
        self.state.add(pod, cause=cause)
        return pod

    def _instantiate(self, manifest: dict[str, Any], shape: Hashable | None, name: str, ns: str, uid: str,
                     now: float) -> Pod:
        cached = self._protos.get(shape) if shape is not None else None
        if cached is None:
            full = copy.deepcopy(manifest)
            meta = full["metadata"]
            meta.pop("generateName", None)
            meta.update({"name": name, "namespace": ns, "uid": uid, "creationTimestamp": rfc3339(now)})
            full["status"] = {"phase": "Pending"}
            try:
                admit_pod(full, self.state.priority_classes, "spec")
                pristine = copy.deepcopy(full)
                pod = parse_pod(full)
            except InputError as e:
                raise e.located(file=self.where or None, obj=f"Pod {ns}/{name}") from None
            scheduler_request(pod)
            if shape is not None:
                self._protos[shape] = (pod, pristine)
            return pod
        proto, pristine = cached
        m = proto.meta
        labels = dict(m.labels)
        new_meta = {**pristine["metadata"], "name": name, "namespace": ns, "uid": uid,
                    "creationTimestamp": rfc3339(now), "labels": labels}
        raw = {**pristine, "metadata": new_meta, "spec": dict(pristine["spec"]), "status": {"phase": "Pending"}}
        pod_meta = ObjectMeta(name=name, namespace=ns, uid=uid, labels=labels, annotations=dict(m.annotations),
                              owner_references=list(m.owner_references),
                              creation_timestamp=datetime.fromtimestamp(now, UTC), deletion_timestamp=None)
        cache = {k: proto.cache[k] for k in SPEC_CACHE_KEYS if k in proto.cache}
        return proto.copy_as(pod_meta, raw, cache)
