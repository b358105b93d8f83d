"""Every object a run brings into the cluster, built with the official client models.

`submit` creates the run and its payload ConfigMaps; the controller (or the local Kubernetes
executor) creates the NetworkPolicy, one Job per grader attempt and the result ConfigMaps.
`dry_run_objects` lists them for `submit --dry-run`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s

from wpbench_k8s.kube import crd
from wpbench_k8s.kube.client import to_dict
from wpbench_k8s.kube.names import (
    ANNOTATION_ATTEMPT_REASON,
    ANNOTATION_ITEM_ATTEMPTS,
    ANNOTATION_ITEM_ID,
    ANNOTATION_ITEM_IDS,
    ANNOTATION_MODEL,
    ANNOTATION_SUBMITTED_BY,
    ANNOTATION_TEST_ID,
    ANNOTATION_TEST_IDS,
    COMPONENT_GENERATED,
    COMPONENT_NETWORK_POLICY,
    COMPONENT_PAYLOAD,
    COMPONENT_RUN,
    GRADER_CONTAINER,
    POD_SECURITY_LABELS,
    grader_labels,
    job_name,
    pod_selector,
    run_labels,
)
from wpbench_k8s.kube.payload import SUITE_KEY, item_key, payload_name, split_manifest, task_data_key
from wpbench_k8s.kube.placement import NO_EVICTION_ANNOTATIONS, PRIORITY_LABEL, QUEUE_LABEL, Placement
from wpbench_k8s.manifest import GraderSpec, ManifestItem, RunManifest
from wpbench_k8s.outcome import INFRA_RETRIES

GRADER_UID = 65532
TASK_DIR = "/etc/wpbench/task"
TASK_FILE = f"{TASK_DIR}/task.json"
WORDPRESS_DIR = "/run/wpbench"
DEFAULT_INFRA_RETRIES = INFRA_RETRIES  # attempts = 1 + retries, the same budget as a local run
# How long a grader pod may wait to be scheduled and started (image pull, CPU queue) before the
# Job gives up and the attempt counts as infrastructure (reported with the pod's own reason).
DEFAULT_START_SECONDS = 600
# The egress gate (runtime/php/verifier/supervisor/egress.php): a grader pod's deny-all policy is programmed
# by the enforcer after the pod has started, so the supervisor reads no task until a connect to the API
# server's `kubernetes` Service (its address filled in by the kubelet) is refused; still open after this
# long, the attempt is infrastructure (`egress_open`). The pod's deadline adds it, so a slow wall is never
# the candidate's timeout.
EGRESS_PROBE = "[$(KUBERNETES_SERVICE_HOST)]:$(KUBERNETES_SERVICE_PORT)"
DEFAULT_EGRESS_WAIT_SECONDS = 30
DEFAULT_TTL_SECONDS = 24 * 3600  # a backstop: the collector deletes each Job once its verdict is stored
# A pod grading a sequence: the supervisor's reset and fresh site between two tasks (well under a second measured),
# with room, added to the pod's deadline per task.
SEQUENCE_RESET_SECONDS = 5
# dry run: objects that only the API server can complete (a placeholder uid) are not to be applied
DRY_RUN_KIND = "WPBenchDryRun"


@dataclass(frozen=True)
class RunSettings:
    """What the cluster side adds to a manifest: where, how many at once, how many infra retries."""

    name: str
    namespace: str
    max_in_flight: int = 2
    infra_retries: int = DEFAULT_INFRA_RETRIES
    image_pull_policy: str = "IfNotPresent"
    start_seconds: int = DEFAULT_START_SECONDS
    cache: bool = True  # reuse verdicts earlier runs of the namespace stored (`submit --no-cache`: False)
    queue: str = ""  # a Kueue LocalQueue: Jobs are created suspended and Kueue admits them
    workload_priority: str = ""  # a Kueue WorkloadPriorityClass (orders admission, decides preemption)
    placement: Placement = field(default_factory=Placement)  # the run's own; the controller adds the release's
    # fast mode only (execution_isolation fork_per_test): one grader pod grades this many items in a sequence
    candidates_per_pod: int = 1


@dataclass(frozen=True)
class TaskSource:
    """Where the pod finds its task: a key of a ConfigMap, mounted read-only as TASK_FILE."""

    config_map: str
    key: str


def owner_reference(run_name: str, uid: str) -> k8s.V1OwnerReference:
    """Objects owned by the run go when the run is deleted (garbage collection)."""
    return k8s.V1OwnerReference(
        api_version=crd.API_VERSION, kind=crd.KIND, name=run_name, uid=uid, controller=True, block_owner_deletion=True
    )


_IMAGE_ID = re.compile(r"sha256:[0-9a-f]{64}")


def pinned_image(spec: GraderSpec) -> str:
    """The image reference grader pods run: the resolved id when there is one, else the manifest's tag.

    The id is what a kubelet reported for the tag (`status.containerStatuses[].imageID`, learnt by the
    controller's image probe): `repo@sha256:...` for an image pulled from a registry, which every node
    pulls as the same bytes, or `sha256:<image id>` for one imported into the node's runtime without a
    registry, which a node resolves only when it holds exactly that image (elsewhere the pod never starts:
    an infrastructure failure, never a grade on another image). Anything else is not pinned.
    """
    ref = spec.image_id.removeprefix("docker-pullable://")
    if _IMAGE_ID.fullmatch(ref) or ("@sha256:" in ref and _IMAGE_ID.fullmatch(ref.rsplit("@", 1)[1])):
        return ref
    return spec.image


def _quantity_cpu(cpus: float) -> str:
    return f"{cpus:g}" if float(cpus).is_integer() else f"{round(cpus * 1000)}m"


def attempt_deadline_seconds(
    spec: GraderSpec, task_timeout: float, egress_wait_seconds: int = DEFAULT_EGRESS_WAIT_SECONDS
) -> int:
    """Pod activeDeadlineSeconds (counted from the pod's start): the egress gate's bound, the task's budget
    (setup and candidate timeouts) and the spec's grace."""
    return max(1, math.ceil(egress_wait_seconds + task_timeout + spec.grace_seconds))


def build_grader_job(
    *,
    name: str,
    namespace: str,
    spec: GraderSpec,
    task_timeout: float,
    task_source: TaskSource | Sequence[TaskSource],
    labels: dict[str, str],
    annotations: dict[str, str] | None = None,
    owner: k8s.V1OwnerReference | None = None,
    start_seconds: int = DEFAULT_START_SECONDS,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    image_pull_policy: str = "IfNotPresent",
    placement: Placement | None = None,
    queue: str = "",
    workload_priority: str = "",
    egress_wait_seconds: int = DEFAULT_EGRESS_WAIT_SECONDS,
) -> k8s.V1Job:
    """The Job for one grader attempt: one locked-down pod, never restarted by Kubernetes.

    Retries are not the Job's: `backoffLimit: 0`, and whoever created the Job (the pipeline's retry
    layer, or the controller) decides with `outcome.decide_outcome` whether to start another attempt.
    The pod's own deadline bounds the test; the Job's deadline adds `start_seconds` for scheduling
    and start, so a pod that can never start ends too (its reason is read from the pod or events).
    With a `queue` the Job is created suspended, labelled for Kueue: the deadline counts from admission
    (Kubernetes starts a Job's clock when it is unsuspended), so waiting in the queue costs no attempt.
    `placement` adds pod-spec fields (nodes, pull secrets, runtime class); none of them can loosen the
    lock-down (security contexts, volumes, service account token and links are set here, not there).
    The grader reads its task only once the pod's network is seen closed (`EGRESS_PROBE`, at most
    `egress_wait_seconds`; the environment is set here, so no placement can drop the gate).
    A sequence of task sources (fast mode) makes one pod grade them in order (`wpbench-grade --sequence`, each in
    a fresh runner on a fresh site); `task_timeout` is then their budgets' sum, and the pod's deadline adds
    SEQUENCE_RESET_SECONDS per task.

    Returns:
        A `V1Job`; serialise with `to_dict`.
    """
    lim = spec.limits
    resources = {"cpu": _quantity_cpu(lim.cpus), "memory": f"{lim.memory_mb}Mi"}
    if isinstance(task_source, TaskSource):
        args = [TASK_FILE]
        one = k8s.V1KeyToPath(key=task_source.key, path="task.json")
        mapped = k8s.V1ConfigMapVolumeSource(name=task_source.config_map, items=[one], default_mode=0o444)
        volume = k8s.V1Volume(name="task", config_map=mapped)
    else:
        sources = list(task_source)
        paths = [f"{n}.json" for n in range(len(sources))]
        by_map: dict[str, list[k8s.V1KeyToPath]] = {}
        for source, path in zip(sources, paths, strict=True):
            by_map.setdefault(source.config_map, []).append(k8s.V1KeyToPath(key=source.key, path=path))
        args = ["--sequence", *(f"{TASK_DIR}/{path}" for path in paths)]
        projected = k8s.V1ProjectedVolumeSource(
            sources=[k8s.V1VolumeProjection(config_map=k8s.V1ConfigMapProjection(name=m, items=items))
                     for m, items in by_map.items()],
            default_mode=0o444,
        )  # fmt: skip
        volume = k8s.V1Volume(name="task", projected=projected)
        task_timeout += SEQUENCE_RESET_SECONDS * len(sources)
    seccomp = k8s.V1SeccompProfile(type="RuntimeDefault")
    container = k8s.V1Container(
        name=GRADER_CONTAINER,
        image=pinned_image(spec),
        image_pull_policy=image_pull_policy,
        args=args,
        env=[
            k8s.V1EnvVar(name="WPBENCH_EGRESS_PROBE", value=EGRESS_PROBE),
            k8s.V1EnvVar(name="WPBENCH_EGRESS_WAIT_SECONDS", value=str(egress_wait_seconds)),
        ],
        resources=k8s.V1ResourceRequirements(requests=dict(resources), limits=dict(resources)),
        security_context=k8s.V1SecurityContext(
            run_as_non_root=True,
            run_as_user=GRADER_UID,
            run_as_group=GRADER_UID,
            read_only_root_filesystem=True,
            allow_privilege_escalation=False,
            privileged=False,
            capabilities=k8s.V1Capabilities(drop=["ALL"]),
            seccomp_profile=seccomp,
        ),
        termination_message_path="/dev/termination-log",
        termination_message_policy="File",
        volume_mounts=[
            k8s.V1VolumeMount(name="wordpress", mount_path=WORDPRESS_DIR),
            k8s.V1VolumeMount(name="tmp", mount_path="/tmp"),
            k8s.V1VolumeMount(name="task", mount_path=TASK_DIR, read_only=True),
            # Over the pod's shared /dev/shm, read-only: as under Docker's `--ipc none`, no directory there
            # for SQLite's temp_store_directory (the runner's PHP walls do not cover SQLite's temp files).
            k8s.V1VolumeMount(name="no-shm", mount_path="/dev/shm", read_only=True),
        ],
    )
    pod_deadline = attempt_deadline_seconds(spec, task_timeout, egress_wait_seconds)
    pod_spec = k8s.V1PodSpec(
        **(placement or Placement()).pod_fields(),
        restart_policy="Never",
        automount_service_account_token=False,
        enable_service_links=False,
        active_deadline_seconds=pod_deadline,
        termination_grace_period_seconds=5,
        # Name lookups fail at once, as under Docker's `--network none`: the only nameserver is the
        # pod's own loopback, where nothing listens (the deny-all policy would make them hang instead).
        dns_policy="None",
        dns_config=k8s.V1PodDNSConfig(
            nameservers=["127.0.0.1"],
            searches=[],
            options=[k8s.V1PodDNSConfigOption(name="attempts", value="1")],
        ),
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
            k8s.V1Volume(name="no-shm", empty_dir=k8s.V1EmptyDirVolumeSource(medium="Memory", size_limit="1Mi")),
            volume,
        ],
    )
    job_labels = dict(labels)
    if queue:
        job_labels[QUEUE_LABEL] = queue
        if workload_priority:
            job_labels[PRIORITY_LABEL] = workload_priority
    meta = k8s.V1ObjectMeta(
        name=name,
        namespace=namespace,
        labels=job_labels,
        annotations=dict(annotations or {}),
        owner_references=[owner] if owner else None,
    )
    pod_annotations = {**(annotations or {}), **NO_EVICTION_ANNOTATIONS}
    return k8s.V1Job(
        api_version="batch/v1",
        kind="Job",
        metadata=meta,
        spec=k8s.V1JobSpec(
            backoff_limit=0,
            active_deadline_seconds=pod_deadline + start_seconds,
            ttl_seconds_after_finished=ttl_seconds,
            suspend=True if queue else None,
            template=k8s.V1PodTemplateSpec(
                metadata=k8s.V1ObjectMeta(labels=dict(labels), annotations=pod_annotations), spec=pod_spec
            ),
        ),
    )


def run_object(
    manifest: RunManifest,
    settings: RunSettings,
    payload_maps: list[str],
    *,
    submitted_by: str = "",
    suite_digest: str = "",
) -> dict[str, Any]:
    """The WPBenchRun custom resource `submit` creates.

    `submitted_by` is the user the API server knows the submitter as (the runs admission policy checks it and
    lets only that user change or delete the run); `suite_digest` the suite digest the run declares.
    """
    spec: dict[str, Any] = {
        "runId": manifest.run_id,
        "manifestDigest": manifest.digest(),
        "mode": manifest.mode,
        "suite": manifest.suite,
        "items": len(manifest.items),
        "payload": {"configMaps": payload_maps},
        "maxInFlight": settings.max_in_flight,
        "infraRetries": settings.infra_retries,
        "graderImage": manifest.grader.image,
        "cache": settings.cache,
    }
    if settings.candidates_per_pod > 1:
        spec["candidatesPerPod"] = settings.candidates_per_pod
    if settings.queue:
        spec["queue"] = settings.queue
    if settings.workload_priority:
        spec["workloadPriorityClass"] = settings.workload_priority
    if settings.placement.spec():
        spec["placement"] = settings.placement.spec()
    if suite_digest:
        spec["suiteDigest"] = suite_digest
    metadata: dict[str, Any] = {
        "name": settings.name,
        "namespace": settings.namespace,
        "labels": run_labels(settings.name, COMPONENT_RUN),
    }
    if submitted_by:
        metadata["annotations"] = {ANNOTATION_SUBMITTED_BY: submitted_by}
    return {
        "apiVersion": crd.API_VERSION,
        "kind": crd.KIND,
        "metadata": metadata,
        "spec": spec,
    }


def config_map(
    name: str,
    namespace: str,
    labels: dict[str, str],
    data: dict[str, str],
    owner: k8s.V1OwnerReference | None,
    *,
    immutable: bool | None = None,
) -> k8s.V1ConfigMap:
    return k8s.V1ConfigMap(
        immutable=immutable,
        api_version="v1",
        kind="ConfigMap",
        metadata=k8s.V1ObjectMeta(
            name=name, namespace=namespace, labels=labels, owner_references=[owner] if owner else None
        ),
        data=data,
    )


def payload_config_maps(
    manifest: RunManifest, settings: RunSettings, owner: k8s.V1OwnerReference | None, suite_table: str = ""
) -> list[k8s.V1ConfigMap]:
    """The manifest in ConfigMaps under the object size limit (see `payload.split_manifest`), immutable: once
    created no one can change what they hold (the controller refuses a payload that is not). `suite_table`
    (`verified.SuiteTable` JSON) goes into chunk 0 beside the manifest header."""
    labels = run_labels(settings.name, COMPONENT_PAYLOAD)
    chunks = split_manifest(manifest, settings.name)
    if suite_table:
        chunks[0][SUITE_KEY] = suite_table
    return [
        config_map(payload_name(settings.name, i), settings.namespace, labels, data, owner, immutable=True)
        for i, data in enumerate(chunks)
    ]


def network_policy(settings: RunSettings, owner: k8s.V1OwnerReference | None) -> k8s.V1NetworkPolicy:
    """Deny all ingress and egress for every grader pod of the run: graders need no network."""
    return k8s.V1NetworkPolicy(
        api_version="networking.k8s.io/v1",
        kind="NetworkPolicy",
        metadata=k8s.V1ObjectMeta(
            name=f"{settings.name}-deny-all",
            namespace=settings.namespace,
            labels=run_labels(settings.name, COMPONENT_NETWORK_POLICY),
            owner_references=[owner] if owner else None,
        ),
        spec=k8s.V1NetworkPolicySpec(
            pod_selector=k8s.V1LabelSelector(match_labels=pod_selector(settings.name)),
            policy_types=["Ingress", "Egress"],
        ),
    )


def item_job(
    manifest: RunManifest,
    item: ManifestItem,
    settings: RunSettings,
    task_source: TaskSource,
    owner: k8s.V1OwnerReference | None,
    *,
    attempt: int = 1,
    previous_reason: str = "",
) -> k8s.V1Job:
    """The grader Job for one attempt at one item, with the run's labels and owner."""
    return unit_job(manifest, item.item_id, [(item, task_source, attempt)], settings, owner, attempt=attempt,
                    previous_reason=previous_reason)  # fmt: skip


def unit_job(
    manifest: RunManifest,
    unit: str,
    items: Sequence[tuple[ManifestItem, TaskSource, int]],
    settings: RunSettings,
    owner: k8s.V1OwnerReference | None,
    *,
    attempt: int = 1,
    previous_reason: str = "",
) -> k8s.V1Job:
    """The grader Job for one attempt at a unit: the items one pod grades, with the run's labels and owner.

    `unit` is the item whose label every attempt of the unit carries (its first item when it was made); `items`
    the (item, task source, the item's attempt number) it grades now, in order; `attempt` the unit's attempt.
    In fast mode (the manifest's fork_per_test) the pod grades them in one sequence, and the Job says which
    items it holds and each one's attempt (ANNOTATION_ITEM_IDS, ANNOTATION_ITEM_ATTEMPTS); otherwise a unit is
    exactly one item, graded alone.
    """
    first = items[0][0]
    sequence = manifest.grader.execution_isolation == "fork_per_test"
    assert sequence or len(items) == 1, "only fast mode grades several items in one pod"
    for item, _, _ in items:
        assert item.task is not None, f"{item.item_id}: knowledge items need no grader"
    annotations = {ANNOTATION_ITEM_ID: unit, ANNOTATION_TEST_ID: first.test_id, ANNOTATION_MODEL: first.model}
    if sequence:
        annotations[ANNOTATION_ITEM_IDS] = json.dumps([item.item_id for item, _, _ in items])
        annotations[ANNOTATION_ITEM_ATTEMPTS] = json.dumps([n for _, _, n in items])
        annotations[ANNOTATION_TEST_IDS] = json.dumps([item.test_id for item, _, _ in items])
    if previous_reason:
        annotations[ANNOTATION_ATTEMPT_REASON] = previous_reason[:1000]
    sources = [source for _, source, _ in items]
    return build_grader_job(
        name=job_name(settings.name, unit, attempt),
        namespace=settings.namespace,
        spec=manifest.grader,
        task_timeout=sum(item.task.budget_seconds for item, _, _ in items if item.task is not None),
        task_source=sources if sequence else sources[0],
        labels=grader_labels(settings.name, test_id=first.test_id, model=first.model, item_id=unit, attempt=attempt),
        annotations=annotations,
        owner=owner,
        start_seconds=settings.start_seconds,
        image_pull_policy=settings.image_pull_policy,
        placement=settings.placement,
        queue=settings.queue,
        workload_priority=settings.workload_priority,
    )


def namespace_object(namespace: str) -> k8s.V1Namespace:
    """The run namespace with Pod Security `restricted` enforced (the chart creates it this way)."""
    return k8s.V1Namespace(
        api_version="v1",
        kind="Namespace",
        metadata=k8s.V1ObjectMeta(
            name=namespace, labels={**POD_SECURITY_LABELS, "app.kubernetes.io/part-of": "wpbench-k8s"}
        ),
    )


def generated_name(run_name: str, index: int) -> str:
    """Where the controller stores generated candidates (see `results.Shards`)."""
    return f"{run_name}-{COMPONENT_GENERATED}-{index}"


PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"


def dry_run_objects(manifest: RunManifest, settings: RunSettings) -> list[dict[str, Any]]:
    """Everything the run would bring into the cluster: namespace, run, payload, policy, one Job per item.

    Model runs generate candidates in the controller first; their Jobs mount the generated task
    from a `<run>-generated-N` ConfigMap instead, which only exists once generation ran, so the dry run
    shows those Jobs pointing at the ConfigMap the controller will write.
    """
    owner = owner_reference(settings.name, PLACEHOLDER_UID)
    maps = payload_config_maps(manifest, settings, owner)
    objects: list[dict[str, Any]] = [
        to_dict(namespace_object(settings.namespace)),
        run_object(manifest, settings, [m.metadata.name for m in maps if m.metadata and m.metadata.name]),
        *(to_dict(m) for m in maps),
        to_dict(network_policy(settings, owner)),
    ]
    index = {key: n for n, m in enumerate(maps) for key in (m.data or {})}
    graded: list[tuple[ManifestItem, TaskSource, int]] = []
    for item in manifest.items:
        key = task_data_key(item_key(item.item_id))
        if item.needs_grader:
            source = TaskSource(payload_name(settings.name, index[key]), key)
        elif item.candidate is None and item.task is not None:  # generated by the controller first
            source = TaskSource(generated_name(settings.name, 0), key)
        else:
            continue  # knowledge items and unextractable completions are scored without a pod
        graded.append((item, source, 1))
    for unit in units(graded, pod_batch(manifest, settings)):
        objects.append(to_dict(unit_job(manifest, unit[0][0].item_id, unit, settings, owner)))
    return objects


def pod_batch(manifest: RunManifest, settings: RunSettings) -> int:
    """How many items one grader pod grades: `candidates_per_pod` in fast mode, else one."""
    return settings.candidates_per_pod if manifest.grader.execution_isolation == "fork_per_test" else 1


def units(items: Sequence[Any], size: int) -> list[list[Any]]:
    """`items` in consecutive groups of `size` (the last may be smaller), in order."""
    return [list(items[n : n + size]) for n in range(0, len(items), max(1, size))]


def dry_run_document(manifest: RunManifest, settings: RunSettings) -> dict[str, Any]:
    """The dry run as one document for reading: a kind no cluster serves, so `kubectl apply` refuses it.

    The objects inside carry a placeholder owner uid; applied one by one they would be garbage-collected
    at once, so they are wrapped, never printed as separate documents.
    """
    return {
        "apiVersion": crd.API_VERSION,
        "kind": DRY_RUN_KIND,
        "metadata": {"name": settings.name, "namespace": settings.namespace},
        "readOnly": "for reading only: `wpbench-k8s submit` (without --dry-run) creates these objects",
        "objects": dry_run_objects(manifest, settings),
    }
