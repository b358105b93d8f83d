<?php
/**
 * Validation of the task document (wpbench_runtime.contract.GradeTask, schema/grade-task.schema.json).
 *
 * Objects are decoded as stdClass so `{}` and `[]` stay distinct. A bad field raises TaskError
 * naming it (`runtime_checks.assertions[2].weight: ...`); the supervisor turns that into a
 * harness_error verdict and exit code 2. Types are checked as JSON types: where pydantic would
 * coerce (a numeric string for a number), this validator refuses.
 *
 * Assertion parameters are checked per type (the Assertion docstring in contract.py), including
 * the syntax of every piece of test-authored PHP and every regex, so a mis-authored test stops
 * here instead of being blamed on the candidate later.
 */

declare(strict_types=1);

namespace WPBench\Supervisor;

use function WPBench\Common\pattern_error;

final class TaskError extends \Exception {
	public function __construct( public readonly string $field, string $message ) {
		parent::__construct( ( '' === $field ? 'task' : $field ) . ': ' . $message );
	}
}

const ASSERTION_TYPES = array(
	'custom_assertion', 'function_exists', 'class_exists', 'shortcode_exists', 'hook_registered',
	'output_contains', 'output_not_contains', 'output_equals', 'output_matches', 'rest_response',
	'returns_value', 'query_result', 'option_value', 'post_meta_value',
);

const OUTPUT_SOURCES = array( 'code' => 'code', 'shortcode_content' => 'str', 'function' => 'str', 'args' => 'args' );

/** Parameters per assertion type: name => kind; a trailing ! marks it required. */
const ASSERTION_PARAMS = array(
	'custom_assertion'    => array( 'code' => 'code!' ),
	'function_exists'     => array( 'function' => 'str!' ),
	'class_exists'        => array( 'class' => 'str!' ),
	'shortcode_exists'    => array( 'shortcode' => 'str!' ),
	'hook_registered'     => array( 'hook' => 'str!', 'callback' => 'callback', 'priority' => 'int' ),
	'output_contains'     => OUTPUT_SOURCES + array( 'expected' => 'text!' ),
	'output_not_contains' => OUTPUT_SOURCES + array( 'expected' => 'text!' ),
	'output_equals'       => OUTPUT_SOURCES + array( 'expected' => 'text!' ),
	'output_matches'      => OUTPUT_SOURCES + array( 'pattern' => 'regex!' ),
	'rest_response'       => array(
		'route'         => 'route!',
		'method'        => 'method',
		'params'        => 'object',
		'body'          => 'any',
		'headers'       => 'headers',
		'user'          => 'user',
		'status'        => 'int',
		'body_contains' => 'text',
		'data'          => 'any',
		'data_path'     => 'str',
		'expected'      => 'any',
		'compare'       => 'compare',
	),
	'returns_value'       => array( 'function' => 'str!', 'args' => 'args', 'args_code' => 'code', 'expected' => 'any!', 'compare' => 'compare' ),
	'query_result'        => array( 'query' => 'str!', 'mode' => 'mode', 'expected' => 'any!', 'compare' => 'compare' ),
	'option_value'        => array( 'option' => 'str!', 'expected' => 'any', 'absent' => 'bool', 'compare' => 'compare' ),
	'post_meta_value'     => array(
		'post_id'      => 'int',
		'post_id_code' => 'code',
		'meta_key'     => 'str!',
		'single'       => 'bool',
		'expected'     => 'any!',
		'compare'      => 'compare',
	),
);

/**
 * Parses and validates a task document.
 *
 * @return array<string, mixed> The normalized task (objects turned into PHP arrays).
 * @throws TaskError Naming the first bad field.
 */
function validate_task( string $raw ): array {
	if ( '' === \trim( $raw ) ) {
		throw new TaskError( '', 'empty input: expected one JSON task document' );
	}
	try {
		$doc = \json_decode( $raw, false, 512, \JSON_THROW_ON_ERROR | \JSON_BIGINT_AS_STRING );
	} catch ( \JsonException $e ) {
		throw new TaskError( '', 'not valid JSON: ' . $e->getMessage() );
	}
	if ( ! $doc instanceof \stdClass ) {
		throw new TaskError( '', 'must be a JSON object, got ' . json_type( $doc ) );
	}
	$fields = (array) $doc;
	only_keys( $fields, '', array( 'contract_version', 'test_id', 'artifact_kind', 'code', 'files', 'static_checks', 'runtime_checks', 'test_function', 'timeout_seconds', 'setup_timeout_seconds' ) );

	$task = array();
	if ( \array_key_exists( 'contract_version', $fields ) && '1' !== $fields['contract_version'] ) {
		throw new TaskError( 'contract_version', 'unsupported contract version ' . \json_encode( $fields['contract_version'] ) . '; this verifier reads "1"' );
	}
	if ( ! \array_key_exists( 'test_id', $fields ) ) {
		throw new TaskError( 'test_id', 'field required' );
	}
	$task['test_id'] = str_field( $fields['test_id'], 'test_id' );
	$len             = \strlen( $task['test_id'] );
	if ( $len < 1 || $len > 200 ) {
		throw new TaskError( 'test_id', 'must be 1 to 200 characters long' );
	}
	$kind = $fields['artifact_kind'] ?? 'php_snippet';
	if ( 'php_snippet' !== $kind && 'wp_plugin_files' !== $kind ) {
		throw new TaskError( 'artifact_kind', 'must be "php_snippet" or "wp_plugin_files", got ' . \json_encode( $kind ) );
	}
	$task['artifact_kind'] = $kind;
	$task['code']          = null;
	$task['files']         = null;
	if ( null !== ( $fields['code'] ?? null ) ) {
		$task['code'] = str_field( $fields['code'], 'code' );
	}
	if ( null !== ( $fields['files'] ?? null ) ) {
		if ( ! $fields['files'] instanceof \stdClass ) {
			throw new TaskError( 'files', 'must be an object mapping relative paths to file contents, got ' . json_type( $fields['files'] ) );
		}
		$task['files'] = array();
		foreach ( (array) $fields['files'] as $path => $content ) {
			$task['files'][ (string) $path ] = str_field( $content, 'files[' . \json_encode( (string) $path, \JSON_UNESCAPED_SLASHES ) . ']' );
		}
	}
	if ( 'php_snippet' === $kind && null === $task['code'] ) {
		throw new TaskError( 'code', 'required when artifact_kind is php_snippet' );
	}
	if ( 'wp_plugin_files' === $kind && null === $task['files'] ) {
		throw new TaskError( 'files', 'required when artifact_kind is wp_plugin_files' );
	}

	$static = object_field( $fields['static_checks'] ?? new \stdClass(), 'static_checks' );
	only_keys( $static, 'static_checks', array( 'required_patterns', 'forbidden_patterns' ) );
	foreach ( array( 'required_patterns' => 'required', 'forbidden_patterns' => 'forbidden' ) as $key => $name ) {
		$task[ $name ] = array();
		foreach ( list_field( $static[ $key ] ?? array(), "static_checks.$key" ) as $i => $item ) {
			$task[ $name ][] = static_pattern( $item, "static_checks.{$key}[$i]" );
		}
	}

	$runtime = object_field( $fields['runtime_checks'] ?? new \stdClass(), 'runtime_checks' );
	only_keys( $runtime, 'runtime_checks', array( 'setup', 'assertions', 'teardown' ) );
	foreach ( array( 'setup', 'teardown' ) as $key ) {
		$task[ $key ] = \array_key_exists( $key, $runtime ) ? str_field( $runtime[ $key ], "runtime_checks.$key" ) : '';
		check_php( $task[ $key ], "runtime_checks.$key" );
	}
	$task['assertions'] = array();
	foreach ( list_field( $runtime['assertions'] ?? array(), 'runtime_checks.assertions' ) as $i => $item ) {
		$task['assertions'][] = assertion( $item, "runtime_checks.assertions[$i]" );
	}

	$task['test_function']      = null;
	$task['test_function_name'] = null;
	if ( null !== ( $fields['test_function'] ?? null ) ) {
		$task['test_function'] = str_field( $fields['test_function'], 'test_function' );
		if ( ! \preg_match( '/^\s*(?:function\s+)?&?\s*(\\\\?[A-Za-z_\x80-\xff][A-Za-z0-9_\x80-\xff]*(?:\\\\[A-Za-z_\x80-\xff][A-Za-z0-9_\x80-\xff]*)*)\s*(?:\(|:|$)/', $task['test_function'], $m ) ) {
			throw new TaskError( 'test_function', 'no function name found in ' . \json_encode( $task['test_function'] ) );
		}
		$task['test_function_name'] = \ltrim( $m[1], '\\' );
	}

	// timeout_seconds bounds the candidate phase; setup_timeout_seconds the trusted phase before it.
	foreach ( array( 'timeout_seconds' => 90.0, 'setup_timeout_seconds' => 60.0 ) as $key => $default ) {
		$timeout = $fields[ $key ] ?? $default;
		if ( ! \is_int( $timeout ) && ! \is_float( $timeout ) ) {
			throw new TaskError( $key, 'must be a number, got ' . json_type( $timeout ) );
		}
		if ( $timeout <= 0 || $timeout > 3600 ) {
			throw new TaskError( $key, 'must be greater than 0 and at most 3600' );
		}
		$task[ $key ] = (float) $timeout;
	}
	return $task;
}

function json_type( mixed $value ): string {
	return match ( true ) {
		null === $value => 'null',
		\is_bool( $value ) => 'a boolean',
		\is_int( $value ), \is_float( $value ) => 'a number',
		\is_string( $value ) => 'a string',
		\is_array( $value ) => 'an array',
		default => 'an object',
	};
}

/** @param array<string, mixed> $fields */
function only_keys( array $fields, string $path, array $allowed ): void {
	foreach ( \array_keys( $fields ) as $key ) {
		if ( ! \in_array( (string) $key, $allowed, true ) ) {
			throw new TaskError( ( '' === $path ? '' : "$path." ) . $key, 'extra field not permitted (known: ' . \implode( ', ', $allowed ) . ')' );
		}
	}
}

function str_field( mixed $value, string $path ): string {
	if ( ! \is_string( $value ) ) {
		throw new TaskError( $path, 'must be a string, got ' . json_type( $value ) );
	}
	return $value;
}

/** @return array<string, mixed> */
function object_field( mixed $value, string $path ): array {
	if ( ! $value instanceof \stdClass ) {
		throw new TaskError( $path, 'must be an object, got ' . json_type( $value ) );
	}
	return (array) $value;
}

/** @return list<mixed> */
function list_field( mixed $value, string $path ): array {
	if ( ! \is_array( $value ) ) {
		throw new TaskError( $path, 'must be an array, got ' . json_type( $value ) );
	}
	return $value;
}

function weight_field( array $fields, string $path ): float {
	$weight = $fields['weight'] ?? 1.0;
	if ( ( ! \is_int( $weight ) && ! \is_float( $weight ) ) || $weight < 0 ) {
		throw new TaskError( "$path.weight", 'must be a number >= 0' );
	}
	return (float) $weight;
}

/** @return array{pattern: string, description: string, weight: float, severity: string} */
function static_pattern( mixed $item, string $path ): array {
	$fields = object_field( $item, $path );
	only_keys( $fields, $path, array( 'pattern', 'description', 'weight', 'severity' ) );
	if ( ! \array_key_exists( 'pattern', $fields ) ) {
		throw new TaskError( "$path.pattern", 'field required' );
	}
	$severity = $fields['severity'] ?? 'error';
	if ( 'error' !== $severity && 'warning' !== $severity ) {
		throw new TaskError( "$path.severity", 'must be "error" or "warning"' );
	}
	return array(
		'pattern'     => str_field( $fields['pattern'], "$path.pattern" ),
		'description' => str_field( $fields['description'] ?? '', "$path.description" ),
		'weight'      => weight_field( $fields, $path ),
		'severity'    => $severity,
	);
}

/** Checks the syntax of test-authored PHP (a body without `<?php`). */
function check_php( string $code, string $path ): void {
	if ( '' === \trim( $code ) ) {
		return;
	}
	$source = \preg_match( '/^\s*<\?php\b/i', $code ) ? $code : "<?php $code";
	try {
		\token_get_all( $source, \TOKEN_PARSE );
	} catch ( \ParseError $e ) {
		throw new TaskError( $path, 'PHP syntax error: ' . $e->getMessage() . ' on line ' . $e->getLine() );
	}
}

/** Recursively turns decoded JSON (stdClass objects) into PHP arrays. */
function to_array( mixed $value ): mixed {
	if ( $value instanceof \stdClass ) {
		$value = (array) $value;
	}
	if ( \is_array( $value ) ) {
		foreach ( $value as $key => $item ) {
			$value[ $key ] = to_array( $item );
		}
	}
	return $value;
}

/** @return array<string, mixed> */
function assertion( mixed $item, string $path ): array {
	$fields = object_field( $item, $path );
	if ( ! \array_key_exists( 'type', $fields ) ) {
		throw new TaskError( "$path.type", 'field required' );
	}
	$type = str_field( $fields['type'], "$path.type" );
	if ( ! \in_array( $type, ASSERTION_TYPES, true ) ) {
		throw new TaskError( "$path.type", "unknown assertion type '$type' (known: " . \implode( ', ', ASSERTION_TYPES ) . ')' );
	}
	$params = ASSERTION_PARAMS[ $type ];
	$out    = array(
		'type'        => $type,
		'description' => str_field( $fields['description'] ?? '', "$path.description" ),
		'weight'      => weight_field( $fields, $path ),
	);
	unset( $fields['type'], $fields['description'], $fields['weight'] );
	foreach ( $fields as $name => $value ) {
		$name = (string) $name;
		if ( ! isset( $params[ $name ] ) ) {
			throw new TaskError( "$path.$name", "not a parameter of $type (known: " . \implode( ', ', \array_keys( $params ) ) . ')' );
		}
		$kind = \rtrim( $params[ $name ], '!' );
		if ( null === $value && 'any' !== $kind ) {
			continue; // an explicit null is an absent parameter (null stays a value for expected, data, body)
		}
		$out[ $name ] = parameter( $kind, $value, "$path.$name" );
	}
	foreach ( $params as $name => $kind ) {
		if ( \str_ends_with( $kind, '!' ) && ! \array_key_exists( $name, $out ) ) {
			throw new TaskError( "$path.$name", "required for $type" );
		}
	}
	assertion_rules( $type, $out, $path );
	return $out;
}

function parameter( string $kind, mixed $value, string $path ): mixed {
	switch ( $kind ) {
		case 'str':
			return str_field( $value, $path );
		case 'route':
			$route = str_field( $value, $path );
			if ( ! \str_starts_with( $route, '/' ) ) {
				throw new TaskError( $path, 'a REST route starts with / (e.g. /wp/v2/posts)' );
			}
			return $route;
		case 'code':
			check_php( str_field( $value, $path ), $path );
			return $value;
		case 'regex':
			$error = pattern_error( str_field( $value, $path ) );
			if ( null !== $error ) {
				throw new TaskError( $path, "invalid regex: $error" );
			}
			return $value;
		case 'text':
			if ( ! \is_string( $value ) && ! \is_int( $value ) && ! \is_float( $value ) ) {
				throw new TaskError( $path, 'must be a string, got ' . json_type( $value ) );
			}
			return (string) $value;
		case 'int':
			if ( ! \is_int( $value ) ) {
				throw new TaskError( $path, 'must be an integer, got ' . json_type( $value ) );
			}
			return $value;
		case 'bool':
			if ( ! \is_bool( $value ) ) {
				throw new TaskError( $path, 'must be true or false, got ' . json_type( $value ) );
			}
			return $value;
		case 'args':
			if ( ! \is_array( $value ) && ! $value instanceof \stdClass ) {
				throw new TaskError( $path, 'must be an array of arguments (or an object of named arguments), got ' . json_type( $value ) );
			}
			return to_array( $value );
		case 'object':
			if ( ! $value instanceof \stdClass && array() !== $value ) {
				throw new TaskError( $path, 'must be an object, got ' . json_type( $value ) );
			}
			return to_array( $value );
		case 'headers':
			foreach ( object_field( $value, $path ) as $name => $header ) {
				if ( ! \is_string( $header ) && ! \is_int( $header ) && ! \is_float( $header ) ) {
					throw new TaskError( "$path.$name", 'a header value must be a string' );
				}
			}
			return to_array( $value );
		case 'callback':
			if ( \is_string( $value ) ) {
				return $value;
			}
			if ( \is_array( $value ) && 2 === \count( $value ) && \is_string( $value[0] ?? null ) && \is_string( $value[1] ?? null ) ) {
				return $value;
			}
			throw new TaskError( $path, 'must be a callable name: "function", "Class::method" or ["Class", "method"]' );
		case 'user':
			if ( ! \is_int( $value ) && ! \is_string( $value ) ) {
				throw new TaskError( $path, 'must be a user login (string) or id (integer)' );
			}
			return $value;
		case 'method':
			$method = \strtoupper( str_field( $value, $path ) );
			if ( ! \in_array( $method, array( 'GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS' ), true ) ) {
				throw new TaskError( $path, "unknown HTTP method '$value'" );
			}
			return $method;
		case 'mode':
			if ( ! \in_array( $value, array( 'var', 'col', 'row', 'results' ), true ) ) {
				throw new TaskError( $path, 'must be one of var, col, row, results' );
			}
			return $value;
		case 'compare':
			if ( ! \in_array( $value, array( 'identical', 'equals', 'contains', 'matches' ), true ) ) {
				throw new TaskError( $path, 'must be one of identical, equals, contains, matches' );
			}
			return $value;
		default: // any
			return to_array( $value );
	}
}

/** Rules that span parameters. */
function assertion_rules( string $type, array $a, string $path ): void {
	if ( \str_starts_with( $type, 'output_' ) ) {
		$sources = \array_values( \array_intersect( array( 'code', 'shortcode_content', 'function' ), \array_keys( $a ) ) );
		if ( 1 !== \count( $sources ) ) {
			throw new TaskError( $path, "$type needs exactly one source: code, shortcode_content or function (got " . ( $sources ? \implode( ', ', $sources ) : 'none' ) . ')' );
		}
		if ( \array_key_exists( 'args', $a ) && 'function' !== $sources[0] ) {
			throw new TaskError( "$path.args", 'only used with function' );
		}
	}
	if ( 'returns_value' === $type && \array_key_exists( 'args', $a ) && \array_key_exists( 'args_code', $a ) ) {
		throw new TaskError( $path, 'give args or args_code, not both' );
	}
	if ( 'option_value' === $type && empty( $a['absent'] ) && ! \array_key_exists( 'expected', $a ) ) {
		throw new TaskError( "$path.expected", 'required for option_value unless absent is true' );
	}
	if ( 'post_meta_value' === $type && \array_key_exists( 'post_id', $a ) === \array_key_exists( 'post_id_code', $a ) ) {
		throw new TaskError( $path, 'post_meta_value needs exactly one of post_id, post_id_code' );
	}
	if ( 'matches' === ( $a['compare'] ?? null ) ) {
		if ( ! \is_string( $a['expected'] ?? null ) ) {
			throw new TaskError( "$path.expected", 'compare=matches needs a string pattern' );
		}
		$error = pattern_error( $a['expected'] );
		if ( null !== $error ) {
			throw new TaskError( "$path.expected", "invalid regex: $error" );
		}
	}
}
