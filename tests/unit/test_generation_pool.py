"""Model calls run beside the reconcile worker, bounded: a slow provider holds only its own items."""

from __future__ import annotations

import threading

from wpbench_controller.generation import Generated, GenerationPool
from wpbench_k8s.manifest import ManifestItem, RunManifest


def item(item_id: str) -> ManifestItem:
    return ManifestItem(item_id=item_id, test_id="t", model="m")


def test_a_slow_call_holds_only_its_own_item_and_each_return_requeues_the_run():
    release = threading.Event()
    requeued: list[tuple[str, str]] = []

    def call(manifest: RunManifest, it: ManifestItem) -> Generated:
        if it.item_id == "slow":
            release.wait(30)
        return Generated(item=it)

    pool = GenerationPool(2, notify=requeued.append, call=call)
    manifest = RunManifest.model_construct()
    pool.start(("ns", "run"), "uid", manifest, item("slow"))
    pool.start(("ns", "run"), "uid", manifest, item("fast"))
    pool.start(("ns", "run"), "uid", manifest, item("fast"))  # started once only
    for _ in range(300):
        if pool.finished("uid") == ["fast"]:
            break
        threading.Event().wait(0.01)
    assert pool.finished("uid") == ["fast"] and pool.pending("uid", "slow")
    got = pool.take("uid", "fast")
    assert isinstance(got, Generated) and got.item.item_id == "fast"
    assert pool.take("uid", "fast") is None  # taken once
    for _ in range(300):
        if requeued:
            break
        threading.Event().wait(0.01)
    assert requeued == [("ns", "run")]
    assert pool.stop_run("uid") == 1  # the slow call runs on; nothing new starts for the run
    release.set()
    pool.shutdown()


def test_a_failing_call_is_handed_back_as_its_exception():
    def call(manifest: RunManifest, it: ManifestItem) -> Generated:
        raise RuntimeError("provider down")

    pool = GenerationPool(1, call=call)
    pool.start(("ns", "run"), "uid", RunManifest.model_construct(), item("a"))
    for _ in range(300):
        if pool.finished("uid"):
            break
        threading.Event().wait(0.01)
    got = pool.take("uid", "a")
    assert isinstance(got, RuntimeError) and "provider down" in str(got)
    pool.shutdown()
