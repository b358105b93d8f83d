<?php
/**
 * From what happened to the one verdict (wpbench_runtime.contract.Verdict, scoring v2.0).
 *
 * Statuses, most serious first:
 *   harness_error  the task or the environment was found broken before any candidate code ran
 *                  (bad task, setup failed, WordPress did not boot); exit 2. Never after: from
 *                  then on every anomaly (a protocol violation, an oversized or missing event) is
 *                  the candidate's failure
 *   harness_error  also with exit 4: the grader was stopped by a signal from outside the container
 *   timeout        the runner was killed at timeout_seconds
 *   error          the candidate crashed it: exit()/die(), fatal error, memory exhaustion,
 *                  uncaught exception, killed by a signal
 *   failed         it ran, but a parse error, an invalid plugin map, a failed assertion or an
 *                  error-severity forbidden pattern
 *   passed         everything else
 */

declare(strict_types=1);

namespace WPBench\Supervisor;

const MAX_ISSUES = 200;

/** What the verdict is made from. */
final class Outcome {
	public ?array $task       = null;
	public ?array $static     = null;
	public ?array $plugin     = null;
	public ?array $run        = null;
	public string $status     = 'harness_error';
	public string $reason     = '';
	public int $exit_code     = 3;
	/** @var array<string, string> */
	public array $phases      = array();
	/** @var list<array> */
	public array $assertions  = array();
	/** @var list<array> */
	public array $issues      = array();

	public function set( string $status, string $reason, int $exit_code = 0 ): void {
		$this->status    = $status;
		$this->reason    = $reason;
		$this->exit_code = $exit_code;
	}
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

/** Decides status, reason, phases and assertion results. */
function decide( Outcome $o ): void {
	$task   = $o->task;
	$static = $o->static;
	foreach ( $task['assertions'] as $i => $a ) {
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
	$test_function = null;
	if ( null !== $task['test_function_name'] ) {
		$test_function = array(
			'index'       => -1,
			'type'        => 'function_exists',
			'description' => "test_function {$task['test_function_name']}() is defined",
			'weight'      => 0.0,
			'scored'      => false,
			'passed'      => false,
			'message'     => 'not run',
		);
	}
	$forbidden = \array_values(
		\array_filter( $static['forbidden'], static fn( array $p ): bool => $p['matched'] && 'error' === $p['severity'] )
	);
	$forbidden_reason = $forbidden ? 'forbidden pattern matched: ' . \implode( ', ', \array_map( static fn( array $p ): string => '' !== $p['description'] ? $p['description'] : $p['pattern'], $forbidden ) ) : null;

	if ( ! $static['syntax_ok'] ) {
		$o->set( 'failed', 'parse error: ' . $static['syntax_error'] );
		$o->phases = array( 'candidate' => 'not run: parse error' );
		finish_assertions( $o, $test_function, 'not run: parse error' );
		return;
	}
	if ( null !== $o->plugin && ! $o->plugin['ok'] ) {
		$o->set( 'failed', $o->plugin['reason'] );
		$o->phases = array( 'candidate' => 'not run: invalid plugin files map' );
		finish_assertions( $o, $test_function, 'not run: invalid plugin files map' );
		return;
	}

	$run      = $o->run;
	$protocol = $run['protocol'];
	foreach ( $protocol->events as $event ) {
		// Where each issue was raised (boot, setup, candidate, assertion:N, teardown): profiles that
		// treat notices as errors need it (an upstream-profile notice fails only its own assertion).
		$phase = 'assertion' === $event['event'] ? 'assertion:' . (int) ( $event['index'] ?? 0 ) : (string) $event['event'];
		foreach ( $event['issues'] ?? array() as $issue ) {
			$o->issues[] = \is_array( $issue ) ? $issue + array( 'phase' => $phase ) : $issue;
		}
	}
	$ended = $protocol->first( 'ended' );
	if ( \is_array( $ended['fatal'] ?? null ) ) {
		$o->issues[] = \array_intersect_key( $ended['fatal'], \array_flip( array( 'level', 'message', 'file', 'line' ) ) );
	}
	$stopped = phase_after( $protocol, $task );
	$where   = phase_label( $stopped, $task );
	$crashed = null === $protocol->first( 'done' ) && ! $run['timed_out'];

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
	$interrupted = $run['timed_out'] ? 'not run: timed out' : 'not run: the runner stopped early';
	finish_assertions( $o, $test_function, $interrupted );
	$done_count            = \count( $protocol->assertions() ) - ( null !== $test_function && isset( $protocol->assertions()[-1] ) ? 1 : 0 );
	$passed_count          = \count( \array_filter( $o->assertions, static fn( array $a ): bool => $a['scored'] && $a['passed'] ) );
	$o->phases['assertions'] = null === $protocol->first( 'candidate' ) ? 'not run' : "$passed_count/" . \count( $task['assertions'] ) . ' passed' . ( $done_count < \count( $task['assertions'] ) ? " ($done_count run)" : '' );

	// The task or the environment found broken before any candidate code ran: harness_error, exit 2
	// (excluded from aggregates). Anything that goes wrong once candidate code could act is its failure.
	if ( null !== $protocol->violation && ! $protocol->violation_after_setup ) {
		$o->set( 'harness_error', "verifier error before candidate code ran: event protocol violated ({$protocol->violation})", 2 );
		return;
	}
	if ( null === $booted ) {
		$detail = $run['timed_out'] ? 'timed out after ' . BOOT_ALLOWANCE_SECONDS . ' s' : crash_reason( $run, 'WordPress boot' )[1];
		$o->set( 'harness_error', "WordPress did not boot: $detail" . stderr_tail( $run ), 2 );
		return;
	}
	if ( true !== ( $booted['sandbox'] ?? null ) ) {
		$o->set( 'harness_error', 'verifier error: the runner sandbox could not be established: ' . \json_encode( $booted['sandbox'] ?? null ), 2 );
		return;
	}
	if ( ! $booted['sqlite_dropin'] || ! $booted['installed'] ) {
		$o->set( 'harness_error', 'WordPress booted without the SQLite drop-in or the baseline site', 2 );
		return;
	}
	$setup = $protocol->first( 'setup' );
	if ( null === $setup ) {
		$detail = $run['timed_out'] ? 'timed out after ' . $task['timeout_seconds'] . ' s' : crash_reason( $run, 'setup' )[1];
		$o->set( 'harness_error', "setup did not complete: $detail", 2 );
		return;
	}
	if ( ! $setup['ok'] ) {
		$o->set( 'harness_error', 'setup failed: ' . $setup['error'], 2 );
		return;
	}
	if ( null !== $protocol->violation ) {
		$o->set( 'error', "the runner broke the event protocol once candidate code could act: {$protocol->violation}" );
		return;
	}

	$also = array();
	if ( $run['timed_out'] ) {
		$o->set( 'timeout', 'timed out after ' . \rtrim( \rtrim( \sprintf( '%.3f', $task['timeout_seconds'] ), '0' ), '.' ) . " s in $where" );
		return;
	}
	$candidate = $protocol->first( 'candidate' );
	if ( $crashed && 'finish' !== $stopped && 'teardown' !== $stopped ) {
		$o->set( 'error', crash_reason( $run, $where )[1] );
		return;
	}
	if ( $crashed ) {
		$also[] = 'the runner did not finish cleanly: ' . crash_reason( $run, $where )[1];
	}
	$reasons = array();
	$status  = 'passed';
	if ( null !== $candidate && ! $candidate['ok'] ) {
		if ( 'parse' === ( $candidate['kind'] ?? '' ) ) {
			$status    = 'failed';
			$reasons[] = "parse error in {$candidate['file']}: {$candidate['error']} on line {$candidate['line']}";
		} else {
			$status    = 'error';
			$reasons[] = "uncaught {$candidate['class']} in candidate code: {$candidate['error']} ({$candidate['file']}:{$candidate['line']})";
		}
	}
	if ( null !== $test_function && ! $test_function['passed'] ) {
		$status    = 'passed' === $status ? 'failed' : $status;
		$reasons[] = "test_function {$task['test_function_name']}() is not defined";
	}
	$failed = \array_values( \array_filter( $o->assertions, static fn( array $a ): bool => $a['scored'] && ! $a['passed'] ) );
	if ( $failed ) {
		$status    = 'passed' === $status ? 'failed' : $status;
		$first     = $failed[0];
		$label     = '' !== $first['description'] ? $first['description'] : $first['type'];
		$reasons[] = \count( $failed ) . ' of ' . \count( $task['assertions'] ) . " assertions failed; first: #{$first['index']} $label: {$first['message']}";
	}
	if ( null !== $forbidden_reason ) {
		$status    = 'passed' === $status ? 'failed' : $status;
		$reasons[] = $forbidden_reason;
	}
	$trespass = \array_values( \array_unique( \array_merge( $candidate['trespass'] ?? array(), $protocol->first( 'done' )['trespass'] ?? array() ) ) );
	if ( $trespass ) {
		$status    = 'passed' === $status ? 'failed' : $status;
		$reasons[] = 'candidate code declared names in a verifier namespace (not allowed): ' . \implode( ', ', \array_map( 'strval', \array_slice( $trespass, 0, 5 ) ) );
	}
	$reasons = \array_merge( $reasons, $also );
	$o->set( $status, $reasons ? \implode( '; ', $reasons ) : 'all ' . \count( $task['assertions'] ) . ' assertions passed' );
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

function stderr_tail( array $run ): string {
	$tail = \trim( \substr( $run['stderr']->data, -600 ) );
	return '' === $tail ? '' : "; stderr: $tail";
}

/** Scores v2.0. */
function scores( Outcome $o ): array {
	$static   = $o->static;
	$required = $static ? $static['required'] : array();
	$total    = \array_sum( \array_column( $required, 'weight' ) );
	$matched  = \array_sum( \array_column( \array_filter( $required, static fn( array $p ): bool => $p['matched'] ), 'weight' ) );
	$policy   = $static && ! \array_filter( $static['forbidden'], static fn( array $p ): bool => $p['matched'] && 'error' === $p['severity'] );

	$runtime = 0.0;
	if ( 'harness_error' !== $o->status && 'timeout' !== $o->status ) {
		$scored = \array_filter( $o->assertions, static fn( array $a ): bool => $a['scored'] );
		$weight = \array_sum( \array_column( $scored, 'weight' ) );
		if ( $weight > 0 ) {
			$runtime = \array_sum( \array_column( \array_filter( $scored, static fn( array $a ): bool => $a['passed'] ), 'weight' ) ) / $weight;
		} else {
			$ran     = null !== $o->run && null !== $o->run['protocol']->first( 'done' ) && ( $o->run['protocol']->first( 'candidate' )['ok'] ?? false );
			$runtime = $ran ? 1.0 : 0.0;
		}
	}
	return array(
		'execution_pass'     => 'passed' === $o->status,
		'runtime'            => \round( $runtime, 6 ),
		'static'             => $total > 0 ? \round( $matched / $total, 6 ) : 1.0,
		'static_policy_pass' => (bool) $policy,
	);
}

/** The verdict document. */
function verdict( Outcome $o, array $info, float $started ): array {
	$run    = $o->run;
	$issues = \array_slice( $o->issues, 0, MAX_ISSUES );
	return array(
		'contract_version' => '1',
		'scoring_version'  => '2.0',
		'test_id'          => $o->task['test_id'] ?? null,
		'status'           => $o->status,
		'reason'           => $o->reason,
		'scores'           => scores( $o ),
		'static'           => $o->static ? array(
			'syntax_ok'    => $o->static['syntax_ok'],
			'syntax_error' => $o->static['syntax_error'],
			'required'     => $o->static['required'],
			'forbidden'    => $o->static['forbidden'],
		) : null,
		'assertions'       => $o->assertions,
		'phases'           => (object) $o->phases,
		'php_issues'       => \array_map(
			static fn( array $i ): array => array(
				'level'   => (string) ( $i['level'] ?? '' ),
				'message' => (string) ( $i['message'] ?? '' ),
				'file'    => (string) ( $i['file'] ?? '' ),
				'line'    => (int) ( $i['line'] ?? 0 ),
				'phase'   => (string) ( $i['phase'] ?? '' ),
			),
			$issues
		),
		'stdout'           => $run ? $run['stdout']->data : '',
		'stderr'           => $run ? $run['stderr']->data : '',
		'stdout_truncated' => $run ? $run['stdout']->truncated : false,
		'stderr_truncated' => $run ? $run['stderr']->truncated : false,
		'duration_ms'      => (int) \round( ( \microtime( true ) - $started ) * 1000 ),
		'runtime'          => array(
			'wordpress_version'          => (string) ( $info['wordpress_version'] ?? '' ),
			'php_version'                => \PHP_VERSION,
			'database'                   => 'sqlite',
			'sqlite_integration_version' => (string) ( $info['sqlite_integration_version'] ?? '' ),
		),
	);
}
