"""Executor backends. Importing this package registers the built-in ones."""

from wpbench_k8s.executor.base import (
    Executor,
    GraderLimits,
    GraderSpec,
    executor_names,
    get_executor,
    register_executor,
)

__all__ = ["Executor", "GraderLimits", "GraderSpec", "executor_names", "get_executor", "register_executor"]
