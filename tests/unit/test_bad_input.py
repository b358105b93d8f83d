"""Bad input, as a new user (or a hostile file) gives it: every case ends in one line naming what is wrong,
with the exit code the README lists (2 bad input, 3 engine or cluster unreachable, 5 cannot write), no
traceback, and nothing written. The sweep runs the CLI in-process, so an uncaught exception fails it."""

from __future__ import annotations

import io
import json
import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from wpbench_k8s.cli import run

REPO = Path(__file__).resolve().parents[2]
MINI = REPO / "tests" / "fixtures" / "suites" / "mini"
HOOKS = json.loads((MINI / "execution" / "hooks.json").read_text())[0]
DEEP = b"[" * 100_000


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(args), out, err)
    return code, out.getvalue(), err.getvalue()


def tree(root: Path) -> dict[str, int]:
    """Every path under root with its size (symlinks as links): what a case may not change."""
    return {str(p.relative_to(root)): (0 if p.is_symlink() or p.is_dir() else p.stat().st_size)
            for p in sorted(root.rglob("*"))}  # fmt: skip


# ---- inputs -------------------------------------------------------------------------------------
def suite(tmp: Path, tests: bytes | str | None = None, *, name: str = "a.json") -> Path:
    """A suite folder whose execution/NAME holds `tests` (bytes as written; str as text)."""
    folder = tmp / "suite"
    (folder / "execution").mkdir(parents=True, exist_ok=True)
    if tests is not None:
        path = folder / "execution" / name
        path.write_bytes(tests if isinstance(tests, bytes) else tests.encode())
    return folder


def exec_test(**changes: object) -> str:
    return json.dumps([{**HOOKS, **changes}])


def write(tmp: Path, name: str, content: bytes | str) -> Path:
    path = tmp / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def kubeconfig(server: str) -> str:
    return (
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: '" + server + "'}\n"
        "users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\n"
        "current-context: c\n"
    )


def run_with_config(text: bytes | str) -> Callable[[Path], list[str]]:
    def argv(tmp: Path) -> list[str]:
        cfg = write(tmp, "wp-bench.yaml", text)
        return ["run", "--config", str(cfg), "--dataset-path", str(MINI), "--check-reference-solution"]

    return argv


def run_with_suite(content: bytes | str, *, name: str = "a.json") -> Callable[[Path], list[str]]:
    return lambda tmp: ["run", "--dataset-path", str(suite(tmp, content, name=name)), "--check-reference-solution"]


def validate_suite(content: bytes | str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["dataset", "validate", str(suite(tmp, content))]


def run_with_jsonl(content: bytes | str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["run", "--dataset-path", str(write(tmp, "suite.jsonl", content)), "--check-reference-solution"]


def run_with_completions(content: bytes | str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["run", "--completions", str(write(tmp, "c.jsonl", content)), "--dataset-path", str(MINI)]


def completion(**fields: object) -> str:
    return json.dumps({"test_id": "mini-hooks-001", "model": "m", "code": "echo 1;", **fields}) + "\n"


def run_flags(*flags: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["run", "--dataset-path", str(MINI), *flags]


def report_of(content: bytes | str | None) -> Callable[[Path], list[str]]:
    def argv(tmp: Path) -> list[str]:
        path = tmp / "summary.json" if content is None else write(tmp, "summary.json", content)
        return ["report", str(path), "-o", str(tmp / "out" / "r.html")]

    return argv


def with_kubeconfig(content: bytes | str, *command: str) -> Callable[[Path], list[str]]:
    def argv(tmp: Path) -> list[str]:
        path = write(tmp, "kubeconfig", content)
        return [command[0], "--kubeconfig", str(path), "--request-timeout", "2", *command[1:]]  # later flags win

    return argv


def resume_of(make: Callable[[Path], Path]) -> Callable[[Path], list[str]]:
    return lambda tmp: ["run", "--resume", str(make(tmp))]


def loop_suite(tmp: Path) -> list[str]:
    folder = suite(tmp)
    (folder / "execution" / "a.json").symlink_to("b.json")
    (folder / "execution" / "b.json").symlink_to("a.json")
    return ["dataset", "validate", str(folder)]


def dir_named_json(tmp: Path) -> list[str]:
    folder = suite(tmp)
    (folder / "execution" / "x.json").mkdir()
    return ["run", "--dataset-path", str(folder), "--check-reference-solution"]


def sidecar_damaged(tmp: Path) -> Path:
    jsonl = write(tmp, "results_20260101T000000Z.jsonl.partial", "")
    write(tmp, "results_20260101T000000Z.jsonl.manifest", b"[" * 50_000)
    return jsonl


def export_under_a_file(tmp: Path) -> list[str]:
    write(tmp, "afile", "x")
    return ["dataset", "export", str(MINI), "-o", str(tmp / "afile" / "x.jsonl")]


def templates_of(content: bytes) -> Callable[[Path], list[str]]:
    def argv(tmp: Path) -> list[str]:
        (tmp / "tpl").mkdir()
        write(tmp, "tpl/execution.txt", content)
        return ["run", "--dataset-path", str(MINI), "--model-name", "a", "--prompt-templates", str(tmp / "tpl")]

    return argv


def skill_of(content: bytes) -> Callable[[Path], list[str]]:
    return lambda tmp: ["run", "--dataset-path", str(MINI), "--model-name", "a", "--skill",
                        str(write(tmp, "SKILL.md", content))]  # fmt: skip


def rubric_of(content: bytes) -> Callable[[Path], list[str]]:
    def argv(tmp: Path) -> list[str]:
        rubric = write(tmp, "rubric.json", content)
        cfg = write(tmp, "wp-bench.yaml", f"judge: {{model: a, rubric: '{rubric}', skip: false}}\n")
        return ["run", "--config", str(cfg), "--dataset-path", str(MINI), "--model-name", "a"]

    return argv


UNREACHABLE = "https://127.0.0.1:1"
CASES: list[tuple[str, Callable[[Path], list[str]], int, str]] = [
    # config files
    ("config-binary", run_with_config(bytes(range(256)) * 4), 2, "not UTF-8"),
    ("config-utf16", run_with_config("run: {limit: 1}\n".encode("utf-16")), 2, "not UTF-8"),
    ("config-list", run_with_config("- a\n- b\n"), 2, "must be a YAML mapping"),
    ("config-scalar", run_with_config("just text\n"), 2, "must be a YAML mapping"),
    ("config-unknown-key", run_with_config("nope: 1\n"), 2, "nope: unknown key"),
    ("config-unknown-nested", run_with_config("run: {nope: 1}\n"), 2, "run.nope: unknown key"),
    ("config-memory-huge", run_with_config("grader: {limits: {memory_mb: 99999999999999999999}}\n"), 2, "memory_mb"),
    ("config-cpus-zero", run_with_config("grader: {limits: {cpus: 0}}\n"), 2, "cpus"),
    ("config-cpus-huge", run_with_config("grader: {limits: {cpus: 1000}}\n"), 2, "cpus"),
    ("config-pids-tiny", run_with_config("grader: {limits: {pids: 1}}\n"), 2, "pids"),
    ("config-tmpfs-huge", run_with_config("grader: {limits: {tmp_tmpfs_mb: 9999999}}\n"), 2, "tmp_tmpfs_mb"),
    ("config-timeout-negative", run_with_config("grader: {timeout_seconds: -1}\n"), 2, "timeout_seconds"),
    ("config-concurrency-zero", run_with_config("run: {execution_concurrency: 0}\n"), 2, "execution_concurrency"),
    ("config-runs-huge", run_with_config("run: {runs: 99}\n"), 2, "run.runs"),
    ("config-seed-huge", run_with_config("run: {seed: 1" + "0" * 30 + "}\n"), 2, "run.seed"),
    ("config-temperature", run_with_config("models: [{name: a, temperature: 50}]\n"), 2, "temperature"),
    ("config-model-nameless", run_with_config("models: [{}]\n"), 2, "models.0.name"),
    ("config-limits-scalar", run_with_config("grader: {limits: 5}\n"), 2, "grader.limits"),
    ("config-isolation-none", run_with_config("run: {execution_isolation: none}\n"), 2, "execution_isolation"),
    ("config-unclosed", run_with_config("run: [\n"), 2, "malformed YAML"),
    ("config-tab", run_with_config("run:\n\t- a\n"), 2, "malformed YAML"),
    ("config-bad-date", run_with_config("run: {seed: 2001-02-30}\n"), 2, "malformed YAML"),
    ("config-deep", run_with_config(b"[" * 20_000), 2, "malformed YAML"),
    ("config-surrogate", run_with_config('run: {suite: "\\ud83d"}\n'), 2, "lone UTF-16 surrogate"),
    ("config-k8s-object", run_with_config("apiVersion: v1\nkind: ConfigMap\n"), 2, "not a wp-bench config"),
    # suite folders and JSONL exports
    ("suite-not-utf8", run_with_suite(b'[{"id": "\xff"}]'), 2, "not UTF-8"),
    ("suite-binary", run_with_suite(bytes(range(256))), 2, "not UTF-8"),
    ("suite-deep", run_with_suite(DEEP), 2, "nested too deeply"),
    ("suite-malformed", run_with_suite("[{"), 2, "malformed JSON at line 1"),
    ("suite-surrogate", run_with_suite(exec_test(prompt="\\ud83d").replace("\\\\ud83d", "\\ud83d")), 2, "surrogate"),
    ("suite-scalar", run_with_suite("5"), 2, "expected a JSON array"),
    ("suite-entry-scalar", run_with_suite("[5]"), 2, "is not a JSON object"),
    ("suite-no-id", run_with_suite(json.dumps([{k: v for k, v in HOOKS.items() if k != "id"}])), 2, "field id"),
    ("suite-duplicate-id", run_with_suite(json.dumps([HOOKS, HOOKS])), 2, "duplicate test id"),
    (
        "suite-bad-regex",
        run_with_suite(
            exec_test(static_checks={"forbidden_patterns": [{"pattern": "eval(", "description": "no eval"}]})
        ),
        2,
        "regex does not compile",
    ),
    ("suite-unnamed-function", run_with_suite(exec_test(test_function="( $a )")), 2, "has no function name"),
    (
        "suite-zero-weight",
        run_with_suite(
            exec_test(runtime_checks={"assertions": [{"type": "hook_registered", "hook": "init", "weight": 0}]})
        ),
        2,
        "zero total weight",
    ),
    ("suite-no-assertions", run_with_suite(exec_test(runtime_checks={"assertions": []})), 2, "assertions is empty"),
    (
        "suite-unknown-assertion",
        run_with_suite(exec_test(runtime_checks={"assertions": [{"type": "nope", "weight": 1}]})),
        2,
        "assertion",
    ),
    (
        "suite-empty-folder",
        lambda tmp: ["run", "--dataset-path", str(suite(tmp)), "--check-reference-solution"],
        2,
        "no execution/*.json",
    ),
    ("suite-dir-named-json", dir_named_json, 2, "cannot read"),
    ("suite-symlink-loop", loop_suite, 2, "symbolic links"),
    ("validate-deep", validate_suite(DEEP), 2, "nested too deeply"),
    ("validate-not-utf8", validate_suite(b"\xc3\x28"), 2, "not UTF-8"),
    ("jsonl-not-utf8", run_with_jsonl(b'{"id": "\xfe"}\n'), 2, "not UTF-8"),
    ("jsonl-row-array", run_with_jsonl("[1, 2]\n"), 2, "must be a JSON object"),
    ("jsonl-deep", run_with_jsonl(DEEP + b"\n"), 2, "nested too deeply"),
    (
        "jsonl-field-not-json",
        run_with_jsonl(json.dumps({**HOOKS, "static_checks": "{"}) + "\n"),
        2,
        "field static_checks",
    ),
    # completions files
    ("completions-not-utf8", run_with_completions(b'{"test_id": "\xff"}\n'), 2, "line 1: column 14: not UTF-8"),
    ("completions-deep", run_with_completions(DEEP), 2, "line 1: JSON nested too deeply"),
    ("completions-malformed", run_with_completions(completion() + "{\n"), 2, "line 2: malformed JSON"),
    ("completions-surrogate-id", run_with_completions('{"test_id": "\\ud83d", "code": "x"}\n'), 2, "surrogate"),
    ("completions-unknown-test", run_with_completions(completion(test_id="ghost")), 2, "unknown test id ghost"),
    ("completions-empty", run_with_completions(""), 2, "no completions"),
    ("completions-array-line", run_with_completions("[1]\n"), 2, "line 1"),
    ("completions-wrong-kind", run_with_completions(completion(code=None, files={"a.php": "x"})), 2, "php_snippet"),
    ("completions-duplicate", run_with_completions(completion() + completion()), 2, "duplicate completion"),
    ("completions-code-number", run_with_completions(completion(code=5)), 2, "field code"),
    ("completions-nothing", run_with_completions(completion(code=None)), 2, "needs one of"),
    (
        "completions-a-directory",
        lambda tmp: ["run", "--completions", str(tmp), "--dataset-path", str(MINI)],
        2,
        "is a directory",
    ),
    # flags
    ("flag-empty-test-id", run_flags("--check-reference-solution", "--test-id", ","), 2, "--test-id: empty"),
    ("flag-empty-category", run_flags("--check-reference-solution", "--category", ""), 2, "--category: empty"),
    ("flag-empty-model", run_flags("--model-name", " , "), 2, "--model-name: empty"),
    (
        "flag-reference-knowledge",
        run_flags("--check-reference-solution", "--test-type", "knowledge"),
        2,
        "--test-type knowledge",
    ),
    ("flag-unknown-category", run_flags("--check-reference-solution", "--category", "nope"), 2, "unknown category"),
    ("flag-unknown-test-id", run_flags("--check-reference-solution", "--test-id", "nope"), 2, "unknown test id"),
    ("flag-two-modes", run_flags("--check-reference-solution", "--check-exploits"), 2, "choose one of"),
    ("flag-limit-zero", run_flags("--check-reference-solution", "--limit", "0"), 2, "--limit"),
    (
        "flag-concurrency-zero",
        run_flags("--check-reference-solution", "--execution-concurrency", "0"),
        2,
        "--execution-concurrency",
    ),
    ("flag-timeout-negative", run_flags("--check-reference-solution", "--timeout", "-5"), 2, "timeout_seconds"),
    ("flag-unknown-executor", run_flags("--check-reference-solution", "--executor", "nope"), 2, "unknown executor"),
    ("flag-output-format-xml", run_flags("--check-reference-solution", "--dry-run", "-o", "xml"), 2, "xml"),
    ("flag-output-format-no-dry-run", run_flags("--check-reference-solution", "-o", "json"), 2, "only with --dry-run"),
    ("flag-suite-nosuch", lambda tmp: ["run", "--suite", "nosuch", "--check-reference-solution"], 2, "wpk-core-v1"),
    ("flag-no-model", run_flags(), 2, "no model given"),
    ("cleanup-no-scope", lambda tmp: ["cleanup"], 2, "--run-id RUN"),
    ("cleanup-both-scopes", lambda tmp: ["cleanup", "--all", "--run-id", "x"], 2, "not both"),
    ("resume-missing", resume_of(lambda tmp: tmp / "results_x.jsonl.partial"), 2, "no such file"),
    ("resume-not-records", resume_of(lambda tmp: write(tmp, "notes.txt", "hi")), 2, "not a run's records file"),
    ("resume-no-manifest", resume_of(lambda tmp: write(tmp, "results_x.jsonl", "")), 2, "is missing"),
    ("resume-damaged-manifest", resume_of(sidecar_damaged), 2, "not a readable run file"),
    # prompt templates, skills, judge rubrics
    ("templates-not-utf8", templates_of(b"\xff{{prompt}}"), 2, "not UTF-8"),
    ("skill-not-utf8", skill_of(b"\xff\xfe"), 2, "not UTF-8"),
    ("rubric-not-utf8", rubric_of(b"\xff"), 2, "not a judge rubric"),
    ("rubric-deep", rubric_of(DEEP), 2, "not a judge rubric"),
    ("rubric-malformed", rubric_of(b"{"), 2, "malformed JSON"),
    # reports
    ("report-malformed", report_of("{"), 2, "not a summary JSON"),
    ("report-binary", report_of(bytes(range(256))), 2, "not a summary JSON"),
    ("report-deep", report_of(DEEP), 2, "not a summary JSON"),
    ("report-list", report_of("[]"), 2, "expected an object"),
    ("report-no-metadata", report_of("{}"), 2, "metadata"),
    ("report-missing", report_of(None), 2, "cannot read"),
    # kubeconfigs and cluster commands
    ("kubeconfig-unclosed", with_kubeconfig("clusters: [\n", "status", "r"), 2, "not a usable kubeconfig"),
    ("kubeconfig-binary", with_kubeconfig(bytes(range(1, 256)), "status", "r"), 2, "kubeconfig"),
    ("kubeconfig-list", with_kubeconfig("- a\n", "status", "r"), 2, "kubeconfig"),
    (
        "kubeconfig-no-context",
        with_kubeconfig("apiVersion: v1\nkind: Config\n", "status", "r"),
        3,
        "no usable Kubernetes configuration",
    ),
    ("kubeconfig-unreachable", with_kubeconfig(kubeconfig(UNREACHABLE), "status", "r"), 3, "127.0.0.1:1"),
    (
        "kubeconfig-submit",
        with_kubeconfig("clusters: [\n", "submit", "--check-reference-solution", "--dataset-path", str(MINI)),
        2,
        "not a usable kubeconfig",
    ),
    ("kubeconfig-logs", with_kubeconfig("clusters: [\n", "logs", "r", "t"), 2, "not a usable kubeconfig"),
    ("kubeconfig-runs", with_kubeconfig(kubeconfig(UNREACHABLE), "runs", "-n", "x"), 3, "127.0.0.1:1"),
    (
        "kubeconfig-timeout-zero",
        with_kubeconfig(kubeconfig(UNREACHABLE), "status", "r", "--request-timeout", "0"),
        2,
        "--request-timeout",
    ),
    # outputs
    ("export-under-a-file", export_under_a_file, 5, "cannot write"),
]


@pytest.mark.parametrize(("argv", "code", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_malformed_input_ends_in_one_clear_line_and_writes_nothing(tmp_path, monkeypatch, argv, code, says):
    monkeypatch.chdir(tmp_path)  # a run's default output/ would land here
    args = argv(tmp_path)
    before = tree(tmp_path)
    got, out, err = cli(*args)
    assert "Traceback" not in err + out
    assert got == code, err
    assert says in err, err
    assert tree(tmp_path) == before  # nothing written, not even an output folder


def test_the_sweep_is_wide():
    assert len(CASES) >= 60
    assert len({c[0] for c in CASES}) == len(CASES)


# ---- the cases that need a live stand-in -----------------------------------------------------------
@pytest.fixture
def black_hole() -> Iterator[str]:
    """A server on 127.0.0.1 that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


def test_a_server_that_never_answers_fails_in_one_line_naming_it(tmp_path, black_hole):
    path = write(tmp_path, "kubeconfig", kubeconfig(black_hole))
    code, _out, err = cli("status", "wpb-x", "--kubeconfig", str(path), "--request-timeout", "0.5")
    assert code == 3
    assert err.count("\n") == 1 and black_hole.removeprefix("http://") in err and "Traceback" not in err


def test_cleanup_without_an_engine_is_exit_3(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    code, _, err = cli("cleanup", "--all")
    assert code == 3 and "Docker engine not reachable at tcp://127.0.0.1:1" in err


def test_warnings_name_a_duplicate_config_key_and_a_completion_without_model(tmp_path):
    cfg = write(tmp_path, "wp-bench.yaml", "run:\n  limit: 1\n  limit: 2\n")
    code, out, err = cli("run", "--config", str(cfg), "--dataset-path", str(MINI), "--check-reference-solution",
                         "--dry-run", "-o", "json")  # fmt: skip
    assert code == 0, err
    assert "duplicate key 'limit' at line 3: the last value is used" in err
    assert len(json.loads(out)["tests"]) == 2  # the last value (2) won, as YAML says
    comps = write(tmp_path, "c.jsonl", json.dumps({"test_id": "mini-hooks-001", "code": "x"}) + "\n")
    code, out, err = cli("run", "--completions", str(comps), "--dataset-path", str(MINI), "--dry-run")
    assert code == 0, err
    assert "1 line(s) without model (line 1) are graded as model 'completions'" in err


def test_run_refuses_a_suite_validate_refuses_but_not_for_authoring_metadata(tmp_path):
    bad = suite(tmp_path, exec_test(static_checks={"forbidden_patterns": [{"pattern": "eval(", "description": "d"}]}))
    assert cli("dataset", "validate", str(bad))[0] == 2
    code, _, err = cli("run", "--dataset-path", str(bad), "--check-reference-solution", "--dry-run")
    assert code == 2 and "static_checks.forbidden_patterns.0: regex does not compile" in err
    unrefd = suite(tmp_path, exec_test(metadata={"source_refs": []}), name="a.json")
    assert cli("dataset", "validate", str(unrefd))[0] == 2  # an authoring error for validate ...
    assert cli("run", "--dataset-path", str(unrefd), "--check-reference-solution", "--dry-run")[0] == 0  # ... not run


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_dry_run_prints_one_document_scripts_can_read(fmt):
    import yaml

    code, out, err = cli("run", "--dataset-path", str(MINI), "--check-reference-solution", "--dry-run", "-o", fmt)
    assert code == 0, err
    doc = json.loads(out) if fmt == "json" else yaml.safe_load(out)
    assert [t["id"] for t in doc["tests"]] == ["mini-hooks-001", "mini-shortcodes-001"]
    assert doc["candidates"] == 2 and doc["mode"] == "reference"


def test_outside_a_terminal_nothing_is_cut_at_80_columns(tmp_path):
    long_id = "mini-" + "x" * 120
    folder = suite(tmp_path, exec_test(id=long_id))
    code, out, err = cli("run", "--dataset-path", str(folder), "--check-reference-solution", "--dry-run")
    assert code == 0, err
    assert long_id in out  # whole, on one line


def test_runs_lists_local_runs_from_their_files(tmp_path):
    from wpbench_k8s.manifest import RunManifest
    from wpbench_k8s.outputs import ResultsWriter
    from wpbench_k8s.resume import sidecar_doc

    manifest = RunManifest(run_id="abc123", suite="mini", dataset_source="x", dataset_digest="d", mode="reference",
                           seed=1, selected_test_ids=[], grader={"image": "i"}, items=[])  # fmt: skip
    writer = ResultsWriter(tmp_path / "results.json", tmp_path / "results.jsonl", "20260101T000000Z")
    writer.write_sidecar(sidecar_doc(manifest, summary_path=writer.json_path, jsonl_path=writer.jsonl_path,
                                     executor="docker", started_at="2026-01-01T00:00:00Z"))  # fmt: skip
    writer.close()
    code, out, err = cli("runs", "--output-dir", str(tmp_path), "-o", "json")
    assert code == 0, err
    (row,) = json.loads(out)["runs"]
    assert row["run_id"] == "abc123" and row["state"] == "partial" and row["items"] == 0
    assert row["file"] == str(writer.partial_path)
    assert cli("runs", "--output-dir", str(tmp_path / "none"))[1].strip().endswith(": none")


def test_a_resumed_run_keeps_the_cache_setting_it_started_with(tmp_path):
    from wpbench_k8s.manifest import RunManifest
    from wpbench_k8s.resume import load_resume, sidecar_doc

    manifest = RunManifest(run_id="abc123", suite="mini", dataset_source="x", dataset_digest="d", mode="reference",
                           seed=1, selected_test_ids=[], grader={"image": "i"}, items=[])  # fmt: skip
    jsonl = write(tmp_path, "results_x.jsonl.partial", "")
    for cache_dir in (None, tmp_path / "cache"):
        doc = sidecar_doc(manifest, summary_path=tmp_path / "results_x.json", jsonl_path=tmp_path / "results_x.jsonl",
                          executor="docker", started_at="", cache_dir=cache_dir)  # fmt: skip
        write(tmp_path, "results_x.jsonl.manifest", json.dumps(doc))
        state = load_resume(jsonl)
        assert state.cache_enabled is (cache_dir is not None) and state.cache_dir == cache_dir
    assert os.environ.get("WPBENCH_NO_CACHE") == "1"  # conftest: tests never read a developer's cache


def test_make_demo_ends_with_next_steps_that_work(tmp_path, monkeypatch):
    import shlex
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("make not installed")
    recipe = subprocess.run(["make", "-n", "demo"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    (main_job,) = [line for line in recipe.splitlines() if "--check-reference-solution" in line]
    assert main_job.endswith("--report") and 'echo "Next:"' in recipe  # the report the first step opens
    steps = [line.split('"', 1)[1].rsplit('"', 1)[0] for line in recipe.splitlines() if "wpbench-k8s " in line
             and line.startswith("echo")]  # fmt: skip
    assert len(steps) == 3
    monkeypatch.chdir(tmp_path)
    for step in steps:
        argv = shlex.split(step.split("#")[0])[1:]
        if argv[0] == "run":
            argv += ["--dry-run", "-o", "json"]  # plan exactly what the step would run, call nothing
        code, _, err = cli(*argv)
        assert code == 0, (step, err)
