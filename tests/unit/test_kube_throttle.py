"""429 Too Many Requests is waited out as the server asks (Retry-After, bounded) and sent again; each wait
is counted in the controller's metrics.

The server is a real HTTP server on a loopback socket answering as kube-apiserver's API Priority and
Fairness filter does when it rejects a request: status 429, a `Retry-After` header, and a Status object
with reason TooManyRequests. (The same rejection from the real API server, through a FlowSchema on the
local cluster: tests/k8s/test_observability_cluster.py.)
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kubernetes import client as k8s

from wpbench_controller.metrics import Metrics
from wpbench_k8s.kube.client import (
    JOBS,
    RETRY_AFTER_DEFAULT,
    RETRY_AFTER_MAX,
    RUNS,
    Kube,
    NotFound,
    Throttled,
    Watcher,
    retry_after,
    urllib3_retries,
)

TOO_MANY = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "message": "Too many requests, please try again later.",
    "reason": "TooManyRequests",
    "details": {},
    "code": 429,
}


class Throttling(ThreadingHTTPServer):
    """Answers the first `refusals` requests with 429 and `Retry-After: <retry_after>`, then serves."""

    daemon_threads = True

    def __init__(self, refusals: int, retry_after: str | None = "2") -> None:
        self.refusals = refusals
        self.retry_after = retry_after
        self.seen: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), ThrottlingHandler)


class ThrottlingHandler(BaseHTTPRequestHandler):
    server: Throttling

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        with self.server.lock:
            self.server.seen.append((self.command, self.path))
            refuse = self.server.refusals > 0
            self.server.refusals -= 1
        if refuse:
            self._send(429, TOO_MANY, self.server.retry_after)
        elif self.command == "GET" and "watch=true" in self.path:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps({"type": "ADDED", "object": {"metadata": {"name": "r"}}}).encode() + b"\n")
        elif self.path.endswith("/missing"):
            self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound", "message": "no"}, None)
        elif self.command == "GET" and self.path.split("?")[0].endswith("/wpbenchruns"):
            self._send(200, {"items": [], "metadata": {"resourceVersion": "5"}}, None)
        else:
            self._send(200 if self.command != "POST" else 201, {"metadata": {"name": "r"}}, None)

    do_GET = do_POST = do_PATCH = do_DELETE = _answer

    def _send(self, code: int, body: dict, retry: str | None) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        if retry is not None:
            self.send_header("Retry-After", retry)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def serve(refusals: int, retry: str | None = "2") -> Throttling:
    srv = Throttling(refusals, retry)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.fixture
def servers() -> Iterator[list[Throttling]]:
    made: list[Throttling] = []
    yield made
    for srv in made:
        srv.shutdown()


def kube_for(srv: Throttling, metrics: Metrics, slept: list[float], **kw: object) -> Kube:
    cfg = k8s.Configuration()
    cfg.host = f"http://127.0.0.1:{srv.server_port}"
    cfg.retries = urllib3_retries()  # as api_client() configures it
    return Kube(k8s.ApiClient(cfg), read_timeout=5.0, observer=metrics, sleep=slept.append, **kw)  # type: ignore[arg-type]


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return value or 0.0


def test_a_throttled_write_waits_what_retry_after_says_and_is_sent_again(servers):
    srv = serve(refusals=2, retry="3")
    servers.append(srv)
    metrics, slept = Metrics(), []
    created = kube_for(srv, metrics, slept).create(JOBS, "ns", {"metadata": {"name": "j"}})
    assert created == {"metadata": {"name": "r"}}
    assert [m for m, _ in srv.seen] == ["POST", "POST", "POST"]  # refused twice, then done once
    assert slept == [3.0, 3.0]
    assert sample(metrics, "wpbench_api_throttled_total", verb="create", resource="jobs") == 2
    assert sample(metrics, "wpbench_api_throttle_wait_seconds_total") == 6.0
    assert sample(metrics, "wpbench_api_requests_total", verb="create", resource="jobs", code="429") == 2
    assert sample(metrics, "wpbench_api_requests_total", verb="create", resource="jobs", code="201") == 1


def test_a_server_that_keeps_refusing_ends_in_throttled_after_the_bounded_tries(servers):
    srv = serve(refusals=100, retry="1")
    servers.append(srv)
    metrics, slept = Metrics(), []
    with pytest.raises(Throttled) as caught:
        kube_for(srv, metrics, slept, throttle_tries=4).get(RUNS, "ns", "r")
    assert caught.value.status == 429 and caught.value.reason == "TooManyRequests"
    assert len(srv.seen) == 4 and slept == [1.0, 1.0, 1.0]  # no wait after the last try
    assert sample(metrics, "wpbench_api_throttled_total", verb="get", resource="wpbenchruns") == 3


def test_a_hostile_retry_after_cannot_stall_the_client(servers):
    # a day, a negative number, an HTTP date, nonsense: bounded, never negative, the default when unreadable
    srv = serve(refusals=1, retry="86400")
    servers.append(srv)
    slept: list[float] = []
    kube_for(srv, Metrics(), slept).get(RUNS, "ns", "r")
    assert slept == [RETRY_AFTER_MAX]
    assert retry_after("-5") == 0.0
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == RETRY_AFTER_DEFAULT
    assert retry_after("nan") == RETRY_AFTER_DEFAULT
    assert retry_after(None) == RETRY_AFTER_DEFAULT
    assert retry_after("0.5") == 0.5


def test_a_missing_retry_after_waits_the_default(servers):
    srv = serve(refusals=1, retry=None)
    servers.append(srv)
    slept: list[float] = []
    kube_for(srv, Metrics(), slept).patch(RUNS, "ns", "r", {"status": {}}, subresource="status")
    assert slept == [RETRY_AFTER_DEFAULT]


def test_other_errors_are_not_retried(servers):
    srv = serve(refusals=0)
    servers.append(srv)
    metrics, slept = Metrics(), []
    with pytest.raises(NotFound):
        kube_for(srv, metrics, slept).get(RUNS, "ns", "missing")
    assert len(srv.seen) == 1 and slept == []
    assert sample(metrics, "wpbench_api_requests_total", verb="get", resource="wpbenchruns", code="404") == 1


def test_a_throttled_watch_is_sent_again_not_relisted(servers):
    srv = serve(refusals=0)
    servers.append(srv)
    metrics, slept = Metrics(), []
    kube = kube_for(srv, metrics, slept)
    watcher = Watcher(kube, RUNS, "ns", resource_version="5")
    srv.refusals = 1  # the watch request itself is refused once
    event = next(iter(watcher))
    watcher.stop()
    assert event.type == "ADDED"
    assert watcher.relists == 0 and slept == [2.0]
    assert sample(metrics, "wpbench_api_throttled_total", verb="watch", resource="wpbenchruns") == 1
