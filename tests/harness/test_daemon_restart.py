"""The Docker daemon stops and starts again mid-run: no verdict is lost (issue 16).

Runs on a private dockerd (tests/harness/privated.py: its own data root, exec root, pidfile and
socket, the grader image loaded into it), so stopping it disturbs no other user of the machine's
engine. The run reaches it through DOCKER_HOST, as a user's would.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator

import pytest
from faultkit import REPO, assert_same_records, cli_args, final_records, make_suite, run, wait_for_records
from privated import PrivateDaemon

pytestmark = pytest.mark.docker
TESTS = 8


@pytest.fixture(scope="module")
def daemon(grader_image) -> Iterator[PrivateDaemon]:
    private = PrivateDaemon()
    try:
        if os.geteuid() != 0:
            raise RuntimeError("a private dockerd needs root")
        private.start()
        private.ensure_image(grader_image)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must be able to start a private dockerd: {exc}")
        pytest.skip(str(exc))
    yield private
    private.stop()


def test_daemon_restart_mid_run_loses_no_verdict(daemon, grader_image, tmp_path):
    suite = make_suite(tmp_path, TESTS, sleep_ms=1500)
    env = {"DOCKER_HOST": daemon.host}
    clean = run(cli_args(suite, tmp_path / "clean", grader_image, "--execution-concurrency", "2"), env)
    assert clean.returncode == 0, clean.stderr[-3000:]
    expected = final_records(tmp_path / "clean")

    out = tmp_path / "faulted"
    proc = subprocess.Popen(cli_args(suite, out, grader_image, "--execution-concurrency", "2"), cwd=REPO,
                            env={**os.environ, **env, "COLUMNS": "400"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    wait_for_records(out, 2)
    daemon.stop()  # SIGTERM: the daemon stops the running graders, then exits
    time.sleep(4)
    daemon.start()
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    records = final_records(out)
    assert [r["grader"]["status"] for r in records] == ["passed"] * TESTS, [r["grader"]["reason"] for r in records]
    assert any(r["grader"]["infra_retries"] for r in records), "the restart hit no grader: the test proved nothing"
    for r in records:
        r["grader"]["infra_retries"] = 0  # retried graders are the point; their verdicts must still match
    assert_same_records(records, expected)
    assert not daemon.docker("ps", "-aq").stdout.split(), "containers left on the engine"
