"""Upstream WP-Bench's config keys and dataset shapes load here (or are refused with the reason)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wpbench_k8s.config import Config, load_config
from wpbench_k8s.dataset import export_rows, load_suite
from wpbench_k8s.errors import InputError
from wpbench_k8s.pipeline import load_run_suite, model_specs, plan_run, run_profile
from wpbench_k8s.profiles import get_profile

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "tests" / "fixtures" / "suites" / "upstream-mini"

UPSTREAM_CONFIG = """
dataset: {source: local, name: upstream-mini, revision: main, split: test, cache_dir: /tmp/hf}
model: {kind: openai, name: gpt-4o-mini, top_p: 0.9, request_timeout: 45, max_retries: 2, retry_initial_delay: 1.5}
grader: {kind: docker, image: wpbench-grader:dev, container_cpus: 2, memory_mb: 1024, filesystem_mb: 300, pids_limit: 80,
         container_name: wp-bench-grader, concurrency: 4}
run: {suite: upstream-mini, test_type: null, check_reference_solution: false, check_exploits: false,
      skip_runtime: false, skip_static: false, concurrency: 5}
output: {path: out/results.json, jsonl_path: null, save_prompts: true, save_artifacts_dir: artifacts}
"""


def test_upstream_config_loads_and_maps(tmp_path: Path) -> None:
    path = tmp_path / "wp-bench.yaml"
    path.write_text(UPSTREAM_CONFIG)
    config = load_config(path)
    (model,) = config.models
    assert (model.name, model.kind, model.top_p, model.timeout_seconds, model.max_retries) == (
        "gpt-4o-mini", "openai", 0.9, 45, 2
    )  # fmt: skip
    assert model.retry == {"initial_delay": 1.5}
    limits = config.grader.limits
    assert (limits.cpus, limits.memory_mb, limits.wordpress_tmpfs_mb, limits.pids) == (2, 1024, 300, 80)
    assert config.run.test_type == "all" and config.output.records_path == "out/results.jsonl"


def test_profile_defaults_for_models(tmp_path: Path) -> None:
    config = Config.model_validate({"models": [{"name": "openai/a"}]})
    (upstream,) = model_specs(config, get_profile("upstream"))
    (ours,) = model_specs(config, get_profile("wpbench"))
    assert (upstream.temperature, upstream.timeout_seconds) == (0.0, 300.0)
    assert (ours.temperature, ours.timeout_seconds) == (None, 120.0)


@pytest.mark.parametrize(
    ("section", "why"),
    [
        ({"grader": {"kind": "cli"}}, "diagnostic graders"),
        ({"grader": {"kind": "http"}}, "diagnostic graders"),
        ({"grader": {"wp_env_dir": "./runtime"}}, "grader.image"),
        ({"run": {"execution_isolation": "none"}}, "reset_per_test"),
        ({"run": {"skip_static": True}}, "does not offer"),
    ],
)
def test_diagnostic_modes_are_refused_with_the_reason(tmp_path: Path, section: dict, why: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(json.dumps(section))
    with pytest.raises(InputError, match=why):
        load_config(path)


def upstream_export_rows(suite_name: str) -> list[dict]:
    """Rows in the shape of upstream's Hugging Face export (every nested value JSON-encoded)."""
    rows = []
    for row in export_rows(load_suite(SUITE)):
        kind = row["test_kind"]
        out = {"id": row["id"], "suite": suite_name, "test_kind": kind, "prompt": row["prompt"],
               "category": row["category"], "difficulty": row.get("difficulty", "unknown"),
               "type": row.get("type", "execution"), "expected_behavior": row.get("expected_behavior", ""),
               "choices": row.get("choices", "[]"), "correct_answer": row.get("correct_answer", ""),
               "answer_type": row.get("answer_type", ""),
               "requirements": json.dumps(row.get("requirements", [])),
               "static_checks": row.get("static_checks", "{}"), "runtime_checks": row.get("runtime_checks", "{}"),
               "reference_solution": row.get("reference_solution", "")}  # fmt: skip
        rows.append(out)
    return rows


def test_hugging_face_rows_load_and_are_not_filtered_to_our_suite(tmp_path: Path) -> None:
    path = tmp_path / "wp-bench-v1.jsonl"
    rows = [*upstream_export_rows("wp-core-v1"), dict(upstream_export_rows("other")[0], id="other-1")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = Config.model_validate({"dataset": {"path": str(path)}})
    suite = load_run_suite(config)  # no --suite: every row, not our default suite's (none)
    assert suite.format == "upstream" and len(suite.all_tests()) == 12
    assert run_profile(config, suite) == "upstream-v2"  # knowledge tests: scoring v2.0
    original = load_suite(SUITE).by_id()
    for test in suite.all_tests():
        if test.id in original:
            dropped = {"metadata", "explanation", "subcategory"}  # upstream's export omits them
            assert test.model_dump(exclude=dropped) == original[test.id].model_dump(exclude=dropped)
    named = load_run_suite(Config.model_validate({"dataset": {"path": str(path)}, "run": {"suite": "other"}}))
    assert [t.id for t in named.all_tests()] == ["other-1"]


def test_single_model_form_and_profile_in_manifest(tmp_path: Path) -> None:
    config = Config.model_validate(
        {"model": {"name": "openai/x"}, "dataset": {"path": str(SUITE)}, "run": {"limit": 1, "seed": 3}}
    )
    manifest = plan_run(config, "models")
    assert manifest.profile == "upstream-v2" and [m.name for m in manifest.models] == ["openai/x"]
    assert manifest.models[0].temperature == 0.0
    assert all(len(i.prompt_hash) == 64 for i in manifest.items)  # upstream's full sha256


def test_prompt_templates_render_each_test_type(tmp_path: Path) -> None:
    folder = tmp_path / "prompts"
    folder.mkdir()
    (folder / "execution.txt").write_text(
        "{{prompt}}\n\nRequirements:\n{{requirements}}{{#test_function}}\n\nDefine: {{test_function}}{{/test_function}}\nEND"
    )
    (folder / "multiple_choice.txt").write_text("{{prompt}}\nChoices:\n{{choices}}\nLetter only.")
    config = Config.model_validate(
        {"models": [{"name": "openai/x"}], "dataset": {"path": str(SUITE)}, "run": {"prompt_templates": str(folder)}}
    )
    prompts = {i.test_id: i for i in plan_run(config, "models").items}
    assert prompts["up-admin-001"].prompt == (
        "Add a settings section wpup_section titled Extras to the Reading settings page.\n\n"
        "Requirements:\n- Use the Settings API\nEND"
    )
    assert prompts["up-k-001"].prompt.endswith(
        "Choices:\nA. muplugins_loaded\nB. shutdown\nC. init\nD. wp_footer\nLetter only."
    )
    assert prompts["up-k-002"].prompt.endswith(
        "Answer with the answer only (a word, name or short phrase), no explanation."
    )
    assert len(prompts["up-admin-001"].prompt_hash) == 64


def test_prompt_template_with_an_unknown_placeholder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "execution.txt").write_text("{{prompt}} {{answer}}")
    config = Config.model_validate(
        {"models": [{"name": "openai/x"}], "dataset": {"path": str(SUITE)}, "run": {"prompt_templates": str(tmp_path)}}
    )
    with pytest.raises(InputError, match="unknown placeholder"):
        plan_run(config, "models")
