"""The grader contract shared by the PHP verifier and the Python harness."""

from wpbench_runtime.contract import (
    ASSERTION_TYPES,
    CONTRACT_VERSION,
    SCORING_VERSION,
    Assertion,
    AssertionResult,
    GradeTask,
    RuntimeChecks,
    Scores,
    StaticChecks,
    StaticPattern,
    Verdict,
    harness_error_verdict,
)

__all__ = [
    "ASSERTION_TYPES",
    "CONTRACT_VERSION",
    "SCORING_VERSION",
    "Assertion",
    "AssertionResult",
    "GradeTask",
    "RuntimeChecks",
    "Scores",
    "StaticChecks",
    "StaticPattern",
    "Verdict",
    "harness_error_verdict",
]
