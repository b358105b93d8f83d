"""The test harness's own cluster hygiene: a killed test run's namespaces do not starve later tests."""

from __future__ import annotations

import uuid

from clusterkit import OWNER_ANNOTATION, PSA, TEST_LABEL, Cluster, Space, owner_tag, sweep_abandoned_spaces


def test_namespaces_of_a_dead_test_process_are_swept_and_live_ones_kept(space: Space) -> None:
    cluster: Cluster = space.cluster
    host, boot, _ = owner_tag().split("/")
    dead_pid = f"{host}/{boot}/999999999"  # above pid_max: no such process
    old_boot = f"{host}/{uuid.uuid4()}/1"
    other_host = f"not-{host}/{boot}/999999999"
    made = {}
    for what, owner in (("dead", dead_pid), ("reboot", old_boot), ("other", other_host), ("live", owner_tag())):
        name = f"{space.namespace}-{what}"
        cluster.core.create_namespace({"metadata": {"name": name, "labels": {**PSA, TEST_LABEL: "true"},
                                                    "annotations": {OWNER_ANNOTATION: owner}}})  # fmt: skip
        made[what] = name
    try:
        swept = set(sweep_abandoned_spaces(cluster))
        assert {made["dead"], made["reboot"]} <= swept
        assert not {made["other"], made["live"], space.namespace} & swept
    finally:
        for name in made.values():
            cluster.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)
