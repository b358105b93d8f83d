"""`wpbench-k8s run` end to end on local Docker with the real grader image."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from wpbench_k8s.candidates import GENERAL_EXPLOITS, STUB_RETURNS
from wpbench_k8s.exploit_variants import UNIVERSAL_VALUES

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.docker


def run_cli(*args: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wpbench_k8s", *args], capture_output=True, text=True, cwd=REPO, timeout=600, **kw
    )


def outputs(out_dir: Path) -> tuple[dict, list[dict]]:
    (summary_path,) = out_dir.glob("results_*.json")
    (jsonl_path,) = out_dir.glob("results_*.jsonl")
    assert summary_path.stem == jsonl_path.stem  # one run, one timestamp
    records = [json.loads(line) for line in jsonl_path.read_text().splitlines()]
    return json.loads(summary_path.read_text()), records


def labelled_containers(run_id: str) -> list[str]:
    out = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=org.wpbench-k8s.run={run_id}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


def test_reference_check_writes_canonical_outputs(grader_image, mini_suite, tmp_path):
    res = run_cli(
        "run",
        "--check-reference-solution",
        "--dataset-path",
        str(mini_suite),
        "--execution-concurrency",
        "2",
        "--output",
        str(tmp_path / "results.json"),
        "--image",
        grader_image,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    summary, records = outputs(tmp_path)
    jsonschema.validate(summary, json.loads((REPO / "runtime" / "schema" / "run-summary.schema.json").read_text()))
    meta = summary["metadata"]
    assert meta["runtime_isolation_boundary"] == "container_per_test"
    assert meta["execution_concurrency"] == 2
    assert meta["runtime_image_id"].startswith("sha256:")
    assert meta["grader"]["limits"]["memory_mb"] == 512
    assert meta["scoring_version"] == "2.0"
    assert meta["selected_test_ids"] == ["mini-hooks-001", "mini-shortcodes-001"]
    assert meta["manifest_digest"].startswith("sha256:") and meta["dataset_digest"].startswith("sha256:")
    assert [r["test_id"] for r in records] == ["mini-hooks-001", "mini-shortcodes-001"]
    for r in records:
        assert r["grader"]["status"] == "passed", r["grader"]
        assert r["scores"]["execution_pass"] is True and r["scores"]["correctness"] == 1.0
        assert set(r) >= {
            "test_id",
            "suite",
            "type",
            "category",
            "mode",
            "prompt_hash",
            "model",
            "output",
            "scores",
            "grader",
            "usage",
            "error",
        }
        assert r["output"]["code"]
    assert summary["overall"]["execution"]["passed"] == 2
    assert not list(tmp_path.glob("*.partial"))
    assert not labelled_containers(meta["run_id"])


def test_exploit_audit_flags_a_cheatable_test_and_exits_nonzero(grader_image, tmp_path):
    suite = tmp_path / "cheatable"
    (suite / "execution").mkdir(parents=True)
    (suite / "execution" / "weak.json").write_text(
        json.dumps(
            [
                {
                    "id": "weak-001",
                    "category": "weak",
                    "prompt": "Return whether the site is installed.",
                    "test_function": "weak_check(): bool",
                    "runtime_checks": {
                        "assertions": [{"type": "custom_assertion", "code": "return weak_check() === true;"}]
                    },
                    "reference_solution": "function weak_check(): bool { return is_blog_installed(); }",
                    "metadata": {"source_refs": ["wp-includes/functions.php"]},
                }
            ]
        )
    )
    res = run_cli(
        "run",
        "--check-exploits",
        "--dataset-path",
        str(suite),
        "--execution-concurrency",
        "2",
        "--output",
        str(tmp_path / "out" / "results.json"),
        "--image",
        grader_image,
    )
    assert res.returncode == 1, res.stderr[-3000:]
    assert "exploitable weak-001: exploit:return-true" in res.stderr.replace("\n", " ")
    summary, records = outputs(tmp_path / "out")
    # The universal answer's test function returns true too, so it passes as the stub does.
    exploitable = {test: sorted(cheats) for test, cheats in summary["exploits"]["exploitable"].items()}
    assert exploitable == {"weak-001": ["exploit:return-true", "exploit:universal-true"]}
    # empty + the stubs + the attacks on the grader itself + the universal answers (no forbidden patterns)
    assert sorted(r["variant"] for r in records) == sorted(
        ["exploit:empty"]
        + [f"exploit:{label}" for label, _ in (*STUB_RETURNS, *GENERAL_EXPLOITS)]
        + [f"exploit:universal-{label}" for label, _ in UNIVERSAL_VALUES]
    )


def test_reference_check_grades_alternatives_and_fails_on_an_over_specific_test(grader_image, tmp_path):
    """The prompt leaves the trailing slash open; the assertion wants home_url( '/' ): the alternative fails."""
    suite = tmp_path / "strict"
    (suite / "execution").mkdir(parents=True)
    link = "function strict_link(): string { return '<a href=\"' . esc_url( home_url( %s ) ) . '\">Home</a>'; }"
    test = {
        "id": "strict-001", "category": "strict", "prompt": "Return a link to the home page.",
        "test_function": "strict_link(): string",
        "runtime_checks": {"assertions": [{"type": "custom_assertion",
            "code": "return strict_link() === '<a href=\"' . esc_url( home_url( '/' ) ) . '\">Home</a>';"}]},
        "reference_solution": link % "'/'",
        "alternative_solutions": [{"description": "no trailing slash", "code": link % ""},
                                  {"description": "home_url( '/' ) again, written apart", "code": link % "'/'" + "\n// apart"}],
        "metadata": {"source_refs": ["wp-includes/link-template.php"]},
    }  # fmt: skip
    (suite / "execution" / "strict.json").write_text(json.dumps([test]))
    res = run_cli(
        "run", "--check-reference-solution", "--dataset-path", str(suite), "--no-cache",
        "--output", str(tmp_path / "out" / "results.json"), "--image", grader_image,
    )  # fmt: skip
    assert res.returncode == 1, res.stderr[-3000:]
    assert "reference fails strict-001 (alternative-1)" in res.stderr.replace("\n", " ")
    summary, records = outputs(tmp_path / "out")
    assert list(summary["reference"]["failing"]) == ["strict-001 (alternative-1)"]
    assert (summary["reference"]["tests_checked"], summary["reference"]["solutions_checked"]) == (1, 3)
    assert [(r["variant"], r["scores"]["execution_pass"]) for r in records] == [
        ("baseline", True), ("alternative-1", False), ("alternative-2", True)
    ]  # fmt: skip


def test_completions_are_graded_and_failures_scored(grader_image, mini_suite, tmp_path):
    comp = tmp_path / "c.jsonl"
    comp.write_text(
        "\n".join(
            json.dumps(x)
            for x in [
                {"test_id": "mini-hooks-001", "model": "m1", "code": "add_filter('the_title', fn($t) => $t);"},
                {"test_id": "mini-shortcodes-001", "model": "m1", "code": "function mini_shout_upper("},
            ]
        )
        + "\n"
    )
    res = run_cli(
        "run",
        "--completions",
        str(comp),
        "--dataset-path",
        str(mini_suite),
        "--output",
        str(tmp_path / "out" / "results.json"),
        "--image",
        grader_image,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    _, records = outputs(tmp_path / "out")
    by_id = {r["test_id"]: r for r in records}
    hooks = by_id["mini-hooks-001"]
    assert hooks["model"] == "m1" and hooks["grader"]["status"] == "failed"
    assert 0 < hooks["scores"]["runtime"] < 1  # the hook is registered, the suffix is missing
    parse = by_id["mini-shortcodes-001"]
    assert parse["grader"]["status"] == "failed" and "parse error" in parse["grader"]["reason"].lower()


def test_ctrl_c_keeps_partial_and_leaves_no_containers(grader_image, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "wpbench_k8s",
            "run",
            "--check-reference-solution",
            "--dataset-path",
            str(REPO / "tests/fixtures/suites/slow"),
            "--output",
            str(out / "results.json"),
            "--image",
            grader_image,
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as from a terminal: a test runner started in the background without job control
        # (`cmd &` in a script) passes SIGINT on as ignored, and Python then installs no handler for it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    partial: list[Path] = []
    while time.monotonic() < deadline:
        partial = list(out.glob("*.jsonl.partial"))
        if partial and partial[0].read_text().strip():
            break
        time.sleep(0.2)
    assert partial, "no record streamed before the deadline"
    time.sleep(1.0)  # the second test's container is running now
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    kept = [json.loads(x) for x in partial[0].read_text().splitlines()]
    assert kept and kept[0]["grader"]["status"] == "passed"
    assert not list(out.glob("results_*.jsonl")), "an interrupted run must not look complete"
    assert not labelled_containers(kept[0]["run_id"])


def test_cleanup_removes_a_killed_runs_leftovers_and_is_idempotent(grader_image):
    run_id = "cleanup-test-run"
    started = subprocess.run(
        [
            "docker",
            "run",
            "-d",
            "--label",
            f"org.wpbench-k8s.run={run_id}",
            "--entrypoint",
            "sleep",
            grader_image,
            "300",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert started.stdout.strip()
    assert labelled_containers(run_id)
    first = run_cli("cleanup", "--run-id", run_id)
    assert first.returncode == 0 and "removed 1 container(s)" in first.stdout
    assert not labelled_containers(run_id)
    again = run_cli("cleanup", "--run-id", run_id)
    assert again.returncode == 0 and "removed 0 container(s)" in again.stdout


def test_exploit_audit_shows_upstream_loose_checks_a_universal_answer_passes(grader_image, tmp_path):
    """Upstream semantics stay upstream's (`query_result` is `expected == $wpdb->get_results()`), and the
    universal answers of --check-exploits show the author that one of them passes such a test."""
    suite = tmp_path / "upstream-loose"
    (suite / "execution").mkdir(parents=True)
    test = {
        "id": "up-loose-001",
        "category": "db",
        "prompt": "Store one row with n = 3 in the option table under the name up_loose.",
        "runtime_checks": {
            "assertions": [
                {
                    "type": "query_result",
                    "target": "SELECT option_value AS n FROM wp_options WHERE option_name = 'up_loose'",
                    "expected": [{"n": "3"}],
                }
            ]
        },
        "reference_solution": "update_option( 'up_loose', '3' );",
    }
    doc = {"id": "upstream-loose", "version": "1.0.0", "tests": [test]}
    (suite / "execution" / "loose.json").write_text(json.dumps(doc))
    res = run_cli(
        "run",
        "--check-exploits",
        "--dataset-path",
        str(suite),
        "--execution-concurrency",
        "2",
        "--output",
        str(tmp_path / "out" / "results.json"),
        "--image",
        grader_image,
    )
    assert res.returncode == 1, res.stderr[-3000:]
    summary, _ = outputs(tmp_path / "out")
    assert summary["metadata"]["profile"] == "upstream"
    exploitable = {test_id: sorted(cheats) for test_id, cheats in summary["exploits"]["exploitable"].items()}
    assert exploitable == {"up-loose-001": ["exploit:universal-array-true", "exploit:universal-true"]}
