"""Results kept in the cluster: records in ConfigMaps owned by the run, one key per item.

The collector appends a batch of records with one write (a patch adding keys to the newest shard,
or a new shard when it would pass the size budget). A key is the item's, so writing the same record
twice never duplicates it: a restarted controller can always re-collect safely.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s

from wpbench_controller.objects import COMPONENT_RESULTS, config_map, owner_reference, run_labels
from wpbench_controller.payload import CHUNK_BUDGET, item_key
from wpbench_k8s.executor.kubernetes import LABEL_RUN, label_value, read_json, to_dict
from wpbench_k8s.records import Record, json_line
from wpbench_k8s.scoring import counted

TRUNCATED = "\n[truncated: record too large for cluster storage]"


@dataclass(frozen=True)
class Tally:
    """What the run status needs from one record (the controller keeps only this in memory)."""

    passed: bool
    counted: bool
    correctness: float
    error: bool
    infra: bool
    infra_retries: int

    @classmethod
    def of(cls, record: Record) -> Tally:
        infra = record.grader.status == "infra_error"
        return cls(
            passed=record.scores.execution_pass,
            counted=bool(counted([record])),
            correctness=record.scores.correctness,
            error=record.error is not None and not infra,
            infra=infra,
            infra_retries=record.grader.infra_retries,
        )


def fit_record(record: Record, budget: int = CHUNK_BUDGET // 2) -> str:
    """The record's JSON, with grader stdout/stderr cut when it alone would crowd a shard."""
    text = json_line(record)
    if len(text.encode()) <= budget:
        return text
    grader = record.grader.model_copy()
    keep = max(1024, budget // 8)
    grader.stdout = grader.stdout[:keep] + TRUNCATED if len(grader.stdout) > keep else grader.stdout
    grader.stderr = grader.stderr[:keep] + TRUNCATED if len(grader.stderr) > keep else grader.stderr
    if grader.verdict is not None:
        v = grader.verdict
        grader.verdict = v.model_copy(
            update={
                "stdout": v.stdout[:keep] + TRUNCATED if len(v.stdout) > keep else v.stdout,
                "stderr": v.stderr[:keep] + TRUNCATED if len(v.stderr) > keep else v.stderr,
            }
        )
    return json_line(record.model_copy(update={"grader": grader}))


@dataclass
class Shards:
    """ConfigMaps `<run>-<component>-N` owned by the run, filled in order under the size budget.

    Keys are never rewritten with other content, so a write repeated after a crash changes nothing.
    """

    core: Any
    namespace: str
    run_name: str
    run_uid: str
    component: str
    budget: int = CHUNK_BUDGET
    shards: list[tuple[str, int]] = field(default_factory=list)  # (name, bytes) in order
    where: dict[str, str] = field(default_factory=dict)  # key -> shard name

    @property
    def selector(self) -> str:
        return f"{LABEL_RUN}={label_value(self.run_name)},app.kubernetes.io/component={self.component}"

    def shard_name(self, index: int) -> str:
        return f"{self.run_name}-{self.component}-{index}"

    def load(self) -> dict[str, str]:
        """Every key of every shard (after a restart the cluster is the only memory)."""
        listed = read_json(
            self.core.list_namespaced_config_map(self.namespace, label_selector=self.selector, _preload_content=False)
        )
        merged: dict[str, str] = {}
        self.shards.clear()
        self.where.clear()
        for cm in sorted(listed["items"], key=lambda c: int(c["metadata"]["name"].rsplit("-", 1)[1])):
            data: dict[str, str] = cm.get("data") or {}
            self.shards.append((cm["metadata"]["name"], sum(len(k) + len(v.encode()) for k, v in data.items())))
            for key, value in data.items():
                merged.setdefault(key, value)
                self.where.setdefault(key, cm["metadata"]["name"])
        return merged

    def put(self, entries: dict[str, str]) -> tuple[int, dict[str, str]]:
        """Store entries durably: one write per shard touched (plus one per new shard).

        Returns:
            (API writes, key -> shard name).
        """
        writes = 0
        where: dict[str, str] = {}
        batch: dict[str, str] = {}
        batch_size = 0
        for key, value in entries.items():
            size = len(key) + len(value.encode())
            current = self.shards[-1][1] if self.shards else self.budget + 1
            if current + batch_size + size > self.budget:
                if batch:
                    writes += self._write(batch, batch_size)
                    batch, batch_size = {}, 0
                self._new_shard()
                writes += 1
            batch[key] = value
            batch_size += size
            where[key] = self.where[key] = self.shards[-1][0]
        if batch:
            writes += self._write(batch, batch_size)
        return writes, where

    def _new_shard(self) -> None:
        name = self.shard_name(len(self.shards))
        owner = owner_reference(self.run_name, self.run_uid)
        cm = config_map(name, self.namespace, run_labels(self.run_name, self.component), {}, owner)
        try:
            self.core.create_namespaced_config_map(self.namespace, to_dict(cm), _preload_content=False)
        except k8s.ApiException as exc:
            if exc.status != 409:  # already there: a previous life of this controller made it
                raise
        self.shards.append((name, 0))

    def _write(self, batch: dict[str, str], size: int) -> int:
        name, used = self.shards[-1]
        body: dict[str, Any] = {"data": batch}
        self.core.patch_namespaced_config_map(
            name, self.namespace, body, _content_type="application/merge-patch+json", _preload_content=False
        )
        self.shards[-1] = (name, used + size)
        return 1


class ResultStore:
    """The records of one run: what is done, and the counts for its status."""

    def __init__(self, core: Any, namespace: str, run_name: str, run_uid: str) -> None:
        self.shards = Shards(core, namespace, run_name, run_uid, COMPONENT_RESULTS)
        self.tallies: dict[str, Tally] = {}  # item_id -> tally

    def load(self) -> None:
        self.tallies = {}
        for value in self.shards.load().values():
            record = Record.model_validate_json(value)
            self.tallies[record.item_id] = Tally.of(record)

    def __contains__(self, item_id: object) -> bool:
        return item_id in self.tallies

    def append(self, records: Iterable[Record]) -> int:
        """Store records durably before anything else happens to their Jobs. Returns API writes."""
        fresh = {r.item_id: r for r in records if r.item_id not in self.tallies}
        writes, _ = self.shards.put({f"{item_key(i)}.json": fit_record(r) for i, r in fresh.items()})
        for item_id, record in fresh.items():
            self.tallies[item_id] = Tally.of(record)
        return writes

    def summary(self) -> dict[str, Any]:
        """Counts for the run status."""
        tallies = list(self.tallies.values())
        scored = [t.correctness for t in tallies if t.counted]
        return {
            "done": len(tallies),
            "passed": sum(t.passed for t in tallies),
            "failed": sum(1 for t in tallies if t.counted and not t.passed),
            "errors": sum(t.error for t in tallies),
            "infraErrors": sum(t.infra for t in tallies),
            "infraRetries": sum(t.infra_retries for t in tallies),
            "score": round(sum(scored) / len(scored), 4) if scored else 0.0,
            "resultConfigMaps": [name for name, _ in self.shards.shards],
        }


def read_records(core: Any, namespace: str, run_name: str) -> list[Record]:
    """Every stored record of a run (shards in order, one record per item)."""
    selector = f"{LABEL_RUN}={label_value(run_name)},app.kubernetes.io/component={COMPONENT_RESULTS}"
    listed = read_json(core.list_namespaced_config_map(namespace, label_selector=selector, _preload_content=False))
    seen: dict[str, Record] = {}
    for cm in sorted(listed["items"], key=lambda c: int(c["metadata"]["name"].rsplit("-", 1)[1])):
        for value in (cm.get("data") or {}).values():
            record = Record.model_validate(json.loads(value))
            seen.setdefault(record.item_id, record)
    return list(seen.values())
