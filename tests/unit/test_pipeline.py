from wpbench_k8s.config import load_config
from wpbench_k8s.manifest import Candidate
from wpbench_k8s.pipeline import judge_for, plan_run
from wpbench_k8s.scoring import build_record


def config_for(mini_suite, **extra):
    overrides = {"dataset.path": str(mini_suite), **extra}
    return load_config(None, overrides)


def test_reference_manifest_is_content_addressed_and_stable(mini_suite):
    a = plan_run(config_for(mini_suite), "reference", run_id="r1")
    b = plan_run(config_for(mini_suite), "reference", run_id="r1")
    a.created_at = b.created_at
    assert a.digest() == b.digest()
    assert [i.item_id for i in a.items] == ["mini-hooks-001", "mini-shortcodes-001"]
    assert a.items[1].task.code == a.items[1].candidate.code
    assert a.items[1].task.test_function == "mini_shout_upper( string $text ): string"
    c = plan_run(config_for(mini_suite, **{"grader.timeout_seconds": 30}), "reference", run_id="r1")
    c.created_at = a.created_at
    assert c.digest() != a.digest()


def test_judge_travels_in_the_manifest(mini_suite, tmp_path):
    comp = tmp_path / "c.jsonl"
    comp.write_text('{"test_id": "mini-hooks-001", "model": "m", "code": "return;"}\n')
    cfg = config_for(mini_suite, **{"judge.model": "openai/judge-x", "judge.skip": False})
    manifest = plan_run(cfg, "completions", completions=comp)
    assert manifest.judge is not None and manifest.judge.name == "openai/judge-x"
    judge = judge_for(manifest)
    assert judge is not None and judge.rubric.model_dump(mode="json") == manifest.judge_rubric
    assert plan_run(config_for(mini_suite), "completions", completions=comp).judge is None


def test_record_without_verdict_is_infra_only_when_the_grader_failed(mini_suite):
    manifest = plan_run(config_for(mini_suite), "reference", run_id="r1")
    item = manifest.items[0].model_copy(update={"candidate": Candidate(raw="")})
    generation = build_record(manifest, item, None, error="openai/a: rate limited")
    infra = build_record(manifest, item, None, infra=True, error="infra_error after 3 attempts")
    assert generation.grader.status == "not_graded" and generation.error
    assert infra.grader.status == "infra_error"
