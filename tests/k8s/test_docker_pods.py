"""Pods as real Docker containers: the simulated kubelet honours the grader pod spec, and a reference
check through the cluster path gives the same records as `wpbench-k8s run` on local Docker."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

from kubernetes import client as k8s
from kubernetes import config
from simkit import NAMESPACE, REPO, records

from wpbench_controller.sim import DockerRunner
from wpbench_controller.sim.node import Mounts
from wpbench_k8s.config import load_config
from wpbench_k8s.kube.client import to_dict
from wpbench_k8s.kube.objects import RunSettings, TaskSource, item_job, network_policy
from wpbench_k8s.pipeline import plan_run

PROBE = r"""
echo "uid=$(id -u) gid=$(id -g)"
touch /rootfs-probe 2>/dev/null && echo "root=rw" || echo "root=ro"
touch /run/wpbench/x && echo "wordpress=rw"
df -k /run/wpbench | awk 'NR==2 {print "wordpress_kb=" $2}'
df -k /tmp | awk 'NR==2 {print "tmp_kb=" $2}'
grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status | tr -d '\t' | tr ':' '='
echo "ifaces=$(ls /sys/class/net | tr '\n' ',')"
echo "task_bytes=$(wc -c < /etc/wpbench/task/task.json)"
echo "cpu_quota=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || cat /sys/fs/cgroup/cpu.max)"
echo "mem_limit=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max)"
ls /proc/1/fd >/dev/null 2>&1 && echo "pid1_fds=open" || echo "pid1_fds=denied"
sleep 30 & v=$!; WPBENCH_GUARD_ROLE=runner sh -c "kill $v 2>/dev/null && echo runner_kill=ok || echo runner_kill=denied"; kill $v
echo '{"probe": "done"}' > /dev/termination-log
"""


def grader_pod(mini_suite, image: str) -> tuple[dict, dict]:
    manifest = plan_run(load_config(None, {"dataset.path": str(mini_suite), "grader.image": image}), "reference")
    settings = RunSettings(name="probe", namespace=NAMESPACE)
    job = to_dict(item_job(manifest, manifest.items[0], settings, TaskSource("probe-payload", "task.json"), None))
    return job, to_dict(network_policy(settings, None))


def test_docker_flags_follow_the_pod_spec(mini_suite):
    job, _ = grader_pod(mini_suite, "img")
    pod = {"metadata": {"name": "p", "namespace": NAMESPACE}, "spec": job["spec"]["template"]["spec"]}
    args = DockerRunner().docker_args(pod, Mounts(tmpfs={"/run/wpbench": "size=1"}), network_none=True, fault=None)
    joined = " ".join(args)
    for flag in ("--user 65532:65532", "--read-only", "--cap-drop ALL", "--security-opt no-new-privileges",
                 "--cpus 1", "--memory 536870912 --memory-swap 536870912", "--pids-limit 64", "--network none"):  # fmt: skip
        assert flag in joined, flag
    assert args[-2:] == ["img", "/etc/wpbench/task/task.json"]


def test_kubelet_runs_the_grader_pod_spec_as_a_locked_down_container(probe_sim, mini_suite, grader_image):
    sim = probe_sim
    job, policy = grader_pod(mini_suite, grader_image)
    job["spec"]["template"]["spec"]["containers"][0]["command"] = ["sh", "-c", PROBE]
    job["spec"]["template"]["spec"]["containers"][0]["args"] = []
    api = config.new_client_from_config(str(sim.kubeconfig))
    core, batch, net = k8s.CoreV1Api(api), k8s.BatchV1Api(api), k8s.NetworkingV1Api(api)
    core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": "probe-payload"}, "data": {"task.json": "{}"}})
    net.create_namespaced_network_policy(NAMESPACE, policy)
    batch.create_namespaced_job(NAMESPACE, job)
    name = job["metadata"]["name"]
    done = sim.wait_for(lambda: any(c["type"] == "Complete" for c in
                        (batch.read_namespaced_job(name, NAMESPACE, _preload_content=False).json().get("status") or {})
                        .get("conditions") or []), 120, "the probe job")  # fmt: skip
    assert done
    (pod,) = core.list_namespaced_pod(NAMESPACE, label_selector=f"job-name={name}").items
    log = core.read_namespaced_pod_log(pod.metadata.name, NAMESPACE)
    facts = dict(line.split("=", 1) for line in log.splitlines() if "=" in line)
    print(facts)
    assert facts["uid"] == "65532 gid=65532"
    assert facts["root"] == "ro" and facts["wordpress"] == "rw"
    assert int(facts["wordpress_kb"]) == 256 * 1024 and int(facts["tmp_kb"]) == 64 * 1024
    assert int(facts["CapEff"], 16) == 0 and facts["NoNewPrivs"] == "1" and facts["Seccomp"] == "2"
    assert facts["ifaces"] == "lo,"  # deny-all NetworkPolicy -> no network
    assert int(facts["task_bytes"]) == 2
    assert facts["cpu_quota"].split()[0] in ("100000", "100000 100000")
    assert int(facts["mem_limit"]) == 512 * 1024 * 1024
    # The image's native guard (runtime/php/native/nodlopen.c) in a pod: PID 1's descriptors are closed to
    # another process of the same uid, and a runner-role process cannot signal another process.
    assert facts["pid1_fds"] == "denied" and facts["runner_kill"] == "denied"
    term = pod.status.container_statuses[0].state.terminated
    assert term.exit_code == 0 and json.loads(term.message) == {"probe": "done"}


def normalise(rec: dict) -> dict:
    """A record minus what differs between any two runs: run id, durations (also inside phase notes)."""
    rec = json.loads(json.dumps(rec))
    rec.pop("run_id")
    rec["grader"]["duration_ms"] = 0
    if rec["grader"].get("verdict"):
        verdict = rec["grader"]["verdict"]
        verdict["duration_ms"] = 0
        verdict["phases"] = {k: re.sub(r" \(\d+ ms\)", "", v) for k, v in verdict["phases"].items()}
    rec["usage"]["latency_ms"] = 0
    return rec


def test_reference_check_matches_the_local_run(docker_sim, mini_suite, grader_image, tmp_path):
    sim = docker_sim
    local = subprocess.run(
        [sys.executable, "-m", "wpbench_k8s", "run", "--check-reference-solution", "--dataset-path", str(mini_suite),
         "--image", grader_image, "--execution-concurrency", "2", "--output", str(tmp_path / "local" / "results.json")],
        capture_output=True, text=True, cwd=REPO, timeout=600,
    )  # fmt: skip
    assert local.returncode == 0, local.stderr[-3000:]
    (local_jsonl,) = (tmp_path / "local").glob("results_*.jsonl")
    name = sim.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite), "--image", grader_image,
                   "--max-in-flight", "2").stdout.strip()  # fmt: skip
    sim.start_controller()
    t0 = time.monotonic()
    run = sim.wait_phase(name, 600)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    sim.cli("results", name, "-o", str(tmp_path / "k8s" / "results.jsonl"))
    cluster_records = records(tmp_path / "k8s" / "results.jsonl")
    local_records = records(local_jsonl)
    assert [normalise(r) for r in cluster_records] == [normalise(r) for r in local_records]
    assert all(r["grader"]["status"] == "passed" for r in cluster_records), [
        r["grader"]["reason"] for r in cluster_records
    ]
    assert sim.cluster.kubelet.max_concurrent <= 2
    print(f"cluster path: {len(cluster_records)} tests in {time.monotonic() - t0:.1f}s")


def test_real_grader_pod_evicted_then_retried(docker_sim, mini_suite, grader_image, tmp_path):
    sim = docker_sim
    sim.cluster.kubelet.faults["mini-hooks-001"] = ["evict-on-start"]
    name = sim.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite), "--image", grader_image,
                   "--test-id", "mini-hooks-001").stdout.strip()  # fmt: skip
    sim.start_controller()
    run = sim.wait_phase(name, 300)
    assert run["status"]["infraRetries"] == 1 and run["status"]["passed"] == 1


def test_real_container_that_never_reports_hits_the_deadline(docker_sim, mini_suite, grader_image, tmp_path):
    from test_controller_sim import _submit_lib

    sim = docker_sim
    sim.cluster.kubelet.faults["mini-hooks-001"] = ["hang"]
    name = _submit_lib(sim, mini_suite, "hang", timeout=2, grace=1, retries=0, test_ids=["mini-hooks-001"])
    sim.start_controller()
    run = sim.wait_phase(name, 120)
    assert run["status"]["infraErrors"] == 1 and run["status"]["failed"] == 0
    assert not subprocess.run(
        ["docker", "ps", "-q", "--filter", "label=wpbench-sim"], capture_output=True, text=True
    ).stdout


def test_controller_image_reconciles_a_run(sim, mini_suite, tmp_path):
    """The controller image (make controller-image), locked down as the chart runs it, against the simulation."""
    image = "wpbench-controller:dev"
    if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode != 0:
        import pytest

        pytest.skip(f"{image} not built (make controller-image)")
    sim.kubeconfig.chmod(0o644)
    sim.kubeconfig.parent.chmod(0o755)
    name = sim.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite)).stdout.strip()
    container = f"wpbench-ctl-test-{name}"
    proc = subprocess.Popen(
        ["docker", "run", "--rm", "--name", container, "--network", "host", "--read-only", "--user", "65532:65532",
         "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "-v", f"{sim.kubeconfig}:/kc:ro", image,
         "--kubeconfig", "/kc", "--namespace", NAMESPACE, "--health-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        run = sim.wait_phase(name, 120)
    finally:
        subprocess.run(["docker", "stop", "-t", "5", container], capture_output=True)
        out = proc.communicate(timeout=30)[0]
    assert run["status"]["phase"] == "Succeeded" and run["status"]["passed"] == 2, out[-2000:]
