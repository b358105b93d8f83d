<?php
/**
 * What happened in one grading, read from the static checks and the runner's events: the facts the
 * verdict is scored from (verdict.php `outcome_of`), with no judgement of whose failure it was.
 *
 * `what_happened()` also writes the verdict's descriptive parts into the Outcome: PHP issues (with the
 * phase that raised them), the phases line by line, and each assertion's row, judged from the runner's
 * observation (judge.php).
 */

declare(strict_types=1);

namespace WPBench\Supervisor;

/** The facts of one runner run (all read-only). */
final class Happened {
	/**
	 * @param array       $run                   the runner's exit status, signal, stderr and protocol
	 * @param string      $stopped               the phase running after the last event (phase_after)
	 * @param bool        $timed_out             the supervisor killed the runner at timeout_seconds
	 * @param bool        $finished              the runner sent "done"
	 * @param ?array      $booted                the events, when they came: booted, setup, candidate
	 * @param ?string     $violation             the event protocol broken, and whether after setup succeeded
	 * @param list<string> $trespass             names the candidate declared in a verifier namespace
	 * @param ?bool       $test_function_defined null when the task names no test_function
	 * @param list<array> $failed_assertions     scored assertion rows that did not pass, in order
	 * @param ?string     $forbidden             error-severity forbidden patterns matched, in words
	 */
	public function __construct(
		public readonly array $run,
		public readonly string $stopped,
		public readonly bool $timed_out,
		public readonly bool $finished,
		public readonly ?array $booted,
		public readonly ?array $setup,
		public readonly ?array $candidate,
		public readonly ?string $violation,
		public readonly bool $violation_after_setup,
		public readonly array $trespass,
		public readonly ?bool $test_function_defined,
		public readonly array $failed_assertions,
		public readonly ?string $forbidden,
	) {}
}

/** Where the runner was when it stopped, from the events it got to send. */
function phase_label( string $phase, array $task ): string {
	if ( \str_starts_with( $phase, 'assertion:' ) ) {
		$index = (int) \substr( $phase, 10 );
		return -1 === $index ? 'the test_function check' : "assertion $index ({$task['assertions'][$index]['type']})";
	}
	return match ( $phase ) {
		'boot' => 'WordPress boot',
		'setup' => 'setup',
		'candidate' => 'candidate code',
		'teardown' => 'teardown',
		default => $phase,
	};
}

/** The phase that was running after the last event received. */
function phase_after( Protocol $protocol, array $task ): string {
	$last = null;
	foreach ( $protocol->events as $event ) {
		if ( 'ended' !== $event['event'] ) {
			$last = $event;
		}
	}
	$name = $last['event'] ?? 'none';
	switch ( $name ) {
		case 'none':
		case 'hello':
			return 'boot';
		case 'booted':
			return 'setup';
		case 'setup':
			return empty( $last['ok'] ) ? 'teardown' : 'candidate';
		case 'candidate':
		case 'assertion':
			$next = 'candidate' === $name ? ( null !== $task['test_function_name'] ? -1 : 0 ) : (int) $last['index'] + 1;
			return $next < \count( $task['assertions'] ) ? "assertion:$next" : 'teardown';
		case 'teardown':
			return 'finish';
		default:
			return 'finish';
	}
}

/** Why the runner stopped early, in words (from its "ended" event or its exit status). */
function crash_reason( array $run, string $where ): array {
	$ended = $run['protocol']->first( 'ended' );
	$fatal = $ended['fatal'] ?? null;
	if ( \is_array( $fatal ) ) {
		if ( ! empty( $fatal['memory'] ) ) {
			return array( 'memory', "memory exhausted (memory_limit {$ended['memory_limit']}) in $where: {$fatal['message']}" );
		}
		if ( \str_starts_with( (string) $fatal['message'], 'Uncaught ' ) ) {
			return array( 'exception', "uncaught exception in $where: " . first_line( $fatal['message'] ) );
		}
		return array( 'fatal', "PHP {$fatal['level']} in $where: " . first_line( $fatal['message'] ) . " ({$fatal['file']}:{$fatal['line']})" );
	}
	if ( null !== $ended ) {
		return array( 'exit', "exit() or die() was called in $where (exit code " . ( $run['exit_code'] ?? '?' ) . ')' );
	}
	if ( \str_contains( $run['stderr']->data, "\nOut of memory" ) || \str_contains( $run['stderr']->data, 'mmap() failed: [12]' ) ) {
		return array( 'memory', "memory exhausted (the runner's data limit, which memory_limit cannot raise) in $where" );
	}
	if ( null !== $run['signal'] ) {
		$hint = 9 === $run['signal'] ? ' (SIGKILL: the container memory limit?)' : '';
		return array( 'signal', "the runner was killed by signal {$run['signal']}$hint in $where" );
	}
	return array( 'vanished', "the runner exited with code {$run['exit_code']} without reporting, in $where" );
}

function first_line( string $text ): string {
	return \strtok( $text, "\n" ) ?: $text;
}

/**
 * One PHP issue as the verdict keeps it: the four fields the runner reports, typed, and the phase the
 * supervisor read from the event it came in (never a phase the record names itself).
 *
 * @return array{level: string, message: string, file: string, line: int, phase: string}
 */
function issue_row( mixed $issue, string $phase ): array {
	$issue = \is_array( $issue ) ? $issue : array();
	$text  = static fn( string $key, int $max ): string => \is_string( $issue[ $key ] ?? null ) ? cut_text( $issue[ $key ], $max ) : '';
	return array(
		'level'   => '' !== $text( 'level', 40 ) ? $text( 'level', 40 ) : 'Unknown error',
		'message' => $text( 'message', 2000 ),
		'file'    => $text( 'file', 500 ),
		'line'    => \is_int( $issue['line'] ?? null ) ? $issue['line'] : 0,
		'phase'   => $phase,
	);
}

/** Error-severity forbidden patterns that matched, in words (null: none). */
function forbidden_reason( array $static ): ?string {
	$matched = \array_filter( $static['forbidden'], static fn( array $p ): bool => $p['matched'] && 'error' === $p['severity'] );
	if ( ! $matched ) {
		return null;
	}
	$say = static function ( array $p ): string {
		$name = '' !== $p['description'] ? $p['description'] : $p['pattern'];
		if ( null !== $p['error'] ) {
			return "$name ({$p['error']})";
		}
		return $p['constructs'] ? "$name (PHP's tokens show " . \implode( ', ', $p['constructs'] ) . ')' : $name;
	};
	return 'forbidden pattern matched: ' . \implode( ', ', \array_map( $say, $matched ) );
}

/** The assertion rows, all "not run", and the unscored test_function row (null when the task has none). */
function assertion_rows( Outcome $o ): ?array {
	foreach ( $o->task['assertions'] as $i => $a ) {
		$o->assertions[ $i ] = array(
			'index'       => $i,
			'type'        => $a['type'],
			'description' => $a['description'],
			'weight'      => $a['weight'],
			'scored'      => true,
			'passed'      => false,
			'message'     => 'not run',
		);
	}
	if ( null === $o->task['test_function_name'] ) {
		return null;
	}
	return array(
		'index'       => -1,
		'type'        => 'function_exists',
		'description' => "test_function {$o->task['test_function_name']}() is defined",
		'weight'      => 0.0,
		'scored'      => false,
		'passed'      => false,
		'message'     => 'not run',
	);
}

/** Reads the run; fills the Outcome's issues, phases and assertion rows; returns the facts. */
function what_happened( Outcome $o, ?array $test_function ): Happened {
	$task     = $o->task;
	$run      = $o->run;
	$protocol = $run['protocol'];
	foreach ( $protocol->events as $event ) {
		// Where each issue was raised (boot, setup, candidate, assertion:N, teardown): profiles that
		// treat notices as errors need it (an upstream-profile notice fails only its own assertion).
		$phase = 'assertion' === $event['event'] ? 'assertion:' . (int) ( $event['index'] ?? 0 ) : (string) $event['event'];
		foreach ( \is_array( $event['issues'] ?? null ) ? $event['issues'] : array() as $issue ) {
			$o->issues[] = issue_row( $issue, $phase );
		}
	}
	$ended = $protocol->first( 'ended' );
	if ( \is_array( $ended['fatal'] ?? null ) ) {
		$o->issues[] = \array_intersect_key( $ended['fatal'], \array_flip( array( 'level', 'message', 'file', 'line' ) ) );
	}
	$stopped = phase_after( $protocol, $task );

	// Phases, as far as the events tell.
	$booted = $protocol->first( 'booted' );
	$o->phases['boot'] = null !== $booted ? "ok ({$booted['ms']} ms)" : 'did not complete';
	foreach ( array( 'setup', 'candidate', 'teardown' ) as $name ) {
		$event = $protocol->first( $name );
		if ( null !== $event ) {
			$o->phases[ $name ] = $event['ok'] ? ( ! empty( $event['empty'] ) ? 'ok (empty)' : 'ok' ) : ( ( $event['kind'] ?? 'failed' ) . ': ' . ( $event['error'] ?? '' ) );
		} elseif ( $stopped === $name ) {
			$o->phases[ $name ] = $run['timed_out'] ? 'timed out' : 'crashed';
		} else {
			$o->phases[ $name ] = 'not run';
		}
	}
	foreach ( $protocol->assertions() as $index => $event ) {
		$assertion = -1 === $index ? array( 'type' => 'function_exists', 'function' => (string) $task['test_function_name'] ) : ( $task['assertions'][ $index ] ?? null );
		if ( null === $assertion ) {
			continue;
		}
		[ $passed, $message ] = judge( $assertion, $event );
		$row                  = array(
			'passed'  => $passed,
			'message' => cut_text( $message, 2000 ),
		);
		if ( -1 === $index && null !== $test_function ) {
			$test_function = \array_merge( $test_function, $row );
		} elseif ( isset( $o->assertions[ $index ] ) ) {
			$o->assertions[ $index ] = \array_merge( $o->assertions[ $index ], $row );
		}
	}
	finish_assertions( $o, $test_function, $run['timed_out'] ? 'not run: timed out' : 'not run: the runner stopped early' );
	$total        = \count( $task['assertions'] );
	$done_count   = \count( $protocol->assertions() ) - ( null !== $test_function && isset( $protocol->assertions()[-1] ) ? 1 : 0 );
	$failed       = \array_values( \array_filter( $o->assertions, static fn( array $a ): bool => $a['scored'] && ! $a['passed'] ) );
	$passed_count = \count( \array_filter( $o->assertions, static fn( array $a ): bool => $a['scored'] && $a['passed'] ) );
	$o->phases['assertions'] = null === $protocol->first( 'candidate' ) ? 'not run' : "$passed_count/$total passed" . ( $done_count < $total ? " ($done_count run)" : '' );

	$candidate = $protocol->first( 'candidate' );
	return new Happened(
		run: $run,
		stopped: $stopped,
		timed_out: $run['timed_out'],
		finished: null !== $protocol->first( 'done' ),
		booted: $booted,
		setup: $protocol->first( 'setup' ),
		candidate: $candidate,
		violation: $protocol->violation,
		violation_after_setup: $protocol->violation_after_setup,
		trespass: \array_values( \array_unique( \array_merge( $candidate['trespass'] ?? array(), $protocol->first( 'done' )['trespass'] ?? array() ) ) ),
		test_function_defined: null === $test_function ? null : $test_function['passed'],
		failed_assertions: $failed,
		forbidden: forbidden_reason( $o->static ),
	);
}

/** Puts the test_function row first and closes the list. */
function finish_assertions( Outcome $o, ?array $test_function, string $not_run ): void {
	foreach ( $o->assertions as $i => $a ) {
		if ( 'not run' === $a['message'] ) {
			$o->assertions[ $i ]['message'] = $not_run;
		}
	}
	$rows = \array_values( $o->assertions );
	if ( null !== $test_function ) {
		if ( 'not run' === $test_function['message'] ) {
			$test_function['message'] = $not_run;
		}
		\array_unshift( $rows, $test_function );
	}
	$o->assertions = $rows;
}
