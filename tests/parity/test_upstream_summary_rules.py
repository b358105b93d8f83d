"""The summary rules of both upstream versions, from a fixture of record sets and the scores upstream's
rules give them (`tests/fixtures/parity/summary-rules.json`; how they were worked out: its `about`):
headline, rounding and key names, per profile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wpbench_k8s.records import Record, RecordGrader, RecordScores
from wpbench_k8s.scoring import aggregate

FIXTURE = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "parity" / "summary-rules.json").read_text())


def records(case: dict[str, Any], profile: str) -> list[Record]:
    def one(n: int, kind: str, correctness: float, passed: bool, policy: bool) -> Record:
        return Record(
            run_id="r", item_id=f"{kind}-{n}", test_id=f"{kind}-{n}", suite="s", type=kind,  # type: ignore[arg-type]
            category="c", mode="model", model="m", profile=profile,  # type: ignore[arg-type]
            scores=RecordScores(correctness=correctness, execution_pass=passed, runtime=correctness,
                                static_policy_pass=policy),
            grader=RecordGrader(status="passed" if passed else "failed"),
        )  # fmt: skip

    out = [one(n, "execution", c, p, pol) for n, (c, p, pol) in enumerate(case["execution"])]
    return out + [one(n, "knowledge", k, k >= 1.0, True) for n, k in enumerate(case["knowledge"])]


@pytest.mark.parametrize("profile", ["upstream-v2", "upstream"])
@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: c["name"])
def test_scores_follow_the_versions_summary_rules(case: dict[str, Any], profile: str) -> None:
    scores = aggregate(records(case, profile))["scores"]
    want = case[profile]
    assert {key: scores.get(key, "absent") for key in want} == want


def test_the_fixture_tells_the_versions_apart() -> None:
    # Each version's rules are exercised where they differ: some case gives the two headlines different values.
    assert any(c["upstream"]["overall"] != c["upstream-v2"]["overall"] for c in FIXTURE["cases"])
