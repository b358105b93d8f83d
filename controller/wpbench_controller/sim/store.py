"""The object store behind the test API server: what etcd plus the API machinery give a real cluster.

resourceVersion (one global counter), uid, generation, creationTimestamp, label and field selectors,
the status subresource rule (main-resource writes keep status, /status writes keep everything else),
merge / strategic-merge / JSON patch, optimistic concurrency, an event log for watches (with 410 Gone
past its window), ownerReference garbage collection, and admission hooks (object size limits,
label syntax, Pod Security `restricted`).
"""

from __future__ import annotations

import copy
import json
import re
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    status: bool = False  # has a status subresource
    custom: bool = False  # served from a CRD (no strategic merge patch)
    schema: Any = None  # CRD openAPIV3Schema (custom resources)
    printer_columns: tuple[tuple[str, str, str], ...] = ()  # (name, type, jsonPath)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        return f"{self.group}/{self.plural}"


BUILTIN = [
    Resource("", "v1", "namespaces", "Namespace", namespaced=False, status=True),
    Resource("", "v1", "configmaps", "ConfigMap"),
    Resource("", "v1", "secrets", "Secret"),
    Resource("", "v1", "pods", "Pod", status=True),
    Resource("", "v1", "events", "Event"),
    Resource("", "v1", "serviceaccounts", "ServiceAccount"),
    Resource("batch", "v1", "jobs", "Job", status=True),
    Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy"),
    Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False),
    Resource("coordination.k8s.io", "v1", "leases", "Lease"),
]


class ApiError(Exception):
    """An API error as a Kubernetes `Status` object."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def status(self) -> Obj:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }


# ---- selectors ----------------------------------------------------------------------------------
_REQ = re.compile(r"^\s*(!?)([A-Za-z0-9./_-]+)\s*(?:(==|=|!=)\s*([A-Za-z0-9._-]*)|\s+(in|notin)\s*\(([^)]*)\))?\s*$")


def _split_selector(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return parts


def label_matcher(selector: str | None) -> Callable[[dict[str, str]], bool]:
    """A predicate over labels for a label selector (=, ==, !=, in, notin, exists, !exists)."""
    if not selector:
        return lambda labels: True
    reqs = []
    for part in _split_selector(selector):
        m = _REQ.match(part)
        if not m:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {part!r}")
        neg, key, op, value, setop, values = m.groups()
        reqs.append((neg, key, op, value, setop, [v.strip() for v in (values or "").split(",") if v.strip()]))

    def match(labels: dict[str, str]) -> bool:
        for neg, key, op, value, setop, values in reqs:
            have = labels.get(key)
            if op in ("=", "=="):
                ok = have == value
            elif op == "!=":
                ok = have != value
            elif setop == "in":
                ok = have in values
            elif setop == "notin":
                ok = have not in values
            else:
                ok = (have is None) if neg else (have is not None)
            if not ok:
                return False
        return True

    return match


def _path(obj: Obj, dotted: str) -> Any:
    cur: Any = obj
    for part in dotted.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def field_matcher(selector: str | None) -> Callable[[Obj], bool]:
    if not selector:
        return lambda obj: True
    reqs = []
    for part in selector.split(","):
        m = re.match(r"^\s*([A-Za-z0-9.]+)\s*(==|=|!=)\s*(.*?)\s*$", part)
        if not m:
            raise ApiError(400, "BadRequest", f"invalid field selector {part!r}")
        reqs.append(m.groups())

    def match(obj: Obj) -> bool:
        for key, op, value in reqs:
            have = _path(obj, key)
            have = "" if have is None else str(have)
            if (have == value) != (op != "!="):
                return False
        return True

    return match


# ---- patches ------------------------------------------------------------------------------------
def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]


def json_patch(doc: Any, ops: list[Obj]) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, test, copy, move)."""
    doc = copy.deepcopy(doc)
    for op in ops:
        parts = _pointer(op["path"])
        parent: Any = doc
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        last = parts[-1] if parts else ""
        kind = op["op"]
        if kind == "test":
            here = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if here != op["value"]:
                raise ApiError(422, "Invalid", f"test operation failed at {op['path']}")
        elif kind in ("add", "replace"):
            if isinstance(parent, list):
                if last == "-":
                    parent.append(op["value"])
                elif kind == "add":
                    parent.insert(int(last), op["value"])
                else:
                    parent[int(last)] = op["value"]
            else:
                if kind == "replace" and last not in parent:
                    raise ApiError(422, "Invalid", f"replace: missing path {op['path']}")
                parent[last] = op["value"]
        elif kind == "remove":
            if isinstance(parent, list):
                parent.pop(int(last))
            elif last in parent:
                del parent[last]
            else:
                raise ApiError(422, "Invalid", f"remove: missing path {op['path']}")
        else:
            raise ApiError(422, "Invalid", f"unsupported JSON patch op {kind}")
    return doc


# ---- admission ----------------------------------------------------------------------------------
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
CONFIGMAP_MAX_BYTES = 1024 * 1024
REQUEST_MAX_BYTES = 3 * 1024 * 1024 // 2  # etcd's default request limit


def validate_metadata(res: Resource, obj: Obj) -> None:
    meta = obj["metadata"]
    name = meta["name"]
    label_names = res.plural in ("namespaces", "jobs", "networkpolicies")  # names used as label values / DNS labels
    pattern, limit = (_DNS_LABEL, 63) if label_names else (_DNS_SUBDOMAIN, 253)
    if len(name) > limit or not pattern.match(name):
        raise ApiError(422, "Invalid", f'{res.kind} "{name}" is invalid: metadata.name: Invalid value: "{name}"')
    for key, value in (meta.get("labels") or {}).items():
        prefix, _, lname = key.rpartition("/")
        if (
            not lname
            or len(lname) > 63
            or not _LABEL_NAME.match(lname)
            or (prefix and not _DNS_SUBDOMAIN.match(prefix))
        ):
            raise ApiError(422, "Invalid", f'{res.kind} "{name}" is invalid: metadata.labels: Invalid value: "{key}"')
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            raise ApiError(422, "Invalid", f'{res.kind} "{name}" is invalid: metadata.labels: Invalid value: "{value}"')
    if res.plural == "configmaps":
        size = sum(len(k) + len(str(v).encode()) for k, v in (obj.get("data") or {}).items())
        size += sum(len(k) + len(str(v)) * 3 // 4 for k, v in (obj.get("binaryData") or {}).items())
        if size > CONFIGMAP_MAX_BYTES:
            raise ApiError(
                422,
                "Invalid",
                f'ConfigMap "{name}" is invalid: []: Too long: must have at most {CONFIGMAP_MAX_BYTES} bytes',
            )
        for key in list(obj.get("data") or {}) + list(obj.get("binaryData") or {}):
            if not re.match(r"^[-._a-zA-Z0-9]+$", key) or len(key) > 253:
                raise ApiError(422, "Invalid", f'ConfigMap "{name}" is invalid: data[{key}]: Invalid value')


def pod_security_restricted(pod: Obj) -> list[str]:
    """Violations of the Pod Security Standard `restricted` (the checks a grader pod can trip)."""
    spec = pod.get("spec") or {}
    psc = spec.get("securityContext") or {}
    problems = []
    for field_name in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field_name):
            problems.append(f"{field_name}=true")
    for vol in spec.get("volumes") or []:
        allowed = {
            "configMap",
            "csi",
            "downwardAPI",
            "emptyDir",
            "ephemeral",
            "persistentVolumeClaim",
            "projected",
            "secret",
        }
        kinds = set(vol) - {"name"}
        if not kinds <= allowed:
            problems.append(f"volume {vol['name']} uses {', '.join(sorted(kinds - allowed))}")
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type")
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        sc = c.get("securityContext") or {}
        name = c.get("name")
        if sc.get("privileged"):
            problems.append(f"container {name} privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"container {name} must set allowPrivilegeEscalation=false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            problems.append(f"container {name} must drop ALL capabilities")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            problems.append(f"container {name} adds capabilities")
        if not (sc.get("runAsNonRoot") if "runAsNonRoot" in sc else psc.get("runAsNonRoot")):
            problems.append(f"container {name} must set runAsNonRoot=true")
        if (sc.get("runAsUser", psc.get("runAsUser"))) == 0:
            problems.append(f"container {name} runAsUser=0")
        seccomp = (sc.get("seccompProfile") or {}).get("type") or pod_seccomp
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"container {name} must set seccompProfile.type to RuntimeDefault or Localhost")
    return problems


def _orphan(owner_uid: str) -> Callable[[Obj], None]:
    def drop(obj: Obj) -> None:
        refs = obj["metadata"].get("ownerReferences") or []
        obj["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != owner_uid]

    return drop


# ---- the store ----------------------------------------------------------------------------------
@dataclass
class Event:
    rv: int
    res_key: str
    type: str
    obj: Obj


Listener = Callable[[Resource, str, Obj], None]


class Store:
    """Objects by (resource, namespace, name). All methods are thread-safe."""

    def __init__(self, event_window: int = 20000) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.resources: dict[str, Resource] = {}  # key "group/plural"
        self.objects: dict[tuple[str, str, str], Obj] = {}
        self.events: deque[Event] = deque(maxlen=event_window)
        self.rv = 100
        self.listeners: list[Listener] = []
        self.logs: dict[tuple[str, str], Callable[[], str] | str] = {}
        self.evict_hook: Callable[[str, str], None] | None = None
        self.closed = False
        for res in BUILTIN:
            self.resources[res.key] = res

    # -- resources
    def resource(self, group: str, version: str, plural: str) -> Resource:
        res = self.resources.get(f"{group}/{plural}")
        if res is None or res.version != version:
            raise ApiError(
                404, "NotFound", f"the server could not find the requested resource ({group}/{version} {plural})"
            )
        return res

    def register_crd(self, crd: Obj) -> None:
        spec = crd["spec"]
        for ver in spec["versions"]:
            if not ver.get("served", True):
                continue
            cols = tuple((c["name"], c["type"], c["jsonPath"]) for c in ver.get("additionalPrinterColumns") or [])
            self.resources[f"{spec['group']}/{spec['names']['plural']}"] = Resource(
                spec["group"],
                ver["name"],
                spec["names"]["plural"],
                spec["names"]["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                status="status" in (ver.get("subresources") or {}),
                custom=True,
                schema=(ver.get("schema") or {}).get("openAPIV3Schema"),
                printer_columns=cols,
            )

    # -- reads
    def get(self, res: Resource, ns: str, name: str) -> Obj:
        with self.lock:
            obj = self.objects.get((res.key, ns, name))
            if obj is None:
                raise ApiError(
                    404, "NotFound", f'{res.plural}{"." + res.group if res.group else ""} "{name}" not found'
                )
            return copy.deepcopy(obj)

    def list_objects(
        self, res: Resource, ns: str | None, labels: str | None = None, fields: str | None = None
    ) -> tuple[list[Obj], int]:
        lm, fm = label_matcher(labels), field_matcher(fields)
        with self.lock:
            out = [
                copy.deepcopy(o)
                for (key, ons, _), o in self.objects.items()
                if key == res.key and (ns is None or ons == ns) and lm(o["metadata"].get("labels") or {}) and fm(o)
            ]
            return sorted(out, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"])), self.rv

    # -- writes (internal callers pass admit=False to skip client-side admission rules)
    def _bump(self) -> str:
        self.rv += 1
        return str(self.rv)

    def _emit(self, res: Resource, kind: str, obj: Obj) -> None:
        self.events.append(Event(int(obj["metadata"]["resourceVersion"]), res.key, kind, copy.deepcopy(obj)))
        self.changed.notify_all()
        for listener in list(self.listeners):
            listener(res, kind, obj)

    def create(self, res: Resource, ns: str, obj: Obj, *, admit: bool = True) -> Obj:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        with self.lock:
            if res.namespaced:
                if meta.get("namespace") not in (None, ns):
                    raise ApiError(400, "BadRequest", "the namespace of the object does not match the request")
                meta["namespace"] = ns
                if ("/namespaces", "", ns) not in self.objects:
                    raise ApiError(404, "NotFound", f'namespaces "{ns}" not found')
            else:
                ns = ""
                meta.pop("namespace", None)
            if not meta.get("name"):
                if not meta.get("generateName"):
                    raise ApiError(422, "Invalid", f"{res.kind}: name or generateName is required")
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            obj["apiVersion"], obj["kind"] = res.api_version, res.kind
            if admit:
                validate_metadata(res, obj)
                self._admit(res, ns, obj)
            if (res.key, ns, meta["name"]) in self.objects:
                raise ApiError(409, "AlreadyExists", f'{res.plural} "{meta["name"]}" already exists')
            if res.status and res.plural not in ("pods", "namespaces"):
                obj.pop("status", None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_iso()
            meta["generation"] = 1
            meta["resourceVersion"] = self._bump()
            self._default(res, obj)
            if res.plural == "customresourcedefinitions":
                self.register_crd(obj)
            self.objects[(res.key, ns, meta["name"])] = obj
            self._emit(res, "ADDED", obj)
            return copy.deepcopy(obj)

    def _default(self, res: Resource, obj: Obj) -> None:
        if res.plural == "jobs":
            spec = obj.setdefault("spec", {})
            spec.setdefault("completions", 1)
            spec.setdefault("parallelism", 1)
            spec.setdefault("backoffLimit", 6)
            spec.setdefault("completionMode", "NonIndexed")
            spec.setdefault("suspend", False)
            uid = obj["metadata"]["uid"]
            extra = {
                "batch.kubernetes.io/controller-uid": uid,
                "batch.kubernetes.io/job-name": obj["metadata"]["name"],
                "controller-uid": uid,
                "job-name": obj["metadata"]["name"],
            }
            spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
            tmeta = spec.setdefault("template", {}).setdefault("metadata", {})
            tmeta["labels"] = {**(tmeta.get("labels") or {}), **extra}
        if res.plural == "pods":
            obj.setdefault("status", {"phase": "Pending"})
            spec = obj.setdefault("spec", {})
            spec.setdefault("restartPolicy", "Always")
            spec.setdefault("enableServiceLinks", True)
        if res.plural == "namespaces":
            labels = obj["metadata"].setdefault("labels", {})
            labels["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
            obj["status"] = {"phase": "Active"}

    def _admit(self, res: Resource, ns: str, obj: Obj) -> None:
        if len(json.dumps(obj)) > REQUEST_MAX_BYTES:
            raise ApiError(413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728")
        if res.custom and res.schema is not None:
            self._validate_custom(res, obj)
        if res.plural == "pods":
            nsobj = self.objects.get(("/namespaces", "", ns)) or {}
            if (nsobj.get("metadata", {}).get("labels") or {}).get(
                "pod-security.kubernetes.io/enforce"
            ) == "restricted":
                problems = pod_security_restricted(obj)
                if problems:
                    raise ApiError(
                        403,
                        "Forbidden",
                        f'pods "{obj["metadata"]["name"]}" is forbidden: violates PodSecurity "restricted:latest": '
                        + "; ".join(problems),
                    )

    def _validate_custom(self, res: Resource, obj: Obj) -> None:
        try:
            import jsonschema
        except ImportError:  # the sim validates custom resources when jsonschema is installed (dev extras)
            return
        schema = copy.deepcopy(res.schema)
        schema.get("properties", {}).pop("metadata", None)
        errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(obj), key=lambda e: list(e.path))
        if errors:
            where = ".".join(str(p) for p in errors[0].path)
            raise ApiError(
                422, "Invalid", f'{res.kind} "{obj["metadata"]["name"]}" is invalid: {where}: {errors[0].message}'
            )

    def replace(self, res: Resource, ns: str, name: str, obj: Obj, *, subresource: str = "", admit: bool = True) -> Obj:
        with self.lock:
            ns = ns if res.namespaced else ""
            current = self.objects.get((res.key, ns, name))
            if current is None:
                raise ApiError(404, "NotFound", f'{res.plural} "{name}" not found')
            want_rv = (obj.get("metadata") or {}).get("resourceVersion")
            if want_rv and want_rv != current["metadata"]["resourceVersion"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {res.plural} "{name}": the object has been modified; '
                    "please apply your changes to the latest version and try again",
                )
            new = copy.deepcopy(obj)
            if subresource == "status":
                new = {**copy.deepcopy(current), "status": new.get("status")}
            else:
                new.setdefault("metadata", {})
                for keep in ("uid", "creationTimestamp", "namespace", "name", "generation", "deletionTimestamp"):
                    if keep in current["metadata"]:
                        new["metadata"][keep] = current["metadata"][keep]
                new["apiVersion"], new["kind"] = res.api_version, res.kind
                if res.status and "status" in current:
                    new["status"] = current["status"]
                elif res.status:
                    new.pop("status", None)
                if new.get("spec") != current.get("spec"):
                    new["metadata"]["generation"] = current["metadata"].get("generation", 1) + 1
            if admit:
                validate_metadata(res, new)
                if res.custom and res.schema is not None:
                    self._validate_custom(res, new)
                if res.plural == "configmaps" and len(json.dumps(new)) > REQUEST_MAX_BYTES:
                    raise ApiError(413, "RequestEntityTooLarge", "Request entity too large")
            if new == {
                **current,
                "metadata": {**new["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]},
            }:
                return copy.deepcopy(current)  # no-op writes do not bump the resourceVersion
            new["metadata"]["resourceVersion"] = self._bump()
            self.objects[(res.key, ns, name)] = new
            self._emit(res, "MODIFIED", new)
            return copy.deepcopy(new)

    def patch(self, res: Resource, ns: str, name: str, patch: Any, content_type: str, *, subresource: str = "") -> Obj:
        with self.lock:
            current = self.get(res, ns if res.namespaced else "", name)
            if "json-patch" in content_type:
                new = json_patch(current, patch)
            elif "merge-patch" in content_type:
                if "strategic" in content_type and res.custom:
                    raise ApiError(
                        415,
                        "UnsupportedMediaType",
                        "the body of the request was in an unknown format - "
                        "accepted media types include: application/json-patch+json, application/merge-patch+json, "
                        "application/apply-patch+yaml",
                    )
                new = merge_patch(current, patch)
            else:
                raise ApiError(415, "UnsupportedMediaType", f"unsupported patch type {content_type}")
            new["metadata"].pop("resourceVersion", None)
            if isinstance(patch, dict) and (patch.get("metadata") or {}).get("resourceVersion"):
                new["metadata"]["resourceVersion"] = patch["metadata"]["resourceVersion"]
            return self.replace(res, ns, name, new, subresource=subresource)

    def update_status(self, res: Resource, ns: str, name: str, mutate: Callable[[Obj], None]) -> Obj | None:
        """Internal (controllers of the simulation): change an object in place; None when it is gone."""
        with self.lock:
            current = self.objects.get((res.key, ns, name))
            if current is None:
                return None
            new = copy.deepcopy(current)
            mutate(new)
            if new == current:
                return copy.deepcopy(current)
            new["metadata"]["resourceVersion"] = self._bump()
            self.objects[(res.key, ns, name)] = new
            self._emit(res, "MODIFIED", new)
            return copy.deepcopy(new)

    def mark_evicted(self, ns: str, name: str) -> None:
        """What the eviction API does first: a DisruptionTarget condition and a deletion timestamp."""

        def mark(pod: Obj) -> None:
            status = pod.setdefault("status", {})
            conds = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
            conds.append(
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "EvictionByEvictionAPI",
                    "message": "Eviction API: evicting",
                    "lastTransitionTime": now_iso(),
                }
            )
            status["conditions"] = conds
            pod["metadata"]["deletionTimestamp"] = now_iso()

        self.update_status(self.resources["/pods"], ns, name, mark)

    def delete(self, res: Resource, ns: str, name: str, propagation: str | None = None) -> Obj:
        with self.lock:
            ns = ns if res.namespaced else ""
            obj = self.objects.pop((res.key, ns, name), None)
            if obj is None:
                raise ApiError(404, "NotFound", f'{res.plural} "{name}" not found')
            # batch/v1 Jobs orphan their pods unless told otherwise (a classic leak the controller must avoid).
            policy = propagation or ("Orphan" if res.plural == "jobs" else "Background")
            obj["metadata"]["resourceVersion"] = self._bump()
            obj["metadata"].setdefault("deletionTimestamp", now_iso())
            if res.plural == "pods":
                self.logs.pop((ns, name), None)
            self._emit(res, "DELETED", obj)
            uid = obj["metadata"]["uid"]
            for (key, dns, dname), dep in list(self.objects.items()):
                refs = dep["metadata"].get("ownerReferences") or []
                if not any(r.get("uid") == uid for r in refs):
                    continue
                if policy == "Orphan":
                    self.update_status(self.resources[key], dns, dname, _orphan(uid))
                elif all(self._owner_gone(r, dns) for r in refs):
                    self.delete(self.resources[key], dns, dname, "Background")
            if res.plural == "namespaces":
                for key, dns, dname in [k for k in self.objects if k[1] == name]:
                    self.delete(self.resources[key], dns, dname, "Background")
            return obj

    def _owner_gone(self, ref: Obj, ns: str) -> bool:
        return not any(
            o["metadata"]["uid"] == ref.get("uid") for (_, ons, _), o in self.objects.items() if ons in (ns, "")
        )

    def collect_garbage(self) -> int:
        """Delete objects whose owners are all gone (what the GC controller does for dangling owners)."""
        with self.lock:
            uids = {o["metadata"]["uid"] for o in self.objects.values()}
            doomed = [
                k
                for k, o in self.objects.items()
                if (refs := o["metadata"].get("ownerReferences")) and not any(r.get("uid") in uids for r in refs)
            ]
            for key, ns, name in doomed:
                if (key, ns, name) in self.objects:
                    self.delete(self.resources[key], ns, name, "Background")
            return len(doomed)

    # -- watches
    def events_since(self, res: Resource, ns: str | None, rv: int) -> list[Event] | None:
        """Events after `rv` for a resource (None: `rv` is older than the event window: 410 Gone)."""
        with self.lock:
            if self.events and rv < self.events[0].rv - 1 and len(self.events) == self.events.maxlen:
                return None
            return [
                e
                for e in self.events
                if e.rv > rv and e.res_key == res.key and (ns is None or e.obj["metadata"].get("namespace") == ns)
            ]
