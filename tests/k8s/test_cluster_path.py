"""The cluster path end to end on the real local Kubernetes (`make cluster-up`): kube-apiserver, the Job
controller, the scheduler and a real kubelet running grader pods in containerd. The controller runs
in-cluster from the chart (its ServiceAccount and Role); the real CLI submits, watches, fetches results
and logs, as a user does."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusterkit import REPO, TEST_LABEL, Cluster, Space, clone_suite, probe_job, records
from kubernetes.client.exceptions import ApiException
from modelkit import normalise

pytestmark = pytest.mark.docker


def _run_count(space: Space, name: str, key: str = "done") -> int:
    return int((space.run_object(name).get("status") or {}).get(key, 0))


def test_reference_check_through_submit_matches_the_local_run(
    space: Space, mini_suite: Path, grader_image: str, tmp_path: Path
) -> None:
    local = subprocess.run(
        [sys.executable, "-m", "wpbench_k8s", "run", "--check-reference-solution", "--dataset-path", str(mini_suite),
         "--image", grader_image, "--execution-concurrency", "2", "--output", str(tmp_path / "local" / "results.json")],
        capture_output=True, text=True, cwd=REPO, timeout=600,
    )  # fmt: skip
    assert local.returncode == 0, local.stderr[-3000:]
    (local_jsonl,) = (tmp_path / "local").glob("results_*.jsonl")

    name = space.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite), "--image",
                     grader_image, "--max-in-flight", "2").stdout.strip()  # fmt: skip
    assert name.startswith("wpb-")
    assert "Pending" in space.cli("status", name).stdout  # no controller yet: nothing happens
    space.install_controller()
    watcher = subprocess.Popen([sys.executable, "-m", "wpbench_k8s", "status", name, "--watch"], env=space.env,
                               text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)  # fmt: skip
    run = space.wait_phase(name, 600)
    out, err = watcher.communicate(timeout=120)
    total = len(records(local_jsonl))
    assert watcher.returncode == 0 and "Succeeded" in out and f"{total}/{total} done" in out, err[-2000:]
    st = run["status"]
    want = ("Succeeded", total, total, total, f"{total}/{total}", 1.0)
    assert (st["phase"], st["done"], st["total"], st["passed"], st["progress"], st["score"]) == want

    res = space.cli("results", name, "-o", str(tmp_path / "k8s" / "results.jsonl"), "--report")
    got = records(tmp_path / "k8s" / "results.jsonl")
    report = tmp_path / "k8s" / "results.html"  # beside the summary, from the same code path as `run --report`
    assert res.stderr.strip().splitlines()[-1] == f"report: {report}"
    assert report.is_file() and got[-1]["test_id"] in report.read_text()
    assert [normalise(r) for r in got] == [normalise(r) for r in records(local_jsonl)]
    assert all(r["grader"]["status"] == "passed" for r in got), [r["grader"]["reason"] for r in got]
    summary = json.loads((tmp_path / "k8s" / "results.json").read_text())
    assert summary["metadata"]["runtime_isolation_boundary"] == "pod_per_test"
    logs = space.cli("logs", name, got[0]["test_id"])
    assert '"status": "passed"' in logs.stdout, logs.stdout[-2000:]
    assert f"kubectl logs -n {space.namespace} -l wpbench-k8s.org/run=" in logs.stderr, logs.stderr
    # Collected Jobs are deleted; their pods go with them (the garbage collector of kube-controller-manager).
    space.wait_for(lambda: not space.objects("jobs") and not space.objects("pods"), 120, "jobs and pods to go")
    assert space.pods is not None and len(space.pods.per_item()) == total
    assert set(space.pods.per_item().values()) == {1}  # one pod per item: nothing graded twice

    kubectl = space.cluster.kubectl("get", "wpbenchruns", "-n", space.namespace)
    header, row = kubectl.stdout.splitlines()[:2]
    assert header.split()[:4] == ["NAME", "PHASE", "PROGRESS", "SCORE"]
    assert row.split()[:4] == [name, "Succeeded", f"{total}/{total}", "1"]


def test_unfinished_results_go_to_a_partial_file(space: Space, mini_suite: Path, tmp_path: Path) -> None:
    name = space.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite)).stdout.strip()
    res = space.cli("results", name, "-o", str(tmp_path / "r.jsonl"), "--report")  # no controller here
    assert (tmp_path / "r.jsonl.partial").exists() and not (tmp_path / "r.jsonl").exists()
    assert re.search(r"\b0/\d+ records", res.stderr) and "no report for an unfinished run" in res.stderr, res.stderr
    assert not (tmp_path / "r.html").exists()


def test_cancel_stops_running_jobs(space: Space, mini_suite: Path, tmp_path: Path) -> None:
    suite = clone_suite(mini_suite, tmp_path / "suite", 6)
    name = space.cli("submit", "--check-reference-solution", "--dataset-path", str(suite)).stdout.strip()
    space.install_controller()
    space.wait_for(lambda: space.objects("jobs"), 300, "jobs")
    assert "cancel requested" in space.cli("cancel", name).stdout
    run = space.wait_phase(name, 120)
    assert run["status"]["phase"] == "Cancelled"
    assert run["status"].get("done", 0) < 6
    space.wait_for(lambda: not space.objects("jobs"), 120, "jobs to go")


def test_controller_pod_killed_mid_run_loses_and_repeats_nothing(
    space: Space, mini_suite: Path, tmp_path: Path
) -> None:
    suite = clone_suite(mini_suite, tmp_path / "suite", 6)
    name = space.cli("submit", "--check-reference-solution", "--dataset-path", str(suite), "--max-in-flight", "2"
                     ).stdout.strip()  # fmt: skip
    space.install_controller()
    for _ in range(2):  # the controller pod killed (no grace) while Jobs are in flight; the Deployment replaces it
        done = _run_count(space, name)
        space.wait_for(lambda d=done: _run_count(space, name) > d, 300, "progress")  # type: ignore[misc]
        (pod,) = [p for p in space.controller_pods() if not p.metadata.deletion_timestamp]
        space.cluster.core.delete_namespaced_pod(pod.metadata.name, space.namespace, grace_period_seconds=0)
    run = space.wait_phase(name, 900)
    assert run["status"]["phase"] == "Succeeded" and run["status"]["done"] == 6, run["status"]
    space.cli("results", name, "-o", str(tmp_path / "r.jsonl"))
    got = records(tmp_path / "r.jsonl")
    ids = [r["item_id"] for r in got]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == 6  # none lost, none duplicated
    assert all(r["grader"]["status"] == "passed" for r in got)
    assert space.pods is not None and set(space.pods.per_item().values()) == {1}  # nothing graded twice


def test_eviction_through_the_eviction_api_is_retried_as_infra(space: Space, mini_suite: Path, tmp_path: Path) -> None:
    space.install_controller()
    name = space.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite),
                     "--test-id", "mini-hooks-001").stdout.strip()  # fmt: skip

    def running_graders() -> list[dict]:  # not the run's image-probe pod, which runs `true` before them
        return [p for p in space.objects("pods") if p["status"].get("phase") == "Running"
                and p["metadata"]["labels"].get("app.kubernetes.io/component") == "grader"]  # fmt: skip

    pod = space.wait_for(running_graders, 300, "a running grader pod")[0]
    pod_name = pod["metadata"]["name"]
    space.cluster.core.create_namespaced_pod_eviction(
        pod_name, space.namespace, {"metadata": {"name": pod_name, "namespace": space.namespace}}
    )
    run = space.wait_phase(name, 600)
    st = run["status"]
    assert (st["infraRetries"], st["passed"], st["infraErrors"]) == (1, 1, 0), st
    space.cli("results", name, "-o", str(tmp_path / "r.jsonl"))
    (rec,) = records(tmp_path / "r.jsonl")
    assert rec["grader"]["status"] == "passed" and rec["grader"]["infra_retries"] == 1 and rec["error"] is None
    assert space.pods is not None and space.pods.per_item() == {rec["item_id"]: 2}


def test_submitted_objects_round_trip_the_api_server(space: Space, mini_suite: Path) -> None:
    """What `submit` creates is what the API server stores: no field pruned by the CRD schema or defaulted away."""
    out = space.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite), "--dry-run",
                    "-n", space.namespace).stdout  # fmt: skip
    sent = [d for d in yaml.safe_load(out)["objects"] if d["kind"] != "Namespace"]
    assert {d["kind"] for d in sent} >= {"WPBenchRun", "ConfigMap", "NetworkPolicy", "Job"}
    for doc in sent:
        doc["metadata"]["namespace"] = space.namespace
        path = space.tmp / f"{doc['kind']}-{doc['metadata']['name']}.json"
        path.write_text(json.dumps(doc))
        res = space.cluster.kubectl("create", "--dry-run=server", "-o", "json", "-f", str(path))
        assert_contains(json.loads(res.stdout), doc, f"{doc['kind']}/{doc['metadata']['name']}")


def assert_contains(stored: Any, sent: Any, where: str) -> None:
    """Every field sent is stored with the same value (the server may add defaults, never drop or change;
    an empty list or map is the same as none to it, as Go's omitempty serialises them)."""
    if isinstance(sent, dict):
        assert isinstance(stored, dict), where
        for key, value in sent.items():
            if value in ([], {}) and key not in stored:
                continue
            assert key in stored, f"{where}.{key} dropped by the API server"
            assert_contains(stored[key], value, f"{where}.{key}")
    elif isinstance(sent, list):
        assert isinstance(stored, list) and len(stored) == len(sent), where
        for n, (a, b) in enumerate(zip(stored, sent, strict=True)):
            assert_contains(a, b, f"{where}[{n}]")
    elif sent != stored:
        assert str(sent) == str(stored) or _same_quantity(sent, stored), f"{where}: sent {sent!r}, stored {stored!r}"


def _same_quantity(a: Any, b: Any) -> bool:
    from kubernetes.utils import parse_quantity

    try:
        return bool(parse_quantity(a) == parse_quantity(b))
    except (ValueError, TypeError):
        return False


def test_deleting_the_run_removes_everything_it_owns(space: Space, mini_suite: Path) -> None:
    space.install_controller()
    name = space.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite),
                     "--test-id", "mini-hooks-001").stdout.strip()  # fmt: skip
    space.wait_phase(name, 600)
    assert space.objects("configmaps") and space.objects("networkpolicies")
    space.cluster.custom.delete_namespaced_custom_object("wpbench-k8s.org", "v1alpha1", space.namespace, "wpbenchruns",
                                                         name, propagation_policy="Foreground")  # fmt: skip
    for kind in ("configmaps", "networkpolicies", "jobs", "pods"):  # the garbage collector follows the owner refs
        space.wait_for(lambda k=kind: not space.objects(k), 120, f"{kind} to go")  # type: ignore[misc]


def test_unreachable_cluster_and_unknown_run_are_one_line_errors(space: Space, tmp_path: Path) -> None:
    dead = tmp_path / "dead-kubeconfig"
    dead.write_text(json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "x",
                                "clusters": [{"name": "x", "cluster": {"server": "http://127.0.0.1:9"}}],
                                "users": [{"name": "x", "user": {}}],
                                "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}]}))  # fmt: skip
    res = space.cli("status", "some-run", "--kubeconfig", str(dead), check=False)
    assert res.returncode == 3 and "cannot reach the Kubernetes API server" in res.stderr
    assert "Traceback" not in res.stderr
    res = space.cli("status", "no-such-run", check=False)
    assert res.returncode == 3 and "not found" in res.stderr and "Traceback" not in res.stderr


def test_local_run_with_the_kubernetes_executor(
    space: Space, mini_suite: Path, grader_image: str, tmp_path: Path
) -> None:
    """`wpbench-k8s run --executor kubernetes`: the same Job builder and verdict reader, on the real cluster."""
    res = subprocess.run([sys.executable, "-m", "wpbench_k8s", "run", "--check-reference-solution", "--dataset-path",
                          str(mini_suite), "--image", grader_image, "--executor", "kubernetes",
                          "--output", str(tmp_path / "o" / "results.json")],
                         env=space.env, capture_output=True, text=True, timeout=600, cwd=REPO)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    (jsonl,) = (tmp_path / "o").glob("results_*.jsonl")
    got = records(jsonl)
    assert got and [r["grader"]["status"] for r in got] == ["passed"] * len(got)
    space.wait_for(lambda: not space.objects("jobs") and not space.objects("configmaps"), 120, "its objects to go")


CRD_NAME = "wpbenchruns.wpbench-k8s.org"
MESSAGE_COLUMN = """    - name: Message
      type: string
      jsonPath: .status.message
      priority: 1
"""


@pytest.fixture
def shared_crd(kube: Cluster, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The cluster's one WPBenchRun CRD (the cluster-up release owns it), put back as it was afterwards:
    its spec, labels and annotations (so its release owns it again)."""
    before = json.loads(kube.kubectl("get", "crd", CRD_NAME, "-o", "json").stdout)
    yield before
    live = json.loads(kube.kubectl("get", "crd", CRD_NAME, "-o", "json").stdout)
    live["spec"] = before["spec"]
    for key in ("labels", "annotations"):
        live["metadata"][key] = before["metadata"].get(key, {})
    (tmp_path / "crd-restore.json").write_text(json.dumps(live))
    kube.kubectl("replace", "-f", str(tmp_path / "crd-restore.json"))


def _columns(crd_doc: dict[str, Any]) -> list[str]:
    return [c["name"] for c in crd_doc["spec"]["versions"][0]["additionalPrinterColumns"]]


def test_helm_upgrade_with_a_crd_change_and_uninstall_keep_results_and_orphan_nothing(
    space: Space, mini_suite: Path, tmp_path: Path, shared_crd: dict[str, Any]
) -> None:
    space.install_controller()
    name = space.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite),
                     "--test-id", "mini-hooks-001").stdout.strip()  # fmt: skip
    space.wait_phase(name, 600)
    chart = REPO / "charts" / "wpbench-k8s"
    space.cluster.helm("upgrade", space.release, str(chart), "--namespace", space.namespace, "--reuse-values",
                       "--set", "controller.maxInFlight=3", "--wait", "--timeout", "5m")  # fmt: skip
    deployment = space.cluster.kubectl("get", "deployment", "-n", space.namespace, "-o", "json").stdout
    assert "--max-in-flight=3" in deployment
    space.cli("results", name, "-o", str(tmp_path / "after-upgrade.jsonl"))
    assert [r["grader"]["status"] for r in records(tmp_path / "after-upgrade.jsonl")] == ["passed"]

    # A run elsewhere that no controller touches, last written before the CRD changes.
    waiting = f"{space.namespace}-w"
    space.cluster.core.create_namespace({"metadata": {"name": waiting, "labels": {TEST_LABEL: "true"}}})
    try:
        late = space.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite),
                         "--test-id", "mini-hooks-001", "-n", waiting).stdout.strip()  # fmt: skip
        controller = [p.metadata.name for p in space.controller_pods()]

        # The CRD changes through helm upgrade: this release adopts the cluster's CRD (as docs/kubernetes.md
        # says for 0.1.x) and upgrades to a chart whose CRD has one more printer column.
        space.cluster.kubectl("annotate", "crd", CRD_NAME, "--overwrite", f"meta.helm.sh/release-name={space.release}",
                              f"meta.helm.sh/release-namespace={space.namespace}")  # fmt: skip
        space.cluster.kubectl("label", "crd", CRD_NAME, "--overwrite", "app.kubernetes.io/managed-by=Helm")
        changed = tmp_path / "chart"
        shutil.copytree(chart, changed)
        crd_file = changed / "templates" / "crd.yaml"
        crd_file.write_text(crd_file.read_text().replace("    - name: Age\n", MESSAGE_COLUMN + "    - name: Age\n"))
        space.cluster.helm("upgrade", space.release, str(changed), "--namespace", space.namespace, "--reuse-values",
                           "--wait", "--timeout", "5m")  # fmt: skip
        served = json.loads(space.cluster.kubectl("get", "crd", CRD_NAME, "-o", "json").stdout)
        assert _columns(served) == [*_columns(shared_crd)[:-1], "Message", "Age"], _columns(served)
        wide = space.cluster.kubectl("get", "wpbenchruns", "-n", space.namespace, "-o", "wide").stdout
        assert wide.splitlines()[0].split()[-2:] == ["MESSAGE", "AGE"], wide
        space.cli("results", name, "-o", str(tmp_path / "after-crd-change.jsonl"))  # no stored result lost
        assert [r["grader"]["status"] for r in records(tmp_path / "after-crd-change.jsonl")] == ["passed"]

        _status_watch_survives_expiry(space, waiting, late)
        # The in-cluster controller's watches were cut when the API server replaced the CRD's storage; the
        # same pod (the upgrade changed no value) relisted and goes on.
        assert [p.metadata.name for p in space.controller_pods()] == controller

        def relisted() -> list[str]:
            log = space.cluster.kubectl("logs", "-n", space.namespace, f"pod/{controller[0]}", check=False).stdout
            return [line for line in log.splitlines() if "watch wpbenchruns" in line and "relisting" in line]

        print("controller:", *space.wait_for(relisted, 120, "the controller's run watch to relist"), sep="\n  ")
    finally:
        space.cluster.kubectl("delete", "namespace", waiting, "--wait=false", check=False)

    space.cluster.helm("uninstall", space.release, "--namespace", space.namespace, "--wait")
    space.release = ""
    left = space.cluster.kubectl("get", "deployments,serviceaccounts,roles,rolebindings,pods", "-n", space.namespace,
                                 "-l", "app.kubernetes.io/managed-by=Helm", "-o", "name").stdout  # fmt: skip
    assert left.strip() == "", left
    kept = json.loads(space.cluster.kubectl("get", "crd", CRD_NAME, "-o", "json").stdout)
    assert "Message" in _columns(kept)  # helm.sh/resource-policy: keep
    space.cli("results", name, "-o", str(tmp_path / "after-uninstall.jsonl"))  # the stored result outlives the release
    assert [r["grader"]["status"] for r in records(tmp_path / "after-uninstall.jsonl")] == ["passed"]


def _status_watch_survives_expiry(space: Space, namespace: str, run: str) -> None:
    """`status --watch` on a run last written before the CRD change: the API server's new watch cache for
    WPBenchRuns starts after that resourceVersion, so the watch gets 410 (an ERROR event), the one Watcher
    relists, and a later write still ends the command. Its INFO log is switched on from outside."""
    custom = space.cluster.custom

    def new_cache_serves() -> bool:  # 429 while the new watch cache initialises; then 200 + ERROR 410
        try:
            resp = custom.list_namespaced_custom_object("wpbench-k8s.org", "v1alpha1", namespace, "wpbenchruns",
                                                        watch=True, resource_version="1", timeout_seconds=1,
                                                        _preload_content=False)  # fmt: skip
        except ApiException:
            return False
        try:
            return '"code":410' in resp.data.decode()
        finally:
            resp.release_conn()

    space.wait_for(new_cache_serves, 60, "the new watch cache of WPBenchRuns")
    code = "import logging, sys; logging.basicConfig(level=logging.INFO); from wpbench_k8s.cli import main; main()"
    proc = subprocess.Popen([sys.executable, "-c", code, "status", run, "--watch", "-n", namespace], env=space.env,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or []), daemon=True)
    reader.start()
    try:
        space.wait_for(lambda: any("expired; relisting" in line for line in lines), 120, "status --watch to relist")
        custom.patch_namespaced_custom_object_status("wpbench-k8s.org", "v1alpha1", namespace, "wpbenchruns", run,
                                                     {"status": {"phase": "Succeeded", "done": 1, "total": 1,
                                                                 "passed": 1}})  # fmt: skip
        out = proc.communicate(timeout=120)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "Succeeded" in out, (out, "".join(lines)[-2000:])
    assert sum("expired; relisting" in line for line in lines) == 1, lines


PROBE = r"""
echo "uid=$(id -u) gid=$(id -g)"
touch /rootfs-probe 2>/dev/null && echo "root=rw" || echo "root=ro"
touch /run/wpbench/x && echo "wordpress=rw"
df -k /run/wpbench | awk 'NR==2 {print "wordpress_kb=" $2}'
df -k /tmp | awk 'NR==2 {print "tmp_kb=" $2}'
grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status | tr -d '\t' | tr ':' '='
echo "task_bytes=$(wc -c < /etc/wpbench/task/task.json)"
echo "cpu_quota=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || cat /sys/fs/cgroup/cpu.max)"
echo "mem_limit=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max)"
ls /proc/1/fd >/dev/null 2>&1 && echo "pid1_fds=open" || echo "pid1_fds=denied"
sleep 30 & v=$!; WPBENCH_GUARD_ROLE=runner sh -c "kill $v 2>/dev/null && echo runner_kill=ok || echo runner_kill=denied"; kill $v
echo "routes=$(awk 'NR>1 {print $2}' /proc/net/route | sort -u | tr '\n' ',')"
echo '{"probe": "done"}' > /dev/termination-log
"""


def test_grader_pod_spec_is_honoured_by_the_real_kubelet(space: Space, mini_suite: Path, grader_image: str) -> None:
    pod = probe_job(space, mini_suite, grader_image, "probe", PROBE)
    log = str(space.cluster.core.read_namespaced_pod_log(pod.metadata.name, space.namespace))  # through the kubelet
    facts = dict(line.split("=", 1) for line in log.splitlines() if "=" in line)
    assert facts["uid"] == "65532 gid=65532", log
    assert facts["root"] == "ro" and facts["wordpress"] == "rw"
    assert int(facts["wordpress_kb"]) == 256 * 1024 and int(facts["tmp_kb"]) == 64 * 1024
    assert int(facts["CapEff"], 16) == 0 and facts["NoNewPrivs"] == "1" and facts["Seccomp"] == "2"
    assert int(facts["task_bytes"]) == 2  # the ConfigMap key, mounted read-only
    assert facts["cpu_quota"].split()[0] == "100000"
    assert int(facts["mem_limit"]) == 512 * 1024 * 1024
    # The image's native guard in a pod: PID 1's descriptors closed to another process of the same uid,
    # and a runner-role process cannot signal another process.
    assert facts["pid1_fds"] == "denied" and facts["runner_kill"] == "denied"
    # No default route: the pod network leads nowhere but this machine's pod bridge.
    assert "00000000" not in facts["routes"].split(","), facts["routes"]
    term = pod.status.container_statuses[0].state.terminated
    assert term.exit_code == 0 and json.loads(term.message) == {"probe": "done"}
