from wpbench_k8s.config import load_config
from wpbench_k8s.manifest import Candidate
from wpbench_k8s.pipeline import judge_for, plan_run
from wpbench_k8s.scoring import InfraFailure, NotGraded, build_record


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


def test_setup_timeout_reaches_every_task_and_the_walls_around_it(mini_suite):
    # grader.setup_timeout_seconds (upstream's key) bounds each grader's trusted phase; the executors'
    # outer deadlines allow for it on top of the candidate's timeout.
    manifest = plan_run(config_for(mini_suite, **{"grader.setup_timeout_seconds": 7.5}), "reference")
    assert manifest.grader.setup_timeout_seconds == 7.5
    tasks = [item.task for item in manifest.items if item.task is not None]
    assert tasks and all(t.setup_timeout_seconds == 7.5 and t.budget_seconds == t.timeout_seconds + 7.5 for t in tasks)
    default = plan_run(config_for(mini_suite), "reference")
    assert {item.task.setup_timeout_seconds for item in default.items if item.task is not None} == {60.0}


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
    generation = build_record(manifest, item, NotGraded("openai/a: rate limited"))
    infra = build_record(manifest, item, InfraFailure("infra_error after 3 attempts"))
    assert generation.grader.status == "not_graded" and generation.error
    assert infra.grader.status == "infra_error"


class _OutageExecutor:
    """An engine that is down until `up_at` (monotonic): graders do not run, engine_ready() says False."""

    def __init__(self, down_for: float) -> None:
        import time

        self.up_at = time.monotonic() + down_for
        self.calls = 0

    def engine_ready(self) -> bool:
        import time

        return time.monotonic() >= self.up_at

    def run_grader(self, task):
        from wpbench_k8s.outcome import GraderFacts
        from wpbench_runtime.contract import Scores, Verdict

        self.calls += 1
        if not self.engine_ready():
            return GraderFacts(test_id=task.test_id, started=False, infra_reason="engine unreachable")
        verdict = Verdict(test_id=task.test_id, status="passed", reason="ok",
                          scores=Scores(execution_pass=True, runtime=1.0, static=1.0, static_policy_pass=True))  # fmt: skip
        return GraderFacts(test_id=task.test_id, exit_code=0, stdout=verdict.model_dump_json())


def _grade(mini_suite, executor, engine_wait, attempts):
    from wpbench_k8s.steps import grade_with_retries

    task = plan_run(config_for(mini_suite), "reference", run_id="r1").items[0].task
    return grade_with_retries(executor, task, attempts=attempts, engine_wait=engine_wait)


def test_attempts_that_meet_an_engine_outage_are_not_counted(mini_suite):
    from wpbench_k8s.outcome import Scored
    from wpbench_k8s.pipeline import EngineWait

    executor = _OutageExecutor(down_for=1.5)
    waits: list[float | None] = []
    decision, retries = _grade(mini_suite, executor, EngineWait(executor, 30, waits.append, poll_seconds=0.05), 1)
    # One attempt allowed, yet the grade succeeds: the attempt that met the outage was not counted.
    assert isinstance(decision, Scored) and decision.verdict.status == "passed"
    assert executor.calls >= 2 and retries == executor.calls - 1
    assert waits and waits[-1] is None  # the progress line heard the wait and its end


def test_an_outage_past_the_budget_spends_the_attempts(mini_suite):
    from wpbench_k8s.outcome import Infra
    from wpbench_k8s.pipeline import EngineWait

    executor = _OutageExecutor(down_for=60)
    decision, _ = _grade(mini_suite, executor, EngineWait(executor, 0.3, poll_seconds=0.05), 2)
    assert isinstance(decision, Infra) and "engine unreachable" in decision.reason
    assert executor.calls <= 4  # bounded: the budget ran out, then the two attempts were spent
