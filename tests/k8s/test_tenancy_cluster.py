"""Many teams, one cluster (issue 25), on the real local Kubernetes: identities bound only to the chart's
submitter Role (ServiceAccounts, through their tokens) attack other runs. Stored results, the verdict cache
and other runs' objects must stay as the controller wrote them, planted objects must be refused (the chart's
admission policies) or, where the policy does not apply, ignored and reported, and a run whose declared
suite does not add up must be refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusterkit import OWNER_ANNOTATION, PSA, REPO, TEST_LABEL, Space, ensure_crd_fields, owner_tag, records
from kubernetes import client as k8s
from kubernetes import config
from kubernetes.client.exceptions import ApiException

from wpbench_k8s.cache import verdict_key
from wpbench_k8s.config import load_config
from wpbench_k8s.dataset import load_suite
from wpbench_k8s.kube.names import COMPONENT_RESULTS, COMPONENT_VERDICTS, run_labels
from wpbench_k8s.kube.results import record_key
from wpbench_k8s.pipeline import plan_run
from wpbench_k8s.verified import suite_table

pytestmark = pytest.mark.docker

TESTS = ("mini-hooks-001", "mini-shortcodes-001")


def completions(tmp: Path) -> Path:
    """Answers that do nothing: every item fails."""
    path = tmp / "nothing.jsonl"
    path.write_text("".join(json.dumps({"test_id": t, "model": "m", "code": "return;"}) + "\n" for t in TESTS))
    return path


def submitter(space: Space, namespace: str, account: str) -> Path:
    """A ServiceAccount bound only to the chart's submitter Role in `namespace`; returns a kubeconfig with its
    token (the API server's cluster entry from the admin kubeconfig, nothing else)."""
    space.cluster.core.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
    space.cluster.rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": f"{account}-submitter"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": f"{space.release}-wpbench-k8s-submitter"},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    })  # fmt: skip
    token = space.cluster.core.create_namespaced_service_account_token(
        account, namespace, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    admin = yaml.safe_load(space.cluster.kubeconfig.read_text())
    current = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])
    cluster = next(c for c in admin["clusters"] if c["name"] == current["context"]["cluster"])
    path = space.tmp / f"{account}.kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "clusters": [cluster],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": cluster["name"], "user": account,
                                                   "namespace": namespace}}],
        "current-context": account,
    }))  # fmt: skip
    path.chmod(0o600)
    return path


def cli_as(kubeconfig: Path, namespace: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in __import__("os").environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    env.update(KUBECONFIG=str(kubeconfig), WPBENCH_K8S_NAMESPACE=namespace)
    res = subprocess.run([sys.executable, "-m", "wpbench_k8s", *args], capture_output=True, text=True, cwd=REPO,
                         env=env, timeout=900)  # fmt: skip
    if check:
        assert res.returncode == 0, f"wpbench-k8s {' '.join(args)}:\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
    return res


def refused(call: Any, *args: Any, says: str = "", **kw: Any) -> str:
    """The API server's 403 for a call (what it said); fails when the call went through."""
    with pytest.raises(ApiException) as info:
        call(*args, **kw)
    assert info.value.status == 403, info.value
    body = str(info.value.body)
    assert says in body, body
    return body


def fetched(kubeconfig: Path, namespace: str, run: str, out: Path) -> tuple[bytes, dict[str, Any], str]:
    res = cli_as(kubeconfig, namespace, "results", run, "-o", str(out))
    return out.read_bytes(), json.loads(out.with_suffix(".json").read_text()), res.stderr


def run_object(space: Space, namespace: str, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = space.cluster.custom.get_namespaced_custom_object(
        "wpbench-k8s.org", "v1alpha1", namespace, "wpbenchruns", name
    )
    return obj


def wait_phase(space: Space, namespace: str, name: str, timeout: float = 600) -> dict[str, Any]:
    return space.wait_for(lambda: (r := run_object(space, namespace, name)).get("status", {}).get("phase")
                          in ("Succeeded", "Failed", "Cancelled") and r, timeout, f"run {name} to finish")  # fmt: skip


def events_of(space: Space, namespace: str, name: str) -> list[str]:
    items = space.cluster.core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [f"{e.reason}: {e.message}" for e in items]


def shard(name: str, namespace: str, run: dict[str, Any], component: str, data: dict[str, str]) -> dict[str, Any]:
    """A ConfigMap dressed as a run's stored state: its labels, its name pattern, owned by the run."""
    labels = run_labels(run["metadata"]["name"], component)
    owner = {"apiVersion": run["apiVersion"], "kind": run["kind"], "name": run["metadata"]["name"],
             "uid": run["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels, "ownerReferences": [owner]},
            "data": data}  # fmt: skip


def passing(records_text: bytes) -> dict[str, str]:
    """The victim's own records rewritten to pass, keyed as the controller keys them."""
    out: dict[str, str] = {}
    for line in records_text.decode().splitlines():
        rec = json.loads(line)
        rec["scores"].update(correctness=1.0, execution_pass=True, runtime=1.0, static=1.0, static_policy_pass=True)
        rec["grader"]["status"], rec["grader"]["success"] = "passed", True
        if rec["grader"].get("verdict"):
            rec["grader"]["verdict"]["status"] = "passed"
        out[record_key(rec["item_id"])] = json.dumps(rec)
    return out


def test_a_submitter_cannot_plant_results_or_cache_entries_nor_touch_another_teammates_run(
    space: Space, mini_suite: Path, grader_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WPBENCH_NO_CACHE", "0")  # tests/conftest.py turns the cache off for every other test
    ns = space.namespace
    table = suite_table(load_suite(mini_suite))
    space.install_controller(f"trustedSuites.{table.suite}={table.digest}")
    ensure_crd_fields(space.cluster)  # the status fields this relies on (a shared cluster's CRD may predate them)
    alice, mallory = submitter(space, ns, "alice"), submitter(space, ns, "mallory")
    answers = completions(tmp_path)
    victim = cli_as(alice, ns, "submit", "--completions", str(answers), "--dataset-path", str(mini_suite),
                    "--image", grader_image, "--max-in-flight", "2").stdout.strip()  # fmt: skip
    run = wait_phase(space, ns, victim)
    st = run["status"]
    assert (st["phase"], st["done"], st["passed"]) == ("Succeeded", 2, 0), st
    assert (st.get("suite"), st.get("suiteDigest"), st.get("suiteVerified")) == (table.suite, table.digest, True), (
        f"{st}\n{space.controller_log()}"
    )
    before, summary, err = fetched(alice, ns, victim, tmp_path / "before.jsonl")
    assert f"suite {table.suite} {table.digest}: verified" in err, err
    assert summary["metadata"]["suite_digest"] == table.digest and summary["metadata"]["suite_verified"] is True
    assert all(
        r["suite_verified"] is True and r["suite_digest"] == table.digest for r in records(tmp_path / "before.jsonl")
    )

    # Mallory, bound to the same submitter Role: every write to the victim's state is refused.
    api = config.new_client_from_config(str(mallory))
    core, custom = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
    fake = passing(before)
    store_says = "written by the controller only"
    refused(core.create_namespaced_config_map, ns, shard("planted", ns, run, COMPONENT_RESULTS, fake), says=store_says)
    refused(core.create_namespaced_config_map, ns, {"metadata": {"name": f"{victim}-results-1"}, "data": fake},
            says=store_says)  # fmt: skip
    refused(core.create_namespaced_config_map, ns, shard("aaa-verdicts-0", ns, run, COMPONENT_VERDICTS, {}),
            says=store_says)  # fmt: skip
    for name in st["resultConfigMaps"] + run["spec"]["payload"]["configMaps"]:  # RBAC: no patch, no delete
        refused(core.patch_namespaced_config_map, name, ns, {"data": fake})
        refused(core.delete_namespaced_config_map, name, ns)
    runs = ("wpbench-k8s.org", "v1alpha1", ns, "wpbenchruns", victim)
    owner_says = "only the run's submitter (system:serviceaccount:" + ns + ":alice)"
    refused(custom.patch_namespaced_custom_object, *runs, {"spec": {"requeue": 1}}, says=owner_says)
    refused(custom.patch_namespaced_custom_object, *runs, {"spec": {"cancel": True}}, says=owner_says)
    refused(custom.delete_namespaced_custom_object, *runs, says=owner_says)
    refused(custom.patch_namespaced_custom_object_status, *runs, {"status": {"passed": 2}})  # RBAC
    forged = json.loads(json.dumps(run))
    forged["metadata"] = {
        "name": "forged",
        "annotations": {"wpbench-k8s.org/submitted-by": f"system:serviceaccount:{ns}:alice"},
    }
    forged.pop("status")
    refused(custom.create_namespaced_custom_object, "wpbench-k8s.org", "v1alpha1", ns, "wpbenchruns", forged,
            says="must name its submitter")  # fmt: skip
    # Alice may still change her own run, but never what it grades.
    alice_api = k8s.CustomObjectsApi(config.new_client_from_config(str(alice)))
    refused(alice_api.patch_namespaced_custom_object, *runs, {"spec": {"manifestDigest": "sha256:" + "0" * 64}},
            says="cannot change once it is submitted")  # fmt: skip

    # Where the store policy does not apply (a cluster without it; here a cluster admin, whom it exempts),
    # planted state is ignored and reported. A result shard for the victim, owned by it:
    # (Its records also sit under keys of their own, which only the planted cache entry below points at.)
    shadow = {f"x-{key}": value for key, value in fake.items()}
    planted = shard(f"{victim}-a-results-5", ns, run, COMPONENT_RESULTS, {**fake, **shadow})  # listed first
    space.cluster.core.create_namespaced_config_map(ns, planted)
    again, summary_again, err = fetched(alice, ns, victim, tmp_path / "after.jsonl")
    assert again == before  # byte for byte
    assert summary_again == summary
    assert f"warning: ignored ConfigMap {victim}-a-results-5" in err, err
    # ... and a cache entry giving a pass to the (test, code) pairs the next run grades:
    config_ = load_config(None, {"dataset.path": str(mini_suite), "grader.image": grader_image})
    manifest = plan_run(config_, "completions", completions=answers)
    manifest.grader.image_id = st["graderImageID"]
    keys = {verdict_key(manifest, item.task): f"x-{record_key(item.item_id)}" for item in manifest.items if item.task}
    space.cluster.core.create_namespaced_config_map(ns, shard("aaa-verdicts-0", ns, run, COMPONENT_VERDICTS, keys))
    second = cli_as(alice, ns, "submit", "--completions", str(answers), "--dataset-path", str(mini_suite),
                    "--image", grader_image, "--max-in-flight", "2").stdout.strip()  # fmt: skip
    st2 = wait_phase(space, ns, second)["status"]
    why = f"{st2}\n{run_object(space, ns, victim)['status']}\n{events_of(space, ns, second)}\n{space.controller_log()}"
    assert (st2["phase"], st2["done"], st2["passed"], st2["cached"]) == ("Succeeded", 2, 0, 2), why
    cached, _, _ = fetched(alice, ns, second, tmp_path / "cached.jsonl")

    def without(line: str) -> dict[str, Any]:
        rec = json.loads(line)
        return {k: v for k, v in rec.items() if k not in ("run_id", "cached")}

    assert [without(x) for x in cached.decode().splitlines()] == [without(x) for x in before.decode().splitlines()]
    said = events_of(space, ns, second)
    assert any("IgnoredUntrustedObject" in e and "aaa-verdicts-0" in e for e in said), said
    # The planted result shard too, once a lookup read the victim's shards: on the victim's run as well.
    said = events_of(space, ns, victim)
    assert any("IgnoredUntrustedObject" in e and f"{victim}-a-results-5" in e for e in said), said

    # A run whose declared suite does not add up is refused, with the reason, and grades nothing.
    from wpbench_k8s.cluster import submit
    from wpbench_k8s.cluster.connection import Cluster as Connection
    from wpbench_k8s.kube.objects import RunSettings

    conn = Connection(str(mallory), None, ns)
    honest = table.model_dump_json()
    lie = table.model_copy(update={"digest": "sha256:" + "3" * 64}).model_dump_json()
    altered = plan_run(config_, "completions", completions=answers)
    altered.tests[TESTS[0]]["title"] = "an easier test under the suite's name"
    for name, plan, suite_json, says in (
        ("lying-digest", manifest, lie, "declared suite digest sha256:333"),
        ("altered-test", altered, honest, f"test '{TESTS[0]}' differs from suite"),
    ):
        submit(conn, plan, RunSettings(name=name, namespace=ns, max_in_flight=2), suite_json)
        st3 = wait_phase(space, ns, name, 120)["status"]
        assert st3["phase"] == "Failed" and says in st3["message"], st3
        assert any(e.startswith("RunRefused") for e in events_of(space, ns, name))
    # Payload chunks under other names than the ones grader pods mount (`<run>-payload-N`) are refused too:
    # otherwise the checked chunks and the mounted ones could differ.
    from wpbench_k8s.cluster.submit import whoami
    from wpbench_k8s.kube.objects import payload_config_maps
    from wpbench_k8s.kube.objects import run_object as run_body

    settings = RunSettings(name="renamed", namespace=ns, max_in_flight=2)
    maps = payload_config_maps(manifest, settings, None, honest)
    for n, cm in enumerate(maps):
        cm.metadata.name = f"elsewhere-{n}"
        core.create_namespaced_config_map(ns, cm)
    body = run_body(manifest, settings, [f"elsewhere-{n}" for n in range(len(maps))], submitted_by=whoami(conn),
                    suite_digest=table.digest)  # fmt: skip
    custom.create_namespaced_custom_object("wpbench-k8s.org", "v1alpha1", ns, "wpbenchruns", body)
    st4 = wait_phase(space, ns, "renamed", 120)["status"]
    assert st4["phase"] == "Failed" and "spec.payload.configMaps must be renamed-payload-0" in st4["message"], st4
    jobs = space.cluster.batch.list_namespaced_job(
        ns, label_selector="wpbench-k8s.org/run in (lying-digest,altered-test,renamed)"
    )
    assert not jobs.items


def test_two_namespaces_two_submitters_reach_nothing_of_each_other(
    space: Space, mini_suite: Path, grader_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WPBENCH_NO_CACHE", "0")  # the cache on: what the other namespace stored is never reused
    ns1 = space.namespace
    ns2 = f"{ns1}-b"
    space.cluster.core.create_namespace(
        {
            "metadata": {
                "name": ns2,
                "labels": {**PSA, TEST_LABEL: "true"},
                "annotations": {OWNER_ANNOTATION: owner_tag()},
            }
        }
    )
    try:
        space.install_controller(f"namespaces.runs={{{ns1},{ns2}}}")
        ensure_crd_fields(space.cluster)
        alice, bob = submitter(space, ns1, "alice"), submitter(space, ns2, "bob")
        answers = completions(tmp_path)
        victim = cli_as(alice, ns1, "submit", "--completions", str(answers), "--dataset-path", str(mini_suite),
                        "--image", grader_image, "--max-in-flight", "2").stdout.strip()  # fmt: skip
        run = wait_phase(space, ns1, victim)
        assert run["status"]["suiteVerified"] is False  # no suite pinned: it still runs, and says so
        before, summary, err = fetched(alice, ns1, victim, tmp_path / "before.jsonl")
        assert "not verified: no cluster admin pinned this suite" in err, err
        assert summary["metadata"]["suite_verified"] is False

        api = config.new_client_from_config(str(bob))
        core, custom = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
        runs = ("wpbench-k8s.org", "v1alpha1", ns1, "wpbenchruns", victim)
        refused(custom.get_namespaced_custom_object, *runs)  # RBAC: nothing in the other namespace
        refused(custom.patch_namespaced_custom_object, *runs, {"spec": {"cancel": True}})
        refused(custom.delete_namespaced_custom_object, *runs)
        refused(core.list_namespaced_config_map, ns1)
        refused(core.create_namespaced_config_map, ns1, shard("planted", ns1, run, COMPONENT_RESULTS, passing(before)))
        # In his own namespace the store policy refuses stored state too.
        refused(core.create_namespaced_config_map, ns2, shard("planted", ns2, run, COMPONENT_RESULTS, passing(before)),
                says="written by the controller only")  # fmt: skip
        # His run of the same answers: the cache is per namespace, so nothing of the other team's is reused.
        other = cli_as(bob, ns2, "submit", "--completions", str(answers), "--dataset-path", str(mini_suite),
                       "--image", grader_image, "--max-in-flight", "2").stdout.strip()  # fmt: skip
        st = wait_phase(space, ns2, other)["status"]
        assert (st["phase"], st["done"], st["passed"], st["cached"]) == ("Succeeded", 2, 0, 0), st
        refused(k8s.CoreV1Api(config.new_client_from_config(str(alice))).list_namespaced_config_map, ns2)
        again, summary_again, _ = fetched(alice, ns1, victim, tmp_path / "after.jsonl")
        assert again == before and summary_again == summary
    finally:
        space.cluster.kubectl("delete", "namespace", ns2, "--wait=false", check=False)
