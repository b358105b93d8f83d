"""Checks of a report page in headless Chromium, shared by the report's browser tests and the
cluster tests (`sys.path` gets this folder, as for tests/models/fake_provider.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

MARK_SELECTORS = {"bar": ".barlayer .point", "point": ".scatterlayer path.point", "cell": ".hm text"}


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
