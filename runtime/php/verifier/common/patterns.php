<?php
/**
 * Regular expressions as tasks write them (static patterns, output_matches, compare=matches).
 *
 * A pattern that starts with one of / # ~ ! @ % | ` and ends with that same character plus PCRE
 * flags (`/add_action/i`), with no unescaped delimiter in between, is used as written.
 * Anything else is delimiterless and gets wrapped, so `wpbp/count-words` needs no escaping.
 */

namespace WPBench\Common;

const DELIMITERS = '/#~!@%|`';

function is_delimited( string $pattern ): bool {
	if ( \strlen( $pattern ) < 2 || ! \str_contains( DELIMITERS, $pattern[0] ) ) {
		return false;
	}
	$delimiter = $pattern[0];
	$end       = \strrpos( $pattern, $delimiter );
	if ( 0 === $end || ! \preg_match( '/^[imsxuADSUXJn]*$/', \substr( $pattern, $end + 1 ) ) ) {
		return false;
	}
	$body = \substr( $pattern, 1, $end - 1 );
	$len  = \strlen( $body );
	for ( $i = 0; $i < $len; $i++ ) {
		if ( '\\' === $body[ $i ] ) {
			++$i;
		} elseif ( $body[ $i ] === $delimiter ) {
			return false; // an unescaped delimiter inside: not a delimited regex, so it is wrapped.
		}
	}
	return true;
}

/** The PCRE for a task pattern. */
function to_pcre( string $pattern ): string {
	if ( is_delimited( $pattern ) ) {
		return $pattern;
	}
	foreach ( array( '#', '~', '!', '%', '@', '`', ';', ',' ) as $delimiter ) {
		if ( ! \str_contains( $pattern, $delimiter ) ) {
			return $delimiter . $pattern . $delimiter;
		}
	}
	return '#' . \preg_replace( '/(?<!\\\\)#/', '\\#', $pattern ) . '#';
}

/**
 * Matches a task pattern; an invalid regex is reported, never raised.
 *
 * @return array{0: bool, 1: ?string, 2: bool} [matched, error message, undecided]: the error is set when
 *     the regex does not compile, or when PCRE gave up on this subject (backtrack or recursion limit,
 *     malformed UTF-8 under /u); undecided is true in the second case only, which depends on the
 *     subject, so callers decide it against whoever wrote the subject.
 */
function pattern_match( string $pattern, string $subject ): array {
	$error = null;
	\set_error_handler(
		static function ( int $errno, string $message ) use ( &$error ): bool {
			$error = \preg_replace( '/^preg_match\(\): /', '', $message );
			return true;
		}
	);
	try {
		$result = \preg_match( to_pcre( $pattern ), $subject );
	} finally {
		\restore_error_handler();
	}
	if ( false === $result ) {
		return null !== $error ? array( false, $error, false ) : array( false, \preg_last_error_msg(), true );
	}
	return array( 1 === $result, null, false );
}

/** The error of an invalid pattern, or null when it compiles. */
function pattern_error( string $pattern ): ?string {
	return pattern_match( $pattern, '' )[1];
}
