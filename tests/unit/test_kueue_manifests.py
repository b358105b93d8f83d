"""Kueue's install manifests for the local cluster (hack/kueue/manifests.py), built from the real module's
config/ tree: what keeps the cluster's other users out of Kueue's reach is checked here, object by object."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
MODULE = Path(os.environ.get("WPBENCH_CACHE", "/var/cache/wpbench")) / "go" / "mod" / "sigs.k8s.io" / "kueue@v0.17.0"


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    if not (MODULE / "config").is_dir():
        pytest.skip(f"{MODULE} is not in the module cache (make kueue)")
    spec = importlib.util.spec_from_file_location("kueue_manifests", REPO / "hack" / "kueue" / "manifests.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.manifests(MODULE, "10.244.0.1", "wpbench-kueue:v0.17.0", b"CA", 16443, 19443, 19444)


def test_only_labelled_jobs_reach_kueues_job_webhooks(docs):
    hooks = [h for d in docs if d["kind"].endswith("WebhookConfiguration") for h in d["webhooks"]]
    assert hooks
    groups = {g for h in hooks for r in h["rules"] for g in r["apiGroups"]}
    assert groups == {"kueue.x-k8s.io", "batch"}  # no pod, Deployment, StatefulSet, ... webhooks
    for hook in hooks:
        assert "service" not in hook["clientConfig"] and hook["clientConfig"]["url"].startswith(
            "https://10.244.0.1:19443/"
        )
        if {g for r in hook["rules"] for g in r["apiGroups"]} == {"batch"}:
            assert hook["objectSelector"] == {
                "matchExpressions": [{"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}]}  # fmt: skip


def test_kueue_manages_nothing_without_its_label(docs):
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap"]
    config = yaml.safe_load(cm["data"]["controller_manager_config.yaml"])
    assert config["manageJobsWithoutQueueName"] is False
    assert config["integrations"]["frameworks"] == ["batch/job"]
    assert config["internalCertManagement"] == {"enable": False}


def test_no_api_service_and_conversion_by_url(docs):
    assert not [d for d in docs if d["kind"] in ("APIService", "Service")]
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    assert len(crds) == 11 and all(d["spec"]["group"] == "kueue.x-k8s.io" for d in crds)
    converted = [d for d in crds if "conversion" in d["spec"]]
    assert {d["spec"]["names"]["plural"] for d in converted} == {
        "localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters"}  # fmt: skip
    for d in converted:
        assert d["spec"]["conversion"]["webhook"]["clientConfig"]["url"] == "https://10.244.0.1:19443/convert"


def test_rbac_is_kueues_own_renamed_into_its_namespace(docs):
    bindings = [d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    assert bindings
    for b in bindings:
        assert b["roleRef"]["name"].startswith("kueue-")
        assert b["subjects"] == [
            {"kind": "ServiceAccount", "name": "kueue-controller-manager", "namespace": "kueue-system"}
        ]
    (deploy,) = [d for d in docs if d["kind"] == "Deployment"]
    pod = deploy["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "kueue-controller-manager" and pod["hostNetwork"] is True
