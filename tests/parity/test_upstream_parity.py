"""Parity with upstream WP-Bench: upstream-shaped fixtures and the verdicts upstream gives them.

`tests/fixtures/suites/upstream-mini` is written for this project in upstream's layout; each test
exercises one place where upstream reads a test differently. `tests/fixtures/parity/upstream-mini.json`
holds recorded completions and upstream's verdict for each (how they were computed: its `about`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from wpbench_k8s.config import RunConfig
from wpbench_k8s.dataset import ExecutionTest, KnowledgeTest, Suite, load_suite
from wpbench_k8s.models.extract import extract_candidate
from wpbench_k8s.models.knowledge import score_for_profile
from wpbench_k8s.records import Record
from wpbench_k8s.scoring import aggregate_by_model
from wpbench_k8s.selection import select_tests

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "tests" / "fixtures" / "suites" / "upstream-mini"
PARITY = json.loads((REPO / "tests" / "fixtures" / "parity" / "upstream-mini.json").read_text())
COMPLETIONS = PARITY["completions"]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wpbench_k8s", *args], capture_output=True, text=True, cwd=REPO, timeout=900
    )


def outputs(out_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    (summary_path,) = out_dir.glob("*.json")
    (jsonl_path,) = out_dir.glob("*.jsonl")
    return json.loads(summary_path.read_text()), [json.loads(x) for x in jsonl_path.read_text().splitlines()]


def test_upstream_layout_defaults_to_upstream_profile() -> None:
    suite = load_suite(SUITE)
    assert suite.format == "upstream"
    assert load_suite(REPO / "tests" / "fixtures" / "suites" / "mini").format == "wpbench"


@pytest.mark.parametrize("line", [c for c in COMPLETIONS if "code" in c["upstream"]], ids=lambda c: c["why"])
def test_extraction_matches_upstream(line: dict[str, Any]) -> None:
    candidate = extract_candidate(line["completion"], "php_snippet", strict=True)
    assert candidate.code == line["upstream"]["code"]


@pytest.mark.parametrize("line", [c for c in COMPLETIONS if "knowledge" in c["upstream"]], ids=lambda c: c["why"])
def test_knowledge_scores_match_upstream(line: dict[str, Any]) -> None:
    test = load_suite(SUITE).by_id()[line["test_id"]]
    assert isinstance(test, KnowledgeTest)
    scored = score_for_profile(test, line["completion"], "upstream")
    assert (scored.score, scored.answer if test.type == "short_answer" else scored.score) == (
        line["upstream"]["knowledge"],
        line["upstream"]["answer"] if test.type == "short_answer" else line["upstream"]["knowledge"],
    )


def test_exact_answer_type_accepts_a_substring_only_upstream() -> None:
    test = load_suite(SUITE).by_id()["up-k-002"]
    assert isinstance(test, KnowledgeTest)
    assert score_for_profile(test, "Use register_post_type().", "upstream").score == 1.0
    assert score_for_profile(test, "Use register_post_type().", "wpbench").score == 0.0


# Upstream's select_tests (python/wp_bench/selection.py) run on the synthetic suite below.
UPSTREAM_PICKS = {
    (5, 1337): ["s-alpha-003", "s-beta-003", "s-delta-001", "s-epsilon-006", "s-gamma-004"],
    (7, 42): ["s-alpha-001", "s-alpha-003", "s-beta-001", "s-beta-006", "s-delta-001", "s-epsilon-006", "s-gamma-001"],
    (12, 0): ["s-alpha-001", "s-alpha-002", "s-alpha-003", "s-beta-001", "s-beta-003", "s-beta-005", "s-delta-001",
              "s-epsilon-002", "s-epsilon-003", "s-epsilon-005", "s-gamma-002", "s-gamma-003"],
    (2, 7): ["s-alpha-002", "s-beta-007"],
}  # fmt: skip


def synthetic_suite() -> Suite:
    counts = {"gamma": 5, "alpha": 3, "epsilon": 6, "beta": 8, "delta": 1}
    tests = [
        ExecutionTest(id=f"s-{c}-{n:03d}", category=c, prompt="p") for c, k in counts.items() for n in range(1, k + 1)
    ]
    knowledge = [
        KnowledgeTest(id=f"k-{n}", category="alpha", type="short_answer", prompt="q", correct_answer="a")
        for n in range(3)
    ]
    return Suite(name="synthetic", execution=tests, knowledge=knowledge, digest="-", source="-", format="upstream")


@pytest.mark.parametrize(("limit", "seed"), list(UPSTREAM_PICKS))
def test_selection_picks_what_upstream_picks(limit: int, seed: int) -> None:
    chosen = select_tests(synthetic_suite(), RunConfig(limit=limit, seed=seed), profile="upstream")
    assert sorted(t.id for t in chosen if t.test_type == "execution") == UPSTREAM_PICKS[(limit, seed)]
    # Per test type: the limit applies to knowledge separately (3 < 5, so all of them at limit 5+).
    assert len([t for t in chosen if t.test_type == "knowledge"]) == min(limit, 3)


def test_dry_run_needs_no_model(tmp_path: Path) -> None:
    done = run_cli("run", "--dataset-path", str(SUITE), "--limit", "2", "--seed", "1", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "profile upstream-v2" in done.stdout and "up-k-" in done.stdout


@pytest.mark.docker
def test_reference_solutions_pass_with_upstream_profile(grader_image: str, tmp_path: Path) -> None:
    done = run_cli("run", "--dataset-path", str(SUITE), "--check-reference-solution", "--image", grader_image,
                   "--execution-concurrency", "2", "--output", str(tmp_path / "out" / "ref.json"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary, records = outputs(tmp_path / "out")
    assert summary["metadata"]["profile"] == "upstream-v2"
    assert summary["reference"]["failing"] == {} and len(records) == 8


@pytest.mark.docker
def test_recorded_completions_get_upstreams_verdicts_and_headline(grader_image: str, tmp_path: Path) -> None:
    completions = tmp_path / "completions.jsonl"
    completions.write_text(
        "".join(json.dumps({k: c[k] for k in ("test_id", "model", "completion")}) + "\n" for c in COMPLETIONS)
    )
    done = run_cli("run", "--dataset-path", str(SUITE), "--completions", str(completions), "--image", grader_image,
                   "--execution-concurrency", "2", "--output", str(tmp_path / "out" / "results.json"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary, records = outputs(tmp_path / "out")
    by_key = {(r["test_id"], r["model"]["name"]): r for r in records}
    for line in COMPLETIONS:
        record, want = by_key[(line["test_id"], line["model"])], line["upstream"]
        got: dict[str, Any] = {}
        if "knowledge" in want:
            got = {"knowledge": record["scores"]["knowledge"], "answer": record["output"]["answer"]}
        else:
            got = {"execution_pass": record["scores"]["execution_pass"], "correctness": record["scores"]["correctness"]}
            if "code" in want:
                got["code"] = record["output"]["code"]
            if "static" in want:
                got["static"] = record["scores"]["static"]
        assert got == want, (line["why"], record["grader"]["reason"])
    # Scoring v2.0 (the default for a suite with knowledge tests), key names and unrounded means as upstream's.
    for model, head in PARITY["headline"]["upstream-v2"].items():
        scores = summary["models"][model]["scores"]
        assert {k: scores[k] for k in head} == head
    # Scoring v3.0 on the same records: the headline is the execution pass rate.
    as_v3 = [Record.model_validate({**r, "profile": "upstream"}) for r in records]
    for model, head in PARITY["headline"]["upstream"].items():
        scores = aggregate_by_model(as_v3)[model]["scores"]
        assert {k: scores[k] for k in head} == head
    # Upstream's record names, beside ours.
    record = by_key[("up-notice-001", "parity-a")]
    assert record["grader"]["success"] is False and record["output"]["raw_completion"].startswith("```php")
    assert set(record["model"]) == {"name", "kind", "temperature", "top_p", "max_tokens"}
    assert "total_tokens" in record["usage"] and record["scores"]["knowledge"] is None
    assert summary["metadata"]["profile"] == "upstream-v2"


@pytest.mark.docker
def test_wpbench_profile_reads_the_same_completions_differently(grader_image: str, tmp_path: Path) -> None:
    lines = [c for c in COMPLETIONS if c["test_id"] in ("up-truthy-001", "up-rest-001")]
    completions = tmp_path / "completions.jsonl"
    completions.write_text(
        "".join(json.dumps({k: c[k] for k in ("test_id", "model", "completion")}) + "\n" for c in lines)
    )
    done = run_cli("run", "--dataset-path", str(SUITE), "--completions", str(completions), "--image", grader_image,
                   "--profile", "wpbench", "--continue-on-error", "--output", str(tmp_path / "out" / "r.json"))  # fmt: skip
    assert done.returncode in (0, 1), done.stderr  # 1: a harness_error record (continue-on-error)
    summary, records = outputs(tmp_path / "out")
    assert summary["metadata"]["profile"] == "wpbench"
    by_key = {(r["test_id"], r["model"]): r for r in records}
    # Ours: a truthy string is not `true`; upstream's rest_response keys are refused as mis-authored;
    # prose around a fence is dropped, so the talkative completion is graded like the plain one.
    assert by_key[("up-truthy-001", "parity-a")]["scores"]["execution_pass"] is False
    assert by_key[("up-rest-001", "parity-a")]["grader"]["status"] == "harness_error"
    assert (
        by_key[("up-truthy-001", "parity-b")]["output"]["code"]
        == by_key[("up-truthy-001", "parity-a")]["output"]["code"]
    )
