"""The in-cluster controller: reconciles WPBenchRuns into grader Jobs and stores their records.

Public pieces: `Controller` (the process), `Reconciler` (one pass over one run). What a run brings
into the cluster, how it is named and read back lives in `wpbench_k8s.kube`, which this package
depends on (never the reverse).
"""

from wpbench_controller.controller import Controller
from wpbench_controller.reconciler import Options, Reconciler

__all__ = ["Controller", "Options", "Reconciler"]
