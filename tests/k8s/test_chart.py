"""The Helm chart: lint-clean (the real Helm library via helm-sdkpy on Python 3.12, when available),
values valid against values.schema.json, the CRD in sync with the controller's, least-privilege RBAC."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml
from clusterkit import REPO

from wpbench_k8s.kube.crd import crd, crd_from_template, crd_yaml

CHART = REPO / "charts" / "wpbench-k8s"
HELM_VENV = REPO / "build" / "helm-venv"
LINT = """
import asyncio, json, sys
import helm_sdkpy
res = asyncio.run(helm_sdkpy.Lint(helm_sdkpy.Configuration()).run(sys.argv[1]))
print(json.dumps({"severities": [m["Severity"] for m in res.get("Messages") or []],
                  "paths": [m["Path"] for m in res.get("Messages") or []], "errors": len(res.get("Errors") or [])}))
"""


def python312() -> str | None:
    """A Python >= 3.12 that really runs (a pyenv shim answers 127 when that version is not selected)."""
    candidates = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python")))
    candidates += [p for p in (shutil.which("python3.12"), shutil.which("python3.13")) if p]
    for candidate in candidates:
        if subprocess.run([candidate, "-c", "import sys"], capture_output=True, check=False).returncode == 0:
            return candidate
    return None


@pytest.fixture(scope="session")
def helm_python() -> str:
    py = HELM_VENV / "bin" / "python"
    if not py.exists():
        base = python312()
        if base is None:
            pytest.skip("helm-sdkpy needs Python >= 3.12; none found (structural chart tests still run)")
        subprocess.run([base, "-m", "venv", str(HELM_VENV)], check=True)
        res = subprocess.run(
            [str(HELM_VENV / "bin" / "pip"), "install", "-q", "helm-sdkpy"], capture_output=True, text=True
        )
        if res.returncode != 0:
            pytest.skip(f"helm-sdkpy not installable here: {res.stderr[-300:]}")
    return str(py)


def lint(helm_python: str, chart: Path) -> dict:
    res = subprocess.run([helm_python, "-c", LINT, str(chart)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_chart_lints_clean(helm_python):
    result = lint(helm_python, CHART)
    assert result["errors"] == 0 and max(result["severities"] or [0]) <= 1, result  # INFO at most (no icon)


def test_lint_catches_a_bad_value(helm_python, tmp_path):
    bad = tmp_path / "chart"
    shutil.copytree(CHART, bad)
    values = yaml.safe_load((bad / "values.yaml").read_text())
    values["controller"]["maxInFlight"] = 0
    (bad / "values.yaml").write_text(yaml.safe_dump(values))
    assert lint(helm_python, bad)["errors"] > 0


def test_values_match_their_schema():
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    jsonschema.Draft7Validator(schema).validate(values)
    assert schema["additionalProperties"] is False
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(schema).validate({**values, "unknown": 1})
    assert (CHART / "values.yaml").read_text().startswith("# Every key here is checked by values.schema.json")


def test_chart_crd_is_the_controllers():
    text = (CHART / "templates" / "crd.yaml").read_text()
    assert text == crd_yaml(), "regenerate: make chart-crd"
    assert crd_from_template(text) == crd()


def test_rbac_is_namespaced_and_least_privilege():
    text = (CHART / "templates" / "rbac.yaml").read_text()
    assert "ClusterRole" not in text and '"*"' not in text
    # cluster-wide objects only for tenant namespaces (namespaces.selector), and rights in every namespace only
    # when asked (rbac.tenantsClusterWide)
    tenants = (CHART / "templates" / "tenants.yaml").read_text()
    assert tenants.startswith("{{- if and .Values.rbac.create .Values.namespaces.selector }}")
    assert tenants.count("kind: ClusterRoleBinding") == 2 and '"*"' not in tenants
    wide = tenants.split("{{- if .Values.rbac.tenantsClusterWide }}")[1].split("{{- end }}")[0]
    assert "kind: ClusterRoleBinding" in wide and "name: {{ $name }}-controller" in wide
    namespaces_rule = tenants.split('resources: ["namespaces"]')[1].split("---")[0]
    assert 'verbs: ["get", "list", "watch"]' in namespaces_rule
    assert '"secrets"' not in text  # API keys reach the controller as env from the Secret, never via the API
    controller_rules = text.split("kind: RoleBinding")[0]
    job_verbs = controller_rules.split('resources: ["jobs"]')[1].split("- apiGroups")[0]
    assert '"delete"' in job_verbs
    assert '"deletecollection"' in job_verbs  # collected Jobs go by label, one request per pass
    assert '"update"' not in controller_rules.split('resources: ["configmaps"]')[1].split("- apiGroups")[0]


def test_controller_pod_is_locked_down_and_namespaces_are_restricted():
    deploy = (CHART / "templates" / "deployment.yaml").read_text()
    for needle in ("runAsNonRoot: true", "readOnlyRootFilesystem: true", "allowPrivilegeEscalation: false",
                   'drop: ["ALL"]', "type: RuntimeDefault", "type: RollingUpdate", "maxUnavailable: 0", "/healthz"):  # fmt: skip
        assert needle in deploy, needle
    ns = (CHART / "templates" / "namespaces.yaml").read_text()
    assert "pod-security.kubernetes.io/enforce: restricted" in ns
    notes = (CHART / "templates" / "NOTES.txt").read_text()
    assert "wpbench-k8s submit" in notes and "kubectl get wpbenchruns" in notes


def test_rbac_lets_owned_objects_block_owner_deletion():
    # OwnerReferencesPermissionEnforcement refuses blockOwnerDeletion without update on the owner's finalizers.
    text = (CHART / "templates" / "rbac.yaml").read_text()
    controller_rules = text.split("kind: RoleBinding")[0]
    rule = controller_rules.split('resources: ["wpbenchruns/finalizers"]')[1].split("- apiGroups")[0]
    assert '"update"' in rule


def test_run_namespaces_and_the_crd_survive_uninstall_and_upgrades():
    ns = (CHART / "templates" / "namespaces.yaml").read_text()
    assert "helm.sh/resource-policy: keep" in ns  # stored results live there
    assert "fail" in ns and "$.Release.Namespace" in ns  # a run namespace that is the release's is refused
    assert 'lookup "v1" "Namespace"' in ns  # an existing namespace not made by this release is left alone
    assert not (CHART / "crds").exists()  # Helm installs crds/ once and never upgrades it
    shipped = crd_from_template((CHART / "templates" / "crd.yaml").read_text())
    assert shipped["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_the_default_controller_image_is_one_the_makefile_builds():
    from wpbench_k8s import __version__

    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == __version__
    res = subprocess.run(["make", "-n", "controller-image"], cwd=REPO, capture_output=True, text=True, check=False)
    assert f"wpbench-controller:{chart['appVersion']}" in res.stdout, res.stdout[-2000:]
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    assert (
        "default .Chart.AppVersion .Values.image.tag" in helpers
        and "repository: wpbench-controller" in (CHART / "values.yaml").read_text()
    )


def test_liveness_reflects_the_reconcile_loop():
    deploy = (CHART / "templates" / "deployment.yaml").read_text()
    assert "--liveness-seconds=" in deploy and "--model-workers=" in deploy and "--start-seconds=" in deploy


def _helm_binary() -> str | None:
    cached = Path(os.environ.get("WPBENCH_CACHE", "/var/cache/wpbench")) / "k8s" / "v1.37.2" / "bin" / "helm"
    return str(cached) if cached.exists() else shutil.which("helm")


def helm_template(namespace: str, *sets: str) -> subprocess.CompletedProcess[str]:
    helm = _helm_binary()
    if helm is None:
        pytest.skip("no helm binary (make cluster-up builds one)")
    args = [a for s in sets for a in ("--set", s)]
    return subprocess.run([helm, "template", "rel", str(CHART), "-n", namespace, "--kube-version", "1.37.2", *args],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_helm_renders_kept_restricted_run_namespaces_and_refuses_the_release_namespace():
    res = helm_template("wpbench-system")
    assert res.returncode == 0, res.stderr
    docs = [d for d in yaml.safe_load_all(res.stdout) if d]
    (ns,) = [d for d in docs if d["kind"] == "Namespace"]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert ns["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    crd_doc = next(d for d in docs if d["kind"] == "CustomResourceDefinition")
    assert crd_doc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    role = next(d for d in docs if d["kind"] == "Role" and d["metadata"]["name"].endswith("-controller"))
    assert {"apiGroups": ["wpbench-k8s.org"], "resources": ["wpbenchruns/finalizers"], "verbs": ["update"]} in role[
        "rules"
    ]
    refused = helm_template("wpbench", "namespaces.runs={wpbench}")
    assert refused.returncode != 0 and "release namespace" in refused.stderr
    brought = helm_template("wpbench", "namespaces.runs={wpbench}", "namespaces.create=false")
    assert brought.returncode == 0, brought.stderr
    assert "kind: Namespace" not in brought.stdout


def test_submitters_get_no_verb_that_writes_trusted_state_and_the_policies_bind_the_run_namespaces():
    res = helm_template(
        "wpbench-system", "namespaces.runs={team-a,team-b}", "trustedSuites.wpk-core-v1=sha256:" + "a" * 64
    )
    assert res.returncode == 0, res.stderr
    docs = [d for d in yaml.safe_load_all(res.stdout) if d]
    submitters = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"].endswith("-submitter")]
    assert {d["metadata"]["namespace"] for d in submitters} == {"team-a", "team-b"}
    for role in submitters:
        for rule in role["rules"]:
            assert "wpbenchruns/status" not in rule["resources"]  # status is the controller's alone
            assert "override" not in rule["verbs"]
            if "configmaps" in rule["resources"]:
                assert set(rule["verbs"]) == {"get", "list", "create"}  # the payload; never patch/update/delete
            assert not {"jobs", "secrets", "events"} & set(rule["resources"])
    policies = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"}
    bindings = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert len(policies) == 2 and {b["spec"]["policyName"] for b in bindings} == set(policies)
    for binding in bindings:
        (selector,) = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
        assert selector["values"] == ["team-a", "team-b"] and binding["spec"]["validationActions"] == ["Deny"]
    controller = "system:serviceaccount:wpbench-system:rel-wpbench-k8s"
    for policy in policies.values():
        assert policy["spec"]["failurePolicy"] == "Fail"
        assert controller in json.dumps(policy["spec"]["variables"])
    deploy = next(d for d in docs if d["kind"] == "Deployment")
    env = {e["name"]: e.get("value") for e in deploy["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert json.loads(env["WPBENCH_TRUSTED_SUITES"]) == {"wpk-core-v1": "sha256:" + "a" * 64}


def test_metrics_service_always_and_a_service_monitor_only_when_enabled():
    def docs(*sets: str) -> list[dict]:
        res = helm_template("wpbench-system", *sets)
        assert res.returncode == 0, res.stderr
        return [d for d in yaml.safe_load_all(res.stdout) if d]

    default = docs()
    (service,) = [d for d in default if d["kind"] == "Service"]
    assert service["spec"]["ports"] == [{"name": "http-metrics", "port": 8080, "targetPort": "health",
                                         "protocol": "TCP"}]  # fmt: skip
    deploy = next(d for d in default if d["kind"] == "Deployment")
    labels = deploy["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"] == {k: labels[k] for k in service["spec"]["selector"]}
    assert "--log-format=text" in deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not [d for d in default if d["kind"] == "ServiceMonitor"]  # off by default: no CRD needed
    on = docs("metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.labels.release=prom",
              "controller.logFormat=json")  # fmt: skip
    (monitor,) = [d for d in on if d["kind"] == "ServiceMonitor"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1" and monitor["metadata"]["labels"]["release"] == "prom"
    (service,) = [d for d in on if d["kind"] == "Service"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == "http-metrics"
    deploy = next(d for d in on if d["kind"] == "Deployment")
    assert "--log-format=json" in deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not [d for d in docs("metrics.service=false") if d["kind"] in ("Service", "ServiceMonitor")]
    bad = helm_template("wpbench-system", "controller.logFormat=yaml")
    assert bad.returncode != 0 and "logFormat" in bad.stderr
