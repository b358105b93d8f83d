<?php
/**
 * Forbidden constructs found on PHP's tokens, underneath the authored regex of a forbidden pattern.
 *
 * A regex sees text; PHP runs tokens. `\beval\s*\(` misses `EVAL(` and `eval/**\/(`, a pattern for
 * interpolated SQL misses the same SQL built in a variable or a heredoc. So each forbidden pattern is
 * first asked which constructs it forbids, by matching it against short probe snippets (targets()):
 * a pattern that matches `name($x)` forbids calls of the function `name`; one that matches an
 * interpolated `$wpdb->m( "... $id" )` but not `$wpdb->m( $wpdb->prepare( ... ) )` forbids
 * interpolated SQL reaching `$wpdb->m`; one that matches a backtick command forbids backticks
 * (so does one forbidding shell_exec, which backticks are). Then the candidate's tokens are searched
 * for those constructs (found()), the way PHP reads them:
 *
 * - eval is the T_EVAL token, in any case, with comments or whitespace before its parenthesis;
 * - a function is called by its name in any case (`\NAME`, `NAME /**\/ (`, `NAME(...)` first-class),
 *   imported under another name (`use function NAME as x`), or named by a string literal, also one
 *   glued from literals (`'shell_' . 'exec'`), that is used as a callable: called at once, given to a
 *   function that calls what it gets (call_user_func(), array_map(), a hook's callback), or assigned to
 *   a variable that is called or given so (called_as_callback()); a literal that only spells the name
 *   (an option named 'system', function_exists( 'exec' )) does not count;
 * - SQL reaches `$wpdb->m()` (also `$GLOBALS['wpdb']` and variables assigned `$wpdb`) interpolated or
 *   concatenated with a variable, directly, in a heredoc, or through a variable assigned such a string
 *   (`=` or `.=`); `{$wpdb->posts}` table names, casts, and variables inside function calls (esc_sql(),
 *   prepare(), absint()) are not interpolation.
 *
 * Not seen: names assembled at run time (from variables, str_rot13(), base64_decode()), dynamic method
 * names (`$wpdb->{'query'}()`, `array( $wpdb, 'query' )` callbacks), code written to a file and included,
 * and patterns whose alternatives name no probe form (the regex still applies to them as written).
 */

declare(strict_types=1);

namespace WPBench\Supervisor;

use function WPBench\Common\pattern_match;

/** Methods of $wpdb that run SQL. */
const SQL_METHODS = array( 'query', 'get_var', 'get_row', 'get_col', 'get_results' );

/**
 * What an authored forbidden pattern forbids, as constructs: 'eval', 'backtick', 'call:<name>',
 * 'sql:<method>'.
 *
 * @return list<string>
 */
function targets( string $pattern ): array {
	$hits  = static fn( array $probes ): bool => (bool) \array_filter( $probes, static fn( string $p ): bool => pattern_match( $pattern, $p )[0] );
	$found = array();
	if ( $hits( array( '`ls`', '`$cmd`' ) ) ) {
		$found[] = 'backtick';
	}
	// Words of the pattern, regex escapes (\b, \s, ...) taken out first so `\beval` yields `eval`.
	\preg_match_all( '/[A-Za-z_][A-Za-z0-9_]{2,}/', (string) \preg_replace( '/\\\\[A-Za-z]/', ' ', $pattern ), $words );
	foreach ( \array_unique( \array_map( 'strtolower', $words[0] ) ) as $name ) {
		if ( $hits( array( "$name(\$x);", "$name( \$x );", "$name ('x');" ) ) ) {
			$found[] = 'eval' === $name ? 'eval' : "call:$name";
			if ( 'shell_exec' === $name ) {
				$found[] = 'backtick';
			}
		}
		if ( \in_array( $name, SQL_METHODS, true )
			&& $hits( array( "\$wpdb->$name( \"SELECT * FROM t WHERE id = \$id\" );", "\$wpdb->$name(\"SELECT * FROM t WHERE id = {\$id}\")", "\$wpdb->$name( 'SELECT * FROM t WHERE id = ' . \$id );", "\$wpdb->$name( \"SELECT * FROM t WHERE id = \" . \$id );" ) )
			&& ! $hits( array( "\$wpdb->$name( \$wpdb->prepare( \"SELECT * FROM t WHERE id = %d\", \$id ) );" ) ) ) {
			$found[] = "sql:$name";
		}
	}
	return \array_values( \array_unique( $found ) );
}

/** The tokens PHP acts on: no whitespace or comments. @return list<array{0: int|string, 1: string}> */
function significant_tokens( string $source ): array {
	$out = array();
	foreach ( \token_get_all( $source ) as $t ) {
		$t = \is_array( $t ) ? array( $t[0], $t[1] ) : array( $t, $t );
		if ( ! \in_array( $t[0], array( \T_WHITESPACE, \T_COMMENT, \T_DOC_COMMENT, \T_OPEN_TAG, \T_CLOSE_TAG, \T_INLINE_HTML ), true ) ) {
			$out[] = $t;
		}
	}
	return $out;
}

/** A string literal's value (escapes aside: names have none). */
function literal_value( string $text ): string {
	return \strtolower( \ltrim( \substr( $text, 1, -1 ), '\\' ) );
}

/** The called function's name when token $i names a global function, else null. */
function function_name( array $t, int $i ): ?string {
	[ $id, $text ] = $t[ $i ];
	if ( \T_STRING !== $id && ! ( \T_NAME_FULLY_QUALIFIED === $id && 1 === \substr_count( $text, '\\' ) ) ) {
		return null;
	}
	$prev = $t[ $i - 1 ][0] ?? null;
	if ( \in_array( $prev, array( \T_OBJECT_OPERATOR, \T_NULLSAFE_OBJECT_OPERATOR, \T_DOUBLE_COLON, \T_NEW, \T_CONST, \T_CLASS, \T_INTERFACE, \T_TRAIT, \T_ENUM ), true ) ) {
		return null;
	}
	$imported = \T_FUNCTION === $prev && \T_USE === ( $t[ $i - 2 ][0] ?? null );
	if ( \T_FUNCTION === $prev && ! $imported ) {
		return null; // a declaration
	}
	return $imported || '(' === ( $t[ $i + 1 ][0] ?? null ) ? \strtolower( \ltrim( $text, '\\' ) ) : null;
}

/**
 * Which of $targets the source holds (a subset of them, in order).
 *
 * @param list<string> $targets from targets()
 * @return list<string>
 */
function found( string $source, array $targets ): array {
	if ( ! $targets ) {
		return array();
	}
	$t     = significant_tokens( $source );
	$n     = \count( $t );
	$calls = array();
	foreach ( $targets as $target ) {
		if ( \str_starts_with( $target, 'call:' ) ) {
			$calls[ \substr( $target, 5 ) ] = $target;
		}
	}
	$sql   = \array_values( \array_filter( $targets, static fn( string $x ): bool => \str_starts_with( $x, 'sql:' ) ) );
	$found = array();
	for ( $i = 0; $i < $n; $i++ ) {
		$id = $t[ $i ][0];
		if ( \T_EVAL === $id ) {
			$found['eval'] = true;
		} elseif ( '`' === $id ) {
			$found['backtick'] = true;
		} elseif ( $calls && \T_CONSTANT_ENCAPSED_STRING === $id ) {
			$start = $i;
			$value = literal_value( $t[ $i ][1] );
			while ( '.' === ( $t[ $i + 1 ][0] ?? null ) && \T_CONSTANT_ENCAPSED_STRING === ( $t[ $i + 2 ][0] ?? null ) ) {
				$value .= \strtolower( \substr( $t[ $i + 2 ][1], 1, -1 ) );
				$i     += 2;
			}
			if ( isset( $calls[ $value ] ) && called_as_callback( $t, $start, $i ) ) {
				$found[ $calls[ $value ] ] = true;
			}
		} elseif ( $calls ) {
			$name = function_name( $t, $i );
			if ( null !== $name && isset( $calls[ $name ] ) ) {
				$found[ $calls[ $name ] ] = true;
			}
		}
	}
	foreach ( $sql as $target ) {
		if ( sql_interpolated( $t, \substr( $target, 4 ) ) ) {
			$found[ $target ] = true;
		}
	}
	return \array_values( \array_filter( $targets, static fn( string $x ): bool => isset( $found[ $x ] ) ) );
}

/** Functions that call a callable they are given (hook functions: any argument but the hook's name). */
const CALLBACK_TAKERS = array(
	'call_user_func', 'call_user_func_array', 'forward_static_call', 'forward_static_call_array', 'array_map',
	'array_filter', 'array_walk', 'array_walk_recursive', 'array_reduce', 'usort', 'uasort', 'uksort',
	'iterator_apply', 'register_shutdown_function', 'register_tick_function', 'set_error_handler',
	'set_exception_handler', 'spl_autoload_register', 'ob_start', 'preg_replace_callback', 'fromcallable',
	'add_action', 'add_filter', 'add_shortcode', 'wp_schedule_single_event', 'register_rest_route',
);

/**
 * Is the string literal at [$start, $end] (a name, maybe glued) used as a callable: called at once
 * (`'name'( ... )`), given to a function that calls what it is given, or assigned to a variable that
 * is then called (`$f( ... )`) or given to such a function? Other literals that merely spell the
 * name (an option called 'system', function_exists( 'exec' )) are not calls.
 */
function called_as_callback( array $t, int $start, int $end ): bool {
	for ( $a = $start, $b = $end; '(' === ( $t[ $a - 1 ][0] ?? null ) && ')' === ( $t[ $b + 1 ][0] ?? null ); --$a, ++$b ) {
		// ( 'name' )( ... ): parentheses around the name change nothing
	}
	if ( '(' === ( $t[ $b + 1 ][0] ?? null ) || takes_callback( $t, $start ) ) {
		return true;
	}
	if ( '=' !== ( $t[ $start - 1 ][0] ?? null ) || \T_VARIABLE !== ( $t[ $start - 2 ][0] ?? null ) ) {
		return false;
	}
	$variable = $t[ $start - 2 ][1];
	foreach ( $t as $j => $token ) {
		if ( \T_VARIABLE === $token[0] && $token[1] === $variable && $j !== $start - 2
			&& ( '(' === ( $t[ $j + 1 ][0] ?? null ) || takes_callback( $t, $j ) ) ) {
			return true;
		}
	}
	return false;
}

/** Is token $i an argument of a call to one of CALLBACK_TAKERS (for hooks: not their first argument)? */
function takes_callback( array $t, int $i ): bool {
	$depth  = 0;
	$commas = 0;
	for ( $j = $i - 1, $stop = \max( 0, $i - 4000 ); $j >= $stop; $j-- ) {
		$id = $t[ $j ][0];
		if ( ')' === $id || ']' === $id || '}' === $id ) {
			++$depth;
		} elseif ( '(' === $id || '[' === $id || '{' === $id || \T_CURLY_OPEN === $id || \T_DOLLAR_OPEN_CURLY_BRACES === $id ) {
			if ( $depth > 0 ) {
				--$depth;
				continue;
			}
			if ( '(' !== $id ) {
				return false;
			}
			$name = \strtolower( \ltrim( (string) ( $t[ $j - 1 ][1] ?? '' ), '\\' ) );
			$hook = \in_array( $name, array( 'add_action', 'add_filter', 'add_shortcode', 'wp_schedule_single_event', 'register_rest_route' ), true );
			return \in_array( $name, CALLBACK_TAKERS, true ) && ( ! $hook || $commas > 0 );
		} elseif ( 0 === $depth && ',' === $id ) {
			++$commas;
		} elseif ( 0 === $depth && ';' === $id ) {
			return false;
		}
	}
	return false;
}

/** The end (exclusive) of the expression starting at $i: the first , ) ] ; at depth 0. */
function expression_end( array $t, int $i ): int {
	$depth = 0;
	for ( $n = \count( $t ); $i < $n; $i++ ) {
		$id = $t[ $i ][0];
		if ( \in_array( $id, array( '(', '[', '{', \T_CURLY_OPEN, \T_DOLLAR_OPEN_CURLY_BRACES ), true ) ) {
			++$depth;
		} elseif ( \in_array( $id, array( ')', ']', '}' ), true ) ) {
			if ( 0 === $depth-- ) {
				return $i;
			}
		} elseif ( 0 === $depth && ( ',' === $id || ';' === $id ) ) {
			return $i;
		}
	}
	return $n;
}

/** Does `$wpdb->$method( <interpolated or concatenated SQL> )` occur? */
function sql_interpolated( array $t, string $method ): bool {
	$n       = \count( $t );
	$aliases = array( '$wpdb' => true );
	$assign  = array(); // variable => list of [start, end) of the expressions assigned to it
	for ( $i = 0; $i + 1 < $n; $i++ ) {
		if ( \T_VARIABLE === $t[ $i ][0] && ( '=' === $t[ $i + 1 ][0] || \T_CONCAT_EQUAL === $t[ $i + 1 ][0] ) ) {
			$from = \in_array( $t[ $i + 2 ][0] ?? null, array( '&', \T_AMPERSAND_FOLLOWED_BY_VAR_OR_VARARG, \T_AMPERSAND_NOT_FOLLOWED_BY_VAR_OR_VARARG ), true ) ? $i + 3 : $i + 2;
			$end  = expression_end( $t, $from );
			$assign[ $t[ $i ][1] ][] = array( $from, $end );
			if ( wpdb_at( $t, $from, array( '$wpdb' => true ) ) === $end ) {
				$aliases[ $t[ $i ][1] ] = true;
			}
		}
	}
	for ( $i = 0; $i < $n; $i++ ) {
		$after = wpdb_at( $t, $i, $aliases );
		if ( null === $after || ! \in_array( $t[ $after ][0] ?? null, array( \T_OBJECT_OPERATOR, \T_NULLSAFE_OBJECT_OPERATOR ), true ) ) {
			continue;
		}
		if ( \T_STRING === ( $t[ $after + 1 ][0] ?? null ) && \strtolower( $t[ $after + 1 ][1] ) === $method && '(' === ( $t[ $after + 2 ][0] ?? null ) ) {
			$from = $after + 3;
			$memo = array();
			if ( dirty( $t, $from, expression_end( $t, $from ), $aliases, $assign, $memo ) ) {
				return true;
			}
		}
	}
	return false;
}

/** Where the tokens after a $wpdb reference at $i start ($wpdb, an alias, $GLOBALS['wpdb']), or null. */
function wpdb_at( array $t, int $i, array $aliases ): ?int {
	if ( \T_VARIABLE !== ( $t[ $i ][0] ?? null ) ) {
		return null;
	}
	if ( isset( $aliases[ $t[ $i ][1] ] ) ) {
		return $i + 1;
	}
	if ( '$GLOBALS' === $t[ $i ][1] && '[' === ( $t[ $i + 1 ][0] ?? null ) && \T_CONSTANT_ENCAPSED_STRING === ( $t[ $i + 2 ][0] ?? null )
		&& 'wpdb' === literal_value( $t[ $i + 2 ][1] ) && ']' === ( $t[ $i + 3 ][0] ?? null ) ) {
		return $i + 4;
	}
	return null;
}

/**
 * Does the expression [$from, $end) put a variable into SQL text (interpolated or concatenated)?
 * A variable that is the whole expression is as dirty as anything assigned to it; $memo holds that
 * answer per variable (false while it is being worked out), so each variable is followed once.
 */
function dirty( array $t, int $from, int $end, array $aliases, array $assign, array &$memo ): bool {
	$calls  = 0;     // open parentheses of function calls (their arguments are not interpolation)
	$stack  = array();
	$string = false; // inside "..." or a heredoc
	for ( $i = $from; $i < $end; $i++ ) {
		$id = $t[ $i ][0];
		if ( '"' === $id ) {
			$string = ! $string;
			continue;
		}
		if ( \T_START_HEREDOC === $id || \T_END_HEREDOC === $id ) {
			$string = \T_START_HEREDOC === $id;
			continue;
		}
		if ( '(' === $id ) {
			$call    = \in_array( $t[ $i - 1 ][0] ?? null, array( \T_STRING, \T_NAME_FULLY_QUALIFIED, \T_NAME_QUALIFIED, \T_VARIABLE, ')' ), true );
			$stack[] = $call;
			$calls  += $call ? 1 : 0;
			continue;
		}
		if ( ')' === $id ) {
			$calls -= \array_pop( $stack ) ? 1 : 0;
			continue;
		}
		if ( \T_VARIABLE !== $id || $calls > 0 ) {
			continue;
		}
		$after = wpdb_at( $t, $i, $aliases );
		if ( null !== $after ) {
			// $wpdb->posts (a table name) is fine; a method call's own arguments are skipped above.
			$i = $after + 1;
			continue;
		}
		$cast = \in_array( $t[ $i - 1 ][0] ?? null, array( \T_INT_CAST, \T_DOUBLE_CAST, \T_BOOL_CAST ), true );
		if ( $cast ) {
			continue;
		}
		$alone = $i === $from && $i + 1 === $end;
		if ( $string || ! $alone ) {
			if ( $string || '.' === ( $t[ $i - 1 ][0] ?? null ) || '.' === ( $t[ $i + 1 ][0] ?? null ) ) {
				return true;
			}
		}
		$name = $t[ $i ][1];
		if ( ! isset( $memo[ $name ] ) ) {
			$memo[ $name ] = false;
			foreach ( $assign[ $name ] ?? array() as [ $a, $b ] ) {
				if ( dirty( $t, $a, $b, $aliases, $assign, $memo ) ) {
					$memo[ $name ] = true;
					break;
				}
			}
		}
		if ( $memo[ $name ] ) {
			return true;
		}
	}
	return false;
}
