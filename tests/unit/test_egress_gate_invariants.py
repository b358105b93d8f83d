"""The egress gate's invariants, read off the sources and the objects (runtime/php/verifier/supervisor/egress.php).

On Kubernetes a grader pod's deny-all policy is put up by the enforcer after the pod has started. The supervisor
reads no task (so includes no candidate code) until a connect to the probe target the Job names is refused, and
an attempt whose network stays open is infrastructure: retried, never scored. What must hold:
- in `grade()` the gate comes before the task is read and before any candidate file or job exists, and the exit
  code it ends with (EGRESS_OPEN_EXIT) is set nowhere else, so no candidate can end an attempt as egress_open;
- the same code on both sides of the contract; exit 5 is infrastructure without a fallback (never scored);
- every grader Job names the probe and a bound the supervisor accepts, and its pod's deadline holds that bound
  (a slow wall is never the candidate's timeout); the Docker executor names none (`--network none`: no window).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from wpbench_k8s.executor.docker import lockdown_args
from wpbench_k8s.kube.client import to_dict
from wpbench_k8s.kube.objects import (
    DEFAULT_EGRESS_WAIT_SECONDS,
    EGRESS_PROBE,
    TaskSource,
    attempt_deadline_seconds,
    build_grader_job,
)
from wpbench_k8s.kube.placement import Placement
from wpbench_k8s.manifest import GraderSpec
from wpbench_k8s.outcome import EGRESS_OPEN, EGRESS_OPEN_EXIT_CODE, GraderFacts, Infra, decide_outcome, settle
from wpbench_runtime.contract import Scores, Verdict

VERIFIER = Path(__file__).resolve().parents[2] / "runtime" / "php" / "verifier"
ENTRY = (VERIFIER / "wpbench-grade").read_text()
EGRESS = (VERIFIER / "supervisor" / "egress.php").read_text()
VERDICT = (VERIFIER / "supervisor" / "verdict.php").read_text()


def code(source: str) -> str:
    """PHP without its comments (block comments, and `//` comments after whitespace: not `tcp://`)."""
    return re.sub(r"(?m)(^|\s)//.*$", r"\1", re.sub(r"/\*.*?\*/", "", source, flags=re.S))


def php_const(source: str, name: str) -> str:
    return re.search(rf"const {name}\s*=\s*([^;]+);", source).group(1).strip()  # type: ignore[union-attr]


def grade_body() -> str:
    entry = code(ENTRY)
    return entry[entry.index("function grade(") : entry.index("\nmain( $argv );")]


def test_the_gate_comes_before_the_task_and_every_candidate_step() -> None:
    body = grade_body()
    gate = body.index("egress_gate()")
    for later in ("$read()", "validate_task(", "static_checks(", "lay_out_candidate(", "run_runner(", "'candidate'"):
        assert gate < body.index(later), later
    assert body.count("egress_gate()") == 1 and code(ENTRY).count("egress_gate(") == 1  # one call, in grade()
    # The only runner that may exist before it is the pre-boot's, started with no job (prepare_site).
    assert body.index("prepare_site(") < gate and "start_runner(" not in body[:gate]


def test_only_the_gate_exits_egress_open() -> None:
    sources = [code(p.read_text()) for p in VERIFIER.rglob("*.php")] + [code(ENTRY)]
    uses = sum(s.count("EGRESS_OPEN_EXIT") for s in sources)
    assert uses == 3, uses  # its definition, and the gate's set() and return in grade()
    block = grade_body()[grade_body().index("egress_gate()") :]
    assert block.index("EGRESS_OPEN_EXIT") < block.index("$read()")
    assert int(php_const(VERDICT, "EGRESS_OPEN_EXIT")) == EGRESS_OPEN_EXIT_CODE == 5


def test_exit_5_is_infrastructure_never_scored() -> None:
    said = "egress_open: 10.96.0.1:443 still accepted connections (12) after 30000 ms"
    verdict = Verdict(test_id=None, status="harness_error", reason=said,
                      scores=Scores(execution_pass=False, runtime=0.0, static=0.0, static_policy_pass=False))  # fmt: skip
    for stdout in (
        verdict.model_dump_json(),
        "",
        "{not json",
        verdict.model_dump_json().replace("harness_error", "passed"),
    ):
        decision = decide_outcome(
            GraderFacts(test_id="t-1", exit_code=EGRESS_OPEN_EXIT_CODE, stdout=stdout, detail="pod p")
        )
        assert isinstance(decision, Infra) and decision.fallback is None and settle(decision) is None, stdout
        assert decision.reason.startswith(f"{EGRESS_OPEN}: ") and decision.reason.endswith("(pod p)"), decision.reason
    seen = decide_outcome(GraderFacts(test_id="t-1", exit_code=5, stdout=verdict.model_dump_json()))
    assert isinstance(seen, Infra) and "still accepted connections (12)" in seen.reason


def _job(**kw: object) -> dict:
    spec = GraderSpec(image="wpbench-grader:dev", timeout_seconds=10, grace_seconds=5)
    return to_dict(build_grader_job(name="j", namespace="ns", spec=spec, task_timeout=70.0,
                                    task_source=TaskSource("cm", "task.json"), labels={"a": "b"}, **kw))  # type: ignore[arg-type]  # fmt: skip


def test_every_grader_job_names_the_probe_and_a_bound_the_supervisor_takes() -> None:
    wait_max = float(php_const(EGRESS, "EGRESS_WAIT_MAX"))
    for kw, wait in (({}, DEFAULT_EGRESS_WAIT_SECONDS), ({"egress_wait_seconds": 3}, 3)):
        placement = Placement.model_validate({"nodeSelector": {"x": "y"}, "runtimeClassName": "rc"})
        pod = _job(placement=placement, **kw)["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env == {"WPBENCH_EGRESS_PROBE": EGRESS_PROBE, "WPBENCH_EGRESS_WAIT_SECONDS": str(wait)}
        assert 0 < wait <= wait_max
        # The kubelet fills in the `kubernetes` Service's address (as it does for every pod, service links or not).
        assert EGRESS_PROBE == "[$(KUBERNETES_SERVICE_HOST)]:$(KUBERNETES_SERVICE_PORT)"
        spec = GraderSpec(timeout_seconds=10, grace_seconds=5)
        assert pod["activeDeadlineSeconds"] == attempt_deadline_seconds(spec, 70.0, wait) == wait + 70 + 5


def test_the_docker_executor_names_no_probe() -> None:
    args = lockdown_args(GraderSpec())
    assert args[args.index("--network") + 1] == "none"
    assert "WPBENCH_EGRESS" not in json.dumps(args)
    assert (
        "WPBENCH_EGRESS" not in (Path(__file__).resolve().parents[2] / "cli/wpbench_k8s/executor/docker.py").read_text()
    )


def test_the_supervisor_takes_only_ip_literals() -> None:
    """The address grammar the gate accepts (egress_address), kept to literals so the gate never resolves a name."""
    pattern = re.search(r"preg_match\( '/(.*?)/D'", EGRESS).group(1)  # type: ignore[union-attr]
    accepted = re.compile(pattern.replace("\\\\", "\\"))
    for good in ("[10.96.0.1]:443", "10.96.0.1:443", "[fd00::1]:443"):
        assert accepted.fullmatch(good), good
    for bad in ("[$(KUBERNETES_SERVICE_HOST)]:$(KUBERNETES_SERVICE_PORT)", "kubernetes.default:443", "[]:443",
                "10.96.0.1", "10.96.0.1:443\n", "[fd00::1]", "a.b:1"):  # fmt: skip
        assert not accepted.fullmatch(bad), bad
