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
    Cluster,
    Space,
    cluster_reachable,
    drop_space,
    ensure_crd_fields,
    ensure_node_image,
    new_space,
    sweep_abandoned_spaces,
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.k8s)


@pytest.fixture(scope="session")
def kube() -> Cluster:
    """The real local Kubernetes started by `make cluster-up` (make test starts it). Under CI it must be up."""
    why = cluster_reachable(ADMIN_KUBECONFIG)
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the local Kubernetes is not up: {why}")
        pytest.skip(f"the local Kubernetes is not up: {why}")
    for image in (GRADER_IMAGE, CONTROLLER_IMAGE):  # the images under test (a helper's own tags too)
        ensure_node_image(image)
    cluster = Cluster(ADMIN_KUBECONFIG)
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
