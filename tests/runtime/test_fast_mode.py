"""Fast mode (`fork_per_test`): what one candidate does must not reach the next one in the same container.

Each attacker below tries to leave something behind through one channel (files in every place it can
write, the database, WordPress's drop-ins and must-use plugins, the opcache and its file cache, shared
memory, sessions, processes, signals, the environment, the supervisor's memory, sockets — abstract unix
sockets and loopback TCP —, file locks, file modes, the tmpfs budget) and is followed, in the same
container, by a probe that reports everything it can see of those channels. Every probe must report
exactly what the probe reports in a fresh container: zero influence. The probe also passes a real check
after every attacker, and the supervisor must say `ready` (the container was reset) after each of them.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from typing import Any

import pytest
from gradekit import Graded, Grader, task, wait_for_runner

pytestmark = pytest.mark.docker

# A check the probe passes: it must still pass after any attacker.
PROBE_CHECK = {"type": "returns_value", "function": "wpbx_probe_ok", "expected": "probe-ok"}

# What the probe sees, printed as one JSON document on stdout. Nothing in it depends on the time or the
# probe's own pid; all of it would change if an attacker's trace survived.
PROBE = r"""
function wpbx_probe_ok() { return 'probe-ok'; }
function wpbx_tree( $dir ) {
	$out = array();
	$items = @scandir( $dir );
	if ( false === $items ) {
		return 'unreadable';
	}
	foreach ( $items as $name ) {
		if ( '.' === $name || '..' === $name ) {
			continue;
		}
		$path = "$dir/$name";
		if ( is_link( $path ) ) {
			$out[ $name ] = 'link:' . readlink( $path );
		} elseif ( is_dir( $path ) ) {
			$out[ $name ] = array( 'mode' => decoct( fileperms( $path ) & 07777 ), 'in' => wpbx_tree( $path ) );
		} else {
			$out[ $name ] = decoct( fileperms( $path ) & 07777 ) . ':' . filesize( $path ) . ':' . ( is_readable( $path ) ? sha1_file( $path ) : 'closed' );
		}
	}
	return $out;
}
$seen = array();
// Files: every place the runner may write, with modes and contents (the database file is below, by rows,
// because SQLite rewrites its header on every open).
$seen['tmp']        = array( 'mode' => decoct( fileperms( '/tmp' ) & 07777 ), 'in' => wpbx_tree( '/tmp' ) );
$seen['candidate']  = wpbx_tree( '/run/wpbench/candidate' );
$content            = wpbx_tree( '/run/wpbench/wp-content' );
unset( $content['database'] );
$seen['wp-content'] = array( 'mode' => decoct( fileperms( '/run/wpbench/wp-content' ) & 07777 ), 'in' => $content );
$seen['database-dir'] = array_values( array_diff( scandir( '/run/wpbench/wp-content/database' ), array( '.', '..', '.ht.sqlite', '.ht.sqlite-wal', '.ht.sqlite-shm', '.ht.sqlite-journal' ) ) );
$seen['free-tmp-mib'] = (int) floor( disk_free_space( '/tmp' ) / 1048576 );
$seen['free-run-mib'] = (int) floor( disk_free_space( '/run/wpbench/wp-content' ) / 1048576 );
// Places outside the runner's reach stay so (and so could not carry anything either).
foreach ( array( '/dev/shm', '/run/wpbench', '/run/wpbench/opcache', '/proc/1/mem', '/proc/1/environ', '/dev/mqueue' ) as $path ) {
	$seen['reach'][ $path ] = @file_exists( $path ) ? 'visible' : 'hidden';
}
// The database: every table, row by row (hashed).
global $wpdb;
foreach ( $wpdb->get_col( "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name" ) as $table ) {
	$rows = $wpdb->get_results( "SELECT * FROM \"$table\"", ARRAY_A );
	$seen['db'][ $table ] = count( $rows ) . ':' . sha1( json_encode( $rows ) );
}
// What WordPress loaded: options an attacker would plant, drop-ins and must-use plugins, globals, hooks.
$seen['mu-plugins'] = array_keys( get_mu_plugins() );
$seen['dropins']    = array_keys( get_dropins() );
$seen['planted']    = array( get_option( 'wpbx_planted', 'absent' ), get_transient( 'wpbx_planted' ), isset( $GLOBALS['wpbx_planted'] ) );
$seen['functions']  = array_values( array_filter( get_defined_functions()['user'], static fn( $f ) => str_starts_with( $f, 'wpbx_' ) && 'wpbx_probe_ok' !== $f && 'wpbx_tree' !== $f ) );
$seen['hooks']      = count( $GLOBALS['wp_filter'] );
$seen['constants']  = array_values( array_filter( array_keys( get_defined_constants( true )['user'] ?? array() ), static fn( $c ) => str_starts_with( $c, 'WPBX' ) ) );
// Opcache: a file written at the path the attacker compiled must run as written now.
@mkdir( '/tmp/wpbx-probe', 0700 );
file_put_contents( '/tmp/wpbx-cached.php', '<?php return "fresh";' );
$seen['opcache-include'] = include '/tmp/wpbx-cached.php';
unlink( '/tmp/wpbx-cached.php' );
@rmdir( '/tmp/wpbx-probe' );
$seen['opcache'] = function_exists( 'opcache_get_status' ) ? ( false === @opcache_get_status( false ) ? 'no shared memory' : 'shared memory' ) : 'off';
// Processes: every pid up to 4096 that exists, but PID 1 (the supervisor), this runner and its parent (in fast
// mode the fork server it was forked from, which runs no candidate code; in a container of its own, PID 1).
$pids = array();
for ( $pid = 2; $pid <= 4096; $pid++ ) {
	if ( $pid !== getmypid() && $pid !== posix_getppid() && false !== @posix_getpgid( $pid ) ) {
		$pids[] = $pid;
	}
}
$seen['other-processes'] = $pids;
$seen['pgid-sid']        = array( posix_getpgid( 0 ) === posix_getpgid( 1 ), posix_getsid( 0 ) === posix_getsid( 1 ) );
// Environment of this process, and what a signal handler or alarm could have set up (nothing, after exec).
$env = getenv();
ksort( $env );
$seen['env'] = $env;
// Sockets: what an attacker listened on must not answer.
foreach ( array( "unix://\0wpbx-abstract", 'unix:///tmp/wpbx.sock', 'tcp://127.0.0.1:8765', 'udp://127.0.0.1:8766' ) as $address ) {
	$client = @stream_socket_client( $address, $errno, $errstr, 0.2 );
	$seen['sockets'][ $address ] = false === $client ? 'refused' : ( 0 === strpos( $address, 'udp' ) ? 'udp (connectionless)' : 'ANSWERED' );
}
// File locks: a lock file at the attacker's path can be taken at once.
$lock = fopen( '/tmp/wpbx.lock', 'c' );
$seen['flock'] = flock( $lock, LOCK_EX | LOCK_NB );
fclose( $lock );
unlink( '/tmp/wpbx.lock' );
// The database can be written (no lock left on it).
$seen['db-write'] = update_option( 'wpbx_probe_write', 'x' ) && delete_option( 'wpbx_probe_write' );
$seen['limits'] = array( ini_get( 'memory_limit' ), ini_get( 'open_basedir' ), ini_get( 'disable_functions' ) === '' ? 'none' : 'set' );
echo json_encode( $seen, JSON_UNESCAPED_SLASHES );
"""

# Each attacker: what it tries to leave for the next candidate. All are scored like any candidate; the
# timeouts are short where the attacker hangs on purpose.
ATTACKERS: dict[str, tuple[str, float]] = {
    "files-everywhere": (
        r"""
foreach ( array( '/tmp/wpbx-left', '/tmp/.wpbx-hidden', '/run/wpbench/wp-content/wpbx-left', '/run/wpbench/candidate/wpbx-left',
	'/run/wpbench/wp-content/uploads/wpbx-left.jpg', '/run/wpbench/wp-content/database/wpbx-left', '/run/wpbench/wp-content/themes/wpbx-left.php',
	'/run/wpbench/wp-content/plugins/wpbx-left.php', '/tmp/sess_wpbxsession' ) as $f ) {
	@mkdir( dirname( $f ), 0777, true );
	@file_put_contents( $f, 'left by the previous candidate' );
}
@mkdir( '/tmp/wpbx/deep/deeper', 0777, true );
file_put_contents( '/tmp/wpbx/deep/deeper/f', 'x' );
chmod( '/tmp/wpbx/deep/deeper', 0 );
chmod( '/tmp/wpbx/deep', 0 );
@file_put_contents( '/run/wpbench/opcache/wpbx', 'x' );
@file_put_contents( '/run/wpbench/wpbx', 'x' );
@file_put_contents( '/dev/shm/wpbx', 'x' );
""",
        5,
    ),
    "modes": (
        r"""
chmod( '/tmp', 0 );
@chmod( '/run/wpbench/wp-content', 0500 );
@chmod( '/run/wpbench/candidate', 0 );
@chmod( '/run/wpbench/wp-content/database/.ht.sqlite', 0400 );
""",
        5,
    ),
    "wordpress-state": (
        r"""
update_option( 'wpbx_planted', 'yes' );
set_transient( 'wpbx_planted', 'yes', 3600 );
update_option( 'active_plugins', array( 'wpbx/wpbx.php' ) );
update_option( 'blogname', 'planted' );
wp_insert_post( array( 'post_title' => 'planted', 'post_status' => 'publish' ) );
wp_insert_user( array( 'user_login' => 'planted', 'user_pass' => 'x', 'role' => 'administrator' ) );
$GLOBALS['wpdb']->query( 'DROP TABLE ' . $GLOBALS['wpdb']->comments );
@mkdir( WP_CONTENT_DIR . '/mu-plugins', 0777, true );
file_put_contents( WP_CONTENT_DIR . '/mu-plugins/wpbx.php', "<?php \$GLOBALS['wpbx_planted'] = 1; function wpbx_from_mu() {} define( 'WPBX_MU', 1 );" );
file_put_contents( WP_CONTENT_DIR . '/object-cache.php', "<?php \$GLOBALS['wpbx_planted'] = 1;" );
file_put_contents( WP_CONTENT_DIR . '/advanced-cache.php', "<?php \$GLOBALS['wpbx_planted'] = 1;" );
@file_put_contents( WP_CONTENT_DIR . '/db.php', "<?php \$GLOBALS['wpbx_planted'] = 1;" );
""",
        10,
    ),
    "database-locked": (
        r"""
$GLOBALS['wpdb']->query( 'BEGIN EXCLUSIVE' );
update_option( 'wpbx_planted', 'locked' );
$pdo = new PDO( 'sqlite:/tmp/wpbx.db' );
$pdo->exec( 'CREATE TABLE t ( a ); BEGIN EXCLUSIVE; INSERT INTO t VALUES ( 1 )' );
sleep( 30 );
""",
        2,
    ),
    "opcache": (
        r"""
file_put_contents( '/tmp/wpbx-cached.php', '<?php return "stale from the previous candidate";' );
include '/tmp/wpbx-cached.php';
file_put_contents( WP_CONTENT_DIR . '/wpbx-cached.php', '<?php function wpbx_cached() {}' );
include WP_CONTENT_DIR . '/wpbx-cached.php';
if ( function_exists( 'opcache_compile_file' ) ) { @opcache_compile_file( '/tmp/wpbx-cached.php' ); }
@file_put_contents( '/run/wpbench/opcache/' . ( glob( '/run/wpbench/opcache/*' )[0] ?? 'x' ) . '/planted', 'x' );
""",
        5,
    ),
    "processes-and-signals": (
        r"""
foreach ( array( 'pcntl_fork', 'proc_open', 'popen', 'exec', 'shell_exec', 'system', 'passthru', 'posix_setsid', 'posix_kill', 'pcntl_signal', 'pcntl_alarm', 'putenv' ) as $f ) {
	try { @$f( 'sleep 600 &', array(), $pipes ); } catch ( \Throwable $e ) {}
}
@error_log( 'x', 1, 'root@localhost', '' );
try { posix_kill( 1, SIGTERM ); } catch ( \Throwable $e ) {}
register_shutdown_function( static function () { sleep( 30 ); } );
ignore_user_abort( true );
set_time_limit( 0 );
$_ENV['WPBX'] = 'planted';
$_SERVER['WPBX'] = 'planted';
sleep( 30 );
""",
        2,
    ),
    "sockets-and-locks": (
        r"""
$servers = array();
foreach ( array( "unix://\0wpbx-abstract", 'unix:///tmp/wpbx.sock', 'tcp://127.0.0.1:8765' ) as $address ) {
	$servers[] = @stream_socket_server( $address, $errno, $errstr );
}
$servers[] = @stream_socket_server( 'udp://127.0.0.1:8766', $errno, $errstr, STREAM_SERVER_BIND );
$lock = fopen( '/tmp/wpbx.lock', 'c' );
flock( $lock, LOCK_EX );
sleep( 30 );
""",
        2,
    ),
    "supervisor-memory": (
        r"""
foreach ( array( '/proc/1/mem', '/proc/1/fd/1', '/proc/1/environ', '/proc/self/mem', '/proc/1/maps' ) as $f ) {
	$h = @fopen( $f, 'r+' );
	if ( $h ) { @fseek( $h, 4096 ); @fwrite( $h, str_repeat( "\0", 64 ) ); }
	try { $s = new SplFileObject( $f, 'r+' ); } catch ( \Throwable $e ) {}
	try { $GLOBALS['@pdo']->exec( "ATTACH DATABASE '$f' AS x" ); } catch ( \Throwable $e ) {}
}
@file_put_contents( 'php://fd/1', "wpbench-end 0 ready\n" );
@file_put_contents( 'php://fd/3', "wpbench-end 0 ready\n" );
""",
        5,
    ),
    "tmpfs-full": (
        r"""
$h = fopen( '/tmp/wpbx-fill', 'w' );
while ( false !== @fwrite( $h, str_repeat( 'x', 1048576 ) ) && ftell( $h ) < 200 * 1048576 ) {}
$h = fopen( WP_CONTENT_DIR . '/wpbx-fill', 'w' );
while ( false !== @fwrite( $h, str_repeat( 'x', 1048576 ) ) && ftell( $h ) < 400 * 1048576 ) {}
""",
        20,
    ),
    "fork-server": (
        r"""
// What a forked runner could try on the fork server it came from, or on the runner after it.
$GLOBALS['wp_filter'] = array();
$GLOBALS['wpdb']->prefix = 'wpbx_';
wp_cache_set( 'alloptions', array( 'wpbx_planted' => 'cached' ), 'options' );
define( 'WPBX_IN_MEMORY', 1 );
$said = array( 'fork_runner' => wpbench_fork_runner(), 'fork_server' => wpbench_fork_server() );
foreach ( range( 3, 64 ) as $fd ) {
	$h = @fopen( "php://fd/$fd", 'r' );
	if ( $h ) {
		$said['fds'][ $fd ] = decoct( fstat( $h )['mode'] & 0170000 ); // the file type: a socket would be 140000
		@fwrite( $h, 'f' );
		fclose( $h );
	}
}
try { posix_kill( posix_getppid(), SIGKILL ); } catch ( \Throwable $e ) { $said['kill'] = get_class( $e ); }
fwrite( STDOUT, json_encode( $said ) );
\WPBench\Runner\serve_forks();
""",
        5,
    ),
    "memory-and-crash": (
        r"""
ini_set( 'memory_limit', '-1' );
$a = array();
while ( true ) { $a[] = str_repeat( 'x', 1048576 ); }
""",
        10,
    ),
}


def probe_task(name: str) -> dict[str, Any]:
    return task(PROBE, PROBE_CHECK, test_id=f"probe-after-{name}", timeout_seconds=30)


def attacker_task(name: str) -> dict[str, Any]:
    code, timeout = ATTACKERS[name]
    return task(code, PROBE_CHECK, test_id=f"attacker-{name}", timeout_seconds=timeout)


def seen(g: Graded) -> dict[str, Any]:
    assert g.status == "passed", g.explain()
    doc: dict[str, Any] = json.loads(g.verdict.stdout)
    return doc


@pytest.fixture(scope="module")
def battery(grader: Grader) -> dict[str, Graded]:
    """One container (concurrency 1): probe, then each attacker followed by a probe, in that order."""
    tasks: dict[str, dict[str, Any]] = {"probe-first": probe_task("nothing")}
    for name in ATTACKERS:
        tasks[f"attacker:{name}"] = attacker_task(name)
        tasks[f"probe:{name}"] = probe_task(name)
    graded = grader.grade_in_sequence(tasks, concurrency=1)
    # every probe ran in the container its attacker had just used (the supervisor reset it and said `ready`)
    assert grader.containers_last_sequence == 1
    return graded


@pytest.fixture(scope="module")
def fresh(grader: Grader) -> dict[str, Any]:
    """What the probe sees in a container of its own."""
    return seen(grader.grade(probe_task("nothing")))


def test_the_probe_sees_a_fresh_container_in_fast_mode(battery: dict[str, Graded], fresh: dict[str, Any]) -> None:
    assert seen(battery["probe-first"]) == fresh
    # the probe does see what it would have to see: its own files and pids are left out, nothing else
    assert fresh["other-processes"] == [] and fresh["flock"] is True and fresh["db-write"] is True
    assert fresh["sockets"]["tcp://127.0.0.1:8765"] == "refused"


@pytest.mark.parametrize("name", ATTACKERS)
def test_nothing_reaches_the_next_candidate(battery: dict[str, Graded], fresh: dict[str, Any], name: str) -> None:
    after = seen(battery[f"probe:{name}"])
    differs = {
        key: (after.get(key), fresh.get(key)) for key in fresh.keys() | after.keys() if after.get(key) != fresh.get(key)
    }
    assert differs == {}, f"{name} reached the next candidate: {json.dumps(differs)[:4000]}"


@pytest.mark.parametrize("name", ATTACKERS)
def test_each_attacker_is_graded_as_in_a_container_of_its_own(
    grader: Grader, battery: dict[str, Graded], name: str
) -> None:
    alone = grader.grade(attacker_task(name))
    graded = battery[f"attacker:{name}"]
    assert (graded.status, graded.exit_code, graded.verdict.reason) == (
        alone.status,
        alone.exit_code,
        alone.verdict.reason,
    )


def test_a_forked_runner_cannot_fork_nor_reach_its_fork_server(battery: dict[str, Graded], grader: Grader) -> None:
    """The functions of the fork server answer false in a forked runner as in one started afresh; the only
    runner has the same descriptors in both modes, none of them a socket, and no signal leaves."""
    said = json.loads(battery["attacker:fork-server"].verdict.stdout)
    alone = json.loads(grader.grade(attacker_task("fork-server")).verdict.stdout)
    assert said == alone, (said, alone)
    assert said["fork_runner"] is False and said["fork_server"] is False and said["kill"] == "Error"
    assert "140000" not in said["fds"].values(), said  # no socket: the control socket is not there
    assert battery["probe:fork-server"].status == "passed"


def processes(listing: str) -> dict[int, tuple[int, int, str]]:
    """pid -> (parent, seccomp filters, no_new_privs) of every process in the listing but `docker exec`'s."""
    rows = {}
    for line in listing.splitlines():
        fields = dict(zip(line.split()[0::2], line.split()[1::2], strict=False))
        if "Pid:" in fields and (fields["Pid:"] == "1" or fields.get("PPid:") != "0"):
            rows[int(fields["Pid:"])] = (int(fields["PPid:"]), int(fields["Seccomp_filters:"]), fields["NoNewPrivs:"])
    return rows


def test_forked_runners_get_the_seccomp_filter_again(grader: Grader) -> None:
    """Seen from outside (`docker exec` as root while a task runs): the fork server has the runner's one seccomp
    filter and the runner forked from it two (the second with its own pid: it can signal no process at all),
    neither may gain privileges, and the runner's parent is the server, whose parent is the supervisor."""
    name = f"wpbench-test-forked-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen([*grader.argv("--name", name), "--sequence"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdin is not None
    show = "for p in /proc/[0-9]*/status; do grep -E '^(Pid|PPid|Seccomp_filters|NoNewPrivs):' $p | tr '\\n' ' '; echo; done"
    try:
        proc.stdin.write(json.dumps(task("sleep( 3 );", PROBE_CHECK, timeout_seconds=10)) + "\n")
        proc.stdin.flush()
        wait_for_runner(name)
        for _ in range(50):  # the server shows first; its runner once forked
            listing = subprocess.run(["docker", "exec", "-u", "0", name, "/bin/sh", "-c", show], capture_output=True,
                                     text=True, check=True, timeout=30).stdout  # fmt: skip
            rows = processes(listing)
            servers = [pid for pid, (ppid, _, _) in rows.items() if ppid == 1 and pid != 1]
            runners = [pid for pid, (ppid, _, _) in rows.items() if ppid in servers]
            if runners:
                break
            time.sleep(0.1)
        proc.communicate(timeout=60)
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
    assert len(servers) == 1 and len(runners) == 1, listing
    engine = rows[1][1]  # the container runtime's own filter, which every process has
    assert rows[servers[0]][1:] == (engine + 1, "1") and rows[runners[0]][1:] == (engine + 2, "1"), listing


def test_a_fork_server_killed_from_outside_costs_nothing(grader: Grader) -> None:
    """The fork server dies (here SIGKILL from outside, as the kernel's OOM killer might) while its runner grades:
    that candidate's verdict is unchanged (the runner, re-parented to PID 1, is reaped there), and the next one
    is graded by a runner started afresh."""
    name = f"wpbench-test-server-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen([*grader.argv("--name", name), "--sequence"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdin is not None
    show = "for p in /proc/[0-9]*/status; do grep -E '^(Pid|PPid|Seccomp_filters|NoNewPrivs):' $p | tr '\\n' ' '; echo; done"
    first = task("sleep( 2 );" + PROBE, PROBE_CHECK, test_id="first", timeout_seconds=10)
    try:
        proc.stdin.write(json.dumps(first) + "\n")
        proc.stdin.flush()
        wait_for_runner(name)
        servers: list[int] = []
        for _ in range(50):
            listing = subprocess.run(["docker", "exec", "-u", "0", name, "/bin/sh", "-c", show], capture_output=True,
                                     text=True, check=True, timeout=30).stdout  # fmt: skip
            rows = processes(listing)
            servers = [pid for pid, (ppid, _, _) in rows.items() if ppid == 1 and pid != 1]
            if any(ppid in servers for ppid, _, _ in rows.values()):
                break
            time.sleep(0.1)
        subprocess.run(["docker", "exec", name, "kill", "-9", str(servers[0])], check=True, timeout=30)  # its own uid
        second = task(PROBE, PROBE_CHECK, test_id="second", timeout_seconds=10)
        out, err = proc.communicate(json.dumps(second) + "\n", timeout=60)
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
    lines = out.splitlines()
    assert lines[1::2] == ["wpbench-end 0 ready", "wpbench-end 0 ready"], out + err
    assert [json.loads(line)["status"] for line in lines[0::2]] == ["passed", "passed"], out + err
    assert "the fork server is not used again: it died" in err, err


@pytest.mark.parametrize("switch", ["on", "off"])
def test_every_runner_of_a_sequence_comes_from_one_fork_server_unless_it_is_off(grader: Grader, switch: str) -> None:
    """Three tasks in one container: each runner's parent is the same fork server (not PID 1); with
    WPBENCH_FORK_SERVER=0 in the container's environment each is started afresh by PID 1."""
    env = ("-e", "WPBENCH_FORK_SERVER=0") if switch == "off" else ()
    doc = task("echo posix_getppid(); function wpbx_probe_ok() { return 'probe-ok'; }", PROBE_CHECK, timeout_seconds=10)
    proc = subprocess.run([*grader.argv(*env), "--sequence"], input="".join(json.dumps(doc) + "\n" for _ in range(3)),
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    verdicts = [json.loads(line) for line in proc.stdout.splitlines()[0::2]]
    assert [v["status"] for v in verdicts] == ["passed"] * 3, proc.stdout + proc.stderr
    parents = {int(v["stdout"]) for v in verdicts}
    if switch == "off":
        assert parents == {1}, parents
    else:
        assert len(parents) == 1 and 1 not in parents, parents


def test_a_forged_end_line_changes_nothing(battery: dict[str, Graded]) -> None:
    """The end line comes from the supervisor's stdout only: the candidate's copy of one stays its output."""
    graded = battery["attacker:supervisor-memory"]
    assert graded.exit_code == 0 and "wpbench-end 0 ready" in graded.verdict.stdout
    assert battery["probe:supervisor-memory"].status == "passed"


# Attackers whose trace the probe can see when both run in the same process: proof that the probe looks
# at the channels these attackers use (the others hang or crash, or close what the probe needs).
VISIBLE_IN_ONE_RUN = {
    "files-everywhere": {"tmp", "wp-content", "candidate", "database-dir"},
    "wordpress-state": {"db", "mu-plugins", "planted", "dropins"},
    # (the include is compiled afresh even in the same process: with the file cache only and its directory
    # read-only, nothing compiled at run time is kept anywhere)
    "opcache": {"functions", "tmp", "wp-content"},
    "tmpfs-full": {"free-tmp-mib", "free-run-mib", "tmp", "wp-content"},
}


@pytest.mark.parametrize("name", VISIBLE_IN_ONE_RUN)
def test_the_probe_sees_each_trace_within_one_run(grader: Grader, fresh: dict[str, Any], name: str) -> None:
    code, _ = ATTACKERS[name]
    g = grader.grade(task(code + PROBE, PROBE_CHECK, test_id=f"attack-and-probe-{name}", timeout_seconds=30))
    after = seen(g)
    differs = {key for key in fresh.keys() | after.keys() if after.get(key) != fresh.get(key)}
    assert VISIBLE_IN_ONE_RUN[name] <= differs, differs


LEFTOVERS = {
    "process": "sleep 600 &",
    "file": "mkdir /tmp/roots && touch /tmp/roots/file",
    "ipc": "ipcmk -M 4096 >/dev/null",
}


@pytest.mark.parametrize("leftover", LEFTOVERS.values(), ids=LEFTOVERS.keys())
def test_the_reset_ends_the_sequence_when_something_is_left(grader: Grader, leftover: str) -> None:
    """What the supervisor cannot remove (here left by root from outside, through `docker exec`, while a task
    runs) ends the sequence: the end line says `closed` and the container exits, so no next task meets it."""
    name = f"wpbench-test-reset-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen([*grader.argv("--name", name), "--sequence"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdin is not None
    try:
        proc.stdin.write(json.dumps(task("sleep( 3 );", PROBE_CHECK, timeout_seconds=10)) + "\n")
        proc.stdin.flush()
        wait_for_runner(name)
        subprocess.run(["docker", "exec", "-u", "0", name, "/bin/sh", "-c", leftover], check=True, timeout=30)
        out, err = proc.communicate(timeout=60)  # closes stdin: a sequence still `ready` would then end, unreset
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
    lines = out.splitlines()
    assert len(lines) == 2 and lines[1] == "wpbench-end 0 closed", out + err
    assert "sequence closed after 1 tasks" in err, err


def test_a_sequence_read_from_files_answers_each_in_order(grader: Grader, tmp_path: Any) -> None:
    """A Kubernetes pod has no stdin: `wpbench-grade --sequence FILE...` (what a fast-mode grader pod runs) grades
    the files in the order given, each answered by its verdict and an end line; an unreadable one is that task's
    harness_error and the sequence goes on."""
    tasks = [
        task("add_filter( 'x', '__return_true' );", {"type": "hook_registered", "hook": "x"}, test_id="first"),
        task("return;", {"type": "hook_registered", "hook": "x"}, test_id="second"),
    ]
    tmp_path.chmod(0o755)
    for n, doc in enumerate(tasks):
        (tmp_path / f"{n}.json").write_text(json.dumps(doc))
        (tmp_path / f"{n}.json").chmod(0o644)
    files = ["/tasks/0.json", "/tasks/missing.json", "/tasks/1.json"]
    proc = subprocess.run([*grader.argv("-v", f"{tmp_path}:/tasks:ro"), "--sequence", *files],
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    verdicts = [json.loads(line) for line in lines[0::2]]
    assert lines[1::2] == ["wpbench-end 0 ready", "wpbench-end 2 ready", "wpbench-end 0 ready"], proc.stdout
    assert [(v["test_id"], v["status"]) for v in verdicts] == [
        ("first", "passed"),
        (None, "harness_error"),
        ("second", "failed"),
    ], proc.stdout
    assert "cannot read task file /tasks/missing.json" in verdicts[1]["reason"]
    assert "sequence ended after 3 tasks" in proc.stderr
