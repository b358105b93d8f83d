"""The run summary's JSON Schema, beside the grader contract's in runtime/schema.

python -m wpbench_k8s.summary.schema           write runtime/schema/run-summary.schema.json
python -m wpbench_k8s.summary.schema --check   exit 1 when it is stale
"""

from __future__ import annotations

import sys

from pydantic import BaseModel

from wpbench_k8s.summary.model import SUMMARY_VERSION, RunSummary
from wpbench_runtime import schema

MODELS: dict[str, type[BaseModel]] = {"run-summary.schema.json": RunSummary}
BASE_ID = f"https://wpbench-k8s.invalid/summary/v{SUMMARY_VERSION}"


def main(argv: list[str] | None = None) -> int:
    return schema.main(argv, MODELS, BASE_ID, prog="python -m wpbench_k8s.summary.schema")


if __name__ == "__main__":
    sys.exit(main())
