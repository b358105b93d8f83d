"""Every object `submit --dry-run` prints validates against the Kubernetes OpenAPI schema
(kubernetes-validate, strict: no unknown fields); the WPBenchRun against its CRD. No cluster is needed. What
the controller creates on the real cluster is validated so in test_controller_cluster.py, and every
submitted object round-trips the real API server in test_cluster_path.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from clusterkit import REPO
from clusterkit import validate_object as validate

from wpbench_k8s.kube.crd import crd
from wpbench_k8s.kube.objects import GRADER_UID


def cli(tmp_path: Path, *args: str) -> str:
    """The real `wpbench-k8s`, with a kubeconfig path that does not exist: nothing can reach a cluster."""
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    env["KUBECONFIG"] = str(tmp_path / "absent-kubeconfig")
    res = subprocess.run([sys.executable, "-m", "wpbench_k8s", *args], capture_output=True, text=True, cwd=REPO,
                         env=env, timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


def dry_run(tmp_path: Path, *args: str, flag: str = "--check-reference-solution") -> list[dict]:
    """The objects inside the one read-only document `submit --dry-run` prints."""
    out = cli(tmp_path, "submit", flag, "--dry-run", *args)
    (document,) = [doc for doc in yaml.safe_load_all(out) if doc]
    assert document["kind"] == "WPBenchDryRun"  # no cluster serves it: `kubectl apply` refuses the file
    return document["objects"]


def test_crd_validates():
    validate(crd())


def test_dry_run_objects_validate_and_cover_the_run(tmp_path, mini_suite):
    docs = dry_run(tmp_path, "--dataset-path", str(mini_suite), "--name", "dry", "--max-in-flight", "3")
    kinds = [d["kind"] for d in docs]
    assert kinds[:2] == ["Namespace", "WPBenchRun"]
    assert kinds.count("Job") == 2  # one per reference candidate
    assert "NetworkPolicy" in kinds and "ConfigMap" in kinds
    for doc in docs:
        validate(doc)
    ns = docs[0]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    run = docs[1]
    assert run["spec"]["maxInFlight"] == 3
    assert run["spec"]["payload"]["configMaps"] == [d["metadata"]["name"] for d in docs if d["kind"] == "ConfigMap"]
    policy = next(d for d in docs if d["kind"] == "NetworkPolicy")
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"] and "ingress" not in policy["spec"]


def test_dry_run_needs_no_cluster(mini_suite, tmp_path):
    out = cli(tmp_path, "submit", "--check-reference-solution", "--dry-run", "--dataset-path", str(mini_suite),
              "--kubeconfig", str(tmp_path / "also-absent"))  # fmt: skip
    assert "kind: WPBenchRun" in out


def test_grader_job_is_locked_down(tmp_path, mini_suite):
    docs = dry_run(tmp_path, "--dataset-path", str(mini_suite), "--name", "dry")
    job = next(d for d in docs if d["kind"] == "Job")
    spec = job["spec"]
    pod = spec["template"]["spec"]
    (c,) = pod["containers"]
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] and sc["readOnlyRootFilesystem"] and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]} and sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert (
        pod["securityContext"]["runAsUser"] == GRADER_UID
        and pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    )
    assert pod["automountServiceAccountToken"] is False and pod["enableServiceLinks"] is False
    assert pod["restartPolicy"] == "Never"
    assert c["resources"]["requests"] == c["resources"]["limits"] == {"cpu": "1", "memory": "512Mi"}
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["wordpress"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "256Mi"}
    assert vols["tmp"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "64Mi"}
    assert vols["task"]["configMap"]["items"] == [
        {"key": vols["task"]["configMap"]["items"][0]["key"], "path": "task.json"}
    ]
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert set(mounts) == {"/run/wpbench", "/tmp", "/etc/wpbench/task", "/dev/shm"}
    assert mounts["/etc/wpbench/task"]["readOnly"] and mounts["/dev/shm"]["readOnly"]
    assert vols[mounts["/dev/shm"]["name"]]["emptyDir"] == {"medium": "Memory", "sizeLimit": "1Mi"}
    assert c["args"] == ["/etc/wpbench/task/task.json"]
    assert pod["activeDeadlineSeconds"] >= 90 and spec["ttlSecondsAfterFinished"] > 0
    # One attempt per Job: the controller (like a local run's pipeline) decides about another.
    assert spec["backoffLimit"] == 0 and "podFailurePolicy" not in spec
    assert spec["activeDeadlineSeconds"] > pod["activeDeadlineSeconds"]  # room to be scheduled and started
    assert pod["dnsPolicy"] == "None" and pod["dnsConfig"]["nameservers"] == ["127.0.0.1"]
    labels = spec["template"]["metadata"]["labels"]
    for key in ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component",
                "app.kubernetes.io/managed-by", "wpbench-k8s.org/run", "wpbench-k8s.org/test", "wpbench-k8s.org/model"):  # fmt: skip
        assert key in labels
    assert labels["wpbench-k8s.org/model"] == "reference-solution"


@pytest.mark.parametrize("flag", ["--check-exploits"])
def test_other_modes_dry_run_validate(tmp_path, mini_suite, flag):
    docs = dry_run(tmp_path, "--dataset-path", str(mini_suite), "--name", "modes", "-n", "wpbench", flag=flag)
    assert sum(d["kind"] == "Job" for d in docs) > 2
    for doc in docs:
        validate(doc)
