"""The real API server's 429 (API Priority and Fairness), waited out as its Retry-After says (issue 29).

A FlowSchema sends one ServiceAccount's requests to a PriorityLevel with no seats of its own and queuing off
(`Reject`). Such a level still dispatches a request when none of its requests is executing, so the test holds
that one seat itself: a create whose body it never finishes sending keeps the API server's handler (past
APF's admission) waiting. While it is held, every other request of the ServiceAccount is refused with a real
429; the seat is released by closing that connection. The API server's own APF dump says when the seat is
held and when it is free, so nothing here depends on timing.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pytest
from kubernetes import client as k8s
from kubernetes import config

from wpbench_controller.metrics import Metrics
from wpbench_k8s.kube.client import CONFIG_MAPS, Kube, Throttled, urllib3_retries

clusterkit = pytest.importorskip("clusterkit", reason="the real-cluster kit (tests/k8s/clusterkit.py) is not here yet")
Space = clusterkit.Space
pytestmark = pytest.mark.k8s
FLOWCONTROL = "flowcontrol.apiserver.k8s.io/v1"


def executing(space: Space, level: str) -> int:
    """Requests of `level` executing now, from the API server's APF dump."""
    dump = space.cluster.kubectl("get", "--raw", "/debug/api_priority_and_fairness/dump_priority_levels").stdout
    for line in dump.splitlines()[1:]:
        cells = [c.strip() for c in line.split(",")]
        if cells[0] == level:
            return int(cells[5])
    raise AssertionError(f"priority level {level} not in the APF dump:\n{dump}")


class Seat:
    """The level's one seat, held by a create whose body is never finished."""

    def __init__(self, cfg: k8s.Configuration, token: str, namespace: str) -> None:
        url = urlparse(cfg.host)
        context = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
        context.set_alpn_protocols(["http/1.1"])
        raw = socket.create_connection((url.hostname, url.port or 443), timeout=30)
        self.sock = context.wrap_socket(raw, server_hostname=url.hostname)
        head = (f"POST /api/v1/namespaces/{namespace}/configmaps HTTP/1.1\r\nHost: {url.netloc}\r\n"
                f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n")  # fmt: skip
        self.sock.sendall(head.encode() + b'{"metadata": {')

    def release(self) -> None:
        self.sock.close()


@pytest.fixture
def throttled(space: Space) -> Iterator[dict[str, Any]]:
    """A ServiceAccount (may create and read ConfigMaps of the test's namespace) whose requests go to a
    PriorityLevel of its own with no seats and queuing off; its token and a client configuration for it."""
    ns, name = space.namespace, space.namespace
    cluster = space.cluster
    cluster.kubectl("create", "serviceaccount", "throttled", "-n", ns)
    cluster.kubectl("create", "role", "cm", "-n", ns, "--verb=get,list,create", "--resource=configmaps")
    cluster.kubectl("create", "rolebinding", "cm", "-n", ns, "--role=cm", f"--serviceaccount={ns}:throttled")
    level = {"apiVersion": FLOWCONTROL, "kind": "PriorityLevelConfiguration", "metadata": {"name": name},
             "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 0, "lendablePercent": 0,
                                                      "borrowingLimitPercent": 0, "limitResponse": {"type": "Reject"}}}}  # fmt: skip
    flow = {"apiVersion": FLOWCONTROL, "kind": "FlowSchema", "metadata": {"name": name},
            "spec": {"priorityLevelConfiguration": {"name": name}, "matchingPrecedence": 200,
                     "distinguisherMethod": {"type": "ByUser"},
                     "rules": [{"subjects": [{"kind": "ServiceAccount",
                                              "serviceAccount": {"name": "throttled", "namespace": ns}}],
                                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                   "namespaces": ["*"], "clusterScope": True}]}]}}  # fmt: skip
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [level, flow]}))
    try:
        token = cluster.kubectl("create", "token", "throttled", "-n", ns).stdout.strip()
        cfg = k8s.Configuration()
        config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=cfg, persist_config=False)
        cfg.cert_file = cfg.key_file = None  # the ServiceAccount, not the admin's client certificate
        cfg.api_key = {"authorization": f"Bearer {token}"}
        cfg.retries = urllib3_retries()  # as api_client() configures it
        uid = json.loads(cluster.kubectl("get", "prioritylevelconfiguration", name, "-o", "json").stdout)["metadata"][
            "uid"
        ]

        probe = Kube(k8s.ApiClient(cfg))

        def routed() -> bool:  # the API server's APF configuration has taken the new objects in
            response = probe._open("GET", CONFIG_MAPS.path(ns))
            response.release_conn()
            return response.headers.get("X-Kubernetes-PF-PriorityLevel-UID") == uid

        space.wait_for(routed, 60, "the FlowSchema to route the ServiceAccount's requests")
        yield {"cfg": cfg, "token": token, "level": name}
    finally:
        cluster.kubectl("delete", "flowschema", name, "--ignore-not-found", check=False)
        cluster.kubectl("delete", "prioritylevelconfiguration", name, "--ignore-not-found", check=False)


def test_real_429s_are_waited_out_as_retry_after_says_and_counted(space: Space, throttled: dict[str, Any]) -> None:
    ns, level = space.namespace, throttled["level"]
    metrics = Metrics()
    waits: list[float] = []
    kube = Kube(k8s.ApiClient(throttled["cfg"]), observer=metrics,
                sleep=lambda s: (waits.append(s), time.sleep(s)))  # fmt: skip

    # 1. the seat held all along: every try is refused; the client gives up after its bounded tries
    seat = Seat(throttled["cfg"], throttled["token"], ns)
    try:
        space.wait_for(lambda: executing(space, level) == 1, 60, "the held create to take the level's seat")
        with pytest.raises(Throttled) as caught:
            kube.get(CONFIG_MAPS, ns, "anything")
    finally:
        seat.release()
    assert caught.value.status == 429, caught.value
    assert len(waits) == kube.throttle_tries - 1 and len(set(waits)) == 1 and 0 < waits[0] <= 30, waits
    print("the API server's Retry-After:", waits[0], "s")
    assert (
        metrics.registry.get_sample_value(
            "wpbench_api_requests_total", {"verb": "get", "resource": "configmaps", "code": "429"}
        )
        == kube.throttle_tries
    )
    assert (
        metrics.registry.get_sample_value("wpbench_api_throttled_total", {"verb": "get", "resource": "configmaps"})
        == kube.throttle_tries - 1
    )

    # 2. the seat freed during the first wait: the write is sent again once and succeeds
    space.wait_for(lambda: executing(space, level) == 0, 60, "the seat to be free")
    seat = Seat(throttled["cfg"], throttled["token"], ns)
    space.wait_for(lambda: executing(space, level) == 1, 60, "the held create to take the level's seat")
    waits.clear()

    def release_then_wait(seconds: float) -> None:
        seat.release()
        space.wait_for(lambda: executing(space, level) == 0, 60, "the seat to be free")
        waits.append(seconds)
        time.sleep(seconds)

    kube._sleep = release_then_wait
    made = kube.create(CONFIG_MAPS, ns, {"metadata": {"name": "after-a-429"}, "data": {"k": "v"}})
    assert made["metadata"]["name"] == "after-a-429" and len(waits) == 1
    assert (
        metrics.registry.get_sample_value(
            "wpbench_api_requests_total", {"verb": "create", "resource": "configmaps", "code": "201"}
        )
        == 1
    )
    assert (
        metrics.registry.get_sample_value("wpbench_api_throttled_total", {"verb": "create", "resource": "configmaps"})
        == 1
    )
