import json
from pathlib import Path

from wpbench_k8s.config import load_config
from wpbench_k8s.outputs import ResultsWriter
from wpbench_k8s.pipeline import plan_run
from wpbench_k8s.records import Record, RecordGrader
from wpbench_k8s.summary import CacheFacts, RunFacts, build_summary

MINI = Path(__file__).resolve().parents[1] / "fixtures" / "suites" / "mini"


def rec(i: int) -> Record:
    return Record(
        run_id="r",
        item_id=f"i{i}",
        test_id=f"t{i}",
        suite="s",
        type="execution",
        category="c",
        mode="reference",
        model="m",
        grader=RecordGrader(status="passed"),
    )


def test_records_stream_to_partial_and_finalize_in_manifest_order(tmp_path):
    w = ResultsWriter(tmp_path / "out" / "results.json", tmp_path / "out" / "results.jsonl", "20260101T000000Z")
    w.append(rec(2))
    assert w.partial_path.name == "results_20260101T000000Z.jsonl.partial"
    # Durable before the run ends: another reader sees the line now.
    assert json.loads(w.partial_path.read_text().splitlines()[0])["item_id"] == "i2"
    assert not w.jsonl_path.exists() and not w.json_path.exists()
    w.append(rec(1))
    manifest = plan_run(load_config(None, {"dataset.path": str(MINI)}), "reference")
    facts = RunFacts(executor="docker", started_at="s", finished_at="f", cache=CacheFacts(enabled=False))
    summary = build_summary(manifest, w.records, facts)
    w.finalize(summary, ["i1", "i2"])
    assert not w.partial_path.exists()
    assert [json.loads(x)["item_id"] for x in w.jsonl_path.read_text().splitlines()] == ["i1", "i2"]
    assert w.json_path.read_text() == summary.to_json()
    assert json.loads(w.json_path.read_text())["overall"]["records"] == 2


def test_verdict_key_changes_with_what_decides_a_verdict_and_nothing_else():
    from wpbench_k8s.cache import verdict_key
    from wpbench_k8s.manifest import GraderLimits, GraderSpec, RunManifest
    from wpbench_runtime.contract import GradeTask

    def manifest(**grader) -> RunManifest:
        spec = GraderSpec(image_id="sha256:aa", **grader)
        return RunManifest(run_id="r", suite="s", dataset_source="x", dataset_digest="d", mode="reference", seed=1,
                           selected_test_ids=[], grader=spec, items=[])  # fmt: skip

    task = GradeTask(test_id="t", code="return 1;")
    base = verdict_key(manifest(), task)
    assert base == verdict_key(manifest().model_copy(update={"run_id": "other", "seed": 9}), task)
    assert base != verdict_key(manifest(), task.model_copy(update={"code": "return 2;"}))  # one byte of candidate
    assert base != verdict_key(manifest(limits=GraderLimits(memory_mb=256)), task)
    assert base != verdict_key(manifest(timeout_seconds=10), task)
    other_image = manifest()
    other_image.grader = other_image.grader.model_copy(update={"image_id": "sha256:bb"})
    assert base != verdict_key(other_image, task)
    assert base != verdict_key(manifest().model_copy(update={"profile": "upstream"}), task)
