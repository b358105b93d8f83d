"""Authoring checks beyond the schema: what makes a test trustworthy before it ever runs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from wpbench_k8s.dataset import ExecutionTest, KnowledgeTest, Suite
from wpbench_k8s.knowledge_baselines import sample_answer
from wpbench_k8s.models.knowledge import DEFAULT_RULES, score_knowledge

# The verifier's rule (runtime/php/verifier/common/patterns.php): one of these delimiters, the same
# one at the end plus PCRE flags, and no unescaped delimiter in between; anything else is wrapped.
_DELIMITERS = "/#~!@%|`"
_FLAGS = re.compile(r"^[imsxuADSUXJn]*$")
_KNOWN_EXEC_KEYS = set(ExecutionTest.model_fields)
_KNOWN_KNOW_KEYS = set(KnowledgeTest.model_fields)


@dataclass(frozen=True)
class Problem:
    level: Literal["error", "warning"]
    where: str
    message: str
    # `run` refuses the errors that make a test grade wrong (`refused_by_run`): a check that cannot fire, nothing
    # that decides the pass, a matcher that misjudges its author's own examples. Authoring completeness (source
    # refs, sample answers and probes present, a reference, alternatives) is validate's alone.
    run_refuses: bool = False


def refused_by_run(suite: Suite) -> list[Problem]:
    """The errors of `dataset validate` that `run` and `submit` refuse too, before anything runs."""
    return [p for p in lint_suite(suite) if p.level == "error" and p.run_refuses]


def split_delimited(pattern: str) -> tuple[str, str] | None:
    """(body, flags) when the verifier uses `pattern` as a delimited PCRE, else None."""
    if len(pattern) < 2 or pattern[0] not in _DELIMITERS:
        return None
    delimiter = pattern[0]
    end = pattern.rfind(delimiter)
    if end == 0 or not _FLAGS.match(pattern[end + 1 :]):
        return None
    body = pattern[1:end]
    i = 0
    while i < len(body):
        if body[i] == "\\":
            i += 1
        elif body[i] == delimiter:
            return None
        i += 1
    return body, pattern[end + 1 :]


def pcre_to_python(pattern: str) -> tuple[str, int]:
    """Best-effort translation of a static-check pattern (PCRE, maybe delimited) for a compile check."""
    split = split_delimited(pattern)
    if split is None:
        return pattern, 0
    body, flag_chars = split
    flags = 0
    for flag in flag_chars:
        flags |= {"i": re.I, "m": re.M, "s": re.S, "x": re.X}.get(flag, 0)
    return body, flags


def lint_execution(test: ExecutionTest) -> list[Problem]:
    out: list[Problem] = []
    where = f"test {test.id}"
    extra = set(test.model_extra or {}) - _KNOWN_EXEC_KEYS - {"type"}
    if extra:
        out.append(Problem("warning", where, f"unknown field(s): {', '.join(sorted(extra))}"))
    if not test.runtime_checks.assertions:
        out.append(
            Problem("error", where, "runtime_checks.assertions is empty: nothing decides the pass", run_refuses=True)
        )
    if sum(a.weight for a in test.runtime_checks.assertions) <= 0:
        out.append(Problem("error", where, "runtime assertions have zero total weight", run_refuses=True))
    if test.artifact_kind == "php_snippet" and test.reference_solution is None:
        out.append(Problem("error", where, "no reference_solution"))
    if test.artifact_kind == "wp_plugin_files" and not test.reference_files:
        out.append(Problem("error", where, "wp_plugin_files test without reference_files"))
    if not test.metadata.source_refs:
        out.append(Problem("error", where, "metadata.source_refs is empty"))
    for group in ("required_patterns", "forbidden_patterns"):
        for i, pat in enumerate(getattr(test.static_checks, group)):
            body, flags = pcre_to_python(pat.pattern)
            try:
                re.compile(body, flags)
            except re.error as exc:
                out.append(
                    Problem(
                        "error",
                        f"{where}, static_checks.{group}.{i}",
                        f"regex does not compile: {exc}",
                        run_refuses=True,
                    )
                )
    for i, alt in enumerate(test.alternative_solutions):
        if (alt.code, alt.files) == (test.reference_solution, test.reference_files):
            msg = "is the reference solution itself: an alternative must take a choice the other way"
            out.append(Problem("error", f"{where}, alternative_solutions.{i}", msg))
    if test.test_function and not test.test_function_name():
        out.append(
            Problem("error", where, f"test_function {test.test_function!r} has no function name", run_refuses=True)
        )
    name = test.test_function_name()
    if name:
        for i, pat in enumerate(test.static_checks.required_patterns):
            if name in pat.pattern:
                msg = "repeats the test_function name: harness scaffolding, not a WordPress skill"
                out.append(Problem("warning", f"{where}, static_checks.required_patterns.{i}", msg))
    return out


def lint_short_answer(test: KnowledgeTest, rules: str = DEFAULT_RULES, required: bool = True) -> list[Problem]:
    """The matcher against what it must judge: the sample answer and every probe must score as the
    author says. Missing sample or probes are errors when `required` (our suites), else warnings."""
    out: list[Problem] = []
    where = f"test {test.id}"
    missing: Literal["error", "warning"] = "error" if required else "warning"
    sample = sample_answer(test)
    if test.metadata.sample_answer is None:
        msg = "no metadata.sample_answer: give a right answer as a model would write it"
        out.append(Problem(missing, where, msg))
    if sample is not None and score_knowledge(test, f"Answer: {sample}", rules).score != 1.0:
        msg = f"its own sample answer {sample!r} scores 0 (set metadata.sample_answer or fix the matcher)"
        out.append(Problem("error", where, msg, run_refuses=True))
    probes = test.metadata.probes
    if probes is None or not probes.accept or not probes.reject:
        msg = "metadata.probes needs accept (right phrasings, must score 1) and reject (near-misses, must score 0)"
        out.append(Problem(missing, where, msg))
    for field, replies, want in (("accept", probes.accept if probes else [], 1.0),
                                 ("reject", probes.reject if probes else [], 0.0)):  # fmt: skip
        for i, reply in enumerate(replies):
            got = score_knowledge(test, reply, rules)
            if got.score != want:
                msg = f"probe {reply!r} scores {got.score:g}, must score {want:g} ({got.reason})"
                out.append(Problem("error", f"{where}, metadata.probes.{field}.{i}", msg, run_refuses=True))
    return out


def lint_knowledge(test: KnowledgeTest, rules: str = DEFAULT_RULES, required: bool = True) -> list[Problem]:
    out: list[Problem] = []
    where = f"test {test.id}"
    extra = set(test.model_extra or {}) - _KNOWN_KNOW_KEYS
    if extra:
        out.append(Problem("warning", where, f"unknown field(s): {', '.join(sorted(extra))}"))
    if test.type == "short_answer" and test.choices:
        out.append(Problem("warning", where, "short_answer with choices: the choices are ignored"))
    if test.type == "short_answer":
        out.extend(lint_short_answer(test, rules, required))
    return out


def lint_suite(suite: Suite) -> list[Problem]:
    """Every test's authoring checks; probes are scored with the rules of the suite's own profile,
    and only our own suites must carry sample answers and probes (upstream's do not)."""
    problems: list[Problem] = []
    for e in suite.execution:
        problems.extend(lint_execution(e))
    for k in suite.knowledge:
        problems.extend(lint_knowledge(k, rules=suite.format, required=suite.format == "wpbench"))
    return problems
