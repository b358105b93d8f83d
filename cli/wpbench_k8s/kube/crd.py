"""The WPBenchRun custom resource: one benchmark run submitted to the cluster.

The chart ships the CRD built here as a template (`charts/wpbench-k8s/templates/crd.yaml`, kept in
sync by a test), so `helm upgrade` upgrades it (Helm installs `crds/` once and never again); its
`helm.sh/resource-policy: keep` leaves it, and with it every run and stored result, on
`helm uninstall`. Only the release that owns it renders it (a `lookup` guard), so several releases
can share a cluster. `make chart-crd` regenerates the file.
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

from wpbench_k8s.kube.names import GROUP as GROUP
from wpbench_k8s.kube.placement import NAME_PATTERN

VERSION = "v1alpha1"
MAX_CANDIDATES_PER_POD = 100  # items one fast-mode grader pod grades (`submit --candidates-per-pod`)
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "WPBenchRun"
PLURAL = "wpbenchruns"
SINGULAR = "wpbenchrun"
SHORT_NAMES = ["wpbr"]
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Cancelled")
TERMINAL_PHASES = ("Succeeded", "Failed", "Cancelled")

_INT = {"type": "integer", "minimum": 0}
_STR = {"type": "string"}
_NAME = {"type": "string", "maxLength": 63, "pattern": NAME_PATTERN}
_CLASS = {"type": "string", "maxLength": 253}

PLACEMENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Pod-spec fields for this run's grader pods; each one set replaces the release's default.",
    "properties": {
        "imagePullSecrets": {"type": "array", "items": _CLASS, "description": "Secret names (no registry here)."},
        "nodeSelector": {"type": "object", "additionalProperties": _STR},
        "tolerations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "key": _STR,
                    "operator": {"type": "string", "enum": ["Exists", "Equal"]},
                    "value": _STR,
                    "effect": {"type": "string", "enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]},
                    "tolerationSeconds": {"type": "integer"},
                },
            },
        },
        "affinity": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "priorityClassName": _CLASS,
        "runtimeClassName": {**_CLASS, "description": "e.g. gvisor: the RuntimeClass grader pods run under."},
    },
}

SPEC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["runId", "manifestDigest", "payload"],
    "properties": {
        "runId": {"type": "string", "minLength": 1, "description": "The run manifest's run_id (records carry it)."},
        "manifestDigest": {
            "type": "string",
            "pattern": "^sha256:[0-9a-f]{64}$",
            "description": "sha256 of the manifest's canonical JSON; the controller refuses a payload that differs.",
        },
        "mode": {"type": "string", "enum": ["reference", "exploits", "completions", "models"]},
        "suite": _STR,
        "items": {**_INT, "description": "Candidates to grade."},
        "payload": {
            "type": "object",
            "required": ["configMaps"],
            "description": "ConfigMaps (owned by this run) holding the manifest in chunks.",
            "properties": {"configMaps": {"type": "array", "minItems": 1, "items": _STR}},
        },
        "maxInFlight": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Grader Jobs at once."},
        "infraRetries": {"type": "integer", "minimum": 0, "maximum": 10, "description": "Infra retries per item."},
        "candidatesPerPod": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_CANDIDATES_PER_POD,
            "description": "Fast mode (fork_per_test) only: items one grader pod grades in a sequence.",
        },
        "graderImage": {**_STR, "description": "Informational: the manifest's grader image."},
        "suiteDigest": {
            **_STR,
            "description": "The suite digest the run declares; the controller recomputes it from the payload and "
            "refuses the run when it differs (wpbench_k8s.verified).",
        },
        "cancel": {"type": "boolean", "description": "Set by `wpbench-k8s cancel`: stop and delete running Jobs."},
        "cache": {
            "type": "boolean",
            "description": "Reuse verdicts stored by earlier runs in this namespace for the same task, image and "
            "profile (reference, exploits, completions; default true; `submit --no-cache` sets false).",
        },
        "queue": {
            **_NAME,
            "description": "A Kueue LocalQueue of this namespace: grader Jobs are created suspended with "
            "kueue.x-k8s.io/queue-name and Kueue admits them (default: the release's grader.queue).",
        },
        "workloadPriorityClass": {
            **_NAME,
            "description": "A Kueue WorkloadPriorityClass for the run's grader Jobs (only with a queue).",
        },
        "placement": PLACEMENT_SCHEMA,
        "requeue": {
            **_INT,
            "description": "Raised by `wpbench-k8s requeue`: a finished run whose status.requeued is lower is opened "
            "again; its infra errors and never-graded items are graded.",
        },
    },
}

STATUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "phase": {"type": "string", "enum": list(PHASES)},
        "message": _STR,
        "observedGeneration": {"type": "integer"},
        "total": _INT,
        "done": _INT,
        "inFlight": _INT,
        "passed": _INT,
        "failed": _INT,
        "errors": _INT,
        "infraErrors": _INT,
        "infraRetries": _INT,
        "progress": _STR,
        "score": {"type": "number"},
        "cached": {**_INT, "description": "Records whose verdict was reused from an earlier run (not graded)."},
        "requeued": {**_INT, "description": "The last spec.requeue the controller acted on."},
        "controller": {
            **_STR,
            "description": "The controller instance (release namespace/name) that accepted the run; set once, "
            "other instances watching the namespace ignore the run.",
        },
        "graderImageID": {**_STR, "description": "The grader image id the kubelet reported (probe or grader pod)."},
        "resultConfigMaps": {
            "type": "array",
            "items": _STR,
            "description": "The run's result shards, each listed before the controller creates it: readers trust "
            "no other ConfigMap.",
        },
        "verdictConfigMaps": {"type": "array", "items": _STR, "description": "The run's verdict-index shards."},
        "generatedConfigMaps": {"type": "array", "items": _STR, "description": "The run's generated candidates."},
        "manifestDigest": {**_STR, "description": "The manifest digest the controller accepted and grades."},
        "suite": _STR,
        "suiteDigest": {**_STR, "description": "The suite digest the controller recomputed from the payload."},
        "suiteVerified": {
            "type": "boolean",
            "description": "Whether a cluster admin pinned this suite with this digest (chart value trustedSuites).",
        },
        "ignored": {
            "type": "array",
            "items": _STR,
            "description": "ConfigMaps that claimed to be this run's stored state without being listed by the "
            "controller: ignored (each also an Event on the run).",
        },
        "startTime": {"type": "string", "format": "date-time"},
        "completionTime": {"type": "string", "format": "date-time"},
        "conditions": {
            "type": "array",
            "description": "Ready (the controller accepted the run), Running, Succeeded, Failed: "
            "`kubectl wait --for=condition=Succeeded wpbenchrun/NAME`.",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
            "items": {
                "type": "object",
                "required": ["type", "status"],
                "properties": {
                    "type": _STR,
                    "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                    "reason": _STR,
                    "message": _STR,
                    "observedGeneration": {"type": "integer", "minimum": 0},
                    "lastTransitionTime": {"type": "string", "format": "date-time"},
                },
            },
        },
    },
}

PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Progress", "type": "string", "jsonPath": ".status.progress"},
    {"name": "Score", "type": "number", "jsonPath": ".status.score"},
    {"name": "Passed", "type": "integer", "jsonPath": ".status.passed", "priority": 1},
    {"name": "Infra", "type": "integer", "jsonPath": ".status.infraErrors", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def crd() -> dict[str, Any]:
    """The CustomResourceDefinition for WPBenchRun (namespaced, status subresource, printer columns)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{PLURAL}.{GROUP}",
            "labels": {"app.kubernetes.io/part-of": "wpbench-k8s"},
            # Uninstalling the chart must not delete the CRD: that would delete every run and its results.
            "annotations": {"helm.sh/resource-policy": "keep"},
        },
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": SHORT_NAMES,
                "categories": ["wpbench"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "A WP-Bench grading run: one grader Job per candidate.",
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": _STR,
                                "kind": _STR,
                                "metadata": {"type": "object"},
                                "spec": SPEC_SCHEMA,
                                "status": STATUS_SCHEMA,
                            },
                        }
                    },
                }
            ],
        },
    }


# The chart owns the CRD only where no one else does: one release per cluster installs and upgrades it;
# a CRD that exists already and belongs to no release of this name (another release, `kubectl apply`,
# chart 0.1.x's crds/) is left as it is, so several releases can share a cluster.
_GUARD_OPEN = """{{- $crd := lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" "%s" }}
{{- if or (not $crd) (eq (dig "metadata" "annotations" "meta.helm.sh/release-name" "" $crd) .Release.Name) }}
"""
_GUARD_CLOSE = "{{- end }}\n"


def crd_yaml() -> str:
    """The chart's `templates/crd.yaml`: the CRD, rendered only by the release that owns it."""
    header = "# Generated by `make chart-crd` (wpbench_k8s.kube.crd.crd_yaml); do not edit by hand.\n"
    body = yaml.safe_dump(crd(), sort_keys=False)
    guard = _GUARD_OPEN % f"{PLURAL}.{GROUP}"
    return f"{header}{guard}{body}{_GUARD_CLOSE}"


def crd_from_template(text: str) -> dict[str, Any]:
    """The CRD inside the chart's template (the guard lines dropped)."""
    body = "".join(line for line in text.splitlines(True) if not line.startswith("{{"))
    doc: dict[str, Any] = yaml.safe_load(body)
    return doc


if __name__ == "__main__":
    sys.stdout.write(crd_yaml())
