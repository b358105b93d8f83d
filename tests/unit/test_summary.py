"""The run summary: the document `build_summary` writes validates against the committed schema, carries
exactly the numbers of the scoring and comparison functions in their key order (what upstream's notebook
and the report read), reads back to the same bytes, and refuses a damaged file naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel, ValidationError

from wpbench_k8s.config import load_config
from wpbench_k8s.manifest import RunManifest, SkillSpec
from wpbench_k8s.models import compare
from wpbench_k8s.pipeline import plan_run
from wpbench_k8s.records import Record, Usage
from wpbench_k8s.scoring import (
    GraderVerdict,
    InfraFailure,
    KnowledgeAnswer,
    aggregate,
    aggregate_by_model,
    build_record,
)
from wpbench_k8s.summary import CacheFacts, ClusterFacts, RunFacts, RunSummary, build_summary
from wpbench_k8s.summary import schema as summary_schema
from wpbench_runtime import schema
from wpbench_runtime.contract import AssertionResult, Scores, Verdict

MINI = Path(__file__).resolve().parents[1] / "fixtures" / "suites" / "mini"
SCHEMA = json.loads((schema.SCHEMA_DIR / "run-summary.schema.json").read_text())
CLUSTER = ClusterFacts(namespace="ns", run="r1", infra_retries=2, requeued=1, suite_digest="sha256:ab",
                       suite_verified=True, grader_image_id="sha256:kubelet")  # fmt: skip
RUNS = [(p, m) for p in ("wpbench", "upstream", "upstream-v2") for m in ("models", "reference", "exploits")]


def _verdict(test_id: str, passed: bool, status: str | None = None) -> Verdict:
    return Verdict(
        test_id=test_id,
        status=status or ("passed" if passed else "failed"),  # type: ignore[arg-type]
        reason="" if passed else "1 of 1 assertions failed",
        scores=Scores(execution_pass=passed, runtime=1.0 if passed else 0.25, static=1.0, static_policy_pass=passed),
        assertions=[AssertionResult(index=0, type="custom_assertion", description="d", weight=1.0, passed=passed)],
    )


def _run(profile: str, mode: str) -> tuple[RunManifest, list[Record]]:
    """A run over the mini suite with passes, failures, knowledge answers, an excluded outage, a harness
    error and cached verdicts; models runs have two models and skills A/B."""
    models = [{"name": "openai/a"}, {"name": "openai/b"}] if mode == "models" else []
    config = load_config(None, {"dataset.path": str(MINI), "run.runs": 2, "run.profile": profile, "models": models})
    skills = [SkillSpec(name="s", source="s.md", content="c", sha256="sha256:1")] if mode == "models" else None
    manifest = plan_run(config, mode, skills=skills)  # type: ignore[arg-type]
    records = []
    for n, item in enumerate(manifest.items):
        good = n % 3 != 1
        usage = Usage(cost_usd=0.001 * n, latency_ms=10 * n, calls=n % 2, prompt_tokens=n, completion_tokens=n)
        if item.test_type == "knowledge":
            record = build_record(manifest, item, KnowledgeAnswer(1.0 if good else 0.0), usage=usage)
        elif n % 7 == 5:
            record = build_record(manifest, item, InfraFailure("provider outage"), usage=usage)
        elif n % 11 == 4:
            record = build_record(
                manifest, item, GraderVerdict(_verdict(item.test_id, False, "harness_error")), usage=usage
            )
        else:
            record = build_record(manifest, item, GraderVerdict(_verdict(item.test_id, good)), usage=usage)
        record.cached = n % 4 == 0
        records.append(record)
    return manifest, records


def _summary(profile: str, mode: str, cluster: ClusterFacts | None = None) -> tuple[RunSummary, list[Record]]:
    manifest, records = _run(profile, mode)
    facts = RunFacts(executor="kubernetes" if cluster else "docker", started_at="s", finished_at="f",
                     cache=CacheFacts(enabled=True), cluster=cluster)  # fmt: skip
    return build_summary(manifest, records, facts), records


def _extras(model: BaseModel) -> list[str]:
    """Keys a model carries that it does not declare, anywhere inside it."""
    found = list(model.model_extra or {})
    for value in model.__dict__.values():
        items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else [value]
        found += [k for v in items if isinstance(v, BaseModel) for k in _extras(v)]
    return found


def test_the_committed_schema_is_fresh() -> None:
    assert schema.stale(models=summary_schema.MODELS, base_id=summary_schema.BASE_ID) == [], "run `make schema`"


@pytest.mark.parametrize(("profile", "mode"), RUNS)
@pytest.mark.parametrize("cluster", [None, CLUSTER], ids=["local", "cluster"])
def test_the_written_summary_validates_against_the_schema(profile: str, mode: str, cluster: ClusterFacts) -> None:
    summary, _ = _summary(profile, mode, cluster)
    doc = json.loads(summary.to_json())
    jsonschema.validate(doc, SCHEMA)
    assert not _extras(summary), "every key written is a declared field (and so in the schema)"
    sections = {"models": {"comparison", "skill_impact"}, "reference": {"reference"}, "exploits": {"exploits"}}[mode]
    assert sections == set(doc) & {"exploits", "reference", "comparison", "skill_impact"}, "no null sections"
    assert ("cluster" in doc) == ("suite_digest" in doc["metadata"]) == (cluster is not None)


@pytest.mark.parametrize(("profile", "mode"), RUNS)
def test_numbers_and_key_order_are_the_scoring_functions(profile: str, mode: str) -> None:
    summary, records = _summary(profile, mode, CLUSTER)
    written = json.loads(summary.to_json())

    def same(a: Any, b: Any) -> None:  # equal, keys in the same order at every level
        assert json.dumps(a) == json.dumps(b)

    same(written["overall"], aggregate(records))
    same(written["models"], aggregate_by_model(records))
    if mode == "models":
        same(written["comparison"], compare.comparison(records))
        same(written["skill_impact"], compare.skill_impact(records))
    meta = written["metadata"]
    assert meta["cache"] == {"enabled": True, "cached_records": sum(r.cached for r in records)}
    assert (meta["suite_digest"], meta["suite_verified"], meta["runtime_image_id"]) == ("sha256:ab", True,
                                                                                        "sha256:kubelet")  # fmt: skip
    assert list(written)[-1] == "cluster" and list(meta)[-3:] == ["cache", "suite_digest", "suite_verified"]
    assert written["cluster"] == {"namespace": "ns", "run": "r1", "infra_retries": 2, "requeued": 1}


@pytest.mark.parametrize(("profile", "mode"), RUNS)
def test_a_summary_reads_back_to_the_same_bytes(profile: str, mode: str) -> None:
    # Upstream's `scores` block must not be read as ours (or the other way round) and lose its keys.
    text = _summary(profile, mode)[0].to_json()
    again = RunSummary.model_validate_json(text)
    assert again.to_json() == text and not _extras(again)


def test_exploit_runs_write_knowledge_baselines_only_with_knowledge_records() -> None:
    summary, records = _summary("wpbench", "exploits")
    assert summary.exploits is not None and summary.exploits.knowledge_baselines is not None
    manifest, _ = _run("wpbench", "exploits")
    execution_only = [r for r in records if r.type == "execution"]
    facts = RunFacts(executor="docker", started_at="s", finished_at="f", cache=CacheFacts(enabled=False))
    doc = json.loads(build_summary(manifest, execution_only, facts).to_json())
    assert set(doc["exploits"]) == {"tests_checked", "exploitable"}
    jsonschema.validate(doc, SCHEMA)


@pytest.mark.parametrize(
    ("damage", "where"),
    [
        (lambda d: d["metadata"].pop("manifest_digest"), "metadata.manifest_digest"),
        (lambda d: d["overall"]["execution"].update(passed="all"), "overall.execution.passed"),
        (lambda d: d["models"]["openai/a"]["scores"].pop("overall"), "models.openai/a.scores"),
        (lambda d: d["comparison"]["rows"][0].update(categories=[]), "comparison.rows.0.categories"),
    ],
)
def test_a_damaged_summary_fails_the_schema_and_the_model_naming_the_field(damage: Any, where: str) -> None:
    doc = json.loads(_summary("upstream", "models")[0].to_json())
    damage(doc)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, SCHEMA)
    with pytest.raises(ValidationError) as caught:
        RunSummary.model_validate(doc)
    assert where in {".".join(map(str, e["loc"][: len(where.split("."))])) for e in caught.value.errors()}
