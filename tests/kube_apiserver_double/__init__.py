"""A contract-test double of the Kubernetes API server, for tests and bench scripts (not a product part).

    from tests.kube_apiserver_double import KubeAPIServerDouble

    with KubeAPIServerDouble() as api:
        api.add(nodes, pods)
        kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
        api.faults.fail(429, times=2, path="/pods", retry_after=1)

See server.py for what it serves and what it does not.
"""

from tests.kube_apiserver_double.server import Faults, KubeAPIServerDouble, Request
from tests.kube_apiserver_double.store import ApiError

__all__ = ["ApiError", "Faults", "KubeAPIServerDouble", "Request"]
