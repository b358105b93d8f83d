"""The adversarial suite: hostile candidates (hostile.py, hostile_sandbox.py) against a test whose
expected values are fresh random tokens. Each must get its exact status, pass no assertion, leave
exactly one verdict on stdout, and never outlive its stop, in both boot modes: with the
pre-boot (the runner boots WordPress before the task arrives, as in production) and without it
(`WPBENCH_PREBOOT=0`: the runner starts once the task has come), with identical statuses; and in fast mode
(`fork_per_test`: a few containers grading them one after another), with the identical status, exit code
and reason of the pre-boot. Plus the native guard itself (seccomp, non-dumpable) and a stop from outside
the container (exit 4)."""

from __future__ import annotations

import json
import re
import subprocess
import uuid

import pytest
from gradekit import Graded, Grader, task, wait_for_runner
from hostile import HOSTILES, Hostile, target_task, token
from hostile_sandbox import SANDBOX_HOSTILES
from hostile_semantics import CASES as SEMANTIC_CASES

pytestmark = pytest.mark.docker

ALL_HOSTILES = [*HOSTILES, *SANDBOX_HOSTILES]
# The container environment of each boot mode (set by the test, never by anything a candidate controls).
BOOT_MODES = {"preboot": (), "cold": ("-e", "WPBENCH_PREBOOT=0")}
# Fast mode: the same candidates graded one after another in long-lived containers (execution_isolation
# fork_per_test), so each hostile also runs right after other hostiles in the same container.
FAST = "fast"
MODES = [*BOOT_MODES, FAST]

KEYS = ("returns", "custom", "option", "output", "rest", "code")
CLASSES = {
    "verdict forgery",
    "nonce theft",
    "expected-value read",
    "assertion tampering",
    "exclusion trick",
    "extension file write",
    "resource flood",
    "output flood",
    "fork and signal abuse",
    "sandbox escape",
}


@pytest.fixture(scope="module")
def tokens() -> dict[str, str]:
    return {key: token() for key in KEYS}


@pytest.fixture(scope="module")
def graded(grader: Grader, tokens: dict[str, str]) -> dict[str, dict[str, Graded]]:
    """Every hostile graded in each boot mode: mode -> name -> result."""
    tasks = {h.name: target_task(tokens, h.code, timeout=h.timeout, test_id=f"hostile-{h.name}") for h in ALL_HOSTILES}
    results = {mode: grader.grade_many(tasks, *env) for mode, env in BOOT_MODES.items()}
    results[FAST] = grader.grade_in_sequence(tasks)
    return results


def same_verdict(g: Graded) -> tuple[str, int, str]:
    """Status, exit code and reason, with what differs between any two gradings (the random plugin directory)
    made equal."""
    return g.status, g.exit_code, re.sub(r"wp-bench-candidate-[0-9a-f]{12}", "wp-bench-candidate-*", g.verdict.reason)


def test_the_suite_covers_every_class() -> None:
    assert len(ALL_HOSTILES) >= 90 and len(SANDBOX_HOSTILES) >= 15
    assert {h.cls for h in ALL_HOSTILES} == CLASSES
    assert len({h.name for h in ALL_HOSTILES}) == len(ALL_HOSTILES)


def test_both_boot_modes_give_identical_statuses(graded: dict[str, dict[str, Graded]]) -> None:
    """The pre-boot buys speed, never a wall: every hostile ends the same with and without it."""
    statuses = {
        mode: {name: (g.status, g.exit_code) for name, g in results.items()} for mode, results in graded.items()
    }
    assert statuses["preboot"] == statuses["cold"]


def test_fast_mode_gives_the_identical_status_and_reason(graded: dict[str, dict[str, Graded]]) -> None:
    """Verdict parity: fast mode, where each hostile follows others in the same container, ends every one
    exactly as a container of its own does."""
    fast = {name: same_verdict(g) for name, g in graded[FAST].items()}
    assert fast == {name: same_verdict(g) for name, g in graded["preboot"].items()}


def test_an_honest_solution_passes_the_target(grader: Grader, tokens: dict[str, str]) -> None:
    """The target is passable: a candidate that knows the tokens (as a real solution knows the answers) passes."""
    t = tokens
    code = f"""
function wpb_secret( ...$a ) {{ return '{t["returns"]}'; }}
function wpb_check( $n ) {{ return 2 === $n ? '{t["custom"]}' : '{t["code"]}'; }}
update_option( 'wpb_opt', '{t["option"]}' );
add_shortcode( 'wpb', function () {{ return '{t["output"]}'; }} );
add_action( 'rest_api_init', function () {{
	register_rest_route( 'wpb/v1', '/s', array( 'methods' => 'GET', 'permission_callback' => '__return_true',
		'callback' => function () {{ return array( 'v' => '{t["rest"]}' ); }} ) );
}} );
"""
    g = grader.grade(target_task(tokens, code, test_id="hostile-honest"))
    assert g.status == "passed", g.explain()


def test_the_semantic_cases_end_the_same_in_both_boot_modes(grader: Grader) -> None:
    """test_adversarial_semantics.py's cases (graded there with the pre-boot, each with its exact status)."""
    tasks = {c.name: c.task for c in SEMANTIC_CASES}
    seen = {mode: grader.grade_many(tasks, *env) for mode, env in BOOT_MODES.items()}
    seen[FAST] = grader.grade_in_sequence(tasks)
    statuses = {mode: {name: (g.status, g.exit_code) for name, g in results.items()} for mode, results in seen.items()}
    assert statuses["preboot"] == statuses["cold"]
    assert statuses["preboot"] == {c.name: (c.status, 0) for c in SEMANTIC_CASES}
    # fast mode: the identical status and reason
    assert {n: same_verdict(g) for n, g in seen[FAST].items()} == {
        n: same_verdict(g) for n, g in seen["preboot"].items()
    }


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("hostile", ALL_HOSTILES, ids=[h.name for h in ALL_HOSTILES])
def test_hostile_candidate(
    graded: dict[str, dict[str, Graded]], hostile: Hostile, mode: str, tokens: dict[str, str]
) -> None:
    g = graded[mode][hostile.name]
    assert g.status == hostile.status, g.explain()
    assert g.exit_code == 0, g.explain()  # a scored verdict: never a harness_error, never "stopped"
    assert hostile.reason in g.verdict.reason, g.explain()
    assert not [a for a in g.verdict.assertions if a.scored and a.passed], g.explain()
    assert g.verdict.scores.runtime == 0.0 and g.verdict.scores.execution_pass is False
    for value in tokens.values():  # nothing the test expects shows up anywhere in what the candidate produced
        assert value not in g.verdict.stdout and value not in g.verdict.stderr
    raw = json.dumps(g.raw, ensure_ascii=False)
    assert "\u2028" not in json.dumps(g.raw) and ("\u2028" not in raw or hostile.name == "line-separators")
    # A hang, not a speed (the status says the timeout was enforced; speed is make bench's): a bound a loaded
    # CI machine cannot miss unless the candidate outlived its stop.
    assert g.wall <= 3 * hostile.timeout + 60, f"{hostile.name} took {g.wall:.1f} s"


@pytest.mark.parametrize("mode", MODES)
def test_floods_are_truncated_not_buffered(graded: dict[str, dict[str, Graded]], mode: str) -> None:
    assert graded[mode]["stdout-flood"].verdict.stdout_truncated is True
    assert graded[mode]["stderr-flood"].verdict.stderr_truncated is True
    assert len(graded[mode]["stdout-flood"].verdict.stdout) <= 1048576


@pytest.mark.parametrize("mode", BOOT_MODES)
def test_an_honest_sqlite_user_is_not_refused(grader: Grader, mode: str) -> None:
    """The walls refuse paths, not SQLite: ATTACH and VACUUM INTO inside the allowed paths, and WordPress's
    own connection, work in both modes (so the sandbox hostiles fail because of the wall, not of SQL)."""
    code = r"""
$pdo = $GLOBALS['@pdo'];
$pdo->exec( "ATTACH DATABASE '/tmp/mine.db' AS m; CREATE TABLE m.t ( a BLOB ); INSERT INTO m.t VALUES ( randomblob( 1048576 ) )" );
$pdo->exec( "VACUUM INTO '/run/wpbench/wp-content/copy.db'" );
$pdo->exec( "ATTACH DATABASE '/run/wpbench/wp-content/copy.db' AS c" );
update_option( 'wpb_sqlite', $pdo->query( 'SELECT length( a ) FROM m.t' )->fetchColumn() . '/' . $pdo->query( "SELECT count(*) FROM c.sqlite_master WHERE name LIKE 'wp_options'" )->fetchColumn() );
"""
    check = {"type": "option_value", "option": "wpb_sqlite", "expected": "1048576/1"}
    g = grader.grade(task(code, check, test_id=f"sqlite-honest-{mode}"), *BOOT_MODES[mode])
    assert g.status == "passed", g.explain()


def test_the_pre_boot_switch_starts_the_runner_before_or_after_the_task(grader: Grader) -> None:
    """With the pre-boot a runner boots while the container waits for its task; without it none starts."""
    seen = {}
    for mode in ("preboot", "cold"):
        name = f"wpbench-test-boot-{mode}-{uuid.uuid4().hex[:8]}"
        proc = subprocess.Popen(grader.argv("--name", name, *BOOT_MODES[mode]), stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            seen[mode] = wait_for_runner(name, 30 if mode == "preboot" else seen["preboot"] + 5)
        finally:
            subprocess.run(["docker", "kill", name], capture_output=True, check=False)
            proc.wait(timeout=60)
    assert seen["preboot"] is not None and seen["cold"] is None, seen


def test_the_runner_cannot_signal_other_processes(grader: Grader) -> None:
    """The seccomp filter of the native guard: a runner-role process gets EPERM for kill() on anyone else."""
    script = (
        "sleep 30 & victim=$!; "
        'WPBENCH_GUARD_ROLE=runner /bin/sh -c "kill -TERM $victim 2>/dev/null; echo other:\\$?; kill -0 \\$\\$; echo self:\\$?; '
        "grep '^Seccomp:' /proc/self/status\"; "
        "kill -0 $victim && echo victim:alive; kill $victim"
    )
    proc = subprocess.run(
        [*grader.argv("--entrypoint", "/bin/sh"), "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    out = proc.stdout.split()
    assert "other:1" in out and "self:0" in out and "victim:alive" in out, proc.stdout + proc.stderr
    assert "2" in out[out.index("Seccomp:") + 1 :][:1], proc.stdout


def test_the_first_process_is_not_dumpable(grader: Grader) -> None:
    """Every process of the image is non-dumpable: another process of the same uid cannot open its fds."""
    script = "ls /proc/1/fd >/dev/null 2>&1 && echo fd:open || echo fd:denied; stat -c %u /proc/1/stat; id -u"
    proc = subprocess.run(
        [*grader.argv("--entrypoint", "/bin/sh"), "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    out = proc.stdout.split()
    # PID 1 is the shell itself here, so it may read its own fds; a child (ls) may not.
    assert out[0] == "fd:denied" and out[1] == "0" and out[2] == "65532", proc.stdout + proc.stderr


def test_a_stop_from_outside_is_exit_4(grader: Grader, tokens: dict[str, str]) -> None:
    name = f"wpbench-test-stop-{uuid.uuid4().hex[:8]}"
    argv = grader.argv("--name", name)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(target_task(tokens, "sleep( 60 );", timeout=30)))
    proc.stdin.close()
    wait_for_runner(name)
    subprocess.run(["docker", "kill", "--signal", "TERM", name], capture_output=True, check=False)
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.wait(timeout=60)
    verdict = json.loads(out)
    assert proc.returncode == 4, err
    assert verdict["status"] == "harness_error" and "from outside the container" in verdict["reason"]
