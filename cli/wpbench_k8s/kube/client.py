"""A small client for the few kinds this project uses: JSON in, JSON out, a timeout on every request.

`Kube` wraps the official client's `ApiClient` (its configuration, auth and TLS) and speaks to the
API server by path, so every call site reads the same way (`kube.get(JOBS, ns, name)`) and every
failure arrives as one of a few typed errors: `NotFound`, `Conflict`, `Gone`, `Throttled`, `Unreachable`,
or their base `KubeError`. No call can hang: each carries `(connect, read)` timeouts (urllib3 may
retry an idempotent request a few times, so the bound is a small multiple), and a watch's read
timeout sits just past the server-side `timeoutSeconds`, so a half-open connection ends.

A 429 (API Priority and Fairness, or any server that sheds load) is sent again after the server's
`Retry-After` seconds (bounded by `RETRY_AFTER_MAX`), at most `THROTTLE_TRIES` times in all, then raises
`Throttled`: the server did not act on a request it refused, so a write is safe to repeat. Every request
and every such wait is reported to the client's `observer` (the controller counts them in its metrics).

`Watcher` is the one watch loop (the controller, the executor and `status --watch` use it): list,
then watch from the list's resourceVersion with bookmarks; an ERROR event or a 410 Gone relists.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import urllib3
import yaml
from kubernetes import client as k8s
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from wpbench_k8s import __version__
from wpbench_k8s.errors import ExecutorError, InputError

log = logging.getLogger(__name__)
USER_AGENT = f"wpbench-k8s/{__version__}"
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 30.0
WATCH_SECONDS = 120  # server-side timeoutSeconds of one watch request
CONNECTIONS = 32  # kept-alive connections to the API server, per client
# Writes per second on average and at once: client-go's defaults (QPS 20, burst 30), so one of our
# processes never writes to a shared API server faster than a well-behaved Go controller does.
WRITE_QPS = 20.0
WRITE_BURST = 30
# 429 Too Many Requests: tries in all, and the longest a Retry-After is followed (a server asking for more
# gets this; APF itself asks for 1 s). The default when the header is missing or not a number of seconds.
THROTTLE_TRIES = 6
RETRY_AFTER_MAX = 30.0
RETRY_AFTER_DEFAULT = 1.0


class Observer(Protocol):
    """Hears of every request the client sent and every 429 it waited out (for metrics; must not raise)."""

    def request(self, verb: str, resource: str, code: int | None) -> None:
        """One answer: `code` is the HTTP status, None when there was none (`Unreachable`)."""

    def throttled(self, verb: str, resource: str, wait: float) -> None:
        """A 429: the client waits `wait` seconds (the server's Retry-After, bounded) and sends it again."""


class TokenBucket:
    """`qps` events per second on average, `burst` at once; `take` waits (outside the lock) for its turn."""

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.qps, self.burst = qps, burst
        self._clock, self._sleep = clock, sleep
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    def take(self) -> float:
        """Reserve one event; returns the seconds waited for it."""
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)
        return wait


@dataclass(frozen=True)
class Kind:
    """One resource type: its apiVersion, plural, and whether it lives in a namespace."""

    api_version: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if self.namespaced:
            if namespace is None:
                raise ValueError(f"{self.plural} live in a namespace")
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
        if sub is not None:
            base += f"/{sub}"
        return base


PODS = Kind("v1", "pods")
CONFIG_MAPS = Kind("v1", "configmaps")
EVENTS = Kind("v1", "events")
NAMESPACES = Kind("v1", "namespaces", namespaced=False)
JOBS = Kind("batch/v1", "jobs")
NETWORK_POLICIES = Kind("networking.k8s.io/v1", "networkpolicies")
SELF_SUBJECT_REVIEWS = Kind("authentication.k8s.io/v1", "selfsubjectreviews", namespaced=False)
RUNS = Kind("wpbench-k8s.org/v1alpha1", "wpbenchruns")  # kept equal to crd.API_VERSION by a test
LEASES = Kind("coordination.k8s.io/v1", "leases")


# ---- errors -------------------------------------------------------------------------------------
class KubeError(Exception):
    """The API server answered with an error (or could not be reached: `Unreachable`)."""

    def __init__(self, status: int | None, reason: str, message: str = "") -> None:
        self.status, self.reason, self.message = status, reason, message
        super().__init__(f"{status} {reason}: {message}".strip(": ") if status else f"{reason}: {message}")


class NotFound(KubeError):
    pass


class Conflict(KubeError):
    """409: already exists (a deterministic name: a previous pass made it), or a stale update."""


class Gone(KubeError):
    """410: the resourceVersion is too old to watch from; list again."""


class Unreachable(KubeError):
    """No answer: connection refused or reset, or a request timeout."""


class Throttled(KubeError):
    """429: the server refused the request for load; `retry_after` is the wait it asked for (seconds)."""

    retry_after: float = RETRY_AFTER_DEFAULT


class Fenced(Exception):
    """A write this process may no longer send (its leader lease lapsed): refused before it left, never retried.

    Not a KubeError on purpose: code that handles API errors (quota, conflicts) must not swallow it.
    """


_BY_STATUS: dict[int, type[KubeError]] = {404: NotFound, 409: Conflict, 410: Gone, 429: Throttled}


def retry_after(value: str | None) -> float:
    """A Retry-After header's seconds, within [0, RETRY_AFTER_MAX]; the default when absent or an HTTP date."""
    try:
        seconds = float(value) if value is not None else RETRY_AFTER_DEFAULT
    except ValueError:
        seconds = RETRY_AFTER_DEFAULT
    if seconds != seconds:  # NaN
        seconds = RETRY_AFTER_DEFAULT
    return min(max(seconds, 0.0), RETRY_AFTER_MAX)


def _error(status: int, body: bytes, reason: str = "") -> KubeError:
    message = ""
    try:
        doc = json.loads(body)
        if isinstance(doc, dict):
            message = str(doc.get("message", ""))
            reason = str(doc.get("reason") or reason)
    except ValueError:
        message = body[:200].decode("utf-8", "replace")
    return _BY_STATUS.get(status, KubeError)(status, reason or "Error", message)


def urllib3_retries(retry: bool = True) -> urllib3.util.Retry:
    """What urllib3 may send again by itself: a refused connection, and with `retry` a few other failures
    of idempotent requests; never a 429 (urllib3 would sleep its Retry-After unseen and unbounded:
    `Kube` waits it out itself, bounded and counted)."""
    if retry:
        return urllib3.util.Retry(total=3, respect_retry_after_header=False)
    return urllib3.util.Retry(
        total=2, connect=2, read=0, redirect=0, status=0, other=0, respect_retry_after_header=False
    )


def api_client(
    kubeconfig: str | None = None, context: str | None = None, *, user_agent: str = USER_AGENT, retry: bool = True
) -> k8s.ApiClient:
    """An ApiClient from a kubeconfig (or, inside a pod with none given, the service account);
    `retry=False`: a request that reached the server is not sent again (a refused connection still is, twice),
    so a server that accepts and never answers costs one read timeout, not four.

    Raises:
        ExecutorError: no usable configuration.
    """
    from kubernetes import config

    kconfig: Any = config  # the config loaders are untyped
    try:
        if (
            kubeconfig is None
            and context is None
            and os.environ.get("KUBERNETES_SERVICE_HOST")
            and not os.environ.get("KUBECONFIG")
        ):
            cfg = k8s.Configuration()
            kconfig.load_incluster_config(client_configuration=cfg)
        else:
            cfg = k8s.Configuration()
            kconfig.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=cfg, persist_config=False
            )
        # Watches, the reconcile worker and concurrent log reads share one pool of connections.
        cfg.connection_pool_maxsize = CONNECTIONS
        cfg.retries = urllib3_retries(retry)
        api = k8s.ApiClient(cfg)
    except (kconfig.ConfigException, OSError) as exc:
        raise ExecutorError(
            f"no usable Kubernetes configuration ({kubeconfig or 'default kubeconfig'}): {exc}"
        ) from exc
    except (yaml.YAMLError, ValueError, TypeError, AttributeError, KeyError, RecursionError) as exc:
        # a kubeconfig that is not YAML, or YAML of the wrong shape: bad input, named in one line
        raise InputError(
            f"{kubeconfig or 'default kubeconfig'}: not a usable kubeconfig: {' '.join(str(exc).split())[:300]}"
        ) from exc
    api.user_agent = user_agent
    return api


_VERBS = {"GET": "get", "POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}


def _resource(path: str) -> str:
    """The resource (and subresource) a request path names: `/api/v1/namespaces/ns/pods/p/log` -> `pods/log`.

    For the metrics' labels: a bounded set of values, never an object's name."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    parts = parts[2:] if parts[:1] == ["api"] else parts[3:]  # /api/v1/... or /apis/group/version/...
    if len(parts) >= 2 and parts[0] == "namespaces":
        parts = parts[2:] or ["namespaces"]
    if not parts:
        return ""
    return f"{parts[0]}/{parts[2]}" if len(parts) >= 3 else parts[0]


def to_dict(obj: Any) -> dict[str, Any]:
    """A client model as the JSON the API server receives (camelCase keys, no None values)."""
    serializer: Any = k8s.ApiClient()
    result: dict[str, Any] = serializer.sanitize_for_serialization(obj)
    return result


# ---- the client ---------------------------------------------------------------------------------
class Kube:
    """get, get_list, items, pages, create, ensure, patch, replace, delete(_collection), log by `Kind`; timeouts."""

    def __init__(
        self,
        api: k8s.ApiClient,
        *,
        read_timeout: float = READ_TIMEOUT,
        writes: TokenBucket | None = None,
        connect_timeout: float = CONNECT_TIMEOUT,
        observer: Observer | None = None,
        throttle_tries: int = THROTTLE_TRIES,
        sleep: Callable[[float], None] = time.sleep,
        fence: Callable[[], None] | None = None,
    ) -> None:
        """`fence`: called right before every write is sent; it raises `Fenced` to stop it (leader election)."""
        self.api = api
        self.fence = fence
        self.read_timeout = read_timeout
        self.connect_timeout = connect_timeout
        self.writes = writes or TokenBucket(WRITE_QPS, WRITE_BURST)  # shared by every call of this client
        self.observer = observer
        self.throttle_tries = max(1, throttle_tries)
        self._sleep = sleep

    def _open(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        read_timeout: float | None = None,
        verb: str = "",
    ) -> Any:
        """Send one request, again after each 429 (Retry-After); the urllib3 response, unread.

        Raises:
            Throttled: still 429 after `throttle_tries` tries.
            KubeError: any other non-2xx answer (`Unreachable`: none).
        """
        verb = verb or _VERBS.get(method, method.lower())
        resource = _resource(path)

        def wait(state: RetryCallState) -> float:  # what the server asked for
            exc = state.outcome.exception() if state.outcome else None
            return exc.retry_after if isinstance(exc, Throttled) else RETRY_AFTER_DEFAULT

        def before_sleep(state: RetryCallState) -> None:
            seconds = state.next_action.sleep if state.next_action else 0.0
            if self.observer is not None:
                self.observer.throttled(verb, resource, seconds)
            log.warning("API server throttled %s %s (429); sending it again in %.1fs", verb, resource, seconds)

        retrying = Retrying(
            retry=retry_if_exception_type(Throttled),
            stop=stop_after_attempt(self.throttle_tries),
            wait=wait,
            before_sleep=before_sleep,
            sleep=self._sleep,
            reraise=True,
        )
        return retrying(self._send, method, path, query, body, content_type, read_timeout, verb, resource)

    def _send(
        self,
        method: str,
        path: str,
        query: list[tuple[str, Any]] | None,
        body: Any,
        content_type: str,
        read_timeout: float | None,
        verb: str,
        resource: str,
    ) -> Any:
        if method != "GET":
            self.writes.take()
            if self.fence is not None:
                self.fence()  # after the token wait: the lease is checked at the last moment
        headers = {"Accept": "application/json", "Content-Type": content_type}
        api: Any = self.api
        request = api.param_serialize(
            method, path, query_params=query or [], header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        timeout = (self.connect_timeout, read_timeout or self.read_timeout)
        try:
            response = api.call_api(*request, _request_timeout=timeout).response
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            self._observe(verb, resource, None)
            raise Unreachable(None, type(exc).__name__, f"{api.configuration.host}: {exc}") from exc
        self._observe(verb, resource, response.status)
        if not 200 <= response.status < 300:
            try:
                data = response.read()
            except (urllib3.exceptions.HTTPError, OSError):
                data = b""
            error = _error(response.status, data, response.reason or "")
            if isinstance(error, Throttled):
                error.retry_after = retry_after(response.headers.get("Retry-After"))
            raise error
        return response

    def _observe(self, verb: str, resource: str, code: int | None) -> None:
        if self.observer is not None:
            self.observer.request(verb, resource, code)

    def _json(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        response = self._open(method, path, **kw)
        try:
            data = response.read()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise Unreachable(None, type(exc).__name__, str(exc)) from exc
        doc: dict[str, Any] = json.loads(data) if data else {}
        return doc

    def get(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any]:
        return self._json("GET", kind.path(namespace, name), verb="get")

    def api_resources(self, api_version: str) -> set[str]:
        """The resources the server serves under `api_version` (discovery). Raises NotFound when none."""
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        return {str(r.get("name")) for r in self._json("GET", base, verb="get").get("resources") or []}

    def get_list(
        self, kind: Kind, namespace: str | None, *, selector: str | None = None, field_selector: str | None = None
    ) -> dict[str, Any]:
        """The list object (`items`, `metadata.resourceVersion`)."""
        query: list[tuple[str, Any]] = []
        if selector:
            query.append(("labelSelector", selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        return self._json("GET", kind.path(namespace), query=query, verb="list")

    def pages(
        self, kind: Kind, namespace: str | None, *, selector: str | None = None, limit: int = 50
    ) -> Iterator[dict[str, Any]]:
        """Every object, fetched `limit` at a time (big objects such as result shards: one at a time)."""
        token = ""
        while True:
            query: list[tuple[str, Any]] = [("limit", limit)]
            if selector:
                query.append(("labelSelector", selector))
            if token:
                query.append(("continue", token))
            page = self._json("GET", kind.path(namespace), query=query, verb="list")
            yield from page.get("items") or []
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return

    def items(self, kind: Kind, namespace: str | None, **selectors: str | None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.get_list(kind, namespace, **selectors).get("items") or []
        return items

    def create(self, kind: Kind, namespace: str | None, body: dict[str, Any]) -> dict[str, Any]:
        return self._json("POST", kind.path(namespace), body=body)

    def ensure(self, kind: Kind, namespace: str | None, body: dict[str, Any]) -> bool:
        """Create unless it exists (deterministic names: 409 means made before). Returns True if created."""
        try:
            self.create(kind, namespace, body)
        except Conflict:
            return False
        return True

    def patch(
        self, kind: Kind, namespace: str | None, name: str, body: dict[str, Any], *, subresource: str | None = None
    ) -> dict[str, Any]:
        """A JSON merge patch (of the status subresource when `subresource="status"`)."""
        return self._json(
            "PATCH", kind.path(namespace, name, subresource), body=body, content_type="application/merge-patch+json"
        )

    def replace(self, kind: Kind, namespace: str | None, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """PUT the whole object; with its metadata.resourceVersion, a write by anyone since raises Conflict."""
        return self._json("PUT", kind.path(namespace, name), body=body)

    def delete(self, kind: Kind, namespace: str | None, name: str) -> bool:
        """Delete in the background (dependents follow); False when it was already gone."""
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        try:
            self._json("DELETE", kind.path(namespace, name), body=body)
        except NotFound:
            return False
        return True

    def delete_collection(self, kind: Kind, namespace: str | None, *, selector: str) -> None:
        """Delete every object matching `selector` with one request, in the background (dependents follow)."""
        if not selector:
            raise ValueError("delete_collection needs a selector")
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        self._json("DELETE", kind.path(namespace), query=[("labelSelector", selector)], body=body,
                   verb="deletecollection")  # fmt: skip

    def log(self, namespace: str, pod: str, container: str, *, limit_bytes: int) -> bytes:
        """At most `limit_bytes` of a container's log (the kubelet stops there: a flood costs nothing)."""
        query = [("container", container), ("limitBytes", limit_bytes)]
        response = self._open("GET", PODS.path(namespace, pod, "log"), query=query, verb="get")
        try:
            data: bytes = response.read(limit_bytes)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise Unreachable(None, type(exc).__name__, str(exc)) from exc
        finally:
            response.release_conn()
        return data


# ---- watching -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class WatchEvent:
    """One change: `LISTED` for each object of a (re)list, then what the watch reports."""

    type: Literal["LISTED", "ADDED", "MODIFIED", "DELETED"]
    object: dict[str, Any]


class Watcher:
    """List, then watch from there, forever or until `stop()` / `deadline` (a `time.monotonic()` value).

    Bookmarks keep the resourceVersion fresh; an ERROR event or 410 Gone relists (objects come again as
    LISTED); any other failure relists after `retry_seconds`. Iterating yields `WatchEvent`s.
    """

    def __init__(
        self,
        kube: Kube,
        kind: Kind,
        namespace: str | None,
        *,
        selector: str | None = None,
        field_selector: str | None = None,
        watch_seconds: int = WATCH_SECONDS,
        retry_seconds: float = 1.0,
        deadline: float | None = None,
        resource_version: str | None = None,
        on_list: Callable[[list[dict[str, Any]]], None] | None = None,
    ) -> None:
        """`resource_version`: watch from there first, without listing (a caller that just read the object);
        `on_list`: called with every (re)list's objects, before they are yielded (a cache replaces its set)."""
        self.on_list = on_list
        self.kube, self.kind, self.namespace = kube, kind, namespace
        self.resume_from = resource_version
        self.selector, self.field_selector = selector, field_selector
        self.watch_seconds, self.retry_seconds, self.deadline = watch_seconds, retry_seconds, deadline
        self._stopped = threading.Event()
        self._response: Any = None
        self.relists = 0

    def stop(self) -> None:
        self._stopped.set()
        response = self._response
        if response is not None:
            with contextlib.suppress(Exception):  # already closed
                response.shutdown() if hasattr(response, "shutdown") else response.close()

    def _remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def _over(self) -> bool:
        left = self._remaining()
        return self._stopped.is_set() or (left is not None and left <= 0)

    def __iter__(self) -> Iterator[WatchEvent]:
        while not self._over():
            version = self.resume_from
            self.resume_from = None
            if version is None:
                try:
                    listed = self.kube.get_list(
                        self.kind, self.namespace, selector=self.selector, field_selector=self.field_selector
                    )
                except KubeError as exc:
                    log.warning("list %s: %s; trying again", self.kind.plural, exc)
                    self._stopped.wait(self.retry_seconds)
                    continue
                if self.on_list is not None:
                    self.on_list(list(listed.get("items") or []))
                for obj in listed.get("items") or []:
                    yield WatchEvent("LISTED", obj)
                version = (listed.get("metadata") or {}).get("resourceVersion", "")
            try:
                yield from self._watch_from(version)
            except Gone:
                log.info("watch %s: resourceVersion %s expired; relisting", self.kind.plural, version)
                self.relists += 1
            except KubeError as exc:
                if self._over():
                    return
                log.warning("watch %s: %s; relisting", self.kind.plural, exc)
                self.relists += 1
                self._stopped.wait(self.retry_seconds)

    def _watch_from(self, version: str) -> Iterator[WatchEvent]:
        """Watch requests one after another from `version` until stopped; raises Gone or KubeError."""
        while not self._over():
            left = self._remaining()
            seconds = self.watch_seconds if left is None else max(1, min(self.watch_seconds, int(left) + 1))
            query: list[tuple[str, Any]] = [
                ("watch", "true"),
                ("allowWatchBookmarks", "true"),
                ("resourceVersion", version),
                ("timeoutSeconds", seconds),
            ]
            if self.selector:
                query.append(("labelSelector", self.selector))
            if self.field_selector:
                query.append(("fieldSelector", self.field_selector))
            response = self.kube._open(
                "GET", self.kind.path(self.namespace), query=query, read_timeout=seconds + 15, verb="watch"
            )
            self._response = response
            try:
                for line in _lines(response):
                    event = json.loads(line)
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        code = int(obj.get("code") or 0)
                        raise _BY_STATUS.get(code, KubeError)(code, str(obj.get("reason", "")), obj.get("message", ""))
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if kind in ("ADDED", "MODIFIED", "DELETED"):
                        yield WatchEvent(kind, obj)
                    if self._over():
                        return
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                if self._over():
                    return
                raise Unreachable(None, type(exc).__name__, str(exc)) from exc
            finally:
                self._response = None
                response.release_conn()


def _lines(response: Any) -> Iterator[bytes]:
    pending = b""
    for chunk in response.stream(65536, decode_content=True):
        pending += chunk
        *whole, pending = pending.split(b"\n")
        yield from (line for line in whole if line.strip())
    if pending.strip():
        yield pending


def wait_for(
    kube: Kube,
    kind: Kind,
    namespace: str,
    name: str,
    done: Callable[[WatchEvent], bool],
    *,
    timeout: float,
) -> WatchEvent | None:
    """Watch one object until `done(event)`; the event, or None when `timeout` seconds pass first."""
    watcher = Watcher(
        kube, kind, namespace, field_selector=f"metadata.name={name}", deadline=time.monotonic() + timeout
    )
    for event in watcher:
        if done(event):
            watcher.stop()
            return event
    return None
