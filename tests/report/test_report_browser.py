"""The HTML report in a real browser: reports of a real two-model skills run (the fake provider
through real LiteLLM, graded by the real grader image) and of a reference run, each written by
`run --report`, and both side by side by `wpbench-k8s report`. No console errors, every chart drawn
with the number of marks the summary implies, the drill-down opens on click; screenshots are kept
under output/test-artifacts/."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from fake_provider import FakeProvider, Reply, has_system, user_text

from wpbench_k8s.dataset import ExecutionTest, load_suite
from wpbench_k8s.models.prompts import build_prompt

pytestmark = [pytest.mark.docker, pytest.mark.browser]

REPO = Path(__file__).resolve().parents[2]
CORE = REPO / "datasets" / "suites" / "wpk-core-v1"
SELECT = ["--limit", "4", "--seed", "2"]  # 3 execution tests and 1 knowledge test over 4 categories
MARK_SELECTORS = {"bar": ".barlayer .point", "point": ".scatterlayer path.point", "cell": ".hm text"}


def _answers() -> dict[str, str]:
    answers = {}
    for t in load_suite(CORE).all_tests():
        if not isinstance(t, ExecutionTest):
            answers[build_prompt(t)] = t.correct_answer
        elif t.artifact_kind == "wp_plugin_files":
            answers[build_prompt(t)] = "```json\n" + json.dumps({"files": t.reference_files}) + "\n```"
        else:
            answers[build_prompt(t)] = f"```php\n<?php\n{t.reference_solution}\n```"
    return answers


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    res = subprocess.run([sys.executable, "-m", "wpbench_k8s", *args], capture_output=True, text=True, cwd=REPO,
                         timeout=1200, env=env or dict(os.environ))  # fmt: skip
    assert res.returncode == 0, res.stderr[-4000:]
    return res


def _written(res: subprocess.CompletedProcess[str], out: Path) -> tuple[Path, dict[str, Any], list[dict[str, Any]]]:
    """The report the run's last line names, and the summary and records beside it."""
    last = res.stderr.strip().splitlines()[-1]
    match = re.fullmatch(r"report: (\S+\.html)", last)
    assert match, last
    report = Path(match.group(1))
    summary_path = report.with_suffix(".json")
    assert report.parent == out and summary_path.is_file()
    records = [json.loads(line) for line in report.with_suffix(".jsonl").read_text().splitlines()]
    return report, json.loads(summary_path.read_text()), records


@pytest.fixture(scope="module")
def skill(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("skill") / "wp-skill"
    path.mkdir()
    (path / "SKILL.md").write_text("---\nname: wp-skill\n---\nUse the WordPress APIs.\n")
    return path


@pytest.fixture(scope="module")
def model_run(grader_image: str, skill: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, Any]:
    """Model a answers every test right; model b only with the skill, except knowledge."""
    answers = _answers()
    out = tmp_path_factory.mktemp("models")

    def answer_a(body: dict[str, Any]) -> Reply:
        return Reply(content=answers[user_text(body)])

    def answer_b(body: dict[str, Any]) -> Reply:
        right = answers[user_text(body)]
        return Reply(content=right if has_system(body) or not right.startswith("```") else "```php\n// todo\n```")

    with FakeProvider() as provider:
        provider.respond("a", answer_a)
        provider.respond("b", answer_b)
        env = dict(os.environ, OPENAI_API_BASE=provider.url, OPENAI_API_KEY="sk-fake-test-key",
                   LITELLM_LOCAL_MODEL_COST_MAP="True")  # fmt: skip
        res = _run("run", "--model-name", "openai/a", "--model-name", "openai/b", "--skill", str(skill), *SELECT,
                   "--image", grader_image, "--execution-concurrency", "2", "--output", str(out / "results.json"),
                   "--report", env=env)  # fmt: skip
    return _written(res, out)


@pytest.fixture(scope="module")
def reference_run(grader_image: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, Any]:
    out = tmp_path_factory.mktemp("reference")
    res = _run("run", "--check-reference-solution", *SELECT, "--image", grader_image, "--execution-concurrency", "2",
               "--output", str(out / "results.json"), "--report")  # fmt: skip
    return _written(res, out)


def _rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Leaderboard rows as the summary has them: comparison rows, else per-model aggregates."""
    if "comparison" in summary:
        return [
            dict(row, key=row["model"] if row["variant"] == "baseline" else f"{row['model']} [{row['variant']}]")
            for row in summary["comparison"]["rows"]
        ]
    return [dict(agg, key=key) for key, agg in summary["models"].items()]


def expected_marks(summaries: list[dict[str, Any]], records: list[list[dict[str, Any]]]) -> dict[str, int]:
    """What each chart must draw, read off the summaries and records (not the report's own counts)."""
    rows = [(s, row) for s in summaries for row in _rows(s)]
    statuses = {st for s, row in rows for st in s["models"][row["key"]]["statuses"]}
    top = sorted(rows, key=lambda sr: -sr[1]["score"])[:5]
    cats = {c for _, row in rows for c in row["categories"]}
    shared = [c for c in cats if all(c in row["categories"] for _, row in top)]
    marks = {
        "chart-overall": 2 * len(rows),  # score and execution pass rate (a flat bar where there is none)
        "chart-cost": len(rows),
        "chart-categories": sum(len(row["categories"]) for _, row in rows),
        "chart-difficulty": sum(len({(r["model"], r["variant"], r["difficulty"]) for r in rs}) for rs in records),
        "chart-statuses": len(rows) * len(statuses),
    }
    if len(shared) >= 3:
        marks["chart-radar"] = len(top) * (len(shared) + 1)
    deltas = sum(len(s.get("comparison", {}).get("skills_delta", [])) for s in summaries)
    if deltas:
        marks["chart-skills"] = 2 * deltas
    return marks


def open_report(driver: Any, path: Path) -> None:
    driver.get(path.as_uri())
    deadline = time.monotonic() + 120  # a bound on a loaded machine, not a speed claim
    while driver.execute_script("return document.body.dataset.ready") is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert driver.execute_script("return document.body.dataset.ready") == "1"


def check_charts(driver: Any, expected: dict[str, int]) -> None:
    charts = driver.execute_script(
        "return [...document.querySelectorAll('.chart')].map(c => {const r = c.getBoundingClientRect();"
        " return {id: c.id, w: r.width, h: r.height, marks: Number(c.dataset.marks), mark: c.dataset.mark,"
        " svg: c.querySelectorAll('svg.main-svg').length}})"
    )
    assert sorted(c["id"] for c in charts) == sorted(expected)
    for c in charts:
        assert c["w"] > 100 and c["h"] > 100 and c["svg"] > 0, c
        drawn = driver.execute_script(
            "return arguments[0].querySelectorAll(arguments[1]).length",
            driver.find_element("id", c["id"]),
            MARK_SELECTORS[c["mark"]],
        )
        assert drawn == c["marks"] == expected[c["id"]], c


def no_console_errors(driver: Any) -> None:
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []


def check_drill_down(driver: Any, records: list[dict[str, Any]]) -> None:
    """Click the first graded execution record: its code and every assertion are shown."""
    index, record = next((i, r) for i, r in enumerate(records) if r["grader"]["verdict"] and r["output"]["code"])
    row = driver.find_element("css selector", f'#records-table tbody tr[data-index="{index}"]')
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", row)
    assert not driver.execute_script("return document.getElementById('drill').open")
    row.click()
    assert driver.execute_script("return document.getElementById('drill').open")
    title = driver.find_element("id", "drill-title").text
    assert record["test_id"] in title and record["model"] in title
    shown = driver.execute_script("return document.querySelector('#drill-body pre.code').textContent")
    assert " ".join(shown.split()) == " ".join(record["output"]["code"].split())
    rows = driver.execute_script("return document.querySelectorAll('#drill-body table.assertions tbody tr').length")
    assert rows == len(record["grader"]["verdict"]["assertions"])


def test_model_run_report_in_chromium(chrome: Any, model_run: Any, artefacts: Path) -> None:
    report, summary, records = model_run
    assert {row["model"] for row in summary["comparison"]["rows"]} == {"openai/a", "openai/b"}
    open_report(chrome, report)
    check_charts(chrome, expected_marks([summary], [records]))
    no_console_errors(chrome)
    assert len(chrome.find_elements("css selector", "#records-table tbody tr")) == len(records)
    impact = chrome.find_elements("css selector", "#skill-impact tbody tr")
    assert len(impact) == sum(len(m["tests"]) for m in summary["skill_impact"]["models"]) > 0
    chrome.save_screenshot(str(artefacts / "report-models.png"))
    check_drill_down(chrome, records)
    chrome.save_screenshot(str(artefacts / "report-models-drill-down.png"))
    chrome.find_element("id", "drill-close").click()
    assert not chrome.execute_script("return document.getElementById('drill').open")
    no_console_errors(chrome)


def test_reference_run_report_in_chromium(chrome: Any, reference_run: Any, artefacts: Path) -> None:
    report, summary, records = reference_run
    open_report(chrome, report)
    check_charts(chrome, expected_marks([summary], [records]))
    no_console_errors(chrome)
    statuses = Counter(r["grader"]["status"] for r in records)
    assert statuses == Counter(summary["overall"]["statuses"])
    check_drill_down(chrome, records)
    chrome.save_screenshot(str(artefacts / "report-reference.png"))
    no_console_errors(chrome)


def test_two_runs_side_by_side_in_chromium(
    chrome: Any, model_run: Any, reference_run: Any, artefacts: Path, tmp_path: Path
) -> None:
    (m_report, m_summary, m_records), (r_report, r_summary, r_records) = model_run, reference_run
    out = tmp_path / "both.html"
    _run("report", str(r_report.with_suffix(".json")), str(m_report.with_suffix(".json")), "-o", str(out))
    open_report(chrome, out)
    check_charts(chrome, expected_marks([r_summary, m_summary], [r_records, m_records]))
    no_console_errors(chrome)
    assert len(chrome.find_elements("css selector", "#runs thead th")) == 3  # a label column and two runs
    chrome.save_screenshot(str(artefacts / "report-two-runs.png"))
