"""The project's own suite: schema, authoring checks and the coverage the issue promises."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from wpbench_k8s.dataset import load_suite
from wpbench_k8s.lint import lint_suite

SUITE = Path(__file__).resolve().parents[2] / "datasets" / "suites" / "wpk-core-v1"
FILES = sorted(SUITE.glob("*/*.json"))


@pytest.fixture(scope="module")
def suite():
    return load_suite(SUITE)


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.name}" for p in FILES])
def test_every_file_is_valid_json_array(path):
    data = json.loads(path.read_text())
    assert isinstance(data, list) and data


def test_suite_loads_and_lints_clean(suite):
    errors = [p for p in lint_suite(suite) if p.level == "error"]
    assert not errors, "\n".join(f"{p.where}: {p.message}" for p in errors)


def test_coverage(suite):
    categories = Counter(t.category for t in suite.execution)
    assert len(suite.execution) >= 80
    assert len(categories) >= 15, categories
    assert sum(t.artifact_kind == "wp_plugin_files" for t in suite.execution) >= 10
    assert {t.difficulty for t in suite.execution} == {"basic", "intermediate", "hard"}
    assert len(suite.knowledge) >= 60
    assert {t.type for t in suite.knowledge} == {"multiple_choice", "short_answer"}
    # `exact` refuses a right answer in a sentence ("The shortcode_atts_gallery filter"): not used here.
    assert {t.match for t in suite.knowledge if t.type == "short_answer"} == {"regex", "contains"}


def test_ids_follow_the_category(suite):
    for t in suite.execution:
        assert t.id.startswith(f"wpk-{t.category}-"), t.id
        assert t.metadata.source_refs, t.id
