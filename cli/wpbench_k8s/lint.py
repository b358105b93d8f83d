"""Authoring checks beyond the schema: what makes a test trustworthy before it ever runs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from wpbench_k8s.dataset import ExecutionTest, KnowledgeTest, Suite
from wpbench_k8s.knowledge_baselines import sample_answer
from wpbench_k8s.models.knowledge import score_knowledge

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
        out.append(Problem("error", where, "runtime_checks.assertions is empty: nothing decides the pass"))
    if sum(a.weight for a in test.runtime_checks.assertions) <= 0:
        out.append(Problem("error", where, "runtime assertions have zero total weight"))
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
                out.append(Problem("error", f"{where}, static_checks.{group}.{i}", f"regex does not compile: {exc}"))
    if test.test_function and not test.test_function_name():
        out.append(Problem("error", where, f"test_function {test.test_function!r} has no function name"))
    name = test.test_function_name()
    if name:
        for i, pat in enumerate(test.static_checks.required_patterns):
            if name in pat.pattern:
                msg = "repeats the test_function name: harness scaffolding, not a WordPress skill"
                out.append(Problem("warning", f"{where}, static_checks.required_patterns.{i}", msg))
    return out


def lint_knowledge(test: KnowledgeTest) -> list[Problem]:
    out: list[Problem] = []
    where = f"test {test.id}"
    extra = set(test.model_extra or {}) - _KNOWN_KNOW_KEYS
    if extra:
        out.append(Problem("warning", where, f"unknown field(s): {', '.join(sorted(extra))}"))
    if test.type == "short_answer" and test.choices:
        out.append(Problem("warning", where, "short_answer with choices: the choices are ignored"))
    if test.type == "short_answer":
        sample = sample_answer(test)
        if sample is None:
            msg = "regex answer without metadata.sample_answer: the hedge baseline cannot check this test"
            out.append(Problem("warning", where, msg))
        elif score_knowledge(test, f"Answer: {sample}").score != 1.0:
            msg = f"its own sample answer {sample!r} scores 0 (set metadata.sample_answer or fix the matcher)"
            out.append(Problem("error", where, msg))
    return out


def lint_suite(suite: Suite) -> list[Problem]:
    problems: list[Problem] = []
    for e in suite.execution:
        problems.extend(lint_execution(e))
    for k in suite.knowledge:
        problems.extend(lint_knowledge(k))
    return problems
