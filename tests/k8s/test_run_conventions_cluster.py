"""A run on the real cluster follows the API conventions people script against (issue 29): `kubectl wait
--for=condition=Succeeded` returns when it ends, its lifecycle shows as Events on it, and the placement a run
asks for (over the release's defaults) is what the grader pods get."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import yaml

clusterkit = pytest.importorskip("clusterkit", reason="the real-cluster kit (tests/k8s/clusterkit.py) is not here yet")
Space, records = clusterkit.Space, clusterkit.records
pytestmark = pytest.mark.k8s


def run_events(space: Space, name: str) -> list[dict]:
    res = space.cluster.kubectl("get", "events", "-n", space.namespace, "-o", "json",
                                "--field-selector", f"involvedObject.kind=WPBenchRun,involvedObject.name={name}")  # fmt: skip
    return json.loads(res.stdout)["items"]


def test_kubectl_wait_for_succeeded_and_the_lifecycle_events(space: Space, mini_suite: Path, tmp_path: Path) -> None:
    space.install_controller()
    name = space.cli("submit", "--check-reference-solution", "--image", clusterkit.GRADER_IMAGE, "--dataset-path", str(mini_suite), "--no-cache",
                     "--test-id", "mini-hooks-001").stdout.strip()  # fmt: skip
    res = space.cluster.kubectl("wait", "-n", space.namespace, "--for=condition=Succeeded", f"wpbenchrun/{name}",
                                "--timeout=600s", timeout=620)  # fmt: skip
    assert "condition met" in res.stdout, res.stdout + res.stderr
    run = space.run_object(name)
    status = run["status"]
    assert status["phase"] == "Succeeded"
    conditions = {c["type"]: c for c in status["conditions"]}
    assert {k: c["status"] for k, c in conditions.items()} == {
        "Ready": "True", "Running": "False", "Succeeded": "True", "Failed": "False"}  # fmt: skip
    assert conditions["Succeeded"]["reason"] == "AllGraded" and conditions["Succeeded"]["message"]
    assert all(c["observedGeneration"] == run["metadata"]["generation"] for c in conditions.values())
    # the Running condition went True and then False: its transition is at or after Ready's
    assert conditions["Running"]["lastTransitionTime"] >= conditions["Ready"]["lastTransitionTime"]
    reasons = [e["reason"] for e in run_events(space, name)]
    assert reasons.count("Accepted") == 1 and reasons.count("Finished") == 1, reasons
    # a wait for the opposite outcome does not return: the run did not fail
    res = space.cluster.kubectl("wait", "-n", space.namespace, "--for=condition=Failed", f"wpbenchrun/{name}",
                                "--timeout=2s", check=False)  # fmt: skip
    assert res.returncode != 0


def test_a_cancelled_run_says_so_in_conditions_and_events(space: Space, mini_suite: Path) -> None:
    space.install_controller("controller.startSeconds=600")
    # a grader that can never be scheduled keeps the run Running until it is cancelled
    config = Path(space.tmp) / "huge.yaml"
    config.write_text(yaml.safe_dump({"dataset": {"path": str(mini_suite)}, "grader": {"limits": {"cpus": 64}}}))
    name = space.cli("submit", "--config", str(config), "--check-reference-solution", "--image", clusterkit.GRADER_IMAGE, "--no-cache",
                     "--test-id", "mini-hooks-001").stdout.strip()  # fmt: skip
    space.cluster.kubectl("wait", "-n", space.namespace, "--for=condition=Running", f"wpbenchrun/{name}",
                          "--timeout=300s", timeout=320)  # fmt: skip
    space.cli("cancel", name)
    run = space.wait_phase(name, 300)
    assert run["status"]["phase"] == "Cancelled"
    conditions = {c["type"]: (c["status"], c["reason"]) for c in run["status"]["conditions"]}
    assert conditions["Succeeded"] == ("False", "Cancelled") and conditions["Failed"] == ("False", "Cancelled")
    assert conditions["Running"] == ("False", "Cancelled")
    assert "Cancelled" in [e["reason"] for e in run_events(space, name)]


def test_a_runs_placement_over_the_release_default_reaches_the_grader_pod(
    space: Space, mini_suite: Path, tmp_path: Path
) -> None:
    cluster = space.cluster
    suffix = uuid.uuid4().hex[:8]
    priority, runtime = f"wpbench-test-{suffix}", f"wpbench-test-{suffix}"
    # Real classes, so the pod is admitted and runs: a PriorityClass and a RuntimeClass on containerd's runc.
    cluster.kubectl("create", "priorityclass", priority, "--value=10", "--description=wpbench test")
    cluster.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": runtime}, "handler": "runc"}))  # fmt: skip
    cluster.kubectl("create", "secret", "docker-registry", "pull-creds", "-n", space.namespace,
                    "--docker-server=registry.invalid", "--docker-username=u", "--docker-password=p")  # fmt: skip
    try:
        # release defaults: a node selector every node fails and a toleration; the run replaces the selector
        space.install_controller(
            "grader.placement.nodeSelector.wpbench-test/absent=yes",
            "grader.placement.tolerations[0].key=wpbench-test/dedicated",
            "grader.placement.tolerations[0].operator=Exists",
            "grader.placement.tolerations[0].effect=NoSchedule",
            f"grader.placement.priorityClassName={priority}",
        )
        placement = tmp_path / "placement.yaml"
        placement.write_text(yaml.safe_dump({
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "imagePullSecrets": ["pull-creds"],
            "runtimeClassName": runtime,
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}},
        }))  # fmt: skip
        name = space.cli("submit", "--check-reference-solution", "--image", clusterkit.GRADER_IMAGE, "--dataset-path", str(mini_suite), "--no-cache",
                         "--test-id", "mini-hooks-001", "--placement", str(placement)).stdout.strip()  # fmt: skip

        def grader_pod() -> dict | None:
            pods = json.loads(cluster.kubectl("get", "pods", "-n", space.namespace, "-o", "json", "-l",
                                              "app.kubernetes.io/component=grader").stdout)["items"]  # fmt: skip
            return pods[0] if pods else None

        pod = space.wait_for(grader_pod, 300, "the grader pod")
        spec = pod["spec"]
        assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}  # the run's, not the release's
        assert {"key": "wpbench-test/dedicated", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
        assert spec["priorityClassName"] == priority and spec["priority"] == 10  # admitted with the class
        assert spec["runtimeClassName"] == runtime and spec["imagePullSecrets"] == [{"name": "pull-creds"}]
        assert "nodeAffinity" in spec["affinity"]
        assert pod["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"
        run = space.wait_phase(name, 600)
        assert (run["status"]["phase"], run["status"]["passed"]) == ("Succeeded", 1), run["status"]
    finally:
        cluster.kubectl("delete", "priorityclass", priority, "--wait=false", check=False)
        cluster.kubectl("delete", "runtimeclass", runtime, "--wait=false", check=False)
