"""A real control plane with simulated nodes: kwokctl (binary runtime) over local Kubernetes binaries.

kube-apiserver, kube-controller-manager and kube-scheduler are the ones `hack/k8s/build.sh` builds
(listed in `/var/cache/wpbench/k8s/PATHS`), etcd is Debian's; kwok and kwokctl come from
`hack/kwok/build.sh`. kwok plays the kubelet of every node: it moves pods through their phases and
serves their logs from a file (a ClusterLogs rule), so the pod log API answers as for a real pod.
Every address is 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config as _config

k8s_config: Any = _config  # untyped loaders


REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("WPBENCH_CACHE", "/var/cache/wpbench"))
K8S_PATHS = CACHE / "k8s" / "PATHS"
KWOK_BUILD = REPO / "hack" / "kwok" / "build.sh"
NEEDED = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd")
NODE_ANNOTATION = "kwok.x-k8s.io/node"
COUNTED = {"events": "/api/v1/events", "pods": "/api/v1/pods", "jobs": "/apis/batch/v1/jobs"}
COUNTED["configmaps"] = "/api/v1/configmaps"
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")

# Writes the controller and `submit` make are logged (and reads of pod logs, to count verdict reads);
# the high-volume writes of the other components (pods, bindings, leases, events, Job status) are
# counted from the API server's metrics instead, so the audit log stays small at 50,000 candidates.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [
        {"level": "Metadata", "verbs": ["get"], "resources": [{"group": "", "resources": ["pods/log"]}]},
        {"level": "Metadata", "verbs": ["create"], "resources": [{"group": "", "resources": ["pods"]}]},
        {
            "level": "None",
            "resources": [
                {"group": "", "resources": ["pods", "pods/status", "pods/binding", "events", "nodes", "nodes/status"]},
                {"group": "", "resources": ["endpoints", "serviceaccounts", "secrets"]},
                {"group": "batch", "resources": ["jobs/status"]},
                {"group": "coordination.k8s.io"},
                {"group": "events.k8s.io"},
                {"group": "discovery.k8s.io"},
            ],
        },
        {"level": "Metadata", "verbs": list(WRITE_VERBS)},
        {"level": "None"},
    ],
}


class KwokUnavailable(RuntimeError):
    """A binary the kwok cluster needs is missing (the message says which and how to build it)."""


def k8s_binaries() -> dict[str, str]:
    """name -> path of the Kubernetes and etcd binaries, from the build's PATHS file (env overrides)."""
    found: dict[str, str] = {}
    if K8S_PATHS.exists():
        for line in K8S_PATHS.read_text().splitlines():
            name, _, path = line.partition("=")
            if path:
                found[name.strip()] = path.strip()
    for name in NEEDED:
        override = os.environ.get(f"WPBENCH_{name.upper().replace('-', '_')}")
        if override:
            found[name] = override
    missing = [n for n in NEEDED if not (found.get(n) and os.access(found[n], os.X_OK))]
    if missing:
        raise KwokUnavailable(
            f"{', '.join(missing)} not built: {K8S_PATHS} lists none (build them with hack/k8s/build.sh)"
        )
    return found


def kwok_binaries() -> Path:
    """The kwok/kwokctl bin directory, built on demand (cached by version)."""
    try:
        out = subprocess.run([str(KWOK_BUILD)], check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as exc:
        raise KwokUnavailable(f"{KWOK_BUILD} failed: {exc.stderr.strip()[-2000:]}") from exc
    return Path(out.stdout.strip().splitlines()[-1])


def cri_log_line(text: str) -> str:
    """One line of the CRI log format kwok's log server reads (`crilogs.ReadLogs`)."""
    return f"2026-01-01T00:00:00.000000000Z stdout F {text}\n"


@dataclass
class KwokCluster:
    """`with KwokCluster(...) as c:` starts a cluster named `name`, and deletes it (and its files) after."""

    name: str = "wpbench-scale"
    verdict_log: str = ""  # what every grader pod's log holds (one CRI log line per line of it)
    namespace: str = "wpbench"  # where grader pods run
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="wpbench-kwok-")))
    keep: bool = False
    api: k8s.ApiClient | None = None

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def cluster_dir(self) -> Path:
        return self.workdir / "kwok" / "clusters" / self.name

    @property
    def audit_logs(self) -> list[Path]:
        """The audit log, oldest first: kube-apiserver rotates it at 100 MB (`--audit-log-maxsize`'s
        default) into audit-<UTC time>.log beside it, so a 50,000-candidate run spans several files."""
        logs = self.cluster_dir / "logs"
        return [*sorted(logs.glob("audit-*.log")), logs / "audit.log"]

    def _env(self) -> dict[str, str]:
        return {**os.environ, "KWOK_WORKDIR": str(self.workdir / "kwok")}

    def _kwokctl(self, *args: str, timeout: float = 300) -> str:
        cmd = [str(self.bin / "kwokctl"), "--name", self.name, *args]
        done = subprocess.run(cmd, env=self._env(), capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:4])}... exited {done.returncode}: {done.stderr.strip()[-3000:]}")
        return done.stdout

    def __enter__(self) -> KwokCluster:
        binaries = k8s_binaries()
        self.bin = kwok_binaries()
        logs = self.workdir / "grader.log"
        logs.write_text("".join(cri_log_line(line) for line in self.verdict_log.splitlines()))
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(AUDIT_POLICY))
        config = self.workdir / "kwokctl.yaml"
        config.write_text(
            yaml.safe_dump_all(
                [
                    {
                        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
                        "kind": "KwokctlConfiguration",
                        "options": {
                            "kubeAuditPolicy": str(policy),
                            "bindAddress": "127.0.0.1",
                            **({"etcdctlBinary": binaries["etcdctl"]} if binaries.get("etcdctl") else {}),
                            **({"kubectlBinary": binaries["kubectl"]} if binaries.get("kubectl") else {}),
                        },
                    },
                    {
                        "apiVersion": "kwok.x-k8s.io/v1alpha1",
                        "kind": "ClusterLogs",
                        "metadata": {"name": "grader-verdicts"},
                        "spec": {
                            "selector": {"matchNamespaces": [self.namespace]},
                            "logs": [{"containers": ["grader"], "logsFile": str(logs)}],
                        },
                    },
                ]
            )
        )
        args = [
            "create",
            "cluster",
            "--runtime",
            "binary",
            "--config",
            str(config),
            "--kubeconfig",
            str(self.kubeconfig),
            "--kube-apiserver-binary",
            binaries["kube-apiserver"],
            "--kube-controller-manager-binary",
            binaries["kube-controller-manager"],
            "--kube-scheduler-binary",
            binaries["kube-scheduler"],
            "--etcd-binary",
            binaries["etcd"],
            "--kwok-controller-binary",
            str(self.bin / "kwok"),
            # The platform's own clients (Job controller, scheduler, garbage collector, kwok) unthrottled:
            # at their default 20 QPS the Job controller, not the wpbench controller, would set the pace.
            "--disable-qps-limits",
            "--wait",
            "3m",
        ]
        try:
            self._kwokctl(*args, timeout=400)
            self.api = k8s_config.new_client_from_config(config_file=str(self.kubeconfig))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if hasattr(self, "bin"):
            if self.keep:  # kwokctl removes the cluster's directory, logs and audit log included
                shutil.copytree(self.cluster_dir / "logs", self.workdir / "logs", dirs_exist_ok=True)
            with contextlib.suppress(Exception):
                self._kwokctl("delete", "cluster", timeout=120)
        if not self.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # ---- nodes ----------------------------------------------------------------------------
    def add_nodes(self, count: int, cpus: int = 8, memory: str = "32Gi") -> None:
        """`count` kwok nodes with `cpus` CPUs each; returns once every one is Ready."""
        assert self.api is not None
        core: Any = k8s.CoreV1Api(self.api)
        resources = {"cpu": str(cpus), "memory": memory, "pods": "110"}
        for n in range(count):
            name = f"kwok-node-{n:03d}"
            body = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
                    "labels": {"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
                },
                "status": {"allocatable": resources, "capacity": resources},
            }
            core.create_node(body, _preload_content=False)
        end = time.monotonic() + 120
        while time.monotonic() < end:
            nodes = core.list_node(label_selector="type=kwok").items
            ready = [
                n for n in nodes if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
            ]
            if len(ready) == count:
                return
            time.sleep(1)
        raise RuntimeError(f"kwok nodes not Ready after 120 s ({len(ready)}/{count})")

    # ---- measurements from the API server's side ---------------------------------------------
    def metrics(self) -> str:
        """The API server's /metrics (the admin credentials of the kubeconfig may read it)."""
        api: Any = self.api
        resp = api.call_api("GET", f"{api.configuration.host}/metrics", header_params={"Accept": "text/plain"})
        resp.read()
        return str(resp.data.decode())

    def etcd_objects(self) -> int | None:
        """Keys in etcd (every stored object), from etcd's own metrics; None when etcd does not say."""
        port = self._config().get("options", {}).get("etcdPort")
        if not port:
            return None
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        found = re.search(r"^etcd_debugging_mvcc_keys_total (\S+)$", text, re.MULTILINE)
        return int(float(found.group(1))) if found else None

    def object_counts(self) -> dict[str, int]:
        """Stored events, pods, Jobs and ConfigMaps (a one-item list says how many remain)."""
        api: Any = self.api
        host = api.configuration.host
        counts: dict[str, int] = {}
        for name, path in COUNTED.items():
            resp = api.call_api("GET", f"{host}{path}?limit=1", header_params={"Accept": "application/json"})
            resp.read()
            doc = json.loads(resp.data)
            counts[name] = len(doc.get("items") or []) + int(doc["metadata"].get("remainingItemCount") or 0)
        return counts

    def _config(self) -> dict[str, Any]:
        if not hasattr(self, "_conf"):
            self._conf: dict[str, Any]
            path = self.cluster_dir / "kwok.yaml"
            docs = list(yaml.safe_load_all(path.read_text())) if path.exists() else []
            self._conf = next((d for d in docs if d and d.get("kind") == "KwokctlConfiguration"), {})
        return self._conf


def counter_sum(metrics: str, name: str, **labels: str | tuple[str, ...]) -> float:
    """Sum of a Prometheus counter's samples whose labels match (a tuple matches any of its values)."""
    total = 0.0
    prefix = name + "{"
    for line in metrics.splitlines():
        if not line.startswith(prefix):
            continue
        body, _, value = line.rpartition(" ")
        got = dict(re.findall(r'(\w+)="([^"]*)"', body))
        if all(got.get(k) in (v if isinstance(v, tuple) else (v,)) for k, v in labels.items()):
            total += float(value)
    return total
