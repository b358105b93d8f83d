<?php
/**
 * The runner: the one process that runs candidate code. Started by the supervisor with
 * `php -n ... runner.php OPEN_BASEDIR GUARD`, disable_functions, no FFI, the native guard preloaded
 * (no native code from writable places, no signals to other processes, not dumpable, a data-size
 * limit), and these descriptors (open_basedir is set by lock_down() first, before WordPress boots):
 *
 *   0  stdin: "<nonce>\n<job JSON>", read once (after WordPress has booted) and closed
 *   1  stdout, 2  stderr: candidate output, captured by the supervisor as data (never parsed)
 *   3  the event channel: "WPB1 <nonce> <event JSON>\n" lines, in protocol order
 *      hello → booted → setup → [candidate → assertion…] → teardown → done
 *      or, when the process ends early, "ended" from the shutdown hook.
 *
 * What candidate code can reach here holds no secret (threat model: docs/architecture.md):
 * - the nonce and the job live only in main()'s local variables and in the shutdown closure
 *   registered before any untrusted code runs; never a function argument (debug_backtrace() shows
 *   arguments), a global, a static or a constant;
 * - the job carries no expected value (the supervisor keeps them and judges what the runner
 *   observed), and test-authored PHP is compiled into argument-less closures before the candidate
 *   loads and called from main() only;
 * - PHP's warnings, notices and deprecations are recorded by the wpbench_issues extension, which
 *   hands them only to the nonce (issues.php), so no error handler of the candidate's hides one;
 * - every global function and constant is called fully qualified, so declaring WPBench\Runner\<name>
 *   replaces nothing; declaring anything in a WPBench namespace fails the candidate (trespass()).
 */

namespace WPBench\Runner;

require __DIR__ . '/issues.php';
require __DIR__ . '/observe.php';
require __DIR__ . '/lifecycle.php';
require __DIR__ . '/preservation.php';

use WPBench\Runtime\Lifecycle;
use WPBench\Runtime\Preservation;

const TAG = 'WPB1';
// Namespaces the verifier owns (lower case, as PHP reports declared names): nothing may be declared in them later.
const VERIFIER_NAMESPACE = 'wpbench\\';
// Test-authored PHP fields of an assertion, compiled before the candidate loads.
const CODE_FIELDS = array( 'code', 'args_code', 'post_id_code' );

/** One event line without the "WPB1 <nonce> " prefix. Takes plain data only. */
function line( string $event, array $data = array() ): string {
	$data = array( 'event' => $event ) + $data;
	$json = \json_encode( $data, \JSON_UNESCAPED_SLASHES | \JSON_INVALID_UTF8_SUBSTITUTE | \JSON_PRESERVE_ZERO_FRACTION | \JSON_PARTIAL_OUTPUT_ON_ERROR );
	return ( false === $json ? '{"event":"' . $event . '","encode_error":true}' : $json ) . "\n";
}

function ms_since( int $start ): int {
	return \intdiv( \hrtime( true ) - $start, 1000000 );
}

/**
 * Closes the sandbox before WordPress boots, so nothing the boot opens predates a wall: the SQLite
 * connection WordPress keeps (in $wpdb and $GLOBALS['@pdo']) gets pdo_sqlite's ATTACH/VACUUM INTO
 * guard only when open_basedir is already set at connect time. The native guard must be mapped
 * (LD_PRELOAD can fail silently). open_basedir is set here with ini_set() rather than on the command
 * line, which would turn PHP's realpath cache off (see runner_argv() in supervisor/sandbox.php).
 *
 * @return true|string True, or what is wrong.
 */
function lock_down( string $open_basedir, string $guard ): true|string {
	if ( '' === $open_basedir || '' === $guard ) {
		return 'the runner was started without its open_basedir and native guard arguments';
	}
	$maps = \file_get_contents( '/proc/self/maps' );
	if ( false === $maps || ! \str_contains( $maps, $guard ) ) {
		return "the native guard $guard is not loaded";
	}
	if ( ! \preg_match( '/^Seccomp:\s+2$/m', (string) \file_get_contents( '/proc/self/status' ) ) ) {
		return 'the native guard did not install its seccomp filter';
	}
	if ( ! \extension_loaded( 'wpbench_issues' ) ) {
		return 'the wpbench_issues extension (the trusted record of PHP issues) is not loaded';
	}
	if ( false === \ini_set( 'open_basedir', $open_basedir ) || \ini_get( 'open_basedir' ) !== $open_basedir ) {
		return 'open_basedir could not be set';
	}
	return true;
}

/** Boots WordPress. A separate function so WordPress's locals never share main()'s scope. */
function boot(): void {
	require '/opt/wpbench/wp/boot.php';
}

/**
 * Compiles test-authored PHP into a closure without arguments or bound variables: calling it later
 * runs the code in a fresh function scope, and no frame or reflection of it shows the source.
 *
 * @return \Closure|string The closure, or the compile error.
 */
function compile( string $code ): \Closure|string {
	try {
		$closure = eval( "return static function () {\n" . \preg_replace( '/^\s*<\?php\b/i', '', $code, 1 ) . "\n};" );
	} catch ( \ParseError $e ) {
		return 'PHP syntax error: ' . $e->getMessage() . ' on line ' . ( $e->getLine() - 1 );
	}
	return $closure instanceof \Closure ? $closure : 'did not compile to a closure';
}

/** Every name declared in a verifier namespace: functions, classes (and interfaces, traits, enums), constants. */
function verifier_names(): array {
	$names = array();
	foreach ( \get_defined_functions()['user'] as $name ) {
		if ( \str_starts_with( \strtolower( $name ), VERIFIER_NAMESPACE ) ) {
			$names[] = "function $name";
		}
	}
	foreach ( \array_merge( \get_declared_classes(), \get_declared_interfaces(), \get_declared_traits() ) as $name ) {
		if ( \str_starts_with( \strtolower( $name ), VERIFIER_NAMESPACE ) ) {
			$names[] = "class $name";
		}
	}
	foreach ( \array_keys( \get_defined_constants( true )['user'] ?? array() ) as $name ) {
		if ( \str_starts_with( \strtolower( $name ), VERIFIER_NAMESPACE ) ) {
			$names[] = "constant $name";
		}
	}
	return $names;
}

/** What was declared in a verifier namespace since $before (at most 20 names). */
function trespass( array $before ): array {
	return \array_slice( \array_values( \array_diff( verifier_names(), $before ) ), 0, 20 );
}

/**
 * Has \WPBench\Runtime\Lifecycle record every hooked callback, so that tests can later fire only what
 * the candidate added (see lifecycle.php). Its snapshot() is private: only this bound closure calls it.
 */
function lifecycle_snapshot( string $candidate_file ): void {
	( \Closure::bind( static fn( string $file ) => Lifecycle::snapshot( $file ), null, Lifecycle::class ) )( $candidate_file );
}

/**
 * Ends \WPBench\Runtime\Preservation's capturing (see preservation.php): snapshots are setup's, taken
 * before the candidate runs. Its seal() is private: only this bound closure calls it.
 */
function preservation_seal(): void {
	( \Closure::bind( static fn() => Preservation::seal(), null, Preservation::class ) )();
}

/** Puts the snapshots setup left in globals back, before each assertion and teardown (preservation.php). */
function preservation_restore(): void {
	( \Closure::bind( static fn() => Preservation::restore(), null, Preservation::class ) )();
}

/** Includes the candidate file from its own function scope, like `wp eval-file`. */
function include_candidate( string $__wpbench_file ): void {
	include $__wpbench_file;
}

/**
 * Loads the candidate: a snippet file, or a plugin's main file the way WordPress loads a plugin.
 *
 * @param array{file: string, plugin: bool} $candidate
 * @return array{ok: bool, ms: int, kind?: string, error?: string, line?: int}
 */
function run_candidate( array $candidate ): array {
	$start = \hrtime( true );
	lifecycle_snapshot( $candidate['file'] );
	preservation_seal();
	try {
		if ( $candidate['plugin'] ) {
			\wp_register_plugin_realpath( $candidate['file'] );
		}
		include_candidate( $candidate['file'] );
		if ( $candidate['plugin'] ) {
			\do_action( 'plugin_loaded', $candidate['file'] );
		}
		return array( 'ok' => true, 'ms' => ms_since( $start ) );
	} catch ( \ParseError $e ) {
		return array(
			'ok'    => false,
			'ms'    => ms_since( $start ),
			'kind'  => 'parse',
			'error' => cut( $e->getMessage(), 2000 ),
			'file'  => cut( $e->getFile(), 500 ),
			'line'  => $e->getLine(),
		);
	} catch ( \Throwable $e ) {
		return array(
			'ok'    => false,
			'ms'    => ms_since( $start ),
			'kind'  => 'exception',
			'class' => cut( \get_class( $e ), 300 ),
			'error' => cut( $e->getMessage(), 2000 ),
			'file'  => cut( $e->getFile(), 500 ),
			'line'  => $e->getLine(),
		);
	}
}

/**
 * What the shutdown hook reports when the runner ends before "done": a fatal error (including
 * memory exhaustion and uncaught errors) or, when there is none, exit()/die().
 */
function ended( string $phase, array $issues ): string {
	$limit = \ini_get( 'memory_limit' );
	\ini_set( 'memory_limit', (string) ( \memory_get_usage( true ) + 32 * 1024 * 1024 ) );
	$error = \error_get_last();
	$fatal = null;
	if ( $error && ( $error['type'] & ( \E_ERROR | \E_PARSE | \E_CORE_ERROR | \E_COMPILE_ERROR | \E_USER_ERROR | \E_RECOVERABLE_ERROR ) ) ) {
		$fatal = array(
			'level'   => Issues::level( $error['type'] ),
			'message' => cut( $error['message'], 2000 ),
			'file'    => cut( $error['file'], 500 ),
			'line'    => $error['line'],
			'memory'  => \str_starts_with( $error['message'], 'Allowed memory size of' ) || \str_starts_with( $error['message'], 'Out of memory' ),
		);
	}
	return line(
		'ended',
		array(
			'phase'        => $phase,
			'fatal'        => $fatal,
			'memory_limit' => $limit,
			'issues'       => $issues,
		)
	);
}

/** Runs compiled test code; a throwable is reported, never raised. @return array{ok: bool, ms: int, error?: string, empty?: bool} */
function test_code_result( int $start, ?\Throwable $error, bool $empty ): array {
	if ( $empty ) {
		return array( 'ok' => true, 'ms' => 0, 'empty' => true );
	}
	return null === $error ? array( 'ok' => true, 'ms' => ms_since( $start ) ) : array( 'ok' => false, 'ms' => ms_since( $start ), 'error' => describe_throwable( $error ) );
}

/**
 * Reads "<nonce>\n<job JSON>" from stdin, once. The supervisor sends it when its task has arrived,
 * which may be after WordPress has booted here.
 *
 * @return array{0: string, 1: array}|null
 */
function read_job(): ?array {
	$input = (string) \stream_get_contents( \STDIN );
	\fclose( \STDIN );
	$cut   = \strpos( $input, "\n" );
	$nonce = \substr( $input, 0, (int) $cut );
	$job   = \json_decode( \substr( $input, (int) $cut + 1 ), true, 512, \JSON_BIGINT_AS_STRING );
	return false === $cut || \strlen( $nonce ) < 32 || ! \is_array( $job ) ? null : array( $nonce, $job );
}

/** The event channel, fd 3; a runner without one ends here. @return resource */
function open_events() {
	$out = \fopen( 'php://fd/3', 'wb' );
	if ( ! $out ) {
		\fwrite( \STDERR, "runner: started without an event channel\n" );
		exit( 70 );
	}
	return $out;
}

/**
 * Fast mode's fork server (native/forkserver.c): after the boot, closes the database connection (its
 * file, WAL and shared-memory index must not be shared) and forks one runner a request; returns only in
 * a forked runner, which reseeds what a fresh process would have fresh (main() then connects it to its
 * own freshly laid-out site). A server that cannot serve exits (the supervisor then starts runners itself).
 */
function serve_forks(): void {
	$closed = $GLOBALS['wpdb']->close();
	\gc_collect_cycles();
	if ( true !== $closed || true !== \wpbench_fork_runner() ) {
		exit( 71 );
	}
	\mt_srand();
	$_SERVER['REQUEST_TIME_FLOAT'] = \microtime( true );
	$_SERVER['REQUEST_TIME']       = (int) $_SERVER['REQUEST_TIME_FLOAT'];
	\timer_start();
}

function main(): void {
	// A fork server's fd 3 is its control socket, not an event channel: its forked runners open theirs.
	$server = \function_exists( 'wpbench_fork_server' ) && \wpbench_fork_server();
	$out    = $server ? null : open_events();
	$phase  = 'boot';
	$done   = false;
	$nonce  = null;
	// Registered before the boot, which runs before the job is read: a boot that dies still reports
	// "ended" once the supervisor has sent the nonce.
	\register_shutdown_function(
		static function () use ( &$out, &$nonce, &$phase, &$done ): void {
			if ( $done || null === $out ) {
				return;
			}
			if ( null === $nonce ) {
				$nonce = read_job()[0] ?? null;
			}
			if ( null !== $nonce ) {
				$issues = \function_exists( 'wpbench_issues_take' ) ? ( \wpbench_issues_take( $nonce ) ?: NO_ISSUES )['issues'] : array();
				\fwrite( $out, TAG . ' ' . $nonce . ' ' . ended( $phase, $issues ) );
			}
		}
	);
	Issues::install();

	// Every wall first; then WordPress boots, before the job is read (the supervisor may start the
	// runner ahead of its task). A runner whose sandbox cannot be closed boots nothing.
	$sandbox = lock_down( (string) ( $GLOBALS['argv'][1] ?? '' ), (string) ( $GLOBALS['argv'][2] ?? '' ) );
	$start   = \hrtime( true );
	true === $sandbox && boot();
	$boot_ms = ms_since( $start );
	if ( $server ) {
		true === $sandbox || exit( 71 );
		serve_forks(); // from here on, one forked runner
		$out = open_events(); // before the database, as in a runner started afresh: the same descriptor numbers
		$GLOBALS['wpdb']->db_connect();
	}

	$read = read_job();
	if ( null === $read ) {
		$done = true;
		\fwrite( \STDERR, "runner: started without a nonce or job\n" );
		exit( 70 );
	}
	[ $nonce, $job ] = $read;
	$read            = null;
	\fwrite( $out, TAG . ' ' . $nonce . ' ' . line( 'hello', array( 'pid' => \getmypid() ) ) );
	$booted = array(
		'ms'                => $boot_ms,
		'sandbox'           => $sandbox,
		'wordpress_version' => $GLOBALS['wp_version'] ?? '',
		'sqlite_version'    => \defined( 'SQLITE_DRIVER_VERSION' ) ? \constant( 'SQLITE_DRIVER_VERSION' ) : '',
		'sqlite_dropin'     => ( $GLOBALS['wpdb'] ?? null ) instanceof \WP_SQLite_DB,
		'installed'         => true === $sandbox && \is_blog_installed(),
		'issues'            => true === $sandbox ? ( \wpbench_issues_take( $nonce ) ?: NO_ISSUES )['issues'] : array(),
	);
	\fwrite( $out, TAG . ' ' . $nonce . ' ' . line( 'booted', $booted ) );
	if ( true !== $booted['sandbox'] ) {
		$done = true; // nothing runs outside the sandbox; the supervisor reports why
		exit( 70 );
	}

	// Test-authored PHP, compiled while only trusted code has run.
	$compiled = array();
	$problems = array();
	foreach ( array( 'setup', 'teardown' ) as $key ) {
		if ( '' !== \trim( $job[ $key ] ) ) {
			$compiled[ $key ] = compile( $job[ $key ] );
			if ( \is_string( $compiled[ $key ] ) ) {
				$problems[] = "$key: {$compiled[ $key ]}";
			}
		}
	}
	foreach ( $job['assertions'] as $index => $assertion ) {
		foreach ( CODE_FIELDS as $field ) {
			if ( \array_key_exists( $field, $assertion ) ) {
				$compiled[ $index ] = compile( (string) $assertion[ $field ] );
				if ( \is_string( $compiled[ $index ] ) ) {
					$problems[] = "assertion $index $field: {$compiled[ $index ]}";
				}
				$job['assertions'][ $index ][ $field ] = true; // the input says "from code"; the source stays here
			}
		}
	}
	$declared = verifier_names();

	$phase = 'setup';
	$t     = \hrtime( true );
	$error = null;
	if ( $problems ) {
		$setup = array( 'ok' => false, 'ms' => 0, 'error' => 'test code does not compile: ' . \implode( '; ', $problems ) );
	} else {
		try {
			isset( $compiled['setup'] ) && $compiled['setup']();
		} catch ( \Throwable $e ) {
			$error = $e;
		}
		$setup = test_code_result( $t, $error, ! isset( $compiled['setup'] ) );
	}
	\fwrite( $out, TAG . ' ' . $nonce . ' ' . line( 'setup', $setup + array( 'issues' => ( \wpbench_issues_take( $nonce ) ?: NO_ISSUES )['issues'] ) ) );

	if ( $setup['ok'] ) {
		$phase     = 'candidate';
		$candidate = run_candidate( $job['candidate'] );
		\fwrite( $out, TAG . ' ' . $nonce . ' ' . line( 'candidate', $candidate + array( 'trespass' => trespass( $declared ), 'issues' => ( \wpbench_issues_take( $nonce ) ?: NO_ISSUES )['issues'] ) ) );

		if ( null !== $job['test_function'] ) {
			$phase  = 'assertion:-1';
			$result = observe( array( 'type' => 'function_exists', 'function' => $job['test_function'] ) );
			\fwrite( $out, TAG . ' ' . $nonce . ' ' . line( 'assertion', array( 'index' => -1 ) + $result + array( 'issues' => ( \wpbench_issues_take( $nonce ) ?: NO_ISSUES )['issues'] ) ) );
		}
		foreach ( $job['assertions'] as $index => $in ) {
			$phase = 'assertion:' . $index;
			$t     = \hrtime( true );
			preservation_restore();
			if ( isset( $compiled[ $index ] ) ) {
				// Called here, without arguments, so no frame below holds the test's code or the job.
				$level = \ob_get_level();
				\ob_start();
				try {
					$in['returned'] = $compiled[ $index ]();
				} catch ( \Throwable $e ) {
					$in['threw'] = 'threw ' . describe_throwable( $e );
				} finally {
					$in['echoed'] = collect_output( $level );
				}
				if ( ! \str_starts_with( $in['type'], 'output_' ) ) {
					echo $in['echoed']; // only output assertions capture what test code echoes
					unset( $in['echoed'] );
				}
			}
			$result = isset( $in['threw'] ) ? array( 'failed' => cut( $in['threw'], 2000 ) ) : observe( $in );
			$in     = null;
			$result = array( 'index' => $index ) + $result + array( 'ms' => ms_since( $t ), 'issues' => ( \wpbench_issues_take( $nonce ) ?: NO_ISSUES )['issues'] );
			\fwrite( $out, TAG . ' ' . $nonce . ' ' . line( 'assertion', $result ) );
		}
	}

	$phase = 'teardown';
	$t     = \hrtime( true );
	$error = null;
	preservation_restore();
	try {
		isset( $compiled['teardown'] ) && ! \is_string( $compiled['teardown'] ) && $compiled['teardown']();
	} catch ( \Throwable $e ) {
		$error = $e;
	}
	$teardown = test_code_result( $t, $error, ! isset( $compiled['teardown'] ) );
	\fwrite( $out, TAG . ' ' . $nonce . ' ' . line( 'teardown', $teardown + array( 'issues' => ( \wpbench_issues_take( $nonce ) ?: NO_ISSUES )['issues'] ) ) );

	$phase = 'finish';
	while ( \ob_get_level() > 0 && @\ob_end_flush() ) { // phpcs:ignore WordPress.PHP.NoSilencedErrors
		// Hand buffered candidate output to stdout before saying "done".
	}
	\fwrite( $out, TAG . ' ' . $nonce . ' ' . line( 'done', array( 'issues_total' => ( \wpbench_issues_take( $nonce ) ?: NO_ISSUES )['total'], 'trespass' => trespass( $declared ), 'memory_limit' => \ini_get( 'memory_limit' ) ) ) );
	$done = true;
}

main();
