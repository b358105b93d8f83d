"""Control-plane benchmark: a simulated N-test run; API writes per test and controller peak RSS.

    python -m wpbench_controller.bench --tests 1000          (make bench-k8s)

The API server and node run in this process (pods answer instantly: `FakeRunner`, no Docker); the
controller is the real `wpbench-controller` in its own process, so its RSS is its own. Writes are
counted by the API server per User-Agent: the controller's, plus `submit`'s (run + payload).
Targets: <= 6 writes per test, <= 200 MiB controller peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WRITE_TARGET = 6.0
RSS_TARGET_MIB = 200.0


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


def run_bench(tests: int, max_in_flight: int, timeout: float) -> dict[str, Any]:
    from wpbench_controller.sim import FakeRunner, SimCluster
    from wpbench_k8s.commands.cluster import Cluster, submit
    from wpbench_k8s.config import default_datasets_dir, load_config
    from wpbench_k8s.kube.objects import RunSettings
    from wpbench_k8s.pipeline import plan_run

    tmp = Path(tempfile.mkdtemp(prefix="wpbench-bench-"))
    suite = clone_suite(default_datasets_dir() / "wpk-core-v1", tmp / "suite", tests)
    manifest = plan_run(load_config(None, {"dataset.path": str(suite)}), "reference")
    with SimCluster(FakeRunner(delay=0.0), cpu_capacity=float(max_in_flight)) as cluster:
        cluster.namespace("wpbench")
        cluster.install_crd()
        kubeconfig = cluster.kubeconfig(tmp / "kubeconfig", "wpbench")
        t0 = time.monotonic()
        name = submit(
            Cluster(str(kubeconfig), None, "wpbench"),
            manifest,
            RunSettings(name="bench", namespace="wpbench", max_in_flight=max_in_flight),
        )
        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        log = (tmp / "controller.log").open("w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "wpbench_controller.main", "--namespace", "wpbench", "--health-port", "0"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        status: dict[str, Any] = {}
        try:
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                run = next(r for r in cluster.objects("wpbenchruns", "wpbench") if r["metadata"]["name"] == name)
                status = run.get("status") or {}
                if status.get("phase") in ("Succeeded", "Failed"):
                    break
                if proc.poll() is not None:
                    raise RuntimeError(f"controller exited {proc.returncode}; see {tmp / 'controller.log'}")
                time.sleep(0.2)
            wall = time.monotonic() - t0
        finally:
            proc.send_signal(signal.SIGTERM)
            _, _, usage = os.wait4(proc.pid, 0)
        controller_writes = cluster.server.writes_by("wpbench-controller")
        submit_writes = cluster.server.writes_by("wpbench-k8s")
        by_method = {f"{a} {m}": n for (a, m), n in sorted(cluster.server.writes.items())}
    return {
        "tests": tests,
        "phase": status.get("phase"),
        "done": status.get("done"),
        "max_in_flight": max_in_flight,
        "wall_seconds": round(wall, 1),
        "controller_writes": controller_writes,
        "submit_writes": submit_writes,
        "writes_per_test": round((controller_writes + submit_writes) / tests, 2),
        "writes_by_agent_and_method": by_method,
        "controller_peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m wpbench_controller.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--max-in-flight", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    result = run_bench(args.tests, args.max_in_flight, args.timeout)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"simulated run: {result['tests']} tests, {result['phase']} ({result['done']} done)")
        print(f"wall time: {result['wall_seconds']} s (max in flight {result['max_in_flight']})")
        print(f"API writes: controller {result['controller_writes']}, submit {result['submit_writes']}")
        for key, n in result["writes_by_agent_and_method"].items():
            print(f"  {key}: {n}")
        print(f"API writes per test: {result['writes_per_test']} (target <= {WRITE_TARGET:g})")
        print(f"controller peak RSS: {result['controller_peak_rss_mib']} MiB (target <= {RSS_TARGET_MIB:g})")
    ok = (
        result["phase"] == "Succeeded"
        and result["writes_per_test"] <= WRITE_TARGET
        and result["controller_peak_rss_mib"] <= RSS_TARGET_MIB
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
