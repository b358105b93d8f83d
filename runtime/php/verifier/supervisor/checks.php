<?php
/**
 * Checks the supervisor runs in-process, before any candidate code runs: the syntax of the
 * candidate PHP, the static patterns, and the plugin files map of wp_plugin_files artifacts.
 */

declare(strict_types=1);

namespace WPBench\Supervisor;

use function WPBench\Common\pattern_match;

const PLUGIN_MAX_FILES       = 20;
const PLUGIN_MAX_FILE_BYTES  = 262144;
const PLUGIN_MAX_TOTAL_BYTES = 1048576;

/** The snippet as a PHP file: `<?php ` is prepended when the code has no opening tag. */
function snippet_source( string $code ): string {
	$code = \preg_replace( '/^\xEF\xBB\xBF/', '', $code ); // a BOM would be output before <?php
	return \preg_match( '/^\s*<\?(?:php\b|=)/i', $code ) ? $code : '<?php ' . $code;
}

/** The parser's message for a PHP source, or null when it parses. */
function syntax_error( string $source ): ?string {
	try {
		\token_get_all( $source, \TOKEN_PARSE );
		return null;
	} catch ( \ParseError $e ) {
		return 'PHP Parse error: ' . $e->getMessage() . ' on line ' . $e->getLine();
	}
}

/**
 * Syntax and patterns. For a plugin, every .php file is parsed and the patterns see all files.
 *
 * @param array<string, mixed> $task
 * @return array{syntax_ok: bool, syntax_error: ?string, required: list<array>, forbidden: list<array>}
 */
function static_checks( array $task ): array {
	$error = null;
	if ( 'php_snippet' === $task['artifact_kind'] ) {
		$subject = $task['code'];
		$error   = syntax_error( snippet_source( $task['code'] ) );
	} else {
		$files = $task['files'];
		\ksort( $files, \SORT_STRING );
		$subject = \implode( "\n", $files );
		foreach ( $files as $path => $content ) {
			if ( \str_ends_with( \strtolower( (string) $path ), '.php' ) ) {
				$file_error = syntax_error( $content );
				if ( null !== $file_error ) {
					$error = "$path: $file_error";
					break;
				}
			}
		}
	}
	$result = array(
		'syntax_ok'    => null === $error,
		'syntax_error' => $error,
		'required'     => array(),
		'forbidden'    => array(),
	);
	foreach ( $task['required'] as $pattern ) {
		[ $matched, $error, $undecided ] = pattern_match( $pattern['pattern'], $subject );
		$result['required'][]            = $pattern + array(
			'matched'    => $matched,
			'error'      => $undecided ? "could not be checked ($error), so it counts as not matched" : $error,
			'constructs' => array(),
		);
	}
	$sources = null;
	foreach ( $task['forbidden'] as $pattern ) {
		[ $matched, $error, $undecided ] = pattern_match( $pattern['pattern'], $subject );
		$constructs                      = array();
		if ( ! $matched && ! $undecided ) {
			// Underneath the regex: what PHP's tokens show (constructs.php).
			$targets = targets( $pattern['pattern'] );
			if ( $targets ) {
				$sources ??= 'php_snippet' === $task['artifact_kind'] ? array( snippet_source( $task['code'] ) ) : \array_values( $task['files'] );
				foreach ( $sources as $source ) {
					$constructs = \array_values( \array_unique( \array_merge( $constructs, found( (string) $source, $targets ) ) ) );
				}
			}
		}
		$result['forbidden'][] = $pattern + array(
			'matched'    => $matched || $undecided || (bool) $constructs,
			'error'      => $undecided ? "could not be checked ($error), so it counts as matched" : $error,
			'constructs' => $constructs,
		);
	}
	return $result;
}

/**
 * Validates a wp_plugin_files map (limits from wpbench_runtime.contract).
 *
 * @param array<string, string> $files
 * @return array{ok: bool, reason: string, main: string}
 */
function plugin_check( array $files ): array {
	$bad = static fn( string $reason ): array => array( 'ok' => false, 'reason' => "plugin files map invalid: $reason", 'main' => '' );
	if ( ! $files ) {
		return $bad( 'no files' );
	}
	if ( \count( $files ) > PLUGIN_MAX_FILES ) {
		return $bad( \count( $files ) . ' files (at most ' . PLUGIN_MAX_FILES . ')' );
	}
	$total = 0;
	$mains = array();
	foreach ( $files as $path => $content ) {
		$path  = (string) $path;
		$shown = \json_encode( $path, \JSON_UNESCAPED_SLASHES | \JSON_INVALID_UTF8_SUBSTITUTE );
		$why   = path_problem( $path );
		if ( null !== $why ) {
			return $bad( "path $shown: $why" );
		}
		$size = \strlen( $content );
		if ( $size > PLUGIN_MAX_FILE_BYTES ) {
			return $bad( "$shown is $size bytes (at most " . PLUGIN_MAX_FILE_BYTES . ' per file)' );
		}
		$total += $size;
		if ( ! \str_contains( $path, '/' ) && \str_ends_with( \strtolower( $path ), '.php' ) && has_plugin_header( $content ) ) {
			$mains[] = $path;
		}
	}
	if ( $total > PLUGIN_MAX_TOTAL_BYTES ) {
		return $bad( "$total bytes in total (at most " . PLUGIN_MAX_TOTAL_BYTES . ')' );
	}
	if ( ! $mains ) {
		return $bad( 'no top-level PHP file with a "Plugin Name:" header' );
	}
	if ( \count( $mains ) > 1 ) {
		\sort( $mains );
		return $bad( \count( $mains ) . ' top-level PHP files have a "Plugin Name:" header (' . \implode( ', ', $mains ) . '); exactly one may' );
	}
	return array( 'ok' => true, 'reason' => '', 'main' => $mains[0] );
}

/** Why a files-map path is not acceptable, or null. */
function path_problem( string $path ): ?string {
	if ( '' === $path ) {
		return 'empty path';
	}
	if ( \str_contains( $path, "\0" ) ) {
		return 'contains a NUL byte';
	}
	if ( \str_starts_with( $path, '/' ) || \str_starts_with( $path, '\\' ) || \preg_match( '/^[A-Za-z]:/', $path ) ) {
		return 'absolute paths are not allowed';
	}
	if ( \str_contains( $path, '\\' ) ) {
		return 'use / as the separator (backslashes are not allowed)';
	}
	if ( \strlen( $path ) > 1024 || ! \preg_match( '//u', $path ) ) {
		return 'not a reasonable file name';
	}
	foreach ( \explode( '/', $path ) as $segment ) {
		if ( '..' === $segment ) {
			return 'path traversal (..) is not allowed';
		}
		if ( '' === $segment || '.' === $segment ) {
			return 'empty or "." path segment';
		}
		if ( \strlen( $segment ) > 255 ) {
			return 'a path segment is longer than 255 bytes';
		}
	}
	return null;
}

/** The `Plugin Name:` header test WordPress's get_file_data() applies (first 8 KiB). */
function has_plugin_header( string $content ): bool {
	$head = \str_replace( "\r", "\n", \substr( $content, 0, 8192 ) );
	return (bool) \preg_match( '/^(?:[ \t]*<\?php)?[ \t\/*#@]*Plugin Name:(.*)$/mi', $head, $m )
		&& '' !== \trim( (string) \preg_replace( '/\s*(?:\*\/|\?>).*/', '', $m[1] ) );
}
