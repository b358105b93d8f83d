"""Fast mode is opt-in and never mixed: the flag and the config key set it, the manifest, the verdict cache and
the run's metadata say it, a manifest of the default mode is what it was before, and a cluster run refuses it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from wpbench_k8s.cache import verdict_key
from wpbench_k8s.cli import run
from wpbench_k8s.commands import submit
from wpbench_k8s.commands.run_flags import RunFlags, plan_from_flags
from wpbench_k8s.config import load_config
from wpbench_k8s.errors import ExecutorError
from wpbench_k8s.executor.kubernetes import KubernetesExecutor
from wpbench_k8s.kube.crd import MAX_CANDIDATES_PER_POD
from wpbench_k8s.manifest import GraderSpec, RunManifest
from wpbench_k8s.pipeline import plan_run
from wpbench_k8s.summary import CacheFacts, RunFacts, build_summary

REPO = Path(__file__).resolve().parents[2]
MINI = REPO / "tests" / "fixtures" / "suites" / "mini"


def metadata(manifest: RunManifest) -> dict[str, object]:
    facts = RunFacts(executor="docker", started_at="", finished_at="", cache=CacheFacts(enabled=False))
    return build_summary(manifest, [], facts).metadata.model_dump()


def plan(isolation: str | None) -> RunManifest:
    overrides = {"dataset.path": str(MINI)} | ({"run.execution_isolation": isolation} if isolation else {})
    return plan_run(load_config(None, overrides), "reference")


def test_the_default_is_a_container_per_test_and_stays_out_of_the_manifest() -> None:
    manifest = plan(None)
    assert manifest.grader.execution_isolation == "reset_per_test"
    assert "execution_isolation" not in manifest.model_dump(mode="json")["grader"]  # old digests stay valid
    meta = metadata(manifest)
    assert (meta["runtime_isolation_boundary"], meta["execution_isolation"], meta["publishable"]) == (
        "container_per_test", "reset_per_test", True)  # fmt: skip


def test_fast_mode_is_in_the_manifest_the_cache_key_and_the_metadata() -> None:
    fast, default = plan("fork_per_test"), plan(None)
    assert fast.model_dump(mode="json")["grader"]["execution_isolation"] == "fork_per_test"
    assert RunManifest.model_validate_json(fast.canonical_json()).grader.execution_isolation == "fork_per_test"
    task = next(iter(fast.items)).task
    assert task is not None and verdict_key(fast, task) != verdict_key(default, task)
    fast.run_id = default.run_id = fast.created_at = default.created_at = "same"  # type: ignore[assignment]
    assert fast.digest() != default.digest()  # --resume compares digests: a run never mixes the two
    meta = metadata(fast)
    assert (meta["runtime_isolation_boundary"], meta["execution_isolation"], meta["publishable"]) == (
        "process_per_test", "fork_per_test", False)  # fmt: skip


def test_the_flag_sets_it() -> None:
    values = {name: None for name in RunFlags.__dataclass_fields__}
    flags = RunFlags(**{**values, "check_reference_solution": True, "dataset_path": MINI, "model_name": (),  # type: ignore[arg-type]
                        "test_id": (), "category": (), "skills": (), "skills_only": False, "skip_judge": False,
                        "check_exploits": False, "execution_isolation": "fork_per_test"})  # fmt: skip
    _, manifest = plan_from_flags(flags)
    assert manifest.grader.execution_isolation == "fork_per_test"


def test_an_unknown_isolation_is_refused_by_name(tmp_path: Path) -> None:
    err = io.StringIO()
    code = run(["run", "--check-reference-solution", "--dataset-path", str(MINI), "--execution-isolation", "none"],
               io.StringIO(), err)  # fmt: skip
    assert code == 2 and "--execution-isolation" in err.getvalue()
    config = tmp_path / "c.yaml"
    config.write_text("run: {execution_isolation: shared}\n")
    err = io.StringIO()
    code = run(["run", "--check-reference-solution", "--dataset-path", str(MINI), "--config", str(config)],
               io.StringIO(), err)  # fmt: skip
    assert code == 2 and "execution_isolation" in err.getvalue()


def test_submit_puts_several_candidates_in_a_pod_only_in_fast_mode() -> None:
    err = io.StringIO()
    code = run(["submit", "--check-reference-solution", "--dataset-path", str(MINI), "--candidates-per-pod", "4",
                "--dry-run"], io.StringIO(), err)  # fmt: skip
    assert code == 2 and "--candidates-per-pod 4" in err.getvalue() and "fork_per_test" in err.getvalue()
    out = io.StringIO()
    code = run(["submit", "--check-reference-solution", "--dataset-path", str(MINI), "--execution-isolation",
                "fork_per_test", "--candidates-per-pod", "4", "--dry-run"], out, io.StringIO())  # fmt: skip
    assert code == 0
    (doc,) = yaml.safe_load_all(out.getvalue())
    jobs = [o for o in doc["objects"] if o["kind"] == "Job"]
    run_spec = next(o for o in doc["objects"] if o["kind"] == "WPBenchRun")["spec"]
    items = [json.loads(j["metadata"]["annotations"]["wpbench-k8s.org/item-ids"]) for j in jobs]
    assert run_spec["candidatesPerPod"] == 4 and items == [["mini-hooks-001", "mini-shortcodes-001"]]
    assert all(j["spec"]["template"]["spec"]["containers"][0]["args"][0] == "--sequence" for j in jobs)
    assert MAX_CANDIDATES_PER_POD == submit.MAX_CANDIDATES_PER_POD  # the CLI's bound is the CRD's
    # `run --executor kubernetes` grades one test per pod: fast mode stays Docker's there
    with pytest.raises(ExecutorError, match="Docker executor only"):
        KubernetesExecutor(GraderSpec(execution_isolation="fork_per_test"), "run").preflight()
