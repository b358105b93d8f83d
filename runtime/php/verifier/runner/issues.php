<?php
/**
 * The runner's error handler: warnings, notices and deprecations are recorded for the verdict's
 * php_issues and echoed to stderr the way PHP would print them. Fatal errors are left to PHP
 * (the shutdown hook in runner.php reports them).
 *
 * This handler holds no secret: candidate code can replace it (set_error_handler returns it) or
 * read what it collected without learning anything that lets it speak for the verifier.
 */

namespace WPBench\Runner;

final class Issues {
	public const MAX = 200;

	/** @var list<array{level: string, message: string, file: string, line: int}> */
	private static array $pending = array();
	private static int $total     = 0;
	private static bool $inside   = false;

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
		$level        = self::level( $errno );
		++self::$total;
		if ( self::$total <= self::MAX ) {
			self::$pending[] = array(
				'level'   => $level,
				'message' => cut( $message, 2000 ),
				'file'    => $file,
				'line'    => $line,
			);
		}
		if ( \is_resource( \STDERR ) ) {
			\fwrite( \STDERR, "PHP $level:  $message in $file on line $line\n" );
		}
		self::$inside = false;
		return true;
	}

	/** @return list<array{level: string, message: string, file: string, line: int}> */
	public static function drain(): array {
		$pending       = self::$pending;
		self::$pending = array();
		return $pending;
	}

	public static function total(): int {
		return self::$total;
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
