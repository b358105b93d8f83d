<?php
/**
 * Judging assertions: what the runner observed (runner/observe.php) against what the test expects.
 *
 * This happens here, in the supervisor, which never runs candidate code: expected values, compare
 * modes, patterns and wanted callbacks never reach the runner's process (runner_job() strips them).
 * An observation is plain data; restore() turns the runner's markers for what JSON cannot carry back
 * into PHP values (an object becomes an Opaque stand-in that equals nothing the task can write except
 * its string form, when it is Stringable).
 *
 * Every global function and constant is fully qualified (see runner/observe.php for why).
 */

declare(strict_types=1);

namespace WPBench\Supervisor;

use function WPBench\Common\pattern_match;

/** Parameters that say what is expected rather than what to do: they stay in the supervisor. */
const JUDGE_ONLY = array( 'expected', 'compare', 'absent', 'pattern', 'status', 'body_contains', 'data', 'data_path', 'callback', 'priority', 'description', 'weight' );

/** An object (or anything else JSON cannot carry) the runner observed. */
final class Opaque {
	public function __construct( public readonly string $describe, public readonly ?string $string = null ) {}
}

/** What the runner may see of an assertion: its inputs, never its expectations. */
function runner_assertion( array $a ): array {
	return \array_diff_key( $a, \array_flip( JUDGE_ONLY ) );
}

/** The runner's encoded value back as PHP data (see encode() in runner/observe.php). */
function restore( mixed $value ): mixed {
	if ( ! \is_array( $value ) ) {
		return $value;
	}
	if ( 1 <= \count( $value ) && \is_string( \array_key_first( $value ) ) && \str_starts_with( (string) \array_key_first( $value ), '$' ) && ! \str_starts_with( (string) \array_key_first( $value ), '$$' ) ) {
		$marker = (string) \array_key_first( $value );
		return match ( $marker ) {
			'$float' => match ( $value['$float'] ) { 'INF' => \INF, '-INF' => -\INF, default => \NAN },
			'$bytes' => (string) \base64_decode( (string) $value['$bytes'] ),
			'$object' => new Opaque( (string) ( $value['describe'] ?? 'object' ), \is_string( $value['string'] ?? null ) ? $value['string'] : null ),
			'$resource' => new Opaque( 'resource(' . (string) $value['$resource'] . ')' ),
			default => new Opaque( 'a value nested too deeply to compare' ),
		};
	}
	$out = array();
	foreach ( $value as $key => $item ) {
		if ( \is_string( $key ) && \str_starts_with( $key, '$$' ) ) {
			$key = \substr( $key, 1 );
		}
		$out[ $key ] = restore( $item );
	}
	return $out;
}

/** A short, readable rendering of a value for messages. */
function describe( mixed $value ): string {
	if ( null === $value ) {
		return 'null';
	}
	if ( \is_bool( $value ) ) {
		return $value ? 'true' : 'false';
	}
	if ( \is_int( $value ) || \is_float( $value ) ) {
		return \var_export( $value, true );
	}
	if ( $value instanceof Opaque ) {
		return $value->describe;
	}
	if ( \is_string( $value ) ) {
		return cut_text( (string) \json_encode( $value, \JSON_UNESCAPED_SLASHES | \JSON_UNESCAPED_UNICODE | \JSON_INVALID_UTF8_SUBSTITUTE ), 300 );
	}
	if ( \is_array( $value ) ) {
		$json = \json_encode( $value, \JSON_UNESCAPED_SLASHES | \JSON_UNESCAPED_UNICODE | \JSON_INVALID_UTF8_SUBSTITUTE | \JSON_PARTIAL_OUTPUT_ON_ERROR );
		return cut_text( false === $json ? 'array(' . \count( $value ) . ')' : $json, 300 );
	}
	return \get_debug_type( $value );
}

function cut_text( string $text, int $max ): string {
	return \strlen( $text ) <= $max ? $text : \mb_strcut( $text, 0, $max, 'UTF-8' ) . '…';
}

/**
 * The `equals` comparison: PHP's == for numbers and strings (7, 7.0, "7" and "7.0" are equal; two
 * numeric strings compare as numbers; any other string is equal only to itself), but a boolean or
 * null is equal only to the same boolean or null, never to a value of another type. Arrays are equal
 * when they have the same keys and equal values by these rules. An object the runner saw (Opaque)
 * equals a string identical to its string form, and nothing else.
 *
 * PHP's own == would let `true` (or array(true)) equal every non-empty expected value, so one
 * universal answer would pass every `equals` and `contains` check without knowing the value.
 */
function loosely_equal( mixed $a, mixed $b ): bool {
	if ( \is_bool( $a ) || \is_bool( $b ) || null === $a || null === $b ) {
		return $a === $b;
	}
	if ( $a instanceof Opaque || $b instanceof Opaque ) {
		[ $opaque, $other ] = $a instanceof Opaque ? array( $a, $b ) : array( $b, $a );
		return \is_string( $other ) && null !== $opaque->string && $opaque->string === $other;
	}
	if ( \is_array( $a ) || \is_array( $b ) ) {
		if ( ! \is_array( $a ) || ! \is_array( $b ) || \count( $a ) !== \count( $b ) ) {
			return false;
		}
		foreach ( $a as $key => $item ) {
			if ( ! \array_key_exists( $key, $b ) || ! loosely_equal( $item, $b[ $key ] ) ) {
				return false;
			}
		}
		return true;
	}
	return $a == $b; // phpcs:ignore Universal.Operators.StrictComparisons -- only numbers and strings reach here
}

/**
 * The contract's `compare` modes: identical (===, default), equals (loosely_equal: == without
 * boolean or null juggling), contains (substring, or an array member by loosely_equal), matches
 * (regex on a string).
 *
 * @return array{0: bool, 1: string}
 */
function compare( mixed $actual, mixed $expected, string $how, string $what ): array {
	switch ( $how ) {
		case 'equals':
			$ok   = loosely_equal( $actual, $expected );
			$verb = 'to equal';
			break;
		case 'contains':
			$verb = 'to contain';
			$ok   = false;
			if ( \is_array( $actual ) ) {
				foreach ( $actual as $item ) {
					$ok = $ok || loosely_equal( $item, $expected );
				}
			} elseif ( \is_string( $actual ) && ( \is_string( $expected ) || \is_int( $expected ) || \is_float( $expected ) ) ) {
				$ok = \str_contains( $actual, (string) $expected );
			}
			break;
		case 'matches':
			$verb = 'to match';
			$ok   = ( \is_string( $actual ) || \is_int( $actual ) || \is_float( $actual ) ) && pattern_match( (string) $expected, (string) $actual )[0];
			break;
		default:
			$ok   = $actual === $expected;
			$verb = 'to be identical to';
	}
	if ( $ok ) {
		return array( true, "$what is as expected ($how " . describe( $expected ) . ')' );
	}
	return array( false, "expected $what $verb " . describe( $expected ) . ', got ' . describe( $actual ) );
}

/** Every key of $expected is in $actual with a matching value (numbers compare by value). */
function subset_matches( mixed $expected, mixed $actual ): bool {
	if ( \is_array( $expected ) ) {
		if ( ! \is_array( $actual ) ) {
			return false;
		}
		foreach ( $expected as $key => $value ) {
			if ( ! \array_key_exists( $key, $actual ) || ! subset_matches( $value, $actual[ $key ] ) ) {
				return false;
			}
		}
		return true;
	}
	if ( ( \is_int( $expected ) || \is_float( $expected ) ) && ( \is_int( $actual ) || \is_float( $actual ) ) ) {
		return $expected == $actual; // phpcs:ignore Universal.Operators.StrictComparisons
	}
	return $expected === $actual;
}

/**
 * Judges one assertion from the runner's event for it.
 *
 * @param array<string, mixed> $a     The assertion as the task has it (with expectations).
 * @param array<string, mixed> $event The runner's assertion event: `observed` or `failed`.
 * @return array{0: bool, 1: string}
 */
function judge( array $a, array $event ): array {
	if ( \is_string( $event['failed'] ?? null ) ) {
		return array( false, $event['failed'] );
	}
	if ( ! \is_array( $event['observed'] ?? null ) ) {
		return array( false, 'the runner reported no observation' );
	}
	$o    = $event['observed'];
	$type = $a['type'];
	$how  = $a['compare'] ?? 'identical';
	switch ( $type ) {
		case 'custom_assertion':
			$value = restore( $o['value'] ?? null );
			return true === $value
				? array( true, 'returned true' )
				: array( false, 'returned ' . describe( $value ) . ' (a custom assertion passes only when it returns true)' );
		case 'function_exists':
			$name = \ltrim( $a['function'], '\\' );
			return true === ( $o['exists'] ?? null ) ? array( true, "function $name exists" ) : array( false, "function $name is not defined" );
		case 'class_exists':
			$name = \ltrim( $a['class'], '\\' );
			return true === ( $o['exists'] ?? null ) ? array( true, "class $name exists" ) : array( false, "class $name is not defined" );
		case 'shortcode_exists':
			return true === ( $o['exists'] ?? null )
				? array( true, "shortcode [{$a['shortcode']}] is registered" )
				: array( false, "shortcode [{$a['shortcode']}] is not registered" );
		case 'hook_registered':
			return judge_hook( $a, \is_array( $o['entries'] ?? null ) ? $o['entries'] : array() );
		case 'output_contains':
		case 'output_not_contains':
		case 'output_equals':
		case 'output_matches':
			$out = restore( $o['output'] ?? '' );
			return judge_output( $type, $a, \is_string( $out ) ? $out : '' );
		case 'rest_response':
			return judge_rest( $a, (int) ( $o['status'] ?? 0 ), restore( $o['data'] ?? null ) );
		case 'returns_value':
			$fn = \ltrim( $a['function'], '\\' );
			return compare( restore( $o['value'] ?? null ), $a['expected'] ?? null, $how, "$fn() return value" );
		case 'query_result':
			if ( \is_string( $o['error'] ?? null ) ) {
				return array( false, 'query failed: ' . $o['error'] );
			}
			return compare( restore( $o['value'] ?? null ), $a['expected'] ?? null, $how, 'query result (' . ( $a['mode'] ?? 'var' ) . ')' );
		case 'option_value':
			$set = true === ( $o['set'] ?? null );
			if ( ! empty( $a['absent'] ) ) {
				return ! $set ? array( true, "option '{$a['option']}' is not set" ) : array( false, "option '{$a['option']}' is set to " . describe( restore( $o['value'] ?? null ) ) );
			}
			if ( ! $set ) {
				return array( false, "option '{$a['option']}' is not set" );
			}
			return compare( restore( $o['value'] ?? null ), $a['expected'] ?? null, $how, "option '{$a['option']}'" );
		case 'post_meta_value':
			if ( ! \array_key_exists( 'value', $o ) ) {
				return array( false, 'no post: post id is ' . describe( restore( $o['post_id'] ?? null ) ) );
			}
			return compare( restore( $o['value'] ), $a['expected'] ?? null, $how, "post {$o['post_id']} meta '{$a['meta_key']}'" );
	}
	return array( false, "unknown assertion type '$type'" );
}

/** @param list<mixed> $entries [priority, callable name] of each callback on the hook */
function judge_hook( array $a, array $entries ): array {
	$hook   = $a['hook'];
	$want   = null;
	if ( \array_key_exists( 'callback', $a ) ) {
		$want = \is_array( $a['callback'] ) ? \ltrim( (string) $a['callback'][0], '\\' ) . '::' . $a['callback'][1] : \ltrim( (string) $a['callback'], '\\' );
	}
	$prio   = $a['priority'] ?? null;
	$wanted = "'$hook'" . ( null !== $want ? " with $want" : '' ) . ( null !== $prio ? " at priority $prio" : '' );
	$at     = array();
	foreach ( $entries as $entry ) {
		if ( ! \is_array( $entry ) || 2 !== \count( $entry ) ) {
			continue;
		}
		[ $priority, $name ] = $entry;
		if ( null === $want || 0 === \strcasecmp( (string) $name, $want ) ) {
			if ( null === $prio || (int) $priority === (int) $prio ) {
				return array( true, "hooked to $wanted" );
			}
			$at[] = $priority;
		}
	}
	if ( ! $entries ) {
		return array( false, "nothing is hooked to '$hook'" );
	}
	if ( $at ) {
		$who = null !== $want ? $want : 'callbacks';
		return array( false, "not hooked to $wanted: $who at priority " . \implode( ', ', \array_unique( $at ) ) );
	}
	return array( false, "not hooked to $wanted (" . \count( $entries ) . ' other callbacks are)' );
}

function judge_output( string $type, array $a, string $out ): array {
	if ( 'output_matches' === $type ) {
		return pattern_match( $a['pattern'], $out )[0]
			? array( true, 'output matches ' . describe( $a['pattern'] ) )
			: array( false, 'output does not match ' . describe( $a['pattern'] ) . '; output: ' . describe( $out ) );
	}
	$exp = (string) $a['expected'];
	if ( 'output_equals' === $type ) {
		return \trim( $out ) === \trim( $exp )
			? array( true, 'output equals the expected text (compared trimmed)' )
			: array( false, 'output ' . describe( $out ) . ' does not equal ' . describe( $exp ) . ' (compared trimmed)' );
	}
	$has = \str_contains( $out, $exp );
	if ( 'output_not_contains' === $type ) {
		return ! $has ? array( true, 'output does not contain ' . describe( $exp ) ) : array( false, 'output contains ' . describe( $exp ) . '; output: ' . describe( $out ) );
	}
	return $has ? array( true, 'output contains ' . describe( $exp ) ) : array( false, 'output does not contain ' . describe( $exp ) . '; output: ' . describe( $out ) );
}

function judge_rest( array $a, int $status, mixed $data ): array {
	$method   = \strtoupper( $a['method'] ?? 'GET' );
	$problems = array();
	$checked  = false;
	if ( \array_key_exists( 'status', $a ) ) {
		$checked = true;
		if ( (int) $a['status'] !== $status ) {
			$problems[] = "status $status, expected {$a['status']}";
		}
	}
	if ( \array_key_exists( 'body_contains', $a ) ) {
		$checked = true;
		if ( ! \str_contains( (string) \json_encode( $data, \JSON_UNESCAPED_SLASHES | \JSON_UNESCAPED_UNICODE ), (string) $a['body_contains'] ) ) {
			$problems[] = 'body does not contain ' . describe( $a['body_contains'] );
		}
	}
	$selected = $data;
	$where    = 'data';
	if ( \array_key_exists( 'data_path', $a ) ) {
		$where = "data at '{$a['data_path']}'";
		foreach ( '' === $a['data_path'] ? array() : \explode( '.', $a['data_path'] ) as $key ) {
			if ( ! \is_array( $selected ) || ! \array_key_exists( $key, $selected ) ) {
				$problems[] = "response has no {$where}";
				$selected   = null;
				break;
			}
			$selected = $selected[ $key ];
		}
	}
	if ( \array_key_exists( 'data', $a ) ) {
		$checked = true;
		if ( ! subset_matches( $a['data'], $selected ) ) {
			$problems[] = "$where " . describe( $selected ) . ' does not contain ' . describe( $a['data'] );
		}
	}
	if ( \array_key_exists( 'expected', $a ) ) {
		$checked          = true;
		[ $ok, $message ] = compare( $selected, $a['expected'], $a['compare'] ?? 'identical', $where );
		if ( ! $ok ) {
			$problems[] = $message;
		}
	}
	if ( ! $checked && $status >= 400 ) {
		$problems[] = "status $status (no explicit check given, so any status below 400 passes)";
	}
	$summary = "$method {$a['route']} -> $status";
	return $problems ? array( false, $summary . ': ' . \implode( '; ', $problems ) ) : array( true, $summary );
}
