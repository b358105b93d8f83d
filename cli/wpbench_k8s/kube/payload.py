"""The run manifest as ConfigMaps owned by the run, each under the 1 MiB object limit.

Chunk 0 holds the manifest header (everything but tests and items) and the index of tests; chunks
1..n hold tests and items, each with the index of its own items (`items.json`), so no ConfigMap grows
with the number of items (a 50,000-item run: about 220 chunks, chunk 0 a few KiB). Each item's
grader task is its own key, next to the item, so a grader pod mounts exactly one key of one ConfigMap.
Reassembly gives back the very manifest (same digest) submitted.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from wpbench_k8s.kube.names import short_hash
from wpbench_k8s.manifest import ManifestItem, RunManifest
from wpbench_runtime.contract import GradeTask

# ConfigMap data may hold 1 MiB; stay well under it for metadata and JSON escaping headroom.
CHUNK_BUDGET = 900 * 1024
HEADER_KEY = "manifest.json"
INDEX_KEY = "index.json"
CHUNK_INDEX_KEY = "items.json"  # [[item_id, key], ...] of the items in this chunk, in manifest order
SUITE_KEY = "suite.json"  # chunk 0: the suite table the run declares (`wpbench_k8s.verified`), outside the digest


class PayloadError(Exception):
    """The payload ConfigMaps are missing, too big, or do not add up to the submitted manifest."""


def payload_name(run_name: str, index: int) -> str:
    return f"{run_name}-payload-{index}"


def item_key(item_id: str) -> str:
    """A ConfigMap key for an item: readable, unique, `[-._a-zA-Z0-9]+`."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", item_id).strip("-.")[:80]
    return f"{slug}.{short_hash(item_id, 8)}"


def item_data_key(key: str) -> str:
    return f"item.{key}.json"


def task_data_key(key: str) -> str:
    return f"task.{key}.json"


def test_data_key(test_id: str) -> str:
    return f"test.{item_key(test_id)}.json"


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass
class Chunk:
    data: dict[str, str]
    size: int = 0

    def add(self, key: str, value: str) -> None:
        self.data[key] = value
        self.size += len(key) + len(value.encode())


def split_manifest(manifest: RunManifest, run_name: str, budget: int = CHUNK_BUDGET) -> list[dict[str, str]]:
    """The manifest as a list of ConfigMap `data` maps; index 0 is the header + index.

    Raises:
        PayloadError: one item (with its task) or one test alone exceeds the budget.
    """
    chunks: list[Chunk] = []

    local: list[list[list[str]]] = []  # per chunk: its items' [item_id, key]

    def place(entries: dict[str, str], index_entry: list[str] | None = None) -> int:
        size = sum(len(k) + len(v.encode()) for k, v in entries.items())
        extra = len(_dumps([index_entry])) + len(CHUNK_INDEX_KEY) if index_entry else 0
        if size + extra > budget:
            raise PayloadError(f"{', '.join(entries)}: {size} bytes exceed the {budget}-byte ConfigMap budget")
        if not chunks or chunks[-1].size + size + extra > budget:
            chunks.append(Chunk({}))
            local.append([])
        for k, v in entries.items():
            chunks[-1].add(k, v)
        if index_entry:
            local[-1].append(index_entry)
            chunks[-1].size += extra
        return len(chunks)  # chunk numbers start at 1; 0 is the header

    tests: dict[str, int] = {}
    for test_id, test in manifest.tests.items():
        tests[test_id] = place({test_data_key(test_id): _dumps(test)})
    for item in manifest.items:
        key = item_key(item.item_id)
        entries = {item_data_key(key): _dumps(item.model_dump(mode="json", exclude={"task"}))}
        if item.task is not None:
            entries[task_data_key(key)] = item.task.model_dump_json()
        place(entries, [item.item_id, key])
    for chunk, own in zip(chunks, local, strict=True):
        if own:
            chunk.data[CHUNK_INDEX_KEY] = _dumps(own)
    header = manifest.model_dump(mode="json", exclude={"items", "tests"})
    index = {"tests": tests, "chunks": len(chunks) + 1}
    head = Chunk({})
    head.add(HEADER_KEY, _dumps(header))
    head.add(INDEX_KEY, _dumps(index))
    if head.size > budget:
        raise PayloadError(f"manifest header and index take {head.size} bytes, more than one ConfigMap holds")
    return [head.data, *(c.data for c in chunks)]


@dataclass
class Payload:
    """A reassembled manifest plus where each item's task lives (for the Job's ConfigMap mount)."""

    manifest: RunManifest
    keys: dict[str, str]  # item_id -> item key
    chunk_of: dict[str, int]  # item_id -> chunk number

    def item(self, item_id: str) -> ManifestItem:
        return self._items[item_id]

    def __post_init__(self) -> None:
        self._items = {i.item_id: i for i in self.manifest.items}


def join_manifest(chunks: list[dict[str, str]], expected_digest: str | None = None) -> Payload:
    """Rebuild the manifest from its ConfigMaps' data (in chunk order) and check its digest.

    Raises:
        PayloadError: a chunk or key is missing, or the digest differs from `expected_digest`.
    """
    if not chunks or HEADER_KEY not in chunks[0] or INDEX_KEY not in chunks[0]:
        raise PayloadError("payload chunk 0 has no manifest header or index")
    header = json.loads(chunks[0][HEADER_KEY])
    index = json.loads(chunks[0][INDEX_KEY])
    if index["chunks"] != len(chunks):
        raise PayloadError(f"payload has {len(chunks)} chunks, the index says {index['chunks']}")
    try:
        tests = {tid: json.loads(chunks[n][test_data_key(tid)]) for tid, n in index["tests"].items()}
        items: list[ManifestItem] = []
        keys: dict[str, str] = {}
        chunk_of: dict[str, int] = {}
        own_items = (
            (item_id, key, n)
            for n in range(1, len(chunks))
            for item_id, key in json.loads(chunks[n].get(CHUNK_INDEX_KEY, "[]"))
        )
        for item_id, key, n in own_items:
            data = chunks[n]
            item = ManifestItem.model_validate_json(data[item_data_key(key)])
            if task_data_key(key) in data:
                item.task = GradeTask.model_validate_json(data[task_data_key(key)])
            items.append(item)
            keys[item_id] = key
            chunk_of[item_id] = n
    except (KeyError, IndexError) as exc:
        raise PayloadError(f"payload is missing {exc}") from exc
    manifest = RunManifest.model_validate({**header, "tests": tests, "items": items})
    if expected_digest and manifest.digest() != expected_digest:
        raise PayloadError(f"payload digest {manifest.digest()} differs from the run's {expected_digest}")
    return Payload(manifest, keys, chunk_of)


def _canonical(value: Any) -> str:
    """A value as `RunManifest.canonical_json` writes it (so digests can be built piece by piece)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _chunk_item(data: dict[str, str], key: str) -> ManifestItem:
    item = ManifestItem.model_validate_json(data[item_data_key(key)])
    if task_data_key(key) in data:
        item.task = GradeTask.model_validate_json(data[task_data_key(key)])
    return item


@dataclass
class PayloadIndex:
    """A run's manifest without its items in memory: the header and tests (a `RunManifest` whose `items`
    is empty), the items' ids in order, and where each lives. Items are read from their ConfigMap when
    asked for, a few chunks kept (`cached_chunks`), so memory does not grow with the run's size.
    """

    manifest: RunManifest  # header and tests; items=[]
    order: list[str]  # item ids, manifest order
    keys: dict[str, str]  # item_id -> item key
    chunk_of: dict[str, int]  # item_id -> chunk number
    read_chunk: Callable[[int], dict[str, str]]
    cached_chunks: int = 8
    _chunks: OrderedDict[int, dict[str, str]] = field(default_factory=OrderedDict)

    @property
    def total(self) -> int:
        return len(self.order)

    def items(self) -> Iterator[ManifestItem]:
        """Every item in manifest order, read chunk after chunk (each chunk once)."""
        for item_id in self.order:
            yield self.item(item_id)

    def item(self, item_id: str) -> ManifestItem:
        """The item as submitted (with its task). Raises PayloadError when its chunk no longer holds it."""
        n = self.chunk_of[item_id]
        data = self._chunks.get(n)
        if data is None:
            data = self.read_chunk(n)
            self._chunks[n] = data
            while len(self._chunks) > self.cached_chunks:
                self._chunks.popitem(last=False)
        else:
            self._chunks.move_to_end(n)
        try:
            return _chunk_item(data, self.keys[item_id])
        except KeyError as exc:
            raise PayloadError(f"payload chunk {n} is missing {exc}") from exc


def index_payload(
    read_chunk: Callable[[int], dict[str, str]], expected_digest: str | None = None, *, cached_chunks: int = 8
) -> PayloadIndex:
    """Read the payload one chunk at a time, check its digest as it streams, keep only the index.

    The digest is the one `RunManifest.digest` computes over the whole manifest, built from the
    canonical JSON of the header, each item in order, then the tests, so the check needs one chunk
    in memory at a time.

    Raises:
        PayloadError: a chunk or key is missing, or the digest differs from `expected_digest`.
        Whatever `read_chunk` raises (a ConfigMap not there yet).
    """
    head = read_chunk(0)
    if HEADER_KEY not in head or INDEX_KEY not in head:
        raise PayloadError("payload chunk 0 has no manifest header or index")
    header = json.loads(head[HEADER_KEY])
    index = json.loads(head[INDEX_KEY])
    test_chunks: dict[int, list[str]] = {}
    for test_id, n in index["tests"].items():
        test_chunks.setdefault(n, []).append(test_id)
    hasher = hashlib.sha256()
    tests: dict[str, Any] = {}
    order: list[str] = []
    keys: dict[str, str] = {}
    chunk_of: dict[str, int] = {}
    # The canonical JSON's top-level keys are sorted: those before "items", the items, those after
    # (the tests among them, known only once every chunk was read).
    skeleton = RunManifest.model_validate({**header, "tests": {}, "items": []}).model_dump(mode="json")
    top = sorted(skeleton)
    before = [k for k in top if k < "items"]
    hasher.update(("{" + ",".join(f"{_canonical(k)}:{_canonical(skeleton[k])}" for k in before)).encode())
    hasher.update(b',"items":[' if before else b'"items":[')
    first = True
    try:
        for n in range(1, int(index["chunks"])):
            data = read_chunk(n)
            for test_id in test_chunks.get(n, []):
                tests[test_id] = json.loads(data[test_data_key(test_id)])
            for item_id, key in json.loads(data.get(CHUNK_INDEX_KEY, "[]")):
                item = _chunk_item(data, key)
                hasher.update(("" if first else ",").encode() + _canonical(item.model_dump(mode="json")).encode())
                first = False
                order.append(item_id)
                keys[item_id] = key
                chunk_of[item_id] = n
            del data
    except (KeyError, IndexError) as exc:
        raise PayloadError(f"payload is missing {exc}") from exc
    if set(tests) != set(index["tests"]):
        raise PayloadError(f"payload is missing tests {sorted(set(index['tests']) - set(tests))[:5]}")
    manifest = RunManifest.model_validate({**header, "tests": tests, "items": []})
    full = manifest.model_dump(mode="json")
    after = [k for k in sorted(full) if k > "items"]
    hasher.update(("]" + "".join(f",{_canonical(k)}:{_canonical(full[k])}" for k in after) + "}").encode())
    digest = "sha256:" + hasher.hexdigest()
    if expected_digest and digest != expected_digest:
        raise PayloadError(f"payload digest {digest} differs from the run's {expected_digest}")
    return PayloadIndex(manifest, order, keys, chunk_of, read_chunk, cached_chunks)
