<?php
/** Scores hand-made facts with WPBench\Supervisor\outcome_of; prints one JSON object of outcomes (test_outcome_rules.py). */

namespace WPBench\Supervisor;

require '/src/verifier/supervisor/protocol.php';
require '/src/verifier/supervisor/sandbox.php';
require '/src/verifier/supervisor/happened.php';
require '/src/verifier/supervisor/verdict.php';

const NONCE = 'abababababababababababababababababababababababababababababababab';
const BOOTED = array( 'event' => 'booted', 'ms' => 100, 'sandbox' => true, 'sqlite_dropin' => true, 'installed' => true );
const TASK = array( 'timeout_seconds' => 2.5, 'setup_timeout_seconds' => 4.0, 'test_function_name' => null, 'assertions' => array( array( 'type' => 'option_value' ) ) );

/** A runner run that sent `events` (and then exited as told). */
function ran( array $events, ?int $signal = null, string $stderr = '' ): array {
	$protocol = new Protocol( NONCE, false, 1 );
	foreach ( $events as $event ) {
		$protocol->feed( 'WPB1 ' . NONCE . ' ' . \json_encode( $event ) . "\n" );
	}
	return array( 'protocol' => $protocol, 'signal' => $signal, 'exit_code' => null === $signal ? 0 : null,
		'stderr' => (object) array( 'data' => $stderr ), 'timed_out' => false );
}

/** Facts read from a run, as what_happened() reads them, with the given overrides. */
function facts( array $run, array $over = array() ): Happened {
	$p    = $run['protocol'];
	$args = array(
		'run'                   => $run,
		'stopped'               => phase_after( $p, TASK ),
		'timed_out'             => false,
		'finished'              => null !== $p->first( 'done' ),
		'booted'                => $p->first( 'booted' ),
		'setup'                 => $p->first( 'setup' ),
		'candidate'             => $p->first( 'candidate' ),
		'violation'             => $p->violation,
		'violation_after_setup' => $p->violation_after_setup,
		'trespass'              => array(),
		'test_function_defined' => null,
		'failed_assertions'     => array(),
		'forbidden'             => null,
	);
	return new Happened( ...\array_merge( $args, $over ) );
}

$hello     = array( 'event' => 'hello' );
$setup_ok  = array( 'event' => 'setup', 'ok' => true );
$cand_ok   = array( 'event' => 'candidate', 'ok' => true );
$assertion = array( 'event' => 'assertion', 'index' => 0 );
$teardown  = array( 'event' => 'teardown', 'ok' => true );
$all       = array( $hello, BOOTED, $setup_ok, $cand_ok, $assertion, $teardown, array( 'event' => 'done' ) );
$failed    = array( array( 'index' => 0, 'description' => '', 'type' => 'option_value', 'message' => 'got 1' ) );
$cases     = array(
	'violation_before_setup' => facts( ran( array( $hello, BOOTED, $cand_ok ) ) ),
	'boot_timed_out'         => facts( ran( array( $hello ) ), array( 'timed_out' => true ) ),
	'setup_failed'           => facts( ran( array( $hello, BOOTED, array( 'event' => 'setup', 'ok' => false, 'error' => 'boom' ) ) ) ),
	'setup_timed_out'        => facts( ran( array( $hello, BOOTED ) ), array( 'timed_out' => true ) ),
	'violation_after_setup'  => facts( ran( array( $hello, BOOTED, $setup_ok, array( 'event' => 'done' ) ) ) ),
	'timed_out_in_candidate' => facts( ran( array( $hello, BOOTED, $setup_ok ) ), array( 'timed_out' => true ) ),
	'exit_in_candidate'      => facts( ran( array( $hello, BOOTED, $setup_ok, array( 'event' => 'ended' ) ) ) ),
	'sigkill_in_candidate'   => facts( ran( array( $hello, BOOTED, $setup_ok ), 9 ) ),
	'crash_in_teardown'      => facts( ran( array( $hello, BOOTED, $setup_ok, $cand_ok, $assertion ), 9 ) ),
	'failed_and_trespass'    => facts( ran( $all ), array( 'failed_assertions' => $failed, 'trespass' => array( 'WPBench\\x' ) ) ),
	'uncaught_and_failed'    => facts( ran( $all ), array( 'failed_assertions' => $failed, 'candidate' => array( 'ok' => false, 'class' => 'Error', 'error' => 'e', 'file' => 'f', 'line' => 1 ) ) ),
	'passed'                 => facts( ran( $all ) ),
);
$out = array();
foreach ( $cases as $name => $happened ) {
	[ $status, $reason, $exit ] = outcome_of( $happened, TASK );
	$out[ $name ] = array( 'status' => $status, 'reason' => $reason, 'exit' => $exit );
}
echo \json_encode( $out ), "\n";
