"""The test API server behaves like Kubernetes where the controller relies on it (via the official client)."""

from __future__ import annotations

import json
import threading
import time

import pytest
from kubernetes import client as k8s
from kubernetes import config, watch
from simkit import NAMESPACE

from wpbench_k8s.kube import crd


@pytest.fixture
def api(sim):
    return config.new_client_from_config(str(sim.kubeconfig))


def cm(name: str, **labels: str) -> dict:
    return {"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}


def test_crud_uid_resource_version_and_conflicts(api):
    core = k8s.CoreV1Api(api)
    a = core.create_namespaced_config_map(NAMESPACE, cm("a"))
    assert a.metadata.uid and int(a.metadata.resource_version) > 0
    with pytest.raises(k8s.ApiException) as exc:
        core.create_namespaced_config_map(NAMESPACE, cm("a"))
    assert exc.value.status == 409 and json.loads(exc.value.body)["reason"] == "AlreadyExists"
    stale = a.metadata.resource_version
    core.patch_namespaced_config_map("a", NAMESPACE, {"data": {"k2": "v2"}})
    with pytest.raises(k8s.ApiException) as exc:
        core.replace_namespaced_config_map(
            "a", NAMESPACE, {"metadata": {"name": "a", "resourceVersion": stale}, "data": {}}
        )
    assert exc.value.status == 409
    assert core.read_namespaced_config_map("a", NAMESPACE).data == {"k": "v", "k2": "v2"}
    with pytest.raises(k8s.ApiException) as exc:
        core.read_namespaced_config_map("missing", NAMESPACE)
    assert exc.value.status == 404
    with pytest.raises(k8s.ApiException) as exc:
        core.create_namespaced_config_map("no-such-ns", cm("b"))
    assert exc.value.status == 404


def test_label_selectors(api):
    core = k8s.CoreV1Api(api)
    core.create_namespaced_config_map(NAMESPACE, cm("x1", app="a", tier="1"))
    core.create_namespaced_config_map(NAMESPACE, cm("x2", app="a", tier="2"))
    core.create_namespaced_config_map(NAMESPACE, cm("x3", app="b"))

    def names(sel: str) -> list[str]:
        return [c.metadata.name for c in core.list_namespaced_config_map(NAMESPACE, label_selector=sel).items]

    assert names("app=a") == ["x1", "x2"]
    assert names("app=a,tier!=1") == ["x2"]
    assert names("tier in (1,2)") == ["x1", "x2"]
    assert names("app,!tier") == ["x3"]
    assert names("app notin (a)") == ["x3"]


def test_limits_match_a_real_cluster(api):
    core = k8s.CoreV1Api(api)
    with pytest.raises(k8s.ApiException) as exc:
        core.create_namespaced_config_map(
            NAMESPACE, {"metadata": {"name": "big"}, "data": {"k": "x" * (1024 * 1024 + 1)}}
        )
    assert exc.value.status in (413, 422)
    with pytest.raises(k8s.ApiException) as exc:
        core.create_namespaced_config_map(NAMESPACE, cm("bad", **{"wpbench-k8s.org/test": "x" * 64}))
    assert exc.value.status == 422


def test_status_subresource_and_merge_patch_only_for_custom_resources(api):
    custom = k8s.CustomObjectsApi(api)
    body = {"apiVersion": crd.API_VERSION, "kind": crd.KIND, "metadata": {"name": "r"},
            "spec": {"runId": "x", "manifestDigest": "sha256:" + "0" * 64, "payload": {"configMaps": ["r-payload-0"]}},
            "status": {"phase": "Succeeded"}}  # fmt: skip
    run = custom.create_namespaced_custom_object(crd.GROUP, crd.VERSION, NAMESPACE, crd.PLURAL, body)
    assert "status" not in run  # status is ignored on create
    custom.patch_namespaced_custom_object(
        crd.GROUP, crd.VERSION, NAMESPACE, crd.PLURAL, "r", {"status": {"phase": "X"}}
    )
    assert "status" not in custom.get_namespaced_custom_object(crd.GROUP, crd.VERSION, NAMESPACE, crd.PLURAL, "r")
    custom.patch_namespaced_custom_object_status(
        crd.GROUP, crd.VERSION, NAMESPACE, crd.PLURAL, "r", {"status": {"phase": "Running"}}
    )
    got = custom.get_namespaced_custom_object(crd.GROUP, crd.VERSION, NAMESPACE, crd.PLURAL, "r")
    assert got["status"] == {"phase": "Running"} and got["metadata"]["generation"] == 1
    with pytest.raises(k8s.ApiException) as exc:  # the CRD schema is enforced
        custom.patch_namespaced_custom_object(
            crd.GROUP, crd.VERSION, NAMESPACE, crd.PLURAL, "r", {"spec": {"maxInFlight": 0}}
        )
    assert exc.value.status == 422
    with pytest.raises(k8s.ApiException) as exc:  # no strategic merge patch for custom resources
        custom.patch_namespaced_custom_object(crd.GROUP, crd.VERSION, NAMESPACE, crd.PLURAL, "r", {"spec": {"cancel": True}},
                                              _content_type="application/strategic-merge-patch+json")  # fmt: skip
    assert exc.value.status == 415


def test_watch_from_resource_version_and_gone(api, sim):
    core = k8s.CoreV1Api(api)
    listed = core.list_namespaced_config_map(NAMESPACE)
    rv = listed.metadata.resource_version
    seen: list[tuple[str, str]] = []

    def consume() -> None:
        for ev in watch.Watch().stream(core.list_namespaced_config_map, NAMESPACE, resource_version=rv,
                                       label_selector="w=1", timeout_seconds=2):  # fmt: skip
            seen.append((ev["type"], ev["object"].metadata.name))

    t = threading.Thread(target=consume)
    t.start()
    time.sleep(0.3)
    core.create_namespaced_config_map(NAMESPACE, cm("w1", w="1"))
    core.create_namespaced_config_map(NAMESPACE, cm("other"))
    core.delete_namespaced_config_map("w1", NAMESPACE)
    t.join()
    assert seen == [("ADDED", "w1"), ("DELETED", "w1")]
    # a resourceVersion older than the event window: 410 Gone, as etcd compaction gives
    store = sim.cluster.store
    store.events = type(store.events)(list(store.events), maxlen=len(store.events) or 1)
    for i in range(3):
        core.create_namespaced_config_map(NAMESPACE, cm(f"fill{i}"))
    with pytest.raises(k8s.ApiException) as exc:
        for _ in watch.Watch().stream(
            core.list_namespaced_config_map, NAMESPACE, resource_version="1", timeout_seconds=1
        ):
            pass
    assert exc.value.status == 410


def test_garbage_collection_follows_owner_references_and_job_default_orphans(api, sim):
    core, batch = k8s.CoreV1Api(api), k8s.BatchV1Api(api)
    owner = core.create_namespaced_config_map(NAMESPACE, cm("owner"))
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": "child", "ownerReferences": [ref]}})
    core.delete_namespaced_config_map("owner", NAMESPACE)
    assert [c.metadata.name for c in core.list_namespaced_config_map(NAMESPACE).items] == []
    job = {"metadata": {"name": "j"}, "spec": {"template": {"spec": {"restartPolicy": "Never",
           "containers": [{"name": "grader", "image": "x", "securityContext": {"runAsNonRoot": True, "runAsUser": 1,
           "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}}]}}}}  # fmt: skip
    batch.create_namespaced_job(NAMESPACE, job)
    sim.wait_for(lambda: core.list_namespaced_pod(NAMESPACE).items, what="the job's pod")
    batch.delete_namespaced_job("j", NAMESPACE)  # no propagationPolicy: batch/v1 orphans the pods
    pods = core.list_namespaced_pod(NAMESPACE).items
    assert pods and not pods[0].metadata.owner_references
    batch.create_namespaced_job(NAMESPACE, {**job, "metadata": {"name": "j2"}})
    sim.wait_for(lambda: core.list_namespaced_pod(NAMESPACE, label_selector="job-name=j2").items, what="pod")
    batch.delete_namespaced_job("j2", NAMESPACE, propagation_policy="Background")
    assert core.list_namespaced_pod(NAMESPACE, label_selector="job-name=j2").items == []


def test_pod_security_restricted_rejects_an_unhardened_pod(api):
    core = k8s.CoreV1Api(api)
    with pytest.raises(k8s.ApiException) as exc:
        core.create_namespaced_pod(
            NAMESPACE, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
        )
    assert exc.value.status == 403 and "restricted" in json.loads(exc.value.body)["message"]


def test_discovery_and_table_for_kubectl(api, sim):
    import urllib.request

    with urllib.request.urlopen(f"{sim.cluster.url}/apis") as resp:
        groups = {g["name"] for g in json.load(resp)["groups"]}
    assert {"batch", crd.GROUP, "networking.k8s.io"} <= groups
    req = urllib.request.Request(f"{sim.cluster.url}/apis/{crd.GROUP}/{crd.VERSION}/namespaces/{NAMESPACE}/{crd.PLURAL}",
                                 headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})  # fmt: skip
    with urllib.request.urlopen(req) as resp:
        table = json.load(resp)
    assert [c["name"] for c in table["columnDefinitions"]][:4] == ["Name", "Phase", "Progress", "Score"]
