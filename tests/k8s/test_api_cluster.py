"""What the project relies on from the real API server (Kubernetes 1.37 of `make cluster-up`): watch expiry
as 1.37 sends it and the one watch loop surviving it, the WPBenchRun CRD's status subresource and schema,
and the object limits the payload and result shards are sized for."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator
from urllib.request import Request, urlopen

import pytest
from clusterkit import TEST_LABEL, Cluster, Space
from kubernetes.client.exceptions import ApiException

from wpbench_k8s.kube import crd
from wpbench_k8s.kube.client import Kind, Kube, Watcher, api_client
from wpbench_k8s.kube.payload import CHUNK_BUDGET

ETCD = "http://127.0.0.1:23790"  # the local cluster's etcd client URL (scripts/cluster-env.sh)


@pytest.fixture
def fresh_kind(kube: Cluster) -> Iterator[Kind]:
    """A resource type whose API-server watch cache was born a moment ago, so a watch from resourceVersion 1 is
    expired whatever the cluster's age.

    The watch cache of a built-in type starts when the API server does; on a cluster whose API server started on
    an empty etcd (a fresh machine's CI) it starts near revision 1 and, until its ring buffer evicts something, it
    still answers a watch from revision 1 with every event since (as a young cluster did). A CRD's watch cache starts
    when the CRD is established, at the current revision, so revision 1 is older than anything it holds. etcd is
    compacted too, so a watch the API server passes on to etcd is refused the same way."""
    group = "expiry.test.wpbench-k8s.org"
    plural = f"probes{uuid.uuid4().hex[:8]}"
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    kube.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", "labels": {TEST_LABEL: "true"}},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": plural, "singular": plural[:-1], "kind": plural.capitalize()},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}]},
    }))  # fmt: skip
    kind = Kind(f"{group}/v1", plural)
    try:
        kube.kubectl("wait", "--for=condition=Established", f"crd/{plural}.{group}", "--timeout=60s")
        deadline = time.monotonic() + 60
        while True:  # 429 while the new watch cache initialises; then a watch from 1 is answered with 410
            try:
                kube.custom.list_cluster_custom_object(group, "v1", plural, resource_version="0")
                break
            except ApiException:
                assert time.monotonic() < deadline, "the new watch cache never served a list"
                time.sleep(0.5)
        _compact_etcd()
        yield kind
    finally:
        kube.kubectl("delete", "crd", f"{plural}.{group}", "--wait=false", check=False)


def _compact_etcd() -> None:
    def post(path: str, body: dict[str, object]) -> dict[str, object]:
        with urlopen(Request(f"{ETCD}{path}", data=json.dumps(body).encode()), timeout=10) as resp:
            return json.load(resp)  # type: ignore[no-any-return]

    header = post("/v3/kv/range", {"key": "YQ==", "limit": 1})["header"]
    assert isinstance(header, dict)
    post("/v3/kv/compaction", {"revision": header["revision"]})


def _create(space: Space, kind: Kind, name: str) -> None:
    group, version = kind.api_version.split("/")
    space.cluster.custom.create_namespaced_custom_object(group, version, space.namespace, kind.plural,
                                                         {"apiVersion": kind.api_version, "kind": kind.plural.capitalize(),
                                                          "metadata": {"name": name}})  # fmt: skip


def test_an_expired_watch_is_an_error_event_in_a_200_stream(space: Space, fresh_kind: Kind) -> None:
    """1.37 answers a watch from a resourceVersion it no longer holds with HTTP 200 and one ERROR event
    carrying 410 (reason Expired): not an HTTP 410."""
    _create(space, fresh_kind, "present")  # something a replay from revision 1 would deliver
    group, version = fresh_kind.api_version.split("/")
    resp = space.cluster.custom.list_namespaced_custom_object(group, version, space.namespace, fresh_kind.plural,
                                                              watch=True, resource_version="1", timeout_seconds=5,
                                                              _preload_content=False)  # fmt: skip
    try:
        assert resp.status == 200
        (line,) = [line for line in resp.data.decode().splitlines() if line.strip()]
    finally:
        resp.release_conn()
    event = json.loads(line)
    assert event["type"] == "ERROR", event
    assert (event["object"]["code"], event["object"]["reason"]) == (410, "Expired"), event
    assert "too old" in event["object"]["message"], event


def test_the_watcher_relists_on_expiry_then_delivers_later_events(
    space: Space, fresh_kind: Kind, caplog: pytest.LogCaptureFixture
) -> None:
    _create(space, fresh_kind, "before")
    kube = Kube(api_client(str(space.kubeconfig)))
    watcher = Watcher(kube, fresh_kind, space.namespace, resource_version="1", deadline=time.monotonic() + 120)
    seen: list[tuple[str, str]] = []
    with caplog.at_level(logging.INFO, logger="wpbench_k8s.kube.client"):
        for event in watcher:
            name = event.object["metadata"]["name"]
            seen.append((event.type, name))
            if (event.type, name) == ("LISTED", "before"):  # the relist: a write now comes as a watch event
                _create(space, fresh_kind, "after")
            if (event.type, name) == ("ADDED", "after"):
                watcher.stop()
    assert watcher.relists == 1
    assert "resourceVersion 1 expired; relisting" in caplog.text
    assert seen[-1] == ("ADDED", "after") and ("LISTED", "before") in seen, seen


def test_the_crd_keeps_status_to_its_subresource_and_enforces_its_schema(space: Space) -> None:
    custom = space.cluster.custom
    args = (crd.GROUP, crd.VERSION, space.namespace, crd.PLURAL)
    body = {"apiVersion": crd.API_VERSION, "kind": crd.KIND, "metadata": {"name": "r"},
            "spec": {"runId": "x", "manifestDigest": "sha256:" + "0" * 64, "payload": {"configMaps": ["r-payload-0"]}},
            "status": {"phase": "Succeeded"}}  # fmt: skip
    run = custom.create_namespaced_custom_object(*args, body)
    assert "status" not in run  # status is dropped on create
    custom.patch_namespaced_custom_object(*args, "r", {"status": {"phase": "Failed"}})
    assert "status" not in custom.get_namespaced_custom_object(*args, "r")  # nor written through the main resource
    custom.patch_namespaced_custom_object_status(*args, "r", {"status": {"phase": "Running"}})
    got = custom.get_namespaced_custom_object(*args, "r")
    assert got["status"] == {"phase": "Running"} and got["metadata"]["generation"] == 1
    with pytest.raises(ApiException) as exc:  # the schema: maxInFlight >= 1
        custom.patch_namespaced_custom_object(*args, "r", {"spec": {"maxInFlight": 0}})
    assert exc.value.status == 422
    with pytest.raises(ApiException) as exc:  # custom resources take merge and JSON patches, never strategic merge
        custom.patch_namespaced_custom_object(*args, "r", {"spec": {"cancel": True}},
                                              _content_type="application/strategic-merge-patch+json")  # fmt: skip
    assert exc.value.status == 415


def test_a_full_shard_fits_and_more_than_a_config_map_holds_is_refused(space: Space) -> None:
    core = space.cluster.core
    full = {"metadata": {"name": "shard"}, "data": {"k": "x" * CHUNK_BUDGET}}
    core.create_namespaced_config_map(space.namespace, full, dry_run="All")
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map(space.namespace, {"metadata": {"name": "big"},
                                                            "data": {"k": "x" * (1024 * 1024 + 1)}}, dry_run="All")  # fmt: skip
    assert exc.value.status in (413, 422), exc.value.body
