"""Kubernetes backend: one locked-down Job per task, the verdict read back from the pod log.

This module owns the pieces the in-cluster controller reuses, so both paths build the same pod
and read verdicts the same way:

- `build_grader_job` — the Job (official client models) for one task;
- `job_outcome` — what a finished Job means: a verdict pod to read, or an infrastructure failure;
- `read_verdict` — the verdict from a pod log, cross-checked with the termination message.

`KubernetesExecutor` (registered as "kubernetes") uses them to grade one task at a time from
`wpbench-k8s run --executor kubernetes`: it stores the task in a ConfigMap, creates the Job, watches it
to the end, reads the verdict and deletes both. Where to run comes from the environment:
`KUBECONFIG`, `WPBENCH_K8S_CONTEXT`, `WPBENCH_K8S_NAMESPACE` (default `wpbench`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import re
import time
from dataclasses import dataclass
from typing import Any, Literal

from kubernetes import client as k8s
from pydantic import ValidationError

from wpbench_k8s import __version__
from wpbench_k8s.errors import ExecutorError, InfraError
from wpbench_k8s.executor.base import Executor, GraderSpec, register_executor
from wpbench_k8s.outcome import GraderFacts
from wpbench_runtime.contract import GradeTask, Verdict

# ---- names and labels -------------------------------------------------------------------------
GROUP = "wpbench-k8s.org"
LABEL_RUN = f"{GROUP}/run"
LABEL_TEST = f"{GROUP}/test"
LABEL_MODEL = f"{GROUP}/model"
LABEL_ITEM = f"{GROUP}/item"  # a hash of the item id: unique, short, always a valid label value
ANNOTATION_ITEM_ID = f"{GROUP}/item-id"
ANNOTATION_TEST_ID = f"{GROUP}/test-id"
ANNOTATION_MODEL = f"{GROUP}/model"
MANAGED_BY = "wpbench-k8s"
GRADER_CONTAINER = "grader"
GRADER_UID = 65532
TASK_DIR = "/etc/wpbench/task"
TASK_FILE = f"{TASK_DIR}/task.json"
WORDPRESS_DIR = "/run/wpbench"
# Exit codes of `wpbench-grade` that come with a verdict about the task itself (harness_error):
# the Job fails at once instead of retrying (see wpbench_runtime.contract).
VERDICT_FAILURE_EXIT_CODES = (2, 3)
DEFAULT_INFRA_RETRIES = 2
DEFAULT_TTL_SECONDS = 24 * 3600  # a backstop: the collector deletes each Job once its verdict is stored

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def short_hash(text: str, length: int = 10) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def label_value(text: str) -> str:
    """`text` as a valid label value (<= 63 chars); lossy values keep a hash suffix so they stay unique."""
    if len(text) <= 63 and _LABEL_VALUE.match(text):
        return text
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-_.")
    return f"{cleaned[:52].strip('-_.')}-{short_hash(text, 8)}".strip("-")


def dns_label(*parts: str, max_len: int = 63) -> str:
    """A DNS-1123 label from `parts` (lowercase, alphanumerics and '-'); long input keeps a hash suffix."""
    joined = "-".join(p for p in parts if p)
    cleaned = re.sub(r"[^a-z0-9-]+", "-", joined.lower()).strip("-")
    cleaned = re.sub(r"-{2,}", "-", cleaned)
    if len(cleaned) <= max_len and cleaned == joined:
        return cleaned
    suffix = short_hash(joined, 8)
    return f"{cleaned[: max_len - len(suffix) - 1].rstrip('-')}-{suffix}"


def job_name(run_name: str, item_id: str) -> str:
    """Deterministic Job name for one item of one run: the same item always gets the same Job."""
    prefix = dns_label(run_name, max_len=28)
    readable = re.sub(r"[^a-z0-9]+", "-", item_id.lower()).strip("-")[:20].strip("-")
    return dns_label(prefix, readable, short_hash(item_id, 10), max_len=63)


def grader_labels(run_name: str, *, test_id: str, model: str, item_id: str) -> dict[str, str]:
    """Labels on every grader Job and pod: app.kubernetes.io/* plus run, test, model, item."""
    return {
        "app.kubernetes.io/name": "wpbench-grader",
        "app.kubernetes.io/instance": label_value(run_name),
        "app.kubernetes.io/component": "grader",
        "app.kubernetes.io/part-of": "wpbench-k8s",
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "app.kubernetes.io/version": label_value(__version__),
        LABEL_RUN: label_value(run_name),
        LABEL_TEST: label_value(test_id),
        LABEL_MODEL: label_value(model),
        LABEL_ITEM: short_hash(item_id, 16),
    }


def pod_selector(run_name: str) -> dict[str, str]:
    """The labels every grader pod of one run carries (the NetworkPolicy and `kubectl logs -l` use them)."""
    return {"app.kubernetes.io/component": "grader", LABEL_RUN: label_value(run_name)}


def _quantity_cpu(cpus: float) -> str:
    return f"{cpus:g}" if float(cpus).is_integer() else f"{round(cpus * 1000)}m"


def attempt_deadline_seconds(spec: GraderSpec, task_timeout: float) -> int:
    """Pod activeDeadlineSeconds: the task's timeout plus the grace the grader spec allows."""
    return max(1, math.ceil(task_timeout + spec.grace_seconds))


@dataclass(frozen=True)
class TaskSource:
    """Where the pod finds its task: a key of a ConfigMap, mounted read-only as TASK_FILE."""

    config_map: str
    key: str


def build_grader_job(
    *,
    name: str,
    namespace: str,
    spec: GraderSpec,
    task_timeout: float,
    task_source: TaskSource,
    labels: dict[str, str],
    annotations: dict[str, str] | None = None,
    owner: k8s.V1OwnerReference | None = None,
    infra_retries: int = DEFAULT_INFRA_RETRIES,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    image_pull_policy: str = "IfNotPresent",
) -> k8s.V1Job:
    """The Job that grades one task: one locked-down pod, infra failures retried, verdict failures final.

    Args:
        name: Job name (see `job_name`); pods get generated names with the same labels.
        task_timeout: the task's timeout; the pod's activeDeadlineSeconds adds `spec.grace_seconds`.
        task_source: the ConfigMap key holding the GradeTask JSON.
        infra_retries: pods that may fail for infrastructure reasons before the Job gives up.
    Returns:
        A `V1Job`; serialise with `ApiClient().sanitize_for_serialization`.
    """
    lim = spec.limits
    resources = {"cpu": _quantity_cpu(lim.cpus), "memory": f"{lim.memory_mb}Mi"}
    drop_all = k8s.V1Capabilities(drop=["ALL"])
    seccomp = k8s.V1SeccompProfile(type="RuntimeDefault")
    container = k8s.V1Container(
        name=GRADER_CONTAINER,
        image=spec.image,
        image_pull_policy=image_pull_policy,
        args=[TASK_FILE],
        resources=k8s.V1ResourceRequirements(requests=dict(resources), limits=dict(resources)),
        security_context=k8s.V1SecurityContext(
            run_as_non_root=True,
            run_as_user=GRADER_UID,
            run_as_group=GRADER_UID,
            read_only_root_filesystem=True,
            allow_privilege_escalation=False,
            privileged=False,
            capabilities=drop_all,
            seccomp_profile=seccomp,
        ),
        termination_message_path="/dev/termination-log",
        termination_message_policy="File",
        volume_mounts=[
            k8s.V1VolumeMount(name="wordpress", mount_path=WORDPRESS_DIR),
            k8s.V1VolumeMount(name="tmp", mount_path="/tmp"),
            k8s.V1VolumeMount(name="task", mount_path=TASK_DIR, read_only=True),
        ],
    )
    pod_spec = k8s.V1PodSpec(
        restart_policy="Never",
        automount_service_account_token=False,
        enable_service_links=False,
        active_deadline_seconds=attempt_deadline_seconds(spec, task_timeout),
        termination_grace_period_seconds=5,
        security_context=k8s.V1PodSecurityContext(
            run_as_non_root=True,
            run_as_user=GRADER_UID,
            run_as_group=GRADER_UID,
            fs_group=GRADER_UID,
            seccomp_profile=seccomp,
        ),
        containers=[container],
        volumes=[
            k8s.V1Volume(
                name="wordpress",
                empty_dir=k8s.V1EmptyDirVolumeSource(medium="Memory", size_limit=f"{lim.wordpress_tmpfs_mb}Mi"),
            ),
            k8s.V1Volume(
                name="tmp", empty_dir=k8s.V1EmptyDirVolumeSource(medium="Memory", size_limit=f"{lim.tmp_tmpfs_mb}Mi")
            ),
            k8s.V1Volume(
                name="task",
                config_map=k8s.V1ConfigMapVolumeSource(
                    name=task_source.config_map,
                    items=[k8s.V1KeyToPath(key=task_source.key, path="task.json")],
                    default_mode=0o444,
                ),
            ),
        ],
    )
    failure_policy = k8s.V1PodFailurePolicy(
        rules=[
            # Eviction, preemption, node loss: never the candidate's doing, whatever the exit code.
            # Counted (not ignored) so the Job bounds these retries by backoffLimit and its
            # status.failed reports them; the record says infra_error if they run out.
            k8s.V1PodFailurePolicyRule(
                action="Count",
                on_pod_conditions=[
                    k8s.V1PodFailurePolicyOnPodConditionsPattern(type="DisruptionTarget", status="True")
                ],
            ),
            # The grader answered with a verdict about the task itself (harness_error): final.
            k8s.V1PodFailurePolicyRule(
                action="FailJob",
                on_exit_codes=k8s.V1PodFailurePolicyOnExitCodesRequirement(
                    container_name=GRADER_CONTAINER, operator="In", values=list(VERDICT_FAILURE_EXIT_CODES)
                ),
            ),
            # Anything else (crash without a verdict, OOM-killed supervisor, pod deadline): the default,
            # Count, retried up to backoffLimit = infra_retries.
        ]
    )
    meta = k8s.V1ObjectMeta(
        name=name,
        namespace=namespace,
        labels=dict(labels),
        annotations=dict(annotations or {}),
        owner_references=[owner] if owner else None,
    )
    return k8s.V1Job(
        api_version="batch/v1",
        kind="Job",
        metadata=meta,
        spec=k8s.V1JobSpec(
            backoff_limit=infra_retries,
            pod_failure_policy=failure_policy,
            pod_replacement_policy="Failed",
            ttl_seconds_after_finished=ttl_seconds,
            template=k8s.V1PodTemplateSpec(
                metadata=k8s.V1ObjectMeta(labels=dict(labels), annotations=dict(annotations or {})), spec=pod_spec
            ),
        ),
    )


def to_dict(obj: Any) -> dict[str, Any]:
    """A client model as the JSON the API server receives (camelCase keys, no None values)."""
    serializer: Any = k8s.ApiClient()
    result: dict[str, Any] = serializer.sanitize_for_serialization(obj)
    return result


# ---- verdicts ---------------------------------------------------------------------------------
class VerdictUnreadable(InfraError):
    """The pod finished but gave no trustworthy verdict (no JSON, invalid, or channels disagree)."""


def _last_json_object(log: str) -> dict[str, Any] | None:
    text = log.strip()
    if text.startswith("{"):
        try:
            whole = json.loads(text)
            if isinstance(whole, dict):
                return whole
        except json.JSONDecodeError:
            pass
    # stdout and stderr are interleaved in a pod log: the verdict is the last JSON object line.
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                doc = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(doc, dict) and "status" in doc:
                return doc
    return None


def _compact_fields(doc: dict[str, Any]) -> dict[str, Any]:
    """The fields both channels carry: test id, status, and the four scores."""
    raw = doc.get("scores")
    scores: dict[str, Any] = raw if isinstance(raw, dict) else {}
    out: dict[str, Any] = {"test_id": doc.get("test_id"), "status": doc.get("status")}
    for key in ("execution_pass", "runtime", "static", "static_policy_pass"):
        if key in scores:
            out[key] = scores[key]
        elif key in doc:
            out[key] = doc[key]
    return {k: v for k, v in out.items() if v is not None}


def read_verdict(log: str, termination_message: str | None = None, *, test_id: str | None = None) -> Verdict:
    """The verdict a grader pod wrote on stdout, validated against the contract.

    The termination message (a compact verdict the grader writes to /dev/termination-log) is a
    cross-check: where both carry a field, they must agree.

    Raises:
        VerdictUnreadable: no verdict in the log, an invalid one, another test's, or the channels disagree.
    """
    doc = _last_json_object(log)
    if doc is None:
        raise VerdictUnreadable(f"no verdict JSON in the pod log ({len(log)} bytes)")
    try:
        verdict = Verdict.model_validate(doc)
    except ValidationError as exc:
        raise VerdictUnreadable(f"pod log verdict does not match the contract: {exc.errors()[0]['msg']}") from exc
    if test_id is not None and verdict.test_id not in (None, test_id):
        raise VerdictUnreadable(f"verdict is for test {verdict.test_id!r}, expected {test_id!r}")
    if termination_message and termination_message.strip():
        try:
            compact = json.loads(termination_message)
        except json.JSONDecodeError:
            compact = None
        if isinstance(compact, dict):
            mine, theirs = _compact_fields(verdict.model_dump(mode="json")), _compact_fields(compact)
            clash = {k for k in set(mine) & set(theirs) if mine[k] != theirs[k]}
            if clash:
                raise VerdictUnreadable(f"pod log and termination message disagree on {', '.join(sorted(clash))}")
    return verdict


# ---- what a finished Job means ----------------------------------------------------------------
@dataclass
class JobOutcome:
    """How a Job ended.

    `state` is "running" (not finished), "verdict" (read `pod`'s log), or "infra" (no verdict: the
    infrastructure failed every attempt). `retries` counts attempts that failed without a verdict
    (the Job's status.failed, which counts evictions too: see the podFailurePolicy).
    """

    state: Literal["running", "verdict", "infra"]
    pod: dict[str, Any] | None = None
    retries: int = 0
    reason: str = ""
    timeout: bool = False
    termination_message: str | None = None


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return dict(cond)
    return None


def grader_state(pod: dict[str, Any]) -> dict[str, Any]:
    """The grader container's `state.terminated` (empty when it has not terminated)."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == GRADER_CONTAINER:
            return dict((cs.get("state") or {}).get("terminated") or {})
    return {}


def _pod_failure_reason(pod: dict[str, Any]) -> str:
    status = pod.get("status") or {}
    name = pod["metadata"]["name"]
    disruption = _condition(pod, "DisruptionTarget")
    if disruption:
        return f"pod {name} disrupted ({disruption.get('reason', 'DisruptionTarget')})"
    if status.get("reason"):
        return f"pod {name} {status['reason']}: {status.get('message', '')}".rstrip(": ")
    term = grader_state(pod)
    if term:
        return f"pod {name} grader exited {term.get('exitCode')} ({term.get('reason', '')})"
    return f"pod {name} failed"


def job_outcome(job: dict[str, Any], pods: list[dict[str, Any]]) -> JobOutcome:
    """Classify a Job (and its pods) as the API server returns them.

    A Job that completed has a succeeded pod: its log holds the verdict. A Job failed by the
    podFailurePolicy (grader exit 2/3) has a pod whose log holds a harness_error verdict. Any other
    failure (backoff limit after evictions, crashes or pod deadlines) is infrastructure: no verdict.
    """
    pods = sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")
    failed_pods = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
    counted = int((job.get("status") or {}).get("failed") or 0)
    if _condition(job, "Complete"):
        done = [p for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"]
        if not done:
            return JobOutcome("infra", None, counted, "job complete but its pod is gone")
        term = grader_state(done[-1])
        return JobOutcome("verdict", done[-1], counted, termination_message=term.get("message"))
    cond = _condition(job, "Failed")
    if cond is None:
        return JobOutcome("running", retries=counted)
    if cond.get("reason") == "PodFailurePolicy":
        for pod in reversed(failed_pods):
            term = grader_state(pod)
            if term.get("exitCode") in VERDICT_FAILURE_EXIT_CODES and not _condition(pod, "DisruptionTarget"):
                return JobOutcome("verdict", pod, max(0, counted - 1), termination_message=term.get("message"))
    why = f"job {cond.get('reason', 'Failed')}: {cond.get('message', '')}".rstrip(": ")
    if failed_pods:
        why += f"; last: {_pod_failure_reason(failed_pods[-1])}"
    timeout = cond.get("reason") == "DeadlineExceeded" or any(
        (p.get("status") or {}).get("reason") == "DeadlineExceeded" for p in failed_pods[-1:]
    )
    return JobOutcome("infra", None, max(0, counted - 1), why, timeout=timeout)


# ---- clients ----------------------------------------------------------------------------------
USER_AGENT = f"wpbench-k8s/{__version__}"


def api_client(
    kubeconfig: str | None = None, context: str | None = None, *, user_agent: str = USER_AGENT
) -> k8s.ApiClient:
    """An ApiClient from a kubeconfig (or, inside a pod with none given, the service account).

    Raises:
        ExecutorError: no usable configuration.
    """
    from kubernetes import config

    kconfig: Any = config  # the config loaders are untyped
    try:
        if (
            kubeconfig is None
            and context is None
            and os.environ.get("KUBERNETES_SERVICE_HOST")
            and not os.environ.get("KUBECONFIG")
        ):
            cfg = k8s.Configuration()
            kconfig.load_incluster_config(client_configuration=cfg)
            api = k8s.ApiClient(cfg)
        else:
            api = kconfig.new_client_from_config(config_file=kubeconfig, context=context, persist_config=False)
    except (kconfig.ConfigException, OSError, TypeError) as exc:
        raise ExecutorError(
            f"no usable Kubernetes configuration ({kubeconfig or 'default kubeconfig'}): {exc}"
        ) from exc
    api.user_agent = user_agent
    return api


class Kube:
    """The API groups this project uses. Calls send and receive raw JSON (`_preload_content=False`,
    `read_json`), so the API objects are typed loosely."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self.api = api
        self.core: Any = k8s.CoreV1Api(api)
        self.batch: Any = k8s.BatchV1Api(api)
        self.net: Any = k8s.NetworkingV1Api(api)
        self.custom: Any = k8s.CustomObjectsApi(api)


def read_json(response: Any) -> dict[str, Any]:
    """The body of a `_preload_content=False` response as a dict (skips model deserialisation)."""
    data: dict[str, Any] = json.loads(response.data)
    return data


def pod_log(core: Any, namespace: str, pod: str) -> str:
    resp = core.read_namespaced_pod_log(pod, namespace, container=GRADER_CONTAINER, _preload_content=False)
    data: bytes = resp.data
    return data.decode("utf-8", errors="replace")


# ---- the executor -----------------------------------------------------------------------------
@register_executor("kubernetes")
class KubernetesExecutor(Executor):
    """Grades each task in its own Job in a namespace of the cluster the kubeconfig points at."""

    poll_seconds = 0.5

    def __init__(self, spec: GraderSpec, run_id: str) -> None:
        super().__init__(spec, run_id)
        self.namespace = os.environ.get("WPBENCH_K8S_NAMESPACE", "wpbench")
        self.kubeconfig = os.environ.get("KUBECONFIG") or None
        self.context = os.environ.get("WPBENCH_K8S_CONTEXT") or None
        self.infra_retries = DEFAULT_INFRA_RETRIES
        self._api: k8s.ApiClient | None = None
        self._counter = itertools.count(1)
        self.run_name = dns_label("wpbench-local", run_id, max_len=40)

    @property
    def api(self) -> k8s.ApiClient:
        if self._api is None:
            self._api = api_client(self.kubeconfig, self.context)
        return self._api

    def preflight(self) -> GraderSpec:
        try:
            Kube(self.api).core.read_namespace(self.namespace, _preload_content=False)
        except k8s.ApiException as exc:
            raise ExecutorError(f"namespace {self.namespace} not reachable ({exc.status} {exc.reason})") from exc
        except Exception as exc:  # urllib3 connection errors
            raise ExecutorError(f"Kubernetes API not reachable: {exc}") from exc
        return self.spec

    def run_grader(self, task: GradeTask) -> GraderFacts:
        kube = Kube(self.api)
        core, batch = kube.core, kube.batch
        item_id = f"{task.test_id}-{next(self._counter)}"
        name = job_name(self.run_name, item_id)
        labels = grader_labels(self.run_name, test_id=task.test_id, model="local", item_id=item_id)
        cm = k8s.V1ConfigMap(
            api_version="v1",
            kind="ConfigMap",
            metadata=k8s.V1ObjectMeta(name=name, namespace=self.namespace, labels=labels),
            data={"task.json": task.model_dump_json()},
        )
        job = build_grader_job(
            name=name,
            namespace=self.namespace,
            spec=self.spec,
            task_timeout=task.timeout_seconds,
            task_source=TaskSource(name, "task.json"),
            labels=labels,
            annotations={ANNOTATION_TEST_ID: task.test_id},
            infra_retries=self.infra_retries,
        )
        try:
            core.create_namespaced_config_map(self.namespace, to_dict(cm), _preload_content=False)
            batch.create_namespaced_job(self.namespace, to_dict(job), _preload_content=False)
            outcome = self._wait(batch, core, name, labels[LABEL_ITEM], task)
            if outcome.state != "verdict" or outcome.pod is None:
                reason = outcome.reason or "job did not finish"
                return GraderFacts(test_id=task.test_id, started=False, infra_reason=reason)
            log = pod_log(core, self.namespace, outcome.pod["metadata"]["name"])
            return GraderFacts(
                test_id=task.test_id,
                exit_code=grader_state(outcome.pod).get("exitCode"),
                stdout=log,
                termination_message=outcome.termination_message,
            )
        except k8s.ApiException as exc:
            return GraderFacts(
                test_id=task.test_id, started=False, infra_reason=f"Kubernetes API error {exc.status} {exc.reason}"
            )
        finally:
            self._delete(batch, core, name)

    def _wait(self, batch: Any, core: Any, name: str, item: str, task: GradeTask) -> JobOutcome:
        per_attempt = attempt_deadline_seconds(self.spec, task.timeout_seconds)
        deadline = time.monotonic() + per_attempt * (self.infra_retries + 1) + 120
        while time.monotonic() < deadline:
            job = read_json(batch.read_namespaced_job(name, self.namespace, _preload_content=False))
            pods = read_json(
                core.list_namespaced_pod(self.namespace, label_selector=f"{LABEL_ITEM}={item}", _preload_content=False)
            )["items"]
            outcome = job_outcome(job, pods)
            if outcome.state != "running":
                return outcome
            time.sleep(self.poll_seconds)
        return JobOutcome("infra", None, self.infra_retries, "job did not finish in time", timeout=True)

    def _delete(self, batch: Any, core: Any, name: str) -> None:
        deletes: list[tuple[Any, dict[str, Any]]] = [
            (batch.delete_namespaced_job, {"propagation_policy": "Background"}),
            (core.delete_namespaced_config_map, {}),
        ]
        for delete, extra in deletes:
            try:
                delete(name, self.namespace, _preload_content=False, **extra)
            except k8s.ApiException as exc:
                if exc.status != 404:
                    raise

    def cleanup(self) -> int:
        kube = Kube(self.api)
        core, batch = kube.core, kube.batch
        selector = f"{LABEL_RUN}={label_value(self.run_name)}"
        removed = 0
        for lister, deleter in (
            (batch.list_namespaced_job, batch.delete_namespaced_job),
            (core.list_namespaced_config_map, core.delete_namespaced_config_map),
        ):
            for obj in read_json(lister(self.namespace, label_selector=selector, _preload_content=False))["items"]:
                try:
                    deleter(
                        obj["metadata"]["name"], self.namespace, propagation_policy="Background", _preload_content=False
                    )
                    removed += 1
                except k8s.ApiException as exc:
                    if exc.status != 404:
                        raise
        return removed
