"""The command line in-process (`wpbench_k8s.cli.run` with its own streams), and one subprocess check
that the console entry point starts without the model libraries."""

import io
import subprocess
import sys
from pathlib import Path

import yaml

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
    cfg.write_text("grader:\n  container_name: wpbench-grader\n")
    code, _, err = cli(
        "run", "--config", str(cfg), "--dataset-path", str(mini_suite), "--check-reference-solution", "--dry-run"
    )
    assert code == 0, err
    assert "warning: grader.container_name has no effect here" in err


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


def test_every_commands_flags_struct_has_exactly_its_click_params():
    # Each command builds one flags struct from click's params (commands.flags.flags_from); a flag added to
    # one side only would be dropped silently.
    import dataclasses
    import typing

    from wpbench_k8s.commands import cancel, logs, results, status, submit
    from wpbench_k8s.commands import run as run_cmd

    def names(cls):
        hints = typing.get_type_hints(cls)
        out = set()
        for f in dataclasses.fields(cls):
            out |= names(hints[f.name]) if dataclasses.is_dataclass(hints[f.name]) else {f.name}
        return out

    pairs = [(run_cmd.run_command, run_cmd.LocalRunFlags), (submit.submit_command, submit.SubmitFlags),
             (status.status_command, status.StatusFlags), (results.results_command, results.ResultsFlags),
             (logs.logs_command, logs.LogsFlags), (cancel.cancel_command, cancel.CancelFlags)]  # fmt: skip
    for command, flags in pairs:
        params = {p.name for p in command.params if p.name != "help"}
        assert names(flags) == params, (command.name, names(flags) ^ params)


def test_submit_dry_run_prints_the_objects_without_a_cluster(mini_suite, tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    code, out, err = cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite), "--test-id",
                         "mini-hooks-001", "--dry-run", "--name", "dry", "-n", "elsewhere")  # fmt: skip
    assert code == 0, err
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert [d["kind"] for d in docs] == ["WPBenchDryRun"]
    assert out.startswith("# wpbench-k8s submit --dry-run: run dry, 1 items")
    kinds = {o["kind"]: o["metadata"].get("namespace") for o in docs[0]["objects"]}
    assert kinds["WPBenchRun"] == "elsewhere", kinds


def test_a_bad_run_name_exits_2_naming_the_flag(mini_suite):
    code, _, err = cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite), "--dry-run",
                       "--name", "Not_A_Label")  # fmt: skip
    assert code == 2 and "--name: 'Not_A_Label'" in err


def test_cluster_commands_say_in_one_line_when_the_api_server_is_away(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "gone",
        "clusters": [{"name": "gone", "cluster": {"server": "https://127.0.0.1:9"}}],
        "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "u", "namespace": "ns"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
    }))  # fmt: skip
    for args in (["status", "r"], ["cancel", "r"], ["logs", "r", "t"], ["results", "r", "-o", str(tmp_path / "o")]):
        code, _, err = cli(*args, "--kubeconfig", str(kubeconfig))
        assert code == 3, (args, err)
        assert len(err.strip().splitlines()) <= 2 and "Traceback" not in err, (args, err)
        assert "ns" in err or "reach" in err, (args, err)
    assert not (tmp_path / "o").exists()
