"""Test suites in the WP-Bench layout, and the JSONL export.

A suite folder holds `execution/*.json` and `knowledge/*.json`; each file is a JSON array of
tests (or an object with a `tests` array). The same tests can travel as one JSONL file, a row
per test with a `suite` and `type` column (the shape a Hugging Face dataset wants).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from wpbench_k8s import textsafe
from wpbench_k8s.errors import InputError, first_error
from wpbench_runtime.contract import (
    ASSERTION_TYPES,
    PLUGIN_MAX_FILES,
    ArtifactKind,
    RuntimeChecks,
    StaticChecks,
)

# "advanced" is a legacy label upstream WP-Bench's older suites carry (its loader takes any string).
Difficulty = Literal["basic", "intermediate", "hard", "advanced"]


class TestMetadata(BaseModel):
    model_config = ConfigDict(extra="allow")
    source_refs: list[str] = Field(default_factory=list)


class AnswerProbes(BaseModel):
    model_config = ConfigDict(extra="forbid")
    accept: list[str] = Field(default_factory=list)
    reject: list[str] = Field(default_factory=list)


class KnowledgeMetadata(TestMetadata):
    """A knowledge test's metadata; for a short answer, what its matcher is checked against.

    `sample_answer` is a right answer as a model would write it (the hedge baseline uses it);
    `probes.accept` are replies that must score 1 and `probes.reject` near-misses that must score 0
    (`dataset validate` grades both with the suite's scoring rules)."""

    sample_answer: str | None = None
    probes: AnswerProbes | None = None


class ExploitSolution(BaseModel):
    """An authored cheat that must fail: `code` is graded as a PHP snippet (also for a wp_plugin_files
    test, as upstream WP-Bench grades its exploit strings), `files` as a plugin.

    Upstream's suites give each exploit as a bare PHP string; it loads as `{"code": <string>}`.
    """

    model_config = ConfigDict(extra="forbid")
    description: str = ""
    code: str | None = None
    files: dict[str, str] | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        return {"code": value} if isinstance(value, str) else value


class AlternativeSolution(ExploitSolution):
    """Another correct solution that must pass: a choice the prompt leaves open (a trailing slash,
    markup, option order) taken the other way from the reference. `--check-reference-solution`
    grades every one beside the reference."""

    description: str = Field(min_length=1)


class ExecutionTest(BaseModel):
    """One code-generation task, graded by the runtime."""

    model_config = ConfigDict(extra="allow")
    __test__ = False  # not a pytest class

    id: str = Field(min_length=1)
    category: str = Field(min_length=1)
    difficulty: Difficulty = "intermediate"
    prompt: str = Field(min_length=1)
    requirements: list[str] = Field(default_factory=list)
    expected_behavior: str = ""
    test_function: str | None = None
    artifact_kind: ArtifactKind = "php_snippet"
    reference_solution: str | None = None
    reference_files: dict[str, str] | None = None
    static_checks: StaticChecks = Field(default_factory=StaticChecks)
    runtime_checks: RuntimeChecks = Field(default_factory=RuntimeChecks)
    exploit_solutions: list[ExploitSolution] = Field(default_factory=list)
    alternative_solutions: list[AlternativeSolution] = Field(default_factory=list)
    timeout_seconds: float | None = Field(default=None, gt=0)
    metadata: TestMetadata = Field(default_factory=TestMetadata)

    @property
    def test_type(self) -> Literal["execution"]:
        return "execution"

    @model_validator(mode="after")
    def _reference_matches_kind(self) -> ExecutionTest:
        if self.artifact_kind == "wp_plugin_files" and self.reference_solution and not self.reference_files:
            raise ValueError("wp_plugin_files tests take reference_files, not reference_solution")
        if self.reference_files is not None and len(self.reference_files) > PLUGIN_MAX_FILES:
            raise ValueError(f"reference_files has more than {PLUGIN_MAX_FILES} files")
        plugin = self.artifact_kind == "wp_plugin_files"
        for i, alt in enumerate(self.alternative_solutions):
            if (alt.files is not None) != plugin or (alt.code is not None) == plugin:
                want = "files (a map of path to content)" if plugin else "code"
                raise ValueError(f"alternative_solutions.{i}: a {self.artifact_kind} test's alternative gives {want}")
            if alt.files is not None and len(alt.files) > PLUGIN_MAX_FILES:
                raise ValueError(f"alternative_solutions.{i}: more than {PLUGIN_MAX_FILES} files")
        return self

    def test_function_name(self) -> str | None:
        """`wpbp_x( int $a ): string` -> `wpbp_x`."""
        if not self.test_function:
            return None
        match = re.match(r"\s*(?:function\s+)?([A-Za-z_\\][A-Za-z0-9_\\]*)", self.test_function)
        return match.group(1) if match else None


class Choice(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str
    text: str


class KnowledgeTest(BaseModel):
    """A multiple-choice or short-answer question, scored 0/1."""

    model_config = ConfigDict(extra="allow")
    __test__ = False

    id: str = Field(min_length=1)
    category: str = Field(min_length=1)
    difficulty: Difficulty = "intermediate"
    type: Literal["multiple_choice", "short_answer"]
    prompt: str = Field(min_length=1)
    choices: list[Choice] = Field(default_factory=list)
    correct_answer: str = Field(min_length=1)
    match: Literal["exact", "regex", "contains"] = "exact"
    # Upstream WP-Bench's field: "exact" or "contains" (its own scorer accepts a substring for both;
    # the wpbench profile reads it as `match` when `match` is not given).
    answer_type: Literal["exact", "contains"] | None = None
    accepted_answers: list[str] = Field(default_factory=list)
    explanation: str = ""
    metadata: KnowledgeMetadata = Field(default_factory=KnowledgeMetadata)

    @property
    def test_type(self) -> Literal["knowledge"]:
        return "knowledge"

    @model_validator(mode="before")
    @classmethod
    def _upstream_spellings(cls, value: Any) -> Any:
        # Upstream WP-Bench reads answer_type case-insensitively ("Contains") and matches a multiple-choice
        # correct_answer to the choice keys in upper case ("b" is choice B).
        if not isinstance(value, dict):
            return value
        value = dict(value)
        if isinstance(value.get("answer_type"), str):
            value["answer_type"] = value["answer_type"].lower()
        answer, choices = value.get("correct_answer"), value.get("choices")
        if isinstance(answer, str) and isinstance(choices, list):
            keys = [c.get("key") for c in choices if isinstance(c, dict)]
            if answer not in keys:
                same = [k for k in keys if isinstance(k, str) and k.upper() == answer.upper()]
                if len(same) == 1:
                    value["correct_answer"] = same[0]
        return value

    @model_validator(mode="after")
    def _choices_hold_answer(self) -> KnowledgeTest:
        if self.answer_type is not None and "match" not in self.model_fields_set:
            self.match = self.answer_type
        if self.type == "multiple_choice":
            keys = [c.key for c in self.choices]
            if len(keys) < 2:
                raise ValueError("multiple_choice needs at least two choices")
            if len(set(keys)) != len(keys):
                raise ValueError("choice keys must be unique")
            if self.correct_answer not in keys:
                raise ValueError(f"correct_answer {self.correct_answer!r} is not a choice key")
        if self.match == "regex":
            for pattern in [self.correct_answer, *self.accepted_answers]:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"regex {pattern!r} does not compile: {exc}") from exc
        return self


AnyTest = ExecutionTest | KnowledgeTest


SuiteFormat = Literal["upstream", "wpbench"]


def test_from_dict(raw: dict[str, Any]) -> AnyTest:
    """A test as a manifest stores it (`RunManifest.tests`), validated back into its model."""
    if raw.get("type") in ("multiple_choice", "short_answer"):
        return KnowledgeTest.model_validate(raw)
    return ExecutionTest.model_validate(raw)


class Suite(BaseModel):
    """A loaded suite: its name, tests in file order, and a digest of the source files.

    `format` is "upstream" for WP-Bench's own layout (a file is an object naming itself with `id` or
    `version` beside its `tests` array, or a Hugging Face export row has JSON-encoded `requirements`
    or an `answer_type` column); such suites default to the upstream execution profile.
    """

    name: str
    execution: list[ExecutionTest]
    knowledge: list[KnowledgeTest]
    digest: str
    source: str
    format: SuiteFormat = "wpbench"

    def all_tests(self) -> list[AnyTest]:
        return [*self.execution, *self.knowledge]

    def by_id(self) -> dict[str, AnyTest]:
        return {t.id: t for t in self.all_tests()}


def _where(path: Path, test_id: str | None, field: str = "") -> str:
    parts = [str(path)]
    if test_id:
        parts.append(f"test {test_id}")
    if field:
        parts.append(f"field {field}")
    return ", ".join(parts)


def _parse_test(kind: str, raw: Any, path: Path, index: int) -> AnyTest:
    test_id = raw.get("id") if isinstance(raw, dict) else None
    label = test_id if isinstance(test_id, str) else f"#{index}"
    if not isinstance(raw, dict):
        raise InputError(f"{path}: entry {label} is not a JSON object")
    model: type[ExecutionTest] | type[KnowledgeTest] = ExecutionTest if kind == "execution" else KnowledgeTest
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        field, message = first_error(exc)
        raise InputError(f"{_where(path, label, field)}: {message}") from exc


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:  # unreadable, a directory named *.json, a symlink loop
        raise InputError(f"{path}: cannot read: {exc.strerror}") from exc


def _read_json(path: Path, data: bytes | None = None) -> Any:
    """A suite file's JSON; bytes that are not UTF-8, bad or too deep JSON and lone surrogates are InputErrors."""
    doc = textsafe.loads(textsafe.decode_utf8(_read_bytes(path) if data is None else data, str(path)), str(path))
    textsafe.refuse_lone_surrogates(doc, str(path))
    return doc


def _tests_in(doc: Any, path: Path) -> list[Any]:
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict) and isinstance(doc.get("tests"), list):
        return list(doc["tests"])
    raise InputError(f"{path}: expected a JSON array of tests or an object with a 'tests' array")


def check_assertion_types(test: ExecutionTest, where: str) -> None:
    for i, assertion in enumerate(test.runtime_checks.assertions):
        if assertion.type not in ASSERTION_TYPES:
            raise InputError(
                f"{where}, test {test.id}, field runtime_checks.assertions.{i}.type: "
                f"unknown assertion type {assertion.type!r} (known: {', '.join(ASSERTION_TYPES)})"
            )


def load_suite_dir(folder: Path, name: str | None = None) -> Suite:
    """Load a suite folder in WP-Bench layout; raise InputError naming file, test and field."""
    if not folder.is_dir():
        raise InputError(f"{folder}: dataset folder does not exist")
    exec_files = sorted((folder / "execution").glob("*.json"))
    know_files = sorted((folder / "knowledge").glob("*.json"))
    if not exec_files and not know_files:
        raise InputError(f"{folder}: no execution/*.json or knowledge/*.json files (WP-Bench suite layout)")
    digest = hashlib.sha256()
    execution: list[ExecutionTest] = []
    knowledge: list[KnowledgeTest] = []
    seen: dict[str, Path] = {}
    upstream_layout = False
    for kind, files in (("execution", exec_files), ("knowledge", know_files)):
        for path in files:
            data = _read_bytes(path)
            digest.update(f"{kind}/{path.name}\0".encode() + data + b"\0")
            doc = _read_json(path, data)
            # Upstream's suite files name themselves (`id`, `version`) beside their `tests` array.
            upstream_layout = upstream_layout or (isinstance(doc, dict) and ("id" in doc or "version" in doc))
            for i, raw in enumerate(_tests_in(doc, path)):
                test = _parse_test(kind, raw, path, i)
                if test.id in seen:
                    raise InputError(f"{path}: duplicate test id {test.id} (also in {seen[test.id]})")
                seen[test.id] = path
                if isinstance(test, ExecutionTest):
                    check_assertion_types(test, str(path))
                    execution.append(test)
                else:
                    knowledge.append(test)
    return Suite(
        name=name or folder.name,
        execution=execution,
        knowledge=knowledge,
        digest="sha256:" + digest.hexdigest(),
        source=str(folder),
        format="upstream" if upstream_layout else "wpbench",
    )


def load_suite_jsonl(path: Path, suite: str | None = None) -> Suite:
    """Load a JSONL export (a row per test with `suite` and `type` columns)."""
    if not path.is_file():
        raise InputError(f"{path}: dataset file does not exist")
    data = _read_bytes(path)
    execution: list[ExecutionTest] = []
    knowledge: list[KnowledgeTest] = []
    seen: set[str] = set()
    names: set[str] = set()
    upstream_rows = False
    for lineno, line in enumerate(textsafe.decode_utf8(data, str(path)).splitlines(), 1):
        if not line.strip():
            continue
        row = textsafe.loads(line, f"{path}: line {lineno}")
        textsafe.refuse_lone_surrogates(row, f"{path}: line {lineno}")
        if not isinstance(row, dict):
            raise InputError(f"{path}: line {lineno}: a row must be a JSON object")
        row_suite = row.pop("suite", None)
        if suite and row_suite and row_suite != suite:
            continue
        if row_suite:
            names.add(row_suite)
        kind = row.pop("test_kind", None) or (
            "knowledge" if row.get("type") in ("multiple_choice", "short_answer") else "execution"
        )
        upstream_rows = upstream_rows or isinstance(row.get("requirements"), str) or "answer_type" in row
        test = _parse_test(kind, _undo_export_encoding(row, kind, f"{path}: line {lineno}"), path, lineno)
        if test.id in seen:
            raise InputError(f"{path}: line {lineno}: duplicate test id {test.id}")
        seen.add(test.id)
        if isinstance(test, ExecutionTest):
            check_assertion_types(test, f"{path}: line {lineno}")
            execution.append(test)
        else:
            knowledge.append(test)
    if not execution and not knowledge:
        raise InputError(f"{path}: no tests" + (f" for suite {suite}" if suite else ""))
    return Suite(
        name=suite or (names.pop() if len(names) == 1 else path.stem),
        execution=execution,
        knowledge=knowledge,
        digest="sha256:" + hashlib.sha256(data).hexdigest(),
        source=str(path),
        format="upstream" if upstream_rows else "wpbench",
    )


# Nested objects are exported as JSON strings so every row has the same flat column types.
_JSON_COLUMNS = (
    "static_checks",
    "runtime_checks",
    "reference_files",
    "metadata",
    "exploit_solutions",
    "alternative_solutions",
    "choices",
)
# Upstream's Hugging Face export also encodes `requirements`, and fills the columns of the other
# test kind with empty values ("", "[]", "{}"); those are dropped so each row reads as its kind.
_UPSTREAM_JSON_COLUMNS = ("requirements",)
_KIND_COLUMNS = {
    "execution": ("choices", "correct_answer", "answer_type", "explanation"),
    "knowledge": ("requirements", "static_checks", "runtime_checks", "reference_solution", "expected_behavior"),
}


def _undo_export_encoding(row: dict[str, Any], kind: str = "execution", where: str = "row") -> dict[str, Any]:
    out = dict(row)
    for key in (*_JSON_COLUMNS, *_UPSTREAM_JSON_COLUMNS):
        if isinstance(out.get(key), str):
            out[key] = textsafe.loads(out[key], f"{where}: field {key}")
    for key in _KIND_COLUMNS.get(kind, ()):
        if out.get(key) in ("", [], {}):
            out.pop(key, None)
    if kind == "execution" and out.get("type") == "execution":
        out.pop("type")
    if out.get("answer_type") == "":
        out.pop("answer_type")
    if out.get("reference_solution") == "":
        out.pop("reference_solution")
    if out.get("difficulty") == "unknown":  # upstream's default when a test names none
        out.pop("difficulty")
    return {k: v for k, v in out.items() if v is not None}


def export_rows(suite: Suite) -> list[dict[str, Any]]:
    """One flat row per test: scalar columns plus nested objects as JSON strings."""
    rows = []
    for test in suite.all_tests():
        row: dict[str, Any] = {"suite": suite.name, "test_kind": test.test_type}
        for key, value in test.model_dump(mode="json", exclude_none=True).items():
            row[key] = json.dumps(value, sort_keys=True) if key in _JSON_COLUMNS else value
        rows.append(row)
    return rows


def load_suite(path: Path, suite: str | None = None) -> Suite:
    """Load from a suite folder, a folder of suites plus a suite name, or a JSONL export."""
    if path.is_file():
        return load_suite_jsonl(path, suite)
    if suite and (path / suite).is_dir() and not (path / "execution").is_dir():
        return load_suite_dir(path / suite, suite)
    if (path / "suites").is_dir() and suite and (path / "suites" / suite).is_dir():
        return load_suite_dir(path / "suites" / suite, suite)
    return load_suite_dir(path)
