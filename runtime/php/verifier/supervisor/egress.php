<?php
/**
 * The egress gate: on a backend whose network wall is put up after the container starts, no task is read
 * (so no candidate code is included) until the wall is seen up.
 *
 * On Kubernetes a grader pod's deny-all NetworkPolicy is programmed by the policy enforcer once it sees
 * the pod running (kube-router: from the pod's watch event), so the first moments of a pod may have the
 * network (docs/isolation.md has the window as measured). The Job names a probe target, the API server's
 * `kubernetes` Service (WPBENCH_EGRESS_PROBE = [IP]:PORT, filled in by the kubelet), and a bound
 * (WPBENCH_EGRESS_WAIT_SECONDS). The supervisor, trusted and before anything of the task is read,
 * connects to it: a connect that succeeds means the wall is not up yet; it is closed at once and tried
 * again until the bound. A connect refused or unreachable, or EGRESS_TIMEOUTS_TO_CLOSE in a row that time
 * out, means the wall is up. Still open at
 * the bound, or a target that is not an IP:PORT: the attempt is infrastructure (EGRESS_OPEN_EXIT,
 * retried, never scored), and candidate code never ran.
 *
 * Without WPBENCH_EGRESS_PROBE (the Docker executor) there is no gate, by design: `--network none` gives
 * the container nothing but loopback before its first process starts, so there is no window to wait out.
 *
 * Nothing here can be influenced by the candidate: it runs before the task is read, in PID 1, from the
 * environment the backend set; the probe's socket is closed before anything else runs.
 */

declare(strict_types=1);

namespace WPBench\Supervisor;

const EGRESS_PROBE_ENV = 'WPBENCH_EGRESS_PROBE';
const EGRESS_WAIT_ENV  = 'WPBENCH_EGRESS_WAIT_SECONDS';
// Bounds of WPBENCH_EGRESS_WAIT_SECONDS (the Job also adds it to the pod's deadline).
const EGRESS_WAIT_DEFAULT = 30.0;
const EGRESS_WAIT_MAX     = 600.0;
// One connect may take this long (an answer on a healthy pod network comes in milliseconds).
const EGRESS_CONNECT_TIMEOUT = 0.5;
// Pause between two connects that got through.
const EGRESS_PAUSE_US = 50000;
// A connect refused (an enforcer's REJECT), unreachable or not permitted was answered by a wall: the
// wall is up. Anything else (no descriptors, no buffers) proves nothing, and the gate tries again.
const EGRESS_REFUSED_ERRNOS = array( 111 => 'ECONNREFUSED', 113 => 'EHOSTUNREACH', 101 => 'ENETUNREACH', 1 => 'EPERM', 13 => 'EACCES' );
// A connect with no answer is what an enforcer that drops gives, but also what a lost SYN gives on an
// open network (seen once in 7,000 connects to a CPU-starved pod here): the wall counts as up only after
// this many timeouts in a row. (kube-router's REJECT, too, is seen as timeouts at first: the kernel
// rate-limits the ICMP answers.)
const EGRESS_TIMEOUTS_TO_CLOSE = 2;
const ETIMEDOUT                = 110;

/**
 * Waits until the probe target refuses a connection.
 *
 * @return string|null null: no probe was asked for, or the network was seen closed; else why not,
 *                     starting with "egress_open" (the attempt is infrastructure).
 */
function egress_gate(): ?string {
	$target = \getenv( EGRESS_PROBE_ENV );
	if ( false === $target ) {
		return null;
	}
	$address = egress_address( $target );
	$wait    = \getenv( EGRESS_WAIT_ENV );
	$wait    = false === $wait ? EGRESS_WAIT_DEFAULT : ( \is_numeric( $wait ) ? (float) $wait : -1.0 );
	if ( null === $address || $wait < 0 || $wait > EGRESS_WAIT_MAX ) {
		return 'egress_open: the egress gate is misconfigured (' . EGRESS_PROBE_ENV . '=' . \json_encode( $target ) . ', '
			. EGRESS_WAIT_ENV . '=' . \json_encode( \getenv( EGRESS_WAIT_ENV ) ) . '); the network could not be checked, no candidate code ran';
	}
	$start    = \hrtime( true );
	$deadline = $start + (int) ( $wait * 1e9 );
	$open     = 0;
	$timeouts = 0; // in a row
	$other    = '';
	while ( true ) {
		$errno  = 0;
		$errstr = '';
		$socket = @\stream_socket_client( "tcp://$address", $errno, $errstr, EGRESS_CONNECT_TIMEOUT ); // phpcs:ignore
		$ms     = \intdiv( \hrtime( true ) - $start, 1000000 );
		$closed = null;
		if ( false !== $socket ) {
			\fclose( $socket );
			++$open;
			$timeouts = 0;
		} elseif ( \array_key_exists( $errno, EGRESS_REFUSED_ERRNOS ) ) {
			$closed = EGRESS_REFUSED_ERRNOS[ $errno ];
		} elseif ( ETIMEDOUT === $errno ) {
			++$timeouts;
			$closed = $timeouts >= EGRESS_TIMEOUTS_TO_CLOSE ? "ETIMEDOUT x$timeouts" : null;
		} else {
			$other    = "errno $errno: $errstr";
			$timeouts = 0;
		}
		if ( null !== $closed ) {
			progress( "egress closed: $address $closed after $ms ms ($open connects got through first)" );
			return null;
		}
		if ( \hrtime( true ) >= $deadline ) {
			return "egress_open: $address still " . ( $open > 0 ? "accepted connections ($open) after $ms ms" : "unverified after $ms ms ($other)" )
				. ' (' . EGRESS_WAIT_ENV . "=$wait): the grader's network was not closed, no candidate code ran";
		}
		\usleep( EGRESS_PAUSE_US );
	}
}

/**
 * "[IP]:PORT" (IPv4 or IPv6 in the brackets) or "IPv4:PORT", as stream_socket_client() takes it; null for
 * anything else (a name is refused: the gate does no lookups, and the pod has no resolver).
 */
function egress_address( string $target ): ?string {
	if ( ! \preg_match( '/^(?:\[([0-9a-fA-F:.]+)\]|([0-9.]+)):([0-9]{1,5})$/D', $target, $m ) ) {
		return null;
	}
	$ip   = '' !== $m[1] ? $m[1] : $m[2];
	$port = (int) $m[3];
	if ( false === \filter_var( $ip, \FILTER_VALIDATE_IP ) || $port < 1 || $port > 65535 ) {
		return null;
	}
	return \str_contains( $ip, ':' ) ? "[$ip]:$port" : "$ip:$port";
}
