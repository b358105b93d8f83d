"""`wpbench-k8s requeue` and the verdict cache on the real local Kubernetes (`make cluster-up`).

An item is made to end infra_error for real: a ValidatingAdmissionPolicy (bound to this test's namespace
only) refuses its grader pods, so its Job reaches its deadline without a pod (outcome rule 1, no retries
left). Requeued once the policy is gone, the run ends with every item final and records equal to an
uninterrupted run's. Submitted again with the cache on, nothing is graded (no grader Job) and the records
are the earlier ones byte for byte apart from `cached`; one byte of a test changed grades that item alone.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from clusterkit import TEST_LABEL, PodRecorder, Space, ensure_crd_fields, records
from modelkit import normalise

pytestmark = pytest.mark.docker

REFUSED_TEST = "mini-hooks-001"
TERMINAL = ("Succeeded", "Failed", "Cancelled")


@contextmanager
def pods_refused(space: Space, test_id: str) -> Iterator[None]:
    """Grader pods of `test_id` in this namespace are refused at admission while inside the block."""
    name = f"{space.namespace}-refuse-{test_id}"
    label = "wpbench-k8s.org/test"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": {TEST_LABEL: "true"}},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                    "operations": ["CREATE"], "resources": ["pods"]}]},
            "validations": [{"expression": f"!has(object.metadata.labels) || !('{label}' in object.metadata.labels)"
                                           f" || object.metadata.labels['{label}'] != '{test_id}'",
                             "message": f"grader pods of {test_id} are refused by the test"}],
        },
    }  # fmt: skip
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": {TEST_LABEL: "true"}},
        "spec": {"policyName": name, "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchLabels": {
                     "kubernetes.io/metadata.name": space.namespace}}}},
    }  # fmt: skip
    locked = {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }  # Pod Security `restricted` admits it before the policy
    probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": space.namespace,
             "labels": {label: test_id}}, "spec": {"containers": [{"name": "c", "image": "none",
                                                                   "securityContext": locked}]}}  # fmt: skip
    for doc in (policy, binding):
        space.cluster.kubectl("apply", "-f", "-", input=json.dumps(doc))
    try:  # the policy takes effect once the API server has compiled it
        space.wait_for(
            lambda: "refused by the test" in space.cluster.kubectl(
                "create", "--dry-run=server", "-f", "-", input=json.dumps(probe), check=False).stderr,
            60, "the admission policy to refuse pods",
        )  # fmt: skip
        yield
    finally:
        for kind in ("validatingadmissionpolicybinding", "validatingadmissionpolicy"):
            space.cluster.kubectl("delete", kind, name, "--ignore-not-found", check=False)


def finished(space: Space, name: str, requeued: int = 0, timeout: float = 900) -> dict[str, Any]:
    """The run once terminal, after the controller has acted on `requeued` requeue requests."""

    def done() -> dict[str, Any] | None:
        run = space.run_object(name)
        st = run.get("status") or {}
        return run if st.get("phase") in TERMINAL and int(st.get("requeued") or 0) >= requeued else None

    return space.wait_for(done, timeout, f"run {name} to finish")  # type: ignore[no-any-return]


def fetched(space: Space, name: str, out: Path) -> list[dict[str, Any]]:
    space.cli("results", name, "-o", str(out))
    return records(out)


def without(rec: dict[str, Any], *keys: str) -> str:
    """The record's JSON minus `keys` (the rest compared byte for byte)."""
    return json.dumps({k: v for k, v in rec.items() if k not in keys}, sort_keys=True)


def test_requeue_finishes_infra_errors_and_the_cache_grades_nothing_twice(
    space: Space, mini_suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WPBENCH_NO_CACHE", "0")  # tests/conftest.py turns the cache off for every other test
    suite = tmp_path / "suite"
    shutil.copytree(mini_suite, suite)
    jobs = PodRecorder(space.cluster, space.namespace, kind="jobs")
    ensure_crd_fields(space.cluster)  # again: another checkout's chart test may have put its own CRD back
    assert space.pods is not None
    space.install_controller("controller.startSeconds=30")
    flags = ["--check-reference-solution", "--dataset-path", str(suite), "--timeout", "20", "--max-in-flight", "2",
             "--infra-retries", "0"]  # fmt: skip

    missing = space.cli("requeue", "wpb-no-such-run", check=False)
    assert missing.returncode == 2 and "no run" in missing.stderr, missing.stderr

    with pods_refused(space, REFUSED_TEST):
        first = space.cli("submit", *flags).stdout.strip()
        running = space.cli("requeue", first, check=False)
        assert running.returncode == 2 and "requeue a finished run" in running.stderr, running.stderr
        run = finished(space, first)
    st = run["status"]
    assert (st["phase"], st["done"], st["passed"], st["infraErrors"]) == ("Succeeded", 2, 1, 1), st
    broken = {r["item_id"]: r for r in fetched(space, first, tmp_path / "before.jsonl")}
    assert broken[REFUSED_TEST]["grader"]["status"] == "infra_error", broken[REFUSED_TEST]["grader"]
    kept_id = next(i for i in broken if i != REFUSED_TEST)
    assert space.pods.per_item() == {kept_id: 1}  # the refused item never had a pod

    ensure_crd_fields(space.cluster)
    out = space.cli("requeue", first).stdout
    assert "1 infra error(s) and 0 never graded" in out, out
    st = finished(space, first, requeued=1)["status"]
    assert (st["phase"], st["done"], st["passed"], st["infraErrors"], st["requeued"]) == ("Succeeded", 2, 2, 0, 1)
    requeued = fetched(space, first, tmp_path / "requeued.jsonl")
    assert sorted(r["item_id"] for r in requeued) == sorted(broken)  # none lost, none duplicated
    assert all(r["grader"]["status"] == "passed" for r in requeued)
    assert without(next(r for r in requeued if r["item_id"] == kept_id)) == without(broken[kept_id])  # kept as it was
    assert space.pods.per_item() == {kept_id: 1, REFUSED_TEST: 1}  # only the infra error was graded again
    again = space.cli("requeue", first)
    assert "nothing to requeue" in again.stdout

    # The same run uninterrupted, graded from scratch: the requeued run's records are its records.
    t0 = time.monotonic()
    second = space.cli("submit", *flags, "--no-cache").stdout.strip()
    assert finished(space, second)["status"]["cached"] == 0
    graded_s = time.monotonic() - t0
    uninterrupted = fetched(space, second, tmp_path / "uninterrupted.jsonl")
    assert [normalise(r) for r in requeued] == [normalise(r) for r in uninterrupted]
    assert space.pods.per_item() == {kept_id: 2, REFUSED_TEST: 2}

    # Submitted again with the cache on: the first run's verdicts, nothing graded.
    jobs_before = dict(jobs.per_item())
    t0 = time.monotonic()
    third = space.cli("submit", *flags).stdout.strip()
    st = finished(space, third)["status"]
    cached_s = time.monotonic() - t0
    want = ("Succeeded", 2, 2, 2)
    events = space.cluster.kubectl("get", "events", "-n", space.namespace, check=False).stdout[-6000:]
    assert (st["phase"], st["done"], st["passed"], st["cached"]) == want, f"{st}\n{space.controller_log()}\n{events}"
    assert st["graderImageID"].startswith("sha256:"), st  # what the image-probe pod reported before grading

    def probe_gone() -> bool:
        return all(p["metadata"]["name"] != f"{third}-image-probe" for p in space.objects("pods"))

    space.wait_for(probe_gone, 120, "the image-probe pod to be deleted")
    cached = fetched(space, third, tmp_path / "cached.jsonl")
    assert jobs.per_item() == jobs_before  # no grader Job at all
    assert all(r["cached"] for r in cached)
    assert [without(r, "run_id", "cached") for r in cached] == [without(r, "run_id", "cached") for r in requeued]
    summary = json.loads((tmp_path / "cached.json").read_text())
    assert summary["metadata"]["cache"] == {"enabled": True, "cached_records": 2}
    assert summary["metadata"]["runtime_image_id"] == st["graderImageID"]
    print(f"\ncluster, 2 reference items: graded run {graded_s:.1f} s, cached re-submit {cached_s:.1f} s "
          f"(submit to Succeeded; ratio {graded_s / cached_s:.1f}x)")  # fmt: skip

    # One byte of one test changed: that item alone is graded again.
    path = suite / "execution" / "shortcodes.json"
    doc = json.loads(path.read_text())
    tests = doc if isinstance(doc, list) else doc["tests"]
    tests[0]["reference_solution"] += " "
    path.write_text(json.dumps(doc))
    changed_id = tests[0]["id"]
    fourth = space.cli("submit", *flags).stdout.strip()
    st = finished(space, fourth)["status"]
    assert (st["phase"], st["passed"], st["cached"]) == ("Succeeded", 2, 1), st
    by_id = {r["item_id"]: r for r in fetched(space, fourth, tmp_path / "changed.jsonl")}
    assert not by_id[changed_id]["cached"] and all(r["cached"] for i, r in by_id.items() if i != changed_id)
    grew = {i: n - jobs_before.get(i, 0) for i, n in jobs.per_item().items()}
    assert {i: n for i, n in grew.items() if n} == {changed_id: 1}, grew
    jobs.stop()
