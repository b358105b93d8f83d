"""A fake OpenAI-compatible chat completions server on 127.0.0.1, for real-HTTP model tests.

LiteLLM talks to it as it would to OpenAI: `openai/<name>` models with `OPENAI_API_BASE` (or
`api_base`) set to `server.url`. Per model name (the part after `openai/`) it replays a script
of replies, then asks its responder function (without one, the script's last reply repeats); it
records every request.

    with FakeProvider() as server:
        server.script("a", Reply(status=429), Reply(status=429), Reply(content="```php\\n...```"))
        server.respond("b", lambda body: Reply(content=...))
        ...
        assert server.calls("a") == 3

Run it standalone for manual CLI runs (`python tests/models/fake_provider.py --port 8765`): it then
answers every execution test with the mini suite's reference solution.
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass
class Reply:
    status: int = 200
    content: str | None = "ok"
    error: str = ""  # error message for non-200 replies
    error_code: str | None = None
    param: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    prompt_tokens: int = 120
    completion_tokens: int = 40
    finish_reason: str = "stop"


Responder = Callable[[dict[str, Any]], Reply]


def rate_limited(retry_after: str | None = "0") -> Reply:
    return Reply(
        status=429,
        error="Rate limit reached for requests",
        error_code="rate_limit_exceeded",
        headers={"Retry-After": retry_after} if retry_after is not None else {},
    )


def server_error(status: int = 500) -> Reply:
    return Reply(status=status, error="The server had an error while processing your request")


def rejects_temperature(then: Responder) -> Responder:
    """OpenAI's reply for reasoning models given a temperature; otherwise defer to `then`."""

    def respond(body: dict[str, Any]) -> Reply:
        if "temperature" in body:
            return Reply(
                status=400,
                error="Unsupported parameter: 'temperature' is not supported with this model.",
                error_code="unsupported_parameter",
                param="temperature",
            )
        return then(body)

    return respond


class FakeProvider:
    def __init__(self, port: int = 0, host: str = "127.0.0.1") -> None:
        """`host`: a local address only (loopback, or the local cluster's pod bridge gateway for pods)."""
        self.host = host
        self._lock = threading.Lock()
        self._scripts: dict[str, list[Reply]] = {}
        self._responders: dict[str, Responder] = {}
        self.requests: list[dict[str, Any]] = []
        self.statuses: list[tuple[str, int]] = []
        self.default: Responder | None = None
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
                    return
                reply = provider._reply(body, self.headers.get("Authorization", ""))
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.status != 200:
                    err = {"message": reply.error or "error", "type": "invalid_request_error",
                           "param": reply.param, "code": reply.error_code}  # fmt: skip
                    self._send(reply.status, {"error": err}, reply.headers)
                    return
                self._send(200, provider._completion(body, reply), reply.headers)

            def _send(self, status: int, doc: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(doc).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

        self._handler = Handler
        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-provider", daemon=True)
        self._others: list[ThreadingHTTPServer] = []
        self.pod_url = ""  # the address pods use, when it is not `url` (`listen_in_netns`)

    # ---- control --------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self._server.server_address[1]}/v1"

    def start(self) -> FakeProvider:
        self._thread.start()
        return self

    def stop(self) -> None:
        for server in (self._server, *self._others):
            server.shutdown()
            server.server_close()

    def listen_in_netns(self, netns: str, host: str) -> str:
        """The same provider on a second address, bound inside another network namespace (`netns`, e.g.
        `/proc/<pid>/ns/net` of a kind node container, whose pods reach no address of this machine). The
        socket is made on a short-lived thread that enters the namespace (a thread's own, on Linux), so no
        thread of this process changes namespace for longer than the bind. Needs CAP_SYS_ADMIN (root).
        Returns its URL, also kept as `pod_url`."""
        made: list[ThreadingHTTPServer | BaseException] = []

        def bind() -> None:
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                fd = os.open(netns, os.O_RDONLY)
                try:
                    if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
                        raise OSError(ctypes.get_errno(), f"setns {netns}")
                finally:
                    os.close(fd)
                made.append(ThreadingHTTPServer((host, 0), self._handler))
            except BaseException as exc:  # handed to the caller below
                made.append(exc)

        binder = threading.Thread(target=bind, name="fake-provider-netns")
        binder.start()
        binder.join()
        (server,) = made
        if isinstance(server, BaseException):
            raise server
        server.daemon_threads = True
        self._others.append(server)
        threading.Thread(target=server.serve_forever, name="fake-provider-netns", daemon=True).start()
        self.pod_url = f"http://{host}:{server.server_address[1]}/v1"
        return self.pod_url

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def script(self, model: str, *replies: Reply) -> None:
        with self._lock:
            self._scripts[model] = list(replies)

    def respond(self, model: str, responder: Responder) -> None:
        with self._lock:
            self._responders[model] = responder

    def calls(self, model: str | None = None) -> int:
        with self._lock:
            return sum(1 for r in self.requests if model is None or r.get("model") == model)

    def bodies(self, model: str) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if r.get("model") == model]

    # ---- serving --------------------------------------------------------------------------------

    def _reply(self, body: dict[str, Any], authorization: str) -> Reply:
        model = str(body.get("model", ""))
        with self._lock:
            self.requests.append({**body, "_authorization": authorization})
            script = self._scripts.get(model)
            responder = self._responders.get(model) or self.default
            reply: Reply | None
            if script and (len(script) > 1 or responder is not None):
                reply = script.pop(0)
            else:
                reply = script[0] if script else None
        if reply is None:
            if responder is None:
                reply = Reply(status=404, error=f"The model `{model}` does not exist", error_code="model_not_found")
            else:
                reply = responder(body)
        with self._lock:
            self.statuses.append((model, reply.status))
        return reply

    @staticmethod
    def _completion(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", ""),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.content},
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "total_tokens": reply.prompt_tokens + reply.completion_tokens,
            },
        }


def user_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") == "user")


def has_system(body: dict[str, Any]) -> bool:
    return any(m.get("role") == "system" for m in body.get("messages", []))


def reference_answers(suite: Path) -> dict[str, str]:
    """Each test's prompt -> a reply that carries its reference (the answer a perfect model gives)."""
    from wpbench_k8s.dataset import ExecutionTest, load_suite  # the harness; on sys.path under pytest and __main__
    from wpbench_k8s.models.prompts import build_prompt

    answers: dict[str, str] = {}
    for t in load_suite(suite).all_tests():
        if not isinstance(t, ExecutionTest):
            answers[build_prompt(t)] = t.correct_answer
        elif t.artifact_kind == "wp_plugin_files":
            answers[build_prompt(t)] = "```json\n" + json.dumps({"files": t.reference_files}) + "\n```"
        else:
            answers[build_prompt(t)] = f"```php\n<?php\n{t.reference_solution}\n```"
    return answers


if __name__ == "__main__":  # pragma: no cover - manual runs
    import argparse
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cli"))
    parser = argparse.ArgumentParser(description="Answer every test of a suite with its reference solution.")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--suite", default=str(Path(__file__).resolve().parents[1] / "fixtures/suites/mini"))
    parser.add_argument(
        "--needs-skill",
        action="append",
        default=[],
        metavar="MODEL",
        help="this model (name after openai/) answers wrongly unless a skill system message is sent",
    )
    parser.add_argument(
        "--rate-limit-first", type=int, default=0, metavar="N", help="answer the first N requests with HTTP 429"
    )
    args = parser.parse_args()
    answers = reference_answers(Path(args.suite))

    def answer(body: dict[str, Any]) -> Reply:
        if body.get("model") in args.needs_skill and not has_system(body):
            return Reply(content="```php\n// not sure\n```")
        return Reply(content=answers.get(user_text(body), "I do not know."))

    fake = FakeProvider(args.port)
    limited = {"left": args.rate_limit_first}

    def maybe_limited(body: dict[str, Any]) -> Reply:
        with fake._lock:
            limited["left"] -= 1
            if limited["left"] >= 0:
                return rate_limited("1")
        return answer(body)

    fake.default = maybe_limited
    print(f"serving on {fake.url}", flush=True)
    fake._server.serve_forever()
