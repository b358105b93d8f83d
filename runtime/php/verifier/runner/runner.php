<?php
/**
 * The runner: the one process that runs candidate code. Started by the supervisor with
 * `php -n ... runner.php`, disable_functions, no FFI, the native guard preloaded, and these
 * descriptors (open_basedir is set by lock_down() once WordPress has booted):
 *
 *   0  stdin: "<nonce>\n<job JSON>", read once and closed
 *   1  stdout, 2  stderr: candidate output, captured by the supervisor as data (never parsed)
 *   3  the event channel: "WPB1 <nonce> <event JSON>\n" lines, in protocol order
 *      hello → booted → setup → [candidate → assertion…] → teardown → done
 *      or, when the process ends early, "ended" from the shutdown hook.
 *
 * The nonce lives only in main()'s local variables and in the shutdown closure registered
 * before any untrusted code runs; it is never a function argument (debug_backtrace() shows
 * arguments), a global, a static or a constant. Events are written by main() itself.
 */

namespace WPBench\Runner;

require __DIR__ . '/../common/patterns.php';
require __DIR__ . '/issues.php';
require __DIR__ . '/assertions.php';
require __DIR__ . '/lifecycle.php';

use WPBench\Runtime\Lifecycle;

const TAG = 'WPB1';

/** One event line without the "WPB1 <nonce> " prefix. Takes plain data only. */
function line( string $event, array $data = array() ): string {
	$data = array( 'event' => $event ) + $data;
	$json = json_encode( $data, JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE | JSON_PARTIAL_OUTPUT_ON_ERROR );
	return ( false === $json ? '{"event":"' . $event . '","encode_error":true}' : $json ) . "\n";
}

function ms_since( int $start ): int {
	return intdiv( hrtime( true ) - $start, 1000000 );
}

/**
 * Closes the sandbox before any test or candidate code runs: the native guard must be mapped
 * (LD_PRELOAD can fail silently) and open_basedir is set now rather than at start-up, so WordPress
 * boots with PHP's realpath cache (see runner_argv() in supervisor/sandbox.php).
 *
 * @return true|string True, or what is wrong.
 */
function lock_down( string $open_basedir, string $guard ): true|string {
	$maps = file_get_contents( '/proc/self/maps' );
	if ( false === $maps || ! str_contains( $maps, $guard ) ) {
		return "the native guard $guard is not loaded";
	}
	if ( false === ini_set( 'open_basedir', $open_basedir ) || ini_get( 'open_basedir' ) !== $open_basedir ) {
		return 'open_basedir could not be set';
	}
	return true;
}

/** Boots WordPress. A separate function so WordPress's locals never share main()'s scope. */
function boot(): void {
	require '/opt/wpbench/wp/boot.php';
}

/**
 * Runs test-authored code (setup, teardown).
 *
 * @return array{ok: bool, ms: int, error?: string}
 */
function run_test_code( string $code ): array {
	$start = hrtime( true );
	if ( '' === trim( $code ) ) {
		return array( 'ok' => true, 'ms' => 0, 'empty' => true );
	}
	try {
		eval_php( $code );
		return array( 'ok' => true, 'ms' => ms_since( $start ) );
	} catch ( \Throwable $e ) {
		return array( 'ok' => false, 'ms' => ms_since( $start ), 'error' => describe_throwable( $e ) );
	}
}

/**
 * Has \WPBench\Runtime\Lifecycle record every hooked callback, so that tests can later fire only what
 * the candidate added (see lifecycle.php). Its snapshot() is private: only this bound closure calls it.
 */
function lifecycle_snapshot( string $candidate_file ): void {
	( \Closure::bind( static fn( string $file ) => Lifecycle::snapshot( $file ), null, Lifecycle::class ) )( $candidate_file );
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
	$start = hrtime( true );
	lifecycle_snapshot( $candidate['file'] );
	try {
		if ( $candidate['plugin'] ) {
			wp_register_plugin_realpath( $candidate['file'] );
		}
		include_candidate( $candidate['file'] );
		if ( $candidate['plugin'] ) {
			do_action( 'plugin_loaded', $candidate['file'] );
		}
		return array( 'ok' => true, 'ms' => ms_since( $start ) );
	} catch ( \ParseError $e ) {
		return array(
			'ok'    => false,
			'ms'    => ms_since( $start ),
			'kind'  => 'parse',
			'error' => $e->getMessage(),
			'file'  => $e->getFile(),
			'line'  => $e->getLine(),
		);
	} catch ( \Throwable $e ) {
		return array(
			'ok'    => false,
			'ms'    => ms_since( $start ),
			'kind'  => 'exception',
			'class' => get_class( $e ),
			'error' => cut( $e->getMessage(), 2000 ),
			'file'  => $e->getFile(),
			'line'  => $e->getLine(),
		);
	}
}

/**
 * What the shutdown hook reports when the runner ends before "done": a fatal error (including
 * memory exhaustion and uncaught errors) or, when there is none, exit()/die().
 */
function ended( string $phase ): string {
	$limit = ini_get( 'memory_limit' );
	ini_set( 'memory_limit', (string) ( memory_get_usage( true ) + 32 * 1024 * 1024 ) );
	$error = error_get_last();
	$fatal = null;
	if ( $error && ( $error['type'] & ( E_ERROR | E_PARSE | E_CORE_ERROR | E_COMPILE_ERROR | E_USER_ERROR | E_RECOVERABLE_ERROR ) ) ) {
		$fatal = array(
			'level'   => Issues::level( $error['type'] ),
			'message' => cut( $error['message'], 2000 ),
			'file'    => $error['file'],
			'line'    => $error['line'],
			'memory'  => str_starts_with( $error['message'], 'Allowed memory size of' ),
		);
	}
	return line(
		'ended',
		array(
			'phase'        => $phase,
			'fatal'        => $fatal,
			'memory_limit' => $limit,
			'issues'       => Issues::drain(),
		)
	);
}

function main(): void {
	$input = (string) stream_get_contents( STDIN );
	fclose( STDIN );
	$cut   = strpos( $input, "\n" );
	$nonce = substr( $input, 0, (int) $cut );
	$job   = json_decode( substr( $input, (int) $cut + 1 ), true, 512, JSON_BIGINT_AS_STRING );
	$input = null;
	$out   = fopen( 'php://fd/3', 'wb' );
	if ( false === $cut || strlen( $nonce ) < 32 || ! is_array( $job ) || ! $out ) {
		fwrite( STDERR, "runner: started without a nonce, job or event channel\n" );
		exit( 70 );
	}
	$phase = 'boot';
	$done  = false;
	register_shutdown_function(
		static function () use ( $out, $nonce, &$phase, &$done ): void {
			if ( ! $done ) {
				fwrite( $out, TAG . ' ' . $nonce . ' ' . ended( $phase ) );
			}
		}
	);
	Issues::install();
	fwrite( $out, TAG . ' ' . $nonce . ' ' . line( 'hello', array( 'pid' => getmypid() ) ) );

	$start = hrtime( true );
	boot();
	$booted = array(
		'ms'                => ms_since( $start ),
		'sandbox'           => lock_down( $job['open_basedir'], $job['guard'] ),
		'wordpress_version' => $GLOBALS['wp_version'] ?? '',
		'sqlite_version'    => defined( 'SQLITE_DRIVER_VERSION' ) ? SQLITE_DRIVER_VERSION : '',
		'sqlite_dropin'     => ( $GLOBALS['wpdb'] ?? null ) instanceof \WP_SQLite_DB,
		'installed'         => is_blog_installed(),
		'issues'            => Issues::drain(),
	);
	fwrite( $out, TAG . ' ' . $nonce . ' ' . line( 'booted', $booted ) );
	if ( true !== $booted['sandbox'] ) {
		$done = true; // nothing runs outside the sandbox; the supervisor reports why
		exit( 70 );
	}

	$phase = 'setup';
	$setup = run_test_code( $job['setup'] );
	fwrite( $out, TAG . ' ' . $nonce . ' ' . line( 'setup', $setup + array( 'issues' => Issues::drain() ) ) );

	if ( $setup['ok'] ) {
		$phase     = 'candidate';
		$candidate = run_candidate( $job['candidate'] );
		fwrite( $out, TAG . ' ' . $nonce . ' ' . line( 'candidate', $candidate + array( 'issues' => Issues::drain() ) ) );

		if ( null !== $job['test_function'] ) {
			$phase  = 'assertion:-1';
			$result = run_assertion( array( 'type' => 'function_exists', 'function' => $job['test_function'] ) );
			fwrite( $out, TAG . ' ' . $nonce . ' ' . line( 'assertion', array( 'index' => -1 ) + $result + array( 'issues' => Issues::drain() ) ) );
		}
		foreach ( $job['assertions'] as $index => $assertion ) {
			$phase  = 'assertion:' . $index;
			$t      = hrtime( true );
			$result = run_assertion( $assertion );
			$result = array( 'index' => $index ) + $result + array( 'ms' => ms_since( $t ), 'issues' => Issues::drain() );
			fwrite( $out, TAG . ' ' . $nonce . ' ' . line( 'assertion', $result ) );
		}
	}

	$phase    = 'teardown';
	$teardown = run_test_code( $job['teardown'] );
	fwrite( $out, TAG . ' ' . $nonce . ' ' . line( 'teardown', $teardown + array( 'issues' => Issues::drain() ) ) );

	$phase = 'finish';
	while ( ob_get_level() > 0 && @ob_end_flush() ) { // phpcs:ignore WordPress.PHP.NoSilencedErrors
		// Hand buffered candidate output to stdout before saying "done".
	}
	fwrite( $out, TAG . ' ' . $nonce . ' ' . line( 'done', array( 'issues_total' => Issues::total() ) ) );
	$done = true;
}

main();
