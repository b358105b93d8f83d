"""generate_candidate and the AI judge over real HTTP to the fake provider."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest
from fake_provider import FakeProvider, Reply, has_system, server_error, user_text

from wpbench_k8s.dataset import ExecutionTest, KnowledgeTest
from wpbench_k8s.errors import InputError
from wpbench_k8s.manifest import Candidate, ModelSpec, SkillSpec
from wpbench_k8s.models.generate import generate_candidate
from wpbench_k8s.models.judge import judge_candidate, judge_spec, load_rubric, parse_judge_reply
from wpbench_k8s.models.knowledge import score_answer
from wpbench_k8s.models.prompts import build_prompt
from wpbench_k8s.models.skills import content_sha256

EXEC = ExecutionTest(
    id="e1", category="hooks", prompt="Append ' [checked]' to every title.", test_function="wpbp_t( string $t ): string"
)  # fmt: skip
PLUGIN = ExecutionTest(id="e2", category="plugins", prompt="Make a plugin.", artifact_kind="wp_plugin_files")
MC = KnowledgeTest(
    id="k1", category="hooks", type="multiple_choice", prompt="Which hook?",
    choices=[{"key": "A", "text": "init"}, {"key": "B", "text": "plugins_loaded"}], correct_answer="B",
)  # fmt: skip
SKILL = SkillSpec(name="s", source="s.md", content="Prefix names.\n", sha256=content_sha256("Prefix names.\n"))
CODE = "add_filter( 'the_title', fn( $t ) => $t . ' [checked]' );"


def test_execution_candidate_is_extracted(provider: FakeProvider) -> None:
    provider.script("a", Reply(content=f"Here:\n```php\n<?php\n{CODE}\n```\nDone.", prompt_tokens=90))
    result = generate_candidate(ModelSpec(name="openai/a"), EXEC, [])
    assert result.error is None
    assert result.candidate.code == CODE + "\n"
    assert result.candidate.raw.startswith("Here:")
    assert result.candidate.label == "openai/a"
    assert result.usage.prompt_tokens == 90 and result.usage.calls == 1
    body = provider.bodies("a")[0]
    assert body["messages"] == [{"role": "user", "content": build_prompt(EXEC)}]


def test_with_skills_sends_a_system_message_and_the_manifest_prompt(provider: FakeProvider) -> None:
    provider.script("a", Reply(content=f"```php\n{CODE}\n```"))
    result = generate_candidate(ModelSpec(name="openai/a"), EXEC, [SKILL], "the manifest's prompt")
    body = provider.bodies("a")[0]
    assert has_system(body) and "Prefix names." in body["messages"][0]["content"]
    assert user_text(body) == "the manifest's prompt"
    assert result.candidate.label == "openai/a +skills:s"


def test_plugin_files_candidate(provider: FakeProvider) -> None:
    files = {"p.php": "<?php\n/* Plugin Name: P */\n"}
    provider.script("a", Reply(content="```json\n" + json.dumps({"files": files}) + "\n```"))
    result = generate_candidate(ModelSpec(name="openai/a"), PLUGIN, [])
    assert result.candidate.files == files and result.candidate.code is None


def test_unextractable_completion_is_a_model_failure_not_an_error(provider: FakeProvider) -> None:
    provider.script("a", Reply(content="I'd rather not.", finish_reason="length"))
    result = generate_candidate(ModelSpec(name="openai/a"), EXEC, [])
    assert result.error is None
    assert result.candidate.code is None
    assert result.candidate.extraction_error is not None
    assert "cut off at max_tokens" in result.candidate.extraction_error


def test_knowledge_answer_is_returned_unscored(provider: FakeProvider) -> None:
    provider.script("a", Reply(content="The answer is B."))
    result = generate_candidate(ModelSpec(name="openai/a"), MC, [])
    assert result.answer == "The answer is B." and score_answer(MC, result.answer) == 1.0
    assert result.candidate.raw == "The answer is B."


def test_provider_outage_comes_back_as_an_error_with_usage(provider: FakeProvider) -> None:
    provider.script("a", server_error(503))
    result = generate_candidate(ModelSpec(name="openai/a"), EXEC, [])
    assert result.error is not None and result.error.startswith("openai/a: provider unavailable")
    assert result.usage.calls == provider.calls("a") == 6  # RetryPolicy default attempts
    assert result.candidate.code is None and result.candidate.extraction_error is None


def test_shipped_rubric() -> None:
    rubric = load_rubric()
    assert [c.id for c in rubric.criteria] == ["security", "performance", "conventions", "readability", "correctness"]
    assert sum(c.weight for c in rubric.criteria) == pytest.approx(1.0)
    assert rubric.sha256.startswith("sha256:")


def test_bad_rubric_names_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "r.json"
    bad.write_text(
        json.dumps({"rubric_version": "1", "name": "x", "criteria": [{"id": "a", "weight": 0, "description": "d"}]})
    )
    with pytest.raises(InputError, match=r"criteria\.0\.weight"):
        load_rubric(bad)


def judge_reply(scores: Mapping[str, float]) -> str:
    return "My review:\n```json\n" + json.dumps({"scores": scores, "rationale": "Solid, escapes output."}) + "\n```"


def test_judge_scores_quality_against_the_rubric(provider: FakeProvider) -> None:
    rubric = load_rubric()
    scores = {"security": 10, "performance": 5, "conventions": 8, "readability": 10, "correctness": 0}
    provider.script("judge", Reply(content=judge_reply(scores)))
    result = judge_candidate(judge_spec("openai/judge"), EXEC, Candidate(code=CODE), rubric)
    assert result.error is None
    assert result.scores == {k: float(v) for k, v in scores.items()}
    # 0.30*1 + 0.20*0.5 + 0.25*0.8 + 0.15*1 + 0.10*0 = 0.75
    assert result.quality == pytest.approx(0.75)
    assert result.rationale == "Solid, escapes output."
    body = provider.bodies("judge")[0]
    assert body["temperature"] == 0.0
    assert CODE in user_text(body) and "security (weight 0.3)" in user_text(body)
    stored = result.record_judge()
    assert stored["quality"] == result.quality and stored["rubric"] == "wpk-judge-rubric-v1"
    assert stored["usage"]["calls"] == 1


def test_judge_failures_leave_quality_unset(provider: FakeProvider) -> None:
    rubric = load_rubric()
    provider.script("judge", Reply(content='{"scores": {"security": 9}}'))
    partial = judge_candidate(judge_spec("openai/judge"), EXEC, Candidate(code=CODE), rubric)
    assert partial.quality is None and partial.error and "performance" in partial.error
    provider.script("judge", server_error(500))
    down = judge_candidate(judge_spec("openai/judge"), EXEC, Candidate(code=CODE), rubric)
    assert down.quality is None and down.error and down.error.startswith("openai/judge: provider unavailable")
    nothing = judge_candidate(judge_spec("openai/judge"), EXEC, Candidate(extraction_error="x"), rubric)
    assert nothing.quality is None and nothing.error and "nothing to judge" in nothing.error


def test_judge_reply_scores_are_clamped_to_the_scale() -> None:
    rubric = load_rubric()
    scores, _ = parse_judge_reply(json.dumps({"scores": {c.id: 14 for c in rubric.criteria}}), rubric)
    assert set(scores.values()) == {10.0}
