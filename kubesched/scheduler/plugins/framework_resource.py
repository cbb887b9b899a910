"""framework.Resource: a resource vector in the scheduler's integer units, as scheduler-plugins use it.

Mirrors kubernetes/kubernetes `pkg/scheduler/framework/types.go` (Resource: NewResource, Add,
SetMaxResource, Clone) and scheduler-plugins `pkg/util/resource.go` (ResourceList: the vector back as a
resource list with cpu, memory, pods and ephemeral-storage always present). cpu is in millicores, every
other resource in Value() units (rounded up); names the scheduler does not track (an unprefixed name other
than cpu, memory, pods, ephemeral-storage) are dropped, as `Resource.Add` drops them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from kubesched.api.quantity import milli_value_of, value_of
from kubesched.api.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, is_scalar_resource


@dataclass(slots=True)
class Resource:
    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    allowed_pod_number: int = 0
    scalar: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, rl: Mapping[str, Fraction] | None) -> Resource:
        """NewResource."""
        r = cls()
        if rl:
            r.add(rl)
        return r

    def add(self, rl: Mapping[str, Fraction]) -> None:
        for name, q in rl.items():
            if name == CPU:
                self.milli_cpu += milli_value_of(q)
            elif name == MEMORY:
                self.memory += value_of(q)
            elif name == PODS:
                self.allowed_pod_number += value_of(q)
            elif name == EPHEMERAL_STORAGE:
                self.ephemeral_storage += value_of(q)
            elif is_scalar_resource(name):
                self.scalar[name] = self.scalar.get(name, 0) + value_of(q)

    def add_resource(self, other: Resource) -> None:
        """Add(ResourceList(other)): the same sum, without the round trip through quantities."""
        self.milli_cpu += other.milli_cpu
        self.memory += other.memory
        self.allowed_pod_number += other.allowed_pod_number
        self.ephemeral_storage += other.ephemeral_storage
        for name, v in other.scalar.items():
            self.scalar[name] = self.scalar.get(name, 0) + v

    def sub_resource(self, other: Resource) -> None:
        self.milli_cpu -= other.milli_cpu
        self.memory -= other.memory
        self.allowed_pod_number -= other.allowed_pod_number
        self.ephemeral_storage -= other.ephemeral_storage
        for name, v in other.scalar.items():
            self.scalar[name] = self.scalar.get(name, 0) - v

    def set_max(self, rl: Mapping[str, Fraction]) -> None:
        """SetMaxResource: each named resource becomes the larger of the two."""
        for name, q in rl.items():
            if name == CPU:
                self.milli_cpu = max(self.milli_cpu, milli_value_of(q))
            elif name == MEMORY:
                self.memory = max(self.memory, value_of(q))
            elif name == EPHEMERAL_STORAGE:
                self.ephemeral_storage = max(self.ephemeral_storage, value_of(q))
            elif is_scalar_resource(name):
                self.scalar[name] = max(self.scalar.get(name, 0), value_of(q))

    def clone(self) -> Resource:
        return Resource(self.milli_cpu, self.memory, self.ephemeral_storage, self.allowed_pod_number,
                        dict(self.scalar))

    def to_resource_list(self) -> dict[str, Fraction]:
        """util.ResourceList: cpu, memory, pods and ephemeral-storage always, then the scalar resources."""
        out = {CPU: Fraction(self.milli_cpu, 1000), MEMORY: Fraction(self.memory), PODS: Fraction(self.allowed_pod_number),
               EPHEMERAL_STORAGE: Fraction(self.ephemeral_storage)}
        for name, v in self.scalar.items():
            out[name] = Fraction(v)
        return out
