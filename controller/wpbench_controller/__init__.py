"""The in-cluster controller: reconciles WPBenchRuns into grader Jobs and stores their records.

Public pieces: `Controller` (the process), `Reconciler` (one pass over one run), `dry_run_objects`
(everything a run brings into the cluster), `crd.crd()` (the CustomResourceDefinition).
"""

from wpbench_controller.controller import Controller
from wpbench_controller.objects import RunSettings, dry_run_objects
from wpbench_controller.reconciler import Options, Reconciler

__all__ = ["Controller", "Options", "Reconciler", "RunSettings", "dry_run_objects"]
