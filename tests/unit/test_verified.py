"""Verified suites: what the controller recomputes from a payload, and each lie it must refuse."""

from __future__ import annotations

import json

import pytest

from wpbench_k8s.config import load_config
from wpbench_k8s.dataset import load_suite
from wpbench_k8s.kube.objects import RunSettings, payload_config_maps
from wpbench_k8s.kube.payload import SUITE_KEY, join_manifest
from wpbench_k8s.kube.results import trusted
from wpbench_k8s.pipeline import load_run_suite, plan_run
from wpbench_k8s.records import Record, json_line
from wpbench_k8s.verified import SuiteError, SuiteTable, check_items, check_suite, suite_table, table_digest


def planned(mini_suite, mode="reference", **extra):
    config = load_config(None, {"dataset.path": str(mini_suite), **extra})
    return config, plan_run(config, mode, run_id="r1")


def test_an_honest_payload_verifies_and_only_a_pin_makes_it_trusted(mini_suite):
    config, manifest = planned(mini_suite)
    table = suite_table(load_run_suite(config))
    assert set(table.tests) == {t.id for t in load_suite(mini_suite).all_tests()}
    assert table.digest == table_digest(table.tests)
    check = check_suite(table, manifest, {})
    assert (check.suite, check.digest, check.verified) == (manifest.suite, table.digest, False)
    assert check_suite(table, manifest, {manifest.suite: table.digest}).verified
    assert not check_suite(table, manifest, {manifest.suite: "sha256:" + "0" * 64}).verified
    check_items(manifest, manifest.items)  # every task is its test's


def test_the_table_travels_in_payload_chunk_0_outside_the_manifest_digest(mini_suite):
    config, manifest = planned(mini_suite)
    table = suite_table(load_run_suite(config)).model_dump_json()
    maps = payload_config_maps(manifest, RunSettings(name="r", namespace="ns"), None, table)
    assert all(m.immutable is True for m in maps)  # no one may change a chunk once created
    chunks = [m.data or {} for m in maps]
    assert chunks[0][SUITE_KEY] == table
    assert join_manifest(chunks, manifest.digest()).manifest.digest() == manifest.digest()


def test_a_declared_digest_that_its_tests_do_not_give_is_refused(mini_suite):
    config, manifest = planned(mini_suite)
    table = suite_table(load_run_suite(config))
    lie = table.model_copy(update={"digest": "sha256:" + "1" * 64})
    with pytest.raises(SuiteError, match="declared suite digest"):
        check_suite(lie, manifest, {})


def test_an_altered_test_under_the_suites_name_is_refused(mini_suite):
    config, manifest = planned(mini_suite)
    table = suite_table(load_run_suite(config))
    test_id = next(iter(manifest.tests))
    altered = json.loads(json.dumps(manifest.tests))
    altered[test_id]["title"] = altered[test_id].get("title", "") + " (easier)"
    with pytest.raises(SuiteError, match=f"test '{test_id}' differs"):
        check_suite(table, manifest.model_copy(update={"tests": altered}), {})
    # Rewriting the table to match the altered test changes the suite digest: no pin matches it.
    forged = dict(table.tests)
    from wpbench_k8s.verified import test_digest

    forged[test_id] = test_digest(altered[test_id])
    forged_table = SuiteTable(suite=table.suite, digest=table_digest(forged), tests=forged)
    check = check_suite(forged_table, manifest.model_copy(update={"tests": altered}), {table.suite: table.digest})
    assert check.digest != table.digest and not check.verified


def test_a_test_outside_the_suite_is_refused(mini_suite):
    config, manifest = planned(mini_suite)
    table = suite_table(load_run_suite(config))
    test_id = next(iter(manifest.tests))
    smaller = {k: v for k, v in table.tests.items() if k != test_id}
    with pytest.raises(SuiteError, match="is not in suite"):
        check_suite(SuiteTable(suite=table.suite, digest=table_digest(smaller), tests=smaller), manifest, {})


def test_a_grader_task_that_is_not_its_tests_checks_is_refused(mini_suite):
    _, manifest = planned(mini_suite)
    item = next(i for i in manifest.items if i.task is not None)
    easier = item.task.model_copy(update={"static_checks": item.task.static_checks.model_copy(update={"required": []})})
    if easier == item.task:  # the test had no required pattern: drop the runtime assertions instead
        easier = item.task.model_copy(
            update={"runtime_checks": item.task.runtime_checks.model_copy(update={"assertions": []})}
        )
    assert easier != item.task
    with pytest.raises(SuiteError, match="is not test"):
        check_items(manifest, [item.model_copy(update={"task": easier})])
    other = item.task.model_copy(update={"code": "<?php return 1;"})
    with pytest.raises(SuiteError, match="does not grade its candidate"):
        check_items(manifest, [item.model_copy(update={"task": other})])
    with pytest.raises(SuiteError, match="does not hold"):
        check_items(manifest, [item.model_copy(update={"test_id": "no-such-test"})])


def test_local_records_do_not_carry_the_clusters_suite_fields(mini_suite):
    record = Record(run_id="r", item_id="i", test_id="t", suite="s", type="execution", category="c", mode="reference",
                    model="reference", grader={"status": "passed"})  # fmt: skip
    assert "suite_verified" not in json_line(record) and "suite_digest" not in json_line(record)
    stamped = record.model_copy(update={"suite_digest": "sha256:" + "2" * 64, "suite_verified": False})
    doc = json.loads(json_line(stamped))
    assert (doc["suite_digest"], doc["suite_verified"]) == ("sha256:" + "2" * 64, False)
    assert Record.model_validate_json(json_line(stamped)) == stamped


def test_a_shard_counts_only_when_its_run_lists_it_and_owns_it():
    def cm(name, uid="u1"):
        return {"metadata": {"name": name, "ownerReferences": [{"uid": uid}]}}

    assert trusted(cm("r-results-0"), ["r-results-0"], "u1")
    assert not trusted(cm("r-results-9"), ["r-results-0"], "u1")  # planted beside the run's own
    assert not trusted(cm("r-results-0", uid="u0"), ["r-results-0"], "u1")  # a deleted run's, same name
    assert not trusted({"metadata": {"name": "r-results-0"}}, ["r-results-0"], "u1")  # owned by nothing
    assert not trusted(cm("r-results-0"), [], "u1")  # a run that listed nothing yet


def test_a_run_without_a_table_is_its_own_suite_and_verifies_only_whole(mini_suite):
    config, manifest = planned(mini_suite)
    whole = suite_table(load_run_suite(config))
    from wpbench_k8s.verified import own_table

    own = own_table(manifest)
    assert own.tests == {k: v for k, v in whole.tests.items() if k in manifest.tests}
    assert check_suite(own, manifest, {whole.suite: whole.digest}).verified == (set(own.tests) == set(whole.tests))


def test_what_the_controller_checks_for_each_way_a_run_can_arrive(mini_suite):
    from wpbench_k8s.verified import check_payload_suite, own_table

    config, manifest = planned(mini_suite)
    table = suite_table(load_run_suite(config))
    raw = table.model_dump_json()
    assert check_payload_suite(table.digest, raw, manifest, {table.suite: table.digest}).verified  # submit's way
    assert check_payload_suite("", raw, manifest, {}).digest == table.digest  # a table, no declared digest
    assert check_payload_suite("", None, manifest, {}).digest == own_table(manifest).digest  # neither
    with pytest.raises(SuiteError, match="is not the payload's suite table's"):
        check_payload_suite("sha256:" + "4" * 64, raw, manifest, {})
    with pytest.raises(SuiteError, match="carries no suite table"):
        check_payload_suite(table.digest, None, manifest, {})
    with pytest.raises(SuiteError, match="not valid"):
        check_payload_suite("", '{"suite": 1}', manifest, {})
