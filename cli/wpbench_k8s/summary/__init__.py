"""The run summary: one typed document (`RunSummary`), built one way (`build_summary`) from the manifest,
the records and `RunFacts`; written by `run` and `results`, read by `report`."""

from wpbench_k8s.summary.build import CacheFacts, ClusterFacts, RunFacts, build_summary
from wpbench_k8s.summary.model import SUMMARY_VERSION, RunSummary

__all__ = ["SUMMARY_VERSION", "CacheFacts", "ClusterFacts", "RunFacts", "RunSummary", "build_summary"]
