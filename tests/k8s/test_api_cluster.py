"""What the project relies on from the real API server (Kubernetes 1.37 of `make cluster-up`): watch expiry
as 1.37 sends it and the one watch loop surviving it, the WPBenchRun CRD's status subresource and schema,
and the object limits the payload and result shards are sized for."""

from __future__ import annotations

import json
import logging
import time
from urllib.request import Request, urlopen

import pytest
from clusterkit import Space
from kubernetes.client.exceptions import ApiException

from wpbench_k8s.kube import crd
from wpbench_k8s.kube.client import CONFIG_MAPS, Kube, Watcher, api_client
from wpbench_k8s.kube.payload import CHUNK_BUDGET

ETCD = "http://127.0.0.1:23790"  # the local cluster's etcd client URL (scripts/cluster-env.sh)


@pytest.fixture
def history_compacted() -> None:
    """Compacts etcd at its current revision. The API server compacts every 5 minutes; on a cluster younger than
    that (a fresh machine's CI) etcd still holds revision 1 and a watch from it is answered, not expired."""

    def post(path: str, body: dict[str, object]) -> dict[str, object]:
        with urlopen(Request(f"{ETCD}{path}", data=json.dumps(body).encode()), timeout=10) as resp:
            return json.load(resp)  # type: ignore[no-any-return]

    header = post("/v3/kv/range", {"key": "YQ==", "limit": 1})["header"]
    assert isinstance(header, dict)
    post("/v3/kv/compaction", {"revision": header["revision"]})


@pytest.mark.usefixtures("history_compacted")
def test_an_expired_watch_is_an_error_event_in_a_200_stream(space: Space) -> None:
    """1.37 answers a watch from a resourceVersion it no longer holds with HTTP 200 and one ERROR event
    carrying 410 (reason Expired): not an HTTP 410."""
    resp = space.cluster.core.list_namespaced_config_map(space.namespace, watch=True, resource_version="1",
                                                         timeout_seconds=5, _preload_content=False)  # fmt: skip
    try:
        assert resp.status == 200
        (line,) = [line for line in resp.data.decode().splitlines() if line.strip()]
    finally:
        resp.release_conn()
    event = json.loads(line)
    assert event["type"] == "ERROR", event
    assert (event["object"]["code"], event["object"]["reason"]) == (410, "Expired"), event
    assert "too old" in event["object"]["message"], event


@pytest.mark.usefixtures("history_compacted")
def test_the_watcher_relists_on_expiry_then_delivers_later_events(
    space: Space, caplog: pytest.LogCaptureFixture
) -> None:
    core = space.cluster.core
    core.create_namespaced_config_map(space.namespace, {"metadata": {"name": "before"}})
    kube = Kube(api_client(str(space.kubeconfig)))
    watcher = Watcher(kube, CONFIG_MAPS, space.namespace, resource_version="1", deadline=time.monotonic() + 120)
    seen: list[tuple[str, str]] = []
    with caplog.at_level(logging.INFO, logger="wpbench_k8s.kube.client"):
        for event in watcher:
            name = event.object["metadata"]["name"]
            seen.append((event.type, name))
            if (event.type, name) == ("LISTED", "before"):  # the relist: a write now comes as a watch event
                core.create_namespaced_config_map(space.namespace, {"metadata": {"name": "after"}})
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
