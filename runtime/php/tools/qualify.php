<?php
/**
 * qualify.php — finds (and, with --fix, qualifies) global function calls and constants written
 * unqualified inside namespaced verifier code.
 *
 *   php -n -d extension=tokenizer qualify.php [--fix] DIR...
 *
 * Why: in `namespace WPBench\Runner`, `fwrite(...)` first looks for WPBench\Runner\fwrite and only
 * then falls back to the global function, so candidate code that declares that name would take over
 * the call. `\fwrite(...)` never falls back. Calls to functions and constants that the verifier
 * declares in the same namespace (or imports with `use function` / `use const`) are left alone:
 * they exist before any candidate code runs, and PHP refuses to declare a name twice.
 *
 * Exit status: 0 nothing unqualified (or everything fixed), 1 findings (listed as file:line name),
 * 2 usage. Run in CI by tests/runtime/test_verifier_source.py with the grader image's PHP.
 */

const SKIP_BEFORE = array( T_OBJECT_OPERATOR, T_NULLSAFE_OBJECT_OPERATOR, T_DOUBLE_COLON, T_FUNCTION, T_CONST, T_NEW, T_CLASS, T_INTERFACE, T_TRAIT, T_ENUM, T_EXTENDS, T_IMPLEMENTS, T_INSTANCEOF, T_USE, T_AS, T_INSTEADOF, T_GOTO, T_CASE, T_NAMESPACE );
const IGNORED     = array( T_WHITESPACE, T_COMMENT, T_DOC_COMMENT );

/** @return list<string> PHP files under the directories (files named on the command line count too). */
function php_files( array $paths ): array {
	$files = array();
	foreach ( $paths as $path ) {
		if ( is_file( $path ) ) {
			$files[] = $path;
			continue;
		}
		$it = new RecursiveIteratorIterator( new RecursiveDirectoryIterator( $path, FilesystemIterator::SKIP_DOTS ) );
		foreach ( $it as $file ) {
			$head = (string) file_get_contents( (string) $file, false, null, 0, 64 );
			if ( str_ends_with( (string) $file, '.php' ) || str_contains( $head, '<?php' ) ) {
				$files[] = (string) $file;
			}
		}
	}
	sort( $files );
	return $files;
}

/** Significant tokens (no whitespace or comments), each with its index into $tokens. */
function significant( array $tokens ): array {
	$out = array();
	foreach ( $tokens as $i => $token ) {
		if ( ! is_array( $token ) || ! in_array( $token[0], IGNORED, true ) ) {
			$out[] = $i;
		}
	}
	return $out;
}

function kind( mixed $token ): int|string {
	return is_array( $token ) ? $token[0] : $token;
}

/**
 * Names each namespace declares (functions, constants) or imports, lower-cased for functions.
 *
 * @return array<string, array{functions: array<string, true>, constants: array<string, true>}>
 */
function declarations( array $files ): array {
	$decl = array();
	foreach ( $files as $file ) {
		$tokens = token_get_all( (string) file_get_contents( $file ) );
		$sig    = significant( $tokens );
		$ns     = '';
		$depth  = 0;
		foreach ( $sig as $n => $i ) {
			$t = $tokens[ $i ];
			if ( '{' === $t || T_CURLY_OPEN === kind( $t ) || T_DOLLAR_OPEN_CURLY_BRACES === kind( $t ) ) {
				++$depth;
			} elseif ( '}' === $t ) {
				--$depth;
			}
			$next = $tokens[ $sig[ $n + 1 ] ?? -1 ] ?? null;
			if ( T_NAMESPACE === kind( $t ) && is_array( $next ) ) {
				$ns = strtolower( $next[1] );
			} elseif ( 0 === $depth && T_FUNCTION === kind( $t ) && is_array( $next ) && T_STRING === $next[0] ) {
				$decl[ $ns ]['functions'][ strtolower( $next[1] ) ] = true;
			} elseif ( 0 === $depth && T_CONST === kind( $t ) && is_array( $next ) && T_STRING === $next[0] ) {
				$decl[ $ns ]['constants'][ $next[1] ] = true;
			} elseif ( T_USE === kind( $t ) && 0 === $depth && is_array( $next ) && in_array( $next[1], array( 'function', 'const' ), true ) ) {
				$name  = $tokens[ $sig[ $n + 2 ] ][1];
				$short = substr( $name, strrpos( $name, '\\' ) + 1 );
				$after = $tokens[ $sig[ $n + 3 ] ] ?? null;
				if ( is_array( $after ) && T_AS === $after[0] ) {
					$short = $tokens[ $sig[ $n + 4 ] ][1];
				}
				$decl[ $ns ][ 'function' === $next[1] ? 'functions' : 'constants' ][ 'function' === $next[1] ? strtolower( $short ) : $short ] = true;
			}
		}
	}
	return $decl;
}

/** @return list<array{index: int, line: int, name: string}> Unqualified global names in one file. */
function findings( array $tokens, array $decl ): array {
	$sig     = significant( $tokens );
	$ns      = null;
	$found   = array();
	$quoted  = false; // inside "..." or a heredoc
	$curly   = 0;     // {$...} expression depth inside a string
	foreach ( $sig as $n => $i ) {
		$t = $tokens[ $i ];
		$k = kind( $t );
		if ( '"' === $t || T_START_HEREDOC === $k || T_END_HEREDOC === $k ) {
			$quoted = '"' === $t ? ! $quoted : T_START_HEREDOC === $k;
			continue;
		}
		if ( $quoted && ( T_CURLY_OPEN === $k || T_DOLLAR_OPEN_CURLY_BRACES === $k ) ) {
			++$curly;
		} elseif ( $quoted && $curly > 0 && '}' === $t ) {
			--$curly;
		}
		if ( T_NAMESPACE === $k ) {
			$next = $tokens[ $sig[ $n + 1 ] ];
			$ns   = is_array( $next ) ? strtolower( $next[1] ) : null;
			continue;
		}
		if ( null === $ns || T_STRING !== $k || ( $quoted && 0 === $curly ) ) {
			continue;
		}
		$prev = $tokens[ $sig[ $n - 1 ] ?? -1 ] ?? null;
		$next = $tokens[ $sig[ $n + 1 ] ?? -1 ] ?? null;
		if ( in_array( kind( $prev ), SKIP_BEFORE, true ) || '\\' === $prev ) {
			continue;
		}
		$name = $t[1];
		if ( '(' === $next ) {
			if ( ! isset( $decl[ $ns ]['functions'][ strtolower( $name ) ] ) ) {
				$found[] = array( 'index' => $i, 'line' => $t[2], 'name' => "$name()" );
			}
			continue;
		}
		$constant_like = preg_match( '/^[A-Z][A-Z0-9_]*$/', $name ) && ! in_array( kind( $next ), array( T_DOUBLE_COLON, T_VARIABLE, T_ELLIPSIS, '&' ), true ) && ':' !== $next;
		if ( $constant_like && ! isset( $decl[ $ns ]['constants'][ $name ] ) ) {
			$found[] = array( 'index' => $i, 'line' => $t[2], 'name' => $name );
		}
	}
	return $found;
}

function main( array $argv ): int {
	$args = array_slice( $argv, 1 );
	$fix  = in_array( '--fix', $args, true );
	$dirs = array_values( array_diff( $args, array( '--fix' ) ) );
	if ( ! $dirs ) {
		fwrite( STDERR, "usage: qualify.php [--fix] DIR...\n" );
		return 2;
	}
	$files = php_files( $dirs );
	$decl  = declarations( $files );
	$total = 0;
	foreach ( $files as $file ) {
		$tokens = token_get_all( (string) file_get_contents( $file ) );
		$found  = findings( $tokens, $decl );
		foreach ( $found as $f ) {
			echo "$file:{$f['line']} {$f['name']}\n";
		}
		$total += count( $found );
		if ( $fix && $found ) {
			foreach ( $found as $f ) {
				$tokens[ $f['index'] ][1] = '\\' . $tokens[ $f['index'] ][1];
			}
			file_put_contents( $file, implode( '', array_map( static fn( $t ) => is_array( $t ) ? $t[1] : $t, $tokens ) ) );
		}
	}
	if ( $fix ) {
		echo "qualified $total names\n";
		return 0;
	}
	return $total ? 1 : 0;
}

exit( main( $argv ) );
