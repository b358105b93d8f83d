"""Fixtures for the real local Kubernetes (`kube`, `space`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from clusterkit import (
    ADMIN_KUBECONFIG,
    CONTROLLER_IMAGE,
    GRADER_IMAGE,
    KIND,
    KIND_KUBECONFIG,
    Cluster,
    Space,
    cluster_reachable,
    drop_space,
    ensure_crd_fields,
    ensure_kind_image,
    ensure_node_image,
    new_space,
    sweep_abandoned_spaces,
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.k8s)
        # CLUSTER=kind runs the tests that hold on any cluster; those about one kind of cluster say which
        if KIND and item.get_closest_marker("local_cluster"):
            item.add_marker(pytest.mark.skip(reason="about the single-node local cluster (CLUSTER=kind runs kind)"))
        if not KIND and item.get_closest_marker("kind_cluster"):
            item.add_marker(
                pytest.mark.skip(reason="needs the multi-node kind cluster: make kind-up, then CLUSTER=kind")
            )


@pytest.fixture(scope="session")
def kube() -> Cluster:
    """The real local Kubernetes started by `make cluster-up` (make test starts it), or with CLUSTER=kind the kind
    cluster of `make kind-up`. Under CI it must be up."""
    kubeconfig, made_by = (KIND_KUBECONFIG, "make kind-up") if KIND else (ADMIN_KUBECONFIG, "make cluster-up")
    why = cluster_reachable(kubeconfig)
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the cluster of {made_by} is not up: {why}")
        pytest.skip(f"the cluster of {made_by} is not up: {why}")
    for image in (GRADER_IMAGE, CONTROLLER_IMAGE):  # the images under test (a helper's own tags too)
        ensure_kind_image(image) if KIND else ensure_node_image(image)
    cluster = Cluster(kubeconfig, kind=KIND)
    ensure_crd_fields(cluster)
    swept = sweep_abandoned_spaces(cluster)
    if swept:
        print(f"\nremoved {len(swept)} test namespace(s) a killed test run left behind: {', '.join(swept)}")
    return cluster


@pytest.fixture
def space(kube: Cluster, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Space]:
    """A namespace of the real cluster for one test (Pod Security `restricted`, labelled as a test's)."""
    s = new_space(kube, tmp_path, request.node.nodeid)
    try:
        yield s
    finally:
        drop_space(s)


@pytest.fixture
def skill(tmp_path: Path) -> Path:
    """A minimal skill folder for skills A/B runs."""
    path = tmp_path / "wp-skill"
    path.mkdir()
    (path / "SKILL.md").write_text("---\nname: wp-skill\n---\nUse the WordPress APIs.\n")
    return path
