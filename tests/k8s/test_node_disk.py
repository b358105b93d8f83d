"""What a grader pod can leave on the node's disk, on the real local Kubernetes (`make cluster-up`).

A container's `/dev/termination-log` is a file in the kubelet's pod directory on the node's disk, mode 0666,
bind-mounted read-write: the kubelet reads at most 4 KiB of it, but nothing bounds how large it may grow. A
hostile candidate tries every way it has to write it (PHP's file functions and extensions, SQLite through
WordPress's own connection, a connection of its own, ATTACH, VACUUM INTO) and to put SQLite's temporary files
in `/dev/shm`. The test reads the node itself: every regular file the pod has there (its kubelet directory
outside the memory-backed volumes, its container log) stays within a bound, the termination log holds the
supervisor's own compact verdict, and the collector's facts ignore what it says.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from clusterkit import STATE, Space, job_pod, start_probe_job

from wpbench_k8s.kube.client import to_dict
from wpbench_k8s.kube.facts import attempt_facts
from wpbench_k8s.outcome import MAX_GRADER_OUTPUT_BYTES, Scored, decide_outcome

pytestmark = [pytest.mark.docker, pytest.mark.local_cluster]  # the node's kubelet directory on this host

KUBELET_PODS = STATE / "kubelet" / "pods"
POD_LOGS = Path("/var/log/pods")
MIB = 1 << 20
# Everything the pod may leave on the node's disk: its log (the verdict, whose candidate output is capped
# at 1 MiB per stream), the payload ConfigMap's files, etc-hosts, the termination log.
NODE_DISK_BOUND = 4 * MIB
TERMINATION_LOG_BOUND = 4096

# Each route writes (or grows) /dev/termination-log or /dev/shm; `r[name]` is true when it got through.
HOSTILE = r"""
$log = '/dev/termination-log';
$r   = array();
$try = static function ( string $name, callable $fn ) use ( &$r ) {
	try { $r[ $name ] = true === $fn(); } catch ( \Throwable $e ) { $r[ $name ] = false; }
};
$big = static function ( PDO $pdo, string $schema ): bool {
	$pdo->exec( "CREATE TABLE IF NOT EXISTS $schema.t ( a BLOB )" );
	for ( $i = 0; $i < 32; $i++ ) { $pdo->exec( "INSERT INTO $schema.t VALUES ( randomblob( 1048576 ) )" ); }
	return 32 === (int) $pdo->query( "SELECT count(*) FROM $schema.t" )->fetchColumn();
};
$try( 'file_put_contents', fn() => false !== @file_put_contents( $log, str_repeat( 'x', 1 << 20 ), FILE_APPEND ) );
$try( 'spl_file', fn() => false !== ( new SplFileObject( $log, 'a' ) )->fwrite( 'x' ) );
$try( 'error_log', fn() => @error_log( 'x', 3, $log ) );
$try( 'xmlwriter', function () use ( $log ) { $w = new XMLWriter(); return @$w->openUri( $log ) && false !== $w->writeRaw( 'x' ); } );
$try( 'sqlite3_open', function () use ( $log ) { $db = new SQLite3( $log ); return false !== @$db->exec( 'CREATE TABLE t ( a )' ); } );
$try( 'pdo_open', fn() => false !== ( new PDO( "sqlite:$log" ) )->exec( 'CREATE TABLE t ( a )' ) );
// VACUUM INTO needs an empty target: the kubelet's file is, until something writes it.
$try( 'wordpress_pdo_vacuum_into', function () use ( $log ) {
	$pdo = $GLOBALS['@pdo'];
	$pdo->exec( 'CREATE TABLE IF NOT EXISTS wpbx_fill ( a BLOB )' );
	for ( $i = 0; $i < 16; $i++ ) { $pdo->exec( 'INSERT INTO wpbx_fill VALUES ( randomblob( 1048576 ) )' ); }
	return false !== $pdo->exec( "VACUUM INTO '$log'" );
} );
// /dev is not writable, so no journal beside the file: the journal goes to memory instead.
$try( 'wordpress_pdo_attach', function () use ( $log, $big ) {
	$pdo = $GLOBALS['@pdo'];
	$pdo->exec( "ATTACH DATABASE '$log' AS tl" );
	$pdo->exec( 'PRAGMA tl.journal_mode = MEMORY' );
	return $big( $pdo, 'tl' );
} );
$try( 'own_pdo_attach', function () use ( $log ) {
	return false !== ( new PDO( 'sqlite::memory:' ) )->exec( "ATTACH DATABASE '$log' AS o" );
} );
$try( 'temp_store_directory_dev_shm', function () use ( $big ) {
	$pdo = $GLOBALS['@pdo'];
	$pdo->exec( "PRAGMA temp_store_directory = '/dev/shm'" );
	$pdo->exec( 'PRAGMA temp_store = FILE' );
	return '/dev/shm' === $pdo->query( 'PRAGMA temp_store_directory' )->fetchColumn() && $big( $pdo, 'temp' );
} );
echo 'REPORT:', json_encode( $r ), "\n";
sleep( 3 ); // what it wrote stays while the test watches the node
"""


def _task() -> str:
    return json.dumps(
        {
            "test_id": "node-disk",
            "code": HOSTILE,
            "timeout_seconds": 60,
            "runtime_checks": {"assertions": [{"type": "custom_assertion", "code": "return false;"}]},
        }
    )


def _tmpfs_mounts() -> list[str]:
    """Mount points on the node whose files are memory, not disk."""
    with open("/proc/mounts") as mounts:
        return [line.split()[1] for line in mounts if line.split()[2] in ("tmpfs", "ramfs")]


def _node_disk_files(uid: str) -> dict[str, int]:
    """Every regular file of pod `uid` on the node's disk (memory-backed volumes left out): path -> size.
    The kubelet may be tearing the pod down meanwhile: what vanishes while being read is skipped."""
    memory = {m for m in _tmpfs_mounts() if uid in m}
    sizes: dict[str, int] = {}
    for root in [KUBELET_PODS / uid, *POD_LOGS.glob(f"*_{uid}")]:
        for top, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if os.path.join(top, d) not in memory]
            for name in names:
                try:
                    st = os.lstat(os.path.join(top, name))
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    sizes[os.path.join(top, name)] = st.st_size
    return sizes


def _finished(space: Space, job: str) -> bool:
    conditions = space.cluster.batch.read_namespaced_job(job, space.namespace).status.conditions or []
    return any(c.type in ("Complete", "Failed") and c.status == "True" for c in conditions)


def test_a_candidate_cannot_write_the_termination_log_or_grow_node_disk_files(
    space: Space, mini_suite: Path, grader_image: str
) -> None:
    job = start_probe_job(space, mini_suite, grader_image, "node-disk", None, task=_task())
    uid = str(job_pod(space, job, finished=False).metadata.uid)
    # The largest each file got while the grader ran (the supervisor rewrites the termination log last).
    peak: dict[str, int] = {}
    while True:
        done = _finished(space, job)
        for path, size in _node_disk_files(uid).items():
            peak[path] = max(size, peak.get(path, 0))
        if done:
            break
    pod = job_pod(space, job)
    log = str(space.cluster.core.read_namespaced_pod_log(pod.metadata.name, space.namespace, container="grader"))
    verdict = json.loads([line for line in log.splitlines() if line.startswith("{")][-1])
    report = json.loads(re.search(r"^REPORT:(.*)$", verdict["stdout"], re.M).group(1))  # type: ignore[union-attr]

    assert peak, f"no files of pod {uid} found under {KUBELET_PODS} and {POD_LOGS}"
    (term_log,) = [p for p in peak if f"/{uid}/containers/grader/" in p]
    assert peak[term_log] <= TERMINATION_LOG_BOUND, (peak, report)
    assert sum(peak.values()) <= NODE_DISK_BOUND, (peak, report)
    assert report and not any(report.values()), report  # every route refused
    assert verdict["status"] == "failed", verdict["reason"]
    written = json.loads(Path(term_log).read_text())
    assert (written["test_id"], written["status"]) == ("node-disk", verdict["status"])  # the supervisor's last word

    # The collector decides from the pod log alone: a forged termination message changes nothing.
    job_obj = to_dict(space.cluster.batch.read_namespaced_job(job, space.namespace))
    pod_obj: dict[str, Any] = to_dict(pod)
    decision = decide_outcome(attempt_facts(job_obj, pod_obj, test_id="node-disk", log=log.encode()))
    forged = json.loads(json.dumps(pod_obj))
    for status in forged["status"]["containerStatuses"]:
        status["state"]["terminated"]["message"] = json.dumps({"status": "passed", "execution_pass": True})
    forged_decision = decide_outcome(attempt_facts(job_obj, forged, test_id="node-disk", log=log.encode()))
    assert isinstance(decision, Scored) and decision.verdict.status == "failed", decision
    assert forged_decision == decision
    assert len(log.encode()) <= MAX_GRADER_OUTPUT_BYTES
