<?php
/** Which constructs forbidden patterns target and which the tokens show (constructs.php); one JSON object (test_constructs.py). */

namespace WPBench\Supervisor;

require '/src/verifier/common/patterns.php';
require '/src/verifier/supervisor/constructs.php';

$cases = \json_decode( (string) \file_get_contents( 'php://stdin' ), true );
$out   = array( 'targets' => array(), 'found' => array() );
foreach ( $cases['targets'] as $pattern ) {
	$out['targets'][ $pattern ] = targets( $pattern );
}
foreach ( $cases['found'] as $i => [ $pattern, $code ] ) {
	$out['found'][ $i ] = found( '<?php ' . $code, targets( $pattern ) );
}
echo \json_encode( $out ), "\n";
