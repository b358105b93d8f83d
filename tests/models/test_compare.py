"""Comparison rows, the Δ skills row, Skill Impact and --runs statistics from records."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from wpbench_k8s.models.compare import comparison, comparison_table, impact_counts, impact_table, skill_impact
from wpbench_k8s.records import Record, RecordGrader, RecordScores, Usage


def rec(
    model: str, variant: str, test: str, score: float, *, cat: str = "hooks", run: int = 0, error: str | None = None,
    cost: float = 0.01, latency: int = 1000, quality: float | None = None,
) -> Record:  # fmt: skip
    return Record(
        run_id="r", item_id=f"{test}--{model}--{variant}" + (f"--r{run}" if run else ""), test_id=test, suite="s",
        type="execution", category=cat, mode="models", variant=variant, model=model,
        scores=RecordScores(correctness=score, execution_pass=score == 1.0, runtime=score, quality=quality),
        grader=RecordGrader(status="passed" if score == 1.0 else "failed"),
        usage=Usage(prompt_tokens=100, completion_tokens=50, cost_usd=cost, latency_ms=latency, calls=1),
        error=error,
    )  # fmt: skip


RECORDS = [
    # model a: t1 fixed, t2 broken, t3 moved, t4 still failing, t5 passes in both
    rec("a", "baseline", "t1", 0.0), rec("a", "with-skills", "t1", 1.0),
    rec("a", "baseline", "t2", 1.0), rec("a", "with-skills", "t2", 0.5),
    rec("a", "baseline", "t3", 0.25, cat="rest"), rec("a", "with-skills", "t3", 0.5, cat="rest"),
    rec("a", "baseline", "t4", 0.0, cat="rest"), rec("a", "with-skills", "t4", 0.0, cat="rest"),
    rec("a", "baseline", "t5", 1.0), rec("a", "with-skills", "t5", 1.0, cost=0.03, latency=3000),
    # model b: one errored record, excluded from scores but its cost counts
    rec("b", "baseline", "t1", 1.0), rec("b", "baseline", "t2", 0.0, error="openai/b: provider unavailable", cost=0),
    rec("b", "with-skills", "t1", 1.0), rec("b", "with-skills", "t2", 1.0),
]  # fmt: skip


def test_rows_per_model_and_variant() -> None:
    data = comparison(RECORDS)
    keys = [(r["model"], r["variant"]) for r in data["rows"]]
    assert keys == [("a", "baseline"), ("a", "with-skills"), ("b", "baseline"), ("b", "with-skills")]
    a_base = data["rows"][0]
    assert a_base["tests"] == 5 and a_base["excluded"] == 0
    assert a_base["score"] == pytest.approx((0 + 1 + 0.25 + 0 + 1) / 5)
    assert a_base["pass_rate"] == pytest.approx(0.4)
    assert a_base["categories"]["rest"] == {"tests": 2, "score": 0.125, "pass_rate": 0.0}
    assert a_base["cost_usd"] == pytest.approx(0.05) and a_base["latency_ms_mean"] == 1000
    b_base = data["rows"][2]
    assert (b_base["tests"], b_base["excluded"], b_base["score"], b_base["pass_rate"]) == (1, 1, 1.0, 1.0)
    assert data["categories"] == ["hooks", "rest"]


def test_skills_delta_per_model() -> None:
    deltas = {d["model"]: d for d in comparison(RECORDS)["skills_delta"]}
    a = deltas["a"]
    assert a["score"] == pytest.approx((1 + 0.5 + 0.5 + 0 + 1) / 5 - (0 + 1 + 0.25 + 0 + 1) / 5)
    assert a["pass_rate"] == pytest.approx(0.0)
    assert a["cost_usd"] == pytest.approx(0.02)
    assert a["latency_ms_mean"] == pytest.approx(400.0)
    # b: t2 errored in the baseline, so only t1 is paired (1.0 -> 1.0).
    assert (deltas["b"]["paired_tests"], deltas["b"]["score"]) == (1, 0.0)
    assert deltas["a"]["paired_tests"] == 5


def test_skill_impact_classifies_every_test() -> None:
    impact = {m["model"]: m for m in skill_impact(RECORDS)["models"]}
    a = impact["a"]
    assert [(t["test_id"], t["change"]) for t in a["tests"]] == [
        ("t1", "fixed"), ("t2", "broken"), ("t3", "moved"), ("t4", "still_failing"),
    ]  # fmt: skip
    assert a["counts"] == {"fixed": 1, "broken": 1, "moved": 1, "still_failing": 1, "still_passing": 1}
    assert a["tests"][2]["baseline"] == 0.25 and a["tests"][2]["with_skills"] == 0.5
    # b's t2 errored in the baseline: it is not compared at all.
    assert impact["b"]["tests_compared"] == 1 and impact["b"]["tests"] == []


def test_runs_give_mean_and_standard_deviation() -> None:
    records = [rec("a", "baseline", f"t{i}", s, run=run) for run, scores in ((1, [1, 1]), (2, [1, 0]), (3, [0, 0]))
               for i, s in enumerate(scores)]  # fmt: skip
    row = comparison(records)["rows"][0]
    assert row["runs"] == 3 and row["tests"] == 2
    assert row["score"] == pytest.approx(0.5)
    assert row["score_std"] == pytest.approx(0.5)  # stdev of [1.0, 0.5, 0.0]


def test_quality_is_reported_separately() -> None:
    records = [rec("a", "baseline", "t1", 0.0, quality=0.8), rec("a", "baseline", "t2", 1.0, quality=0.6),
               rec("a", "baseline", "t3", 1.0)]  # fmt: skip
    row = comparison(records)["rows"][0]
    assert row["quality"] == pytest.approx(0.7) and row["judged"] == 2
    assert row["pass_rate"] == pytest.approx(2 / 3, abs=1e-4)


def test_tables_render() -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=200)
    console.print(comparison_table(comparison(RECORDS)))
    console.print(impact_table(skill_impact(RECORDS)))
    text = buf.getvalue()
    assert "Δ skills" in text and "+0.15" in text and "a +skills" in text
    for word in ("fixed", "broken", "moved", "still failing"):
        assert word in text
    assert impact_counts(skill_impact(RECORDS))[0] == (
        "a: 1 fixed, 1 broken, 1 moved, 1 still failing, 1 still passing (5 tests compared)"
    )


def test_narrow_terminals_drop_token_columns_but_keep_the_scores() -> None:
    buf = io.StringIO()
    Console(file=buf, width=80).print(comparison_table(comparison(RECORDS), width=80))
    text = buf.getvalue()
    assert "tokens" not in text and "retries" not in text
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "openai" not in text and "a +skills" in text and "+0.15" in text
