"""kubesched: the Kubernetes scheduling stack — scheduler, descheduler, kubelet eviction, load awareness."""

__version__ = "0.1.0"
