"""Each verdict status and its distinct reason; bad task documents; teardown always runs; caps."""

from __future__ import annotations

import json
import subprocess

import pytest
from gradekit import Graded, Grader, task

from wpbench_runtime.contract import Verdict

pytestmark = pytest.mark.docker

OK = {"type": "custom_assertion", "code": "return true;"}
CALLS_F = {"type": "returns_value", "function": "f", "expected": 1}
TEARDOWN = {"teardown": "echo 'TEARDOWN-RAN';"}

TASKS: dict[str, object] = {
    "passed": task("function f() { return 1; }", CALLS_F, OK),
    "exit": task("function f() { return 1; }\nexit( 3 );", CALLS_F, runtime=TEARDOWN),
    "die": task("die( 'bye' );", OK),
    "exception": task("function f() { return 1; }\nthrow new RuntimeException( 'boom' );", CALLS_F, runtime=TEARDOWN),
    "fatal": task("function wp_insert_post() {}", OK),
    "memory": task("$a = array(); while ( true ) { $a[] = str_repeat( 'x', 1 << 20 ); }", OK),
    "timeout": task("function f() { return 1; }\nwhile ( true ) {}", CALLS_F, timeout_seconds=1.5),
    "parse": task("function f() {\n  return 1\n}", CALLS_F, runtime=TEARDOWN),
    "exit_in_assertion": task("function f() { exit( 0 ); }", OK, CALLS_F, OK),
    "timeout_in_assertion": task("function f() { while ( true ) {} }", OK, CALLS_F, timeout_seconds=1.5),
    "setup_fails": task(
        "echo 'CANDIDATE-RAN';", OK, runtime={"setup": "throw new LogicException( 'fixture broke' );", **TEARDOWN}
    ),
    "setup_exits": task("echo 'CANDIDATE-RAN';", OK, runtime={"setup": "exit( 1 );"}),
    # The trusted phase has its own bound: a setup that overruns it is the harness's, and a slow setup
    # inside it is not charged to the candidate's timeout_seconds.
    "setup_overruns": task(
        "echo 'CANDIDATE-RAN';", OK, setup_timeout_seconds=1.5, runtime={"setup": "while ( true ) {}", **TEARDOWN}
    ),
    # Hostile: a candidate that outlasts the setup bound wants its hang read as the harness's (excluded).
    "candidate_outlasts_the_setup_bound": task("while ( true ) {}", OK, timeout_seconds=1.5, setup_timeout_seconds=1.5),
    "slow_setup_within_its_bound": task(
        "function f() { return 1; }",
        CALLS_F,
        timeout_seconds=1.5,
        setup_timeout_seconds=30,
        runtime={"setup": "usleep( 2500000 );"},
    ),
    "assertion_fails_then_teardown": task(
        "function f() { return 2; }",
        CALLS_F,
        {"type": "custom_assertion", "code": "throw new Error( 'x' );"},
        runtime=TEARDOWN,
    ),
    "claims_harness_error": task(
        "function f() { throw new Exception( 'test error: the fixture is broken' ); }\n"
        "if ( class_exists( 'WPBench\\Runner\\Failure' ) ) { $e = 1; }",
        CALLS_F,
        {"type": "returns_value", "function": "f", "args_code": "return 'not an array';", "expected": 1},
    ),
    "warnings": task(
        "$a = array(); echo $a['missing'] ?? ''; echo @$a['quiet']; echo $a['loud'];\n"
        "trigger_error( 'heads up', E_USER_NOTICE ); _doing_it_wrong( 'f', 'careful', '6.0' );\nfunction f() { return 1; }\n"
        'echo "bytes:\\xff\\xfe";',
        CALLS_F,
        {"type": "hook_registered", "hook": "init", "callback": None, "priority": None},
    ),
    "caps": task(
        "echo str_repeat( 'o', 1536 * 1024 ); fwrite( STDERR, str_repeat( 'e', 1536 * 1024 ) ); function f() { return 1; }",
        CALLS_F,
    ),
}

# Mis-authored tests and unusable documents: harness_error, exit 2, the field named. The supervisor
# rejects them before starting a runner, so they share one container (Grader.grade_batch).
BAD_TASKS: dict[str, object] = {
    "unknown_type": task("", {"type": "custom_assertion", "code": "return true;"}, {"type": "no_such_check"}),
    "missing_param": task("", {"type": "returns_value", "function": "f"}),
    "unknown_param": task("", {"type": "hook_registered", "hook": "init", "callbak": "f"}),
    "bad_setup_syntax": task("", OK, runtime={"setup": "function ( {"}),
    "bad_regex": task("", {"type": "output_matches", "code": "echo 1;", "pattern": "/(unclosed/"}),
    "bad_json": '{"test_id": "x", "code": ',
    "not_object": "[1, 2]",
    "empty": "",
    "missing_test_id": {"code": "echo 1;"},
    "wrong_type": {"test_id": "x", "code": "echo 1;", "timeout_seconds": "fast"},
    "no_setup_time": {"test_id": "x", "code": "echo 1;", "setup_timeout_seconds": 0},
    "negative_weight": task("", {"type": "custom_assertion", "code": "return true;", "weight": -1}),
    "extra_field": {"test_id": "x", "code": "", "surprise": True},
    "missing_code": {"test_id": "x"},
}


@pytest.fixture(scope="module")
def graded(grader: Grader, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Graded]:
    results: dict[str, Graded] = grader.grade_many(TASKS)
    results.update(grader.grade_batch(BAD_TASKS, tmp_path_factory.mktemp("bad-tasks")))
    return results


def check(g: Graded, status: str, *fragments: str, exit_code: int = 0) -> None:
    assert g.status == status, g.explain()
    for fragment in fragments:
        assert fragment in g.verdict.reason, g.explain()
    assert g.exit_code == exit_code, g.explain()
    assert g.verdict.scores.execution_pass is (status == "passed")


def test_passed(graded: dict[str, Graded]) -> None:
    g = graded["passed"]
    check(g, "passed", "all 2 assertions passed")
    assert g.verdict.scores.runtime == 1.0 and g.verdict.duration_ms > 0
    assert g.verdict.runtime.wordpress_version.startswith("7.1.")
    assert g.verdict.runtime.php_version.startswith("8.4.")
    assert g.verdict.runtime.sqlite_integration_version == "3.0.2"
    assert g.verdict.phases["setup"].startswith("ok") and g.verdict.phases["teardown"].startswith("ok")
    assert "verdict: passed" in g.stderr  # progress on stderr


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("exit", "exit() or die() was called in candidate code (exit code 3)"),
        ("die", "exit() or die() was called in candidate code"),
        ("exception", "uncaught RuntimeException in candidate code: boom"),
        ("fatal", "PHP Fatal error in candidate code: Cannot redeclare function wp_insert_post()"),
        ("memory", "memory exhausted (memory_limit 256M) in candidate code"),
        ("exit_in_assertion", "exit() or die() was called in assertion 1 (returns_value)"),
    ],
)
def test_error_statuses_have_distinct_reasons(graded: dict[str, Graded], name: str, fragment: str) -> None:
    g = graded[name]
    check(g, "error", fragment)


def test_die_output_is_kept_as_data(graded: dict[str, Graded]) -> None:
    assert graded["die"].verdict.stdout == "bye"


def test_fatal_and_memory_errors_are_php_issues(graded: dict[str, Graded]) -> None:
    assert any(
        i.level == "Fatal error" and "Allowed memory size" in i.message for i in graded["memory"].verdict.php_issues
    )
    assert any(i.level == "Fatal error" and "redeclare" in i.message for i in graded["fatal"].verdict.php_issues)


def test_exception_still_runs_assertions_and_teardown(graded: dict[str, Graded]) -> None:
    g = graded["exception"]
    assert g.assertion(0).passed  # f() was defined before the throw
    assert g.verdict.scores.runtime == 1.0  # diagnostic; execution_pass is what counts
    assert g.verdict.phases["candidate"].startswith("exception: boom")
    assert "TEARDOWN-RAN" in g.verdict.stdout


def test_exit_in_assertion_keeps_earlier_results(graded: dict[str, Graded]) -> None:
    g = graded["exit_in_assertion"]
    assert g.assertion(0).passed is True
    assert g.assertion(1).passed is False and g.assertion(2).message.startswith("not run")
    assert g.verdict.scores.runtime == pytest.approx(1 / 3, abs=1e-6)


@pytest.mark.parametrize("name", ["timeout", "timeout_in_assertion"])
def test_timeout(graded: dict[str, Graded], name: str) -> None:
    g = graded[name]
    where = "candidate code" if name == "timeout" else "assertion 1 (returns_value)"
    check(g, "timeout", f"timed out after 1.5 s in {where}")
    assert g.verdict.scores.runtime == 0.0
    assert g.verdict.duration_ms >= 1500  # the budget starts once setup has reported


def test_setup_overrun_is_a_harness_error_before_the_candidate(graded: dict[str, Graded]) -> None:
    g = graded["setup_overruns"]
    check(g, "harness_error", "setup did not complete: timed out after 1.5 s (setup_timeout_seconds", exit_code=2)
    assert "CANDIDATE-RAN" not in g.verdict.stdout and g.verdict.phases["candidate"] == "not run"


def test_a_candidate_cannot_spend_the_setup_bound_to_become_a_harness_error(graded: dict[str, Graded]) -> None:
    # The setup bound closes when setup reports, before any candidate code is included (runner.php): the hang
    # is the candidate's timeout, scored.
    check(graded["candidate_outlasts_the_setup_bound"], "timeout", "timed out after 1.5 s in candidate code")


def test_a_slow_setup_is_not_charged_to_the_candidate(graded: dict[str, Graded]) -> None:
    # 2.5 s of setup beside a 1.5 s timeout_seconds: the candidate's clock starts after setup.
    check(graded["slow_setup_within_its_bound"], "passed", "all 1 assertions passed")


def test_parse_error_is_a_failure_with_the_parser_message(graded: dict[str, Graded]) -> None:
    g = graded["parse"]
    check(g, "failed", 'parse error: PHP Parse error: syntax error, unexpected token "}"', "on line 3")
    assert g.verdict.static is not None and not g.verdict.static.syntax_ok
    assert g.assertion(0).message == "not run: parse error"
    assert g.verdict.stdout == ""  # the candidate never ran


def test_setup_failure_is_harness_error_and_teardown_runs(graded: dict[str, Graded]) -> None:
    g = graded["setup_fails"]
    check(g, "harness_error", "setup failed: LogicException: fixture broke", exit_code=2)
    assert "TEARDOWN-RAN" in g.verdict.stdout and "CANDIDATE-RAN" not in g.verdict.stdout
    assert g.verdict.phases["candidate"] == "not run"
    check(
        graded["setup_exits"],
        "harness_error",
        "setup did not complete: exit() or die() was called in setup",
        exit_code=2,
    )


def test_teardown_runs_after_failed_assertions(graded: dict[str, Graded]) -> None:
    g = graded["assertion_fails_then_teardown"]
    check(g, "failed", "2 of 2 assertions failed")
    assert "threw Error: x" in g.assertion(1).message
    assert g.verdict.stdout.endswith("TEARDOWN-RAN") and g.verdict.phases["teardown"] == "ok"


def test_candidate_code_cannot_claim_the_test_is_broken(graded: dict[str, Graded]) -> None:
    g = graded["claims_harness_error"]
    check(g, "failed", "2 of 2 assertions failed")
    assert "threw Exception: test error: the fixture is broken" in g.assertion(0).message


def test_warnings_are_recorded_not_failures(graded: dict[str, Graded]) -> None:
    g = graded["warnings"]
    check(g, "passed")
    assert g.verdict.stdout.endswith("bytes:\ufffd\ufffd")  # invalid UTF-8 cannot break the verdict
    issues = [(i.level, i.message) for i in g.verdict.php_issues]
    assert ("Warning", 'Undefined array key "loud"') in issues
    assert ("Notice", "heads up") in issues
    assert any(level == "Notice" and "called <strong>incorrectly</strong>" in msg for level, msg in issues)
    assert not any("quiet" in msg for _, msg in issues)  # @-silenced stays silent
    assert 'PHP Warning:  Undefined array key "loud"' in g.verdict.stderr


def test_output_streams_are_capped(graded: dict[str, Graded]) -> None:
    v = graded["caps"].verdict
    assert v.status == "passed"
    assert v.stdout_truncated and len(v.stdout) == 1024 * 1024 and set(v.stdout) == {"o"}
    assert v.stderr_truncated and len(v.stderr) == 1024 * 1024


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("unknown_type", "runtime_checks.assertions[1].type: unknown assertion type 'no_such_check'"),
        ("missing_param", "runtime_checks.assertions[0].expected: required for returns_value"),
        ("unknown_param", "runtime_checks.assertions[0].callbak: not a parameter of hook_registered"),
        ("bad_setup_syntax", "runtime_checks.setup: PHP syntax error"),
        ("bad_regex", "runtime_checks.assertions[0].pattern: invalid regex"),
        ("bad_json", "task: not valid JSON"),
        ("not_object", "task: must be a JSON object"),
        ("empty", "task: empty input"),
        ("missing_test_id", "test_id: field required"),
        ("wrong_type", "timeout_seconds: must be a number"),
        ("no_setup_time", "setup_timeout_seconds: must be greater than 0 and at most 3600"),
        ("negative_weight", "runtime_checks.assertions[0].weight: must be a number >= 0"),
        ("extra_field", "surprise: extra field not permitted"),
        ("missing_code", "code: required when artifact_kind is php_snippet"),
    ],
)
def test_bad_tasks_exit_2_naming_the_field(graded: dict[str, Graded], name: str, fragment: str) -> None:
    g = graded[name]
    check(g, "harness_error", fragment, exit_code=2)
    assert g.verdict.scores.runtime == 0.0 and g.verdict.assertions == []


def test_task_file_argument_and_termination_log(grader: Grader, tmp_path) -> None:
    task_file = tmp_path / "task.json"
    task_file.write_text(json.dumps(task("function f() { return 1; }", CALLS_F, test_id="from-file")))
    log = tmp_path / "termination-log"
    log.write_text("")
    log.chmod(0o666)
    task_file.chmod(0o644)
    proc = subprocess.run(
        [*grader.argv("-v", f"{task_file}:/task/task.json:ro", "-v", f"{log}:/dev/termination-log"), "/task/task.json"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    verdict = Verdict.model_validate_json(proc.stdout)
    assert (proc.returncode, verdict.status, verdict.test_id) == (0, "passed", "from-file"), proc.stderr
    compact = json.loads(log.read_text())
    assert compact["status"] == "passed" and compact["scores"]["execution_pass"] is True
    assert len(log.read_text()) < 4096  # the Kubernetes termination-message limit
