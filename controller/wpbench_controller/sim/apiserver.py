"""A small Kubernetes API server on 127.0.0.1 for tests: the real HTTP API shape over `Store`.

Serves discovery (/version, /api, /apis, resource lists), CRUD + list + watch (chunked JSON event
streams with resourceVersion, label and field selectors, timeoutSeconds, 410 Gone), the status
subresource, pods/log, pods/eviction, delete with propagationPolicy, deletecollection, and kubectl's
Table format (CRD printer columns). It counts client writes per User-Agent, which the benchmark reads.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from wpbench_controller.sim.store import ApiError, Obj, Resource, Store

WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


def _jsonpath(obj: Obj, path: str) -> Any:
    cur: Any = obj
    for part in path.strip(".").split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return cur


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ApiServer

    def log_message(self, *args: Any) -> None:
        pass

    # ---- plumbing -------------------------------------------------------------------------
    def _send(self, code: int, body: Any, content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ApiError(400, "BadRequest", f"malformed JSON body: {exc}") from exc

    def _dispatch(self) -> None:
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        agent = self.headers.get("User-Agent", "")
        if self.command in WRITE_METHODS:
            self.server.count_write(agent, self.command, url.path)
        try:
            self._route(url.path.rstrip("/"), query)
        except ApiError as exc:
            self._send(exc.code, exc.status())
        except (BrokenPipeError, ConnectionResetError):
            pass

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _dispatch

    # ---- routing --------------------------------------------------------------------------
    def _route(self, path: str, query: dict[str, str]) -> None:
        store = self.server.store
        parts = [p for p in path.split("/") if p]
        if path in ("/version", "/healthz", "/livez", "/readyz"):
            self._send(
                200, {"major": "1", "minor": "37", "gitVersion": "v1.37.0-wpbench-sim", "platform": "linux/amd64"}
            )
            return
        if parts == ["api"]:
            self._send(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
            return
        if parts == ["apis"]:
            self._send(200, self.server.group_list())
            return
        if parts[:1] == ["api"]:
            group, version, rest = "", parts[1] if len(parts) > 1 else "", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource {path}")
        if not rest:
            self._send(200, self.server.resource_list(group, version))
            return
        ns: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            ns, rest = rest[1], rest[2:]
        res = store.resource(group, version, rest[0])
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        if res.namespaced and ns is None and name is not None:
            raise ApiError(404, "NotFound", "namespaced resource needs a namespace")
        if not res.namespaced:
            ns = ""
        method = self.command
        if name is None:
            if method == "GET":
                self._list_or_watch(res, ns, query)
            elif method == "POST":
                self._send(201, store.create(res, ns or "", self._body() or {}))
            elif method == "DELETE":
                items, _ = store.list_objects(res, ns, query.get("labelSelector"), query.get("fieldSelector"))
                policy = (self._body() or {}).get("propagationPolicy") or query.get("propagationPolicy")
                for obj in items:
                    store.delete(res, obj["metadata"].get("namespace", ""), obj["metadata"]["name"], policy)
                self._send(
                    200, {"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": {}, "items": items}
                )
            else:
                raise ApiError(405, "MethodNotAllowed", method)
            return
        ns = ns or ""
        if sub == "log" and res.plural == "pods" and method == "GET":
            self._send(200, self.server.pod_log(ns, name, query).encode(), "text/plain")
            return
        if sub == "eviction" and res.plural == "pods" and method == "POST":
            store.get(res, ns, name)
            self.server.evict(ns, name)
            self._send(201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
            return
        if sub not in ("", "status") or (sub == "status" and not res.status):
            raise ApiError(404, "NotFound", f"no subresource {sub} on {res.plural}")
        if method == "GET":
            self._send(200, store.get(res, ns, name))
        elif method == "PUT":
            self._send(200, store.replace(res, ns, name, self._body() or {}, subresource=sub))
        elif method == "PATCH":
            ctype = self.headers.get("Content-Type", "")
            self._send(200, store.patch(res, ns, name, self._body(), ctype, subresource=sub))
        elif method == "DELETE":
            policy = (self._body() or {}).get("propagationPolicy") or query.get("propagationPolicy")
            self._send(200, store.delete(res, ns, name, policy))
        else:
            raise ApiError(405, "MethodNotAllowed", method)

    def _list_or_watch(self, res: Resource, ns: str | None, query: dict[str, str]) -> None:
        store = self.server.store
        labels, fields = query.get("labelSelector"), query.get("fieldSelector")
        if query.get("watch") in ("true", "1"):
            self._watch(res, ns, query)
            return
        items, rv = store.list_objects(res, ns, labels, fields)
        accept = self.headers.get("Accept", "")
        if "as=Table" in accept:
            self._send(200, self.server.table(res, items, rv))
            return
        self._send(
            200,
            {
                "kind": f"{res.kind}List",
                "apiVersion": res.api_version,
                "metadata": {"resourceVersion": str(rv)},
                "items": items,
            },
        )

    def _watch(self, res: Resource, ns: str | None, query: dict[str, str]) -> None:
        from wpbench_controller.sim.store import field_matcher, label_matcher

        store = self.server.store
        lm, fm = label_matcher(query.get("labelSelector")), field_matcher(query.get("fieldSelector"))
        timeout = float(query.get("timeoutSeconds") or 1800)
        end = time.monotonic() + timeout
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def send(kind: str, obj: Obj) -> None:
            line = json.dumps({"type": kind, "object": obj}).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.wfile.flush()

        try:
            start = query.get("resourceVersion")
            if not start or start == "0":
                items, rv = store.list_objects(res, ns, query.get("labelSelector"), query.get("fieldSelector"))
                for obj in items:
                    send("ADDED", obj)
            else:
                rv = int(start)
            while time.monotonic() < end and not store.closed:
                with store.lock:
                    events = store.events_since(res, ns, rv)
                    if events is None:
                        gone = ApiError(410, "Expired", f"too old resource version: {rv}").status()
                        send("ERROR", gone)
                        break
                    if not events:
                        store.changed.wait(min(1.0, max(0.01, end - time.monotonic())))
                        continue
                for ev in events:
                    rv = ev.rv
                    if lm(ev.obj["metadata"].get("labels") or {}) and fm(ev.obj):
                        send(ev.type, ev.obj)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True


class ApiServer(ThreadingHTTPServer):
    """The test API server. `start()` serves on 127.0.0.1 (a free port unless given)."""

    daemon_threads = True

    def __init__(self, store: Store | None = None, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.store = store or Store()
        self.writes: Counter[tuple[str, str]] = Counter()  # (user agent, method) -> count
        self.write_log: list[tuple[str, str, str]] = []
        self._count_lock = threading.Lock()
        self.log_source: Callable[[str, str], str | None] | None = None
        self._thread: threading.Thread | None = None
        self._gc_stop = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):  # clients hanging up are normal
            super().handle_error(request, client_address)

    def start(self) -> ApiServer:
        self._thread = threading.Thread(target=self.serve_forever, name="sim-apiserver", daemon=True)
        self._thread.start()
        threading.Thread(target=self._gc_loop, name="sim-gc", daemon=True).start()
        return self

    def stop(self) -> None:
        self._gc_stop.set()
        with self.store.lock:
            self.store.closed = True
            self.store.changed.notify_all()
        self.shutdown()
        self.server_close()

    def _gc_loop(self) -> None:
        while not self._gc_stop.wait(1.0):
            self.store.collect_garbage()

    def count_write(self, agent: str, method: str, path: str) -> None:
        with self._count_lock:
            self.writes[(agent.split("/")[0], method)] += 1
            self.write_log.append((agent.split("/")[0], method, path))

    def writes_by(self, agent_prefix: str) -> int:
        with self._count_lock:
            return sum(n for (agent, _), n in self.writes.items() if agent == agent_prefix)

    def write_kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "sim", "cluster": {"server": self.url}}],
            "users": [{"name": "sim", "user": {"token": "sim-token"}}],
            "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "sim", "namespace": namespace}}],
            "current-context": "sim",
        }
        path.write_text(json.dumps(cfg, indent=2))
        return path

    # ---- subresources ---------------------------------------------------------------------
    def pod_log(self, ns: str, name: str, query: dict[str, str]) -> str:
        with self.store.lock:
            source = self.store.logs.get((ns, name))
        if source is None:
            pod = self.store.get(self.store.resources["/pods"], ns, name)
            raise ApiError(
                400,
                "BadRequest",
                f'container "grader" in pod "{name}" is waiting to start: {pod["status"].get("phase")}',
            )
        text = source() if callable(source) else source
        if query.get("tailLines"):
            text = "\n".join(text.splitlines()[-int(query["tailLines"]) :]) + "\n"
        if query.get("limitBytes"):
            text = text.encode()[: int(query["limitBytes"])].decode(errors="ignore")
        return text

    def evict(self, ns: str, name: str) -> None:
        """The eviction API: mark the pod DisruptionTarget; the node stops it; it is then deleted."""
        self.store.mark_evicted(ns, name)
        if self.store.evict_hook is not None:
            self.store.evict_hook(ns, name)

    # ---- discovery ------------------------------------------------------------------------
    def group_list(self) -> Obj:
        groups: dict[str, str] = {}
        for res in self.store.resources.values():
            if res.group:
                groups[res.group] = res.version
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": g,
                    "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
                    "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v},
                }
                for g, v in sorted(groups.items())
            ],
        }

    def resource_list(self, group: str, version: str) -> Obj:
        verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        resources = []
        for res in self.store.resources.values():
            if res.group != group or res.version != version:
                continue
            resources.append(
                {
                    "name": res.plural,
                    "singularName": res.kind.lower(),
                    "namespaced": res.namespaced,
                    "kind": res.kind,
                    "verbs": verbs,
                }
            )
            if res.status:
                resources.append(
                    {
                        "name": f"{res.plural}/status",
                        "singularName": "",
                        "namespaced": res.namespaced,
                        "kind": res.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
            if res.plural == "pods":
                resources.append(
                    {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]}
                )
                resources.append(
                    {
                        "name": "pods/eviction",
                        "singularName": "",
                        "namespaced": True,
                        "kind": "Eviction",
                        "group": "policy",
                        "version": "v1",
                        "verbs": ["create"],
                    }
                )
        if not resources:
            raise ApiError(404, "NotFound", f"no API group {group}/{version}")
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}

    def table(self, res: Resource, items: list[Obj], rv: int) -> Obj:
        """kubectl's server-side printing: Name, the CRD's printer columns (or Age)."""
        cols = [
            ("Name", "string", ".metadata.name"),
            *(res.printer_columns or (("Age", "date", ".metadata.creationTimestamp"),)),
        ]
        return {
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": str(rv)},
            "columnDefinitions": [
                {"name": n, "type": "string" if t == "date" else t, "format": "", "description": "", "priority": 0}
                for n, t, _ in cols
            ],
            "rows": [
                {
                    "cells": [self._cell(_jsonpath(o, p), t) for _, t, p in cols],
                    "object": {
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": o["metadata"],
                    },
                }
                for o in items
            ],
        }

    @staticmethod
    def _cell(value: Any, kind: str) -> Any:
        if value is None:
            return "<none>" if kind == "string" else None
        if kind == "date":
            from datetime import UTC, datetime

            age = datetime.now(UTC) - datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
            secs = int(age.total_seconds())
            return f"{secs}s" if secs < 120 else f"{secs // 60}m"
        return value
