"""Where candidates come from when no model writes them: reference solutions, the exploit battery,
and completions files produced elsewhere."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from wpbench_k8s.dataset import ExecutionTest
from wpbench_k8s.errors import InputError, first_error
from wpbench_k8s.manifest import Candidate

# Zero-effort stubs: a test whose assertions one of these satisfies is under-specified.
STUB_RETURNS: tuple[tuple[str, str], ...] = (
    ("return-1", "1"),
    ("return-0", "0"),
    ("return-true", "true"),
    ("return-false", "false"),
    ("return-null", "null"),
    ("return-empty-string", "''"),
    ("return-empty-array", "array()"),
)
STUB_PLUGIN_MAIN = "wpbench-stub.php"
_PLUGIN_HEADER = "<?php\n/**\n * Plugin Name: WPBench Stub\n */\n"


def reference_candidate(test: ExecutionTest) -> Candidate:
    if test.artifact_kind == "wp_plugin_files":
        if not test.reference_files:
            raise InputError(f"test {test.id}: wp_plugin_files test has no reference_files")
        return Candidate(files=dict(test.reference_files), label="reference")
    if test.reference_solution is None:
        raise InputError(f"test {test.id}: no reference_solution")
    return Candidate(code=test.reference_solution, label="reference")


def exploit_battery(test: ExecutionTest) -> list[Candidate]:
    """Empty code, stubs of the test function returning each trivial value, and authored exploits."""
    plugin = test.artifact_kind == "wp_plugin_files"

    def wrap(body: str, label: str) -> Candidate:
        if plugin:
            return Candidate(files={STUB_PLUGIN_MAIN: _PLUGIN_HEADER + body}, label=label)
        return Candidate(code=body, label=label)

    battery = [wrap("", "exploit:empty")]
    name = test.test_function_name()
    if name:
        for label, value in STUB_RETURNS:
            # Variadic and untyped, so the stub fits any signature the assertions call it with.
            battery.append(wrap(f"function {name}( ...$args ) {{ return {value}; }}\n", f"exploit:{label}"))
    for i, exploit in enumerate(test.exploit_solutions):
        label = f"exploit:authored-{i + 1}" + (f" ({exploit.description})" if exploit.description else "")
        battery.append(Candidate(code=exploit.code, files=exploit.files, label=label))
    return battery


class CompletionLine(BaseModel):
    """One line of a completions file: a test, a model, and what it wrote."""

    model_config = ConfigDict(extra="forbid")
    test_id: str
    model: str = "completions"
    code: str | None = None
    files: dict[str, str] | None = None
    completion: str | None = None  # raw model text, extracted like a live completion
    variant: str = "baseline"


def load_completions(path: Path, known_ids: set[str]) -> list[CompletionLine]:
    """Read a completions JSONL file; unknown tests, bad lines and duplicates are InputErrors."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read completions: {exc.strerror}") from exc
    lines: list[CompletionLine] = []
    seen: set[tuple[str, str, str]] = set()
    for lineno, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = CompletionLine.model_validate(json.loads(raw))
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: line {lineno}: malformed JSON: {exc.msg}") from exc
        except ValidationError as exc:
            field, message = first_error(exc)
            raise InputError(f"{path}: line {lineno}, field {field}: {message}") from exc
        if line.test_id not in known_ids:
            raise InputError(f"{path}: line {lineno}: unknown test id {line.test_id}")
        if line.code is None and line.files is None and line.completion is None:
            raise InputError(f"{path}: line {lineno}: needs one of code, files, completion")
        key = (line.test_id, line.model, line.variant)
        if key in seen:
            raise InputError(f"{path}: line {lineno}: duplicate completion for {line.test_id} / {line.model}")
        seen.add(key)
        lines.append(line)
    if not lines:
        raise InputError(f"{path}: no completions")
    return lines
