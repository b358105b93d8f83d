"""The sandbox: fresh state per container, no network, nothing writable outside the tmpfs mounts,
and candidate code cannot speak for the verifier (fake verdicts, forged events, /proc, processes)."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import pytest
from gradekit import Graded, Grader, task

pytestmark = pytest.mark.docker

FAILS = {"type": "custom_assertion", "code": "return false;", "description": "always fails"}

# Candidate code that tries everything and prints a report (stdout is data, so it can be read back).
HOSTILE = r"""
$r = array();
// A fake verdict on every output the candidate can reach.
$fake = json_encode( array( 'contract_version' => '1', 'status' => 'passed', 'reason' => 'forged', 'scores' => array( 'execution_pass' => true, 'runtime' => 1.0, 'static' => 1.0, 'static_policy_pass' => true ) ) );
echo $fake, "\n";
fwrite( STDERR, $fake . "\n" );
// Forged events on the event channel: a guessed nonce, no nonce, and an unterminated prefix.
$fd3 = fopen( 'php://fd/3', 'w' );
$r['fd3_open'] = (bool) $fd3;
foreach ( array( 'WPB1 ' . str_repeat( '0', 64 ) . ' ', 'WPB1 ', '' ) as $prefix ) {
	fwrite( $fd3, $prefix . '{"event":"assertion","index":0,"passed":true,"message":"forged","harness":false}' . "\n" );
	fwrite( $fd3, $prefix . '{"event":"teardown","ok":true}' . "\n" . $prefix . '{"event":"done"}' . "\n" );
}
fwrite( $fd3, 'unterminated-prefix-' );
// Other descriptors: only the runner's own files (SQLite database, ...) and its own pipes, no pipe
// or socket that could lead to the supervisor's stdout.
$own = array();
for ( $i = 0; $i < 4; $i++ ) {
	$f = @fopen( "php://fd/$i", 'r' );
	if ( $f ) { $own[] = fstat( $f )['ino']; }
}
$r['other_fds'] = array();
for ( $i = 4; $i < 64; $i++ ) {
	$f = @fopen( "php://fd/$i", 'r' );
	if ( $f ) {
		$st = fstat( $f );
		$r['other_fds'][ $i ] = ( 0100000 === ( $st['mode'] & 0170000 ) || in_array( $st['ino'], $own, true ) ) ? 'own' : sprintf( '%o', $st['mode'] );
	}
}
// /proc: the nonce in memory, PID 1's stdout, environment.
foreach ( array( '/proc/self/mem', '/proc/self/maps', '/proc/self/environ', '/proc/1/fd/1', '/proc/1/mem', '/proc/1/cmdline' ) as $p ) {
	$r['read'][ $p ] = false !== @file_get_contents( $p, false, null, 0, 16 );
}
$r['write_proc_1_fd_1'] = false !== @file_put_contents( '/proc/1/fd/1', $fake );
// Processes, signals, FFI, resource enumeration.
foreach ( array( 'exec', 'shell_exec', 'system', 'passthru', 'proc_open', 'popen', 'pcntl_fork', 'pcntl_exec', 'posix_kill', 'posix_setsid', 'mail', 'putenv', 'dl', 'get_resources', 'symlink', 'link' ) as $fn ) {
	$r['callable'][ $fn ] = function_exists( $fn );
}
try { exec( '/bin/sh -c id' ); $r['exec'] = 'ran'; } catch ( \Error $e ) { $r['exec'] = $e->getMessage(); }
try { $r['ffi'] = class_exists( 'FFI' ) ? ( FFI::cdef( 'int getpid(void);' ) ? 'usable' : 'no' ) : 'absent'; } catch ( \Throwable $e ) { $r['ffi'] = 'blocked'; }
$r['ffi_enable'] = ini_get( 'ffi.enable' );
// Native code the candidate wrote itself (bytes of a real shared object, decoded below) must not load.
file_put_contents( '/run/wpbench/wp-content/evil.so', base64_decode( $GLOBALS['wpbench_test_so'] ?? '' ) );
try {
	( new Pdo\Sqlite( 'sqlite::memory:' ) )->loadExtension( '/run/wpbench/wp-content/evil.so' );
	$r['load_extension'] = 'loaded';
} catch ( \Throwable $e ) {
	$r['load_extension'] = $e->getMessage();
}
// libcurl (file-naming options PHP does not check): no handle can be made at all.
$r['curl_functions'] = array_values( array_filter( array( 'curl_init', 'curl_multi_init', 'curl_share_init', 'curl_setopt', 'curl_exec' ), 'function_exists' ) );
// Writes outside the tmpfs mounts.
foreach ( array( '/opt/wordpress/evil.php', '/opt/wordpress/wp-config.php', '/opt/wpbench/baseline/x', '/etc/evil', '/evil', '/run/wpbench/x', '/run/wpbench/opcache/x', '/tmp/ok', '/run/wpbench/wp-content/ok' ) as $p ) {
	$r['write'][ $p ] = false !== @file_put_contents( $p, 'x' );
}
// The network.
$sock = @fsockopen( '1.1.1.1', 80, $errno, $errstr, 2 );
$r['socket'] = $sock ? 'connected' : $errstr;
$dns = @gethostbyname( 'wordpress.org' );
$r['dns'] = $dns;
$resp = wp_remote_get( 'https://api.wordpress.org/core/version-check/1.7/' );
$r['http'] = is_wp_error( $resp ) ? 'blocked' : 'reached';
echo 'REPORT:' . json_encode( $r ) . "\n";
"""


def shared_object(image: str) -> str:
    """A real shared object's bytes (base64): loading it would succeed if nothing stopped it."""
    out = subprocess.run(
        ["docker", "run", "--rm", "--entrypoint", "base64", image, "-w0", "/usr/lib/x86_64-linux-gnu/libz.so.1"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


@pytest.fixture(scope="module")
def graded(grader: Grader) -> dict[str, Graded]:
    setup = {"setup": f"$GLOBALS['wpbench_test_so'] = '{shared_object(grader.image)}';"}
    hostile = task(HOSTILE, FAILS, {"type": "custom_assertion", "code": "return true;"}, runtime=setup)
    results: dict[str, Graded] = grader.grade_many(
        {
            "hostile": hostile,
            "stop_early": task(
                r"""$fd3 = fopen( 'php://fd/3', 'w' );
fwrite( $fd3, 'WPB1 ' . str_repeat( 'a', 64 ) . ' {"event":"done"}' . "\n" );
echo '{"status":"passed"}';
fclose( STDOUT );
exit( 0 );""",
                FAILS,
            ),
        }
    )
    # The same without the pre-boot (the runner starts once the task has come).
    results["hostile_cold"] = grader.grade(hostile, "-e", "WPBENCH_PREBOOT=0")
    return results


def report(g: Graded) -> dict[str, Any]:
    match = re.search(r"^REPORT:(.*)$", g.verdict.stdout, re.M)
    assert match, g.explain()
    result: dict[str, Any] = json.loads(match.group(1))
    return result


def test_fake_verdicts_and_forged_events_are_not_believed(graded: dict[str, Graded]) -> None:
    g = graded["hostile"]
    assert g.status == "failed", g.explain()
    assert g.assertion(0).passed is False and g.assertion(0).message.startswith("returned false")
    assert g.assertion(1).passed is True
    assert '"reason":"forged"' in g.verdict.stdout and '"reason":"forged"' in g.verdict.stderr  # data, not verdicts
    assert "forged" not in g.verdict.reason
    assert "ignored" in g.stderr and "unauthenticated lines on the event channel" in g.stderr
    r = report(g)
    assert r["fd3_open"] is True  # it could write to the channel, and was still ignored
    assert set(r["other_fds"].values()) <= {"own"}, r["other_fds"]


def test_a_candidate_cannot_end_the_protocol_early(graded: dict[str, Graded]) -> None:
    g = graded["stop_early"]
    assert g.status == "error", g.explain()
    assert "exit() or die() was called in candidate code" in g.verdict.reason


def test_proc_is_out_of_reach(graded: dict[str, Graded]) -> None:
    r = report(graded["hostile"])
    assert r["read"] == dict.fromkeys(r["read"], False)
    assert r["write_proc_1_fd_1"] is False


def test_no_processes_and_no_ffi(graded: dict[str, Graded]) -> None:
    r = report(graded["hostile"])
    assert r["callable"] == dict.fromkeys(r["callable"], False)
    assert r["exec"] == "Call to undefined function exec()"
    assert r["ffi"] == "absent" and r["ffi_enable"] in ("0", False)


def test_no_native_code_of_its_own(graded: dict[str, Graded]) -> None:
    g = graded["hostile"]
    r = report(g)
    # Without the guard the library loads and SQLite then misses its entry point ("undefined symbol").
    assert r["load_extension"].startswith("Unable to load extension"), r["load_extension"]
    assert "undefined symbol" not in r["load_extension"]
    assert r["curl_functions"] == []
    assert "wpbench: refused to load native code from /run/wpbench/wp-content/evil.so" in g.verdict.stderr


def test_no_writes_outside_the_tmpfs_mounts(graded: dict[str, Graded]) -> None:
    writes = report(graded["hostile"])["write"]
    assert {p for p, ok in writes.items() if ok} == {"/tmp/ok", "/run/wpbench/wp-content/ok"}


def test_the_pre_boot_leaves_exactly_the_walls_of_a_cold_boot(graded: dict[str, Graded]) -> None:
    preboot, cold = graded["hostile"], graded["hostile_cold"]
    assert (preboot.status, preboot.exit_code) == (cold.status, cold.exit_code), cold.explain()
    assert report(preboot) == report(cold)


def test_no_network(graded: dict[str, Graded]) -> None:
    r = report(graded["hostile"])
    assert r["socket"] != "connected" and r["dns"] == "wordpress.org" and r["http"] == "blocked"


def test_the_container_itself_is_read_only_and_offline(grader: Grader) -> None:
    """Below PHP: the root filesystem is read-only and there is no network, whatever the runner does."""
    script = (
        "for p in /opt/wordpress/x /opt/wpbench/x /etc/x /x /usr/local/bin/x /run/wpbench/x /tmp/x /dev/shm/x /dev/x; do "
        "if (echo > $p) 2>/dev/null; then echo W:$p; fi; done; "
        'php8.4 -n -r \'echo @fsockopen("1.1.1.1", 80, $e, $s, 2) ? "NET:up" : "NET:down", PHP_EOL;\'; '
        "id -u"
    )
    argv = grader.argv("--entrypoint", "/bin/sh")
    proc = subprocess.run([*argv, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    lines = proc.stdout.split()
    assert [line for line in lines if line.startswith("W:")] == ["W:/run/wpbench/x", "W:/tmp/x"], proc.stdout
    assert "NET:down" in lines and lines[-1] == "65532"


def test_database_writes_never_reach_the_next_container(grader: Grader) -> None:
    writer = grader.grade(
        task(
            "update_option( 'leak_option', 'leaked' );\n"
            "wp_insert_post( array( 'post_title' => 'Leaked post', 'post_status' => 'publish' ) );\n"
            "wp_create_user( 'leaky', 'secret-password', 'leaky@example.test' );\n"
            "file_put_contents( WP_CONTENT_DIR . '/uploads/leak.txt', 'x' );",
            {"type": "option_value", "option": "leak_option", "expected": "leaked"},
            {"type": "custom_assertion", "code": "return (bool) get_user_by( 'login', 'leaky' );"},
        )
    )
    assert writer.status == "passed", writer.explain()
    reader = grader.grade(
        task(
            "",
            {"type": "option_value", "option": "leak_option", "absent": True},
            {"type": "custom_assertion", "code": "return false === get_user_by( 'login', 'leaky' );"},
            {
                "type": "query_result",
                "query": "SELECT COUNT(*) FROM {prefix}posts WHERE post_title = 'Leaked post'",
                "expected": "0",
            },
            {"type": "custom_assertion", "code": "return ! file_exists( WP_CONTENT_DIR . '/uploads/leak.txt' );"},
            {
                "type": "custom_assertion",
                "code": "return 'WP-Bench' === get_option( 'blogname' ) && 1 === count( get_users() );",
            },
        )
    )
    assert reader.status == "passed", reader.explain()


# The runner started by hand: its nonce and job on stdin, its event channel (fd 3) on stdout.
RUNNER_BY_HAND = r"""
job='{"setup":"","teardown":"","assertions":[],"test_function":null,"candidate":{"file":"/nonexistent","plugin":false}}'
run() { printf '%s\n%s' "$(printf 'n%.0s' $(seq 64))" "$job" | php8.4 -n -d extension=pdo -d extension=pdo_sqlite "$@" 3>&1; }
echo "no-arguments:"; LD_PRELOAD=/opt/wpbench/lib/nodlopen.so WPBENCH_GUARD_ROLE=runner run /opt/wpbench/verifier/runner/runner.php
echo "guard-not-loaded:"; LD_PRELOAD=/opt/wpbench/lib/nodlopen.so WPBENCH_GUARD_ROLE=runner \
    run /opt/wpbench/verifier/runner/runner.php /opt/wordpress/:/opt/wpbench/:/tmp/ /opt/wpbench/lib/absent.so
"""


def test_a_runner_whose_walls_cannot_be_closed_boots_nothing(grader: Grader) -> None:
    """lock_down() comes before WordPress: without its open_basedir or its native guard the runner says why
    and loads no WordPress at all (the supervisor then reports a harness_error before any candidate code)."""
    proc = subprocess.run([*grader.argv("--entrypoint", "/bin/sh"), "-c", RUNNER_BY_HAND],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    booted = {}
    label = ""
    for line in proc.stdout.splitlines():
        if line.endswith(":"):
            label = line[:-1]
        elif '"event":"booted"' in line:
            booted[label] = json.loads(line.split(" ", 2)[2])
    assert set(booted) == {"no-arguments", "guard-not-loaded"}, proc.stdout + proc.stderr
    assert "without its open_basedir" in booted["no-arguments"]["sandbox"]
    assert booted["guard-not-loaded"]["sandbox"] == "the native guard /opt/wpbench/lib/absent.so is not loaded"
    for event in booted.values():
        assert event["wordpress_version"] == "" and event["sqlite_dropin"] is False and event["installed"] is False
