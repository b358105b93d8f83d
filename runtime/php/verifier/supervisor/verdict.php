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
 *   harness_error  also with exit 5: the network was not seen closed before the task was read (egress.php)
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
// Exit codes of wpbench-grade beside a verdict (its header and wpbench_runtime.contract say what each means).
const TASK_BROKEN_EXIT              = 2;
const VERIFIER_AFTER_CANDIDATE_EXIT = 3;
const STOPPED_EXIT                  = 4;
const EGRESS_OPEN_EXIT              = 5;

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

/** Decides status, reason, phases and assertion results: first what happened, then what it scores. */
function decide( Outcome $o ): void {
	$test_function = assertion_rows( $o );
	$static        = $o->static;
	$not_run       = null;
	if ( ! $static['syntax_ok'] ) {
		[ $reason, $not_run ] = array( 'parse error: ' . $static['syntax_error'], 'not run: parse error' );
	} elseif ( null !== $o->plugin && ! $o->plugin['ok'] ) {
		[ $reason, $not_run ] = array( $o->plugin['reason'], 'not run: invalid plugin files map' );
	}
	if ( null !== $not_run ) {
		$o->set( 'failed', $reason );
		$o->phases = array( 'candidate' => $not_run );
		finish_assertions( $o, $test_function, $not_run );
		return;
	}
	[ $status, $reason, $exit_code ] = outcome_of( what_happened( $o, $test_function ), $o->task );
	$o->set( $status, $reason, $exit_code );
}

/**
 * What the facts score: [status, reason, exit code]. The rules, in order: the task or the environment
 * found broken before any candidate code ran is harness_error, exit 2 (excluded from aggregates);
 * anything that goes wrong once candidate code could act is its failure: a protocol violation or a
 * crash is error, the timeout is timeout; else failed for each thing that did not hold, or passed.
 */
/** Why a run that timed out before setup reported is the harness's: the trusted phase's own bound. */
function setup_overrun( array $task ): string {
	return 'timed out after ' . seconds( $task['setup_timeout_seconds'] ) . ' s (setup_timeout_seconds: the boot and the test\'s setup, before any candidate code)';
}

function seconds( float $value ): string {
	return \rtrim( \rtrim( \sprintf( '%.3f', $value ), '0' ), '.' );
}

function outcome_of( Happened $h, array $task ): array {
	if ( null !== $h->violation && ! $h->violation_after_setup ) {
		return array( 'harness_error', "verifier error before candidate code ran: event protocol violated ({$h->violation})", TASK_BROKEN_EXIT );
	}
	$booted = $h->booted;
	if ( null === $booted ) {
		$detail = $h->timed_out ? setup_overrun( $task ) : crash_reason( $h->run, 'WordPress boot' )[1];
		return array( 'harness_error', "WordPress did not boot: $detail" . stderr_tail( $h->run ), TASK_BROKEN_EXIT );
	}
	if ( true !== ( $booted['sandbox'] ?? null ) ) {
		return array( 'harness_error', 'verifier error: the runner sandbox could not be established: ' . \json_encode( $booted['sandbox'] ?? null ), TASK_BROKEN_EXIT );
	}
	if ( ! $booted['sqlite_dropin'] || ! $booted['installed'] ) {
		return array( 'harness_error', 'WordPress booted without the SQLite drop-in or the baseline site', TASK_BROKEN_EXIT );
	}
	if ( null === $h->setup ) {
		$detail = $h->timed_out ? setup_overrun( $task ) : crash_reason( $h->run, 'setup' )[1];
		return array( 'harness_error', "setup did not complete: $detail", TASK_BROKEN_EXIT );
	}
	if ( ! $h->setup['ok'] ) {
		return array( 'harness_error', 'setup failed: ' . $h->setup['error'], TASK_BROKEN_EXIT );
	}
	// From here on candidate code could act.
	if ( null !== $h->violation ) {
		return array( 'error', "the runner broke the event protocol once candidate code could act: {$h->violation}", 0 );
	}
	$where = phase_label( $h->stopped, $task );
	if ( $h->timed_out ) {
		return array( 'timeout', 'timed out after ' . seconds( $task['timeout_seconds'] ) . " s in $where", 0 );
	}
	$crashed = ! $h->finished;
	if ( $crashed && 'finish' !== $h->stopped && 'teardown' !== $h->stopped ) {
		return array( 'error', crash_reason( $h->run, $where )[1], 0 );
	}
	$status    = 'passed';
	$reasons   = array();
	$candidate = $h->candidate;
	if ( null !== $candidate && ! $candidate['ok'] ) {
		if ( 'parse' === ( $candidate['kind'] ?? '' ) ) {
			$status    = 'failed';
			$reasons[] = "parse error in {$candidate['file']}: {$candidate['error']} on line {$candidate['line']}";
		} else {
			$status    = 'error';
			$reasons[] = "uncaught {$candidate['class']} in candidate code: {$candidate['error']} ({$candidate['file']}:{$candidate['line']})";
		}
	}
	$fails = array();  // each thing that did not hold fails a test that would otherwise pass
	if ( false === $h->test_function_defined ) {
		$fails[] = "test_function {$task['test_function_name']}() is not defined";
	}
	if ( $h->failed_assertions ) {
		$first   = $h->failed_assertions[0];
		$label   = '' !== $first['description'] ? $first['description'] : $first['type'];
		$fails[] = \count( $h->failed_assertions ) . ' of ' . \count( $task['assertions'] ) . " assertions failed; first: #{$first['index']} $label: {$first['message']}";
	}
	if ( null !== $h->forbidden ) {
		$fails[] = $h->forbidden;
	}
	if ( $h->trespass ) {
		$fails[] = 'candidate code declared names in a verifier namespace (not allowed): ' . \implode( ', ', \array_map( 'strval', \array_slice( $h->trespass, 0, 5 ) ) );
	}
	if ( $fails && 'passed' === $status ) {
		$status = 'failed';
	}
	$reasons = \array_merge( $reasons, $fails );
	if ( $crashed ) {  // in teardown or after it: the verdict stands, with a note
		$reasons[] = 'the runner did not finish cleanly: ' . crash_reason( $h->run, $where )[1];
	}
	return array( $status, $reasons ? \implode( '; ', $reasons ) : 'all ' . \count( $task['assertions'] ) . ' assertions passed', 0 );
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
