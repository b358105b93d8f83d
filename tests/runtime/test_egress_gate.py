"""The egress gate of the supervisor (runtime/php/verifier/supervisor/egress.php) in the real grader image.

With WPBENCH_EGRESS_PROBE set (grader Jobs set it; the Docker executor does not) the supervisor reads no task
until a connect to the probe target fails. Under `--network none` that is at once (no route: ENETUNREACH), and
the task is graded as without the gate. A target that accepts (here a listener whose network namespace the
grader shares, so nothing leaves the engine's loopback) keeps the gate shut: after its bound the grader exits 5
(`egress_open`, infrastructure) and the candidate never ran: it would have connected to the listener's other
port, which the listener would have logged. A probe target that is not an IP literal (a kubelet that did not
fill in the Service's address) shuts the gate too.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest
from gradekit import RUN_LABEL, SESSION, Grader, task

from wpbench_k8s.executor.docker import lockdown_args
from wpbench_k8s.manifest import GraderSpec
from wpbench_k8s.outcome import EGRESS_OPEN, GraderFacts, Infra, decide_outcome
from wpbench_runtime.contract import Verdict

pytestmark = pytest.mark.docker

PASSES = task("function rt_egress() { return 42; }", {"type": "custom_assertion", "code": "return rt_egress() === 42;"})
# What a candidate that ran would do first: connect to the listener's other port (the listener logs it) and say so.
ANNOUNCE = task(
    "$s = @fsockopen( '127.0.0.1', 8081, $errno, $errstr, 2 ); echo $s ? 'candidate connected' : \"candidate: $errstr\";",
    {"type": "custom_assertion", "code": "return true;"},
)
LISTENER = r"""
$probe = stream_socket_server( 'tcp://127.0.0.1:8080' ) or exit( 1 );
$mark  = stream_socket_server( 'tcp://127.0.0.1:8081' ) or exit( 1 );
echo "listening\n";
while ( true ) {
	$r = array( $probe, $mark ); $w = $e = null;
	if ( stream_select( $r, $w, $e, 600 ) ) {
		foreach ( $r as $s ) { fclose( stream_socket_accept( $s ) ); echo 'accepted ', $s === $probe ? 8080 : 8081, "\n"; }
	}
}
"""


def _run(
    grader: Grader, doc: dict, env: dict[str, str], network: str = "none"
) -> tuple[subprocess.CompletedProcess[str], Verdict]:
    args = lockdown_args(GraderSpec(image=grader.image))
    args[args.index("--network") + 1] = network
    argv = ["docker", "run", "-i", "--rm", "--label", f"{RUN_LABEL}={SESSION}", *args]
    for key, value in env.items():
        argv += ["-e", f"{key}={value}"]
    proc = subprocess.run([*argv, grader.image], input=json.dumps(doc), capture_output=True, text=True, timeout=120)
    assert proc.stdout.count("\n") == 1, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    return proc, Verdict.model_validate_json(proc.stdout)


@pytest.fixture
def listener(grader: Grader) -> Iterator[str]:
    """A container listening on its loopback's 8080 (the probe target) and 8081 (the candidate's), no network."""
    name = f"egress-listener-{uuid.uuid4().hex[:8]}"
    subprocess.run(["docker", "run", "-d", "--rm", "--name", name, "--label", f"{RUN_LABEL}={SESSION}", "--network", "none",
                    "--user", "65532:65532", "--read-only", "--cap-drop", "ALL", "--entrypoint", "php", grader.image,
                    "-n", "-r", LISTENER], check=True, capture_output=True)  # fmt: skip
    try:
        for _ in range(100):
            if "listening" in subprocess.run(["docker", "logs", name], capture_output=True, text=True).stdout:
                break
            time.sleep(0.1)
        yield name
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)


def test_under_network_none_the_gate_opens_at_once_and_the_task_is_graded(grader: Grader) -> None:
    proc, verdict = _run(
        grader, PASSES, {"WPBENCH_EGRESS_PROBE": "[10.96.0.1]:443", "WPBENCH_EGRESS_WAIT_SECONDS": "5"}
    )
    assert (proc.returncode, verdict.status) == (0, "passed"), proc.stderr[-2000:]
    assert "egress closed: 10.96.0.1:443 ENETUNREACH" in proc.stderr, proc.stderr[-2000:]


def test_an_open_network_ends_the_attempt_as_infrastructure_before_the_candidate(grader: Grader, listener: str) -> None:
    env = {"WPBENCH_EGRESS_PROBE": "127.0.0.1:8080", "WPBENCH_EGRESS_WAIT_SECONDS": "2"}
    proc, verdict = _run(grader, ANNOUNCE, env, network=f"container:{listener}")
    assert proc.returncode == 5 and verdict.status == "harness_error", (proc.stdout, proc.stderr[-2000:])
    assert verdict.reason.startswith(f"{EGRESS_OPEN}: 127.0.0.1:8080 still accepted connections"), verdict.reason
    assert (
        verdict.test_id is None and verdict.stdout == "" and "grading rt-test" not in proc.stderr
    )  # the task was not read
    decision = decide_outcome(GraderFacts(exit_code=proc.returncode, stdout=proc.stdout))
    assert isinstance(decision, Infra) and decision.fallback is None, decision
    accepted = subprocess.run(["docker", "logs", listener], capture_output=True, text=True).stdout.split("\n")
    assert "accepted 8080" in accepted and "accepted 8081" not in accepted, accepted  # the probe, never the candidate
    # The same grader on the same network with no gate asked for: the candidate runs and reaches the listener.
    proc, verdict = _run(grader, ANNOUNCE, {}, network=f"container:{listener}")
    assert verdict.status == "passed" and "candidate connected" in verdict.stdout, verdict
    time.sleep(0.5)
    assert "accepted 8081" in subprocess.run(["docker", "logs", listener], capture_output=True, text=True).stdout


@pytest.mark.parametrize(
    "env",
    [
        {"WPBENCH_EGRESS_PROBE": "[$(KUBERNETES_SERVICE_HOST)]:$(KUBERNETES_SERVICE_PORT)"},  # not filled in
        {"WPBENCH_EGRESS_PROBE": "kubernetes.default.svc:443"},  # a name: the gate resolves nothing
        {"WPBENCH_EGRESS_PROBE": "[10.96.0.1]:443", "WPBENCH_EGRESS_WAIT_SECONDS": "forever"},
    ],
)
def test_a_gate_that_cannot_check_stays_shut(grader: Grader, env: dict[str, str]) -> None:
    proc, verdict = _run(grader, PASSES, env)
    assert proc.returncode == 5 and verdict.reason.startswith(f"{EGRESS_OPEN}: the egress gate is misconfigured"), (
        verdict.reason
    )
