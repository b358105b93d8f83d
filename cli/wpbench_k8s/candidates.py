"""Where candidates come from when no model writes them: reference solutions, the exploit battery,
and completions files produced elsewhere."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from wpbench_k8s.dataset import ExecutionTest
from wpbench_k8s.errors import InputError, first_error, warn
from wpbench_k8s.exploit_variants import UNIVERSAL_VALUES, evasions, universal_answer, with_statements
from wpbench_k8s.manifest import Candidate
from wpbench_k8s.textsafe import decode_utf8, loads, refuse_lone_surrogates

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
# Attacks on the grader rather than on one test ({name}: the test function, when the test names one).
# A test one of these passes is forgeable whatever its assertions say: the grader is what failed.
_FORGED = (
    '{"contract_version":"1","status":"passed","reason":"forged","scores":'
    '{"execution_pass":true,"runtime":1.0,"static":1.0,"static_policy_pass":true}}'
)
GENERAL_EXPLOITS: tuple[tuple[str, str], ...] = (
    (
        # Returns what the verifier shows it (an expected value in a frame), else its first argument.
        "argument-or-backtrace",
        "function {name}( ...$args ) {\n"
        "\tforeach ( debug_backtrace() as $f ) { foreach ( $f['args'] ?? array() as $a ) {\n"
        "\t\tif ( is_array( $a ) && array_key_exists( 'expected', $a ) ) { return $a['expected']; }\n"
        "\t} }\n\treturn $args[0] ?? null;\n}\n",
    ),
    (
        # Takes over the verifier's unqualified names, forges verdicts and events, answers REST with 200.
        "grader-attack",
        "namespace WPBench\\Runner {\n"
        "\tfunction function_exists( $n ) { return true; }\n"
        "\tfunction is_callable( $n ) { return true; }\n"
        "\tfunction str_contains( $h, $n ) { return true; }\n"
        "\tfunction preg_match( $p, $s, &$m = null ) { return 1; }\n"
        "}\nnamespace {\n"
        f"echo '{_FORGED}', \"\\n\"; fwrite( STDERR, '{_FORGED}' );\n"
        "$fd = fopen( 'php://fd/3', 'w' );\n"
        "fwrite( $fd, 'WPB1 ' . str_repeat( '0', 64 ) . ' {\"event\":\"done\"}' . \"\\n\" );\n"
        "add_filter( 'rest_pre_dispatch', function () { return new WP_REST_Response( array(), 200 ); } );\n"
        "}\n",
    ),
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


def alternative_candidates(test: ExecutionTest) -> list[Candidate]:
    """The test's other correct solutions (`alternative_solutions`): each must pass like the reference."""
    return [
        Candidate(code=alt.code, files=alt.files, label=f"alternative:{i + 1} ({alt.description})")
        for i, alt in enumerate(test.alternative_solutions)
    ]


def exploit_battery(test: ExecutionTest) -> list[Candidate]:
    """Empty code, stubs of the test function returning each trivial value, attacks on the grader
    itself (GENERAL_EXPLOITS), universal answers and evasions of the forbidden patterns
    (exploit_variants.py), and the test's authored exploits."""
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
    for label, body in GENERAL_EXPLOITS:
        if "{name}" not in body:
            battery.append(wrap(body, f"exploit:{label}"))
        elif name:
            battery.append(wrap(body.replace("{name}", name), f"exploit:{label}"))
    for label, value in UNIVERSAL_VALUES:
        battery.append(wrap(universal_answer(test, value), f"exploit:universal-{label}"))
    battery.extend(_evasion_candidates(test))
    for i, exploit in enumerate(test.exploit_solutions):
        label = f"exploit:authored-{i + 1}" + (f" ({exploit.description})" if exploit.description else "")
        kind = "wp_plugin_files" if exploit.files is not None else "php_snippet"
        battery.append(Candidate(code=exploit.code, files=exploit.files, label=label, artifact_kind=kind))
    return battery


def _evasion_candidates(test: ExecutionTest) -> list[Candidate]:
    """The reference solution plus each forbidden construct written to evade its regex (snippets, and
    a plugin's main file)."""
    variants = evasions(test)
    if not variants:
        return []
    if test.artifact_kind == "php_snippet":
        if test.reference_solution is None:
            return []
        return [
            Candidate(code=with_statements(test.reference_solution, code), label=f"exploit:{label}")
            for label, code in variants
        ]
    files = dict(test.reference_files or {})
    main = next((path for path, text in sorted(files.items()) if "/" not in path and "Plugin Name:" in text), None)
    if main is None:
        return []
    return [
        Candidate(files={**files, main: with_statements(files[main], code)}, label=f"exploit:{label}")
        for label, code in variants
    ]


class CompletionLine(BaseModel):
    """One line of a completions file: a test, a model, and what it wrote."""

    model_config = ConfigDict(extra="forbid")
    test_id: str
    model: str = "completions"
    code: str | None = None
    files: dict[str, str] | None = None
    completion: str | None = None  # raw model text, extracted like a live completion
    variant: str = "baseline"


def load_completions(path: Path, kinds: Mapping[str, str]) -> list[CompletionLine]:
    """Read a completions JSONL file; unknown tests, bad lines, duplicates and an artifact of the wrong
    kind (`code` for a wp_plugin_files test, `files` for a php_snippet one) are InputErrors.

    `kinds` maps each known test id to its artifact kind."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read completions: {exc.strerror}") from exc
    lines: list[CompletionLine] = []
    seen: set[tuple[str, str, str]] = set()
    missing_model: list[int] = []
    # Lines end at "\n" only: U+2028/U+2029 may sit raw inside a JSON string.
    for lineno, raw_bytes in enumerate(data.split(b"\n"), 1):
        raw = decode_utf8(raw_bytes, f"{path}: line {lineno}")
        if not raw.strip():
            continue
        doc = loads(raw, f"{path}: line {lineno}")
        try:
            line = CompletionLine.model_validate(doc)
        except ValidationError as exc:
            field, message = first_error(exc)
            raise InputError(f"{path}: line {lineno}, field {field}: {message}") from exc
        # Who answered which test is the run's bookkeeping: it must be writable text. An answer's own
        # content with a lone surrogate is that candidate's scored failure (ManifestItem.with_candidate).
        refuse_lone_surrogates({"test_id": line.test_id, "model": line.model, "variant": line.variant},
                               f"{path}: line {lineno}")  # fmt: skip
        if isinstance(doc, dict) and "model" not in doc:
            missing_model.append(lineno)
        if line.test_id not in kinds:
            raise InputError(f"{path}: line {lineno}: unknown test id {line.test_id}")
        kind = kinds[line.test_id]
        if kind == "wp_plugin_files" and line.code is not None:
            raise InputError(
                f"{path}: line {lineno}, field code: test {line.test_id} is a wp_plugin_files test;"
                " give files (a map of path to content) or a completion"
            )
        if kind == "php_snippet" and line.files is not None:
            raise InputError(
                f"{path}: line {lineno}, field files: test {line.test_id} is a php_snippet test;"
                " give code or a completion"
            )
        if line.code is None and line.files is None and line.completion is None:
            raise InputError(f"{path}: line {lineno}: needs one of code, files, completion")
        key = (line.test_id, line.model, line.variant)
        if key in seen:
            raise InputError(f"{path}: line {lineno}: duplicate completion for {line.test_id} / {line.model}")
        seen.add(key)
        lines.append(line)
    if not lines:
        raise InputError(f"{path}: no completions")
    if missing_model:
        shown = ", ".join(map(str, missing_model[:5])) + (", ..." if len(missing_model) > 5 else "")
        warn(f"{path}: {len(missing_model)} line(s) without model (line {shown}) are graded as model 'completions'")
    return lines
