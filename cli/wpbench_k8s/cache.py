"""The verdict cache: the same (task, grader image, execution profile) is never graded twice.

A task already holds the test's checks and the candidate's code or files, so its canonical JSON,
the grader image id, the grader's limits and timeout, the execution isolation and the manifest's execution
profile decide a verdict; `verdict_key` is the one place that says so. Entries are
the verdict's JSON exactly as first computed, so a cached verdict is byte-for-byte the same.
Only verdicts a grader decided (scored or task broken) are stored, never an infrastructure
failure's fallback.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from wpbench_k8s.manifest import RunManifest
from wpbench_runtime.contract import GradeTask, Verdict

CACHE_VERSION = "1"
# Modes whose verdicts are cached by default: the candidate is fixed before grading.
CACHED_MODES = ("reference", "exploits", "completions")


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("WPBENCH_CACHE_DIR") or Path(base) / "wpbench-k8s" / "verdicts")


def verdict_key(manifest: RunManifest, task: GradeTask) -> str:
    """The cache key of one grading: everything a verdict depends on, nothing else."""
    grader = manifest.grader
    profile: Any = manifest.profile
    doc = {
        "cache_version": CACHE_VERSION,
        "task": task.model_dump(mode="json"),
        "image_id": grader.image_id,
        "limits": grader.limits.model_dump(mode="json"),
        "timeout_seconds": grader.timeout_seconds,
        "execution_profile": profile.model_dump(mode="json") if isinstance(profile, BaseModel) else profile,
    }
    if grader.execution_isolation != "reset_per_test":
        # A verdict graded in fast mode is never served to a container-per-test run, nor the reverse
        # (the default is left out so existing entries keep their keys).
        doc["execution_isolation"] = grader.execution_isolation
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class VerdictCache:
    """A directory of verdicts by key. Safe for concurrent writers (atomic renames)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> Verdict | None:
        try:
            data = self._path(key).read_text(encoding="utf-8")
        except OSError:
            return None
        try:
            return Verdict.model_validate_json(data)
        except ValueError:
            return None  # a damaged entry is a miss; the next grading rewrites it

    def put(self, key: str, verdict: Verdict) -> None:
        """Store a verdict; a cache that cannot be written is skipped, never fatal to the run."""
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_text(verdict.model_dump_json(), encoding="utf-8")
            tmp.replace(path)
        except OSError:
            pass
