"""Result files: records stream to `<stem>_<ts>.jsonl.partial`; a finished run gets the canonical
`<stem>_<ts>.jsonl` and `<stem>_<ts>.json`. A .partial file is by definition an incomplete run.
Beside them `<stem>_<ts>.jsonl.manifest` keeps the run's manifest, so `run --resume` can continue it."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wpbench_k8s.errors import OutputWriteError
from wpbench_k8s.records import Record, json_line
from wpbench_k8s.summary.model import RunSummary


def run_timestamp(now: datetime | None = None) -> str:
    return (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")


def _stamped(path: Path, ts: str, suffix: str) -> Path:
    return path.with_name(f"{path.stem}_{ts}{suffix}")


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):  # e.g. the parent is a file: there is no tmp to remove
            tmp.unlink(missing_ok=True)
        raise _write_error(path, exc) from exc


def _write_error(path: Path, exc: OSError) -> OutputWriteError:
    why = os.strerror(exc.errno) if exc.errno else str(exc)
    return OutputWriteError(f"cannot write {path}: {why}")


def sidecar_path(jsonl_path: Path) -> Path:
    """`results_<ts>.jsonl.manifest` beside `results_<ts>.jsonl` (and its .partial): JSON, named so that
    globs for a run's two result files do not match it."""
    return jsonl_path.with_name(jsonl_path.name.removesuffix(".partial") + ".manifest")


class ResultsWriter:
    """Appends each record durably as it arrives; `finalize` writes the canonical files.

    Thread-safe: graders finish on worker threads. A crash after `append` returned never loses
    that record: it is flushed and fsynced to the .partial file.
    """

    def __init__(self, json_path: Path, jsonl_path: Path, ts: str | None = None, *,
                 kept: list[Record] | None = None) -> None:  # fmt: skip
        """`ts` stamps new paths; without it the paths are used as given (a resumed run). `kept`
        records (a resumed run's final ones) start the .partial file afresh. Paths are kept absolute, so
        every message names a file the same way wherever it is read."""
        json_path, jsonl_path = json_path.absolute(), jsonl_path.absolute()
        self.json_path = _stamped(json_path, ts, ".json") if ts else json_path
        self.jsonl_path = _stamped(jsonl_path, ts, ".jsonl") if ts else jsonl_path
        self.partial_path = self.jsonl_path.with_name(self.jsonl_path.name + ".partial")
        self.sidecar_path = sidecar_path(self.jsonl_path)
        try:
            self.partial_path.parent.mkdir(parents=True, exist_ok=True)
            self.json_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _write_error(self.partial_path.parent, exc) from exc
        self._lock = threading.Lock()
        self.records: list[Record] = list(kept or [])
        if kept is not None:
            atomic_write(self.partial_path, "".join(json_line(r) + "\n" for r in self.records))
        try:
            self._fh = self.partial_path.open("ab")
        except OSError as exc:
            raise _write_error(self.partial_path, exc) from exc

    def write_sidecar(self, doc: dict[str, Any]) -> None:
        atomic_write(self.sidecar_path, json.dumps(doc, sort_keys=True) + "\n")

    def append(self, record: Record) -> None:
        """Append one record durably. A failed write leaves the .partial exactly as before it.

        Raises:
            OutputWriteError: naming the file (disk full, read-only, removed directory).
        """
        line = (json_line(record) + "\n").encode()
        with self._lock:
            fd = self._fh.fileno()
            size = os.fstat(fd).st_size
            try:
                if os.write(fd, line) != len(line):  # a short write to a regular file: no space left
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                os.fsync(fd)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)  # no half line: the .partial stays readable and resumable
                raise _write_error(self.partial_path, exc) from exc
            self.records.append(record)

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()

    def finalize(self, summary: RunSummary, order: list[str]) -> None:
        """Write the canonical JSONL (in manifest order) and the summary JSON, then drop the .partial."""
        self.close()
        rank = {item_id: i for i, item_id in enumerate(order)}
        ordered = sorted(self.records, key=lambda r: rank.get(r.item_id, len(rank)))
        atomic_write(self.jsonl_path, "".join(json_line(r) + "\n" for r in ordered))
        atomic_write(self.json_path, summary.to_json())
        self.partial_path.unlink(missing_ok=True)


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
