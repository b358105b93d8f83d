"""Submitting a run: the same manifest `wpbench-k8s run` builds, as a WPBenchRun plus ConfigMaps it owns."""

from __future__ import annotations

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


def submit(cluster: Cluster, manifest: RunManifest, settings: RunSettings) -> str:
    """Create the run, then its payload ConfigMaps owned by it (the controller waits for all of them).

    Returns:
        The run's name.
    Raises:
        ClusterError: the API server refused an object (names which).
    """
    from wpbench_k8s.kube.client import CONFIG_MAPS, RUNS, KubeError, to_dict
    from wpbench_k8s.kube.objects import owner_reference, payload_config_maps, run_object

    maps = payload_config_maps(manifest, settings, None)
    names = [m.metadata.name for m in maps if m.metadata and m.metadata.name]
    body = run_object(manifest, settings, names)
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
