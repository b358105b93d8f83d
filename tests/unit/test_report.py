"""The report's data: built from the summary JSON a run writes (same aggregates), records for the
drill-down; bad input is an error naming file and field. The page itself is tested in a real browser
(tests/report)."""

from __future__ import annotations

import base64
import gzip
import html as html_lib
import io
import json
import re
from pathlib import Path

import pytest

from wpbench_k8s.cli import run
from wpbench_k8s.config import load_config
from wpbench_k8s.errors import InputError
from wpbench_k8s.manifest import RunManifest
from wpbench_k8s.pipeline import plan_run
from wpbench_k8s.records import Record, Usage
from wpbench_k8s.report import build_view, load_run, write_report
from wpbench_k8s.report.charts import build_charts
from wpbench_k8s.scoring import GraderVerdict, KnowledgeAnswer, NotGraded, build_record
from wpbench_k8s.summary import CacheFacts, RunFacts, build_summary
from wpbench_runtime.contract import AssertionResult, Scores, Verdict

REPO = Path(__file__).resolve().parents[2]
MINI = REPO / "tests" / "fixtures" / "suites" / "mini"
HOSTILE = "</script><script>alert('owned')</script>"


def _verdict(test_id: str, passed: bool) -> Verdict:
    return Verdict(
        test_id=test_id,
        status="passed" if passed else "failed",
        reason="" if passed else "1 of 1 assertions failed",
        scores=Scores(execution_pass=passed, runtime=1.0 if passed else 0.0, static=1.0, static_policy_pass=True),
        assertions=[AssertionResult(index=0, type="custom_assertion", description="does the thing", weight=1.0,
                                    passed=passed, message="" if passed else "expected 2, got 3")],
    )  # fmt: skip


def model_run(
    tmp_path: Path, *, runs: int = 1, name: str = "results", profile: str = "wpbench"
) -> tuple[Path, RunManifest, list[Record]]:
    """Two models over the mini suite, written as a run writes them: model a gets everything right;
    model b passes only basic tests and answers knowledge wrongly; one of b's records errored."""
    config = load_config(None, {"dataset.path": str(MINI), "run.runs": runs, "run.profile": profile,
                                "models": [{"name": "openai/a"}, {"name": "openai/b"}]})  # fmt: skip
    manifest = plan_run(config, "models")
    records = []
    for item in manifest.items:
        test = manifest.tests[item.test_id]
        good = item.model == "openai/a" or test.get("difficulty") == "basic"
        usage = Usage(cost_usd=0.01 if item.model == "openai/a" else 0.002, latency_ms=100, calls=1)
        if item.test_type == "knowledge":
            record = build_record(manifest, item, KnowledgeAnswer(1.0 if good else 0.0), usage=usage)
        elif item.model == "openai/b" and item.test_id == "mini-shortcodes-001" and item.item_id.endswith("r2"):
            record = build_record(manifest, item, NotGraded("provider outage"), usage=usage)
        else:
            record = build_record(manifest, item, GraderVerdict(_verdict(item.test_id, good)), usage=usage)
        record.output.code = HOSTILE if item.model == "openai/b" else "add_action('init', 'x');"
        if item.model == "openai/a" and item.test_type == "execution":
            record.scores.quality = 0.8  # as the AI judge would set it
        records.append(record)
    facts = RunFacts(executor="docker", started_at="s", finished_at="f", cache=CacheFacts(enabled=False))
    path = tmp_path / f"{name}.json"
    path.write_text(build_summary(manifest, records, facts).to_json())
    path.with_suffix(".jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records))
    return path, manifest, records


def test_leaderboard_numbers_are_the_summary_numbers(tmp_path: Path) -> None:
    path, _, _ = model_run(tmp_path, runs=2)
    summary = json.loads(path.read_text())
    report = build_view([load_run(path)])
    rows = summary["comparison"]["rows"]
    assert [(e.model, e.variant) for e in report.entries] == [(r["model"], r["variant"]) for r in rows]
    for entry, row in zip(report.entries, rows, strict=True):
        agg = summary["models"][row["model"]]
        assert (entry.score, entry.score_std, entry.cost_usd) == (row["score"], row["score_std"], row["cost_usd"])
        assert entry.execution_pass_rate == agg["execution"]["pass_rate"]
        assert entry.knowledge == agg["knowledge"]["accuracy"]
        assert entry.statuses == agg["statuses"]
        assert entry.categories == {c: v["score"] for c, v in row["categories"].items()}
        assert entry.quality == row["quality"]
    a, b = report.entries
    # what the data was made to be: a right everywhere; b right on basic tests only, knowledge wrong
    assert (a.score, a.execution_pass_rate, a.knowledge, a.quality, b.quality) == (1.0, 1.0, 1.0, 0.8, None)
    assert (b.execution_pass_rate, b.knowledge, b.excluded) == (0.6667, 0.0, 1)  # 2 of 3 counted
    assert a.difficulties == {"basic": 1.0, "intermediate": 1.0}
    assert b.difficulties == {"basic": 1.0, "intermediate": 0.0}
    assert b.score_std is not None and b.score_std > 0  # run 2 lost one passing record, run 1 did not


def test_excluded_records_are_listed_and_failures_counted(tmp_path: Path) -> None:
    path, _, records = model_run(tmp_path, runs=2)
    report = build_view([load_run(path)])
    errored = [r for r in records if r.error]
    assert [(x["test_id"], x["model"], x["error"]) for x in report.excluded] == [
        (r.test_id, r.model, r.error) for r in errored
    ]
    assert len(report.records) == len(records)
    (failing,) = report.failing_assertions
    # b failed mini-shortcodes-001 in run 1; its run-2 record errored and counts nowhere
    assert (failing["test_id"], failing["count"], failing["models"]) == ("mini-shortcodes-001", 1, ["openai/b"])
    assert failing["message"] == "expected 2, got 3"


def test_charts_mark_counts_follow_the_data(tmp_path: Path) -> None:
    path, _, _ = model_run(tmp_path, runs=2)
    charts = {c.id: c for c in build_charts(build_view([load_run(path)]))}
    assert charts["chart-overall"].marks == 4  # score and pass rate for two models
    assert charts["chart-overall"].figure.data[0].error_y.visible is True  # --runs 2: error bars
    assert charts["chart-categories"].marks == 6  # 2 models x (hooks, shortcodes, security)
    assert charts["chart-radar"].marks == 2 * 4  # each line: 3 categories and the closing point
    assert "chart-skills" not in charts  # no skills run
    assert charts["chart-cost"].marks == 2 and not charts["chart-cost"].note


def test_page_is_self_contained_and_escapes_model_output(tmp_path: Path) -> None:
    path, manifest, _ = model_run(tmp_path)
    out = tmp_path / "report.html"
    prompts = {t: str(v["prompt"]) for t, v in manifest.tests.items()}
    size = write_report([path], out, prompts=prompts)
    html = out.read_text()
    assert size == len(html.encode())
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", html)  # nothing fetched at view time
    assert "alert('owned')" not in html
    assert "<th>judge quality</th>" in html  # a judged model: the leaderboard shows the column
    packed = re.search(r'id="records-data">([^<]+)<', html)
    assert packed is not None
    records = json.loads(gzip.decompress(base64.b64decode(packed.group(1))))
    hostile = next(r for r in records if r["model"] == "openai/b" and r["code_html"])
    assert "<script" not in hostile["code_html"]
    assert html_lib.unescape(re.sub(r"<[^>]+>", "", hostile["code_html"])).strip() == HOSTILE
    assert {r["prompt"] for r in records} == {prompts[r["test_id"]] for r in records}


def test_prompts_come_from_the_suite_that_ran_or_a_note_says_why_not(tmp_path: Path) -> None:
    path, manifest, _ = model_run(tmp_path)
    run = load_run(path)  # dataset_source names the mini suite, same digest
    assert run.prompts["mini-hooks-001"] == manifest.tests["mini-hooks-001"]["prompt"]
    doc = json.loads(path.read_text())
    doc["metadata"]["dataset_digest"] = "sha256:other"
    path.write_text(json.dumps(doc))
    run = load_run(path)
    assert run.prompts == {} and any("digest" in n for n in run.notes)


def test_several_runs_side_by_side_and_a_run_without_records(tmp_path: Path) -> None:
    first, _, _ = model_run(tmp_path, name="first")
    second = tmp_path / "second.json"  # the same run fetched twice, without its records the second time
    second.write_text(first.read_text())
    report = build_view([load_run(first), load_run(second)])
    assert len(report.entries) == 4 and len({e.label for e in report.entries}) == 4
    assert not report.has_records and any("records not found" in n for n in report.runs[1].notes)
    assert report.runs[1].label.endswith("(second.json)")  # same run id twice: told apart by file


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.pop("overall"), "field overall"),
        (lambda d: d["models"]["openai/a"].update(score="high"), "field models.openai/a.score"),
        (lambda d: d["comparison"]["rows"][0].pop("model"), "field comparison.rows.0.model"),
    ],
)
def test_bad_summary_is_exit_2_naming_file_and_field_and_writes_nothing(tmp_path, mutate, field) -> None:
    path, _, _ = model_run(tmp_path)
    doc = json.loads(path.read_text())
    mutate(doc)
    path.write_text(json.dumps(doc))
    out = tmp_path / "report.html"
    err = io.StringIO()
    assert run(["report", str(path), "-o", str(out)], io.StringIO(), err) == 2
    assert str(path) in err.getvalue() and field in err.getvalue()
    assert not out.exists() and not list(tmp_path.glob("report.html*"))


def test_not_a_summary_and_a_broken_record_line_are_input_errors(tmp_path: Path) -> None:
    jsonl = tmp_path / "x.json"
    jsonl.write_text('{"a": 1}\n{"b": 2}\n')
    with pytest.raises(InputError, match="not a summary JSON"):
        load_run(jsonl)
    path, _, _ = model_run(tmp_path)
    lines = path.with_suffix(".jsonl").read_text().splitlines()
    lines[2] = lines[2].replace('"type":"execution"', '"type":"essay"').replace('"type":"knowledge"', '"type":"essay"')
    path.with_suffix(".jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"line 3, field type"):
        load_run(path)


def test_report_command_writes_the_file_and_names_it(tmp_path: Path) -> None:
    path, _, _ = model_run(tmp_path)
    out = tmp_path / "sub" / "r.html"
    stdout = io.StringIO()
    assert run(["report", str(path), "-o", str(out)], stdout, io.StringIO()) == 0
    assert out.is_file() and f"report: {out}" in stdout.getvalue()


def test_a_missing_results_file_is_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    err = io.StringIO()
    assert run(["report", str(missing), "-o", str(tmp_path / "r.html")], io.StringIO(), err) == 2
    assert str(missing) in err.getvalue()
    assert not (tmp_path / "r.html").exists()


def test_long_model_names_stay_distinct_on_chart_axes(tmp_path: Path) -> None:
    from wpbench_k8s.report.charts import short_labels

    path, _, _ = model_run(tmp_path)
    a, b = build_view([load_run(path)]).entries
    a.label, b.label = "exploit [" + "x" * 60 + "1]", "exploit [" + "x" * 60 + "2]"
    labels = short_labels([a, b])
    assert len(set(labels)) == 2 and all(len(label) <= 43 for label in labels)


def test_upstream_profile_heads_with_the_summary_headline(tmp_path: Path) -> None:
    path, _, _ = model_run(tmp_path, profile="upstream")
    summary = json.loads(path.read_text())
    report = build_view([load_run(path)])
    a, b = report.entries
    for entry in (a, b):
        assert entry.headline == summary["models"][entry.key]["scores"]["overall"]
    # upstream's headline is the execution pass rate: b passed 1 of 2 execution tests, its mean score is lower
    assert (b.headline, b.score) == (0.5, 0.25) and report.headline_differs
    out = tmp_path / "r.html"
    write_report([path], out)
    html = out.read_text()
    assert "<th>overall</th>" in html and "<th>profile</th><td>upstream</td>" in html
    wpbench_path, _, _ = model_run(tmp_path, name="ours")
    assert not build_view([load_run(wpbench_path)]).headline_differs  # our headline is the score
