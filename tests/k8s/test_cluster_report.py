"""A cluster run's HTML report (`results --report`) opens offline in Chromium: a run on the real local
Kubernetes (`make cluster-up`), the chart's controller in-cluster, fetched and reported by the real CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from clusterkit import REPO, Space, records

sys.path.insert(0, str(REPO / "tests" / "report"))
from pagekit import check_charts, check_drill_down, expected_marks, no_console_errors, open_report

pytestmark = pytest.mark.docker


def test_cluster_run_report_opens_in_chromium(
    space: Space, mini_suite: Path, grader_image: str, tmp_path: Path, chrome: Any, artefacts: Path
) -> None:
    name = space.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite), "--image", grader_image,
                     "--max-in-flight", "2").stdout.strip()  # fmt: skip
    space.install_controller()
    run = space.wait_phase(name, 600)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    res = space.cli("results", name, "-o", str(tmp_path / "results.jsonl"), "--report")
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
