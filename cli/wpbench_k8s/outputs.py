"""Result files: records stream to `<stem>_<ts>.jsonl.partial`; a finished run gets the canonical
`<stem>_<ts>.jsonl` and `<stem>_<ts>.json`. A .partial file is by definition an incomplete run."""

from __future__ import annotations

import json
import os
import platform
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wpbench_k8s import __version__
from wpbench_k8s.manifest import RunManifest
from wpbench_k8s.records import Record, json_line
from wpbench_k8s.scoring import aggregate, aggregate_by_model


def run_timestamp(now: datetime | None = None) -> str:
    return (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")


def _stamped(path: Path, ts: str, suffix: str) -> Path:
    return path.with_name(f"{path.stem}_{ts}{suffix}")


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)


class ResultsWriter:
    """Appends each record durably as it arrives; `finalize` writes the canonical files.

    Thread-safe: graders finish on worker threads. A crash after `append` returned never loses
    that record: it is flushed and fsynced to the .partial file.
    """

    def __init__(self, json_path: Path, jsonl_path: Path, ts: str) -> None:
        self.json_path = _stamped(json_path, ts, ".json")
        self.jsonl_path = _stamped(jsonl_path, ts, ".jsonl")
        self.partial_path = self.jsonl_path.with_name(self.jsonl_path.name + ".partial")
        self.partial_path.parent.mkdir(parents=True, exist_ok=True)
        self.json_path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fh = self.partial_path.open("a", encoding="utf-8")
        self.records: list[Record] = []

    def append(self, record: Record) -> None:
        line = json_line(record) + "\n"
        with self._lock:
            self._fh.write(line)
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self.records.append(record)

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()

    def finalize(self, summary: dict[str, Any], order: list[str]) -> None:
        """Write the canonical JSONL (in manifest order) and the summary JSON, then drop the .partial."""
        self.close()
        rank = {item_id: i for i, item_id in enumerate(order)}
        ordered = sorted(self.records, key=lambda r: rank.get(r.item_id, len(rank)))
        atomic_write(self.jsonl_path, "".join(json_line(r) + "\n" for r in ordered))
        atomic_write(self.json_path, json.dumps(summary, indent=2, sort_keys=False) + "\n")
        self.partial_path.unlink(missing_ok=True)


def run_metadata(manifest: RunManifest, *, executor: str, started_at: str, finished_at: str) -> dict[str, Any]:
    grader = manifest.grader
    return {
        "run_id": manifest.run_id,
        "tool": f"wpbench-k8s {__version__}",
        "suite": manifest.suite,
        "mode": manifest.mode,
        "executor": executor,
        "runtime_isolation_boundary": "container_per_test" if executor == "docker" else "pod_per_test",
        "execution_isolation": "reset_per_test",
        "execution_concurrency": manifest.execution_concurrency,
        "runtime_image": grader.image,
        "runtime_image_id": grader.image_id,
        "grader": {
            "timeout_seconds": grader.timeout_seconds,
            "limits": grader.limits.model_dump(),
            "database": "sqlite",
        },
        "host": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "scoring_version": manifest.scoring_version,
        "seed": manifest.seed,
        "selected_test_ids": manifest.selected_test_ids,
        "dataset_source": manifest.dataset_source,
        "dataset_digest": manifest.dataset_digest,
        "manifest_digest": manifest.digest(),
        "models": [m.name for m in manifest.models],
        "skills": [{"name": s.name, "source": s.source, "sha256": s.sha256} for s in manifest.skills],
        "started_at": started_at,
        "finished_at": finished_at,
    }


def summarize(
    manifest: RunManifest,
    records: list[Record],
    *,
    executor: str,
    started_at: str,
    finished_at: str,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The summary JSON: metadata, overall scores, per model and per category."""
    summary: dict[str, Any] = {
        "metadata": run_metadata(manifest, executor=executor, started_at=started_at, finished_at=finished_at),
        "overall": aggregate(records),
        "models": aggregate_by_model(records),
    }
    if extra:
        summary.update(extra)
    return summary


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
