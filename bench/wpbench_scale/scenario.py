"""The scale scenario: a big completions run, a small run submitted meanwhile, the controller restarted.

Everything on the scoring path is production: `submit` stores the run, the real `wpbench-controller`
process (out of cluster, with a kubeconfig) creates one Job per candidate, the Job controller makes the
pods, the scheduler binds them to kwok nodes, kwok completes them and serves their log, and the
controller reads the verdict through the pod log API, stores the record and deletes the Job.
Figures come from the API server's side: its audit log (the controller's and submit's writes, pod
creations, log reads), its /metrics (every client's writes) and etcd's key count.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from wpbench_scale.kwok import COUNTED, KwokCluster, counter_sum

WRITE_VERBS_HTTP = ("POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION")
NAMESPACE = "wpbench"
SMALL_IN_FLIGHT = 10
BIN = Path(sys.executable).parent  # the console scripts of this installation

# Goals of the scale issue; each is checked and reported by name.
WRITES_PER_CANDIDATE_GOAL = 6.0
# With `--candidates-per-pod` (issue 32): the big run's writes per candidate and its wall time.
FAST_WRITES_PER_CANDIDATE_GOAL = 0.1
FAST_BIG_RUN_SECONDS_GOAL = 15 * 60.0
WRITE_RATE_GOAL = 20.0  # req/s: the official client's default QPS
RSS_GOAL_MIB = 300.0
SMALL_RUN_SLOWDOWN_GOAL = 3.0  # the small run beside the big one takes at most 3x its time alone (+30 s)


@dataclass
class Scenario:
    tests: int = 50
    variants: int = 20
    nodes: int = 10
    cpus_per_node: int = 8
    max_in_flight: int = 0  # 0: every CPU of every node
    small_tests: int = 10
    small_variants: int = 2
    restart: bool = True
    timeout: float = 3600.0
    keep: bool = False
    candidates_per_pod: int = 1  # > 1: every run in fast mode, N candidates a pod (`submit --candidates-per-pod`)

    @property
    def candidates(self) -> int:
        return self.tests * self.variants

    @property
    def in_flight(self) -> int:
        return self.max_in_flight or self.nodes * self.cpus_per_node


def make_inputs(tmp: Path, tests: int, variants: int, small_tests: int, small_variants: int) -> dict[str, Path]:
    """A suite of `tests` execution tests (cloned from wpk-core-v1) and two completions files."""
    from wpbench_k8s.config import default_datasets_dir

    source = default_datasets_dir() / "wpk-core-v1" / "execution"
    docs: list[dict[str, Any]] = []
    for path in sorted(source.glob("*.json")):
        doc = json.loads(path.read_text())
        docs.extend(doc if isinstance(doc, list) else doc["tests"])
    # Snippet tests only: their completions are plain code (plugin-file tests want a file map).
    docs = [d for d in docs if d.get("artifact_kind", "php_snippet") == "php_snippet"]
    clones = [{**docs[n % len(docs)], "id": f"scale-{n:04d}"} for n in range(tests)]
    (tmp / "suite" / "execution").mkdir(parents=True, exist_ok=True)
    (tmp / "suite" / "execution" / "scale.json").write_text(json.dumps(clones))

    def completions(name: str, n_tests: int, n_variants: int, prefix: str) -> Path:
        path = tmp / name
        with path.open("w") as out:
            for v in range(n_variants):
                for test in clones[:n_tests]:
                    code = f"<?php\n// {prefix} {v}\nfunction wpbench_scale_{v}() {{ return {v}; }}\n"
                    out.write(json.dumps({"test_id": test["id"], "model": f"{prefix}-{v:03d}", "code": code}) + "\n")
        return path

    return {
        "suite": tmp / "suite",
        "big": completions("big.jsonl", tests, variants, "model"),
        "small": completions("small.jsonl", small_tests, small_variants, "small"),
    }


def grader_log(candidates_per_pod: int = 1) -> str:
    """What every kwok pod's log holds: a contract-valid pass (no test id: kwok serves one file to every pod).
    A pod grading a sequence (`--candidates-per-pod N`) answers N tasks, each verdict followed by the
    supervisor's end line; a pod of fewer items is read for its own count of answers."""
    from wpbench_runtime.contract import Scores, Verdict

    verdict = Verdict(
        status="passed",
        reason="kwok pod",
        scores=Scores(execution_pass=True, runtime=1.0, static=1.0, static_policy_pass=True),
    ).model_dump_json()
    if candidates_per_pod == 1:
        return verdict
    return "\n".join(f"{verdict}\nwpbench-end 0 ready" for _ in range(candidates_per_pod))


class Controller:
    """The real controller process; peak RSS over every life of it (restarts included)."""

    def __init__(self, kubeconfig: Path, log: Path) -> None:
        self.kubeconfig = kubeconfig
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.peak_rss_kib = 0
        self.lives = 0

    def start(self) -> None:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        out = self.log.open("ab")
        self.proc = subprocess.Popen(
            [str(BIN / "wpbench-controller"), "--namespace", NAMESPACE, "--health-port", "0"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        self.lives += 1

    def stop(self) -> None:
        if self.proc is None:
            return
        self.rss_kib()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def rss_kib(self) -> int:
        """Current VmHWM (peak) of the live process, remembered across restarts."""
        if self.proc is not None:
            try:
                for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        self.peak_rss_kib = max(self.peak_rss_kib, int(line.split()[1]))
            except OSError:
                pass
        return self.peak_rss_kib

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class Samples:
    """What a background thread reads every `interval` seconds: etcd keys, API writes, controller RSS."""

    etcd_objects: list[tuple[float, int]] = field(default_factory=list)
    objects: list[dict[str, int]] = field(default_factory=list)  # events, pods, jobs, configmaps
    api_writes: list[tuple[float, float]] = field(default_factory=list)
    load: list[float] = field(default_factory=list)  # the machine's 1-minute load average


def sampler(cluster: KwokCluster, controller: Controller, samples: Samples, stop: threading.Event) -> None:
    while not stop.wait(2.0):
        now = time.time()
        controller.rss_kib()
        samples.load.append(os.getloadavg()[0])
        try:
            count = cluster.etcd_objects()
            if count is not None:
                samples.etcd_objects.append((now, count))
            samples.objects.append(cluster.object_counts())
            writes = counter_sum(cluster.metrics(), "apiserver_request_total", verb=WRITE_VERBS_HTTP)
            samples.api_writes.append((now, writes))
        except Exception:
            continue


GROUP, VERSION, PLURAL = "wpbench-k8s.org", "v1alpha1", "wpbenchruns"
POD_SECURITY = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}


def run_phase(custom: Any, name: str) -> dict[str, Any]:
    run = custom.get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, name)
    return dict(run.get("status") or {})


def cli(*args: str) -> str:
    """`wpbench-k8s ARGS` as a user runs it (its own process, its own user agent)."""
    done = subprocess.run([str(BIN / "wpbench-k8s"), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"wpbench-k8s {args[0]} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return done.stdout


def submit_run(
    kubeconfig: Path, suite: Path, completions: Path, name: str, max_in_flight: int, candidates_per_pod: int = 1
) -> None:
    fast = (
        ["--execution-isolation", "fork_per_test", "--candidates-per-pod", str(candidates_per_pod)]
        if candidates_per_pod > 1
        else []
    )
    cli(
        "submit", "--kubeconfig", str(kubeconfig), "-n", NAMESPACE, "--name", name,
        "--dataset-path", str(suite), "--completions", str(completions), "--max-in-flight", str(max_in_flight),
        *fast,
    )  # fmt: skip


def fetch_records(kubeconfig: Path, name: str, dest: Path) -> list[dict[str, Any]]:
    (dest / "records").mkdir(exist_ok=True)  # apart from the completions files of the same names
    out = dest / "records" / f"{name}.jsonl"
    cli("results", name, "--kubeconfig", str(kubeconfig), "-n", NAMESPACE, "-o", str(out))
    if not out.exists():  # an unfinished run's records
        out = dest / "records" / f"{name}.jsonl.partial"
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def install_crd(api: Any) -> None:
    """The chart's CRD, as the chart ships it (a template guarded by a lookup; the body is plain YAML)."""
    from wpbench_k8s.kube.crd import crd_from_template

    template = Path(__file__).resolve().parents[2] / "charts" / "wpbench-k8s" / "templates" / "crd.yaml"
    doc = crd_from_template(template.read_text())
    if doc.get("kind") != "CustomResourceDefinition":
        raise RuntimeError(f"no CustomResourceDefinition in {template}")
    extensions: Any = k8s.ApiextensionsV1Api(api)
    extensions.create_custom_resource_definition(doc)
    custom = k8s.CustomObjectsApi(api)
    end = time.monotonic() + 30
    while time.monotonic() < end:  # the new API appears in discovery shortly after
        try:
            custom.list_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL)
            return
        except k8s.ApiException:
            time.sleep(0.5)
    raise RuntimeError("the WPBenchRun API did not appear within 30 s")


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def read_audit(paths: list[Path]) -> dict[str, Any]:
    """Writes by the controller and by submit, pod creations and pod-log reads, from the audit log's files."""
    controller_writes: list[float] = []
    by_kind: Counter[str] = Counter()
    submit_writes = 0
    pod_creates: list[float] = []
    log_reads: Counter[str] = Counter()
    for path in paths:
        with path.open() as lines:
            for line in lines:
                event = json.loads(line)
                agent = event.get("userAgent", "")
                ref = event.get("objectRef") or {}
                verb = event.get("verb")
                resource = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
                if verb == "get" and resource == "pods/log":
                    log_reads[ref.get("name", "")] += 1
                    continue
                if resource == "pods" and verb == "create":
                    pod_creates.append(_ts(event["requestReceivedTimestamp"]))
                    continue
                if agent.startswith("wpbench-controller/"):
                    controller_writes.append(_ts(event["requestReceivedTimestamp"]))
                    by_kind[f"{verb} {resource}"] += 1
                elif agent.startswith("wpbench-k8s/"):
                    submit_writes += 1
                    by_kind[f"submit: {verb} {resource}"] += 1
    return {
        "controller_writes": controller_writes,
        "submit_writes": submit_writes,
        "by_kind": dict(sorted(by_kind.items())),
        "pod_creates": sorted(pod_creates),
        "log_reads": log_reads,
    }


def peak_window_rate(stamps: list[float], window: float = 10.0) -> float:
    """The highest number of events in any `window` seconds, per second."""
    stamps = sorted(stamps)
    best, lo = 0, 0
    for hi, t in enumerate(stamps):
        while t - stamps[lo] > window:
            lo += 1
        best = max(best, hi - lo + 1)
    return best / window


def result_storage(core: Any) -> dict[str, int]:
    """Bytes and ConfigMaps of the runs' stored results and payloads (what they leave in etcd)."""
    out: dict[str, int] = {}
    for component in ("results", "payload"):
        resp = core.list_namespaced_config_map(
            NAMESPACE, label_selector=f"app.kubernetes.io/component={component}", _preload_content=False
        )
        listed = json.loads(resp.data)
        out[f"{component}_configmaps"] = len(listed["items"])
        out[f"{component}_bytes"] = sum(
            len(k) + len(v.encode()) for cm in listed["items"] for k, v in (cm.get("data") or {}).items()
        )
    return out


def wait_for(custom: Any, name: str, until: float, controller: Controller) -> dict[str, Any]:
    while time.monotonic() < until:
        status = run_phase(custom, name)
        if status.get("phase") in ("Succeeded", "Failed", "Cancelled"):
            return status
        if not controller.alive():
            raise RuntimeError(f"controller exited; see {controller.log}")
        time.sleep(1.0)
    raise TimeoutError(f"run {name} not finished in time: {run_phase(custom, name)}")


def run_scenario(s: Scenario, say: Any = print) -> dict[str, Any]:
    t_start = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="wpbench-scale-"))
    inputs = make_inputs(tmp, s.tests, s.variants, s.small_tests, s.small_variants)
    n, n_small = s.candidates, s.small_tests * s.small_variants
    result: dict[str, Any] = {"candidates": n, "small_candidates": n_small}
    result.update(nodes=s.nodes, cpus_per_node=s.cpus_per_node, max_in_flight=s.in_flight)
    result.update(candidates_per_pod=s.candidates_per_pod)
    deadline = time.monotonic() + s.timeout
    with KwokCluster(verdict_log=grader_log(s.candidates_per_pod), namespace=NAMESPACE, keep=s.keep) as cluster:
        say(f"kwok cluster up ({cluster.workdir})")
        assert cluster.api is not None
        cluster.add_nodes(s.nodes, cpus=s.cpus_per_node)
        core: Any = k8s.CoreV1Api(cluster.api)
        batch: Any = k8s.BatchV1Api(cluster.api)
        custom: Any = k8s.CustomObjectsApi(cluster.api)
        core.create_namespace({"metadata": {"name": NAMESPACE, "labels": POD_SECURITY}})
        install_crd(cluster.api)
        kubeconfig = cluster.kubeconfig
        controller = Controller(kubeconfig, tmp / "controller.log")
        controller.start()

        # The small run alone: the time it takes when nothing else runs.
        t0 = time.monotonic()
        submit_run(kubeconfig, inputs["suite"], inputs["small"], "small-alone", SMALL_IN_FLIGHT, s.candidates_per_pod)
        alone = wait_for(custom, "small-alone", deadline, controller)
        result["small_alone_seconds"] = round(time.monotonic() - t0, 1)
        say(f"small run alone: {result['small_alone_seconds']} s ({alone.get('phase')})")

        samples, stop = Samples(), threading.Event()
        thread = threading.Thread(target=sampler, args=(cluster, controller, samples, stop), daemon=True)
        thread.start()
        base_writes = counter_sum(cluster.metrics(), "apiserver_request_total", verb=WRITE_VERBS_HTTP)
        base_objects = cluster.etcd_objects()
        t_submit_wall = time.time()
        t_big = time.monotonic()
        submit_run(kubeconfig, inputs["suite"], inputs["big"], "big", s.in_flight, s.candidates_per_pod)
        say(f"big run submitted ({time.monotonic() - t_big:.1f} s to plan and store it)")
        small_submitted: float | None = None
        small_seconds: float | None = None
        restarted_at: int | None = None
        status: dict[str, Any] = {}
        last_say = 0.0
        try:
            while True:
                status = run_phase(custom, "big")
                if time.monotonic() > deadline:  # report what was measured so far
                    say(f"time is up ({s.timeout:.0f} s): big run at {status.get('done')}/{n}")
                    status = {**status, "phase": f"{status.get('phase')} (stopped at the time limit)"}
                    break
                done = int(status.get("done") or 0)
                if time.monotonic() - last_say > 60:
                    say(f"big run {done}/{n} after {time.monotonic() - t_big:.0f} s")
                    last_say = time.monotonic()
                if small_submitted is None and done >= max(1, min(n // 10, 500)):
                    submit_run(
                        kubeconfig, inputs["suite"], inputs["small"], "small", SMALL_IN_FLIGHT, s.candidates_per_pod
                    )
                    small_submitted = time.monotonic()
                    say(f"small run submitted at {done}/{n}")
                small_pending = small_submitted is not None and small_seconds is None
                if small_pending and run_phase(custom, "small").get("phase") in ("Succeeded", "Failed"):
                    assert small_submitted is not None
                    small_seconds = time.monotonic() - small_submitted
                    say(f"small run beside the big one: {small_seconds:.1f} s")
                halfway = done >= n // 2 or time.monotonic() - t_big > s.timeout / 2
                if s.restart and restarted_at is None and halfway:
                    controller.stop()
                    controller.start()
                    restarted_at = done
                    say(f"controller restarted at {done}/{n}")
                if status.get("phase") in ("Succeeded", "Failed", "Cancelled"):
                    break
                if not controller.alive():
                    raise RuntimeError(f"controller exited; see {controller.log}")
                time.sleep(2.0)
            big_seconds = time.monotonic() - t_big
            if small_seconds is None and small_submitted is not None:
                wait_for(custom, "small", max(deadline, time.monotonic() + 300), controller)
                small_seconds = time.monotonic() - small_submitted
        finally:
            stop.set()
            thread.join()
            controller.stop()
        say(f"big run {status.get('phase')} in {big_seconds:.0f} s")
        end_writes = counter_sum(cluster.metrics(), "apiserver_request_total", verb=WRITE_VERBS_HTTP)
        storage = result_storage(core)
        records = {name: fetch_records(kubeconfig, name, tmp) for name in ("big", "small", "small-alone")}
        audit = read_audit(cluster.audit_logs)
        shards = json.loads(
            core.list_namespaced_config_map(
                NAMESPACE, label_selector="app.kubernetes.io/component=results", _preload_content=False
            ).data
        )
        stored_keys = sum(len(cm.get("data") or {}) for cm in shards["items"])
        leftover_jobs = len(batch.list_namespaced_job(NAMESPACE).items)

    all_candidates = max(1, sum(len(r) for r in records.values()))  # graded ones: a stopped run counts what it did
    stamps = audit["controller_writes"]
    busy = (stamps[-1] - stamps[0]) if len(stamps) > 1 else 0.0
    pods = [t for t in audit["pod_creates"] if t >= t_submit_wall]
    log_reads = audit["log_reads"]
    result.update(
        {
            "phase": status.get("phase"),
            "big_run_seconds": round(big_seconds, 1),
            "small_run_seconds": round(small_seconds, 1) if small_seconds is not None else None,
            "controller_restarted_at": restarted_at,
            "records": {name: len(r) for name, r in records.items()},
            # The fewest Jobs (and pod-log reads) that can have graded them: one a pod of N candidates.
            "fewest_jobs": sum(-(-len(r) // s.candidates_per_pod) for r in records.values()),
            "unique_records": {name: len({x["item_id"] for x in r}) for name, r in records.items()},
            "stored_result_keys": stored_keys,
            "scored_passed": sum(1 for r in records["big"] if r["scores"]["execution_pass"]),
            "leftover_jobs": leftover_jobs,
            "controller_writes": len(stamps),
            "submit_writes": audit["submit_writes"],
            "writes_by_kind": audit["by_kind"],
            "writes_per_candidate": round((len(stamps) + audit["submit_writes"]) / all_candidates, 2),
            "controller_write_rate": round(len(stamps) / busy, 2) if busy else 0.0,
            "controller_peak_10s_write_rate": round(peak_window_rate(stamps), 2),
            "all_clients_writes_big_run": int(end_writes - base_writes),
            "all_clients_writes_per_candidate": round((end_writes - base_writes) / max(1, len(records["big"])), 2),
            "controller_peak_rss_mib": round(controller.peak_rss_kib / 1024, 1),
            "controller_lives": controller.lives,
            "etcd_objects_before": base_objects,
            "etcd_objects_peak": max((c for _, c in samples.etcd_objects), default=0),
            "etcd_objects_end": samples.etcd_objects[-1][1] if samples.etcd_objects else None,
            "peak_by_kind": {k: max((o.get(k, 0) for o in samples.objects), default=0) for k in COUNTED},
            "time_to_first_pod_seconds": round(pods[0] - t_submit_wall, 2) if pods else None,
            "pods_created": len(pods),
            "pods_per_second": round(len(pods) / (pods[-1] - pods[0]), 1) if len(pods) > 1 else None,
            "pod_log_reads": sum(log_reads.values()),
            "pods_with_log_read_twice": sum(1 for v in log_reads.values() if v > 1),
            **storage,
            "scenario_seconds": round(time.monotonic() - t_start, 1),
            "load_average_mean": round(sum(samples.load) / len(samples.load), 1) if samples.load else None,
            "load_average_max": round(max(samples.load), 1) if samples.load else None,
        }
    )
    result["goals"] = goals(result)
    return result


def _goal(value: float, text: str, limit: float) -> dict[str, Any]:
    return {"value": value, "goal": text, "met": value <= limit}


def goals(r: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each goal of the issue: met or missed, with the measured value."""
    growth = (r["etcd_objects_peak"] or 0) - (r["etcd_objects_before"] or 0)
    peak = r["peak_by_kind"]
    # The controller's objects that come and go with work (Jobs, their pods) must stay within the in-flight
    # bound of the runs; ConfigMaps holding the runs' input and results stay by design, and Events are the
    # Job controller's and the scheduler's (kept for the API server's --event-ttl, 1 h by default).
    # Collected Jobs (and their pods) linger while their deletion, sent in the background, runs: at most
    # as many again as were in flight.
    in_flight = 2 * (r["max_in_flight"] + 2 * SMALL_IN_FLIGHT)
    bounded = peak["jobs"] <= in_flight and peak["pods"] <= in_flight
    small, alone = r["small_run_seconds"], r["small_alone_seconds"]
    fast = r["candidates_per_pod"] > 1
    speed = {"big_run_seconds": _goal(r["big_run_seconds"], "<= 900 s", FAST_BIG_RUN_SECONDS_GOAL)} if fast else {}
    return {
        "writes_per_candidate": _goal(r["writes_per_candidate"], "<= 0.1", FAST_WRITES_PER_CANDIDATE_GOAL)
        if fast
        else _goal(r["writes_per_candidate"], "<= 6", WRITES_PER_CANDIDATE_GOAL),
        **speed,
        "sustained_write_rate": _goal(r["controller_write_rate"], "<= 20 req/s", WRITE_RATE_GOAL),
        "controller_rss": _goal(r["controller_peak_rss_mib"], "<= 300 MiB", RSS_GOAL_MIB),
        "etcd_objects_bounded_by_in_flight": {
            "value": f"peak +{growth} keys over the start; peak Jobs {peak['jobs']}, pods {peak['pods']}, "
            f"events {peak['events']}, ConfigMaps {peak['configmaps']}",
            "goal": f"Jobs and pods <= twice the runs' in-flight bound ({in_flight})",
            "met": bounded,
        },
        "small_run_independent": {
            "value": f"{small} s beside the big run, {alone} s alone",
            "goal": "<= 3x alone + 30 s",
            "met": small is not None and small <= SMALL_RUN_SLOWDOWN_GOAL * alone + 30,
        },
    }
