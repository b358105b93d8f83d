"""Everything Kubernetes, in one place: names and labels, object builders, the run payload, stored
results (one reader), what a grader attempt's pod means (`facts`), and a small typed client whose
`Watcher` is the one watch loop. The controller and the CLI's cluster commands both build on it;
nothing here imports the controller.
"""

from wpbench_k8s.kube.client import Kube, KubeError, Watcher, api_client
from wpbench_k8s.kube.objects import RunSettings, TaskSource, build_grader_job, dry_run_objects

__all__ = ["Kube", "KubeError", "RunSettings", "TaskSource", "Watcher", "api_client", "build_grader_job",
           "dry_run_objects"]  # fmt: skip
