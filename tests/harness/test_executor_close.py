"""Ctrl-C's cleanup on the real engine: every container of the run goes, including a spare and one a
grader thread is creating at that moment, the count says so, and nothing is created afterwards."""

from __future__ import annotations

import subprocess
import threading

import pytest

from wpbench_k8s.executor.docker import RUN_LABEL, DockerExecutor, PrepareError
from wpbench_k8s.manifest import GraderSpec

pytestmark = pytest.mark.docker


def labelled(run_id: str) -> list[str]:
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label={RUN_LABEL}={run_id}"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return out.stdout.split()


def test_cleanup_waits_for_a_creation_under_way_and_removes_every_container(grader_image):
    run_id = "h27-close-test"
    executor = DockerExecutor(GraderSpec(image=grader_image), run_id)
    executor.preflight()
    spare = executor._prepare()  # a started spare, as the creator threads keep ready
    inside, release = threading.Event(), threading.Event()
    create = executor.api.create_container

    def held_create(*args, **kwargs):  # a grader thread is inside the engine call as Ctrl-C arrives
        created = create(*args, **kwargs)
        inside.set()
        release.wait(60)
        return created

    executor.api.create_container = held_create
    late: dict = {}
    creator = threading.Thread(target=lambda: late.update(spare=executor._prepare()))
    creator.start()
    assert inside.wait(60)
    removed: list[int] = []
    closer = threading.Thread(target=lambda: removed.append(executor.cleanup()))
    closer.start()
    closer.join(0.5)
    assert closer.is_alive()  # cleanup waits for the creation under way instead of sweeping past it
    release.set()
    creator.join(60)
    closer.join(120)
    assert removed == [2]  # the spare and the container created meanwhile, counted
    assert labelled(run_id) == []
    assert late["spare"].container != spare.container
    with pytest.raises(PrepareError, match="stopping"):
        executor._prepare()  # closed: nothing is created after cleanup
    assert labelled(run_id) == []
