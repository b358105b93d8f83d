"""The grader contract: the task document `wpbench-grade` reads and the verdict it writes.

Both sides of the container boundary use these models: the harness builds a `GradeTask`, the
PHP verifier inside the image reads it, and the harness (or the Kubernetes collector) validates
the `Verdict` that comes back. `runtime/schema/*.json` are generated from these models
(`python -m wpbench_runtime.schema`) so the PHP side and outside tools can read the same contract.

Exit codes of `wpbench-grade` (what each means for a record: cli/wpbench_k8s/outcome.py):
    0  a verdict for a gradable task (status passed, failed, error or timeout): scored
    2  harness_error, and only for a task or environment found broken before any candidate code
       ran (unusable task document, setup failed, WordPress did not boot): excluded
    3  the verifier failed after candidate code could act (status error): scored as the candidate's
    4  harness_error: stopped by a signal from outside the container (nothing inside can signal
       the supervisor; see runtime/php/native/nodlopen.c): infrastructure, retried
    5  harness_error: the backend asked for the egress gate (WPBENCH_EGRESS_PROBE; Kubernetes) and the
       network was not seen closed within its bound, before the task was read, so no candidate code
       ran (runtime/php/verifier/supervisor/egress.php): infrastructure, retried, never scored
Any other exit code, or a harness_error verdict with another exit code, is the candidate's failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

CONTRACT_VERSION: Literal["1"] = "1"
SCORING_VERSION = "2.0"

ArtifactKind = Literal["php_snippet", "wp_plugin_files"]
VerdictStatus = Literal["passed", "failed", "error", "timeout", "harness_error"]
Severity = Literal["error", "warning"]
Compare = Literal["identical", "equals", "contains", "matches"]

ASSERTION_TYPES: tuple[str, ...] = (
    "custom_assertion",
    "function_exists",
    "class_exists",
    "shortcode_exists",
    "hook_registered",
    "output_contains",
    "output_not_contains",
    "output_equals",
    "output_matches",
    "rest_response",
    "returns_value",
    "query_result",
    "option_value",
    "post_meta_value",
)

# Limits for `wp_plugin_files` artifacts; the verifier enforces the same numbers.
PLUGIN_MAX_FILES = 20
PLUGIN_MAX_FILE_BYTES = 256 * 1024
PLUGIN_MAX_TOTAL_BYTES = 1024 * 1024
OUTPUT_CAP_BYTES = 1024 * 1024


# Fast mode (`wpbench-grade --sequence`, runtime/php/verifier/supervisor/sequence.php): after each task's verdict
# line the supervisor writes `wpbench-end <exit code> ready|closed` (closed: it grades no further task).
SEQUENCE_END = re.compile(rb"(?:^|\n)wpbench-end (-?[0-9]+) (ready|closed)\n")


@dataclass(frozen=True)
class SequenceAnswer:
    """One task's answer in a sequence's output: what came before its end line, and what that line said."""

    output: bytes
    exit_code: int
    ready: bool  # False: the sequence closed after this task


def split_sequence_output(output: bytes) -> tuple[list[SequenceAnswer], bytes]:
    """A sequence's output (a pod log: stdout and the supervisor's stderr lines) as the answers it holds, in task
    order, and what follows the last end line (the output of a task that did not end, or nothing)."""
    answers = []
    while (end := SEQUENCE_END.search(output)) is not None:
        answers.append(SequenceAnswer(output[: end.start()], int(end.group(1)), end.group(2) == b"ready"))
        output = output[end.end() :]
    return answers, output


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StaticPattern(_Strict):
    """A regular expression matched against the candidate source.

    Delimiterless patterns are wrapped by the verifier (`#...#`); a pattern that starts with a
    delimiter and ends with it plus flags (`/add_action/i`) is used as PCRE as written.
    """

    pattern: str
    description: str = ""
    weight: float = Field(default=1.0, ge=0)
    severity: Severity = "error"  # only meaningful for forbidden patterns


class StaticChecks(_Strict):
    required_patterns: list[StaticPattern] = Field(default_factory=list)
    forbidden_patterns: list[StaticPattern] = Field(default_factory=list)


class Assertion(BaseModel):
    """One runtime assertion. `type` selects the check; the other keys are its parameters.

    Parameters by type (all optional unless stated):
      custom_assertion     code (PHP body; passes when it returns exactly true)
      function_exists      function
      class_exists         class
      shortcode_exists     shortcode
      hook_registered      hook, callback (callable name), priority
      output_*             one source: code (PHP; echoed output + returned string),
                           shortcode_content (run through do_shortcode), or function + args;
                           expected (contains/not_contains/equals) or pattern (matches)
      rest_response        route, method=GET, params, body, headers, user (login or id);
                           status, body_contains, data (subset match), data_path
      returns_value        function, args | args_code (PHP returning array); expected, compare
      query_result         query (SQL; {prefix} -> $wpdb->prefix), mode=var|col|row|results;
                           expected, compare
      option_value         option; expected, compare; absent=true asserts the option is unset
      post_meta_value      post_id | post_id_code, meta_key, single=true; expected, compare
    `compare` is identical (===, default), equals (==), contains (substring or array member)
    or matches (regex on a string).
    """

    model_config = ConfigDict(extra="allow")

    type: str
    description: str = ""
    weight: float = Field(default=1.0, ge=0)


class RuntimeChecks(_Strict):
    setup: str = ""
    assertions: list[Assertion] = Field(default_factory=list)
    teardown: str = ""


class GradeTask(_Strict):
    """The one document `wpbench-grade` reads (file argument or stdin)."""

    contract_version: Literal["1"] = CONTRACT_VERSION
    test_id: str = Field(min_length=1, max_length=200)
    artifact_kind: ArtifactKind = "php_snippet"
    code: str | None = None
    files: dict[str, str] | None = None
    static_checks: StaticChecks = Field(default_factory=StaticChecks)
    runtime_checks: RuntimeChecks = Field(default_factory=RuntimeChecks)
    test_function: str | None = None
    timeout_seconds: float = Field(default=90.0, gt=0, le=3600)
    # The trusted phase before any candidate code runs (WordPress's boot and the test's setup) must end
    # within this; timeout_seconds starts when it has. An overrun is a harness_error (exit 2), never the
    # candidate's, as upstream's grader.setup_timeout_seconds fails set-up instead of scoring it.
    setup_timeout_seconds: float = Field(default=60.0, gt=0, le=3600)

    @property
    def budget_seconds(self) -> float:
        """The longest the grader itself may run: the trusted phase's bound plus the candidate's."""
        return self.timeout_seconds + self.setup_timeout_seconds


class PatternResult(_Strict):
    pattern: str
    description: str = ""
    weight: float = 1.0
    severity: Severity = "error"
    matched: bool
    # Set when the regex does not compile, or PCRE gave up on this code (backtrack limit, ...): then a
    # forbidden pattern counts as matched and a required one as not matched.
    error: str | None = None
    # Forbidden patterns: constructs PHP's tokens show although the regex did not match them
    # (e.g. "eval" for `EVAL/**/(`); each makes the pattern count as matched.
    constructs: list[str] = Field(default_factory=list)


class StaticResult(_Strict):
    syntax_ok: bool
    syntax_error: str | None = None
    required: list[PatternResult] = Field(default_factory=list)
    forbidden: list[PatternResult] = Field(default_factory=list)


class AssertionResult(_Strict):
    index: int  # position in runtime_checks.assertions; -1 for the implicit test_function check
    type: str
    description: str = ""
    weight: float
    scored: bool = True
    passed: bool
    message: str = ""


class PhpIssue(_Strict):
    level: str  # Warning, Notice, Deprecated, Fatal error, ...
    message: str
    file: str = ""
    line: int = 0
    phase: str = ""  # boot, setup, candidate, assertion:N, teardown ("" when not known, e.g. a fatal error)


class Scores(_Strict):
    execution_pass: bool
    runtime: float = Field(ge=0, le=1)
    static: float = Field(ge=0, le=1)
    static_policy_pass: bool


class RuntimeInfo(_Strict):
    wordpress_version: str = ""
    php_version: str = ""
    database: str = "sqlite"
    sqlite_integration_version: str = ""


class Verdict(_Strict):
    """The one document `wpbench-grade` writes on stdout."""

    contract_version: Literal["1"] = CONTRACT_VERSION
    scoring_version: str = SCORING_VERSION
    test_id: str | None = None
    status: VerdictStatus
    reason: str = ""
    scores: Scores
    static: StaticResult | None = None
    assertions: list[AssertionResult] = Field(default_factory=list)
    phases: dict[str, str] = Field(default_factory=dict)  # setup/candidate/assertions/teardown
    php_issues: list[PhpIssue] = Field(default_factory=list)
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_ms: int = 0
    runtime: RuntimeInfo = Field(default_factory=RuntimeInfo)


def harness_error_verdict(reason: str, test_id: str | None = None, **extra: Any) -> Verdict:
    """A verdict for a task that could not be graded at all (never a model failure)."""
    return Verdict(
        test_id=test_id,
        status="harness_error",
        reason=reason,
        scores=Scores(execution_pass=False, runtime=0.0, static=0.0, static_policy_pass=False),
        **extra,
    )
