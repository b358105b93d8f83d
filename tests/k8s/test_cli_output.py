"""Cluster commands' machine-readable output on the real cluster: a submitted run (no controller in this
namespace, so it stays Pending) as `runs`, `status -o` and `results --output-format` report it."""

from __future__ import annotations

import json

import yaml
from clusterkit import REPO, Space

MINI = REPO / "tests" / "fixtures" / "suites" / "mini"


def test_runs_status_and_results_print_documents_scripts_can_read(space: Space) -> None:
    name = space.cli("submit", "--check-reference-solution", "--dataset-path", str(MINI), "--name", "wpb-cli-out",
                     "-n", space.namespace).stdout.strip()  # fmt: skip
    assert name == "wpb-cli-out"
    listed = json.loads(space.cli("runs", "-n", space.namespace, "-o", "json").stdout)
    assert listed["namespace"] == space.namespace
    (row,) = listed["runs"]
    assert (row["name"], row["phase"], row["total"]) == (name, "Pending", 2) and row["age"]
    table = space.cli("runs", "-n", space.namespace).stdout
    assert name in table and "Pending" in table
    status = yaml.safe_load(space.cli("status", name, "-n", space.namespace, "-o", "yaml").stdout)
    assert (status["name"], status["namespace"], status["phase"], status["done"]) == (name, space.namespace,
                                                                                    "Pending", 0)  # fmt: skip
    out = space.tmp / "res" / "records.jsonl"
    got = json.loads(space.cli("results", name, "-n", space.namespace, "-o", str(out), "--output-format",
                               "json").stdout)  # fmt: skip
    assert (got["phase"], got["records"], got["items"]) == ("Pending", 0, 2)
    assert got["records_path"] == str(out.with_name(out.name + ".partial")) and got["summary_path"] is None
