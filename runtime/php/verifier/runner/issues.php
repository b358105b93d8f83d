<?php
/**
 * Warnings, notices and deprecations: the record is kept by the wpbench_issues extension
 * (php/native/issues.c), which the engine tells of every error before any user error handler runs;
 * main() takes it with its nonce (\\wpbench_issues_take( $nonce ), never through a function of its own), so candidate code can neither hide an issue
 * with an error handler of its own nor read, drain or rewrite the record.
 *
 * The handler here only echoes each issue to stderr the way PHP would print it (and returns true so
 * PHP does not print it twice). Candidate code may replace it: that changes stderr, not the record.
 * Fatal errors are left to PHP (the shutdown hook in runner.php reports them).
 */

namespace WPBench\Runner;

/** What \wpbench_issues_take() returns when there is nothing to take (no extension: lock_down() fails). */
const NO_ISSUES = array( 'issues' => array(), 'total' => 0 );

final class Issues {
	private static bool $inside = false;

	public static function install(): void {
		\set_error_handler( array( self::class, 'handle' ) );
	}

	public static function handle( int $errno, string $message, string $file = '', int $line = 0 ): bool {
		if ( ! ( \error_reporting() & $errno ) ) {
			return false; // silenced with @: PHP's own handler stays quiet too.
		}
		if ( \E_USER_ERROR === $errno || \E_RECOVERABLE_ERROR === $errno || self::$inside ) {
			return false; // fatal: PHP prints it and stops; the shutdown hook reports it.
		}
		self::$inside = true;
		if ( \is_resource( \STDERR ) ) {
			\fwrite( \STDERR, 'PHP ' . self::level( $errno ) . ":  $message in $file on line $line\n" );
		}
		self::$inside = false;
		return true;
	}

	public static function level( int $errno ): string {
		return match ( $errno ) {
			\E_WARNING, \E_USER_WARNING, \E_CORE_WARNING, \E_COMPILE_WARNING => 'Warning',
			\E_NOTICE, \E_USER_NOTICE => 'Notice',
			\E_DEPRECATED, \E_USER_DEPRECATED => 'Deprecated',
			\E_ERROR, \E_CORE_ERROR, \E_COMPILE_ERROR, \E_USER_ERROR => 'Fatal error',
			\E_PARSE => 'Parse error',
			\E_RECOVERABLE_ERROR => 'Recoverable fatal error',
			default => 'Unknown error',
		};
	}
}

/** At most $max bytes of $text, cut on a UTF-8 boundary. */
function cut( string $text, int $max = 500 ): string {
	if ( \strlen( $text ) <= $max ) {
		return $text;
	}
	return \mb_strcut( $text, 0, $max, 'UTF-8' ) . '…';
}
