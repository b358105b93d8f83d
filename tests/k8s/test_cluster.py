"""The real local Kubernetes (`make cluster-up`): what it is, and what only a real cluster shows."""

from __future__ import annotations

import json

import pytest
from clusterkit import Cluster
from kubernetes.client.exceptions import ApiException


@pytest.mark.local_cluster
def test_local_cluster_is_kubernetes_1_37_with_a_node_and_the_chart_controller(kube: Cluster):
    version = json.loads(kube.kubectl("get", "--raw", "/version").stdout)
    assert version["gitVersion"] == "v1.37.2"
    (node,) = kube.core.list_node().items
    assert {c.type: c.status for c in node.status.conditions}["Ready"] == "True"
    assert node.status.node_info.container_runtime_version.startswith("containerd://2.")
    deployment = json.loads(kube.kubectl("get", "deployment", "-n", "wpbench-system", "-o", "json").stdout)["items"]
    # The chart's default: two replicas, one of them leading (controller.replicas).
    assert [(d["spec"]["replicas"], d["status"].get("availableReplicas")) for d in deployment] == [(2, 2)]
    # The controller runs with its own ServiceAccount, never cluster-admin: refused what its Role does not grant.
    sa = deployment[0]["spec"]["template"]["spec"]["serviceAccountName"]
    as_sa = ("--as", f"system:serviceaccount:wpbench-system:{sa}")
    assert kube.kubectl("auth", "can-i", "create", "jobs", "-n", "wpbench", *as_sa, check=False).stdout.strip() == "yes"
    for verb, what, where in (("list", "secrets", "wpbench"), ("list", "pods", "kube-system"),
                              ("create", "clusterrolebindings", "default"), ("delete", "nodes", "default")):  # fmt: skip
        res = kube.kubectl("auth", "can-i", verb, what, "-n", where, *as_sa, check=False)
        assert res.stdout.strip() == "no", (verb, what, where, res.stdout)


def test_pod_security_admission_rejects_a_non_compliant_pod(space):
    # No securityContext at all: may run as root, may escalate, keeps capabilities, no seccomp profile.
    pod = {"metadata": {"name": "unhardened"}, "spec": {"containers": [{"name": "c", "image": "wpbench-grader:dev"}]}}
    with pytest.raises(ApiException) as err:
        space.cluster.core.create_namespaced_pod(space.namespace, pod)
    message = json.loads(err.value.body)["message"]
    assert err.value.status == 403 and 'violates PodSecurity "restricted:latest"' in message, message
