"""Result records: one JSONL line per graded candidate, the same shape locally and in-cluster."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator
from pydantic_core import PydanticSerializationError

from wpbench_k8s.profiles import ProfileName, is_upstream
from wpbench_k8s.textsafe import scrub
from wpbench_runtime.contract import Verdict, VerdictStatus

RECORD_VERSION: Literal["1"] = "1"


class RecordOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    raw: str = ""
    code: str | None = None
    files: dict[str, str] | None = None
    extraction_error: str | None = None
    # Upstream WP-Bench's names: the completion as received, and a knowledge test's answer.
    raw_completion: str | None = None
    answer: str | None = None


class RecordScores(BaseModel):
    model_config = ConfigDict(extra="forbid")
    correctness: float = 0.0  # the headline number: runtime score for execution, 0/1 for knowledge
    execution_pass: bool = False
    runtime: float = 0.0
    static: float = 0.0
    static_policy_pass: bool = False
    quality: float | None = None  # AI judge, reported separately; never part of execution_pass
    knowledge: float | None = None  # upstream's name: a knowledge test's 0/1 score (None for execution)


class RecordGrader(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: VerdictStatus | Literal["infra_error", "not_graded"]
    reason: str = ""
    stdout: str = ""
    stderr: str = ""
    timeout: bool = False
    duration_ms: int = 0
    infra_retries: int = 0
    verdict: Verdict | None = None
    success: bool | None = None  # upstream's name: every check passed (None when nothing was graded)


class Usage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: int = 0
    calls: int = 0
    retries: int = 0
    total_tokens: int = 0  # upstream's name: prompt + completion tokens


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")
    record_version: Literal["1"] = RECORD_VERSION
    run_id: str
    item_id: str
    test_id: str
    suite: str
    type: Literal["execution", "knowledge"]
    category: str
    difficulty: str = ""
    mode: str
    variant: str = "baseline"
    prompt_hash: str = ""
    model: str
    output: RecordOutput = Field(default_factory=RecordOutput)
    scores: RecordScores = Field(default_factory=RecordScores)
    grader: RecordGrader
    usage: Usage = Field(default_factory=Usage)
    judge: dict[str, Any] | None = None
    error: str | None = None  # set for errored records; they are excluded from aggregates
    cached: bool = False  # the verdict came from the verdict cache (wpbench_k8s.cache), not a new grader
    error_type: str | None = None  # harness_error, infra_error, model_error
    profile: ProfileName = "wpbench"
    # The model's settings as sent (name, kind, temperature, top_p, max_tokens); None without a model.
    model_settings: dict[str, Any] | None = None
    # On a cluster: the suite digest the controller recomputed from what it graded, and whether a cluster
    # admin pinned the suite with it (wpbench_k8s.verified). Absent (not null) from a local run's records.
    suite_digest: str | None = Field(default=None, exclude_if=lambda v: v is None)
    suite_verified: bool | None = Field(default=None, exclude_if=lambda v: v is None)
    # On a cluster: the grader image the controller resolved the manifest's tag to, and every grader pod of
    # the run ran (`kube.objects.pinned_image`); absent when it could not be resolved, and from local runs.
    grader_image_id: str | None = Field(default=None, exclude_if=lambda v: v is None)

    @model_validator(mode="before")
    @classmethod
    def _from_upstream_shape(cls, data: Any) -> Any:
        """Read back an upstream-profile line: `model` and `error` are objects there."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if isinstance(data.get("model"), dict):
            data["model_settings"] = data["model"]
            data["model"] = str(data["model"].get("name") or "")
        if isinstance(data.get("error"), dict):
            data["error_type"] = data["error"].get("type")
            data["error"] = data["error"].get("message")
        return data

    @model_serializer(mode="wrap")
    def _upstream_shape(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Upstream-profile records carry upstream's `model` object and `error{type, message}`."""
        data: dict[str, Any] = handler(self)
        if is_upstream(self.profile):
            data["model"] = self.model_settings or {
                "name": self.model,
                "kind": None,
                "temperature": None,
                "top_p": None,
                "max_tokens": None,
            }
            data["error"] = None if self.error is None else {"type": self.error_type, "message": self.error}
        return data


# JSON allows U+2028/U+2029 raw inside strings, but line-splitting readers (str.splitlines, JavaScript)
# take them for line breaks: every record line escapes them.
_LINE_SEPARATORS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029"})


def json_line(model: BaseModel) -> str:
    """A model as one JSON line, without raw line or paragraph separators; always valid UTF-8 (a lone
    surrogate that reached a record another way than a candidate is written as U+FFFD, not a crash)."""
    try:
        text = model.model_dump_json()
    except PydanticSerializationError:
        text = json.dumps(scrub(model.model_dump(mode="json")), ensure_ascii=False, separators=(",", ":"))
    return text.translate(_LINE_SEPARATORS)
