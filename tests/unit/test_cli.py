import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wpbench_k8s", *args], capture_output=True, text=True, cwd=cwd or REPO, timeout=120
    )


def test_dry_run_lists_exactly_the_selected_tests(mini_suite):
    out = cli(
        "run",
        "--dataset-path",
        str(mini_suite),
        "--check-reference-solution",
        "--test-id",
        "mini-shortcodes-001",
        "--dry-run",
    )
    assert out.returncode == 0, out.stderr
    assert "mini-shortcodes-001" in out.stdout and "mini-hooks-001" not in out.stdout


def test_bad_input_exits_2_and_writes_nothing(tmp_path, mini_suite):
    (tmp_path / "bad.yaml").write_text("run:\n  bogus: 1\n")
    out = cli(
        "run",
        "--config",
        str(tmp_path / "bad.yaml"),
        "--output",
        str(tmp_path / "o" / "r.json"),
        "--check-reference-solution",
        "--dataset-path",
        str(mini_suite),
    )
    assert out.returncode == 2
    assert "run.bogus: unknown key" in out.stderr
    assert not (tmp_path / "o").exists()


def test_missing_dataset_exits_2(tmp_path):
    out = cli("run", "--check-reference-solution", "--dataset-path", str(tmp_path / "none"))
    assert out.returncode == 2
    assert "dataset folder does not exist" in out.stderr


def test_help_is_instant_and_lists_commands():
    out = cli("--help")
    assert out.returncode == 0
    for name in ("run", "cleanup", "dataset"):
        assert name in out.stdout
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, wpbench_k8s.cli; print('litellm' in sys.modules)"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    assert probe.stdout.strip() == "False"
