"""Every object a run brings into the cluster, built with the official client models.

`submit` creates the run and its payload ConfigMaps; the controller creates the NetworkPolicy,
one Job per item (`wpbench_k8s.executor.kubernetes.build_grader_job`) and the result ConfigMaps.
`dry_run_objects` lists all of them for `submit --dry-run`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s

from wpbench_controller import crd
from wpbench_controller.payload import item_key, payload_name, split_manifest, task_data_key
from wpbench_k8s import __version__
from wpbench_k8s.executor.kubernetes import (
    ANNOTATION_ITEM_ID,
    ANNOTATION_MODEL,
    ANNOTATION_TEST_ID,
    DEFAULT_INFRA_RETRIES,
    LABEL_RUN,
    MANAGED_BY,
    TaskSource,
    build_grader_job,
    grader_labels,
    job_name,
    label_value,
    pod_selector,
    to_dict,
)
from wpbench_k8s.manifest import ManifestItem, RunManifest

COMPONENT_PAYLOAD = "payload"
COMPONENT_RESULTS = "results"
COMPONENT_GENERATED = "generated"
PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"  # dry run: the API server assigns the real one
MAX_RUN_NAME = 40
POD_SECURITY_LABELS = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
    "pod-security.kubernetes.io/audit": "restricted",
    "pod-security.kubernetes.io/warn": "restricted",
}


@dataclass(frozen=True)
class RunSettings:
    """What the cluster side adds to a manifest: where, how many at once, how many infra retries."""

    name: str
    namespace: str
    max_in_flight: int = 2
    infra_retries: int = DEFAULT_INFRA_RETRIES
    image_pull_policy: str = "IfNotPresent"


def run_labels(run_name: str, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "wpbench-k8s",
        "app.kubernetes.io/instance": label_value(run_name),
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": "wpbench-k8s",
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "app.kubernetes.io/version": label_value(__version__),
        LABEL_RUN: label_value(run_name),
    }


def owner_reference(run_name: str, uid: str) -> k8s.V1OwnerReference:
    """Objects owned by the run go when the run is deleted (garbage collection)."""
    return k8s.V1OwnerReference(
        api_version=crd.API_VERSION, kind=crd.KIND, name=run_name, uid=uid, controller=True, block_owner_deletion=True
    )


def run_object(manifest: RunManifest, settings: RunSettings, payload_maps: list[str]) -> dict[str, Any]:
    """The WPBenchRun custom resource `submit` creates."""
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
    }
    return {
        "apiVersion": crd.API_VERSION,
        "kind": crd.KIND,
        "metadata": {
            "name": settings.name,
            "namespace": settings.namespace,
            "labels": run_labels(settings.name, "run"),
        },
        "spec": spec,
    }


def config_map(
    name: str, namespace: str, labels: dict[str, str], data: dict[str, str], owner: k8s.V1OwnerReference | None
) -> k8s.V1ConfigMap:
    return k8s.V1ConfigMap(
        api_version="v1",
        kind="ConfigMap",
        metadata=k8s.V1ObjectMeta(
            name=name, namespace=namespace, labels=labels, owner_references=[owner] if owner else None
        ),
        data=data,
    )


def payload_config_maps(
    manifest: RunManifest, settings: RunSettings, owner: k8s.V1OwnerReference | None
) -> list[k8s.V1ConfigMap]:
    """The manifest in ConfigMaps under the object size limit (see `payload.split_manifest`)."""
    labels = run_labels(settings.name, COMPONENT_PAYLOAD)
    return [
        config_map(payload_name(settings.name, i), settings.namespace, labels, data, owner)
        for i, data in enumerate(split_manifest(manifest, settings.name))
    ]


def network_policy(settings: RunSettings, owner: k8s.V1OwnerReference | None) -> k8s.V1NetworkPolicy:
    """Deny all ingress and egress for every grader pod of the run: graders need no network."""
    return k8s.V1NetworkPolicy(
        api_version="networking.k8s.io/v1",
        kind="NetworkPolicy",
        metadata=k8s.V1ObjectMeta(
            name=f"{settings.name}-deny-all",
            namespace=settings.namespace,
            labels=run_labels(settings.name, "network-policy"),
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
) -> k8s.V1Job:
    """The grader Job for one item (the executor's builder, with the run's labels and owner)."""
    assert item.task is not None, f"{item.item_id}: knowledge items need no grader"
    return build_grader_job(
        name=job_name(settings.name, item.item_id),
        namespace=settings.namespace,
        spec=manifest.grader,
        task_timeout=item.task.timeout_seconds,
        task_source=task_source,
        labels=grader_labels(settings.name, test_id=item.test_id, model=item.model, item_id=item.item_id),
        annotations={ANNOTATION_ITEM_ID: item.item_id, ANNOTATION_TEST_ID: item.test_id, ANNOTATION_MODEL: item.model},
        owner=owner,
        infra_retries=settings.infra_retries,
        image_pull_policy=settings.image_pull_policy,
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


def needs_pod(item: ManifestItem) -> bool:
    """Only execution items with a gradable candidate run a grader pod."""
    return (
        item.test_type == "execution"
        and item.task is not None
        and item.candidate is not None
        and not item.candidate.extraction_error
    )


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
    for item in manifest.items:
        key = task_data_key(item_key(item.item_id))
        if needs_pod(item):
            source = TaskSource(payload_name(settings.name, index[key]), key)
        elif item.candidate is None and item.task is not None:  # generated by the controller first
            source = TaskSource(generated_name(settings.name, 0), key)
        else:
            continue  # knowledge items and unextractable completions are scored without a pod
        objects.append(to_dict(item_job(manifest, item, settings, source, owner)))
    return objects


def generated_name(run_name: str, index: int) -> str:
    """Where the controller stores generated candidates (see `results.Shards`)."""
    return f"{run_name}-{COMPONENT_GENERATED}-{index}"
