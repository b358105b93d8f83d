"""Names, labels and selectors of everything this project puts into a cluster: written here once.

Object names are deterministic (the same item of the same run always gets the same Job name), so a
create that answers 409 means "a previous pass already made it".
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from wpbench_k8s import __version__

GROUP = "wpbench-k8s.org"
LABEL_RUN = f"{GROUP}/run"
LABEL_TEST = f"{GROUP}/test"
LABEL_MODEL = f"{GROUP}/model"
LABEL_ITEM = f"{GROUP}/item"  # a hash of the item id: unique, short, always a valid label value
LABEL_ATTEMPT = f"{GROUP}/attempt"  # 1, 2, ...: each grader attempt is its own Job (of a sequence: its unit's)
ANNOTATION_ITEM_ID = f"{GROUP}/item-id"  # the item whose label the Job's every attempt carries (its unit's first)
# A Job grading several items in one fast-mode sequence (`submit --candidates-per-pod`): their ids, in the order
# the grader takes them, and each item's attempt number (JSON lists). Absent: the Job grades ANNOTATION_ITEM_ID.
ANNOTATION_ITEM_IDS = f"{GROUP}/item-ids"
ANNOTATION_ITEM_ATTEMPTS = f"{GROUP}/item-attempts"
ANNOTATION_TEST_IDS = f"{GROUP}/test-ids"  # their tests, in the same order (`wpbench-k8s logs` finds a test's pod)
ANNOTATION_TEST_ID = f"{GROUP}/test-id"
ANNOTATION_MODEL = f"{GROUP}/model"
ANNOTATION_ATTEMPT_REASON = f"{GROUP}/previous-attempt"  # why the attempt before this one was retried
# On a grader Job: Kueue deactivated its Workload (spec.active false), so it is never admitted again; the
# value says why. The controller writes it (controller/wpbench_controller/kueue.py); the attempt is infra.
ANNOTATION_KUEUE_DEACTIVATED = f"{GROUP}/kueue-deactivated"
# On a run: the user who submitted it, as the API server names them (the runs admission policy checks it).
ANNOTATION_SUBMITTED_BY = f"{GROUP}/submitted-by"
MANAGED_BY = "wpbench-k8s"
COMPONENT_GRADER = "grader"
COMPONENT_RUN = "run"
COMPONENT_PAYLOAD = "payload"
COMPONENT_RESULTS = "results"
COMPONENT_GENERATED = "generated"
COMPONENT_VERDICTS = "verdicts"  # the verdict-cache index of a run (controller.verdicts)
COMPONENT_PROBE = "image-probe"  # the pod that learns the grader image id before a cached run grades
COMPONENT_NETWORK_POLICY = "network-policy"
GRADER_CONTAINER = "grader"
MAX_RUN_NAME = 40

POD_SECURITY_LABELS = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
    "pod-security.kubernetes.io/audit": "restricted",
    "pod-security.kubernetes.io/warn": "restricted",
}

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def short_hash(text: str, length: int = 10) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def label_value(text: str) -> str:
    """`text` as a valid label value (<= 63 chars); lossy values keep a hash suffix so they stay unique."""
    if len(text) <= 63 and _LABEL_VALUE.match(text):
        return text
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-_.")
    return f"{cleaned[:52].strip('-_.')}-{short_hash(text, 8)}".strip("-")


def dns_label(*parts: str, max_len: int = 63) -> str:
    """A DNS-1123 label from `parts` (lowercase, alphanumerics and '-'); long input keeps a hash suffix."""
    joined = "-".join(p for p in parts if p)
    cleaned = re.sub(r"[^a-z0-9-]+", "-", joined.lower()).strip("-")
    cleaned = re.sub(r"-{2,}", "-", cleaned)
    if len(cleaned) <= max_len and cleaned == joined:
        return cleaned
    suffix = short_hash(joined, 8)
    return f"{cleaned[: max_len - len(suffix) - 1].rstrip('-')}-{suffix}"


def job_name(run_name: str, item_id: str, attempt: int = 1) -> str:
    """Deterministic Job name for one attempt at one item of one run."""
    prefix = dns_label(run_name, max_len=26)
    readable = re.sub(r"[^a-z0-9]+", "-", item_id.lower()).strip("-")[:18].strip("-")
    return dns_label(prefix, readable, short_hash(item_id, 10), f"a{attempt}", max_len=63)


def item_label(item_id: str) -> str:
    return short_hash(item_id, 16)


def run_selector(run_name: str, component: str | None = None) -> str:
    """The label selector for a run's objects (of one component when given)."""
    selector = f"{LABEL_RUN}={label_value(run_name)}"
    return f"{selector},app.kubernetes.io/component={component}" if component else selector


def component_selector(component: str) -> str:
    """Every object of one component this project made, in any run of the namespace."""
    return f"app.kubernetes.io/managed-by={MANAGED_BY},app.kubernetes.io/component={component}"


def managed_graders_selector() -> str:
    """Every grader Job or pod this project made, in any run."""
    return f"app.kubernetes.io/managed-by={MANAGED_BY},app.kubernetes.io/component={COMPONENT_GRADER}"


def run_labels(run_name: str, component: str) -> dict[str, str]:
    """Labels on every object of a run: app.kubernetes.io/* plus the run."""
    return {
        "app.kubernetes.io/name": "wpbench-k8s",
        "app.kubernetes.io/instance": label_value(run_name),
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": "wpbench-k8s",
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "app.kubernetes.io/version": label_value(__version__),
        LABEL_RUN: label_value(run_name),
    }


def grader_labels(run_name: str, *, test_id: str, model: str, item_id: str, attempt: int = 1) -> dict[str, str]:
    """Labels on every grader Job and pod: the run's, plus test, model, item and attempt."""
    return {
        **run_labels(run_name, COMPONENT_GRADER),
        "app.kubernetes.io/name": "wpbench-grader",
        LABEL_TEST: label_value(test_id),
        LABEL_MODEL: label_value(model),
        LABEL_ITEM: item_label(item_id),
        LABEL_ATTEMPT: str(attempt),
    }


def pod_selector(run_name: str) -> dict[str, str]:
    """The labels every grader pod of one run carries (the NetworkPolicy and `kubectl logs -l` use them)."""
    return {"app.kubernetes.io/component": COMPONENT_GRADER, LABEL_RUN: label_value(run_name)}


def annotation_list(annotations: Mapping[str, Any], key: str) -> list[str]:
    """A JSON list annotation (ANNOTATION_ITEM_IDS, ...) as strings: [] when absent or not a list."""
    try:
        doc = json.loads(str(annotations.get(key) or "[]"))
    except ValueError:
        return []
    return [str(v) for v in doc] if isinstance(doc, list) else []
