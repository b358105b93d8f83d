"""Hostile candidates for the adversarial suite (test_adversarial.py) and `--check-exploits`.

Each candidate tries to pass a test it does not solve, to learn what the test expects, to reach the
verdict channel, or to turn its failure into an excluded record. The target test (`target_task`)
expects values no candidate can guess (fresh random tokens per run), so a candidate that passes any
assertion has learnt something it must not. `SCAN` is shared PHP that searches what it is given for
such a token.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

# The shape of every expected value in the target test.
TOKEN_PREFIX = "wpbtok-"


def token() -> str:
    return TOKEN_PREFIX + secrets.token_hex(16)


@dataclass(frozen=True)
class Hostile:
    name: str
    cls: str  # the attack class (README/architecture threat model)
    code: str
    status: str  # the exact verdict status it must get
    reason: str = ""  # a fragment the verdict's reason must contain
    timeout: float = 4.0


# Finds a token in anything: strings, arrays, objects (private properties too), recursively.
SCAN = r"""
if ( ! function_exists( 'wpbx_scan' ) ) {
	function wpbx_scan( $v, $depth = 0, &$seen = array() ) {
		if ( $depth > 12 ) { return null; }
		if ( is_string( $v ) ) { return preg_match( '/wpbtok-[0-9a-f]{32}/', $v, $m ) ? $m[0] : null; }
		if ( is_object( $v ) ) {
			$id = spl_object_id( $v );
			if ( isset( $seen[ $id ] ) ) { return null; }
			$seen[ $id ] = true;
			if ( $v instanceof Closure ) {
				$r = new ReflectionFunction( $v );
				return wpbx_scan( array( $r->getStaticVariables(), $r->getClosureUsedVariables() ), $depth + 1, $seen );
			}
			$v = (array) $v;
		}
		if ( is_array( $v ) ) {
			foreach ( $v as $k => $item ) {
				$found = wpbx_scan( $k, $depth + 1, $seen ) ?? wpbx_scan( $item, $depth + 1, $seen );
				if ( null !== $found ) { return $found; }
			}
		}
		return null;
	}
}
"""

# A solution-shaped candidate whose every answer is whatever `wpbx_find()` returns.
ANSWERS = r"""
function wpb_secret( ...$args ) { return wpbx_find(); }
function wpb_check( ...$args ) { return wpbx_find(); }
add_shortcode( 'wpb', function () { return wpbx_find(); } );
add_action( 'rest_api_init', function () {
	register_rest_route( 'wpb/v1', '/s', array( 'methods' => 'GET', 'permission_callback' => '__return_true', 'callback' => function () { return array( 'v' => wpbx_find() ); } ) );
} );
do_action( 'rest_api_init' );
"""


def target_task(tokens: dict[str, str], code: str, *, timeout: float = 4.0, test_id: str = "hostile") -> dict[str, Any]:
    """The test every hostile candidate faces: six assertions, each expecting a fresh token."""
    t = tokens
    return {
        "test_id": test_id,
        "code": code,
        "timeout_seconds": timeout,
        "test_function": "function wpb_secret() {}",
        "runtime_checks": {
            "assertions": [
                {"type": "returns_value", "function": "wpb_secret", "args": [1], "expected": t["returns"]},
                {"type": "custom_assertion", "code": f"return wpb_check( 2 ) === '{t['custom']}';"},
                {"type": "option_value", "option": "wpb_opt", "expected": t["option"]},
                {"type": "output_equals", "shortcode_content": "[wpb]", "expected": t["output"]},
                {"type": "rest_response", "route": "/wpb/v1/s", "data": {"v": t["rest"]}},
                {"type": "output_contains", "code": f"echo wpb_check( 3 ); // {t['code']}", "expected": t["code"]},
            ]
        },
    }


def finder(body: str) -> str:
    """A candidate whose answers come from `body` (PHP that returns a found token or null)."""
    return SCAN + "function wpbx_find() {\n" + body + "\n\treturn 'nothing found';\n}\n" + ANSWERS


FORGED_VERDICT = (
    '{"contract_version":"1","status":"passed","reason":"forged","scores":'
    '{"execution_pass":true,"runtime":1.0,"static":1.0,"static_policy_pass":true}}'
)
FAILED = "assertions failed"
NS = "verifier namespace"


def _ns(namespace: str, decl: str) -> str:
    return f"namespace {namespace} {{\n{decl}\n}}\nnamespace {{\n{finder('')}\n}}\n"


def _write(expr: str) -> str:
    """Tries to put a forged verdict on the supervisor's stdout with `expr` ($v is the verdict line)."""
    return finder("") + f"$v = '{FORGED_VERDICT}' . \"\\n\";\ntry {{ {expr}; }} catch ( \\Throwable $e ) {{}}\n"


HOSTILES: list[Hostile] = [
    # --- namespace fallback: declaring the verifier's unqualified names ---------------------------
    *[
        Hostile(f"ns-{fn}", "verdict forgery", _ns("WPBench\\Runner", decl), "failed", NS)
        for fn, decl in {
            "fwrite": "function fwrite( $h, $s ) { return \\fwrite( $h, str_replace( 'false', 'true', $s ) ); }",
            "function_exists": "function function_exists( $n ) { return true; }",
            "is_callable": "function is_callable( $n ) { return true; }",
            "json_encode": 'function json_encode( $v, $f = 0 ) { return \'{"event":"done"}\'; }',
            "preg_match": "function preg_match( $p, $s, &$m = null ) { return false; }",
            "str_contains": "function str_contains( $h, $n ) { return true; }",
            "get_option": "function get_option( $o, $d = false ) { return 'x'; }",
            "call_user_func_array": "function call_user_func_array( $f, $a ) { return 'x'; }",
            "strcasecmp": "function strcasecmp( $a, $b ) { return 0; }",
            "shortcode_exists": "function shortcode_exists( $s ) { return true; }",
        }.items()
    ],
    Hostile(
        "ns-constant",
        "verdict forgery",
        finder("") + "define( 'WPBench\\Runner\\JSON_UNESCAPED_SLASHES', 0 ); define( 'WPBench\\Runner\\TAGX', 1 );",
        "failed",
        NS,
    ),
    Hostile(
        "ns-supervisor",
        "verdict forgery",
        _ns("WPBench\\Supervisor", "function compare( ...$a ) { return array( true, 'ok' ); }"),
        "failed",
        NS,
    ),
    Hostile(
        "ns-common",
        "verdict forgery",
        _ns("WPBench\\Common", "function pattern_match( ...$a ) { return array( true, null ); }"),
        "failed",
        NS,
    ),
    Hostile("ns-class", "verdict forgery", _ns("WPBench\\Runtime", "class Judge { }"), "failed", NS),
    Hostile(
        "ns-autoload",
        "verdict forgery",
        finder("")
        + "spl_autoload_register( function ( $c ) { eval( 'namespace WPBench\\\\Runner; function cut2() {}' ); } );\n"
        + "class_exists( 'Anything' );",
        "failed",
        NS,
    ),
    # --- nonce theft and forged events ---------------------------------------------------------
    Hostile(
        "nonce-backtrace",
        "nonce theft",
        r"""
function wpbx_nonce() {
	foreach ( debug_backtrace( DEBUG_BACKTRACE_PROVIDE_OBJECT ) as $f ) {
		if ( preg_match( '/\b[0-9a-f]{64}\b/', json_encode( $f['args'] ?? array() ) . serialize( $f['object'] ?? null ), $m ) ) { return $m[0]; }
	}
	return str_repeat( '0', 64 );
}
function wpb_secret( ...$args ) {
	$fd = fopen( 'php://fd/3', 'w' );
	$n = wpbx_nonce();
	foreach ( array( 0, 1, 2, 3, 4, 5 ) as $i ) { fwrite( $fd, "WPB1 $n " . json_encode( array( 'event' => 'assertion', 'index' => $i, 'observed' => array( 'value' => true ) ) ) . "\n" ); }
	fwrite( $fd, "WPB1 $n {\"event\":\"teardown\",\"ok\":true}\nWPB1 $n {\"event\":\"done\"}\n" );
	exit( 0 );
}
""",
        "error",
        "exit() or die()",
    ),
    Hostile(
        "nonce-globals",
        "nonce theft",
        finder("")
        + r"""
$found = array();
$g = $GLOBALS;
array_walk_recursive( $g, function ( $v ) use ( &$found ) { if ( is_string( $v ) && preg_match( '/\b[0-9a-f]{64}\b/', $v, $m ) ) { $found[] = $m[0]; } } );
$fd = fopen( 'php://fd/3', 'w' );
foreach ( $found as $n ) { fwrite( $fd, "WPB1 $n {\"event\":\"teardown\",\"ok\":true}\nWPB1 $n {\"event\":\"done\"}\n" ); }
""",
        "failed",
        FAILED,
    ),
    Hostile(
        "nonce-reflection",
        "nonce theft",
        finder(
            r"""
	foreach ( array( 'WPBench\Runner\main', 'WPBench\Runner\ended', 'WPBench\Runner\line' ) as $fn ) {
		$r = new ReflectionFunction( $fn );
		if ( $found = wpbx_scan( $r->getStaticVariables() ) ) { return $found; }
	}
	foreach ( get_declared_classes() as $c ) {
		foreach ( ( new ReflectionClass( $c ) )->getProperties( ReflectionProperty::IS_STATIC ) as $p ) {
			try { if ( $found = wpbx_scan( $p->getValue() ) ) { return $found; } } catch ( Throwable $e ) {}
		}
	}
"""
        ),
        "failed",
        FAILED,
    ),
    Hostile(
        "nonce-stdin-proc",
        "nonce theft",
        finder(
            r"""
	foreach ( array( 'php://stdin', 'php://fd/0', '/proc/self/environ', '/proc/self/cmdline', '/proc/1/cmdline', '/proc/self/mem', '/proc/1/environ', '/dev/termination-log' ) as $p ) {
		$s = @file_get_contents( $p, false, null, 0, 1 << 20 );
		if ( is_string( $s ) && ( $found = wpbx_scan( $s ) ) ) { return $found; }
	}
"""
        ),
        "failed",
        FAILED,
    ),
    Hostile(
        "rerun-main",
        "nonce theft",
        finder("") + "\\WPBench\\Runner\\main();",
        "error",
    ),
    Hostile(
        "forge-guessed-nonce-and-exit",
        "verdict forgery",
        finder("")
        + "$fd = fopen( 'php://fd/3', 'w' ); $n = str_repeat( 'a', 64 );\n"
        + 'fwrite( $fd, "WPB1 $n {\\"event\\":\\"done\\"}\\n" ); echo \''
        + FORGED_VERDICT
        + "'; fwrite( STDERR, '"
        + FORGED_VERDICT
        + "' ); exit( 0 );",
        "error",
        "exit() or die()",
    ),
    Hostile(
        "include-runner-again",
        "verdict forgery",
        finder("") + "include '/opt/wpbench/verifier/runner/runner.php';",
        "error",
    ),
    # --- expected values: the frames, globals, reflection, files, opcache -----------------------
    Hostile(
        "expected-backtrace",
        "expected-value read",
        finder("\tif ( $found = wpbx_scan( debug_backtrace( DEBUG_BACKTRACE_PROVIDE_OBJECT ) ) ) { return $found; }"),
        "failed",
        FAILED,
    ),
    Hostile(
        "expected-exception-trace",
        "expected-value read",
        finder(
            "\tini_set( 'zend.exception_ignore_args', '0' );\n"
            "\tif ( $found = wpbx_scan( ( new Exception() )->getTrace() ) ) { return $found; }"
        ),
        "failed",
        FAILED,
    ),
    Hostile(
        "expected-globals",
        "expected-value read",
        finder("\tif ( $found = wpbx_scan( $GLOBALS ) ) { return $found; }"),
        "failed",
        FAILED,
    ),
    Hostile(
        "expected-closures",
        "expected-value read",
        finder(
            r"""
	foreach ( $GLOBALS['wp_filter'] as $hook ) { if ( $found = wpbx_scan( $hook ) ) { return $found; } }
	foreach ( get_defined_functions()['user'] as $fn ) { if ( $found = wpbx_scan( ( new ReflectionFunction( $fn ) )->getStaticVariables() ) ) { return $found; } }
"""
        ),
        "failed",
        FAILED,
    ),
    Hostile(
        "expected-constants-ini-env",
        "expected-value read",
        finder(
            "\tif ( $found = wpbx_scan( array( get_defined_constants(), ini_get_all( null, false ), getenv(), $_SERVER, $_ENV ) ) ) { return $found; }"
        ),
        "failed",
        FAILED,
    ),
    Hostile(
        "expected-files",
        "expected-value read",
        finder(
            r"""
	foreach ( array( '/tmp', '/run/wpbench', '/run/wpbench/wp-content', '/run/wpbench/candidate', '/opt/wpbench', '/tasks', '/proc/1/fd', '/' ) as $dir ) {
		foreach ( (array) @scandir( $dir ) as $f ) {
			$s = @file_get_contents( "$dir/$f", false, null, 0, 1 << 20 );
			if ( is_string( $s ) && ( $found = wpbx_scan( $s ) ) ) { return $found; }
		}
	}
"""
        ),
        "failed",
        FAILED,
    ),
    Hostile(
        "expected-opcache",
        "expected-value read",
        finder(
            "\tif ( function_exists( 'opcache_get_status' ) && ( $found = wpbx_scan( @opcache_get_status( true ) ) ) ) { return $found; }"
        ),
        "failed",
        FAILED,
    ),
    Hostile(
        "expected-database",
        "expected-value read",
        finder(
            "\tglobal $wpdb; foreach ( $wpdb->get_col( \"SELECT name FROM sqlite_master WHERE type='table'\" ) as $t ) {"
            ' if ( $found = wpbx_scan( $wpdb->get_results( "SELECT * FROM `$t`", ARRAY_A ) ) ) { return $found; } }'
        ),
        "failed",
        FAILED,
    ),
    # --- WordPress-level tampering with what an assertion reads --------------------------------
    Hostile(
        "wp-pre-option-filter",
        "assertion tampering",
        finder("")
        + "add_filter( 'pre_option', function ( $pre, $o ) { return 'wpb_opt' === $o ? wpbx_find() : $pre; }, 10, 2 );",
        "failed",
        FAILED,
    ),
    Hostile(
        "wp-rest-pre-dispatch",
        "assertion tampering",
        finder("")
        + "add_filter( 'rest_pre_dispatch', function () { return new WP_REST_Response( array( 'v' => wpbx_find() ), 200 ); } );",
        "failed",
        FAILED,
    ),
    Hostile(
        "wp-query-filter",
        "assertion tampering",
        finder("") + "add_filter( 'query', function ( $q ) { return \"SELECT 'x'\"; } );",
        "failed",
        FAILED,
    ),
    Hostile(
        "wp-all-hook-throws",
        "assertion tampering",
        finder("") + "add_action( 'all', function () { throw new RuntimeException( str_repeat( 'x', 3000000 ) ); } );",
        "failed",
        FAILED,
    ),
    Hostile(
        "wp-output-buffers",
        "assertion tampering",
        finder("")
        + "ob_start( function ( $b ) { return '"
        + FORGED_VERDICT
        + "'; } ); ob_start(); ob_start( null, 1 );",
        "failed",
        FAILED,
    ),
    Hostile(
        "error-handler-swap",
        "assertion tampering",
        finder("")
        + "set_error_handler( function () { return true; } ); for ( $i = 0; $i < 50000; $i++ ) { trigger_error( 'n' . $i ); }",
        "failed",
        FAILED,
    ),
    Hostile(
        "lifecycle-rebind",
        "assertion tampering",
        finder("")
        + "( Closure::bind( function () { self::$snapshot = array(); }, null, WPBench\\Runtime\\Lifecycle::class ) )();",
        "failed",
        FAILED,
    ),
    # --- exclusion tricks: trying to make its failure a harness_error -------------------------
    Hostile(
        "huge-exception-class",
        "exclusion trick",
        "eval( 'class ' . str_repeat( 'E', 3000000 ) . ' extends Exception {}' ); $c = str_repeat( 'E', 3000000 ); throw new $c( 'x' );",
        "error",
        "uncaught",
    ),
    Hostile(
        "huge-exception-message",
        "exclusion trick",
        "throw new Exception( str_repeat( 'm', 8000000 ) );",
        "error",
        "uncaught",
    ),
    Hostile(
        "fd3-unterminated-flood",
        "exclusion trick",
        finder("") + "$fd = fopen( 'php://fd/3', 'w' ); fwrite( $fd, str_repeat( 'x', 6 << 20 ) );",
        "error",
        "event protocol",
    ),
    Hostile(
        "fd3-line-flood",
        "exclusion trick",
        finder("")
        + "$fd = fopen( 'php://fd/3', 'w' ); $l = str_repeat( str_repeat( 'y', 1023 ) . \"\\n\", 1024 ); for ( $i = 0; $i < 40; $i++ ) { fwrite( $fd, $l ); }",
        "error",
        "event protocol",
    ),
    Hostile(
        "setup-like-throw",
        "exclusion trick",
        finder("") + "throw new LogicException( 'setup failed: mis-authored test' );",
        "error",
        "uncaught",
    ),
    Hostile(
        "fake-harness-text",
        "exclusion trick",
        finder("") + "fwrite( STDERR, 'test error: unknown assertion type' ); echo '{\"status\":\"harness_error\"}';",
        "failed",
        FAILED,
    ),
    Hostile("exit-in-assertion", "exclusion trick", "function wpb_secret() { exit( 2 ); }", "error", "exit() or die()"),
    Hostile("fatal-in-assertion", "exclusion trick", "function wpb_secret() { undefined_fn_xyz(); }", "failed", FAILED),
    # --- file writes through extensions (the verdict on /proc/1/fd/1) ---------------------------
    *[
        Hostile(f"write-{name}", "extension file write", _write(expr), "failed", FAILED)
        for name, expr in {
            "file-put-contents": "file_put_contents( '/proc/1/fd/1', $v )",
            "spl-file": "( new SplFileObject( '/proc/1/fd/1', 'a' ) )->fwrite( $v )",
            "sqlite3": "( new SQLite3( '/proc/1/fd/1' ) )->exec( 'CREATE TABLE t(x)' )",
            "pdo-attach": "( new PDO( 'sqlite::memory:' ) )->exec( \"ATTACH DATABASE '/proc/1/fd/1' AS x; CREATE TABLE x.t(a)\" )",
            "vacuum-into": "( new PDO( 'sqlite::memory:' ) )->exec( \"CREATE TABLE t(a); VACUUM INTO '/proc/1/fd/1'\" )",
            "dom-save": "$d = new DOMDocument(); $d->loadXML( '<a/>' ); $d->save( '/proc/1/fd/1' )",
            "xmlwriter": "$w = new XMLWriter(); $w->openUri( '/proc/1/fd/1' ); $w->writeRaw( $v ); $w->flush()",
            "gd": "imagepng( imagecreate( 1, 1 ), '/proc/1/fd/1' )",
            "error-log": "ini_set( 'error_log', '/proc/1/fd/1' ); error_log( $v ); error_log( $v, 3, '/proc/1/fd/1' )",
            "copy": "file_put_contents( '/tmp/v', $v ); copy( '/tmp/v', '/proc/1/fd/1' )",
            "termination-log": "file_put_contents( '/dev/termination-log', $v )",
            "open-basedir-widen": "ini_set( 'open_basedir', '/' ); file_put_contents( '/proc/1/fd/1', $v )",
        }.items()
    ],
    # --- resources and output floods --------------------------------------------------------
    Hostile(
        "memory-limit-lifted",
        "resource flood",
        "ini_set( 'memory_limit', '-1' ); $a = array(); while ( true ) { $a[] = str_repeat( 'm', 1 << 20 ); }",
        "error",
        "memory",
    ),
    Hostile(
        "memory-exhausted",
        "resource flood",
        "$a = array(); while ( true ) { $a[] = str_repeat( 'm', 1 << 20 ); }",
        "error",
        "memory",
    ),
    Hostile("busy-loop", "resource flood", "while ( true ) {}", "timeout", "timed out", timeout=2.0),
    Hostile("sleep", "resource flood", "sleep( 60 );", "timeout", "timed out", timeout=2.0),
    Hostile(
        "shutdown-loop",
        "resource flood",
        finder("") + "register_shutdown_function( function () { while ( true ) {} } );",
        "failed",
        FAILED,
        timeout=2.0,
    ),
    Hostile(
        "stdout-flood",
        "output flood",
        finder("") + "$s = str_repeat( 'o', 1 << 20 ); for ( $i = 0; $i < 64; $i++ ) { echo $s; }",
        "failed",
        FAILED,
    ),
    Hostile(
        "stderr-flood",
        "output flood",
        finder("") + "$s = str_repeat( 'e', 1 << 20 ); for ( $i = 0; $i < 64; $i++ ) { fwrite( STDERR, $s ); }",
        "failed",
        FAILED,
    ),
    Hostile(
        "stdout-flood-until-timeout",
        "output flood",
        "$s = str_repeat( 'o', 1 << 16 ); while ( true ) { echo $s; }",
        "timeout",
        "timed out",
        timeout=2.0,
    ),
    Hostile(
        "tmp-fill",
        "resource flood",
        finder("")
        + "$s = str_repeat( 't', 1 << 20 ); for ( $i = 0; $i < 400; $i++ ) { @file_put_contents( \"/tmp/f$i\", $s ); }",
        "failed",
        FAILED,
    ),
    Hostile(
        "line-separators",
        "output flood",
        finder("") + 'echo "\\u{2028}\\u{2029}"; fwrite( STDERR, "\\u{2028}" );',
        "failed",
        FAILED,
    ),
    # --- processes and signals ---------------------------------------------------------------
    Hostile("pcntl-fork", "fork and signal abuse", "pcntl_fork();", "error", "undefined function"),
    Hostile("posix-kill-pid1", "fork and signal abuse", "posix_kill( 1, 15 );", "error", "undefined function"),
    Hostile(
        "proc-open",
        "fork and signal abuse",
        "proc_open( array( '/bin/kill', '-TERM', '1' ), array(), $p );",
        "error",
        "undefined function",
    ),
    Hostile("exec", "fork and signal abuse", "exec( 'kill -TERM 1' );", "error", "undefined function"),
    Hostile(
        "pcntl-alarm",
        "fork and signal abuse",
        "pcntl_alarm( 1 ); pcntl_signal( 14, function () {} );",
        "error",
        "undefined function",
    ),
    Hostile(
        "posix-setrlimit",
        "fork and signal abuse",
        "posix_setrlimit( POSIX_RLIMIT_AS, -1, -1 );",
        "error",
        "undefined function",
    ),
    Hostile("ffi", "fork and signal abuse", "FFI::cdef( 'int kill(int, int);' )->kill( 1, 15 );", "error", "uncaught"),
]
