"""The committed JSON Schemas match the contract models (no Docker needed).

Every verdict the Docker-backed runtime tests produce is validated with Verdict.model_validate
in gradekit.Grader.grade; this module covers the generated schema files.
"""

from __future__ import annotations

import json

from wpbench_runtime import schema
from wpbench_runtime.contract import GradeTask, Verdict


def test_committed_schemas_are_fresh() -> None:
    assert schema.stale() == [], "run `make schema` and commit runtime/schema/"


def test_schemas_describe_the_models() -> None:
    task = json.loads((schema.SCHEMA_DIR / "grade-task.schema.json").read_text())
    verdict = json.loads((schema.SCHEMA_DIR / "verdict.schema.json").read_text())
    assert set(task["properties"]) == set(GradeTask.model_fields)
    assert set(verdict["properties"]) == set(Verdict.model_fields)
    assert task["required"] == ["test_id"] and verdict["required"] == ["status", "scores"]


def test_schema_check_command(tmp_path) -> None:
    assert schema.main(["--check", "--dir", str(tmp_path)]) == 1
    assert schema.main(["--dir", str(tmp_path)]) == 0
    assert schema.main(["--check", "--dir", str(tmp_path)]) == 0
