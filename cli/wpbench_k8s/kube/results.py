"""Results kept in the cluster: records in ConfigMaps owned by the run, one key per item.

The collector appends a batch of records with one write (a patch adding keys to the newest shard,
or a new shard when it would pass the size budget). A key is the item's, so writing the same record
twice never duplicates it: a restarted controller can always re-collect safely.

Who wrote a shard: the controller lists every shard in the run's status (`status.resultConfigMaps`, ...)
before it creates it, and only the controller may write the status subresource. Readers (the controller
after a restart, the verdict cache, `wpbench-k8s results`) take only listed shards; a ConfigMap that
carries a shard's labels or name without being listed is ignored and reported. (The chart's store
admission policy refuses such ConfigMaps from anyone but the controller in the first place.)
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from wpbench_k8s.kube.client import CONFIG_MAPS, Kube, to_dict
from wpbench_k8s.kube.names import COMPONENT_RESULTS, run_labels, run_selector
from wpbench_k8s.kube.objects import config_map, owner_reference
from wpbench_k8s.kube.payload import CHUNK_BUDGET, item_key
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
    cached: bool = False

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
            cached=record.cached,
        )


def record_key(item_id: str) -> str:
    """The key of an item's record in the run's result shards."""
    return f"{item_key(item_id)}.json"


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
    `listed`: the shard names the run's status lists (None: every shard found, for tests); `announce`
    lists a new shard's name (all names, in order) before the shard is created.
    """

    kube: Kube
    namespace: str
    run_name: str
    run_uid: str
    component: str
    budget: int = CHUNK_BUDGET
    shards: list[tuple[str, int]] = field(default_factory=list)  # (name, bytes) in order
    where: dict[str, str] = field(default_factory=dict)  # key -> shard name
    listed: Collection[str] | None = None
    announce: Callable[[list[str]], None] | None = None
    ignored: list[str] = field(default_factory=list)  # found by selector, not listed: never read

    @property
    def selector(self) -> str:
        return run_selector(self.run_name, self.component)

    def shard_name(self, index: int) -> str:
        return f"{self.run_name}-{self.component}-{index}"

    def scan(self) -> Iterator[tuple[str, str]]:
        """(key, value) of every shard, one shard in memory at a time; rebuilds the shard index.

        After a restart the cluster is the only memory. Exhaust the iterator before writing.
        """
        found: list[tuple[int, str, int]] = []
        self.where.clear()
        self.ignored.clear()
        for cm in self.kube.pages(CONFIG_MAPS, self.namespace, selector=self.selector, limit=1):
            name = cm["metadata"]["name"]
            if not trusted(cm, self.listed, self.run_uid):
                self.ignored.append(name)
                continue
            data: dict[str, str] = cm.get("data") or {}
            found.append((_shard_index(cm), name, sum(len(k) + len(v.encode()) for k, v in data.items())))
            for key, value in data.items():
                if key not in self.where:
                    self.where[key] = name
                    yield key, value
        self.shards[:] = [(name, size) for _, name, size in sorted(found)]

    def load(self) -> dict[str, str]:
        """Every key of every shard, in memory (for small components: generated candidates)."""
        return dict(self.scan())

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

    def remove(self, keys: Iterable[str]) -> int:
        """Delete keys from the shards that hold them (after `scan`): one write per shard. Returns writes."""
        by_shard: dict[str, dict[str, None]] = {}
        for key in keys:
            if key in self.where:
                by_shard.setdefault(self.where.pop(key), {})[key] = None  # null in a merge patch deletes the key
        for name, batch in by_shard.items():
            self.kube.patch(CONFIG_MAPS, self.namespace, name, {"data": batch})
        return len(by_shard)

    def _new_shard(self) -> None:
        name = self.shard_name(len(self.shards))
        if self.announce is not None:  # listed first: a shard that exists unlisted was never ours
            names = [n for n, _ in self.shards]
            self.announce([*names, name])
            self.listed = [*(self.listed or []), name]
        owner = owner_reference(self.run_name, self.run_uid)
        cm = config_map(name, self.namespace, run_labels(self.run_name, self.component), {}, owner)
        self.kube.ensure(CONFIG_MAPS, self.namespace, to_dict(cm))  # 409: a previous life of this controller made it
        self.shards.append((name, 0))

    def _write(self, batch: dict[str, str], size: int) -> int:
        name, used = self.shards[-1]
        body: dict[str, Any] = {"data": batch}
        self.kube.patch(CONFIG_MAPS, self.namespace, name, body)
        self.shards[-1] = (name, used + size)
        return 1


class ResultStore:
    """The records of one run: what is done, and the counts for its status (kept as records arrive,
    so a pass costs nothing per stored record)."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        run_name: str,
        run_uid: str,
        listed: Collection[str] | None = None,
        announce: Callable[[list[str]], None] | None = None,
        stamp: dict[str, Any] | None = None,
    ) -> None:
        self.shards = Shards(kube, namespace, run_name, run_uid, COMPONENT_RESULTS, listed=listed, announce=announce)
        self.stamp = stamp or {}  # fields every record stored gets (the suite as the controller verified it)
        self.tallies: dict[str, Tally] = {}  # item_id -> tally
        self.first_failure: str | None = None  # the first item stored with an error or infra_error
        self._counts: Counter[str] = Counter()
        self._correctness = 0.0

    def _add(self, item_id: str, tally: Tally) -> None:
        self.tallies[item_id] = tally
        for name, value in (
            ("passed", tally.passed),
            ("failed", tally.counted and not tally.passed),
            ("errors", tally.error),
            ("infraErrors", tally.infra),
            ("infraRetries", tally.infra_retries),
            ("counted", tally.counted),
            ("cached", tally.cached),
        ):
            self._counts[name] += int(value)
        if tally.counted:
            self._correctness += tally.correctness
        if self.first_failure is None and (tally.error or tally.infra):
            self.first_failure = item_id

    def load(self) -> None:
        self.tallies, self.first_failure, self._counts, self._correctness = {}, None, Counter(), 0.0
        for _, value in self.shards.scan():
            record = Record.model_validate_json(value)
            if record.item_id not in self.tallies:
                self._add(record.item_id, Tally.of(record))

    def reopen(self) -> int:
        """`requeue`: drop the stored records that ended infra_error, so their items are graded again.

        Returns:
            How many records were dropped (their keys are deleted; every other record stays as it is).
        """
        infra = [key for key, value in self.shards.scan()
                 if Record.model_validate_json(value).grader.status == "infra_error"]  # fmt: skip
        self.shards.remove(infra)
        return len(infra)

    def __contains__(self, item_id: object) -> bool:
        return item_id in self.tallies

    def append(self, records: Iterable[Record]) -> int:
        """Store records durably before anything else happens to their Jobs. Returns API writes."""
        fresh = {r.item_id: r.model_copy(update=self.stamp) if self.stamp else r
                 for r in records if r.item_id not in self.tallies}  # fmt: skip
        writes, _ = self.shards.put({record_key(i): fit_record(r) for i, r in fresh.items()})
        for item_id, record in fresh.items():
            self._add(item_id, Tally.of(record))
        return writes

    def summary(self) -> dict[str, Any]:
        """Counts for the run status."""
        c = self._counts
        return {
            "done": len(self.tallies),
            "passed": c["passed"],
            "failed": c["failed"],
            "errors": c["errors"],
            "infraErrors": c["infraErrors"],
            "infraRetries": c["infraRetries"],
            "cached": c["cached"],
            "score": round(self._correctness / c["counted"], 4) if c["counted"] else 0.0,
            "resultConfigMaps": [name for name, _ in self.shards.shards],
        }


def _shard_index(cm: dict[str, Any]) -> int:
    return int(cm["metadata"]["name"].rsplit("-", 1)[1])


def trusted(cm: dict[str, Any], listed: Collection[str] | None, run_uid: str | None) -> bool:
    """Whether a shard found by its labels is the run's: listed in the run's status and owned by the run."""
    if listed is None:
        return True
    owners = {o.get("uid") for o in cm["metadata"].get("ownerReferences") or []}
    return cm["metadata"]["name"] in listed and (run_uid is None or run_uid in owners)


def listed_shards(run: dict[str, Any], status_field: str = "resultConfigMaps") -> list[str]:
    """The shards the controller listed in the run's status (the only ones readers take)."""
    return list((run.get("status") or {}).get(status_field) or [])


def read_records(kube: Kube, namespace: str, run: dict[str, Any], ignored: list[str] | None = None) -> Iterator[Record]:
    """Every stored record of a run, one per item (the one reader of stored results), from the shards its
    status lists; the names of ConfigMaps that claim to be its shards without being listed go to `ignored`.

    Records stream: one shard (under 1 MiB) is held at a time, in the API server's order.
    """
    seen: set[str] = set()
    run_name, uid, listed = run["metadata"]["name"], run["metadata"].get("uid"), listed_shards(run)
    for cm in kube.pages(CONFIG_MAPS, namespace, selector=run_selector(run_name, COMPONENT_RESULTS), limit=1):
        if not trusted(cm, listed, uid):
            if ignored is not None:
                ignored.append(cm["metadata"]["name"])
            continue
        for value in (cm.get("data") or {}).values():
            record = Record.model_validate(json.loads(value))
            if record.item_id not in seen:
                seen.add(record.item_id)
                yield record
