"""The scale benchmark reads every file of the API server's audit log, rotated ones included.

kube-apiserver rotates its audit log at 100 MB into audit-<UTC time>.log beside audit.log; a 50,050-candidate
run writes several hundred MB, and reading only audit.log once undercounted its writes fourfold.
"""

from __future__ import annotations

import json
from pathlib import Path

from wpbench_scale.kwok import KwokCluster
from wpbench_scale.scenario import read_audit


def _event(verb: str, resource: str, agent: str, at: str, name: str = "", subresource: str = "") -> str:
    ref = {"resource": resource, "name": name, **({"subresource": subresource} if subresource else {})}
    return json.dumps({"verb": verb, "objectRef": ref, "userAgent": agent, "requestReceivedTimestamp": at})


def _write(path: Path, *events: str) -> None:
    path.write_text("".join(e + "\n" for e in events))


def test_rotated_audit_files_are_read_oldest_first_with_the_current_one(tmp_path: Path) -> None:
    cluster = KwokCluster(workdir=tmp_path)
    logs = cluster.cluster_dir / "logs"
    logs.mkdir(parents=True)
    controller, submit, kcm = "wpbench-controller/0.1.0", "wpbench-k8s/0.1.0", "kube-controller-manager/v1.37.2"
    _write(
        logs / "audit-2026-12-01T00-40-00.000.log",
        _event("create", "jobs", controller, "2026-12-01T00:39:00Z", "job-b"),
        _event("create", "pods", kcm, "2026-12-01T00:39:01Z", "pod-b"),
    )
    _write(
        logs / "audit-2026-12-01T00-10-00.000.log",
        _event("create", "configmaps", submit, "2026-12-01T00:00:00Z", "payload-0"),
        _event("create", "jobs", controller, "2026-12-01T00:00:05Z", "job-a"),
        _event("create", "pods", kcm, "2026-12-01T00:00:06Z", "pod-a"),
    )
    _write(
        logs / "audit.log",
        _event("get", "pods", controller, "2026-12-01T00:41:00Z", "pod-a", subresource="log"),
        _event("get", "pods", controller, "2026-12-01T00:41:00Z", "pod-b", subresource="log"),
        _event("deletecollection", "jobs", controller, "2026-12-01T00:41:02Z"),
    )

    paths = cluster.audit_logs
    assert [p.name for p in paths] == [
        "audit-2026-12-01T00-10-00.000.log",
        "audit-2026-12-01T00-40-00.000.log",
        "audit.log",
    ]
    audit = read_audit(paths)
    assert audit["by_kind"] == {
        "create jobs": 2,
        "deletecollection jobs": 1,
        "submit: create configmaps": 1,
    }
    assert audit["submit_writes"] == 1 and len(audit["controller_writes"]) == 3
    assert audit["controller_writes"] == sorted(audit["controller_writes"])  # oldest file first
    assert len(audit["pod_creates"]) == 2
    assert dict(audit["log_reads"]) == {"pod-a": 1, "pod-b": 1}
