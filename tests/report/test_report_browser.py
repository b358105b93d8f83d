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
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from fake_provider import FakeProvider, Reply, has_system, reference_answers, user_text
from pagekit import check_charts, check_drill_down, expected_marks, no_console_errors, open_report

pytestmark = [pytest.mark.docker, pytest.mark.browser]

REPO = Path(__file__).resolve().parents[2]
CORE = REPO / "datasets" / "suites" / "wpk-core-v1"
SELECT = ["--limit", "4", "--seed", "2"]  # 3 execution tests and 1 knowledge test over 4 categories


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
    answers = reference_answers(CORE)
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
