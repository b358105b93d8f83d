<?php
/**
 * The runner's event protocol, as the supervisor reads it (pure: bytes in, events and a verdict on
 * the channel out; the process handling is in sandbox.php).
 *
 *   hello → booted → setup → [candidate → assertion…] → teardown → done,
 *   or "ended" (the runner's shutdown hook) at any point after hello.
 *
 * Only lines carrying "WPB1 <nonce> " count. The channel is bounded: an event line longer than
 * MAX_EVENT_LINE_BYTES, or more than MAX_CHANNEL_BYTES in all, ends the reading as a violation.
 * Whether a violation is the candidate's doing is a matter of when it happened: `candidate_could_act`
 * says whether the runner had already reported setup (it includes the candidate right after).
 */

declare(strict_types=1);

namespace WPBench\Supervisor;

const EVENT_TAG = 'WPB1';
// An event line is at most this long (the largest legitimate one, an assertion with a capped
// observation and 200 capped PHP issues, stays far below it).
const MAX_EVENT_LINE_BYTES = 4 * 1048576;
// Everything read from the event channel, including unauthenticated lines candidate code writes to it.
const MAX_CHANNEL_BYTES = 32 * 1048576;

final class Protocol {
	/** @var list<array<string, mixed>> */
	public array $events               = array();
	public ?string $violation          = null;
	public bool $violation_after_setup = false; // the violation happened once candidate code could act
	public int $unauthenticated        = 0;
	public bool $finished              = false;
	private int $bytes                 = 0;
	private string $buffer             = '';
	private string $prefix;
	/** @var list<int> */
	private array $pending_indexes;
	private string $state = 'start';
	private bool $candidate_may_run = false;

	public function __construct( string $nonce, bool $has_test_function, int $assertion_count ) {
		$this->prefix          = EVENT_TAG . ' ' . $nonce . ' ';
		$this->pending_indexes = \array_merge( $has_test_function ? array( -1 ) : array(), $assertion_count > 0 ? \range( 0, $assertion_count - 1 ) : array() );
	}

	/** Whether candidate code may have run by now (setup was reported, so the candidate came next). */
	public function candidate_could_act(): bool {
		return $this->candidate_may_run;
	}

	public function feed( string $chunk ): void {
		if ( null !== $this->violation ) {
			return;
		}
		$this->bytes  += \strlen( $chunk );
		$this->buffer .= $chunk;
		while ( null === $this->violation && false !== ( $newline = \strpos( $this->buffer, "\n" ) ) ) {
			$line         = \substr( $this->buffer, 0, $newline );
			$this->buffer = \substr( $this->buffer, $newline + 1 );
			if ( \strlen( $line ) > MAX_EVENT_LINE_BYTES ) {
				$this->violate( 'a line on the event channel is longer than ' . MAX_EVENT_LINE_BYTES . ' bytes' );
				return;
			}
			$this->line( $line );
		}
		if ( \strlen( $this->buffer ) > MAX_EVENT_LINE_BYTES ) {
			$this->violate( 'a line on the event channel is longer than ' . MAX_EVENT_LINE_BYTES . ' bytes' );
		} elseif ( $this->bytes > MAX_CHANNEL_BYTES ) {
			$this->violate( 'more than ' . MAX_CHANNEL_BYTES . ' bytes on the event channel' );
		}
	}

	private function line( string $line ): void {
		// Candidate code may write to fd 3 too (php://fd/3) but cannot know the nonce; its bytes
		// are dropped, including any unterminated prefix glued onto one of our lines.
		$at = \strpos( $line, $this->prefix );
		if ( false === $at ) {
			++$this->unauthenticated;
			return;
		}
		$event = \json_decode( \substr( $line, $at + \strlen( $this->prefix ) ), true );
		if ( ! \is_array( $event ) || ! \is_string( $event['event'] ?? null ) ) {
			$this->violate( 'an authenticated event is not valid JSON' );
			return;
		}
		$this->accept( $event );
	}

	private function violate( string $why ): void {
		if ( null === $this->violation ) {
			$this->violation             = $why;
			$this->violation_after_setup = $this->candidate_could_act();
		}
		$this->finished = true;
		$this->buffer   = '';
	}

	/** @param array<string, mixed> $event */
	private function accept( array $event ): void {
		if ( null !== $this->violation ) {
			return;
		}
		$name = $event['event'];
		if ( 'ended' === $name && 'start' !== $this->state && 'done' !== $this->state ) {
			$this->events[] = $event;
			$this->state    = 'done';
			$this->finished = true;
			return;
		}
		$next = match ( $this->state ) {
			'start' => array( 'hello' ),
			'hello' => array( 'booted' ),
			'booted' => array( 'setup' ),
			'setup' => array( 'candidate' ),
			'setup-failed' => array( 'teardown' ),
			'candidate', 'assertion' => $this->pending_indexes ? array( 'assertion' ) : array( 'teardown' ),
			'teardown' => array( 'done' ),
			default => array(),
		};
		if ( ! \in_array( $name, $next, true ) ) {
			$this->violate( "event '$name' out of order after '{$this->state}'" );
			return;
		}
		if ( 'assertion' === $name ) {
			$expected = \array_shift( $this->pending_indexes );
			if ( ( $event['index'] ?? null ) !== $expected ) {
				$this->violate( 'assertion result ' . \json_encode( $event['index'] ?? null ) . " arrived where $expected was due" );
				return;
			}
		}
		$this->events[] = $event;
		$this->state    = ( 'setup' === $name && empty( $event['ok'] ) ) ? 'setup-failed' : $name;
		if ( 'setup' === $this->state ) {
			$this->candidate_may_run = true;
		}
		if ( 'done' === $name ) {
			$this->finished = true;
		}
	}

	/** @return array<string, mixed>|null The first event of that name. */
	public function first( string $name ): ?array {
		foreach ( $this->events as $event ) {
			if ( $event['event'] === $name ) {
				return $event;
			}
		}
		return null;
	}

	/** @return array<int, array<string, mixed>> Assertion events by index. */
	public function assertions(): array {
		$out = array();
		foreach ( $this->events as $event ) {
			if ( 'assertion' === $event['event'] ) {
				$out[ (int) $event['index'] ] = $event;
			}
		}
		return $out;
	}
}
