"""`run --resume`: continue an interrupted or partly failed run from its result files.

The run's manifest travels beside its records (`results_<ts>.jsonl.manifest`, written when the run
starts). Resuming keeps every record with a final verdict, grades the items that have none or
ended as infra_error, and writes the same pair of files an uninterrupted run writes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from wpbench_k8s.errors import InputError, first_error
from wpbench_k8s.manifest import RunManifest
from wpbench_k8s.outputs import sidecar_path
from wpbench_k8s.records import Record

SIDECAR_VERSION = "1"


def sidecar_doc(manifest: RunManifest, *, summary_path: Path, jsonl_path: Path, executor: str,
                started_at: str, cache_dir: Path | None = None) -> dict[str, Any]:  # fmt: skip
    """What `--resume` needs to finish the run as it was started (`cache_dir`: the verdict cache it used,
    None when it ran without one: a resume keeps that choice)."""
    return {
        "sidecar_version": SIDECAR_VERSION,
        "manifest_digest": manifest.digest(),
        "summary_path": os.path.relpath(summary_path, jsonl_path.parent),
        "executor": executor,
        "started_at": started_at,
        "cache": {"enabled": cache_dir is not None, "dir": str(cache_dir) if cache_dir else None},
        "manifest": manifest.model_dump(mode="json"),
    }


@dataclass
class ResumeState:
    manifest: RunManifest
    kept: list[Record]  # records with a final verdict, in the order they were written
    jsonl_path: Path
    summary_path: Path
    executor: str
    started_at: str
    source: Path
    # The verdict cache the run used: None when the sidecar predates the setting (the defaults apply).
    cache_enabled: bool | None = None
    cache_dir: Path | None = None

    def remaining(self) -> list[str]:
        done = {r.item_id for r in self.kept}
        return [i.item_id for i in self.manifest.items if i.item_id not in done]


def _read_records(path: Path, run_id: str) -> dict[str, Record]:
    """Records by item id (a later line wins). A torn last line (the writer was killed) is skipped."""
    found: dict[str, Record] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not a results file (not UTF-8)") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from exc
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = Record.model_validate_json(line)
        except ValidationError as exc:
            if number == len(lines):
                continue
            field, message = first_error(exc)
            raise InputError(f"{path}: line {number}: {field or 'record'}: {message}") from exc
        if record.run_id != run_id:
            raise InputError(f"{path}: line {number}: run_id {record.run_id!r} is not this run's ({run_id!r})")
        found[record.item_id] = record
    return found


def load_resume(path: Path) -> ResumeState:
    """Read an interrupted (.jsonl.partial) or finished (.jsonl) run back.

    Raises:
        InputError: the file is not a run's results, its manifest is missing or damaged.
    """
    name = path.name
    if not path.is_file():  # first: a missing file is the likelier mistake than its name
        raise InputError(f"--resume {path}: no such file" + (" (a directory)" if path.is_dir() else ""))
    if name.endswith(".jsonl.partial"):
        jsonl = path.with_name(name.removesuffix(".partial"))
    elif name.endswith(".jsonl"):
        jsonl = path
    else:
        raise InputError(
            f"--resume {path}: not a run's records file; give the results_<ts>.jsonl.partial (or finished "
            "results_<ts>.jsonl) a run wrote beside its summary"
        )
    side = sidecar_path(jsonl)
    try:
        doc = json.loads(side.read_text(encoding="utf-8"))
        manifest = RunManifest.model_validate(doc["manifest"])
    except FileNotFoundError as exc:
        raise InputError(f"--resume {path}: {side} is missing (it holds the run's manifest)") from exc
    except OSError as exc:
        raise InputError(f"{side}: cannot read: {exc.strerror}") from exc
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise InputError(f"{side}: not a readable run file: {' '.join(str(exc).split())[:300]}") from exc
    if manifest.digest() != doc.get("manifest_digest"):
        raise InputError(f"{side}: manifest_digest does not match the manifest it holds (the file was edited)")
    records: dict[str, Record] = {}
    partial = jsonl.with_name(jsonl.name + ".partial")
    for source in (jsonl, partial):  # the .partial is the newer of the two when both exist
        if source.exists():
            records.update(_read_records(source, manifest.run_id))
    wanted = {i.item_id for i in manifest.items}
    kept = [r for r in records.values() if r.item_id in wanted and r.grader.status != "infra_error"]
    return ResumeState(
        manifest=manifest,
        kept=kept,
        jsonl_path=jsonl,
        summary_path=(jsonl.parent / doc.get("summary_path", jsonl.with_suffix(".json").name)).resolve(),
        executor=str(doc.get("executor", "docker")),
        started_at=str(doc.get("started_at", "")),
        source=path,
        **_cache_setting(doc.get("cache")),
    )


def _cache_setting(stored: Any) -> dict[str, Any]:
    if not isinstance(stored, dict) or not isinstance(stored.get("enabled"), bool):
        return {}
    folder = stored.get("dir")
    return {"cache_enabled": stored["enabled"], "cache_dir": Path(folder) if isinstance(folder, str) else None}


def check_same_manifest(state: ResumeState, planned: RunManifest, given: list[str] | None = None) -> None:
    """Refuse a resume whose flags (`given`, as typed) plan a different run than the one being resumed.

    Run id, creation time, the resolved image id and concurrency are the run's own, not a choice
    of what to grade, so they are taken from the stored manifest before comparing digests.
    """
    stored = state.manifest
    same_run = planned.model_copy(
        update={
            "run_id": stored.run_id,
            "created_at": stored.created_at,
            "execution_concurrency": stored.execution_concurrency,
            "grader": planned.grader.model_copy(update={"image_id": stored.grader.image_id}),
        }
    )
    if same_run.digest() != stored.digest():
        differs = [k for k in ("suite", "dataset_digest", "mode", "seed", "selected_test_ids", "grader", "models",
                               "skills", "tests", "items") if getattr(same_run, k) != getattr(stored, k)]  # fmt: skip
        flags = " ".join(given or []) or "these flags"
        raise InputError(
            f"--resume {state.source} continues the run as it was planned; {flags} would plan a different run "
            f"(it differs in: {', '.join(differs) or 'other fields'}: {len(same_run.items)} item(s) against the run's "
            f"{len(stored.items)}). Resume with --resume alone (--execution-concurrency may change), or start a new run"
        )
