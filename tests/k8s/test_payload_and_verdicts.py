"""Manifest chunking under the object limit; names and labels."""

from __future__ import annotations

import pytest

from wpbench_k8s.config import load_config
from wpbench_k8s.kube.names import dns_label, job_name, label_value
from wpbench_k8s.kube.payload import CHUNK_BUDGET, PayloadError, join_manifest, split_manifest
from wpbench_k8s.pipeline import plan_run


@pytest.fixture
def manifest(mini_suite):
    return plan_run(load_config(None, {"dataset.path": str(mini_suite)}), "exploits")


def test_manifest_round_trips_through_chunks_with_the_same_digest(manifest):
    chunks = split_manifest(manifest, "r", budget=4096)
    assert len(chunks) > 2  # forced to spread
    for data in chunks:
        assert sum(len(k) + len(v.encode()) for k, v in data.items()) <= 4096
    payload = join_manifest(chunks, manifest.digest())
    assert payload.manifest.digest() == manifest.digest()
    graded = [i for i in manifest.items if i.task is not None]  # knowledge baselines need no Job
    assert graded and len(graded) < len(manifest.items)
    for item in graded:  # each item's task sits in the chunk the Job mounts
        assert f"task.{payload.keys[item.item_id]}.json" in chunks[payload.chunk_of[item.item_id]]


def test_default_budget_stays_under_one_mebibyte(manifest):
    assert CHUNK_BUDGET < 1024 * 1024
    big = manifest.model_copy(update={"items": [i.model_copy(update={"item_id": f"{i.item_id}-{n}"})
                                                 for n in range(150) for i in manifest.items]})  # fmt: skip
    chunks = split_manifest(big, "r")
    assert len(chunks) >= 2
    assert join_manifest(chunks, big.digest()).manifest.digest() == big.digest()


def test_tampered_or_missing_payload_is_refused(manifest):
    chunks = split_manifest(manifest, "r")
    with pytest.raises(PayloadError, match="digest"):
        join_manifest(chunks, "sha256:" + "0" * 64)
    with pytest.raises(PayloadError):
        join_manifest(chunks[:1], manifest.digest())


def test_item_too_large_for_a_config_map(manifest):
    with pytest.raises(PayloadError, match="budget"):
        split_manifest(manifest, "r", budget=200)


def test_names_and_labels_are_valid_and_deterministic():
    long_id = "wpk-some-really-long-test-identifier--openai-gpt-4o-mini-2024-07-18--with-skills--r3"
    name = job_name("wpb-0123456789ab", long_id)
    assert name == job_name("wpb-0123456789ab", long_id) and len(name) <= 63
    assert dns_label(name) == name
    assert job_name("r", "a") != job_name("r", "b")
    assert job_name("r", "a", 1) != job_name("r", "a", 2) and len(job_name("r" * 40, long_id, 10)) <= 63
    assert len(label_value("openai/gpt-4o" * 10)) <= 63 and "/" not in label_value("openai/gpt-4o")


def test_chunk_zero_does_not_grow_with_the_number_of_items(manifest):
    """The item index lives beside the items: 300 copies of the items leave chunk 0 as small as 3 do."""
    from wpbench_k8s.kube.payload import HEADER_KEY, INDEX_KEY

    def chunk_zero_size(copies: int) -> int:
        items = [i.model_copy(update={"item_id": f"{i.item_id}-{n}"}) for n in range(copies) for i in manifest.items]
        big = manifest.model_copy(update={"items": items})
        chunks = split_manifest(big, "r")
        payload = join_manifest(chunks, big.digest())
        assert [i.item_id for i in payload.manifest.items] == [i.item_id for i in items]
        return len(chunks[0][HEADER_KEY]) + len(chunks[0][INDEX_KEY])

    # Only the digits of the item and chunk counts may grow, never a per-item entry.
    small, large = chunk_zero_size(3), chunk_zero_size(300)
    assert small <= large < small + 16


def test_streamed_index_checks_the_digest_chunk_by_chunk_and_reads_items_on_demand(manifest):
    """The controller's view: one chunk in memory at a time, the same digest, each item as submitted."""
    from wpbench_k8s.kube.payload import index_payload

    big = manifest.model_copy(update={"items": [i.model_copy(update={"item_id": f"{i.item_id}-{n}"})
                                                 for n in range(40) for i in manifest.items]})  # fmt: skip
    chunks = split_manifest(big, "r", budget=16 * 1024)
    assert len(chunks) > 5
    reads: list[int] = []

    def read(n: int) -> dict[str, str]:
        reads.append(n)
        return chunks[n]

    index = index_payload(read, big.digest(), cached_chunks=2)
    assert reads == list(range(len(chunks)))  # every chunk once, in order
    assert index.manifest.items == [] and index.manifest.tests == big.tests
    assert index.order == [i.item_id for i in big.items] and index.total == len(big.items)
    reads.clear()
    for item in big.items:
        assert index.item(item.item_id) == item
    assert len(reads) == len(chunks) - 1  # sequential access: each item chunk read once, two kept
    with pytest.raises(PayloadError, match="digest"):
        index_payload(read, manifest.digest())
    tampered = [dict(c) for c in chunks]
    key = next(k for k in tampered[-1] if k.startswith("item."))
    tampered[-1][key] = tampered[-1][key].replace('"model":"', '"model":"x', 1)
    with pytest.raises(PayloadError, match="digest"):
        index_payload(lambda n: tampered[n], big.digest())
    with pytest.raises(PayloadError):
        index_payload(lambda n: chunks[n] if n < 3 else {}, big.digest())
