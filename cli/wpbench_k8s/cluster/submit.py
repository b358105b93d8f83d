"""Submitting a run: the same manifest `wpbench-k8s run` builds, as a WPBenchRun plus ConfigMaps it owns."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from wpbench_k8s.cluster.connection import Cluster, api_error
from wpbench_k8s.errors import InputError
from wpbench_k8s.manifest import RunManifest

if TYPE_CHECKING:  # the Kubernetes client loads only when a cluster command runs
    from wpbench_k8s.kube.objects import RunSettings

_RUN_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def run_name(manifest: RunManifest, requested: str | None) -> str:
    """The run's object name: `requested`, else wpb-<run id>.

    Raises:
        InputError: not a lowercase DNS label of at most MAX_RUN_NAME characters (names --name).
    """
    from wpbench_k8s.kube.names import MAX_RUN_NAME

    name = requested or f"wpb-{manifest.run_id}".lower()
    if len(name) > MAX_RUN_NAME or not _RUN_NAME.match(name):
        raise InputError(f"--name: {name!r} must be a lowercase DNS label of at most {MAX_RUN_NAME} characters")
    return name


def dry_run_text(manifest: RunManifest, settings: RunSettings) -> str:
    """Every object the run would bring into the cluster, as YAML inside one document no cluster serves."""
    import yaml

    from wpbench_k8s.kube.objects import DRY_RUN_KIND, dry_run_document

    document = dry_run_document(manifest, settings)
    return (
        f"# wpbench-k8s submit --dry-run: run {settings.name}, {len(manifest.items)} items, "
        f"manifest {manifest.digest()}\n"
        f"# For reading only: the objects sit inside one {DRY_RUN_KIND} document, which no cluster serves, so\n"
        "# `kubectl apply` refuses it (their owner uids are placeholders the API server would never match).\n"
        + yaml.safe_dump(document, sort_keys=False)
    )


def whoami(cluster: Cluster) -> str:
    """The user name the API server knows this client by (a SelfSubjectReview, which every user may create).

    Raises:
        ClusterError: the API server refused (names the request).
    """
    from wpbench_k8s.kube.client import SELF_SUBJECT_REVIEWS, KubeError

    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    try:
        review = cluster.kube.create(SELF_SUBJECT_REVIEWS, None, body)
    except KubeError as exc:
        raise api_error(exc, "create selfsubjectreview (who am I)") from exc
    return str(((review.get("status") or {}).get("userInfo") or {}).get("username") or "")


def submit(cluster: Cluster, manifest: RunManifest, settings: RunSettings, suite_table: str = "") -> str:
    """Create the run, then its payload ConfigMaps owned by it (the controller waits for all of them).

    The run names its submitter (`whoami`) and the suite digest it declares; the payload carries
    `suite_table` (`verified.SuiteTable` JSON), from which the controller recomputes that digest.

    Returns:
        The run's name.
    Raises:
        ClusterError: the API server refused an object (names which).
    """
    from wpbench_k8s.kube.client import CONFIG_MAPS, RUNS, KubeError, to_dict
    from wpbench_k8s.kube.objects import owner_reference, payload_config_maps, run_object

    maps = payload_config_maps(manifest, settings, None, suite_table)
    names = [m.metadata.name for m in maps if m.metadata and m.metadata.name]
    digest = str(json.loads(suite_table)["digest"]) if suite_table else ""
    body = run_object(manifest, settings, names, submitted_by=whoami(cluster), suite_digest=digest)
    try:
        created = cluster.kube.create(RUNS, settings.namespace, body)
    except KubeError as exc:
        raise api_error(exc, f"create run {settings.namespace}/{settings.name}") from exc
    owner = owner_reference(settings.name, created["metadata"]["uid"])
    for cm in maps:
        assert cm.metadata is not None
        cm.metadata.owner_references = [owner]
        try:
            cluster.kube.create(CONFIG_MAPS, settings.namespace, to_dict(cm))
        except KubeError as exc:
            raise api_error(exc, f"create ConfigMap {cm.metadata.name}") from exc
    return str(settings.name)
