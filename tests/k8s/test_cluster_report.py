"""A cluster run's HTML report (`results --report`) opens offline in Chromium: the simulated cluster,
its pods real grader containers (`docker_sim`), fetched and reported by the real CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from simkit import REPO, records

sys.path.insert(0, str(REPO / "tests" / "report"))
from pagekit import check_charts, check_drill_down, expected_marks, no_console_errors, open_report


def test_cluster_run_report_opens_in_chromium(
    docker_sim: Any, mini_suite: Path, grader_image: str, tmp_path: Path, chrome: Any, artefacts: Path
) -> None:
    sim = docker_sim
    name = sim.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite), "--image", grader_image,
                   "--max-in-flight", "2").stdout.strip()  # fmt: skip
    sim.start_controller()
    run = sim.wait_phase(name, 600)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    res = sim.cli("results", name, "-o", str(tmp_path / "results.jsonl"), "--report")
    report = tmp_path / "results.html"
    assert res.stderr.strip().splitlines()[-1] == f"report: {report}"
    summary = json.loads((tmp_path / "results.json").read_text())
    got = records(tmp_path / "results.jsonl")
    assert summary["metadata"]["runtime_isolation_boundary"] == "pod_per_test"
    open_report(chrome, report)
    check_charts(chrome, expected_marks([summary], [got]))
    no_console_errors(chrome)
    assert "pod_per_test" in chrome.find_element("id", "runs").text
    check_drill_down(chrome, got)
    chrome.save_screenshot(str(artefacts / "report-cluster.png"))
    no_console_errors(chrome)
