"""Helpers for tests against the real local Kubernetes (`make cluster-up`): one namespace per test, with
the chart installed into it by the real helm, so the controller runs in-cluster with its ServiceAccount
and Role exactly as users deploy it. The real CLI runs as a subprocess with a kubeconfig whose context
points at the test's namespace."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config, watch

REPO = Path(__file__).resolve().parents[2]
CONTEXT = "wpbench-local"
STATE = Path(os.environ.get("WPBENCH_CLUSTER_STATE", "/var/lib/wpbench-k8s"))
ADMIN_KUBECONFIG = STATE / "pki" / "admin.kubeconfig"
CACHE = Path(os.environ.get("WPBENCH_CACHE", "/var/cache/wpbench"))
BIN = CACHE / "k8s" / "v1.37.2" / "bin"
GATEWAY = "10.244.0.1"  # the pod bridge's gateway: the node, and the only host address pods can reach
TEST_LABEL = "wpbench-k8s.org/test"
OWNER_ANNOTATION = "wpbench-k8s.org/test-owner"
CONTROLLER_IMAGE = os.environ.get("WPBENCH_CONTROLLER_IMAGE", "wpbench-controller:dev")
GRADER_IMAGE = os.environ.get("WPBENCH_IMAGE", "wpbench-grader:dev")
K8S_SCHEMA_VERSION = "1.37.0"  # kubernetes-validate's schema of the cluster's Kubernetes
PSA = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")}
# CLUSTER=kind: the same tests against the kind cluster of `make kind-up` (three nodes) instead of the local one.
KIND = os.environ.get("CLUSTER", "local") == "kind"
KIND_CLUSTER = os.environ.get("KIND_CLUSTER", "wpbench")
KIND_STATE = Path(os.environ.get("WPBENCH_KIND_STATE", "/var/lib/wpbench-kind"))
KIND_KUBECONFIG = KIND_STATE / "kubeconfig"
KIND_BIN = CACHE / "kind" / "v0.33.0" / "bin" / "kind"


def tool(name: str) -> str:
    path = BIN / name
    return str(path) if path.exists() else name


def ensure_node_image(image: str) -> None:
    """The Docker image `image` in the node's containerd (as cluster-up imports them), imported if missing or stale."""
    ctr = [str(CACHE / "k8s" / "debs" / "root" / "usr" / "bin" / "ctr"), "-a", "/run/wpbench-k8s/containerd.sock",
           "-n", "k8s.io"]  # fmt: skip
    docker_id = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", image], capture_output=True, text=True,
                               check=True).stdout.strip()  # fmt: skip
    ref = image if "/" in image else f"docker.io/library/{image}"
    listed = subprocess.run([*ctr, "images", "ls", f"name=={ref}"], capture_output=True, text=True).stdout
    stamp = STATE / "images" / image.replace("/", "_").replace(":", "_")
    if ref in listed and stamp.exists() and stamp.read_text().strip() == docker_id:
        return
    save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
    subprocess.run([*ctr, "images", "import", "-"], stdin=save.stdout, check=True, capture_output=True)
    assert save.wait() == 0, f"docker save {image} failed"
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(docker_id + "\n")


def kind_engine_env() -> dict[str, str]:
    """The environment for docker and kind commands against the engine the kind cluster runs on."""
    env = dict(os.environ)
    if (KIND_STATE / "engine").exists() and (KIND_STATE / "engine").read_text().strip() == "private":
        env["DOCKER_HOST"] = "unix:///run/wpbench-kind/docker.sock"
    return env


def kind_node_network(node: str = "control-plane") -> tuple[str, str]:
    """A kind node container's network namespace (`/proc/<pid>/ns/net`) and its address on kind's network: an
    address every pod of the cluster reaches (the node's own, routed by kube-router), where nothing outside the
    engine's namespace is reachable from a pod."""
    out = subprocess.run(
        ["docker", "inspect", "-f", '{{.State.Pid}} {{(index .NetworkSettings.Networks "kind").IPAddress}}',
         f"{KIND_CLUSTER}-{node}"], capture_output=True, text=True, check=True, env=kind_engine_env(),
    ).stdout.split()  # fmt: skip
    pid, address = out
    return f"/proc/{pid}/ns/net", address


def ensure_kind_image(image: str) -> None:
    """The machine's Docker image `image` on every kind node (as kind-up loads them): copied into kind's engine if
    that is another one, then `kind load docker-image`, which skips a node that has the image's id already."""
    env = kind_engine_env()
    want = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", image], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip
    if env.get("DOCKER_HOST"):
        have = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", image], capture_output=True, text=True,
                              env=env).stdout.strip()  # fmt: skip
        if have != want:
            save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
            subprocess.run(["docker", "load", "-q"], stdin=save.stdout, check=True, capture_output=True, env=env)
            assert save.wait() == 0, f"docker save {image} failed"
    subprocess.run([str(KIND_BIN), "load", "docker-image", image, "--name", KIND_CLUSTER], check=True,
                   capture_output=True, env=env, timeout=900)  # fmt: skip


def _add_properties(live: dict[str, Any], ours: dict[str, Any]) -> bool:
    """Add to `live` every property of `ours` it lacks, at any depth (object properties, array items)."""
    added = False
    if "properties" in ours:
        props = live.setdefault("properties", {})
        for key, value in ours["properties"].items():
            if key not in props:
                props[key], added = value, True
            else:
                added = _add_properties(props[key], value) or added
    if isinstance(ours.get("items"), dict) and isinstance(live.get("items"), dict):
        added = _add_properties(live["items"], ours["items"]) or added
    return added


def ensure_crd_fields(cluster: Cluster) -> None:
    """The cluster's CRD has every spec and status field of this checkout's (`kube.crd`), added in place.

    The chart renders the CRD only for the release that owns it, and the one on this shared cluster may
    predate a field. Fields are only ever added (another checkout's stay), with the object's
    resourceVersion, so two test sessions doing this at once cannot undo each other.
    """
    from wpbench_k8s.kube.crd import SPEC_SCHEMA, STATUS_SCHEMA, crd

    name = crd()["metadata"]["name"]
    for _ in range(5):
        live = json.loads(cluster.kubectl("get", "crd", name, "-o", "json").stdout)
        schema = live["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
        added = False
        for part, ours in (("spec", SPEC_SCHEMA), ("status", STATUS_SCHEMA)):
            added = _add_properties(schema[part], ours) or added
        if not added:
            return
        res = cluster.kubectl("replace", "-f", "-", input=json.dumps(live), check=False)
        if res.returncode == 0:
            return
        assert "Conflict" in res.stderr or "modified" in res.stderr, res.stderr[-2000:]
    raise AssertionError(f"CRD {name}: fields not added after 5 tries")


def cluster_reachable(kubeconfig: Path) -> str | None:
    """None when the API server answers /readyz, else why not."""
    if not kubeconfig.exists():
        return f"{kubeconfig} missing"
    res = subprocess.run([tool("kubectl"), "--kubeconfig", str(kubeconfig), "get", "--raw", "/readyz"],
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    return None if res.returncode == 0 else f"API server not ready: {res.stderr.strip()[-300:]}"


@dataclass
class Cluster:
    """The running cluster (session-wide): an admin kubeconfig and clients."""

    kubeconfig: Path
    kind: bool = False
    api: k8s.ApiClient = field(init=False)

    def __post_init__(self) -> None:
        self.api = config.new_client_from_config(str(self.kubeconfig))
        self.core = k8s.CoreV1Api(self.api)
        self.batch = k8s.BatchV1Api(self.api)
        self.custom = k8s.CustomObjectsApi(self.api)
        self.rbac = k8s.RbacAuthorizationV1Api(self.api)

    def api_endpoint(self) -> tuple[str, int]:
        """Where the API server listens as pods see it (the `kubernetes` Service's endpoint)."""
        (ep,) = self.core.read_namespaced_endpoints("kubernetes", "default").subsets
        return str(ep.addresses[0].ip), int(ep.ports[0].port)

    def service_ip(self) -> str:
        """The `kubernetes` Service's cluster IP."""
        return str(self.core.read_namespaced_service("kubernetes", "default").spec.cluster_ip)

    def kubectl(self, *args: str, check: bool = True, **kw: Any) -> subprocess.CompletedProcess[str]:
        res = subprocess.run([tool("kubectl"), "--kubeconfig", str(self.kubeconfig), *args],
                             capture_output=True, text=True, timeout=kw.pop("timeout", 120), **kw)  # fmt: skip
        if check:
            assert res.returncode == 0, f"kubectl {' '.join(args)}: {res.stderr[-2000:]}"
        return res

    def helm(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        res = subprocess.run([tool("helm"), "--kubeconfig", str(self.kubeconfig), *args],
                             capture_output=True, text=True, timeout=600)  # fmt: skip
        if check:
            assert res.returncode == 0, f"helm {' '.join(args)}: {res.stderr[-2000:]}"
        return res


class ObjectEvents:
    """Every change the API server makes to the run objects of a namespace (WPBenchRuns, ConfigMaps but the
    cluster's CA bundle, NetworkPolicies, Jobs) while the test runs, from watches started at a list's
    resourceVersion: one event per successful write that changed something (the server sends none for a
    write that changed nothing, nor for a refused one)."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []  # (resource, type, object) in arrival order
        self.failure = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watches: list[watch.Watch] = []
        networking = k8s.NetworkingV1Api(cluster.api)
        lists: dict[str, Any] = {
            "wpbenchruns": lambda **kw: cluster.custom.list_namespaced_custom_object(
                "wpbench-k8s.org", "v1alpha1", namespace, "wpbenchruns", **kw
            ),
            "configmaps": lambda **kw: cluster.core.list_namespaced_config_map(namespace, **kw),
            "networkpolicies": lambda **kw: networking.list_namespaced_network_policy(namespace, **kw),
            "jobs": lambda **kw: cluster.batch.list_namespaced_job(namespace, **kw),
        }
        for resource, list_fn in lists.items():  # listed here, so every write after __init__ is seen
            listed = list_fn(_preload_content=False)
            version = json.loads(listed.data)["metadata"]["resourceVersion"]
            threading.Thread(target=self._run, args=(resource, list_fn, version), daemon=True).start()

    def _run(self, resource: str, list_fn: Any, version: str) -> None:
        while not self._stop.is_set():
            w = watch.Watch()
            self._watches.append(w)
            try:
                for ev in w.stream(list_fn, resource_version=version, timeout_seconds=60):
                    obj = ev["raw_object"]
                    if ev["type"] not in ("ADDED", "MODIFIED", "DELETED"):
                        raise RuntimeError(f"watch {resource}: {obj}")  # would lose events: the count fails
                    version = obj["metadata"]["resourceVersion"]
                    if resource == "configmaps" and obj["metadata"]["name"] == "kube-root-ca.crt":
                        continue
                    with self._lock:
                        self.events.append((resource, ev["type"], obj))
            except RuntimeError as exc:
                self.failure = str(exc)
                return
            except Exception:  # a dropped connection resumes from the last version seen
                time.sleep(0.5)

    def of(self, resource: str, *types: str) -> list[dict[str, Any]]:
        with self._lock:
            return [obj for res, typ, obj in self.events if res == resource and (not types or typ in types)]

    def stop(self) -> None:
        self._stop.set()
        for w in self._watches:
            w.stop()


class PodRecorder:
    """Every grader pod (or, with `kind="jobs"`, grader Job) created in a namespace while the test runs
    (the API server keeps no history)."""

    def __init__(self, cluster: Cluster, namespace: str, kind: str = "pods") -> None:
        self.uids: dict[str, str] = {}
        self.nodes: dict[str, str] = {}  # pod uid -> the node it was bound to
        self._stop = threading.Event()
        self._w = watch.Watch()
        lister = cluster.batch.list_namespaced_job if kind == "jobs" else cluster.core.list_namespaced_pod
        self._thread = threading.Thread(target=self._run, args=(lister, namespace), daemon=True)
        self._thread.start()

    def _run(self, lister: Any, namespace: str) -> None:
        while not self._stop.is_set():
            try:
                for ev in self._w.stream(lister, namespace, timeout_seconds=30):
                    obj = ev["object"]
                    labels = obj.metadata.labels or {}
                    if "wpbench-k8s.org/run" in labels and labels.get("app.kubernetes.io/component") == "grader":
                        item = (obj.metadata.annotations or {}).get("wpbench-k8s.org/item-id", "?")
                        self.uids.setdefault(obj.metadata.uid, item)
                        node = getattr(obj.spec, "node_name", None)
                        if node:
                            self.nodes[obj.metadata.uid] = node
            except Exception:  # a broken watch is restarted; the recorder only counts
                time.sleep(0.5)

    def per_item(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for item in self.uids.values():
            counts[item] = counts.get(item, 0) + 1
        return counts

    def stop(self) -> None:
        self._stop.set()
        self._w.stop()


@dataclass
class Space:
    """One test's namespace on the real cluster, with its own chart release (controller in-cluster)."""

    cluster: Cluster
    namespace: str
    tmp: Path
    release: str = ""
    pods: PodRecorder | None = None

    @property
    def kubeconfig(self) -> Path:
        return self.tmp / "kubeconfig"

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
        env["KUBECONFIG"] = str(self.kubeconfig)
        env["WPBENCH_K8S_NAMESPACE"] = self.namespace
        return env

    def cli(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """The real `wpbench-k8s` command line, as a user runs it (context namespace = this test's)."""
        res = subprocess.run([sys.executable, "-m", "wpbench_k8s", *args], capture_output=True, text=True,
                             cwd=REPO, env=self.env, timeout=timeout)  # fmt: skip
        if check:
            assert res.returncode == 0, (
                f"wpbench-k8s {' '.join(args)} failed:\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
            )
        return res

    def install_controller(self, *sets: str, secret_env: dict[str, str] | None = None) -> None:
        """The chart into this namespace (also its run namespace), the controller image already on the node."""
        self.release = self.namespace
        extra: list[str] = []
        if secret_env:
            self.cluster.core.create_namespaced_secret(
                self.namespace, {"metadata": {"name": "model-keys"}, "stringData": secret_env}
            )
            extra += ["--set", "apiKeySecret.name=model-keys"]
        repo_part, tag = CONTROLLER_IMAGE.rsplit(":", 1)
        self.cluster.helm(
            "install", self.release, str(REPO / "charts" / "wpbench-k8s"), "--namespace", self.namespace,
            "--set", f"image.repository={repo_part}", "--set", f"image.tag={tag}",
            "--set", f"namespaces.runs={{{self.namespace}}}", "--set", "namespaces.create=false",
            "--set", "controller.resyncSeconds=2", "--set", "controller.resources.requests.cpu=50m",
            # one replica unless a test asks for more (tests that kill "the" controller pod, CPU on a small node)
            "--set", "controller.replicas=1",
            *[a for s in sets for a in ("--set", s)], *extra, "--wait", "--timeout", "5m",
        )  # fmt: skip

    def controller_pods(self) -> list[k8s.V1Pod]:
        return self.cluster.core.list_namespaced_pod(
            self.namespace, label_selector=f"app.kubernetes.io/instance={self.release}"
        ).items

    def controller_log(self) -> str:
        """The last lines of every controller pod's log (with two replicas, `kubectl logs deployment/` picks one)."""
        out = ""
        for pod in self.controller_pods():
            res = self.cluster.kubectl("logs", "-n", self.namespace, pod.metadata.name, "--tail", "200", check=False)
            out += f"--- {pod.metadata.name}\n{res.stdout}{res.stderr}"
        return out

    def run_object(self, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = self.cluster.custom.get_namespaced_custom_object(
            "wpbench-k8s.org", "v1alpha1", self.namespace, "wpbenchruns", name
        )
        return obj

    def objects(self, kind: str) -> list[dict[str, Any]]:
        res = self.cluster.kubectl("get", kind, "-n", self.namespace, "-o", "json")
        return [o for o in json.loads(res.stdout)["items"] if "wpbench-k8s.org/run" in o["metadata"].get("labels", {})]

    def wait_phase(
        self, name: str, timeout: float = 600, phases: tuple[str, ...] = ("Succeeded", "Failed", "Cancelled")
    ) -> dict[str, Any]:
        end = time.monotonic() + timeout
        run: dict[str, Any] = {}
        while time.monotonic() < end:
            run = self.run_object(name)
            if (run.get("status") or {}).get("phase") in phases:
                return run
            time.sleep(0.5)
        raise AssertionError(f"run {name} not finished in {timeout}s: {run.get('status')}\n{self.snapshot()}")

    def wait_for(self, predicate: Any, timeout: float = 120, what: str = "condition") -> Any:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            value = predicate()
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}\n{self.snapshot()}")

    def snapshot(self) -> str:
        """What a person debugging a timeout asks first: the runs' status, every pod and Job of the namespace,
        the node's pods and requests, recent Events and the controller's log (CI keeps only the output)."""
        parts = []
        for args in (
            ("get", "wpbenchruns,jobs,pods", "-n", self.namespace, "-o", "wide"),
            ("get", "wpbenchruns", "-n", self.namespace, "-o", "jsonpath={range .items[*]}{.status}{'\\n'}{end}"),
            ("get", "events", "-n", self.namespace, "--sort-by=.lastTimestamp"),
            ("get", "pods", "-A", "-o", "wide"),
            ("describe", "nodes"),
        ):
            res = self.cluster.kubectl(*args, check=False)
            parts.append(f"$ kubectl {' '.join(args)}\n{(res.stdout + res.stderr)[-6000:]}")
        if self.release:
            parts.append(f"controller log:\n{self.controller_log()}")
        return "\n".join(parts)


def _boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def owner_tag() -> str:
    """Who made a test namespace: this host, this boot, this process (a sweep later knows if it is gone)."""
    return f"{socket.gethostname()}/{_boot_id()}/{os.getpid()}"


def _owner_gone(owner: str) -> bool:
    host, _, rest = owner.partition("/")
    boot, _, pid = rest.partition("/")
    if host != socket.gethostname():
        return False  # another machine's tests share this cluster: not ours to judge
    if boot != _boot_id() or not pid.isdigit():
        return True
    return not Path(f"/proc/{pid}").exists()


def sweep_abandoned_spaces(cluster: Cluster, legacy_age_seconds: float = 2 * 3600) -> list[str]:
    """Delete the test namespaces (and their releases) whose test process is gone: a killed pytest leaves
    controllers and graders behind that hold the node's CPU requests and starve later tests' graders.
    Namespaces from before owners were written go once older than `legacy_age_seconds`."""
    swept = []
    now = time.time()
    for ns in cluster.core.list_namespace(label_selector=f"{TEST_LABEL}=true").items:
        meta = ns.metadata
        if meta.deletion_timestamp:
            continue
        owner = (meta.annotations or {}).get(OWNER_ANNOTATION)
        age = now - meta.creation_timestamp.timestamp()
        if (owner is None and age < legacy_age_seconds) or (owner is not None and not _owner_gone(owner)):
            continue
        listed = cluster.helm("list", "-n", meta.name, "-q", check=False).stdout.split()
        for release in listed:
            cluster.helm("uninstall", release, "--namespace", meta.name, "--wait", check=False)
        cluster.kubectl("delete", "namespace", meta.name, "--wait=false", check=False)
        swept.append(meta.name)
    return swept


def new_space(cluster: Cluster, tmp: Path, test_name: str) -> Space:
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    cluster.core.create_namespace(
        {"metadata": {"name": namespace, "labels": {**PSA, TEST_LABEL: "true"},
                      "annotations": {TEST_LABEL: test_name[:200], OWNER_ANNOTATION: owner_tag()}}}
    )  # fmt: skip
    kc = yaml.safe_load(cluster.kubeconfig.read_text())
    for ctx in kc["contexts"]:
        ctx["context"]["namespace"] = namespace
    space = Space(cluster, namespace, tmp)
    space.kubeconfig.write_text(yaml.safe_dump(kc))
    space.kubeconfig.chmod(0o600)
    space.pods = PodRecorder(cluster, namespace)
    return space


def drop_space(space: Space) -> None:
    if space.pods:
        space.pods.stop()
    if space.release:
        space.cluster.helm("uninstall", space.release, "--namespace", space.namespace, "--wait", check=False)
    space.cluster.kubectl("delete", "namespace", space.namespace, "--wait=false", check=False)


def clone_suite(source: Path, dest: Path, count: int) -> Path:
    """`count` execution tests cloned (new ids) from a suite folder's execution tests."""
    tests: list[dict[str, Any]] = []
    for path in sorted((source / "execution").glob("*.json")):
        doc = json.loads(path.read_text())
        tests.extend(doc if isinstance(doc, list) else doc["tests"])
    clones = [{**tests[n % len(tests)], "id": f"bench-{n:05d}"} for n in range(count)]
    (dest / "execution").mkdir(parents=True, exist_ok=True)
    (dest / "execution" / "bench.json").write_text(json.dumps(clones))
    return dest


def validate_object(obj: dict[str, Any]) -> None:
    """Strict Kubernetes 1.37 OpenAPI validation (unknown fields are errors); a WPBenchRun against its CRD.
    What the server set (status, uid, managedFields, ...) is left out: the object as a client would send it."""
    import copy

    import jsonschema
    import kubernetes_validate

    from wpbench_k8s.kube.crd import crd

    obj = {k: v for k, v in copy.deepcopy(obj).items() if k != "status"}
    server_set = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")
    obj["metadata"] = {k: v for k, v in obj["metadata"].items() if k not in server_set}
    if obj["kind"] == "WPBenchRun":
        jsonschema.Draft7Validator(crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]).validate(obj)
        return
    kubernetes_validate.validate(obj, K8S_SCHEMA_VERSION, strict=True)


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def start_probe_job(
    space: Space,
    suite: Path,
    grader_image: str,
    run: str,
    script: str | None,
    *,
    policy: bool = True,
    deadline: int = 0,
    cpu: str = "",
    task: str = "{}",
    node: str = "",
) -> str:
    """A grader Job of run `run` as the controller builds it, with the run's deny-all NetworkPolicy beside it
    unless `policy` is false, its command replaced by the shell `script` (None: the grader itself grades
    `task`, the JSON of its payload); if given, its pod's deadline `deadline` seconds, its CPU `cpu` (so
    probes fit beside other tests' graders) and the node it must run on. Returns the Job's name."""
    from wpbench_k8s.config import load_config
    from wpbench_k8s.kube.client import to_dict
    from wpbench_k8s.kube.objects import RunSettings, TaskSource, item_job, network_policy
    from wpbench_k8s.pipeline import plan_run

    manifest = plan_run(load_config(None, {"dataset.path": str(suite), "grader.image": grader_image}), "reference")
    settings = RunSettings(name=run, namespace=space.namespace)
    job = to_dict(item_job(manifest, manifest.items[0], settings, TaskSource(f"{run}-payload", "task.json"), None))
    container = job["spec"]["template"]["spec"]["containers"][0]
    if script is not None:
        container["command"], container["args"] = ["sh", "-c", script], []
    if cpu:
        container["resources"]["requests"]["cpu"] = container["resources"]["limits"]["cpu"] = cpu
    if node:
        job["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    if deadline:
        job["spec"]["template"]["spec"]["activeDeadlineSeconds"] = deadline
        job["spec"]["activeDeadlineSeconds"] = deadline + 600
    space.cluster.core.create_namespaced_config_map(space.namespace, {"metadata": {"name": f"{run}-payload"},
                                                                      "data": {"task.json": task}})  # fmt: skip
    if policy:
        k8s.NetworkingV1Api(space.cluster.api).create_namespaced_network_policy(
            space.namespace, to_dict(network_policy(settings, None))
        )
    space.cluster.batch.create_namespaced_job(space.namespace, job)
    return str(job["metadata"]["name"])


def job_pod(space: Space, job: str, *, finished: bool = True, timeout: float = 300) -> k8s.V1Pod:
    """The pod of Job `job`: once the Job is complete or failed, or (finished=False) once it runs."""

    def ready() -> k8s.V1Pod | None:
        if finished:
            conditions = space.cluster.batch.read_namespaced_job(job, space.namespace).status.conditions or []
            if not any(c.type in ("Complete", "Failed") and c.status == "True" for c in conditions):
                return None
        pods = space.cluster.core.list_namespaced_pod(space.namespace, label_selector=f"job-name={job}").items
        return pods[0] if pods and (finished or pods[0].status.phase == "Running") else None

    return space.wait_for(ready, timeout, f"job {job}")


def probe_job(
    space: Space, suite: Path, grader_image: str, run: str, script: str, *, policy: bool = True, cpu: str = ""
) -> k8s.V1Pod:
    """`start_probe_job`, then its pod once the Job has finished."""
    return job_pod(space, start_probe_job(space, suite, grader_image, run, script, policy=policy, cpu=cpu))


def pod_facts(space: Space, pod: k8s.V1Pod) -> dict[str, str]:
    """The `key=value` lines of a pod's log (read through the kubelet)."""
    log = str(space.cluster.core.read_namespaced_pod_log(pod.metadata.name, space.namespace))
    return dict(line.split("=", 1) for line in log.splitlines() if "=" in line)
