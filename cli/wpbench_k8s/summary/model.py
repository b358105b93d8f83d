"""The run summary JSON as pydantic models: what `run` and `results` write and `report` reads.

Fields are declared in the order they are written, because upstream's notebook and our report read the
file as it is today; `RunSummary.to_json` leaves out the optional sections that do not apply. Every model
here allows unknown keys, so a summary written by a newer version still loads (the grader limits are the
manifest's own `GraderLimits`, which does not). The version is not written
into the file (that would change its keys): it names the schema (runtime/schema/run-summary.schema.json)
and changes when a key is removed, renamed or retyped.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from wpbench_k8s.manifest import GraderLimits

SUMMARY_VERSION = "1"


class _Doc(BaseModel):
    model_config = ConfigDict(extra="allow")


# ---- metadata ---------------------------------------------------------------------------------------


class GraderMetadata(_Doc):
    timeout_seconds: float
    limits: GraderLimits
    database: str


class HostMetadata(_Doc):
    cpus: int | None
    platform: str


class SkillMetadata(_Doc):
    name: str
    source: str
    sha256: str


class CacheMetadata(_Doc):
    enabled: bool
    cached_records: int


class RunMetadata(_Doc):
    run_id: str
    tool: str
    suite: str
    mode: str
    profile: str
    profile_reproduces: str
    executor: str
    runtime_isolation_boundary: str  # container_per_test, process_per_test (fast mode) or pod_per_test
    execution_isolation: str
    # Published numbers come from reset_per_test only (a fresh container per test); fast mode's are not.
    publishable: bool = True
    execution_concurrency: int
    runtime_image: str
    runtime_image_id: str
    grader: GraderMetadata
    host: HostMetadata
    scoring_version: str
    seed: int | None
    selected_test_ids: list[str]
    dataset_source: str
    dataset_digest: str
    manifest_digest: str
    models: list[str]
    skills: list[SkillMetadata]
    started_at: str
    finished_at: str
    cache: CacheMetadata
    # cluster runs: the suite digest as the controller recomputed it from what it graded
    suite_digest: str | None = None
    suite_verified: bool | None = None


# ---- aggregates (scoring.aggregate) -----------------------------------------------------------------


class UpstreamScores(_Doc):
    """`scoring.headline_scores` under upstream's rules (scoring 3.0 and 2.0); `overall` is the headline."""

    knowledge: float | None
    correctness: float | None
    execution_pass_rate: float | None
    runtime: float | None
    static_policy_pass_rate: float | None
    execution_pass: float | None
    overall: float


class WpbenchScores(_Doc):
    """`scoring.headline_scores` under this project's rules; `overall` is the headline."""

    knowledge: float | None
    correctness: float | None
    execution_pass: float | None
    overall: float


class ExecutionAggregate(_Doc):
    tests: int
    passed: int
    pass_rate: float
    runtime_score: float
    static_score: float


class KnowledgeAggregate(_Doc):
    tests: int
    correct: int
    accuracy: float


class CategoryAggregate(_Doc):
    tests: int
    passed: int
    score: float


class GroupAggregate(_Doc):
    """One model x variant, or the whole run (`overall`)."""

    records: int
    counted: int
    excluded: int
    score: float
    # upstream's shape first: a wpbench block lacks its rate keys, so it can only be read as the second
    scores: Annotated[UpstreamScores | WpbenchScores, Field(union_mode="left_to_right")]
    execution: ExecutionAggregate
    knowledge: KnowledgeAggregate
    categories: dict[str, CategoryAggregate]
    statuses: dict[str, int]
    cost_usd: float
    latency_ms_mean: float


# ---- mode sections ----------------------------------------------------------------------------------


class BaselineResult(_Doc):
    """`knowledge_baselines.BaselineResult.as_dict`."""

    tests: int
    correct: int
    score: float
    chance: float
    p_value: float
    flagged: bool


class KnowledgeBaselines(_Doc):
    tests_checked: int
    baselines: dict[str, BaselineResult]
    above_chance: list[str]


class ExploitReport(_Doc):
    """Execution tests: per test, the cheats that passed. Knowledge tests: the know-nothing baselines."""

    tests_checked: int
    exploitable: dict[str, list[str]]
    knowledge_baselines: KnowledgeBaselines | None = None


class ReferenceReport(_Doc):
    """Reference and alternative solutions that fail, keyed `test_id` or `test_id (alternative-N)`."""

    tests_checked: int
    solutions_checked: int
    failing: dict[str, str]


class RowCategory(_Doc):
    tests: int
    score: float | None
    pass_rate: float | None


class ComparisonRow(_Doc):
    """`models.compare.model_row`: one (model, variant)."""

    model: str
    variant: str
    runs: int
    tests: int
    records: int
    excluded: int
    score: float | None
    score_std: float | None
    pass_rate: float | None
    pass_rate_std: float | None
    quality: float | None
    judged: int
    cost_usd: float
    judge_cost_usd: float
    latency_ms_mean: float | None
    prompt_tokens: int
    completion_tokens: int
    calls: int
    retries: int
    errors: dict[str, int]
    categories: dict[str, RowCategory]


class SkillsDelta(_Doc):
    model: str
    paired_tests: int
    score: float | None
    pass_rate: float | None
    quality: float | None
    cost_usd: float | None
    latency_ms_mean: float | None
    prompt_tokens: int


class Comparison(_Doc):
    rows: list[ComparisonRow]
    skills_delta: list[SkillsDelta]
    categories: list[str]


class ImpactTest(_Doc):
    test_id: str
    category: str
    change: str
    baseline: float
    with_skills: float


class ImpactModel(_Doc):
    model: str
    tests_compared: int
    counts: dict[str, int]
    tests: list[ImpactTest]


class SkillImpact(_Doc):
    models: list[ImpactModel]


class ClusterSection(_Doc):
    namespace: str
    run: str
    infra_retries: int
    requeued: int


# ---- the document -----------------------------------------------------------------------------------


class RunSummary(_Doc):
    """The summary JSON of `wpbench-k8s run` and `wpbench-k8s results` (built by `summary.build_summary`)."""

    version: ClassVar[str] = SUMMARY_VERSION

    metadata: RunMetadata
    overall: GroupAggregate
    models: dict[str, GroupAggregate]
    exploits: ExploitReport | None = None  # mode exploits
    reference: ReferenceReport | None = None  # mode reference
    comparison: Comparison | None = None  # mode models
    skill_impact: SkillImpact | None = None  # mode models, with skills
    cluster: ClusterSection | None = None  # fetched from a cluster

    def to_dict(self) -> dict[str, Any]:
        """The document as written: sections that do not apply are left out, not written as null."""
        omit: dict[str, Any] = {k: True for k in ("exploits", "reference", "comparison", "skill_impact", "cluster")
                                if getattr(self, k) is None}  # fmt: skip
        meta = {k: True for k in ("suite_digest", "suite_verified") if getattr(self.metadata, k) is None}
        if meta:
            omit["metadata"] = meta
        if self.exploits is not None and self.exploits.knowledge_baselines is None:
            omit["exploits"] = {"knowledge_baselines": True}
        return self.model_dump(mode="python", exclude=omit)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"
