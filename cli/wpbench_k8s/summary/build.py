"""`build_summary`: the one way a run summary is made, from the manifest, the records and `RunFacts`."""

from __future__ import annotations

import os
import platform
from collections import defaultdict
from dataclasses import dataclass

from wpbench_k8s import __version__
from wpbench_k8s.manifest import RunManifest
from wpbench_k8s.profiles import get_profile
from wpbench_k8s.records import Record
from wpbench_k8s.scoring import aggregate, aggregate_by_model, counted
from wpbench_k8s.summary.model import (
    CacheMetadata,
    ClusterSection,
    Comparison,
    ExploitReport,
    GraderMetadata,
    GroupAggregate,
    HostMetadata,
    KnowledgeBaselines,
    ReferenceReport,
    RunMetadata,
    RunSummary,
    SkillImpact,
    SkillMetadata,
)


@dataclass(frozen=True)
class CacheFacts:
    enabled: bool  # whether the verdict cache was on for this run


@dataclass(frozen=True)
class ClusterFacts:
    """What the cluster's run object says (a run fetched by `wpbench-k8s results`)."""

    namespace: str
    run: str
    infra_retries: int = 0
    requeued: int = 0
    suite_digest: str = ""  # as the controller recomputed it; "" when it did not
    suite_verified: bool = False
    grader_image_id: str = ""  # what the kubelet reported, used when the manifest resolved none


@dataclass(frozen=True)
class RunFacts:
    """How the run went, beside its manifest and records."""

    executor: str  # "docker" or "kubernetes"
    started_at: str
    finished_at: str
    cache: CacheFacts
    cluster: ClusterFacts | None = None


def build_summary(manifest: RunManifest, records: list[Record], facts: RunFacts) -> RunSummary:
    """The summary of a finished run: metadata, overall and per-model aggregates, the mode's section."""
    exploits = reference = comparison = impact = None
    if manifest.mode == "exploits":
        exploits = exploit_report(records, manifest)
    elif manifest.mode == "reference":
        reference = reference_report(records)
    elif manifest.mode == "models":
        from wpbench_k8s.models import compare

        comparison = Comparison.model_validate(compare.comparison(records))
        if manifest.skills:
            impact = SkillImpact.model_validate(compare.skill_impact(records))
    cluster = facts.cluster
    return RunSummary(
        metadata=_metadata(manifest, records, facts),
        overall=GroupAggregate.model_validate(aggregate(records)),
        models={key: GroupAggregate.model_validate(agg) for key, agg in aggregate_by_model(records).items()},
        exploits=exploits,
        reference=reference,
        comparison=comparison,
        skill_impact=impact,
        cluster=None
        if cluster is None
        else ClusterSection(namespace=cluster.namespace, run=cluster.run, infra_retries=cluster.infra_retries,
                            requeued=cluster.requeued),
    )  # fmt: skip


def _metadata(manifest: RunManifest, records: list[Record], facts: RunFacts) -> RunMetadata:
    grader, cluster = manifest.grader, facts.cluster
    checked = cluster if cluster is not None and cluster.suite_digest else None  # the controller checked the suite
    return RunMetadata(
        run_id=manifest.run_id,
        tool=f"wpbench-k8s {__version__}",
        suite=manifest.suite,
        mode=manifest.mode,
        profile=manifest.profile,
        profile_reproduces=get_profile(manifest.profile).reproduces or f"wpbench-k8s {__version__}",
        executor=facts.executor,
        # a cluster gives each test a pod of its own, or in fast mode a fresh process in a pod grading a sequence
        runtime_isolation_boundary="pod_per_test"
        if facts.executor != "docker" and grader.execution_isolation == "reset_per_test"
        else grader.isolation_boundary,
        execution_isolation=grader.execution_isolation,
        publishable=grader.execution_isolation == "reset_per_test",
        execution_concurrency=manifest.execution_concurrency,
        runtime_image=grader.image,
        runtime_image_id=grader.image_id or (cluster.grader_image_id if cluster else ""),
        grader=GraderMetadata(timeout_seconds=grader.timeout_seconds, limits=grader.limits, database="sqlite"),
        host=HostMetadata(cpus=os.cpu_count(), platform=platform.platform()),
        scoring_version=manifest.scoring_version,
        seed=manifest.seed,
        selected_test_ids=manifest.selected_test_ids,
        dataset_source=manifest.dataset_source,
        dataset_digest=manifest.dataset_digest,
        manifest_digest=manifest.digest(),
        models=[m.name for m in manifest.models],
        skills=[SkillMetadata(name=s.name, source=s.source, sha256=s.sha256) for s in manifest.skills],
        started_at=facts.started_at,
        finished_at=facts.finished_at,
        cache=CacheMetadata(enabled=facts.cache.enabled, cached_records=sum(r.cached for r in records)),
        suite_digest=checked.suite_digest if checked else None,
        suite_verified=checked.suite_verified if checked else None,
    )


def exploit_report(records: list[Record], manifest: RunManifest) -> ExploitReport:
    """Execution tests: per test, the cheats that passed (a test with any is exploitable).
    Knowledge tests: each know-nothing baseline's total against chance (`knowledge_baselines`)."""
    passing: dict[str, list[str]] = defaultdict(list)
    execution = [r for r in records if r.type == "execution"]
    for r in execution:
        if r.scores.execution_pass:
            passing[r.test_id].append(r.variant)
    knowledge = [r for r in records if r.type == "knowledge"]
    return ExploitReport(
        tests_checked=len({r.test_id for r in execution}),
        exploitable=dict(sorted(passing.items())),
        knowledge_baselines=knowledge_baseline_report(manifest, knowledge) if knowledge else None,
    )


def knowledge_baseline_report(manifest: RunManifest, records: list[Record]) -> KnowledgeBaselines:
    from wpbench_k8s.dataset import KnowledgeTest
    from wpbench_k8s.knowledge_baselines import BASELINES, evaluate

    outcomes: dict[str, list[tuple[KnowledgeTest, float]]] = defaultdict(list)
    for r in counted(records):
        name = r.variant.removeprefix("exploit:")
        outcomes[name].append((KnowledgeTest.model_validate(manifest.tests[r.test_id]), r.scores.correctness))
    results = [evaluate(name, outcomes[name]) for name in BASELINES if outcomes.get(name)]
    return KnowledgeBaselines.model_validate({
        "tests_checked": len({r.test_id for r in records}),
        "baselines": {r.name: r.as_dict() for r in results},
        "above_chance": [r.name for r in results if r.flagged],
    })  # fmt: skip


def reference_report(records: list[Record]) -> ReferenceReport:
    """Reference and alternative solutions that fail, keyed `test_id` or `test_id (alternative-N)`."""

    def name(r: Record) -> str:
        return r.test_id if r.variant == "baseline" else f"{r.test_id} ({r.variant})"

    failing = {name(r): f"{r.grader.status}: {r.grader.reason}" for r in records if not r.scores.execution_pass}
    return ReferenceReport(
        tests_checked=len({r.test_id for r in records}),
        solutions_checked=len(records),
        failing=dict(sorted(failing.items())),
    )
