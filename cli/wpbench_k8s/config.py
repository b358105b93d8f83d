"""`wp-bench.yaml`: upstream's config keys, accepted unchanged, plus ours (grader limits, executor).

Loading is strict: an unknown key or a bad value is an InputError naming the file and the key.
CLI flags override the file (`load_config(path, overrides)`), with the same meaning upstream gives them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from wpbench_k8s.errors import InputError, first_error
from wpbench_k8s.executor.base import GraderLimits

DEFAULT_SUITE = "wpk-core-v1"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DatasetConfig(_Section):
    source: Literal["local", "huggingface", "jsonl"] = "local"
    name: str = DEFAULT_SUITE
    suite: str | None = None
    path: str | None = None  # a suite folder, a folder of suites, or a JSONL export


class ModelConfig(_Section):
    name: str = Field(min_length=1)
    temperature: float | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    timeout_seconds: float = Field(default=120.0, gt=0)


class GraderConfig(_Section):
    kind: Literal["docker", "kubernetes"] = "docker"
    image: str = "wpbench-grader:dev"
    timeout_seconds: float = Field(default=90.0, gt=0, le=3600)
    setup_timeout_seconds: float = Field(default=600.0, gt=0)
    base_url: str | None = None  # upstream key; our baseline site URL is fixed at build time
    limits: GraderLimits = Field(default_factory=GraderLimits)


class RunConfig(_Section):
    suite: str | None = None
    limit: int | None = Field(default=None, ge=1)
    seed: int = 1337
    test_ids: list[str] = Field(default_factory=list)
    categories: list[str] = Field(default_factory=list)
    test_type: Literal["all", "execution", "knowledge"] = "all"
    dry_run: bool = False
    execution_isolation: Literal["reset_per_test"] = "reset_per_test"
    execution_concurrency: int = Field(default=1, ge=1, le=256)
    continue_on_error: bool = False
    runs: int = Field(default=1, ge=1, le=20)

    @field_validator("test_ids", "categories", mode="before")
    @classmethod
    def _split_commas(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            value = [value]
        if isinstance(value, list):
            return [part.strip() for item in value for part in str(item).split(",") if part.strip()]
        return value


class OutputConfig(_Section):
    path: str = "output/results.json"
    jsonl_path: str = "output/results.jsonl"


class SkillsConfig(_Section):
    paths: list[str] = Field(default_factory=list)
    include_references: bool = True
    only: bool = False


class JudgeConfig(_Section):
    model: str | None = None
    rubric: str | None = None
    skip: bool = True


class Config(_Section):
    dataset: DatasetConfig = Field(default_factory=DatasetConfig)
    models: list[ModelConfig] = Field(default_factory=list)
    grader: GraderConfig = Field(default_factory=GraderConfig)
    run: RunConfig = Field(default_factory=RunConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    judge: JudgeConfig = Field(default_factory=JudgeConfig)

    @property
    def suite_name(self) -> str:
        return self.run.suite or self.dataset.suite or self.dataset.name


def _deep_set(data: dict[str, Any], dotted: str, value: Any) -> None:
    section, _, key = dotted.partition(".")
    if not key:
        data[section] = value
        return
    node = data.setdefault(section, {})
    if not isinstance(node, dict):
        raise InputError(f"config: {section} must be a mapping")
    node[key] = value


def load_config(path: Path | None, overrides: dict[str, Any] | None = None) -> Config:
    """Read YAML (when given), apply dotted-key overrides (`run.limit`), validate strictly."""
    data: dict[str, Any] = {}
    where = str(path) if path else "flags"
    if path is not None:
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise InputError(f"{path}: cannot read config: {exc.strerror}") from exc
        except yaml.YAMLError as exc:
            raise InputError(f"{path}: malformed YAML: {exc}") from exc
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise InputError(f"{path}: the config must be a YAML mapping")
        data = loaded
    for dotted, value in (overrides or {}).items():
        _deep_set(data, dotted, value)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        key, msg = first_error(exc)
        raise InputError(f"{where}: {key}: {msg}") from exc


def repo_root() -> Path:
    """The checkout this package runs from (cli/wpbench_k8s -> repo)."""
    return Path(__file__).resolve().parents[2]


def default_datasets_dir() -> Path:
    env = os.environ.get("WPBENCH_DATASETS")
    if env:
        return Path(env)
    cwd = Path.cwd() / "datasets" / "suites"
    return cwd if cwd.is_dir() else repo_root() / "datasets" / "suites"
