<?php
/**
 * What the runner observes for each assertion type (see the Assertion docstring in
 * wpbench_runtime/contract.py). The runner never judges: it reports what it saw, and the supervisor,
 * which never runs candidate code, compares that with the expected values (supervisor/judge.php).
 * The job the runner gets has no expected values at all (supervisor/sandbox.php strips them), and
 * test-authored PHP is compiled into argument-less closures called from main() only (runner.php),
 * so no frame that candidate code can see through debug_backtrace() carries a secret.
 *
 * Every call to a global function or constant is fully qualified (tests/runtime/test_verifier_source.py
 * fails on any that is not): candidate code that declares WPBench\Runner\<name> replaces nothing.
 *
 * No strict_types: candidate functions are called the way WordPress calls them, with PHP's usual
 * coercions.
 */

namespace WPBench\Runner;

/** The assertion cannot be observed (a function is missing, a query failed, ...): a failure, never a harness error. */
final class Failure extends \Exception {}

// The largest encoded observation the runner sends; past it the observation is replaced by a marker.
const MAX_OBSERVATION_BYTES = 1048576;
// How deep a value is encoded; deeper parts become a marker.
const MAX_DEPTH = 48;
// At most this many callbacks of a hook are reported.
const MAX_HOOK_ENTRIES = 2000;

/**
 * Observes one assertion. $in holds the inputs only (no expected values); `returned`/`echoed` are what
 * the assertion's test-authored code produced, when it has some (main() ran it).
 *
 * @return array{observed?: mixed, failed?: string}
 */
function observe( array $in ): array {
	try {
		$observed = match ( $in['type'] ) {
			'custom_assertion' => array( 'value' => encode( $in['returned'] ?? null ) ),
			'function_exists' => array( 'exists' => \function_exists( \ltrim( (string) $in['function'], '\\' ) ) ),
			'class_exists' => array( 'exists' => \class_exists( \ltrim( (string) $in['class'], '\\' ) ) ),
			'shortcode_exists' => array( 'exists' => \shortcode_exists( (string) $in['shortcode'] ) ),
			'hook_registered' => observe_hook( (string) $in['hook'] ),
			'output_contains', 'output_not_contains', 'output_equals', 'output_matches' => array( 'output' => encode( output_of( $in ) ) ),
			'rest_response' => observe_rest( $in ),
			'returns_value' => observe_returns( $in ),
			'query_result' => observe_query( $in ),
			'option_value' => observe_option( (string) $in['option'] ),
			'post_meta_value' => observe_post_meta( $in ),
			default => throw new Failure( 'unknown assertion type' ),
		};
		$json = \json_encode( $observed, \JSON_UNESCAPED_SLASHES | \JSON_PRESERVE_ZERO_FRACTION | \JSON_PARTIAL_OUTPUT_ON_ERROR );
		if ( false === $json || \strlen( $json ) > MAX_OBSERVATION_BYTES ) {
			return array( 'failed' => 'the observed value is too large to report (over ' . MAX_OBSERVATION_BYTES . ' bytes encoded)' );
		}
		return array( 'observed' => $observed );
	} catch ( Failure $e ) {
		return array( 'failed' => cut( $e->getMessage(), 2000 ) );
	} catch ( \Throwable $e ) {
		return array( 'failed' => cut( 'threw ' . describe_throwable( $e ), 2000 ) );
	}
}

/**
 * A PHP value as JSON-safe data the supervisor decodes (supervisor/judge.php restore()):
 * scalars and lists as they are; string keys that start with `$` get one more `$`; what JSON cannot
 * carry becomes a one-key marker array: `$float` (INF/NAN), `$bytes` (not UTF-8), `$object`, `$resource`,
 * `$deep`.
 */
function encode( mixed $value, int $depth = 0 ): mixed {
	if ( null === $value || \is_bool( $value ) || \is_int( $value ) ) {
		return $value;
	}
	if ( \is_float( $value ) ) {
		return \is_finite( $value ) ? $value : array( '$float' => \is_nan( $value ) ? 'NAN' : ( $value > 0 ? 'INF' : '-INF' ) );
	}
	if ( \is_string( $value ) ) {
		return \preg_match( '//u', $value ) ? $value : array( '$bytes' => \base64_encode( $value ) );
	}
	if ( $depth >= MAX_DEPTH ) {
		return array( '$deep' => true );
	}
	if ( \is_array( $value ) ) {
		$out = array();
		foreach ( $value as $key => $item ) {
			if ( \is_string( $key ) && \str_starts_with( $key, '$' ) ) {
				$key = '$' . $key;
			}
			$out[ $key ] = encode( $item, $depth + 1 );
		}
		return \array_is_list( $value ) ? \array_values( $out ) : (object) $out;
	}
	if ( \is_object( $value ) ) {
		$string = null;
		if ( $value instanceof \Stringable ) {
			try {
				$string = cut( (string) $value, 100000 );
			} catch ( \Throwable $e ) {
				$string = null;
			}
		}
		return array( '$object' => cut( \get_class( $value ), 300 ), 'string' => null === $string ? null : encode( $string ), 'describe' => describe_object( $value ) );
	}
	return array( '$resource' => \get_debug_type( $value ) );
}

function describe_object( object $value ): string {
	if ( $value instanceof \WP_Error ) {
		return 'WP_Error(' . cut( (string) $value->get_error_code(), 100 ) . ': ' . cut( (string) $value->get_error_message(), 200 ) . ')';
	}
	return 'object(' . cut( \get_class( $value ), 300 ) . ')';
}

function describe_throwable( \Throwable $e ): string {
	return cut( \get_class( $e ), 300 ) . ': ' . cut( $e->getMessage(), 1000 ) . ' in ' . cut( $e->getFile(), 300 ) . ':' . $e->getLine();
}

function require_callable( string $name ): string {
	$name = \ltrim( $name, '\\' );
	if ( ! \is_callable( $name ) ) {
		throw new Failure( "function $name is not defined" );
	}
	return $name;
}

/** A callback's name as a test writes it: `fn`, `Class::method` (objects by class), `Closure`. */
function callable_name( mixed $callback ): string {
	if ( \is_string( $callback ) ) {
		return cut( \ltrim( $callback, '\\' ), 300 );
	}
	if ( \is_array( $callback ) && 2 === \count( $callback ) && isset( $callback[0], $callback[1] ) ) {
		$class = \is_object( $callback[0] ) ? \get_class( $callback[0] ) : \ltrim( (string) $callback[0], '\\' );
		return cut( $class . '::' . $callback[1], 600 );
	}
	if ( $callback instanceof \Closure ) {
		return 'Closure';
	}
	if ( \is_object( $callback ) ) {
		return cut( \get_class( $callback ), 300 ) . '::__invoke';
	}
	return \gettype( $callback );
}

/** @return array{entries: list<array{0: int|string, 1: string}>, more: int} Priority and name of each callback. */
function observe_hook( string $hook ): array {
	$entries = array();
	$more    = 0;
	$filter  = $GLOBALS['wp_filter'][ $hook ] ?? null;
	if ( $filter instanceof \WP_Hook ) {
		foreach ( $filter->callbacks as $priority => $callbacks ) {
			foreach ( $callbacks as $entry ) {
				if ( \count( $entries ) >= MAX_HOOK_ENTRIES ) {
					++$more;
					continue;
				}
				$entries[] = array( $priority, callable_name( $entry['function'] ?? null ) );
			}
		}
	}
	return array( 'entries' => $entries, 'more' => $more );
}

/** The output of an output_* source: what it echoed, then what it returned (a string or number). */
function output_of( array $in ): string {
	if ( \array_key_exists( 'echoed', $in ) ) {
		$output   = (string) $in['echoed'];
		$returned = $in['returned'];
	} else {
		$level = \ob_get_level();
		\ob_start();
		try {
			if ( \array_key_exists( 'shortcode_content', $in ) ) {
				$returned = \do_shortcode( $in['shortcode_content'] );
			} else {
				$returned = \call_user_func_array( require_callable( (string) $in['function'] ), $in['args'] ?? array() );
			}
		} finally {
			$output = collect_output( $level );
		}
	}
	if ( \is_string( $returned ) || \is_int( $returned ) || \is_float( $returned ) ) {
		$output .= (string) $returned;
	}
	return $output;
}

/** Ends the output buffers opened since $level (the innermost one is ours) and returns what they held. */
function collect_output( int $level ): string {
	while ( \ob_get_level() > $level + 1 ) {
		\ob_end_flush();
	}
	return \ob_get_level() > $level ? (string) \ob_get_clean() : '';
}

function resolve_user( int|string $user ): int {
	$found = \is_int( $user ) ? \get_user_by( 'id', $user ) : ( \get_user_by( 'login', $user ) ?: \get_user_by( 'email', $user ) );
	if ( ! $found ) {
		throw new Failure( 'user ' . \json_encode( $user ) . ' does not exist' );
	}
	return (int) $found->ID;
}

/** @return array{status: int, data: mixed} */
function observe_rest( array $in ): array {
	$method  = \strtoupper( $in['method'] ?? 'GET' );
	$request = new \WP_REST_Request( $method, $in['route'] );
	if ( isset( $in['params'] ) ) {
		if ( 'GET' === $method || 'HEAD' === $method ) {
			$request->set_query_params( $in['params'] );
		} else {
			$request->set_body_params( $in['params'] );
		}
	}
	foreach ( $in['headers'] ?? array() as $name => $value ) {
		$request->set_header( $name, $value );
	}
	if ( \array_key_exists( 'body', $in ) ) {
		if ( \is_string( $in['body'] ) ) {
			$request->set_body( $in['body'] );
		} else {
			$request->set_header( 'Content-Type', 'application/json' );
			$request->set_body( \wp_json_encode( $in['body'] ) );
		}
	}
	$previous = \get_current_user_id();
	if ( \array_key_exists( 'user', $in ) ) {
		\wp_set_current_user( resolve_user( $in['user'] ) );
	}
	try {
		$response = \rest_do_request( $request );
		$status   = (int) $response->get_status();
		$data     = \json_decode( (string) \wp_json_encode( \rest_get_server()->response_to_data( $response, false ) ), true );
	} finally {
		\wp_set_current_user( $previous );
	}
	return array( 'status' => $status, 'data' => encode( $data ) );
}

/** @return array{value: mixed} */
function observe_returns( array $in ): array {
	$fn = require_callable( (string) $in['function'] );
	if ( \array_key_exists( 'args_code', $in ) ) {
		$args = $in['returned'];
		if ( ! \is_array( $args ) ) {
			throw new Failure( 'args_code returned ' . \get_debug_type( $args ) . ', not an array of arguments' );
		}
	} else {
		$args = $in['args'] ?? array();
	}
	return array( 'value' => encode( \call_user_func_array( $fn, $args ) ) );
}

/** @return array{value?: mixed, error?: string} */
function observe_query( array $in ): array {
	$wpdb             = $GLOBALS['wpdb'];
	$sql              = \str_replace( '{prefix}', $wpdb->prefix, (string) $in['query'] );
	$wpdb->last_error = '';
	$result           = match ( $in['mode'] ?? 'var' ) {
		'col' => $wpdb->get_col( $sql ),
		'row' => $wpdb->get_row( $sql, \ARRAY_A ),
		'results' => $wpdb->get_results( $sql, \ARRAY_A ),
		default => $wpdb->get_var( $sql ),
	};
	if ( '' !== (string) $wpdb->last_error ) {
		return array( 'error' => cut( (string) $wpdb->last_error, 500 ) );
	}
	return array( 'value' => encode( $result ) );
}

/** @return array{set: bool, value?: mixed} */
function observe_option( string $option ): array {
	$missing = new \stdClass();
	$value   = \get_option( $option, $missing );
	return $value === $missing ? array( 'set' => false ) : array( 'set' => true, 'value' => encode( $value ) );
}

/** @return array{post_id: mixed, value?: mixed} */
function observe_post_meta( array $in ): array {
	$post_id = \array_key_exists( 'post_id_code', $in ) ? $in['returned'] : $in['post_id'];
	if ( ! \is_numeric( $post_id ) || (int) $post_id <= 0 ) {
		return array( 'post_id' => encode( \is_scalar( $post_id ) || null === $post_id ? $post_id : \get_debug_type( $post_id ) ) );
	}
	$value = \get_post_meta( (int) $post_id, (string) $in['meta_key'], (bool) ( $in['single'] ?? true ) );
	return array( 'post_id' => (int) $post_id, 'value' => encode( $value ) );
}
