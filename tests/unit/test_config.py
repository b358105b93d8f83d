from pathlib import Path

import pytest

from wpbench_k8s.config import ignored_settings, load_config
from wpbench_k8s.errors import InputError

UPSTREAM_EXAMPLE = """
dataset:
  source: local              # 'local' or 'huggingface'
  name: wp-core-v1           # suite name
models:
  - name: gpt-4o
grader:
  kind: docker
  image: wp-bench-grader:dev
  timeout_seconds: 90
  setup_timeout_seconds: 600
run:
  suite: wp-core-v1
  limit: 10
  seed: 1337
  test_ids: []
  categories: []
  dry_run: false
  execution_isolation: reset_per_test
  execution_concurrency: 1
  continue_on_error: false
output:
  path: output/results.json
  jsonl_path: output/results.jsonl
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "wp-bench.yaml"
    p.write_text(text)
    return p


def test_upstream_example_is_accepted_unchanged(tmp_path):
    cfg = load_config(write(tmp_path, UPSTREAM_EXAMPLE))
    assert cfg.suite_name == "wp-core-v1"
    assert cfg.run.limit == 10 and cfg.run.seed == 1337
    assert cfg.grader.image == "wp-bench-grader:dev"
    assert [m.name for m in cfg.models] == ["gpt-4o"]


def test_unknown_key_is_named(tmp_path):
    with pytest.raises(InputError, match=r"wp-bench.yaml: run.limt: unknown key"):
        load_config(write(tmp_path, "run:\n  limt: 3\n"))


def test_bad_value_is_named(tmp_path):
    with pytest.raises(InputError, match=r"run.execution_concurrency"):
        load_config(write(tmp_path, "run:\n  execution_concurrency: 0\n"))


def test_malformed_yaml_names_file(tmp_path):
    with pytest.raises(InputError, match="malformed YAML"):
        load_config(write(tmp_path, "run: [unclosed\n"))


def test_flags_override_file_and_split_commas(tmp_path):
    cfg = load_config(write(tmp_path, UPSTREAM_EXAMPLE), {"run.limit": 3, "run.categories": ["hooks,rest-api", "cron"]})
    assert cfg.run.limit == 3
    assert cfg.run.categories == ["hooks", "rest-api", "cron"]


def test_grader_limits_are_settable(tmp_path):
    cfg = load_config(write(tmp_path, "grader:\n  limits:\n    memory_mb: 768\n    pids: 128\n"))
    assert cfg.grader.limits.memory_mb == 768 and cfg.grader.limits.pids == 128
    with pytest.raises(InputError, match="grader.limits.cpu: unknown key"):
        load_config(write(tmp_path, "grader:\n  limits:\n    cpu: 2\n"))


def test_shipped_example_config_loads():
    from wpbench_k8s.config import repo_root

    cfg = load_config(repo_root() / "wp-bench.example.yaml")
    assert cfg.suite_name == "wpk-core-v1"
    assert cfg.grader.limits.memory_mb == 512


def test_upstream_keys_with_no_effect_here_are_named_with_the_reason(tmp_path):
    assert ignored_settings(load_config(None)) == []
    warnings = ignored_settings(load_config(write(tmp_path, UPSTREAM_EXAMPLE)))
    # grader.setup_timeout_seconds (it bounds each grader's trusted phase) and run.execution_isolation
    # (reset_per_test is the default, fork_per_test fast mode) both take effect: no warning.
    assert warnings == []
    assert load_config(write(tmp_path, UPSTREAM_EXAMPLE)).grader.setup_timeout_seconds == 600
    base = ignored_settings(load_config(None, {"grader.base_url": "http://localhost:8888"}))
    assert base == [base[0]] and base[0].startswith("grader.base_url has no effect here: ")
