"""The node side of the simulation: a Job controller and a kubelet that runs pods.

`JobController` does what kube-controller-manager's Job controller does for our Jobs: one pod at a
time from the template (labels, ownerReference), podFailurePolicy (FailJob / Ignore / Count on exit
codes and pod conditions), backoffLimit, activeDeadlineSeconds, podReplacementPolicy=Failed,
ttlSecondsAfterFinished, and the Complete / Failed conditions with their reasons.

`Kubelet` schedules pods onto one node with a CPU capacity (so 1-CPU graders on a 2-CPU node run at
most two at once), enforces pod activeDeadlineSeconds, materialises ConfigMap volumes, and runs each
pod with a `Runner`: `FakeRunner` answers instantly with a verdict computed from nothing, or with an
injected fault (the control plane only). Real grader pods run on the local Kubernetes of
`make cluster-up` (tests/k8s/test_cluster_path.py).
"""

from __future__ import annotations

import json
import logging
import math
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from wpbench_controller.sim.store import Obj, Resource, Store, label_matcher, now_iso

log = logging.getLogger(__name__)
NODE_NAME = "sim-node-1"


def parse_quantity(text: str | int | float) -> float:
    """Kubernetes quantity -> float (cpu in cores, memory in bytes)."""
    if isinstance(text, int | float):
        return float(text)
    m = re.match(r"^([0-9.]+)([a-zA-Z]*)$", text)
    if not m:
        raise ValueError(f"bad quantity {text!r}")
    num, unit = float(m.group(1)), m.group(2)
    factors = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}
    return num * factors[unit]


def _cond(obj: Obj, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True" for c in (obj.get("status") or {}).get("conditions") or []
    )


# ---- runners ----------------------------------------------------------------------------------
@dataclass
class Mounts:
    """Host-side material for a pod's volumes."""

    tmpfs: dict[str, str] = field(default_factory=dict)  # mountPath -> docker tmpfs options
    binds: list[tuple[str, str, bool]] = field(default_factory=list)  # (host, container, read_only)
    files: dict[str, bytes] = field(default_factory=dict)  # container path -> content (FakeRunner reads these)


class Handle(Protocol):
    def wait(self, timeout: float) -> int | None: ...
    def kill(self) -> None: ...
    def logs(self) -> str: ...
    def termination_message(self) -> str: ...
    def oom_killed(self) -> bool: ...
    def cleanup(self) -> None: ...


class Runner(Protocol):
    def has_image(self, image: str) -> bool: ...
    def start(self, pod: Obj, mounts: Mounts, *, network_none: bool, fault: str | None) -> Handle: ...


class _FakeHandle:
    def __init__(self, exit_code: int | None, log_text: str, message: str, delay: float) -> None:
        self.exit_code, self.log_text, self.message = exit_code, log_text, message
        self.done_at = time.monotonic() + delay
        self.killed = threading.Event()

    def wait(self, timeout: float) -> int | None:
        if self.exit_code is None:  # hang
            return 137 if self.killed.wait(timeout) else None
        remaining = self.done_at - time.monotonic()
        if remaining > timeout:
            return 137 if self.killed.wait(timeout) else None
        if self.killed.wait(max(0.0, remaining)):
            return 137
        return self.exit_code

    def kill(self) -> None:
        self.killed.set()

    def logs(self) -> str:
        return self.log_text

    def termination_message(self) -> str:
        return self.message

    def oom_killed(self) -> bool:
        return False

    def cleanup(self) -> None:
        pass


class FakeRunner:
    """No containers: each pod 'grades' its task instantly with a passing verdict (control-plane benchmarks)."""

    def __init__(self, delay: float = 0.01) -> None:
        self.delay = delay

    def has_image(self, image: str) -> bool:
        return True

    def start(self, pod: Obj, mounts: Mounts, *, network_none: bool, fault: str | None) -> Handle:
        task = json.loads(next(iter(mounts.files.values()), b"{}") or b"{}")
        verdict = {
            "contract_version": "1",
            "test_id": task.get("test_id"),
            "status": "passed",
            "reason": "simulated",
            "scores": {"execution_pass": True, "runtime": 1.0, "static": 1.0, "static_policy_pass": True},
        }
        compact = json.dumps({k: verdict[k] for k in ("test_id", "status", "scores")})
        if fault == "hang":
            return _FakeHandle(None, "", "", 0)
        if fault == "exit2":
            verdict.update(status="harness_error", reason="simulated bad task")
            verdict["scores"] = {"execution_pass": False, "runtime": 0.0, "static": 0.0, "static_policy_pass": False}
            return _FakeHandle(2, json.dumps(verdict) + "\n", json.dumps({"status": "harness_error"}), self.delay)
        if fault == "crash":
            return _FakeHandle(139, "Segmentation fault\n", "", self.delay)
        return _FakeHandle(0, json.dumps(verdict) + "\n", compact, self.delay)


# ---- the job controller -------------------------------------------------------------------------
class JobController:
    """Drives Jobs like kube-controller-manager (for the non-indexed, one-completion Jobs we create)."""

    def __init__(self, store: Store, backoff_seconds: float = 0.2) -> None:
        self.store = store
        self.jobs: Resource = store.resources["batch/jobs"]
        self.pods: Resource = store.resources["/pods"]
        self.backoff_seconds = backoff_seconds
        self._accounted: set[str] = set()  # failed pod uids already counted or ignored
        self._finished_at: dict[str, float] = {}
        self._next_pod_at: dict[str, float] = {}
        self._lock = threading.Lock()

    def sync_all(self) -> None:
        jobs, _ = self.store.list_objects(self.jobs, None)
        for job in jobs:
            try:
                self.sync(job)
            except Exception:
                log.exception("sim job controller: %s", job["metadata"]["name"])

    def _job_pods(self, job: Obj) -> list[Obj]:
        uid = job["metadata"]["uid"]
        pods, _ = self.store.list_objects(
            self.pods, job["metadata"]["namespace"], f"batch.kubernetes.io/controller-uid={uid}"
        )
        return sorted(
            pods, key=lambda p: p["metadata"]["creationTimestamp"] + p["metadata"]["resourceVersion"].zfill(12)
        )

    def sync(self, job: Obj) -> None:
        ns, name, uid = job["metadata"]["namespace"], job["metadata"]["name"], job["metadata"]["uid"]
        spec = job["spec"]
        if _cond(job, "Complete") or _cond(job, "Failed"):
            ttl = spec.get("ttlSecondsAfterFinished")
            done = self._finished_at.setdefault(uid, time.monotonic())
            if ttl is not None and time.monotonic() - done >= ttl:
                self.store.delete(self.jobs, ns, name, "Background")
            return
        pods = self._job_pods(job)
        status = dict(job.get("status") or {})
        status.setdefault("startTime", now_iso())
        failed_count = int(status.get("failed", 0))
        verdict: tuple[str, str] | None = None  # (reason, message) to fail the job
        for pod in pods:
            pst = pod.get("status") or {}
            puid = pod["metadata"]["uid"]
            if pst.get("phase") != "Failed" or puid in self._accounted:
                continue
            self._accounted.add(puid)
            action, index = self._match(spec.get("podFailurePolicy"), pod)
            if action != "Ignore":
                failed_count += 1
            if action == "FailJob":
                verdict = (
                    "PodFailurePolicy",
                    f"Container grader for pod {ns}/{pod['metadata']['name']} failed with exit code "
                    f"{self._exit_code(pod)} matching FailJob rule at index {index}",
                )
            if action == "Ignore" or pod["metadata"].get("deletionTimestamp"):
                # an evicted pod is deleted once accounted for (the eviction was a delete)
                self.store.delete(self.pods, ns, pod["metadata"]["name"], "Background")
        pods = self._job_pods(job)
        active = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        succeeded = [p for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"]
        status["failed"] = failed_count
        deadline = spec.get("activeDeadlineSeconds")
        started = status["startTime"]
        if verdict is None and succeeded:
            status.update(succeeded=1, active=0, ready=0, completionTime=now_iso())
            status["conditions"] = [
                self._c("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods"),
                self._c("Complete", "CompletionsReached", "Reached expected number of succeeded pods"),
            ]
        elif verdict is None and failed_count > spec.get("backoffLimit", 6):
            verdict = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
        elif verdict is None and deadline is not None and _age(started) > deadline:
            verdict = ("DeadlineExceeded", "Job was active longer than specified deadline")
        if verdict is not None:
            for pod in active:
                self.store.delete(self.pods, ns, pod["metadata"]["name"], "Background")
            status.update(active=0, ready=0)
            status["conditions"] = [self._c("FailureTarget", *verdict), self._c("Failed", *verdict)]
        elif not succeeded:
            if not active:
                now = time.monotonic()
                at = self._next_pod_at.setdefault(uid, now + (self.backoff_seconds if failed_count else 0.0))
                if now >= at:
                    self._next_pod_at.pop(uid, None)
                    self._create_pod(job)
                    active = [1]  # type: ignore[list-item]
            status["active"] = len(active)
        self.store.update_status(self.jobs, ns, name, lambda o: o.__setitem__("status", status))

    @staticmethod
    def _c(kind: str, reason: str, message: str) -> Obj:
        now = now_iso()
        return {
            "type": kind,
            "status": "True",
            "reason": reason,
            "message": message,
            "lastProbeTime": now,
            "lastTransitionTime": now,
        }

    @staticmethod
    def _exit_code(pod: Obj) -> int | None:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            term = (cs.get("state") or {}).get("terminated")
            if term:
                return int(term.get("exitCode", 0))
        return None

    def _match(self, policy: Obj | None, pod: Obj) -> tuple[str, int]:
        for i, rule in enumerate((policy or {}).get("rules") or []):
            codes = rule.get("onExitCodes")
            if codes:
                code = self._exit_code(pod)
                if code is not None and code != 0:
                    inside = code in codes.get("values", [])
                    if inside == (codes.get("operator") == "In"):
                        return rule["action"], i
            for pattern in rule.get("onPodConditions") or []:
                if any(
                    c.get("type") == pattern["type"] and c.get("status") == pattern.get("status", "True")
                    for c in (pod.get("status") or {}).get("conditions") or []
                ):
                    return rule["action"], i
        return "Count", -1

    def _create_pod(self, job: Obj) -> None:
        template = job["spec"]["template"]
        meta = template.get("metadata") or {}
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"{job['metadata']['name']}-",
                "namespace": job["metadata"]["namespace"],
                "labels": dict(meta.get("labels") or {}),
                "annotations": dict(meta.get("annotations") or {}),
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": job["metadata"]["name"],
                        "uid": job["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": json.loads(json.dumps(template["spec"])),
        }
        try:
            self.store.create(self.pods, job["metadata"]["namespace"], pod)  # admission applies (Pod Security)
        except Exception as exc:
            log.warning("sim job controller: FailedCreate for %s: %s", job["metadata"]["name"], exc)


def _age(iso: str) -> float:
    from datetime import UTC, datetime

    return (datetime.now(UTC) - datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)).total_seconds()


# ---- the kubelet --------------------------------------------------------------------------------
class Kubelet:
    """One node: schedules pods within its CPU capacity and runs them with a Runner."""

    def __init__(self, store: Store, runner: Runner, cpu_capacity: float = 2.0) -> None:
        self.store = store
        self.runner = runner
        self.cpu_capacity = cpu_capacity
        self.pods: Resource = store.resources["/pods"]
        self.running: dict[tuple[str, str], Handle | None] = {}
        self.faults: dict[str, list[str]] = {}  # test id (label) -> faults to apply to its next pods, in order
        self.max_concurrent = 0
        self._lock = threading.Lock()
        self._killed: set[tuple[str, str]] = set()
        store.evict_hook = self.on_evict

    def _cpu(self, pod: Obj) -> float:
        c = pod["spec"]["containers"][0]
        return parse_quantity(((c.get("resources") or {}).get("requests") or {}).get("cpu", "0.1"))

    def sync(self) -> None:
        pods, _ = self.store.list_objects(self.pods, None)
        with self._lock:
            for key in list(self.running):
                if not any((p["metadata"]["namespace"], p["metadata"]["name"]) == key for p in pods):
                    handle = self.running.get(key)
                    self._killed.add(key)
                    if handle is not None:
                        handle.kill()
            used = sum(
                self._cpu(p)
                for p in pods
                if p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") in ("Pending", "Running")
            )
            for pod in pods:
                if pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp"):
                    continue
                need = self._cpu(pod)
                if used + need > self.cpu_capacity + 1e-9:
                    continue  # stays Pending: Insufficient cpu
                used += need
                key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
                self.running[key] = None
                self.max_concurrent = max(self.max_concurrent, len(self.running))
                self.store.update_status(self.pods, *key, self._scheduled)
                threading.Thread(target=self._run, args=(key,), name=f"pod-{key[1]}", daemon=True).start()

    @staticmethod
    def _scheduled(pod: Obj) -> None:
        pod["spec"]["nodeName"] = NODE_NAME
        pod["status"].update(phase="Pending", startTime=now_iso(), hostIP="127.0.0.1", qosClass="Guaranteed")
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now_iso()}]

    def on_evict(self, ns: str, name: str) -> None:
        with self._lock:
            self._killed.add((ns, name))
            handle = self.running.get((ns, name))
        if handle is not None:
            handle.kill()

    def _network_none(self, pod: Obj) -> bool:
        policies, _ = self.store.list_objects(
            self.store.resources["networking.k8s.io/networkpolicies"], pod["metadata"]["namespace"]
        )
        labels = pod["metadata"].get("labels") or {}
        for pol in policies:
            spec = pol.get("spec") or {}
            sel = (spec.get("podSelector") or {}).get("matchLabels") or {}
            if not label_matcher(",".join(f"{k}={v}" for k, v in sel.items()))(labels):
                continue
            types = spec.get("policyTypes") or ["Ingress"]
            if "Ingress" in types and "Egress" in types and not spec.get("ingress") and not spec.get("egress"):
                return True
        return False

    def _mounts(self, pod: Obj, workdir: Path) -> Mounts:
        spec = pod["spec"]
        c = spec["containers"][0]
        psc = spec.get("securityContext") or {}
        uid = (c.get("securityContext") or {}).get("runAsUser", psc.get("runAsUser", 0))
        gid = psc.get("fsGroup", psc.get("runAsGroup", uid))
        mounts = Mounts()
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        for vm in c.get("volumeMounts") or []:
            vol = volumes[vm["name"]]
            if "emptyDir" in vol:
                ed = vol["emptyDir"] or {}
                if ed.get("medium") == "Memory":
                    size = int(parse_quantity(ed.get("sizeLimit", "64Mi")))
                    mounts.tmpfs[vm["mountPath"]] = f"rw,exec,size={size},uid={uid},gid={gid},mode=0777"
                else:
                    host = workdir / f"vol-{vm['name']}"
                    host.mkdir(mode=0o777)
                    host.chmod(0o777)
                    mounts.binds.append((str(host), vm["mountPath"], bool(vm.get("readOnly"))))
            elif "configMap" in vol:
                src = vol["configMap"]
                cm = self.store.get(self.store.resources["/configmaps"], pod["metadata"]["namespace"], src["name"])
                data = cm.get("data") or {}
                items = src.get("items") or [{"key": k, "path": k} for k in data]
                host = workdir / f"vol-{vm['name']}"
                host.mkdir()
                host.chmod(0o755)
                for it in items:
                    if it["key"] not in data:
                        raise RuntimeError(
                            f"configmap {src['name']} has no key {it['key']} (CreateContainerConfigError)"
                        )
                    target = host / it["path"]
                    target.write_text(data[it["key"]])
                    target.chmod(it.get("mode", src.get("defaultMode", 0o644)))
                    mounts.files[f"{vm['mountPath']}/{it['path']}"] = data[it["key"]].encode()
                mounts.binds.append((str(host), vm["mountPath"], True))
            else:
                raise RuntimeError(f"volume {vm['name']}: unsupported in the simulation")
        return mounts

    def _fault(self, pod: Obj) -> str | None:
        test = (pod["metadata"].get("labels") or {}).get("wpbench-k8s.org/test", "")
        with self._lock:
            queue = self.faults.get(test)
            return queue.pop(0) if queue else None

    def _set(self, key: tuple[str, str], mutate: Callable[[Obj], None]) -> None:
        self.store.update_status(self.pods, *key, mutate)

    def _set_waiting(self, key: tuple[str, str], container: Obj, reason: str, message: str) -> None:
        """The container could not start: report it as kubelet does, as a waiting state."""
        status = {
            "name": container["name"],
            "image": container["image"],
            "ready": False,
            "restartCount": 0,
            "imageID": "",
            "state": {"waiting": {"reason": reason, "message": message}},
        }
        self._set(key, lambda p: p["status"].update(containerStatuses=[status]))

    def _run(self, key: tuple[str, str]) -> None:
        try:
            self._run_pod(key)
        except Exception:
            log.exception("sim kubelet: pod %s/%s", *key)
        finally:
            with self._lock:
                self.running.pop(key, None)
                self._killed.discard(key)

    def _run_pod(self, key: tuple[str, str]) -> None:
        try:
            pod = self.store.get(self.pods, *key)
        except Exception:
            return
        c = pod["spec"]["containers"][0]
        deadline = pod["spec"].get("activeDeadlineSeconds")
        t0 = time.monotonic()
        remaining: Callable[[], float] = (
            (lambda: deadline - (time.monotonic() - t0)) if deadline else (lambda: math.inf)
        )
        fault = self._fault(pod)
        if fault == "evict-on-start":
            threading.Timer(0.5, lambda: self._self_evict(key)).start()
            # The container must still be running when the eviction lands: a fast grader would
            # otherwise finish first and the fault would race the test.
            fault = "hang"
        if not self.runner.has_image(c["image"]) or fault == "image-pull":
            self._set_waiting(key, c, "ErrImagePull", f"pull {c['image']}: not found")
            while remaining() > 0 and key not in self._killed:
                time.sleep(0.2)
            self._finish(key, None, "", "", deadline_hit=key not in self._killed, started=None)
            return
        workdir = Path(tempfile.mkdtemp(prefix="wpbench-sim-"))
        try:
            mounts = self._mounts(pod, workdir)
            handle = self.runner.start(pod, mounts, network_none=self._network_none(pod), fault=fault)
        except Exception as exc:
            shutil.rmtree(workdir, ignore_errors=True)
            msg = str(exc)
            self._set_waiting(key, c, "CreateContainerConfigError", msg)
            while remaining() > 0 and key not in self._killed:
                time.sleep(0.2)
            self._finish(key, None, "", "", deadline_hit=key not in self._killed, started=None)
            return
        with self._lock:
            if key in self.running:
                self.running[key] = handle
            killed_early = key in self._killed
        if killed_early:
            handle.kill()
        started = now_iso()
        image = c["image"]

        def running(pod: Obj) -> None:
            pod["status"]["phase"] = "Running"
            pod["status"]["containerStatuses"] = [
                {
                    "name": c["name"],
                    "image": image,
                    "imageID": f"docker://{image}",
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "state": {"running": {"startedAt": started}},
                }
            ]
            pod["status"].setdefault("conditions", []).append(
                {"type": "Ready", "status": "True", "lastTransitionTime": started}
            )

        self._set(key, running)
        self.store.logs[key] = handle.logs  # live logs while running
        code = handle.wait(remaining())
        deadline_hit = False
        if code is None:
            handle.kill()
            code = handle.wait(10) or 137
            deadline_hit = key not in self._killed
        text, message = handle.logs(), handle.termination_message()
        oom = handle.oom_killed()
        handle.cleanup()
        shutil.rmtree(workdir, ignore_errors=True)
        self._finish(key, code, text, message, deadline_hit=deadline_hit, started=started, oom=oom)

    def _self_evict(self, key: tuple[str, str]) -> None:
        self.store.mark_evicted(*key)
        self.on_evict(*key)

    def _finish(
        self,
        key: tuple[str, str],
        code: int | None,
        text: str,
        message: str,
        *,
        deadline_hit: bool,
        started: str | None,
        oom: bool = False,
    ) -> None:
        finished = now_iso()
        if text or code is not None:
            self.store.logs[key] = text

        def update(pod: Obj) -> None:
            st = pod["status"]
            c = pod["spec"]["containers"][0]
            ok = code == 0 and not deadline_hit
            st["phase"] = "Succeeded" if ok else "Failed"
            if deadline_hit:
                st["reason"] = "DeadlineExceeded"
                st["message"] = "Pod was active on the node longer than the specified deadline"
            st["conditions"] = [x for x in st.get("conditions") or [] if x["type"] != "Ready"] + [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "PodCompleted" if ok else "PodFailed",
                    "lastTransitionTime": finished,
                }
            ]
            if code is not None:
                reason = "Completed" if code == 0 else ("OOMKilled" if oom else "Error")
                term = {"exitCode": code, "reason": reason, "startedAt": started or finished, "finishedAt": finished}
                if message:
                    term["message"] = message
                st["containerStatuses"] = [
                    {
                        "name": c["name"],
                        "image": c["image"],
                        "imageID": f"docker://{c['image']}",
                        "ready": False,
                        "restartCount": 0,
                        "started": False,
                        "state": {"terminated": term},
                    }
                ]

        self.store.update_status(self.pods, *key, update)
