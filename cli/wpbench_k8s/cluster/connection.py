"""Where a run lives (kubeconfig, context, namespace) and the one way cluster failures read."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from wpbench_k8s.errors import WPBenchError

DEFAULT_NAMESPACE = "wpbench"


class ClusterError(WPBenchError):
    """The cluster said no (not found, forbidden, unreachable)."""

    exit_code = 3


def api_error(exc: Any, what: str) -> ClusterError:
    """A `KubeError` in one line naming what was asked for."""
    message = exc.message or exc.reason
    if exc.status == 404:
        return ClusterError(f"{what}: not found ({message})")
    if exc.status is None:
        return ClusterError(f"{what}: cannot reach the Kubernetes API server: {_one_line(exc)}")
    return ClusterError(f"{what}: {exc.status} {message}")


def _one_line(exc: Any) -> str:
    return " ".join(str(exc).split())[:400]


@contextmanager
def cluster_errors() -> Iterator[None]:
    """An unreachable API server or a refusal becomes one `ClusterError` line (exit 3), no traceback."""
    from wpbench_k8s.kube.client import KubeError, Unreachable

    try:
        yield
    except Unreachable as exc:
        raise ClusterError(f"cannot reach the Kubernetes API server: {_one_line(exc)}") from exc
    except KubeError as exc:
        raise api_error(exc, "Kubernetes API") from exc


def context_namespace(kubeconfig: str | None, context: str | None) -> str | None:
    """The namespace the kubeconfig's (chosen or current) context names, if any."""
    try:
        from kubernetes import config

        kconfig: Any = config
        contexts, active = kconfig.list_kube_config_contexts(kubeconfig)
    except Exception:
        return None
    chosen = next((c for c in contexts if c["name"] == context), None) if context else active
    ns = ((chosen or {}).get("context") or {}).get("namespace")
    return str(ns) if ns else None


def resolve_namespace(kubeconfig: str | None, context: str | None, namespace: str | None) -> str:
    """The namespace given, else the context's, else DEFAULT_NAMESPACE (as kubectl chooses)."""
    return namespace or context_namespace(kubeconfig, context) or DEFAULT_NAMESPACE


class Cluster:
    """The API client for one kubeconfig/context/namespace."""

    def __init__(
        self,
        kubeconfig: str | None,
        context: str | None,
        namespace: str | None,
        request_timeout: float | None = None,
    ) -> None:
        """`request_timeout`: seconds one request may take (connect and read), tried once: a server that
        accepts and never answers fails in about that long. None: the client's defaults (with retries)."""
        from wpbench_k8s.kube.client import Kube, api_client

        api = api_client(kubeconfig, context, retry=request_timeout is None)  # one try: the flag bounds it
        if request_timeout is None:
            self.kube = Kube(api)
        else:
            self.kube = Kube(api, read_timeout=request_timeout, connect_timeout=request_timeout)
        self.server = str(api.configuration.host)
        self.namespace = resolve_namespace(kubeconfig, context, namespace)

    def run(self, name: str) -> dict[str, Any]:
        """The WPBenchRun `name`.

        Raises:
            ClusterError: it does not exist, or the API server refused or could not be reached.
        """
        from wpbench_k8s.kube.client import RUNS, KubeError

        try:
            return self.kube.get(RUNS, self.namespace, name)
        except KubeError as exc:
            raise api_error(exc, f"run {self.namespace}/{name}") from exc
