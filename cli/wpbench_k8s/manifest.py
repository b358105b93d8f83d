"""The run manifest: one content-addressed document holding everything a run needs.

`wpbench-k8s run` builds it and hands it to an executor; `wpbench-k8s submit` builds the very
same document and hands it to the controller in the cluster. Its digest is the sha256 of its
canonical JSON, so two runs with the same digest graded the same inputs with the same grader.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from wpbench_k8s.profiles import ProfileName
from wpbench_k8s.textsafe import lone_surrogate, scrub
from wpbench_runtime.contract import SCORING_VERSION, ArtifactKind, GradeTask

RunMode = Literal["reference", "exploits", "completions", "models"]
# reset_per_test: a fresh grader container for every test (the only mode for published numbers).
# fork_per_test: fast mode, one container grades tests in sequence, each in a fresh runner process on a
# freshly laid-out site, the container reset and checked between them (runtime/README.md says what that
# isolates and what not). Upstream WP-Bench's key and value names.
ExecutionIsolation = Literal["reset_per_test", "fork_per_test"]


class GraderLimits(BaseModel):
    """Per-container limits; the same numbers become Pod requests/limits on Kubernetes."""

    model_config = ConfigDict(extra="forbid")
    # Upper bounds refuse a typo before it reaches the engine (which would fail every try as infra_error).
    cpus: float = Field(default=1.0, gt=0, le=64)
    memory_mb: int = Field(default=512, ge=64, le=65536)
    pids: int = Field(default=64, ge=8, le=65536)
    wordpress_tmpfs_mb: int = Field(default=256, ge=16, le=16384)
    tmp_tmpfs_mb: int = Field(default=64, ge=1, le=16384)


class GraderSpec(BaseModel):
    """What a backend needs to start graders: image, limits, timeouts."""

    model_config = ConfigDict(extra="forbid")
    image: str = "wpbench-grader:dev"
    image_id: str = ""  # resolved content id (sha256:...) recorded in results
    timeout_seconds: float = Field(default=90.0, gt=0)
    setup_timeout_seconds: float = Field(default=60.0, gt=0, le=3600)  # the trusted phase (GradeTask's)
    # Extra wall time the backend allows beyond timeout_seconds for container start and
    # teardown before it gives up on the container itself.
    grace_seconds: float = Field(default=30.0, ge=0)
    limits: GraderLimits = Field(default_factory=GraderLimits)
    execution_isolation: ExecutionIsolation = "reset_per_test"

    @model_serializer(mode="wrap")
    def _without_default_isolation(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # The default is left out, so manifests (and their digests) written before fast mode existed
        # stay what they were; fork_per_test is in the document, so a run never mixes the two.
        data: dict[str, Any] = handler(self)
        if data.get("execution_isolation") == "reset_per_test":
            del data["execution_isolation"]
        return data

    @property
    def isolation_boundary(self) -> str:
        """What one test's grading is isolated by, as run metadata and records say it."""
        return "process_per_test" if self.execution_isolation == "fork_per_test" else "container_per_test"


class Candidate(BaseModel):
    """What gets graded: a PHP snippet or a plugin files map, with where it came from."""

    model_config = ConfigDict(extra="forbid")
    code: str | None = None
    files: dict[str, str] | None = None
    raw: str = ""  # the unprocessed completion, when a model produced it
    extraction_error: str | None = None  # set when nothing gradable could be extracted
    label: str = ""  # e.g. "reference", "exploit:return-true", a completions line
    # Graded as this kind instead of the test's: an authored exploit's `code` is a snippet even for a
    # wp_plugin_files test (upstream WP-Bench runs its exploit strings so).
    artifact_kind: ArtifactKind | None = None

    def unicode_checked(self) -> Candidate:
        """This candidate, or, when its answer holds a lone UTF-16 surrogate (text no UTF-8 file or grader
        can carry), a copy with each replaced by U+FFFD and `extraction_error` saying so: the candidate's
        own scored failure, never a crash of the run."""
        found = lone_surrogate({"code": self.code, "files": self.files, "raw": self.raw})
        if found is None:
            return self
        return Candidate.model_validate({
            **scrub(self.model_dump()),
            "extraction_error": f"{found} holds a lone UTF-16 surrogate (not a Unicode character; shown as U+FFFD)",
        })  # fmt: skip


class ModelSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    temperature: float | None = None
    max_tokens: int | None = None
    timeout_seconds: float = 120.0
    top_p: float | None = None
    kind: str | None = None  # upstream's provider label, recorded in upstream-profile records
    max_retries: int | None = None


class SkillSpec(BaseModel):
    """A skill injected as a system message (skills A/B)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    source: str
    content: str
    sha256: str


class ManifestItem(BaseModel):
    """One candidate to grade: a test x model x variant. `item_id` is stable and DNS-safe-ish."""

    model_config = ConfigDict(extra="forbid")
    item_id: str
    test_id: str
    test_type: Literal["execution", "knowledge"] = "execution"
    model: str
    variant: str = "baseline"  # baseline | with-skills
    prompt: str = ""  # the user prompt sent (or to be sent) to the model
    prompt_hash: str = ""
    candidate: Candidate | None = None  # None until generation fills it (model runs)
    task: GradeTask | None = None  # execution tests only; its code/files come from candidate

    @property
    def needs_grader(self) -> bool:
        """An execution item whose candidate holds something gradable: a grader (container or pod) runs it."""
        return self.task is not None and self.candidate is not None and not self.candidate.extraction_error

    def with_candidate(self, candidate: Candidate) -> ManifestItem:
        """This item holding `candidate`, its grader task (if any) carrying the candidate's code or files.

        The one place a candidate is put into a task: planning, a local run and the controller all call it.
        """
        candidate = candidate.unicode_checked()
        update: dict[str, Any] = {"code": candidate.code, "files": candidate.files}
        if candidate.artifact_kind is not None:
            update["artifact_kind"] = candidate.artifact_kind
        task = self.task.model_copy(update=update) if self.task else None
        return self.model_copy(update={"candidate": candidate, "task": task})


class RunManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    manifest_version: Literal["1"] = "1"
    run_id: str
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    suite: str
    dataset_source: str
    dataset_digest: str
    mode: RunMode
    profile: ProfileName = "wpbench"  # whose semantics the run reproduces (wpbench_k8s.profiles)
    seed: int
    scoring_version: str = SCORING_VERSION
    selected_test_ids: list[str]
    grader: GraderSpec
    execution_concurrency: int = Field(default=1, ge=1)
    continue_on_error: bool = False
    models: list[ModelSpec] = Field(default_factory=list)
    skills: list[SkillSpec] = Field(default_factory=list)
    # Optional AI judge: its model and the rubric's content (the controller has no dataset folder).
    judge: ModelSpec | None = None
    judge_rubric: dict[str, Any] | None = None
    # Tests as loaded (execution + knowledge), keyed by id: the controller needs them to build
    # records identical to a local run's without the dataset folder.
    tests: dict[str, dict[str, Any]] = Field(default_factory=dict)
    items: list[ManifestItem]

    def canonical_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))

    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.canonical_json().encode()).hexdigest()


def prompt_hash(text: str, *, full: bool = False) -> str:
    """Ours: "sha256:" + 16 hex digits; `full`: upstream's 64 hex digits without prefix."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    return digest if full else "sha256:" + digest[:16]
