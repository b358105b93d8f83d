"""A run on a Kubernetes cluster, as a library: connect, submit, follow, fetch, read logs, cancel, requeue.

The cluster commands (`wpbench_k8s.commands.{submit,status,results,logs,cancel,requeue}`) turn their flags
into a small struct and call one function here; nothing here knows about click.
"""

from wpbench_k8s.cluster.connection import DEFAULT_NAMESPACE, Cluster, ClusterError, cluster_errors
from wpbench_k8s.cluster.logs import LogSection, grader_logs
from wpbench_k8s.cluster.requeue import Requeued, requeue
from wpbench_k8s.cluster.results import Fetched, fetch_results, load_manifest
from wpbench_k8s.cluster.status import cancel, follow, status_line
from wpbench_k8s.cluster.submit import dry_run_text, run_name, submit

__all__ = [
    "DEFAULT_NAMESPACE",
    "Cluster",
    "ClusterError",
    "Fetched",
    "LogSection",
    "Requeued",
    "cancel",
    "cluster_errors",
    "dry_run_text",
    "fetch_results",
    "follow",
    "grader_logs",
    "load_manifest",
    "requeue",
    "run_name",
    "status_line",
    "submit",
]
