"""Verified suites: the controller recomputes what a run grades from the payload, never trusts a client's word.

A suite's digest is the sha256 of its table: every test's id and the sha256 of the test as a manifest stores
it (`RunManifest.tests`, canonical JSON). `submit` sends the whole table beside the manifest (a run grades a
subset, the digest covers the suite). The controller checks, before anything is graded:

1. the table adds up to the digest the run declares;
2. every test in the payload has the digest the table gives it (the checks and answer keys graded are the
   suite's);
3. every item's grader task is the one its test and candidate give (`sources.task_for` and
   `ManifestItem.with_candidate`), so no altered check reaches a grader under a test's name.

A run that fails any of them is refused with the reason. A run that sends no table (and declares no digest)
is checked against its own tests (`own_table`): it verifies only when it carries the whole pinned suite.
A cluster admin pins trusted suites (name -> digest, chart value `trustedSuites`); `suite_verified` says
whether the run's suite is pinned with this digest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from wpbench_k8s.dataset import ExecutionTest, Suite, test_from_dict
from wpbench_k8s.kube.payload import SUITE_KEY as SUITE_KEY  # the table's key in payload chunk 0
from wpbench_k8s.manifest import ManifestItem, RunManifest
from wpbench_k8s.sources import task_for


class SuiteError(Exception):
    """The payload does not grade the suite the run declares."""


class SuiteTable(BaseModel):
    """What `submit` declares about the suite: its name, digest, and every test's digest."""

    model_config = ConfigDict(extra="forbid")
    suite: str
    digest: str
    tests: dict[str, str]


class SuiteCheck(BaseModel):
    """What the controller found: the suite graded, its recomputed digest, whether a cluster admin pinned it."""

    model_config = ConfigDict(extra="forbid")
    suite: str
    digest: str
    verified: bool


def test_digest(test: Mapping[str, Any]) -> str:
    """sha256 of one test as the manifest stores it."""
    canonical = json.dumps(test, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def table_digest(tests: Mapping[str, str]) -> str:
    """sha256 over the suite's (test id, test digest) pairs, in id order."""
    lines = "".join(f"{test_id}\t{digest}\n" for test_id, digest in sorted(tests.items()))
    return "sha256:" + hashlib.sha256(lines.encode()).hexdigest()


def suite_table(suite: Suite) -> SuiteTable:
    """The table `submit` sends: every test of the suite, as `plan_run` puts a test into a manifest."""
    tests = {t.id: test_digest(t.model_dump(mode="json", exclude_none=True)) for t in suite.all_tests()}
    return SuiteTable(suite=suite.name, digest=table_digest(tests), tests=tests)


def own_table(manifest: RunManifest) -> SuiteTable:
    """The table of a run that sent none: its own tests (a pin matches only when they are the whole suite)."""
    tests = {test_id: test_digest(test) for test_id, test in manifest.tests.items()}
    return SuiteTable(suite=manifest.suite, digest=table_digest(tests), tests=tests)


def check_suite(table: SuiteTable, manifest: RunManifest, pins: Mapping[str, str]) -> SuiteCheck:
    """Steps 1 and 2 (the tests of the manifest header; items are `check_items`).

    Raises:
        SuiteError: naming the first thing that does not add up.
    """
    if table.suite != manifest.suite:
        raise SuiteError(f"the suite table is for {table.suite!r}, the manifest grades {manifest.suite!r}")
    recomputed = table_digest(table.tests)
    if recomputed != table.digest:
        raise SuiteError(f"declared suite digest {table.digest} differs from its tests' digest {recomputed}")
    for test_id, test in manifest.tests.items():
        want = table.tests.get(test_id)
        if want is None:
            raise SuiteError(f"test {test_id!r} is graded but is not in suite {table.suite!r}")
        got = test_digest(test)
        if got != want:
            raise SuiteError(f"test {test_id!r} differs from suite {table.suite!r}'s (digest {got}, suite {want})")
    return SuiteCheck(suite=table.suite, digest=recomputed, verified=pins.get(table.suite) == recomputed)


def check_payload_suite(
    declared: str, raw_table: str | None, manifest: RunManifest, pins: Mapping[str, str]
) -> SuiteCheck:
    """Steps 1 and 2 for a run as it reached the controller: the digest it declares (`spec.suiteDigest`, ""
    when none) and the table in its payload (None when none).

    Raises:
        SuiteError: naming the first thing that does not add up.
    """
    if raw_table is None:  # an older client or a library caller: the run's own tests are its suite
        if declared:
            raise SuiteError(f"spec.suiteDigest {declared} is declared, but the payload carries no suite table")
        return check_suite(own_table(manifest), manifest, pins)
    try:
        table = SuiteTable.model_validate_json(raw_table)
    except ValueError as exc:
        raise SuiteError(f"the payload's suite table is not valid: {exc}") from exc
    if declared and declared != table.digest:
        raise SuiteError(f"spec.suiteDigest {declared} is not the payload's suite table's {table.digest}")
    return check_suite(table, manifest, pins)


def check_items(manifest: RunManifest, items: Iterable[ManifestItem]) -> None:
    """Step 3: every item grades its test's checks (as the manifest's profile and grader read them).

    Raises:
        SuiteError: an item names no test of the manifest, or its task is not its test's.
    """
    tests: dict[str, Any] = {}
    for item in items:
        raw = manifest.tests.get(item.test_id)
        if raw is None:
            raise SuiteError(f"item {item.item_id!r} grades test {item.test_id!r}, which the payload does not hold")
        if item.task is None:
            continue
        test = tests.get(item.test_id) or tests.setdefault(item.test_id, test_from_dict(raw))
        if not isinstance(test, ExecutionTest):
            raise SuiteError(f"item {item.item_id!r} has a grader task, but {item.test_id!r} is a knowledge test")
        want = task_for(test, manifest.grader, manifest.profile)
        got = item.task.model_copy(update={"code": None, "files": None})
        if got != want:
            raise SuiteError(f"item {item.item_id!r}: its grader task is not test {item.test_id!r}'s checks")
        if item.candidate is not None and (item.task.code, item.task.files) != (
            item.candidate.code,
            item.candidate.files,
        ):
            raise SuiteError(f"item {item.item_id!r}: its grader task does not grade its candidate")
