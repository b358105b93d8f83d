"""The Kubernetes client's contract where no cluster is needed: watch ERROR events and 410 Gone
relist, bookmarks are asked for, no request outlives its timeout, liveness follows the loop.

The API server here is a few lines of HTTP on loopback answering exactly the documented wire
format (a watch is newline-delimited JSON events; an expired resourceVersion is an ERROR event
carrying a Status with code 410). The same behaviours run against the real cluster in tests/k8s.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
from kubernetes import client as k8s

from wpbench_controller.controller import Controller
from wpbench_k8s.kube.client import RUNS, Kube, NotFound, TokenBucket, Unreachable, Watcher

RUN = {"metadata": {"name": "r", "namespace": "ns", "resourceVersion": "10"}, "status": {"phase": "Running"}}


class ApiServer(ThreadingHTTPServer):
    """Lists one run at resourceVersion 10; a watch from "1" is too old (ERROR 410), from 10 it sends a
    bookmark and then the run Succeeded."""

    daemon_threads = True

    def __init__(self) -> None:
        self.requests: list[dict[str, list[str]]] = []
        super().__init__(("127.0.0.1", 0), Handler)


class Handler(BaseHTTPRequestHandler):
    server: ApiServer

    def do_GET(self) -> None:
        url = urlparse(self.path)
        query = parse_qs(url.query)
        self.server.requests.append({"path": [url.path], **query})
        if not url.path.endswith("/wpbenchruns"):
            self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound", "message": "no such thing"})
            return
        if query.get("watch") != ["true"]:
            self._send(200, {"items": [RUN], "metadata": {"resourceVersion": "10"}})
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        if query["resourceVersion"] == ["1"]:
            events = [{"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired",
                                                    "message": "too old resource version: 1 (10)"}}]  # fmt: skip
        else:
            done = {**RUN, "metadata": {**RUN["metadata"], "resourceVersion": "12"}, "status": {"phase": "Succeeded"}}
            events = [
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "11"}}},
                {"type": "MODIFIED", "object": done},
            ]
        for event in events:
            self.wfile.write(json.dumps(event).encode() + b"\n")
            self.wfile.flush()

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def kube_at(port: int, read_timeout: float = 5.0) -> Kube:
    cfg = k8s.Configuration()
    cfg.host = f"http://127.0.0.1:{port}"
    return Kube(k8s.ApiClient(cfg), read_timeout=read_timeout)


@pytest.fixture
def server() -> Iterator[ApiServer]:
    srv = ApiServer()
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers: a half-open API server."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield sock.getsockname()[1]
    sock.close()


def test_an_expired_resource_version_relists_instead_of_crashing(server):
    watcher = Watcher(kube_at(server.server_port), RUNS, "ns", resource_version="1")
    seen = []
    for event in watcher:
        seen.append((event.type, event.object["status"]["phase"]))
        if event.object["status"]["phase"] == "Succeeded":
            watcher.stop()
    assert seen == [("LISTED", "Running"), ("MODIFIED", "Succeeded")]
    watches = [r for r in server.requests if r.get("watch") == ["true"]]
    assert [w["resourceVersion"] for w in watches] == [["1"], ["10"]]  # relisted, then watched from the list
    assert all(w["allowWatchBookmarks"] == ["true"] for w in watches)
    assert watcher.relists == 1


def test_errors_are_typed(server):
    with pytest.raises(NotFound, match="no such thing"):
        kube_at(server.server_port).get(RUNS, "ns", "r-missing/../../../api/v1/x")


def test_no_request_outlives_its_timeout(silent_port):
    kube = kube_at(silent_port, read_timeout=1.0)
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            kube.get(RUNS, "ns", "r")
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), "a request to a silent API server did not time out"
    assert isinstance(outcome[0], Unreachable)


def test_liveness_follows_the_reconcile_loop(silent_port):
    # Each request to the silent server blocks the worker for its read timeouts (0.5 s, retried by urllib3),
    # longer than the liveness window (1 s): the probe fails while the worker is stuck, and recovers once
    # the request gives up and the loop comes round.
    controller = Controller(kube_at(silent_port, read_timeout=0.5), ["ns"], liveness_seconds=1.0)
    thread = threading.Thread(target=controller.run, daemon=True)
    thread.start()
    try:
        assert controller.alive()
        controller.queue.add(("ns", "r"))
        states = []
        end = time.monotonic() + 8
        while time.monotonic() < end:
            states.append(controller.alive())
            time.sleep(0.1)
        assert False in states  # stuck in a request: not alive
        assert True in states[states.index(False) :]  # and alive again once the request timed out
    finally:
        controller.stop()
        thread.join(10)


def test_writes_are_paced_like_client_go():
    """A burst goes at once, then one write per 1/qps seconds; idle time refills the burst (clock injected)."""
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    bucket = TokenBucket(qps=20, burst=30, clock=lambda: now[0], sleep=sleep)
    assert [bucket.take() for _ in range(30)] == [0.0] * 30
    assert bucket.take() == pytest.approx(0.05)
    assert bucket.take() == pytest.approx(0.05)
    assert sum(slept) == pytest.approx(0.10)
    now[0] += 60  # idle: the burst is back, never more
    assert [bucket.take() for _ in range(30)] == [0.0] * 30
    assert bucket.take() == pytest.approx(0.05)
