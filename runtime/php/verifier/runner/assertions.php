<?php
/**
 * The runtime assertion types (see the Assertion docstring in wpbench_runtime/contract.py).
 *
 * Each assert_<type>() takes the assertion's parameters and returns [passed, message]; it fails
 * by returning false or throwing. Only authoring_problem(), which runs before any candidate code
 * is called, can mark a test as mis-authored (harness_error): an exception never can, because
 * candidate code could throw any class it likes. The supervisor validates the same things before
 * the run; this is the last line of defence. No function here ever sees the event-channel nonce.
 *
 * This file deliberately has no strict_types: candidate functions are called the way WordPress
 * and WP-CLI call them, with PHP's usual coercions.
 */

namespace WPBench\Runner;

use function WPBench\Common\pattern_match;

/** The assertion failed; the message says why. */
final class Failure extends \Exception {}

/**
 * Runs one assertion, catching everything.
 *
 * @param array<string, mixed> $a The assertion (type + parameters).
 * @return array{passed: bool, message: string, harness: bool}
 */
function run_assertion( array $a ): array {
	$problem = authoring_problem( $a );
	if ( null !== $problem ) {
		return array( 'passed' => false, 'message' => "test error: $problem", 'harness' => true );
	}
	try {
		[ $passed, $message ] = ( __NAMESPACE__ . '\assert_' . $a['type'] )( $a );
		return array( 'passed' => (bool) $passed, 'message' => cut( (string) $message, 2000 ), 'harness' => false );
	} catch ( Failure $e ) {
		return array( 'passed' => false, 'message' => cut( $e->getMessage(), 2000 ), 'harness' => false );
	} catch ( \Throwable $e ) {
		return array( 'passed' => false, 'message' => cut( 'threw ' . describe_throwable( $e ), 2000 ), 'harness' => false );
	}
}

/** What makes an assertion unusable as written, checked before anything runs; null when fine. */
function authoring_problem( array $a ): ?string {
	if ( ! preg_match( '/^[a-z_]+$/', (string) $a['type'] ) || ! function_exists( __NAMESPACE__ . '\assert_' . $a['type'] ) ) {
		return "unknown assertion type '{$a['type']}'";
	}
	$how = $a['compare'] ?? 'identical';
	if ( ! in_array( $how, array( 'identical', 'equals', 'contains', 'matches' ), true ) ) {
		return "unknown compare mode '$how'";
	}
	if ( 'matches' === $how ) {
		if ( ! is_string( $a['expected'] ?? null ) ) {
			return 'compare=matches needs a string pattern in expected';
		}
		$error = pattern_match( $a['expected'], '' )[1];
		if ( null !== $error ) {
			return "invalid pattern in expected: $error";
		}
	}
	if ( 'output_matches' === $a['type'] ) {
		$error = is_string( $a['pattern'] ?? null ) ? pattern_match( $a['pattern'], '' )[1] : 'pattern is missing';
		if ( null !== $error ) {
			return "invalid pattern: $error";
		}
	}
	if ( 'query_result' === $a['type'] && ! in_array( $a['mode'] ?? 'var', array( 'var', 'col', 'row', 'results' ), true ) ) {
		return "unknown query_result mode '{$a['mode']}'";
	}
	return null;
}

/** Evaluates test-authored PHP (setup, teardown, custom_assertion, *_code) in a fresh scope. */
function eval_php( string $__wpbench_code ): mixed {
	return eval( strip_open_tag( $__wpbench_code ) );
}

function strip_open_tag( string $code ): string {
	return preg_replace( '/^\s*<\?php\b/i', '', $code, 1 );
}

function describe_throwable( \Throwable $e ): string {
	return get_class( $e ) . ': ' . cut( $e->getMessage(), 1000 ) . ' in ' . $e->getFile() . ':' . $e->getLine();
}

/** A short, readable rendering of a value for messages. */
function describe( mixed $value ): string {
	if ( null === $value ) {
		return 'null';
	}
	if ( is_bool( $value ) ) {
		return $value ? 'true' : 'false';
	}
	if ( is_int( $value ) || is_float( $value ) ) {
		return var_export( $value, true );
	}
	if ( is_string( $value ) ) {
		return cut( json_encode( $value, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE ), 300 );
	}
	if ( $value instanceof \WP_Error ) {
		return 'WP_Error(' . $value->get_error_code() . ': ' . cut( $value->get_error_message(), 200 ) . ')';
	}
	if ( is_object( $value ) ) {
		return 'object(' . get_class( $value ) . ')';
	}
	if ( is_array( $value ) ) {
		$json = json_encode( $value, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE | JSON_PARTIAL_OUTPUT_ON_ERROR );
		return cut( false === $json ? 'array(' . count( $value ) . ')' : $json, 300 );
	}
	return gettype( $value );
}

/**
 * The contract's `compare` modes: identical (===, default), equals (==), contains (substring or
 * array member), matches (regex on a string).
 *
 * @return array{0: bool, 1: string}
 */
function compare( mixed $actual, mixed $expected, string $how, string $what ): array {
	switch ( $how ) {
		case 'identical':
			$ok   = $actual === $expected;
			$verb = 'to be identical to';
			break;
		case 'equals':
			$ok   = $actual == $expected; // phpcs:ignore Universal.Operators.StrictComparisons
			$verb = 'to equal';
			break;
		case 'contains':
			$verb = 'to contain';
			if ( is_array( $actual ) ) {
				$ok = in_array( $expected, $actual ); // phpcs:ignore WordPress.PHP.StrictInArray
			} elseif ( is_string( $actual ) && ( is_string( $expected ) || is_int( $expected ) || is_float( $expected ) ) ) {
				$ok = str_contains( $actual, (string) $expected );
			} else {
				$ok = false;
			}
			break;
		case 'matches':
			$verb = 'to match';
			$ok   = ( is_string( $actual ) || is_int( $actual ) || is_float( $actual ) ) && pattern_match( (string) $expected, (string) $actual )[0];
			break;
		default:
			throw new Failure( "unknown compare mode '$how'" );
	}
	if ( $ok ) {
		return array( true, "$what is as expected ($how " . describe( $expected ) . ')' );
	}
	return array( false, "expected $what $verb " . describe( $expected ) . ', got ' . describe( $actual ) );
}

function expected_of( array $a ): mixed {
	return $a['expected'] ?? null;
}

function require_callable( string $name ): string {
	$name = ltrim( $name, '\\' );
	if ( ! is_callable( $name ) ) {
		throw new Failure( "function $name is not defined" );
	}
	return $name;
}

// --- the assertion types ---------------------------------------------------------------------

function assert_custom_assertion( array $a ): array {
	$result = eval_php( $a['code'] );
	if ( true === $result ) {
		return array( true, 'returned true' );
	}
	return array( false, 'returned ' . describe( $result ) . ' (a custom assertion passes only when it returns true)' );
}

function assert_function_exists( array $a ): array {
	$name = ltrim( $a['function'], '\\' );
	return function_exists( $name )
		? array( true, "function $name exists" )
		: array( false, "function $name is not defined" );
}

function assert_class_exists( array $a ): array {
	$name = ltrim( $a['class'], '\\' );
	return class_exists( $name )
		? array( true, "class $name exists" )
		: array( false, "class $name is not defined" );
}

function assert_shortcode_exists( array $a ): array {
	return shortcode_exists( $a['shortcode'] )
		? array( true, "shortcode [{$a['shortcode']}] is registered" )
		: array( false, "shortcode [{$a['shortcode']}] is not registered" );
}

/** A callback's name as a test writes it: `fn`, `Class::method` (objects by class), `Closure`. */
function callable_name( mixed $callback ): string {
	if ( is_string( $callback ) ) {
		return ltrim( $callback, '\\' );
	}
	if ( is_array( $callback ) && 2 === count( $callback ) && isset( $callback[0], $callback[1] ) ) {
		$class = is_object( $callback[0] ) ? get_class( $callback[0] ) : ltrim( (string) $callback[0], '\\' );
		return $class . '::' . $callback[1];
	}
	if ( $callback instanceof \Closure ) {
		return 'Closure';
	}
	if ( is_object( $callback ) ) {
		return get_class( $callback ) . '::__invoke';
	}
	return gettype( $callback );
}

function assert_hook_registered( array $a ): array {
	global $wp_filter;
	$hook      = $a['hook'];
	$want      = array_key_exists( 'callback', $a ) ? callable_name( $a['callback'] ) : null;
	$prio      = $a['priority'] ?? null;
	$wanted    = "'$hook'" . ( null !== $want ? " with $want" : '' ) . ( null !== $prio ? " at priority $prio" : '' );
	$count     = 0;
	$at        = array(); // priorities where the wanted callback (or, without one, anything) is hooked
	if ( isset( $wp_filter[ $hook ] ) && $wp_filter[ $hook ] instanceof \WP_Hook ) {
		foreach ( $wp_filter[ $hook ]->callbacks as $priority => $callbacks ) {
			foreach ( $callbacks as $entry ) {
				++$count;
				if ( null === $want || 0 === strcasecmp( callable_name( $entry['function'] ), $want ) ) {
					if ( null === $prio || (int) $priority === (int) $prio ) {
						return array( true, "hooked to $wanted" );
					}
					$at[] = $priority;
				}
			}
		}
	}
	if ( 0 === $count ) {
		return array( false, "nothing is hooked to '$hook'" );
	}
	if ( $at ) {
		$who = null !== $want ? $want : 'callbacks';
		return array( false, "not hooked to $wanted: $who at priority " . implode( ', ', array_unique( $at ) ) );
	}
	return array( false, "not hooked to $wanted ($count other callbacks are)" );
}

/** The output of an output_* source: what it echoed, then what it returned (a string or number). */
function output_of( array $a ): string {
	$level = ob_get_level();
	ob_start();
	try {
		if ( array_key_exists( 'code', $a ) ) {
			$returned = eval_php( $a['code'] );
		} elseif ( array_key_exists( 'shortcode_content', $a ) ) {
			$returned = do_shortcode( $a['shortcode_content'] );
		} else {
			$returned = call_user_func_array( require_callable( $a['function'] ), $a['args'] ?? array() );
		}
	} finally {
		while ( ob_get_level() > $level + 1 ) {
			ob_end_flush();
		}
		$output = ob_get_level() > $level ? (string) ob_get_clean() : '';
	}
	if ( is_string( $returned ) || is_int( $returned ) || is_float( $returned ) ) {
		$output .= (string) $returned;
	}
	return $output;
}

function assert_output_contains( array $a ): array {
	$out = output_of( $a );
	$exp = (string) $a['expected'];
	return str_contains( $out, $exp )
		? array( true, 'output contains ' . describe( $exp ) )
		: array( false, 'output does not contain ' . describe( $exp ) . '; output: ' . describe( $out ) );
}

function assert_output_not_contains( array $a ): array {
	$out = output_of( $a );
	$exp = (string) $a['expected'];
	return ! str_contains( $out, $exp )
		? array( true, 'output does not contain ' . describe( $exp ) )
		: array( false, 'output contains ' . describe( $exp ) . '; output: ' . describe( $out ) );
}

function assert_output_equals( array $a ): array {
	$out = output_of( $a );
	$exp = (string) $a['expected'];
	return trim( $out ) === trim( $exp )
		? array( true, 'output equals the expected text (compared trimmed)' )
		: array( false, 'output ' . describe( $out ) . ' does not equal ' . describe( $exp ) . ' (compared trimmed)' );
}

function assert_output_matches( array $a ): array {
	$out = output_of( $a );
	return pattern_match( $a['pattern'], $out )[0]
		? array( true, 'output matches ' . describe( $a['pattern'] ) )
		: array( false, 'output does not match ' . describe( $a['pattern'] ) . '; output: ' . describe( $out ) );
}

/** Every key of $expected is in $actual with a matching value (numbers compare by value). */
function subset_matches( mixed $expected, mixed $actual ): bool {
	if ( is_array( $expected ) ) {
		if ( ! is_array( $actual ) ) {
			return false;
		}
		foreach ( $expected as $key => $value ) {
			if ( ! array_key_exists( $key, $actual ) || ! subset_matches( $value, $actual[ $key ] ) ) {
				return false;
			}
		}
		return true;
	}
	if ( ( is_int( $expected ) || is_float( $expected ) ) && ( is_int( $actual ) || is_float( $actual ) ) ) {
		return $expected == $actual; // phpcs:ignore Universal.Operators.StrictComparisons
	}
	return $expected === $actual;
}

function resolve_user( int|string $user ): int {
	$found = is_int( $user ) ? get_user_by( 'id', $user ) : ( get_user_by( 'login', $user ) ?: get_user_by( 'email', $user ) );
	if ( ! $found ) {
		throw new Failure( 'user ' . describe( $user ) . ' does not exist' );
	}
	return (int) $found->ID;
}

function assert_rest_response( array $a ): array {
	$method  = strtoupper( $a['method'] ?? 'GET' );
	$request = new \WP_REST_Request( $method, $a['route'] );
	if ( isset( $a['params'] ) ) {
		if ( 'GET' === $method || 'HEAD' === $method ) {
			$request->set_query_params( $a['params'] );
		} else {
			$request->set_body_params( $a['params'] );
		}
	}
	foreach ( $a['headers'] ?? array() as $name => $value ) {
		$request->set_header( $name, $value );
	}
	if ( array_key_exists( 'body', $a ) ) {
		if ( is_string( $a['body'] ) ) {
			$request->set_body( $a['body'] );
		} else {
			$request->set_header( 'Content-Type', 'application/json' );
			$request->set_body( wp_json_encode( $a['body'] ) );
		}
	}
	$previous = get_current_user_id();
	if ( array_key_exists( 'user', $a ) ) {
		wp_set_current_user( resolve_user( $a['user'] ) );
	}
	try {
		$response = rest_do_request( $request );
		$status   = $response->get_status();
		$data     = json_decode( wp_json_encode( rest_get_server()->response_to_data( $response, false ) ), true );
	} finally {
		wp_set_current_user( $previous );
	}

	$problems = array();
	$checked  = false;
	if ( array_key_exists( 'status', $a ) ) {
		$checked = true;
		if ( (int) $a['status'] !== $status ) {
			$problems[] = "status $status, expected {$a['status']}";
		}
	}
	if ( array_key_exists( 'body_contains', $a ) ) {
		$checked = true;
		if ( ! str_contains( (string) wp_json_encode( $data ), (string) $a['body_contains'] ) ) {
			$problems[] = 'body does not contain ' . describe( $a['body_contains'] );
		}
	}
	$selected = $data;
	$where    = 'data';
	if ( array_key_exists( 'data_path', $a ) ) {
		$where = "data at '{$a['data_path']}'";
		foreach ( '' === $a['data_path'] ? array() : explode( '.', $a['data_path'] ) as $key ) {
			if ( ! is_array( $selected ) || ! array_key_exists( $key, $selected ) ) {
				$problems[] = "response has no {$where}";
				$selected   = null;
				break;
			}
			$selected = $selected[ $key ];
		}
	}
	if ( array_key_exists( 'data', $a ) ) {
		$checked = true;
		if ( ! subset_matches( $a['data'], $selected ) ) {
			$problems[] = "$where " . describe( $selected ) . ' does not contain ' . describe( $a['data'] );
		}
	}
	if ( array_key_exists( 'expected', $a ) ) {
		$checked = true;
		[ $ok, $message ] = compare( $selected, $a['expected'], $a['compare'] ?? 'identical', $where );
		if ( ! $ok ) {
			$problems[] = $message;
		}
	}
	if ( ! $checked && $status >= 400 ) {
		$problems[] = "status $status (no explicit check given, so any status below 400 passes)";
	}
	$summary = "$method {$a['route']} -> $status";
	return $problems ? array( false, $summary . ': ' . implode( '; ', $problems ) ) : array( true, $summary );
}

function assert_returns_value( array $a ): array {
	$fn = require_callable( $a['function'] );
	if ( array_key_exists( 'args_code', $a ) ) {
		$args = eval_php( $a['args_code'] );
		if ( ! is_array( $args ) ) {
			throw new Failure( 'args_code returned ' . describe( $args ) . ', not an array of arguments' );
		}
	} else {
		$args = $a['args'] ?? array();
	}
	$returned = call_user_func_array( $fn, $args );
	return compare( $returned, expected_of( $a ), $a['compare'] ?? 'identical', "$fn() return value" );
}

function assert_query_result( array $a ): array {
	global $wpdb;
	$sql  = str_replace( '{prefix}', $wpdb->prefix, $a['query'] );
	$mode = $a['mode'] ?? 'var';
	$wpdb->last_error = '';
	$result = match ( $mode ) {
		'var' => $wpdb->get_var( $sql ),
		'col' => $wpdb->get_col( $sql ),
		'row' => $wpdb->get_row( $sql, ARRAY_A ),
		'results' => $wpdb->get_results( $sql, ARRAY_A ),
		default => throw new Failure( "unknown query_result mode '$mode'" ),
	};
	if ( '' !== $wpdb->last_error ) {
		return array( false, 'query failed: ' . cut( $wpdb->last_error, 500 ) );
	}
	return compare( $result, expected_of( $a ), $a['compare'] ?? 'identical', "query result ($mode)" );
}

function assert_option_value( array $a ): array {
	$missing = new \stdClass();
	$value   = get_option( $a['option'], $missing );
	if ( ! empty( $a['absent'] ) ) {
		return $value === $missing
			? array( true, "option '{$a['option']}' is not set" )
			: array( false, "option '{$a['option']}' is set to " . describe( $value ) );
	}
	if ( $value === $missing ) {
		return array( false, "option '{$a['option']}' is not set" );
	}
	return compare( $value, expected_of( $a ), $a['compare'] ?? 'identical', "option '{$a['option']}'" );
}

function assert_post_meta_value( array $a ): array {
	$post_id = array_key_exists( 'post_id_code', $a ) ? eval_php( $a['post_id_code'] ) : $a['post_id'];
	if ( ! is_numeric( $post_id ) || (int) $post_id <= 0 ) {
		return array( false, 'no post: post id is ' . describe( $post_id ) );
	}
	$single = $a['single'] ?? true;
	$value  = get_post_meta( (int) $post_id, $a['meta_key'], (bool) $single );
	return compare( $value, expected_of( $a ), $a['compare'] ?? 'identical', "post $post_id meta '{$a['meta_key']}'" );
}
