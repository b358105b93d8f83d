"""Queueing and placement in the objects `submit --dry-run` prints, validated strictly against the Kubernetes
OpenAPI schema (no cluster needed): a run naming a LocalQueue gets suspended, labelled grader Jobs; a run
without one gets exactly today's Jobs; placement reaches the pod spec and cannot loosen the lock-down."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from clusterkit import REPO
from clusterkit import validate_object as validate

from wpbench_k8s.kube.placement import NO_EVICTION_ANNOTATIONS, PRIORITY_LABEL, QUEUE_LABEL, Placement, parse_placement


def submit(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    env["KUBECONFIG"] = str(tmp_path / "absent-kubeconfig")
    return subprocess.run([sys.executable, "-m", "wpbench_k8s", "submit", "--check-reference-solution", "--dry-run",
                           *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=300)  # fmt: skip


def objects(tmp_path: Path, *args: str) -> list[dict]:
    res = submit(tmp_path, *args)
    assert res.returncode == 0, res.stderr[-3000:]
    (document,) = [doc for doc in yaml.safe_load_all(res.stdout) if doc]
    for obj in document["objects"]:
        validate(obj)
    return document["objects"]


def jobs(docs: list[dict]) -> list[dict]:
    found = [d for d in docs if d["kind"] == "Job"]
    assert found
    return found


PLACEMENT = {
    "imagePullSecrets": ["registry-creds"],
    "nodeSelector": {"wpbench.example/pool": "graders"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "graders", "effect": "NoSchedule"}],
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]}}},
    "priorityClassName": "wpbench-low",
    "runtimeClassName": "gvisor",
}  # fmt: skip


def test_a_queued_run_gets_suspended_labelled_jobs(tmp_path, mini_suite):
    docs = objects(tmp_path, "--dataset-path", str(mini_suite), "--name", "q", "--queue", "team-a",
                   "--workload-priority-class", "batch-low")  # fmt: skip
    run = next(d for d in docs if d["kind"] == "WPBenchRun")
    assert run["spec"]["queue"] == "team-a" and run["spec"]["workloadPriorityClass"] == "batch-low"
    for job in jobs(docs):
        assert job["spec"]["suspend"] is True
        assert job["metadata"]["labels"][QUEUE_LABEL] == "team-a"
        assert job["metadata"]["labels"][PRIORITY_LABEL] == "batch-low"
        # Kueue reads the Job's labels; the pod keeps the grader labels the NetworkPolicy selects
        assert QUEUE_LABEL not in job["spec"]["template"]["metadata"]["labels"]


def test_a_run_without_a_queue_is_as_before(tmp_path, mini_suite):
    docs = objects(tmp_path, "--dataset-path", str(mini_suite), "--name", "plain")
    run = next(d for d in docs if d["kind"] == "WPBenchRun")
    assert not {"queue", "workloadPriorityClass", "placement"} & set(run["spec"])
    for job in jobs(docs):
        assert "suspend" not in job["spec"]
        assert not any(k.startswith("kueue.x-k8s.io/") for k in job["metadata"]["labels"])
        pod = job["spec"]["template"]["spec"]
        assert not {"nodeSelector", "tolerations", "affinity", "imagePullSecrets", "priorityClassName",
                    "runtimeClassName"} & set(pod)  # fmt: skip
        # every grader pod asks autoscalers not to take its node away mid-grade
        assert job["spec"]["template"]["metadata"]["annotations"].items() >= NO_EVICTION_ANNOTATIONS.items()


def test_queue_from_the_config_and_the_flag_wins(tmp_path, mini_suite):
    config = tmp_path / "wp-bench.yaml"
    config.write_text(yaml.safe_dump({"dataset": {"path": str(mini_suite)}, "run": {"queue": "from-config"}}))
    (job, *_) = jobs(objects(tmp_path, "--config", str(config), "--name", "c"))
    assert job["metadata"]["labels"][QUEUE_LABEL] == "from-config"
    (job, *_) = jobs(objects(tmp_path, "--config", str(config), "--name", "c", "--queue", "flag"))
    assert job["metadata"]["labels"][QUEUE_LABEL] == "flag"


def test_placement_reaches_the_pod_spec(tmp_path, mini_suite):
    path = tmp_path / "placement.yaml"
    path.write_text(yaml.safe_dump(PLACEMENT))
    docs = objects(tmp_path, "--dataset-path", str(mini_suite), "--name", "p", "--placement", str(path))
    run = next(d for d in docs if d["kind"] == "WPBenchRun")
    assert run["spec"]["placement"] == PLACEMENT
    for job in jobs(docs):
        pod = job["spec"]["template"]["spec"]
        assert pod["imagePullSecrets"] == [{"name": "registry-creds"}]
        assert pod["nodeSelector"] == PLACEMENT["nodeSelector"]
        assert pod["tolerations"] == PLACEMENT["tolerations"]
        assert pod["affinity"] == PLACEMENT["affinity"]
        assert pod["priorityClassName"] == "wpbench-low" and pod["runtimeClassName"] == "gvisor"
        assert pod["automountServiceAccountToken"] is False and pod["securityContext"]["runAsNonRoot"] is True


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        # placement cannot reach the lock-down: only the six fields are accepted
        ({"hostNetwork": True}, "hostNetwork"),
        ({"securityContext": {"runAsUser": 0}}, "securityContext"),
        ({"serviceAccountName": "admin"}, "serviceAccountName"),
        ({"tolerations": [{"key": "x", "operator": "Sometimes"}]}, "tolerations.0.operator"),
        ({"tolerations": [{"key": "x", "command": ["sh"]}]}, "tolerations.0.command"),
        ({"affinity": {"nodeName": "n1"}}, "affinity"),
        ({"runtimeClassName": "Not A Name"}, "runtimeClassName"),
        ({"imagePullSecrets": ["../etc"]}, "imagePullSecrets"),
        (["nodeSelector"], "a mapping"),
    ],
)
def test_bad_placement_is_refused_at_submit(tmp_path, mini_suite, doc, says):
    path = tmp_path / "placement.yaml"
    path.write_text(yaml.safe_dump(doc))
    res = submit(tmp_path, "--dataset-path", str(mini_suite), "--placement", str(path))
    assert res.returncode == 2, res.stderr
    assert str(path) in res.stderr and says in res.stderr and not res.stdout


@pytest.mark.parametrize("bad", ["Team_A", "-a", "a" * 64])
def test_bad_queue_names_are_refused(tmp_path, mini_suite, bad):
    res = submit(tmp_path, "--dataset-path", str(mini_suite), "--queue", bad)
    assert res.returncode == 2 and "--queue" in res.stderr and not res.stdout


def test_a_priority_without_a_queue_is_refused(tmp_path, mini_suite):
    res = submit(tmp_path, "--dataset-path", str(mini_suite), "--workload-priority-class", "high")
    assert res.returncode == 2 and "name a queue" in res.stderr


def test_a_run_field_replaces_the_release_default_whole():
    release = parse_placement({"nodeSelector": {"pool": "a", "zone": "z1"}, "runtimeClassName": "gvisor"}, "chart")
    run = parse_placement({"nodeSelector": {"pool": "b"}}, "run")
    merged = run.over(release)
    assert merged.node_selector == {"pool": "b"}  # not merged key by key: the run says where, entirely
    assert merged.runtime_class_name == "gvisor"
    assert Placement().over(release) == release and run.over(Placement()) == run
