"""Helpers for the Kubernetes simulation tests: a real HTTP API server on 127.0.0.1 (the official client talks
to it through a generated kubeconfig), a Job controller, and a kubelet answering pods instantly
(`FakeRunner`). The real CLI and the real controller run as
subprocesses against it, so they are exercised exactly as a user runs them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wpbench_controller.sim import SimCluster

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "wpbench"
CONTROLLER_AGENT = "wpbench-controller"
CLI_AGENT = "wpbench-k8s"


@dataclass
class Sim:
    cluster: SimCluster
    kubeconfig: Path
    tmp: Path
    controllers: list[subprocess.Popen[str]] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST",)}
        env["KUBECONFIG"] = str(self.kubeconfig)
        return env

    def cli(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """The real `wpbench-k8s` command line, as a user runs it."""
        res = subprocess.run(
            [sys.executable, "-m", "wpbench_k8s", *args],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=self.env,
            timeout=timeout,
        )
        if check:
            assert res.returncode == 0, (
                f"wpbench-k8s {' '.join(args)} failed:\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
            )
        return res

    def start_controller(self, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """The real `wpbench-controller` process; `env` adds to its environment (as a Secret's keys would)."""
        log = (self.tmp / f"controller-{len(self.controllers)}.log").open("w")
        proc = subprocess.Popen(
            [sys.executable, "-c", "from wpbench_controller.main import main; main()",
             "--namespace", NAMESPACE, "--resync-seconds", "2", "--health-port", "0", "--status-interval", "0.5", *extra],
            env={**self.env, **(env or {})}, stdout=log, stderr=subprocess.STDOUT, text=True, cwd=REPO,
        )  # fmt: skip
        self.controllers.append(proc)
        return proc

    def controller_log(self) -> str:
        return "\n".join(p.read_text() for p in sorted(self.tmp.glob("controller-*.log")))

    def run_object(self, name: str) -> dict[str, Any]:
        (run,) = [r for r in self.cluster.objects("wpbenchruns", NAMESPACE) if r["metadata"]["name"] == name]
        return run

    def wait_phase(
        self, name: str, timeout: float = 300, phases: tuple[str, ...] = ("Succeeded", "Failed", "Cancelled")
    ) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            run = self.run_object(name)
            if (run.get("status") or {}).get("phase") in phases:
                return run
            for proc in self.controllers:
                if proc.poll() not in (None, -9, -15):
                    raise AssertionError(f"controller exited {proc.returncode}:\n{self.controller_log()[-4000:]}")
            time.sleep(0.2)
        raise AssertionError(
            f"run {name} not finished in {timeout}s: {run.get('status')}\n{self.controller_log()[-3000:]}"
        )

    def wait_for(self, predicate: Any, timeout: float = 60, what: str = "condition") -> Any:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            value = predicate()
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}")

    def pods_created(self) -> dict[str, int]:
        """How many pods each item ever got (from the API server's event log)."""
        counts: dict[str, int] = {}
        seen: set[str] = set()
        for ev in self.cluster.store.events:
            if ev.res_key == "/pods" and ev.type == "ADDED" and ev.obj["metadata"]["uid"] not in seen:
                seen.add(ev.obj["metadata"]["uid"])
                item = ev.obj["metadata"].get("annotations", {}).get("wpbench-k8s.org/item-id", "?")
                counts[item] = counts.get(item, 0) + 1
        return counts

    def stop_controllers(self) -> None:
        for proc in self.controllers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


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
