"""The command line in-process (`wpbench_k8s.cli.run` with its own streams), and one subprocess check
that the console entry point starts without the model libraries."""

import io
import subprocess
import sys
from pathlib import Path

from wpbench_k8s.cli import run

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(args), out, err)
    return code, out.getvalue(), err.getvalue()


def test_dry_run_lists_exactly_the_selected_tests(mini_suite):
    code, out, err = cli(
        "run", "--dataset-path", str(mini_suite), "--check-reference-solution", "--test-id", "mini-shortcodes-001",
        "--dry-run",
    )  # fmt: skip
    assert code == 0, err
    assert "mini-shortcodes-001" in out and "mini-hooks-001" not in out


def test_bad_input_exits_2_and_writes_nothing(tmp_path, mini_suite):
    (tmp_path / "bad.yaml").write_text("run:\n  bogus: 1\n")
    code, _, err = cli(
        "run", "--config", str(tmp_path / "bad.yaml"), "--output", str(tmp_path / "o" / "r.json"),
        "--check-reference-solution", "--dataset-path", str(mini_suite),
    )  # fmt: skip
    assert code == 2
    assert "run.bogus: unknown key" in err
    assert not (tmp_path / "o").exists()


def test_missing_dataset_exits_2(tmp_path):
    code, _, err = cli("run", "--check-reference-solution", "--dataset-path", str(tmp_path / "none"))
    assert code == 2
    assert "dataset folder does not exist" in err


def test_usage_errors_exit_2_and_help_exits_0():
    code, _, err = cli("run", "--no-such-flag")
    assert code == 2 and "no-such-flag" in err
    code, out, _ = cli("--help")
    assert code == 0
    for name in ("run", "cleanup", "dataset", "report"):
        assert name in out


def test_upstream_keys_with_no_effect_are_warned_about_and_the_run_goes_on(tmp_path, mini_suite):
    cfg = tmp_path / "wp-bench.yaml"
    cfg.write_text("grader:\n  setup_timeout_seconds: 600\n")
    code, _, err = cli(
        "run", "--config", str(cfg), "--dataset-path", str(mini_suite), "--check-reference-solution", "--dry-run"
    )
    assert code == 0, err
    assert "warning: grader.setup_timeout_seconds has no effect here" in err


def test_console_script_starts_without_model_libraries():
    out = subprocess.run([sys.executable, "-m", "wpbench_k8s", "--help"], capture_output=True, text=True, cwd=REPO,
                         timeout=120)  # fmt: skip
    assert out.returncode == 0 and "run" in out.stdout
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, wpbench_k8s.cli; print('litellm' in sys.modules)"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    assert probe.stdout.strip() == "False"
