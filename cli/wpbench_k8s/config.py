"""`wp-bench.yaml`: upstream's config keys, accepted unchanged, plus ours (grader limits, executor).

Loading is strict: an unknown key or a bad value is an InputError naming the file and the key.
CLI flags override the file (`load_config(path, overrides)`), with the same meaning upstream gives them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from wpbench_k8s.errors import InputError, first_error, warn
from wpbench_k8s.manifest import ExecutionIsolation, GraderLimits
from wpbench_k8s.profiles import ProfileName
from wpbench_k8s.textsafe import decode_utf8, refuse_lone_surrogates

DEFAULT_SUITE = "wpk-core-v1"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _read_upstream_keys(cls, data: Any) -> Any:
        """Before validation, a section's upstream spellings become ours (or are refused with the reason)."""
        return cls._upstream_keys(dict(data)) if isinstance(data, dict) else data

    @classmethod
    def _upstream_keys(cls, data: dict[str, Any]) -> dict[str, Any]:
        return data


class DatasetConfig(_Section):
    source: Literal["local", "huggingface", "jsonl"] = "local"
    name: str = DEFAULT_SUITE
    suite: str | None = None
    path: str | None = None  # a suite folder, a folder of suites, or a JSONL export
    # Upstream's Hugging Face download settings: accepted and recorded; the Hub is not reached
    # from here, so a dataset comes from `path` (a suite folder or a JSONL export of the Hub rows).
    revision: str | None = None
    split: str = "test"
    cache_dir: str | None = None


class ModelConfig(_Section):
    name: str = Field(min_length=1)
    # Upstream names the provider (openai, anthropic, ollama, openai-compatible); LiteLLM reads the
    # provider from the model name, so this is recorded only.
    kind: str | None = None
    # None: the profile's default (upstream 0.0, wpbench provider default)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, gt=0, le=1_000_000)
    timeout_seconds: float | None = Field(default=None, gt=0, le=3600)  # None: the profile's default (300 / 120 s)
    max_retries: int | None = Field(default=None, ge=0, le=100)  # upstream key: attempts = max_retries + 1
    retry: dict[str, float] = Field(default_factory=dict)  # upstream retry_* keys, recorded

    @classmethod
    def _upstream_keys(cls, data: dict[str, Any]) -> dict[str, Any]:
        if "request_timeout" in data:
            if data.get("timeout_seconds") is not None:
                raise ValueError("give request_timeout (upstream) or timeout_seconds, not both")
            data["timeout_seconds"] = data.pop("request_timeout")
        retry = {k.removeprefix("retry_"): data.pop(k) for k in [k for k in data if str(k).startswith("retry_")]}
        if retry:
            data["retry"] = {**data.get("retry", {}), **retry}
        return data


# Upstream grader keys for modes this project does not offer, and what to use instead.
_DIAGNOSTIC_GRADER_KEYS = {
    "wp_env_dir": "the wp-env runtime is replaced by the locked-down grader image; set grader.image",
    "url": "there is no HTTP grader; tests run in the grader image (grader.image)",
}


class GraderConfig(_Section):
    kind: Literal["docker", "kubernetes"] = "docker"
    image: str = "wpbench-grader:dev"
    timeout_seconds: float = Field(default=90.0, gt=0, le=3600)
    # Bounds each grader's trusted phase (WordPress's boot and the test's setup, before candidate code);
    # an overrun is a harness_error. Upstream bounds its environment set-up with the same key.
    setup_timeout_seconds: float = Field(default=60.0, gt=0, le=3600)
    base_url: str | None = None  # upstream key; our baseline site URL is fixed at build time
    limits: GraderLimits = Field(default_factory=GraderLimits)
    # Upstream keys with no effect here (every test gets its own container; concurrency is
    # run.execution_concurrency): accepted so upstream configs load unchanged.
    container_name: str | None = None
    concurrency: int | None = Field(default=None, ge=1)

    @classmethod
    def _upstream_keys(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Upstream's flat limit keys map onto `limits`; its diagnostic modes are refused with the reason."""
        if data.get("kind") in ("cli", "http"):
            raise ValueError(
                f"grader.kind {data['kind']!r} is one of upstream's diagnostic graders with shared state; this "
                "project grades every test in a fresh locked-down container: use kind docker (or kubernetes)"
            )
        for key, why in _DIAGNOSTIC_GRADER_KEYS.items():
            if key in data:
                raise ValueError(f"grader.{key} is not supported: {why}")
        mapping = {"container_cpus": "cpus", "memory_mb": "memory_mb", "pids_limit": "pids",
                   "filesystem_mb": "wordpress_tmpfs_mb", "tmp_mb": "tmp_tmpfs_mb"}  # fmt: skip
        flat = {ours: data.pop(theirs) for theirs, ours in mapping.items() if theirs in data}
        if flat:
            limits = data.get("limits") or {}
            if not isinstance(limits, dict):
                raise ValueError("grader.limits must be a mapping")
            data["limits"] = {**limits, **flat}
        return data


class RunConfig(_Section):
    suite: str | None = None
    limit: int | None = Field(default=None, ge=1, le=1_000_000)
    seed: int = Field(default=1337, ge=-(2**63), le=2**63 - 1)  # an int64, as a cluster stores it
    test_ids: list[str] = Field(default_factory=list)
    categories: list[str] = Field(default_factory=list)
    test_type: Literal["all", "execution", "knowledge"] = "all"
    dry_run: bool = False
    # fork_per_test (fast mode, local Docker only) is opt-in; see GraderSpec.execution_isolation.
    execution_isolation: ExecutionIsolation = "reset_per_test"
    execution_concurrency: int = Field(default=1, ge=1, le=256)
    concurrency: int | None = Field(default=None, ge=1)  # upstream: model-call concurrency; recorded
    continue_on_error: bool = False
    runs: int = Field(default=1, ge=1, le=20)
    # Execution profile: None picks "upstream" for upstream-format suites and "wpbench" otherwise.
    profile: ProfileName | None = None
    # Upstream run-mode switches (the CLI flags --check-reference-solution / --check-exploits).
    check_reference_solution: bool = False
    check_exploits: bool = False
    # A folder with one prompt template per test type (execution.txt, multiple_choice.txt,
    # short_answer.txt); see docs/profiles.md. None: our own wording.
    prompt_templates: str | None = None
    # `submit` only: the Kueue LocalQueue (of the run's namespace) that admits the run's grader Jobs; null: the
    # release's default queue, or none (the controller's own bounds alone). `submit --queue` overrides it.
    queue: str | None = Field(default=None, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

    @classmethod
    def _upstream_keys(cls, data: dict[str, Any]) -> dict[str, Any]:
        if data.get("test_type") is None and "test_type" in data:
            data["test_type"] = "all"  # upstream's null: both types
        if data.get("execution_isolation") == "none":
            raise ValueError(
                "execution_isolation 'none' is upstream's diagnostic mode with a shared site, unsuitable for "
                "published scores: use reset_per_test (a fresh container per test) or fork_per_test (fast mode)"
            )
        for key in ("skip_runtime", "skip_static"):
            if data.get(key):
                raise ValueError(
                    f"run.{key}: grading without the {key.removeprefix('skip_')} checks is an upstream diagnostic "
                    "this project does not offer (both checks decide a verdict); remove the key"
                )
            data.pop(key, None)
        return data

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
    jsonl_path: str | None = "output/results.jsonl"  # null (upstream): records go beside `path`
    # Upstream keys. Prompts are always kept (each manifest item stores its prompt, each record its
    # hash); candidate code is in every record's output.code, so there is no separate artifacts folder.
    save_prompts: bool = True
    save_artifacts_dir: str | None = None

    @property
    def records_path(self) -> str:
        return self.jsonl_path or str(Path(self.path).with_suffix(".jsonl"))


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
    model: ModelConfig | None = None  # upstream's single-model form; joins `models`
    grader: GraderConfig = Field(default_factory=GraderConfig)
    run: RunConfig = Field(default_factory=RunConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    judge: JudgeConfig = Field(default_factory=JudgeConfig)

    @model_validator(mode="after")
    def _single_model(self) -> Config:
        if self.model is not None:
            if all(m.name != self.model.name for m in self.models):
                self.models.insert(0, self.model)
            self.model = None
        return self

    @property
    def suite_name(self) -> str:
        return self.run.suite or self.dataset.suite or self.dataset.name

    @property
    def suite_filter(self) -> str | None:
        """The suite a JSONL export is filtered to: only one the user named (`dataset.name` is a Hub repo)."""
        return self.run.suite or self.dataset.suite


def _deep_set(data: dict[str, Any], dotted: str, value: Any) -> None:
    section, _, key = dotted.partition(".")
    if not key:
        data[section] = value
        return
    node = data.setdefault(section, {})
    if not isinstance(node, dict):
        raise InputError(f"config: {section} must be a mapping")
    node[key] = value


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that notes every key a mapping repeats (YAML's last one silently wins)."""

    duplicates: list[str]

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, str) and key in seen:
                self.duplicates.append(f"{key!r} at line {key_node.start_mark.line + 1}")
            if isinstance(key, str):
                seen.add(key)
        return super().construct_mapping(node, deep)


def read_config_file(path: Path) -> dict[str, Any]:
    """The YAML mapping in `path`; anything unreadable is an InputError naming the file (and line)."""
    try:
        text = decode_utf8(path.read_bytes(), str(path))
    except OSError as exc:
        raise InputError(f"{path}: cannot read config: {exc.strerror}") from exc
    loader = _StrictLoader(text)
    loader.duplicates = []
    try:
        loaded = loader.get_single_data()
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: malformed YAML: {' '.join(str(exc).split())}") from exc
    except (ValueError, TypeError, RecursionError) as exc:  # e.g. a date YAML reads but Python refuses
        raise InputError(f"{path}: malformed YAML: {exc}") from exc
    finally:
        loader.dispose()
    for where in loader.duplicates:
        warn(f"{path}: duplicate key {where}: the last value is used")
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise InputError(f"{path}: the config must be a YAML mapping")
    if {"apiVersion", "kind"} <= set(loaded):
        raise InputError(
            f"{path}: this is a Kubernetes object (apiVersion {loaded.get('apiVersion')}, kind {loaded.get('kind')}), "
            "such as `submit --dry-run` prints, not a wp-bench config"
        )
    refuse_lone_surrogates(loaded, str(path))
    return loaded


def load_config(path: Path | None, overrides: dict[str, Any] | None = None) -> Config:
    """Read YAML (when given), apply dotted-key overrides (`run.limit`), validate strictly."""
    data: dict[str, Any] = {}
    where = str(path) if path else "flags"
    if path is not None:
        data = read_config_file(path)
    for dotted, value in (overrides or {}).items():
        _deep_set(data, dotted, value)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        key, msg = first_error(exc)
        raise InputError(f"{where}: {key}: {msg}") from exc


# Upstream keys this project accepts so upstream configs load, but which change nothing here.
_NO_EFFECT = {
    ("grader", "base_url"): "the grader image's site URL is fixed when the image is built "
    "(runtime/php/wp/wp-config.php) and no HTTP port is exposed",
    ("grader", "container_name"): "every test gets its own container, named by the executor",
    ("grader", "concurrency"): "grader concurrency is run.execution_concurrency",
    ("run", "concurrency"): "model calls and grading share run.execution_concurrency",
    ("output", "save_prompts"): "prompts are always kept (each manifest item stores its prompt)",
    ("output", "save_artifacts_dir"): "candidate code is in every record's output.code",
    ("dataset", "revision"): "the Hub is not reached from here; export the dataset and set dataset.path",
    ("dataset", "split"): "the Hub is not reached from here; export the dataset and set dataset.path",
    ("dataset", "cache_dir"): "the Hub is not reached from here; export the dataset and set dataset.path",
}


def ignored_settings(config: Config) -> list[str]:
    """One warning per upstream key the config sets that has no effect here, saying why."""
    return [
        f"{section}.{key} has no effect here: {why}"
        for (section, key), why in _NO_EFFECT.items()
        if key in getattr(config, section).model_fields_set
    ]


def repo_root() -> Path:
    """The checkout this package runs from (cli/wpbench_k8s -> repo)."""
    return Path(__file__).resolve().parents[2]


def default_datasets_dir() -> Path:
    env = os.environ.get("WPBENCH_DATASETS")
    if env:
        return Path(env)
    cwd = Path.cwd() / "datasets" / "suites"
    return cwd if cwd.is_dir() else repo_root() / "datasets" / "suites"
