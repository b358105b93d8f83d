"""What the node of the real local Kubernetes (`make cluster-up`) enforces on grader pods: the run's deny-all
NetworkPolicy (kube-router), which refuses at once so a candidate's network use ends as it does under Docker's
`--network none`, and the kubelet's per-pod process bound (`podPidsLimit`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clusterkit import Space, job_pod, pod_facts, probe_job, start_probe_job

from wpbench_k8s.executor import get_executor
from wpbench_k8s.manifest import GraderSpec
from wpbench_k8s.outcome import Infra, decide_outcome
from wpbench_runtime.contract import GradeTask, Verdict

pytestmark = pytest.mark.docker

POD_PIDS_LIMIT = 256  # scripts/cluster-env.sh, as scripts/kind-config.yaml sets it
ECONNREFUSED, ETIMEDOUT = "111", "110"

# Listens on 8080 and accepts until killed; not selected by any policy (its run has none).
LISTEN = r"""
php -r '$s = stream_socket_server("tcp://0.0.0.0:8080", $e, $m) or exit(1); echo "listening=yes\n";
        while (true) { $c = @stream_socket_accept($s, 600); if ($c) { fclose($c); } }'
"""

# One line per target: `name=open`, `name=closed:ERRNO` (111 refused, 110 timed out, 101 unreachable) or
# `name=hung` when even the connect's own 3 s timeout did not end it.
CONNECT = r"""
probe() { timeout 10 php -r '$s = @fsockopen($argv[1], (int) $argv[2], $e, $m, 3);
                             echo $argv[3], "=", $s ? "open" : "closed:$e", "\n";' "$1" "$2" "$3" || echo "$3=hung"; }
probe "$API_HOST" "$API_PORT" apiserver
probe "$SERVICE_IP" 443 service
probe "$TARGET" 8080 pod
probe 192.0.2.1 80 outside
"""


def _target(space: Space, suite: Path, grader_image: str) -> str:
    """A pod of another run (no policy) listening on 8080; its IP once it listens."""
    job = start_probe_job(space, suite, grader_image, "target", LISTEN, policy=False, deadline=900, cpu="100m")
    pod = job_pod(space, job, finished=False)
    space.wait_for(lambda: pod_facts(space, pod).get("listening"), 120, "the target pod to listen")
    return str(space.cluster.core.read_namespaced_pod(pod.metadata.name, space.namespace).status.pod_ip)


def test_deny_all_policy_refuses_a_grader_pod_the_api_server_other_pods_and_the_world(
    space: Space, mini_suite: Path, grader_image: str
) -> None:
    target = _target(space, mini_suite, grader_image)
    host, port = space.cluster.api_endpoint()
    script = f"TARGET={target} API_HOST={host} API_PORT={port} SERVICE_IP={space.cluster.service_ip()}\n{CONNECT}"
    denied_job = start_probe_job(space, mini_suite, grader_image, "net-in", script, cpu="100m")
    open_job = start_probe_job(space, mini_suite, grader_image, "net-open", script, policy=False, cpu="100m")
    # The same probe without a policy reaches the pod and the API server: the policy is what closes them.
    open_ = pod_facts(space, job_pod(space, open_job))
    assert (open_["pod"], open_["apiserver"]) == ("open", "open"), open_
    denied = pod_facts(space, job_pod(space, denied_job))
    # Refused, not dropped: a connect fails at once, as with Docker's --network none (no hang until a timeout).
    assert (denied["apiserver"], denied["service"], denied["pod"]) == (f"closed:{ECONNREFUSED}",) * 3, denied
    assert denied["outside"].startswith("closed:") and denied["outside"] != f"closed:{ETIMEDOUT}", denied


# A candidate that uses the network: the API server's address (what a pod on the cluster could reach), an
# address off the machine, and a name. 60 s connect timeouts against a 10 s test: a dropped packet would end
# the test as `timeout`.
NETWORK_CANDIDATE = """
$api = @fsockopen( '10.244.0.1', 16443, $errno, $errstr, 60 );
$out = @fsockopen( '192.0.2.1', 80, $errno2, $errstr2, 60 );
$ip  = gethostbyname( 'wordpress.org' );
if ( ! $api && ! $out && 'wordpress.org' === $ip ) {
	throw new RuntimeException( "offline: $errstr; $errstr2" );
}
"""
FORK_BOMB = "while ( true ) { pcntl_fork(); }"


def _grade_on_both_backends(
    space: Space, grader_image: str, code: str, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Verdict]:
    monkeypatch.setenv("KUBECONFIG", str(space.kubeconfig))
    monkeypatch.setenv("WPBENCH_K8S_NAMESPACE", space.namespace)
    task = GradeTask(test_id="node-probe", code=code, timeout_seconds=10)
    spec = GraderSpec(image=grader_image, timeout_seconds=10)
    verdicts: dict[str, Verdict] = {}
    for backend in ("docker", "kubernetes"):
        executor = get_executor(backend, spec, f"node-{backend}")
        executor.preflight()  # on Kubernetes: the run's deny-all policy
        try:
            decision = decide_outcome(executor.run_grader(task))
        finally:
            executor.cleanup()
        assert not isinstance(decision, Infra), (backend, decision)
        verdicts[backend] = decision.verdict
    return verdicts


def test_a_candidate_using_the_network_gets_the_same_verdict_on_both_backends(
    space: Space, grader_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    verdicts = _grade_on_both_backends(space, grader_image, NETWORK_CANDIDATE, monkeypatch)
    statuses = {backend: v.status for backend, v in verdicts.items()}
    assert statuses["kubernetes"] == statuses["docker"] == "error", verdicts
    assert all("offline" in (v.reason or "") for v in verdicts.values()), verdicts


def test_a_pod_cannot_start_more_processes_than_the_kubelets_pod_pids_limit(
    space: Space, mini_suite: Path, grader_image: str
) -> None:
    for node in space.cluster.core.list_node().items:  # every node's kubelet: a grader may land on any
        raw = space.cluster.kubectl("get", "--raw", f"/api/v1/nodes/{node.metadata.name}/proxy/configz").stdout
        assert json.loads(raw)["kubeletconfig"]["podPidsLimit"] == POD_PIDS_LIMIT, node.metadata.name
    # A shell fork bomb (the grader's PHP cannot fork at all: below): background sleeps until fork fails.
    bomb = r"""
( n=0; while true; do sleep 120 & n=$((n + 1)); echo $n > /tmp/forks; done ) 2>/dev/null
kill -9 -1 2>/dev/null; read n < /tmp/forks; echo "forks=$n"
"""
    facts = pod_facts(space, probe_job(space, mini_suite, grader_image, "forks", bomb))
    # The pod's cgroup also holds its pause process, this shell and the subshell.
    assert POD_PIDS_LIMIT - 8 <= int(facts["forks"]) < POD_PIDS_LIMIT, facts


def test_a_fork_bomb_candidate_is_scored_as_its_own_error_on_both_backends(
    space: Space, grader_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    verdicts = _grade_on_both_backends(space, grader_image, FORK_BOMB, monkeypatch)
    assert {v.status for v in verdicts.values()} == {"error"}, verdicts
    assert all("pcntl_fork" in (v.reason or "") for v in verdicts.values()), verdicts
