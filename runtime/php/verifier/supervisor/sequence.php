<?php
/**
 * Fast mode (`fork_per_test`, `wpbench-grade --sequence`): one container grades a sequence of tasks.
 *
 * Each task is graded exactly as in a container of its own (grade() in wpbench-grade: a fresh site laid
 * out from the baseline, a fresh runner process with every wall, the same judge); what this file adds is
 * the reset between two tasks and its check, so that nothing a candidate did reaches the next one:
 *
 *  - every process but this one (PID 1 of the container's pid namespace) is killed and reaped, and /proc
 *    must then list no other process (what a candidate started, daemonized or not, and what it held —
 *    sockets, abstract unix sockets, file locks, shared mappings — dies with it);
 *  - every place a runner can write is emptied (open_basedir and SQLite's temp_store_directory allow
 *    only RUN_DIR and /tmp; /dev/shm too when there is one) and must then be empty; RUN_DIR is laid out
 *    again from the read-only baseline (database, wp-content, uploads, the opcache link);
 *  - no System V IPC object may exist (the runner loads no extension that makes one; checked anyway).
 *
 * When a check fails the supervisor says why and ends the sequence (`closed`): the executor never sends
 * another task to that container. The protocol on stdout: one task a line in (or one task a file named on the
 * command line, as a Kubernetes pod grading several candidates is given them), and for each a verdict line and
 * then `END_LINE <exit code> ready|closed`; only the supervisor writes stdout.
 */

declare(strict_types=1);

namespace WPBench\Supervisor;

const END_LINE = 'wpbench-end';
// A task line is at most this long (a plugin map is capped at 1 MiB of files; tests are far smaller).
const MAX_TASK_LINE = 64 * 1048576;
// Every place a runner can write (RUN_DIR and /tmp are the container's tmpfs mounts), with the mode each
// has in a fresh container (the runner owns them, so it could change it).
const WRITABLE_ROOTS = array( RUN_DIR => 0700, '/tmp' => 01777, '/dev/shm' => 01777 );

/**
 * Grades tasks, one a line on stdin until stdin ends, or (`$files`, a Kubernetes pod, which has no stdin) one a
 * file in the order given; returns the exit code of the container.
 */
function sequence( array $info, string $mode, array $files = array() ): int {
	$from_files = array() !== $files;
	$laid_out   = false; // the first task lays out its own site, so a broken environment is its harness_error
	$graded     = 0;
	$GLOBALS['wpbench_sequence'] = true; // next_runner(): runners forked from one boot
	try {
		while ( true ) {
			$read = null;
			if ( $from_files ) {
				$file = \array_shift( $files );
				if ( null !== $file ) {
					$read = static fn(): string => read_input( array( '', (string) $file ) ); // unreadable: its harness_error
				}
			} else {
				$line = \stream_get_line( \STDIN, MAX_TASK_LINE, "\n" );
				if ( false !== $line ) {
					$read = static fn(): string => $line;
				}
			}
			if ( null === $read ) {
				stop_idle_runner();
				drop_fork_server();
				progress( "sequence ended after $graded tasks" );
				return 0;
			}
			$GLOBALS['wpbench_cpu_at_start']          = cpu_ms( 0 );
			$GLOBALS['wpbench_children_cpu_at_start'] = cpu_ms( 1 );
			$GLOBALS['wpbench_forked_runner_cpu']     = 0;
			[ $verdict, $exit_code ] = grade( $read, $info, $mode, $laid_out );
			$exit_code = conclude( $verdict, $exit_code );
			++$graded;
			try {
				$left = STOPPED_EXIT === $exit_code ? 'stopped from outside' : reset_container();
			} catch ( Terminated $e ) {
				throw $e;
			} catch ( \Throwable $e ) { // e.g. a tree too deep to walk: the container is not reused
				$left = 'the reset failed: ' . $e->getMessage();
			}
			if ( '' === $left ) {
				try {
					lay_out_site( $mode, (string) ( $info['opcache_system_id'] ?? '' ) );
				} catch ( \Throwable $e ) {
					$left = 'cannot lay out the next site: ' . $e->getMessage();
				}
			}
			\fwrite( \STDOUT, END_LINE . " $exit_code " . ( '' === $left ? 'ready' : 'closed' ) . "\n" );
			if ( '' !== $left ) {
				stop_idle_runner();
				drop_fork_server();
				progress( "sequence closed after $graded tasks: $left" );
				return STOPPED_EXIT === $exit_code ? STOPPED_EXIT : 0;
			}
			$laid_out = true;
			// The next runner gets ready while the next task is on its way.
			try {
				if ( '0' !== \getenv( 'WPBENCH_PREBOOT' ) ) {
					$GLOBALS['wpbench_idle_runner'] = next_runner( $mode );
				}
			} catch ( SandboxError $e ) {
				progress( 'no runner ahead: ' . $e->getMessage() ); // grade() tries again, and says why
			}
		}
	} catch ( Terminated $e ) {
		stop_idle_runner();
		drop_fork_server();
		progress( $e->getMessage() . ' from outside the container, between tasks' );
		return STOPPED_EXIT;
	}
}

/**
 * Makes the container as a fresh one is, as far as a candidate could have changed it; returns '' when it
 * is, else what is left (the sequence then ends).
 */
function reset_container(): string {
	if ( 1 !== \getmypid() ) {
		return 'the supervisor is not PID 1, so it cannot kill what a candidate left behind';
	}
	$others = kill_others( 5.0 ); // every process but this one and the fork server
	if ( $others ) {
		return 'processes left: ' . \implode( ',', $others );
	}
	$server = $GLOBALS['wpbench_fork_server'] ?? null;
	if ( null !== $server && ( ( $server['dead'] ?? false ) || ! \proc_get_status( $server['proc'] )['running'] ) ) {
		drop_fork_server( 'it died' );
	}
	foreach ( WRITABLE_ROOTS as $root => $mode ) {
		if ( ! \is_dir( $root ) || \posix_getuid() !== \fileowner( $root ) ) {
			continue; // absent (/dev/shm under --ipc none) or root's, so closed to the runner's chmod()
		}
		\chmod( $root, $mode );
		empty_dir( $root );
		\clearstatcache( true );
		if ( \count( (array) \scandir( $root ) ) !== 2 || ( \fileperms( $root ) & 07777 ) !== $mode ) {
			return "$root could not be emptied";
		}
	}
	foreach ( array( 'shm', 'sem', 'msg' ) as $kind ) {
		$table = @\file( "/proc/sysvipc/$kind" ); // phpcs:ignore
		if ( \is_array( $table ) && \count( $table ) > 1 ) {
			return "System V IPC objects ($kind) exist";
		}
	}
	\clearstatcache( true );
	return '';
}

/** The pids in /proc other than this process. @return list<string> */
function other_processes(): array {
	$names = @\scandir( '/proc' ); // phpcs:ignore
	if ( false === $names ) {
		return array( '(/proc unreadable)' );
	}
	$others = array();
	foreach ( $names as $name ) {
		if ( 1 === \preg_match( '/^[0-9]+$/', (string) $name ) && (int) $name !== \getmypid() ) {
			$others[] = (string) $name;
		}
	}
	return $others;
}

/** Removes everything inside $dir (not $dir itself); a directory a candidate closed is opened first. */
function empty_dir( string $dir ): void {
	$names = @\scandir( $dir ); // phpcs:ignore
	if ( false === $names ) {
		return; // what is left there fails the check after the reset
	}
	foreach ( $names as $name ) {
		if ( '.' === $name || '..' === $name ) {
			continue;
		}
		$path = "$dir/$name";
		if ( ! \is_link( $path ) && \is_dir( $path ) ) {
			@\chmod( $path, 0700 ); // phpcs:ignore
			empty_dir( $path );
			@\rmdir( $path ); // phpcs:ignore
		} else {
			@\unlink( $path ); // phpcs:ignore
		}
	}
}

/**
 * The next runner. In a sequence it is forked from the fork server's boot (sandbox.php, forkserver.c), the
 * server started for the first task; a runner is started afresh when the server fails (it is then not used
 * again), and outside a sequence or with WPBENCH_FORK_SERVER=0 (the container's environment, set by whoever
 * starts it: a comparison of the two).
 *
 * @return array{proc: resource|null, pipes: array<int, resource>, pid: int}
 */
function next_runner( string $mode ): array {
	if ( null === ( $GLOBALS['wpbench_fork_server'] ?? null ) && ( $GLOBALS['wpbench_sequence'] ?? false ) && '0' !== \getenv( 'WPBENCH_FORK_SERVER' ) ) {
		$GLOBALS['wpbench_fork_server'] = start_fork_server( runner_argv( $mode ) );
	}
	$server = $GLOBALS['wpbench_fork_server'] ?? null;
	if ( null !== $server ) {
		$runner = fork_runner( $server );
		if ( null !== $runner ) {
			return $runner;
		}
		drop_fork_server( 'it could not fork a runner' );
	}
	return start_runner( runner_argv( $mode ) );
}

/** Stops the fork server; after a failure ($why) the sequence's runners are started afresh. */
function drop_fork_server( string $why = '' ): void {
	$server = $GLOBALS['wpbench_fork_server'] ?? null;
	if ( null === $server ) {
		return;
	}
	$GLOBALS['wpbench_fork_server'] = null;
	if ( '' !== $why ) {
		$GLOBALS['wpbench_sequence'] = false;
		progress( "the fork server is not used again: $why" );
	}
	stop_fork_server( $server );
}

/** Stops a runner started ahead that will get no job. */
function stop_idle_runner(): void {
	if ( null !== ( $GLOBALS['wpbench_idle_runner'] ?? null ) ) {
		$runner                         = $GLOBALS['wpbench_idle_runner'];
		$GLOBALS['wpbench_idle_runner'] = null;
		stop_runner( $runner );
	}
}
