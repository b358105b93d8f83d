import json

from wpbench_k8s.outputs import ResultsWriter
from wpbench_k8s.records import Record, RecordGrader


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
    w.finalize({"ok": True}, ["i1", "i2"])
    assert not w.partial_path.exists()
    assert [json.loads(x)["item_id"] for x in w.jsonl_path.read_text().splitlines()] == ["i1", "i2"]
    assert json.loads(w.json_path.read_text()) == {"ok": True}
