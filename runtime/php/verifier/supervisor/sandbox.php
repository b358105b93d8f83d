<?php
/**
 * The per-test sandbox: starts the runner with the PHP-level lockdown and the native guard, and
 * reads its pipes under the timeout (the events through protocol.php). The file layout it runs in
 * is layout.php's.
 */

declare(strict_types=1);

namespace WPBench\Supervisor;

const RUN_DIR      = '/run/wpbench';
const BASELINE_DIR = '/opt/wpbench/baseline';
const OPCACHE_DIR  = '/opt/wpbench/opcache';
const RUNNER       = '/opt/wpbench/verifier/runner/runner.php';
const OUTPUT_CAP   = 1048576;
// After "done" (or "ended") the runner gets this long to exit before it is killed.
const EXIT_GRACE_SECONDS = 2.0;
// Functions the runner may not call: no processes, no signals, no resource enumeration, no mail.
const DISABLED_FUNCTIONS = array(
	'exec', 'shell_exec', 'system', 'passthru', 'proc_open', 'popen', 'proc_close', 'proc_get_status',
	'proc_terminate', 'proc_nice', 'posix_kill', 'posix_setsid', 'posix_setpgid', 'posix_setuid',
	'posix_setgid', 'posix_seteuid', 'posix_setegid', 'posix_setrlimit', 'posix_mkfifo', 'posix_mknod',
	'dl', 'putenv', 'mail', 'mb_send_mail', 'get_resources', 'cli_set_process_title', 'symlink', 'link',
	// libcurl takes file names in options PHP does not check against open_basedir (CURLOPT_HSTS,
	// CURLOPT_ALTSVC, CURLOPT_CAINFO, ...). The grader has no network, so no handle can be made at
	// all; WordPress then uses its streams transport (which fails fast, like curl would).
	'curl_init', 'curl_multi_init', 'curl_share_init', 'curl_share_init_persistent', 'curl_copy_handle',
	'curl_setopt', 'curl_setopt_array', 'curl_exec', 'curl_multi_exec', 'curl_multi_setopt', 'curl_share_setopt',
);
// The runner's data segment (RLIMIT_DATA, set by the native guard) beyond memory_limit: PHP's own
// allocations outside its memory manager (opcache'd scripts, libraries). Candidate code can raise
// memory_limit from PHP, but not this, and it stays below the container's memory limit.
const DATA_HEADROOM_BYTES = 160 * 1048576;
// Where the runner's PHP code may touch files (set by the runner itself before WordPress boots, see
// runner.php). /run/wpbench/opcache is deliberately outside: candidate code cannot replace the
// compiled scripts WordPress loads later.
const OPEN_BASEDIR = '/opt/wordpress/:/opt/wpbench/:' . RUN_DIR . '/wp-content/:' . RUN_DIR . '/candidate/:/tmp/';
// Preloaded into the runner: refuses dlopen() outside the system library directories.
const NATIVE_GUARD = '/opt/wpbench/lib/nodlopen.so';
// Loaded into the runner: the record of PHP issues candidate code cannot hide (php/native/issues.c).
const ISSUES_EXTENSION = '/usr/lib/wpbench/wpbench_issues.so';
// Loaded into every runner, so candidates see the same functions in both modes; it acts only in a runner
// started as fast mode's fork server (php/native/forkserver.c, start_fork_server()).
const FORKSERVER_EXTENSION = '/usr/lib/wpbench/wpbench_forkserver.so';
// The fork server's messages (struct record in forkserver.c): kind, pid or wait status or errno, CPU µs.
const FORK_RECORD       = 'lkind/lvalue/qcpu_us';
const FORK_RECORD_BYTES = 16;
const FORKED            = 1;
const FORK_EXITED       = 2;
// How long a fork may take, the server's boot included when it is still booting.
const FORK_TIMEOUT_SECONDS = 60;

/** The verifier could not prepare or run the sandbox (harness_error, exit 3). */
final class SandboxError extends \RuntimeException {}

/**
 * The runner's command line: `php -n`, the extensions and settings WordPress wants
 * (php/wp/php-flags.php, shared with the opcache warm-up) and the sandbox. open_basedir is not a
 * -d setting: it is the runner's first argument, and the runner sets it with ini_set() before it
 * boots WordPress (lock_down() in runner.php), because PHP turns its realpath cache off for good
 * when open_basedir is set at start-up, which costs ~20 ms of CPU per boot. Keeping the cache is
 * safe only because symlink() and link() are disabled: without them candidate code cannot make a
 * cached path resolve somewhere else later.
 *
 * @return list<string>
 */
function runner_argv( string $opcache_mode ): array {
	$flags = require '/opt/wpbench/wp/php-flags.php';
	$argv  = array( \PHP_BINARY, '-n' );
	if ( 'off' !== $opcache_mode ) {
		foreach ( $flags['zend_extensions'] as $ext ) {
			\array_push( $argv, '-d', "zend_extension=$ext" );
		}
	}
	foreach ( $flags['extensions'] as $ext ) {
		\array_push( $argv, '-d', "extension=$ext" );
	}
	\array_push( $argv, '-d', 'extension=' . ISSUES_EXTENSION, '-d', 'extension=' . FORKSERVER_EXTENSION );
	foreach ( $flags['ini'] as $key => $value ) {
		\array_push( $argv, '-d', "$key=$value" );
	}
	$disabled = \array_merge( DISABLED_FUNCTIONS, \function_exists( 'pcntl_fork' ) ? \get_extension_funcs( 'pcntl' ) : array() );
	$sandbox  = array(
		'disable_functions' => \implode( ',', \array_unique( $disabled ) ),
		'ffi.enable'        => '0',
		'enable_dl'         => '0',
		'allow_url_include' => '0',
		'auto_prepend_file' => '',
		'auto_append_file'  => '',
	);
	foreach ( $sandbox as $key => $value ) {
		\array_push( $argv, '-d', "$key=$value" );
	}
	\array_push( $argv, RUNNER, OPEN_BASEDIR, NATIVE_GUARD );
	return $argv;
}

/** The runner's memory_limit in bytes (php/wp/php-flags.php). */
function memory_limit_bytes(): int {
	$flags = require '/opt/wpbench/wp/php-flags.php';
	$limit = \trim( (string) ( $flags['ini']['memory_limit'] ?? '256M' ) );
	$units = array( 'K' => 1024, 'M' => 1048576, 'G' => 1073741824 );
	$unit  = \strtoupper( \substr( $limit, -1 ) );
	return isset( $units[ $unit ] ) ? (int) \substr( $limit, 0, -1 ) * $units[ $unit ] : (int) $limit;
}

/** A capped capture of one output stream. */
final class Capture {
	public string $data     = '';
	public bool $truncated  = false;

	public function add( string $chunk ): void {
		$room = OUTPUT_CAP - \strlen( $this->data );
		if ( \strlen( $chunk ) > $room ) {
			$this->truncated = true;
			$chunk           = \substr( $chunk, 0, \max( 0, $room ) );
		}
		$this->data .= $chunk;
	}
}

/** The runner's environment: the same for a runner started afresh and for a fork server. */
function runner_env(): array {
	if ( ! \is_file( NATIVE_GUARD ) ) {
		throw new SandboxError( 'the native guard ' . NATIVE_GUARD . ' is missing from the image' );
	}
	return array(
		'PATH'               => '/usr/bin:/bin',
		'HOME'               => '/tmp',
		'TMPDIR'             => '/tmp',
		'LANG'               => 'C.UTF-8',
		'LD_PRELOAD'         => NATIVE_GUARD,
		'WPBENCH_GUARD_ROLE' => 'runner',
		'WPBENCH_DATA_LIMIT' => (string) ( memory_limit_bytes() + DATA_HEADROOM_BYTES ),
	);
}

/**
 * Starts the runner before the task is known: it boots WordPress, then waits on stdin for its nonce and
 * job (run_runner() sends them). Booting reads only the baseline site and trusted code, so nothing the
 * task carries can reach it; the candidate's files are written afterwards.
 *
 * @param list<string> $argv
 * @return array{proc: resource, pipes: array<int, resource>, pid: int}
 */
function start_runner( array $argv ): array {
	$env  = runner_env();
	$spec = array( 0 => array( 'pipe', 'r' ), 1 => array( 'pipe', 'w' ), 2 => array( 'pipe', 'w' ), 3 => array( 'pipe', 'w' ) );
	$proc = \proc_open( $argv, $spec, $pipes, '/opt/wordpress', $env );
	if ( ! \is_resource( $proc ) ) {
		throw new SandboxError( 'could not start the runner process' );
	}
	return array( 'proc' => $proc, 'pipes' => $pipes, 'pid' => \proc_get_status( $proc )['pid'] );
}

/**
 * Fast mode: starts a fork server, a runner with the same command line and environment whose fd 3 is a
 * control socket (forkserver.c). It boots WordPress once; fork_runner() then gets runners forked from that
 * boot. Its stdout and stderr are the container's stderr (it runs no candidate code; only boot messages).
 *
 * @param list<string> $argv
 * @return array{proc: resource, control: \Socket, pid: int}
 */
function start_fork_server( array $argv ): array {
	if ( ! \extension_loaded( 'sockets' ) && ! \dl( 'sockets.so' ) ) {
		throw new SandboxError( 'cannot load the sockets extension for the fork server' );
	}
	if ( ! \socket_create_pair( \AF_UNIX, \SOCK_SEQPACKET | \SOCK_CLOEXEC, 0, $pair ) ) {
		throw new SandboxError( 'cannot create the fork server\'s control socket' );
	}
	// Both ends close on exec (no runner started afresh may hold one); proc_open()'s dup2() onto the
	// server's fd 3 gives it the only inherited copy.
	$theirs = \socket_export_stream( $pair[1] );
	$spec   = array( 0 => array( 'file', '/dev/null', 'r' ), 1 => \STDERR, 2 => \STDERR, 3 => $theirs );
	$proc   = \proc_open( $argv, $spec, $pipes, '/opt/wordpress', runner_env() );
	\fclose( $theirs ); // also closes $pair[1], which it exported: the server holds the only copy
	if ( ! \is_resource( $proc ) ) {
		throw new SandboxError( 'could not start the fork server' );
	}
	return array( 'proc' => $proc, 'control' => $pair[0], 'pid' => \proc_get_status( $proc )['pid'] );
}

/** Stops a fork server: it exits when its control socket closes (and is killed if it does not). */
function stop_fork_server( array $server ): void {
	\socket_close( $server['control'] );
	for ( $i = 0; $i < 200 && \proc_get_status( $server['proc'] )['running']; $i++ ) {
		\usleep( 2500 );
	}
	\posix_kill( $server['pid'], \SIGKILL );
	\proc_close( $server['proc'] );
}

/**
 * A runner forked from the fork server's boot, waiting for its job like one started ahead; null when the
 * server cannot give one (it is then not used again: see sequence.php).
 *
 * @return array{proc: null, pipes: array<int, resource>, pid: int, control: \Socket}|null
 */
function fork_runner( array $server ): ?array {
	if ( 1 !== @\socket_send( $server['control'], 'f', 1, \MSG_NOSIGNAL ) ) { // phpcs:ignore
		return null;
	}
	$record = fork_record( $server['control'], FORK_TIMEOUT_SECONDS );
	if ( null === $record || FORKED !== $record['kind'] || 4 !== \count( $record['fds'] ) ) {
		return null;
	}
	return array( 'proc' => null, 'pipes' => $record['fds'], 'pid' => $record['value'], 'control' => $server['control'] );
}

/**
 * One message from the fork server, waiting up to $wait seconds for it: its fields and the descriptors it
 * carried; null when none came (`gone` set when the server is gone: readable, and nothing to read).
 *
 * @return array{kind: int, value: int, cpu_us: int, fds: list<resource>}|null
 */
function fork_record( \Socket $control, float $wait, bool &$gone = false ): ?array {
	$read   = array( $control );
	$write  = null;
	$except = null;
	if ( 1 !== @\socket_select( $read, $write, $except, (int) $wait, (int) ( ( $wait - (int) $wait ) * 1e6 ) ) ) { // phpcs:ignore
		return null; // nothing yet (or EINTR: a signal, which the handler decides)
	}
	$message = array( 'buffer_size' => FORK_RECORD_BYTES, 'controllen' => \socket_cmsg_space( \SOL_SOCKET, \SCM_RIGHTS, 4 ) );
	if ( FORK_RECORD_BYTES !== @\socket_recvmsg( $control, $message, \MSG_DONTWAIT | \MSG_CMSG_CLOEXEC ) ) { // phpcs:ignore
		$gone = true;
		return null;
	}
	$record        = \unpack( FORK_RECORD, (string) $message['iov'][0] );
	$record['fds'] = \array_values( $message['control'][0]['data'] ?? array() );
	return $record;
}

/**
 * The runner's state in proc_get_status()'s terms. A forked runner's comes from its fork server (which
 * waits for it), or, when the server is gone and the runner was re-parented to PID 1, from waitpid().
 *
 * @return array{running: bool, signaled: bool, exitcode: int, termsig: int}
 */
function runner_status( array &$runner ): array {
	if ( null !== $runner['proc'] ) {
		return \proc_get_status( $runner['proc'] );
	}
	if ( ! isset( $runner['status'] ) ) {
		$gone   = false;
		$record = fork_record( $runner['control'], 0.0, $gone );
		$status = null;
		if ( null !== $record && FORK_EXITED === $record['kind'] ) {
			$status                               = $record['value'];
			$GLOBALS['wpbench_forked_runner_cpu'] = ( $GLOBALS['wpbench_forked_runner_cpu'] ?? 0 ) + \intdiv( $record['cpu_us'], 1000 );
		} elseif ( $gone && \pcntl_waitpid( $runner['pid'], $waited, \WNOHANG ) === $runner['pid'] ) {
			$status = $waited;
		} elseif ( $gone && ! \posix_kill( $runner['pid'], 0 ) ) {
			$status = 9; // gone, and nobody can say how: as killed
		}
		if ( null === $status ) {
			return array( 'running' => true, 'signaled' => false, 'exitcode' => -1, 'termsig' => 0 );
		}
		$runner['status'] = array(
			'running'  => false,
			'signaled' => \pcntl_wifsignaled( $status ),
			'exitcode' => \pcntl_wifexited( $status ) ? \pcntl_wexitstatus( $status ) : -1,
			'termsig'  => \pcntl_wifsignaled( $status ) ? \pcntl_wtermsig( $status ) : 0,
		);
	}
	return $runner['status'];
}

/** Waits up to $wait seconds for the runner to end: for a forked one, until its fork server says so. */
function await_exit( array $runner, float $wait ): void {
	if ( null !== $runner['proc'] ) {
		\usleep( (int) ( $wait * 1e6 ) );
		return;
	}
	$read   = array( $runner['control'] );
	$write  = null;
	$except = null;
	@\socket_select( $read, $write, $except, (int) $wait, (int) ( ( $wait - (int) $wait ) * 1e6 ) ); // phpcs:ignore
}

/** Kills a started runner that will get no job (and, as PID 1, everything else). */
function stop_runner( array $runner ): void {
	kill_runner( $runner );
	foreach ( $runner['pipes'] as $pipe ) {
		if ( \is_resource( $pipe ) ) {
			\fclose( $pipe );
		}
	}
	null === $runner['proc'] || \proc_close( $runner['proc'] );
	reap_everything();
}

/**
 * Sends a started runner its job and runs it to completion, to the timeout, or until it has said its
 * last word. The trusted phase (WordPress's boot and the test's setup) gets $setup_timeout from here,
 * when the task has arrived; $timeout starts when setup has reported, so neither a slow host nor a slow
 * fixture is ever charged to the candidate, and an overrun before it is the harness's (verdict.php).
 *
 * @param array{proc: resource, pipes: array<int, resource>, pid: int} $runner
 * @return array{protocol: Protocol, stdout: Capture, stderr: Capture, timed_out: bool, exit_code: ?int, signal: ?int, ms: int, exit_ms: ?int}
 */
function run_runner( array $runner, array $job, float $timeout, float $setup_timeout, bool $has_test_function, ?Protocol &$protocol = null ): array {
	$nonce    = \bin2hex( \random_bytes( 32 ) );
	$protocol = new Protocol( $nonce, $has_test_function, \count( $job['assertions'] ) );
	$stdin    = $nonce . "\n" . \json_encode( $job, \JSON_UNESCAPED_SLASHES | \JSON_INVALID_UTF8_SUBSTITUTE | \JSON_THROW_ON_ERROR );
	$nonce    = null;
	$start    = \microtime( true );
	$pipes    = $runner['pipes'];
	$captures = array( 1 => new Capture(), 2 => new Capture() );
	$deadline  = $start + $setup_timeout;
	$trusted   = true;
	$timed_out   = false;
	$status      = null;
	$finished_at = null;
	try {
		foreach ( $pipes as $pipe ) {
			\stream_set_blocking( $pipe, false );
		}
		$open = array( 1 => $pipes[1], 2 => $pipes[2], 3 => $pipes[3] );
		while ( true ) {
			$now = \microtime( true );
			if ( $trusted && null !== $protocol->first( 'setup' ) ) {
				$trusted  = false;
				$deadline = $now + $timeout;
			}
			if ( $protocol->finished ) {
				$finished_at ??= $now;
				$deadline      = \min( $deadline, $finished_at + EXIT_GRACE_SECONDS );
			}
			if ( ! $open || ( $protocol->finished && null === $status ) ) {
				$status = runner_status( $runner );
				if ( ! $status['running'] ) {
					break;
				}
				$status = null;
			}
			if ( $now >= $deadline ) {
				$timed_out = ! $protocol->finished;
				break;
			}
			$read  = \array_values( $open );
			$write = ( null !== $stdin && isset( $pipes[0] ) ) ? array( $pipes[0] ) : array();
			$wait  = $open ? \min( $deadline - $now, 0.5 ) : \min( $deadline - $now, 0.005 );
			if ( ! $read && ! $write ) {
				await_exit( $runner, $wait );
				continue;
			}
			$except = null;
			$ready  = @\stream_select( $read, $write, $except, (int) $wait, (int) ( ( $wait - (int) $wait ) * 1e6 ) ); // phpcs:ignore
			if ( false === $ready ) {
				continue; // EINTR: a signal; the handler decides.
			}
			if ( $write ) {
				$written = @\fwrite( $pipes[0], $stdin ); // phpcs:ignore
				if ( false === $written || 0 === $written && \feof( $pipes[0] ) ) {
					$stdin = null;
				} else {
					$stdin = \substr( $stdin, $written );
				}
				if ( null === $stdin || '' === $stdin ) {
					\fclose( $pipes[0] );
					unset( $pipes[0] );
					$stdin = null;
				}
			}
			foreach ( $read as $stream ) {
				$fd    = \array_search( $stream, $open, true );
				$chunk = \fread( $stream, 65536 );
				if ( false === $chunk || ( '' === $chunk && \feof( $stream ) ) ) {
					\fclose( $stream );
					unset( $open[ $fd ], $pipes[ $fd ] );
					continue;
				}
				if ( 3 === $fd ) {
					$protocol->feed( $chunk );
				} else {
					$captures[ $fd ]->add( $chunk );
				}
			}
		}
	} finally {
		if ( null === $status || $status['running'] ) {
			$status = kill_runner( $runner );
			drain( $pipes, $captures, $protocol );
		}
		foreach ( $pipes as $pipe ) {
			if ( \is_resource( $pipe ) ) {
				\fclose( $pipe );
			}
		}
		null === $runner['proc'] || \proc_close( $runner['proc'] );
		reap_everything();
	}
	return array(
		'protocol'  => $protocol,
		'stdout'    => $captures[1],
		'stderr'    => $captures[2],
		'timed_out' => $timed_out,
		'exit_code' => $status['signaled'] ? null : $status['exitcode'],
		'signal'    => $status['signaled'] ? $status['termsig'] : null,
		'ms'        => (int) \round( ( \microtime( true ) - $start ) * 1000 ),
		'exit_ms'   => null === $finished_at ? null : (int) \round( ( \microtime( true ) - $finished_at ) * 1000 ),
	);
}

/** Reads what is left in the pipes of a runner that is gone. */
function drain( array $pipes, array $captures, Protocol $protocol ): void {
	foreach ( array( 1, 2, 3 ) as $fd ) {
		if ( ! isset( $pipes[ $fd ] ) || ! \is_resource( $pipes[ $fd ] ) ) {
			continue;
		}
		while ( \is_string( $chunk = \fread( $pipes[ $fd ], 65536 ) ) && '' !== $chunk ) {
			if ( 3 === $fd ) {
				$protocol->feed( $chunk );
			} else {
				$captures[ $fd ]->add( $chunk );
			}
		}
	}
}

/**
 * Kills the runner; as PID 1 of the container, also everything else but the fork server (kill_others()),
 * so nothing candidate code might have left behind survives the verdict.
 */
function kill_runner( array &$runner ): array {
	\posix_kill( $runner['pid'], \SIGKILL );
	if ( 1 === \getmypid() ) {
		kill_others( 0.0, false ); // reaped later: proc_get_status() must reap the runner to know how it ended
	}
	// Wait until it is really gone (proc_get_status reaps it and keeps its status; a fork server says so),
	// so the pipes reach EOF and the verdict can say how it ended.
	for ( $i = 0; $i < 400; $i++ ) {
		$status = runner_status( $runner );
		if ( ! $status['running'] ) {
			return $status;
		}
		\usleep( 2500 );
	}
	return $status;
}

/** As PID 1: kill and reap whatever else is left but the fork server (orphans are re-parented to us). */
function reap_everything(): void {
	if ( 1 === \getmypid() ) {
		kill_others( 0.0 );
	}
}

/**
 * As PID 1: SIGKILLs every other process of the container — but the fork server, which runs no candidate
 * code and is not a runner's descendant — and (unless not $reap) reaps them, again until none is left or
 * $seconds have passed; returns the pids left. Without a fork server one kill(-1) reaches them all at once.
 *
 * @return list<string>
 */
function kill_others( float $seconds, bool $reap = true ): array {
	$spare    = (string) ( $GLOBALS['wpbench_fork_server']['pid'] ?? '' );
	$deadline = \microtime( true ) + $seconds;
	while ( true ) {
		if ( '' === $spare ) {
			\posix_kill( -1, \SIGKILL ); // as PID 1: every other process of the container
		}
		$others = \array_values( \array_diff( other_processes(), array( $spare ) ) );
		foreach ( '' === $spare ? array() : $others as $pid ) {
			\posix_kill( (int) $pid, \SIGKILL );
		}
		while ( $reap && ( $reaped = \pcntl_waitpid( -1, $status, \WNOHANG ) ) > 0 ) {
			if ( (string) $reaped === $spare ) { // the fork server died: its pid is free, nothing is spared
				$spare                                   = '';
				$GLOBALS['wpbench_fork_server']['dead'] = true;
			}
		}
		$others = \array_values( \array_diff( other_processes(), array( $spare ) ) );
		if ( ! $others || \microtime( true ) >= $deadline ) {
			return $others;
		}
		\usleep( 2000 );
	}
}
