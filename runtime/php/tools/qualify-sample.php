<?php
/** A sample for tests/runtime/test_verifier_source.py: exactly four unqualified global names. */

namespace WPBench\Sample;

use function WPBench\Common\pattern_match;

const OWN = 1;

final class Thing {
	public function go( string $text ): int {
		fwrite( STDERR, "x {$text}\n" );
		return \count( array( OWN, \PHP_EOL ) ) + strlen( $text ) + helper() + E_ALL + self::CONSTANT + pattern_match( 'a', 'b' )[0];
	}

	public const CONSTANT = 2;
}

function helper(): int {
	return (int) \is_int( OWN );
}
