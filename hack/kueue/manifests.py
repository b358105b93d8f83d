"""Kueue's install manifests for the local cluster, read from the module's own config/ tree.

What a user gets from Kueue's release manifests (config/default: CRDs, the manager's RBAC, its webhooks),
assembled without kustomize, with the changes this cluster needs (it has no Service routing and no DNS):

- the manager runs on the host network and serves its webhooks on the node address, so the API server
  calls them by URL (`clientConfig.url`) instead of through a Service; the serving certificate is signed
  by the cluster CA (`--ca-file`), which every webhook and conversion stanza names as its caBundle;
- only the `batch/job` integration is on, `manageJobsWithoutQueueName: false`, and the Job webhooks only
  see Jobs that carry `kueue.x-k8s.io/queue-name` (an objectSelector): a Job without the label never
  reaches Kueue, so the cluster's other users are untouched even while Kueue is down;
- no visibility API server (an APIService the API server could not reach would break discovery and
  namespace deletion for everyone) and no metrics endpoint.

Usage: python manifests.py --module DIR --address IP --image IMAGE --ca-file FILE --api-port PORT > kueue.yaml
"""

from __future__ import annotations

import argparse
import base64
import sys
from pathlib import Path
from typing import Any

import yaml

NAMESPACE = "kueue-system"
PREFIX = "kueue-"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
LABELS = {"app.kubernetes.io/name": "kueue", "app.kubernetes.io/part-of": "wpbench-local"}
SELECTOR = {"control-plane": "controller-manager"}
SECRET = "kueue-webhook-server-cert"
RBAC_FILES = (
    "service_account.yaml",
    "role.yaml",
    "role_binding.yaml",
    "leader_election_role.yaml",
    "leader_election_role_binding.yaml",
    "manager_secrets_role.yaml",
    "manager_secrets_role_binding.yaml",
)
# The CRDs whose versions convert through the manager (config/components/crd/patches/webhook_in_*.yaml).
CONVERTED = ("localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters")


def load_all(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _renamed(doc: dict[str, Any]) -> dict[str, Any]:
    """kustomize's namePrefix and namespace for the RBAC objects, by hand."""
    meta = doc["metadata"]
    meta["name"] = PREFIX + meta["name"]
    if doc["kind"] in ("ServiceAccount", "Role", "RoleBinding"):
        meta["namespace"] = NAMESPACE
    meta.setdefault("labels", {}).update(LABELS)
    if "roleRef" in doc:
        doc["roleRef"]["name"] = PREFIX + doc["roleRef"]["name"]
    for subject in doc.get("subjects") or []:
        subject["name"] = PREFIX + subject["name"]
        subject["namespace"] = NAMESPACE
    return doc


def _client_config(base: str, path: str, ca: str) -> dict[str, Any]:
    return {"url": f"{base}{path}", "caBundle": ca}


def _webhooks(doc: dict[str, Any], base: str, ca: str) -> dict[str, Any]:
    """Kueue's own objects and batch Jobs; nothing for integrations that are off (pods, Deployments, ...)."""
    kept = []
    for hook in doc["webhooks"]:
        groups = {g for rule in hook.get("rules") or [] for g in rule.get("apiGroups") or []}
        if groups == {"kueue.x-k8s.io"}:
            pass
        elif groups == {"batch"}:
            hook["objectSelector"] = {"matchExpressions": [{"key": QUEUE_LABEL, "operator": "Exists"}]}
            hook["namespaceSelector"] = {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", NAMESPACE]}
                ]
            }
        else:
            continue
        hook["clientConfig"] = _client_config(base, hook["clientConfig"]["service"]["path"], ca)
        kept.append(hook)
    doc["webhooks"] = kept
    doc["metadata"]["name"] = PREFIX + doc["metadata"]["name"]
    doc["metadata"].setdefault("labels", {}).update(LABELS)
    return doc


def _crd(doc: dict[str, Any], base: str, ca: str) -> dict[str, Any]:
    if doc["spec"]["names"]["plural"] in CONVERTED:
        doc["spec"]["conversion"] = {
            "strategy": "Webhook",
            "webhook": {"clientConfig": _client_config(base, "/convert", ca), "conversionReviewVersions": ["v1"]},
        }
    doc["metadata"].setdefault("labels", {}).update(LABELS)
    return doc


def manager_config(address: str, webhook_port: int, health_port: int) -> dict[str, Any]:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"{address}:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": address, "port": webhook_port},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "integrations": {"frameworks": ["batch/job"]},
        "clientConnection": {"qps": 50, "burst": 100},
    }


def deployment(image: str, address: str, api_port: int, health_port: int) -> dict[str, Any]:
    certs = [
        {"name": "certs", "mountPath": "/tmp/k8s-webhook-server/serving-certs", "readOnly": True},
        # read at start even with metrics off, when Kueue does not manage certificates itself
        {"name": "certs", "mountPath": "/etc/kueue/metrics/certs", "readOnly": True},
        {"name": "config", "mountPath": "/etc/kueue", "readOnly": True},
    ]
    probe = {"path": "/healthz", "port": health_port, "host": address}
    container = {
        "name": "manager",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": [
            "--config=/etc/kueue/controller_manager_config.yaml",
            "--zap-log-level=2",
            "--feature-gates=VisibilityOnDemand=false",
        ],
        # The host network has no route to the Service range: talk to the API server where it listens.
        "env": [
            {"name": "KUBERNETES_SERVICE_HOST", "value": address},
            {"name": "KUBERNETES_SERVICE_PORT", "value": str(api_port)},
        ],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "livenessProbe": {"httpGet": probe, "initialDelaySeconds": 15, "periodSeconds": 20},
        "readinessProbe": {"httpGet": {**probe, "path": "/readyz"}, "initialDelaySeconds": 2, "periodSeconds": 5},
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
        "volumeMounts": certs,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "kueue-controller-manager", "namespace": NAMESPACE, "labels": {**LABELS, **SELECTOR}},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},  # one host port: the old pod goes before the new one binds it
            "selector": {"matchLabels": SELECTOR},
            "template": {
                "metadata": {"labels": {**LABELS, **SELECTOR}},
                "spec": {
                    "serviceAccountName": "kueue-controller-manager",
                    "hostNetwork": True,
                    "enableServiceLinks": False,
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "terminationGracePeriodSeconds": 10,
                    "containers": [container],
                    "volumes": [
                        {"name": "certs", "secret": {"secretName": SECRET}},
                        {"name": "config", "configMap": {"name": "kueue-manager-config"}},
                    ],
                },
            },
        },
    }


def manifests(module: Path, address: str, image: str, ca_pem: bytes, api_port: int,
              webhook_port: int, health_port: int) -> list[dict[str, Any]]:  # fmt: skip
    config = module / "config" / "components"
    ca = base64.b64encode(ca_pem).decode()
    base = f"https://{address}:{webhook_port}"
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE, "labels": dict(LABELS)}}
    ]
    for crd_file in sorted((config / "crd" / "bases").glob("*.yaml")):
        docs.extend(_crd(d, base, ca) for d in load_all(crd_file))
    for name in RBAC_FILES:
        docs.extend(_renamed(d) for d in load_all(config / "rbac" / name))
    docs.extend(_webhooks(d, base, ca) for d in load_all(config / "webhook" / "manifests.yaml"))
    cfg = yaml.safe_dump(manager_config(address, webhook_port, health_port), sort_keys=False)
    docs.append(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "kueue-manager-config", "namespace": NAMESPACE, "labels": dict(LABELS)},
            "data": {"controller_manager_config.yaml": cfg},
        }
    )
    docs.append(deployment(image, address, api_port, health_port))
    return docs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", type=Path, required=True, help="sigs.k8s.io/kueue@VERSION in the module cache")
    parser.add_argument("--address", required=True, help="the node address the webhooks are served on")
    parser.add_argument("--image", required=True)
    parser.add_argument("--ca-file", type=Path, required=True, help="the CA that signed the serving certificate")
    parser.add_argument("--api-port", type=int, required=True)
    parser.add_argument("--webhook-port", type=int, default=19443)
    parser.add_argument("--health-port", type=int, default=19444)
    args = parser.parse_args(argv)
    docs = manifests(args.module, args.address, args.image, args.ca_file.read_bytes(), args.api_port,
                     args.webhook_port, args.health_port)  # fmt: skip
    yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
