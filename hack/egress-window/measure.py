"""Measure how long a new grader pod has the network before its run's deny-all NetworkPolicy is enforced.

    .venv/bin/python hack/egress-window/measure.py [RUNS] [IMAGE]

On the cluster of the admin kubeconfig (`make cluster-up`), in a namespace of its own (deleted at the end): a
listener pod of a run without a policy, then RUNS pods labelled exactly as grader pods (a Job built as the
controller builds it, its run's deny-all policy created first, as the controller does), whose only process (PHP,
no supervisor) tries TCP connects from its first instant, alternating between the API server's `kubernetes`
Service (ClusterIP:443) and the listener pod's IP:8080 (probe 500m CPU, listener 200m: they fit beside other tests'
graders), 1 s connect timeout, until both are refused (or 30 s).
Each run prints, in milliseconds since the container's first process was created (its /proc/1/stat start
time, 10 ms ticks): its first connect, per target the last connect that got through, the first that did not
(with its errno: 110 timed out, 111 refused) and the first refusal, and how many got through. A last pod
of a run without a policy shows the connects do get through when nothing closes them.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "k8s"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from clusterkit import ADMIN_KUBECONFIG, Cluster, drop_space, job_pod, new_space, pod_facts, start_probe_job

PROBE = r"""
$stat  = file_get_contents( '/proc/1/stat' );
$ticks = (int) explode( ' ', substr( $stat, strrpos( $stat, ')' ) + 2 ) )[19];
$since = static fn(): int => intdiv( hrtime( true ), 1000000 ) - $ticks * 10;
echo "first_ms=", $since(), "\n";
$targets = array( 'service' => getenv( 'SERVICE' ), 'pod' => getenv( 'TARGET' ) );
$seen    = array();
$end     = hrtime( true ) + 30e9;
while ( hrtime( true ) < $end ) {
	$left = 0;
	foreach ( $targets as $name => $addr ) {
		if ( isset( $seen[ $name ]['refused'] ) ) { continue; }
		++$left;
		$s = @stream_socket_client( "tcp://$addr", $errno, $errstr, 1 );
		$t = $since();
		if ( $s ) {
			fclose( $s );
			$seen[ $name ]['opens'] = ( $seen[ $name ]['opens'] ?? 0 ) + 1;
			$seen[ $name ]['last_open'] = $t;
			continue;
		}
		$seen[ $name ]['first_fail'] ??= "$t:$errno";
		if ( 111 === $errno ) { $seen[ $name ]['refused'] = $t; }
	}
	if ( 0 === $left ) { break; }
}
foreach ( $targets as $name => $addr ) {
	foreach ( array( 'opens', 'last_open', 'first_fail', 'refused' ) as $k ) {
		echo "{$name}_$k=", $seen[ $name ][ $k ] ?? '-', "\n";
	}
}
echo "load=", trim( file_get_contents( '/proc/loadavg' ) ), "\n";
"""

LISTEN = r"""
php -r '$s = stream_socket_server("tcp://0.0.0.0:8080", $e, $m) or exit(1); echo "listening=yes\n";
        while (true) { $c = @stream_socket_accept($s, 600); if ($c) { fclose($c); } }'
"""


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    image = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("WPBENCH_IMAGE", "wpbench-grader:dev")
    cluster = Cluster(ADMIN_KUBECONFIG)
    service = cluster.service_ip()
    suite = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "suites" / "mini"
    with tempfile.TemporaryDirectory() as tmp:
        space = new_space(cluster, Path(tmp), "hack/egress-window/measure.py")
        try:
            job = start_probe_job(space, suite, image, "target", LISTEN, policy=False, deadline=900, cpu="200m")
            pod = job_pod(space, job, finished=False)
            space.wait_for(lambda: pod_facts(space, pod).get("listening"), 120, "the target pod to listen")
            target = str(cluster.core.read_namespaced_pod(pod.metadata.name, space.namespace).status.pod_ip)
            script = f"SERVICE={service}:443 TARGET={target}:8080 exec php -n -r '{PROBE.replace(chr(39), chr(34))}'"
            for n in range(runs + 1):
                policy = n < runs
                name = f"w{n}" if policy else "nopolicy"
                job = start_probe_job(space, suite, image, name, script, policy=policy, cpu="500m")
                facts = pod_facts(space, job_pod(space, job))
                print(
                    ("policy   " if policy else "no policy"), " ".join(f"{k}={v}" for k, v in facts.items()), flush=True
                )
                time.sleep(1)
        finally:
            drop_space(space)


if __name__ == "__main__":
    main()
