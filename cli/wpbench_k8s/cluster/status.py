"""A run's progress in one line, following it to its end, and asking it to stop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wpbench_k8s.cluster.connection import Cluster, ClusterError


def status_line(run: dict[str, Any]) -> str:
    """Phase, a 24-column bar, done/total, passes, failures, infra errors and retries, score, message."""
    st = run.get("status") or {}
    total = st.get("total", run["spec"].get("items", 0)) or 0
    done = st.get("done", 0)
    filled = round(24 * done / total) if total else 0
    bar = "[" + "#" * filled + "." * (24 - filled) + "]"
    return (
        f"{run['metadata']['name']}: {st.get('phase', 'Pending')}  {bar} {done}/{total} done"
        f"  passed {st.get('passed', 0)}  failed {st.get('failed', 0)}  errors {st.get('errors', 0)}"
        f"  infra {st.get('infraErrors', 0)} (retries {st.get('infraRetries', 0)})  score {st.get('score', 0.0)}"
        + (f"\n  {st['message']}" if st.get("message") else "")
    )


def follow(cluster: Cluster, name: str, show: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Call `show` with the run now and on every change until it reaches a terminal phase; return it then.

    Uses the one watch loop (`kube.client.Watcher`: ERROR events and 410 Gone relist).

    Raises:
        ClusterError: the run is missing or was deleted while followed.
    """
    from wpbench_k8s.kube import crd
    from wpbench_k8s.kube.client import RUNS, Watcher

    def finished(obj: dict[str, Any]) -> bool:
        show(obj)
        return (obj.get("status") or {}).get("phase") in crd.TERMINAL_PHASES

    run = cluster.run(name)
    if finished(run):
        return run
    watcher = Watcher(cluster.kube, RUNS, cluster.namespace, field_selector=f"metadata.name={name}",
                      resource_version=run["metadata"].get("resourceVersion"))  # fmt: skip
    for event in watcher:
        if event.type == "DELETED":
            raise ClusterError(f"run {name} was deleted")
        run = event.object
        if finished(run):
            watcher.stop()
            break
    return run


def cancel(cluster: Cluster, name: str) -> None:
    """Ask the controller to stop a run: it deletes the running Jobs; stored results stay."""
    from wpbench_k8s.kube.client import RUNS

    cluster.run(name)
    cluster.kube.patch(RUNS, cluster.namespace, name, {"spec": {"cancel": True}})
