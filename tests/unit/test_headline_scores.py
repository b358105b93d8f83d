"""The summary's `scores` block under each profile's rules (upstream's ScoreBreakdown and ScoreAggregator:
scoring v2.0 at WordPress/wp-bench bf059e2, v3.0 at e19d3a8; expected numbers worked out from those rules)."""

from __future__ import annotations

from wpbench_k8s.records import Record, RecordGrader, RecordScores
from wpbench_k8s.scoring import aggregate


def rec(kind: str, correctness: float, passed: bool = False, runtime: float | None = None, policy: bool = True,
        profile: str = "upstream") -> Record:  # fmt: skip
    return Record(
        run_id="r", item_id=f"i{id(object())}", test_id="t", suite="s", type=kind, category="c", mode="model",  # type: ignore[arg-type]
        model="m", profile=profile,  # type: ignore[arg-type]
        scores=RecordScores(correctness=correctness, execution_pass=passed,
                            runtime=correctness if runtime is None else runtime, static_policy_pass=policy),
        grader=RecordGrader(status="passed" if passed else "failed"),
    )  # fmt: skip


# Four execution tests (one passes; correctness mean 0.71875, which upstream keeps unrounded) and three
# knowledge answers (mean 2/3).
EXECUTION = [(1.0, True, True), (0.5, False, True), (0.6, False, False), (0.775, False, True)]
KNOWLEDGE = [1.0, 0.0, 1.0]


def records(profile: str, *, knowledge: bool = True, execution: bool = True) -> list[Record]:
    out = [rec("execution", c, p, policy=pol, profile=profile) for c, p, pol in EXECUTION] if execution else []
    return out + ([rec("knowledge", k, k >= 1.0, profile=profile) for k in KNOWLEDGE] if knowledge else [])


def test_v3_headline_is_the_pass_rate_with_upstreams_key_names_and_rounding() -> None:
    scores = aggregate(records("upstream"))["scores"]
    assert scores["overall"] == 0.25 and scores["execution_pass_rate"] == 0.25
    assert scores["correctness"] == 0.71875  # unrounded mean, not 0.7188
    assert scores["runtime"] == 0.7188  # upstream rounds the runtime mean to 4 places
    assert scores["static_policy_pass_rate"] == 0.75
    assert scores["execution_pass"] == 0.25  # our name for the same number


def test_v2_headline_weighs_knowledge_and_the_pass_rate() -> None:
    scores = aggregate(records("upstream-v2"))["scores"]
    assert scores["knowledge"] == 2 / 3
    assert scores["overall"] == round(0.3 * (2 / 3) + 0.7 * 0.25, 4) == 0.375
    assert scores["correctness"] == 0.71875 and scores["execution_pass_rate"] == 0.25


def test_v2_over_the_tracks_present() -> None:
    assert aggregate(records("upstream-v2", execution=False))["scores"]["overall"] == 0.6667  # knowledge only
    assert aggregate(records("upstream-v2", knowledge=False))["scores"]["overall"] == 0.25
    assert aggregate([])["scores"]["overall"] == 0.0


def test_v3_ignores_knowledge_in_the_headline() -> None:
    only_knowledge = aggregate(records("upstream", execution=False))["scores"]
    assert only_knowledge["overall"] == 0.0 and only_knowledge["execution_pass_rate"] is None


def test_ours_is_the_pooled_mean_correctness() -> None:
    scores = aggregate(records("wpbench"))["scores"]
    assert scores["overall"] == round((1.0 + 0.5 + 0.6 + 0.775 + 2.0) / 7, 4)
    assert "execution_pass_rate" not in scores
