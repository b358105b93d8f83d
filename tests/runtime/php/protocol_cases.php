<?php
/** Feeds WPBench\Supervisor\Protocol scripted byte streams; prints one JSON object of outcomes (test_protocol.py). */

require '/src/verifier/supervisor/protocol.php';

use WPBench\Supervisor\Protocol;

$n = str_repeat( 'ab', 32 );

function ev( string $nonce, array $event ): string {
	return "WPB1 $nonce " . json_encode( $event ) . "\n";
}

function outcome( Protocol $p ): array {
	return array(
		'events'          => array_column( $p->events, 'event' ),
		'violation'       => $p->violation,
		'after_setup'     => $p->violation_after_setup,
		'could_act'       => $p->candidate_could_act(),
		'finished'        => $p->finished,
		'unauthenticated' => $p->unauthenticated,
	);
}

$start = ev( $n, array( 'event' => 'hello' ) ) . ev( $n, array( 'event' => 'booted' ) );
$setup = ev( $n, array( 'event' => 'setup', 'ok' => true ) );
$cases = array(
	'forged'            => array( $start . "WPB1 " . str_repeat( '0', 64 ) . " {\"event\":\"setup\",\"ok\":true}\nnoise\n" ),
	'order_before'      => array( $start . ev( $n, array( 'event' => 'candidate', 'ok' => true ) ) ),
	'order_after'       => array( $start . $setup . ev( $n, array( 'event' => 'done' ) ) ),
	'long_line_after'   => array( $start . $setup, str_repeat( 'x', 3 << 20 ), str_repeat( 'x', 2 << 20 ) ),
	'channel_flood'     => array_merge( array( $start . $setup ), array_fill( 0, 34, str_repeat( str_repeat( 'y', 1023 ) . "\n", 1024 ) ) ),
	'setup_failed'      => array( $start . ev( $n, array( 'event' => 'setup', 'ok' => false ) ) . ev( $n, array( 'event' => 'assertion', 'index' => 0 ) ) ),
	'ended'             => array( $start . $setup . ev( $n, array( 'event' => 'candidate', 'ok' => true ) ) . ev( $n, array( 'event' => 'ended' ) ) ),
	'glued_prefix'      => array( $start . $setup . 'junk-without-newline', ev( $n, array( 'event' => 'candidate', 'ok' => true ) ) ),
	'complete'          => array( $start . $setup . ev( $n, array( 'event' => 'candidate', 'ok' => true ) ) . ev( $n, array( 'event' => 'assertion', 'index' => 0 ) ) . ev( $n, array( 'event' => 'teardown', 'ok' => true ) ) . ev( $n, array( 'event' => 'done' ) ) ),
);
$out = array();
foreach ( $cases as $name => $chunks ) {
	$p = new Protocol( $n, false, 1 );
	foreach ( $chunks as $chunk ) {
		$p->feed( $chunk );
	}
	$out[ $name ] = outcome( $p );
}
echo json_encode( $out ), "\n";
