"""The egress gate on the real cluster: a grader pod includes no candidate code until its network is seen closed.

A grader pod's deny-all NetworkPolicy is enforced by kube-router only once the pod has started (the window is
in docs/isolation.md). Every grader Job names the `kubernetes` Service as the probe target; the supervisor reads
its task only once a connect there is refused. One namespace, one listener pod (no policy) that logs every
connection it accepts, and three runs of the Kubernetes executor (the Job the controller builds, kube.objects):
- a run whose grader pods also have a policy that allows all egress (what a namespace without the deny-all
  would give): every attempt ends as infrastructure (`egress_open`, retried, then infra_error, never scored),
  and the candidate, which would connect to the listener at its first line, never ran: the listener saw nothing;
- reference solutions under the run's deny-all: passed, the gate having opened (its line in the pod log);
- a hostile candidate whose first line connects to the listener, the Service and the API server's address: all
  refused, and the listener saw nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from clusterkit import Cluster, Space, drop_space, job_pod, new_space, pod_facts, start_probe_job
from kubernetes import client as k8s

from wpbench_k8s.config import load_config
from wpbench_k8s.executor.kubernetes import KubernetesExecutor
from wpbench_k8s.kube.names import COMPONENT_NETWORK_POLICY, pod_selector, run_labels
from wpbench_k8s.manifest import GraderSpec
from wpbench_k8s.outcome import EGRESS_OPEN, INFRA_RETRIES, Decision, GraderFacts, Infra, Scored, decide_outcome
from wpbench_k8s.pipeline import plan_run
from wpbench_k8s.steps import grade_with_retries
from wpbench_runtime.contract import GradeTask

pytestmark = pytest.mark.docker

# Accepts until killed, one line per connection it accepted.
LISTEN = r"""
php -r '$s = stream_socket_server("tcp://0.0.0.0:8080", $e, $m) or exit(1); echo "listening=yes\n";
        while (true) { $c = @stream_socket_accept($s, 600, $peer); if ($c) { echo "accepted=$peer\n"; fclose($c); } }'
"""
GATE_LINE = re.compile(r"egress closed: (\S+) (\w+(?: x\d+)?) after (\d+) ms \((\d+) connects got through first\)")


def connect_out(*targets: tuple[str, int]) -> str:
    """A candidate whose first line connects to each target; it fails if any connect got through."""
    calls = " ".join(
        f"$s = @fsockopen( '{host}', {port}, $errno, $errstr, 5 ); $seen[] = '{host}:{port}=' . ( $s ? 'open' : $errno );"
        for host, port in targets
    )
    return (
        f"$seen = array(); {calls} echo implode( ' ', $seen ), \"\\n\";"
        " if ( preg_grep( '/=open$/', $seen ) ) { throw new RuntimeException( 'reached: ' . implode( ' ', $seen ) ); }"
    )


@pytest.fixture(scope="module")
def gate_space(kube: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Space]:
    space = new_space(kube, tmp_path_factory.mktemp("egress"), __name__)
    try:
        yield space
    finally:
        drop_space(space)


@pytest.fixture(scope="module")
def listener(gate_space: Space, grader_image: str) -> tuple[str, str]:
    """A pod of a run without a policy listening on 8080: (its IP, its pod name)."""
    suite = Path(__file__).resolve().parents[1] / "fixtures" / "suites" / "mini"
    job = start_probe_job(gate_space, suite, grader_image, "listener", LISTEN, policy=False, deadline=1800, cpu="50m")
    pod = job_pod(gate_space, job, finished=False)
    gate_space.wait_for(lambda: pod_facts(gate_space, pod).get("listening"), 120, "the listener to listen")
    ip = gate_space.cluster.core.read_namespaced_pod(pod.metadata.name, gate_space.namespace).status.pod_ip
    return str(ip), str(pod.metadata.name)


def accepted(space: Space, pod: str) -> list[str]:
    log = str(space.cluster.core.read_namespaced_pod_log(pod, space.namespace))
    return [line for line in log.splitlines() if line.startswith("accepted=")]


class Recording:
    """The executor, keeping what each attempt saw."""

    def __init__(self, executor: KubernetesExecutor) -> None:
        self.executor = executor
        self.seen: list[GraderFacts] = []

    def run_grader(self, task: GradeTask) -> GraderFacts:
        facts = self.executor.run_grader(task)
        self.seen.append(facts)
        return facts


def executor(space: Space, image: str, run: str, monkeypatch: pytest.MonkeyPatch) -> KubernetesExecutor:
    monkeypatch.setenv("KUBECONFIG", str(space.kubeconfig))
    monkeypatch.setenv("WPBENCH_K8S_NAMESPACE", space.namespace)
    ex = KubernetesExecutor(GraderSpec(image=image, timeout_seconds=20), run)
    ex.preflight()  # the run's deny-all policy, as before every run
    return ex


def gate_lines(facts: GraderFacts) -> list[tuple[str, str, int, int]]:
    return [(a, why, int(ms), int(n)) for a, why, ms, n in GATE_LINE.findall(facts.stdout)]


def test_an_open_network_ends_every_attempt_as_infrastructure_and_no_candidate_code_runs(
    gate_space: Space, listener: tuple[str, str], grader_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ip, listener_pod = listener
    ex = executor(gate_space, grader_image, "egress-open", monkeypatch)
    ex.egress_wait_seconds = 4  # the bound (30 s in a run) only makes this test slower
    # Policies add up: with this one beside the deny-all, the run's grader pods may connect anywhere.
    allow = k8s.V1NetworkPolicy(
        metadata=k8s.V1ObjectMeta(
            name=f"{ex.run_name}-allow-egress", labels=run_labels(ex.run_name, COMPONENT_NETWORK_POLICY)
        ),
        spec=k8s.V1NetworkPolicySpec(
            pod_selector=k8s.V1LabelSelector(match_labels=pod_selector(ex.run_name)),
            policy_types=["Egress"],
            egress=[k8s.V1NetworkPolicyEgressRule()],
        ),
    )
    k8s.NetworkingV1Api(gate_space.cluster.api).create_namespaced_network_policy(gate_space.namespace, allow)
    recording = Recording(ex)
    task = GradeTask(test_id="egress-open", code=connect_out((ip, 8080)), timeout_seconds=20)
    try:
        decision, retries = grade_with_retries(recording, task)
    finally:
        ex.cleanup()
    assert retries == INFRA_RETRIES and len(recording.seen) == 1 + INFRA_RETRIES, recording.seen
    for facts in recording.seen:
        attempt: Decision = decide_outcome(facts)
        assert isinstance(attempt, Infra) and attempt.fallback is None, (attempt, facts)
        assert attempt.reason.startswith(f"{EGRESS_OPEN}: ") and "still accepted connections" in attempt.reason, attempt
        assert facts.exit_code == 5 and "grading egress-open" not in facts.stdout, facts.stdout[-3000:]
    assert isinstance(decision, Infra) and decision.fallback is None  # the record: infra_error, never scored
    assert accepted(gate_space, listener_pod) == []  # the candidate would have connected at its first line


def test_reference_solutions_pass_once_the_gate_has_seen_the_deny_all(
    gate_space: Space, grader_image: str, mini_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = plan_run(load_config(None, {"dataset.path": str(mini_suite), "grader.image": grader_image}), "reference")
    ex = executor(gate_space, grader_image, "egress-closed", monkeypatch)
    try:
        seen = [(item.item_id, ex.run_grader(item.task)) for item in manifest.items if item.task is not None]
    finally:
        ex.cleanup()
    assert seen
    for item_id, facts in seen:
        decision = decide_outcome(facts)
        assert isinstance(decision, Scored) and decision.verdict.status == "passed", (
            item_id,
            decision,
            facts.stdout[-3000:],
        )
        (gate,) = gate_lines(facts)
        # kube-router REJECTs (refused; timeouts only while the kernel rate-limits its ICMP answers)
        assert gate[1] in ("ECONNREFUSED", "ETIMEDOUT x2"), gate
        print(f"\n{item_id}: gate closed after {gate[2]} ms, {gate[3]} connects got through first")


def test_a_candidate_that_connects_at_its_first_line_reaches_nothing(
    gate_space: Space, listener: tuple[str, str], grader_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ip, listener_pod = listener
    host, port = gate_space.cluster.api_endpoint()
    ex = executor(gate_space, grader_image, "egress-hostile", monkeypatch)
    code = connect_out((ip, 8080), (gate_space.cluster.service_ip(), 443), (host, port))
    try:
        facts = ex.run_grader(GradeTask(test_id="egress-hostile", code=code, timeout_seconds=20))
    finally:
        ex.cleanup()
    decision = decide_outcome(facts)
    assert isinstance(decision, Scored) and decision.verdict.status == "passed", (decision, facts.stdout[-3000:])
    assert decision.verdict.stdout.split() == [
        f"{ip}:8080=111",
        f"{gate_space.cluster.service_ip()}:443=111",
        f"{host}:{port}=111",
    ]
    assert accepted(gate_space, listener_pod) == []
