"""JSON Schemas of the grader contract, generated from the pydantic models.

    python -m wpbench_runtime.schema           write runtime/schema/*.json
    python -m wpbench_runtime.schema --check   exit 1 when a committed schema is stale

The PHP verifier implements the same contract by hand (runtime/php/verifier/supervisor/task.php);
these files let tools outside Python read it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from wpbench_runtime.contract import CONTRACT_VERSION, GradeTask, Verdict

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schema"
MODELS: dict[str, type[BaseModel]] = {
    "grade-task.schema.json": GradeTask,
    "verdict.schema.json": Verdict,
}
CONTRACT_ID = f"https://wpbench-k8s.invalid/contract/v{CONTRACT_VERSION}"
# Other documents (the harness's run summary) keep their schemas in the same directory, written by
# these functions with their own `models` and `base_id` (`python -m wpbench_k8s.summary.schema`).
Models = Mapping[str, type[BaseModel]]


def schema_for(model: type[BaseModel], base_id: str = CONTRACT_ID) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one model."""
    schema = model.model_json_schema(mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"{base_id}/{model.__name__}",
        **schema,
    }


def render(model: type[BaseModel], base_id: str = CONTRACT_ID) -> str:
    return json.dumps(schema_for(model, base_id), indent=2, sort_keys=True) + "\n"


def stale(directory: Path = SCHEMA_DIR, models: Models = MODELS, base_id: str = CONTRACT_ID) -> list[str]:
    """Names of schema files that are missing or differ from the models."""
    return [
        name
        for name, model in models.items()
        if not (directory / name).is_file() or (directory / name).read_text() != render(model, base_id)
    ]


def write(directory: Path = SCHEMA_DIR, models: Models = MODELS, base_id: str = CONTRACT_ID) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in models.items():
        path = directory / name
        path.write_text(render(model, base_id))
        written.append(path)
    return written


def main(
    argv: list[str] | None = None,
    models: Models = MODELS,
    base_id: str = CONTRACT_ID,
    prog: str = "python -m wpbench_runtime.schema",
) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail when a committed schema is stale")
    parser.add_argument("--dir", type=Path, default=SCHEMA_DIR, help="schema directory (default: runtime/schema)")
    args = parser.parse_args(argv)
    if args.check:
        names = stale(args.dir, models, base_id)
        if names:
            print(f"stale schema(s): {', '.join(names)}; run `make schema`", file=sys.stderr)
            return 1
        return 0
    for path in write(args.dir, models, base_id):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
