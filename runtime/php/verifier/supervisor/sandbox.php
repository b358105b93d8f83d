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
	\array_push( $argv, '-d', 'extension=' . ISSUES_EXTENSION );
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

/**
 * Starts the runner before the task is known: it boots WordPress, then waits on stdin for its nonce and
 * job (run_runner() sends them). Booting reads only the baseline site and trusted code, so nothing the
 * task carries can reach it; the candidate's files are written afterwards.
 *
 * @param list<string> $argv
 * @return array{proc: resource, pipes: array<int, resource>, pid: int}
 */
function start_runner( array $argv ): array {
	$env = array(
		'PATH'               => '/usr/bin:/bin',
		'HOME'               => '/tmp',
		'TMPDIR'             => '/tmp',
		'LANG'               => 'C.UTF-8',
		'LD_PRELOAD'         => NATIVE_GUARD,
		'WPBENCH_GUARD_ROLE' => 'runner',
		'WPBENCH_DATA_LIMIT' => (string) ( memory_limit_bytes() + DATA_HEADROOM_BYTES ),
	);
	if ( ! \is_file( NATIVE_GUARD ) ) {
		throw new SandboxError( 'the native guard ' . NATIVE_GUARD . ' is missing from the image' );
	}
	$spec = array( 0 => array( 'pipe', 'r' ), 1 => array( 'pipe', 'w' ), 2 => array( 'pipe', 'w' ), 3 => array( 'pipe', 'w' ) );
	$proc = \proc_open( $argv, $spec, $pipes, '/opt/wordpress', $env );
	if ( ! \is_resource( $proc ) ) {
		throw new SandboxError( 'could not start the runner process' );
	}
	return array( 'proc' => $proc, 'pipes' => $pipes, 'pid' => \proc_get_status( $proc )['pid'] );
}

/** Kills a started runner that will get no job (and, as PID 1, everything else). */
function stop_runner( array $runner ): void {
	kill_runner( $runner['proc'], $runner['pid'] );
	foreach ( $runner['pipes'] as $pipe ) {
		if ( \is_resource( $pipe ) ) {
			\fclose( $pipe );
		}
	}
	\proc_close( $runner['proc'] );
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
	$proc     = $runner['proc'];
	$pipes    = $runner['pipes'];
	$pid      = $runner['pid'];
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
				$status = \proc_get_status( $proc );
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
				\usleep( (int) ( $wait * 1e6 ) );
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
			$status = kill_runner( $proc, $pid );
			drain( $pipes, $captures, $protocol );
		}
		foreach ( $pipes as $pipe ) {
			if ( \is_resource( $pipe ) ) {
				\fclose( $pipe );
			}
		}
		\proc_close( $proc );
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
 * Kills the runner; as PID 1 of the container, also everything else (kill(-1) spares PID 1),
 * so nothing candidate code might have left behind survives the verdict.
 */
function kill_runner( $proc, int $pid ): array {
	\posix_kill( $pid, \SIGKILL );
	if ( 1 === \getmypid() ) {
		\posix_kill( -1, \SIGKILL );
	}
	// Wait until it is really gone (proc_get_status reaps it and keeps its status), so the
	// pipes reach EOF and the verdict can say how it ended.
	for ( $i = 0; $i < 400; $i++ ) {
		$status = \proc_get_status( $proc );
		if ( ! $status['running'] ) {
			return $status;
		}
		\usleep( 2500 );
	}
	return $status;
}

/** As PID 1: kill and reap whatever else is left (orphans are re-parented to us). */
function reap_everything(): void {
	if ( 1 !== \getmypid() ) {
		return;
	}
	\posix_kill( -1, \SIGKILL );
	while ( \pcntl_waitpid( -1, $status, \WNOHANG ) > 0 ) {
		// reaped one
	}
}
