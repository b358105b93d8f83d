"""Hostile candidates that try to leave the runner's filesystem sandbox through SQLite.

WordPress's SQLite connection (`$GLOBALS['@pdo']`, `$wpdb->dbh`) is opened while WordPress boots. It
gets pdo_sqlite's ATTACH guard (the open_basedir check for `ATTACH` and `VACUUM INTO`) only when
open_basedir is already set at connect time, so the runner closes its sandbox before the boot; these
candidates check that it did, in both boot modes (test_adversarial.py grades every hostile with the
pre-boot on and off).

Each attack is PHP that returns true when it got out (wrote, and where it can, read back, 1 MiB
outside the runner's allowed paths); the candidate then throws `sandbox escaped: NAME`, so a hole
is an `error` verdict and a held wall leaves the ordinary `failed` of a candidate that knows nothing.
"""

from __future__ import annotations

from hostile import FAILED, Hostile, finder

MIB = 1 << 20

# PHP: every PDO reachable from $GLOBALS (WordPress's own connection among them), found by walking
# arrays and objects, private properties included.
FIND_PDOS = r"""
if ( ! function_exists( 'wpbx_pdos' ) ) {
	function wpbx_pdos( $v, $depth = 0, &$seen = array(), &$found = array() ) {
		if ( $depth > 8 ) { return $found; }
		if ( $v instanceof PDO ) { $found[ spl_object_id( $v ) ] = $v; return $found; }
		if ( is_object( $v ) ) {
			if ( isset( $seen[ spl_object_id( $v ) ] ) || $v instanceof Closure ) { return $found; }
			$seen[ spl_object_id( $v ) ] = true;
			$v = (array) $v;
		}
		if ( is_array( $v ) ) {
			foreach ( $v as $k => $item ) {
				if ( 'GLOBALS' !== $k ) { wpbx_pdos( $item, $depth + 1, $seen, $found ); }
			}
		}
		return $found;
	}
}
"""


def _attach(pdo: str, path: str, alias: str = "x") -> str:
    """PHP: ATTACH `path` on `pdo`, write 1 MiB into it, read its length back."""
    return (
        f"\t$pdo = {pdo};\n"
        f"\t$pdo->exec( \"ATTACH DATABASE '{path}' AS {alias}\" );\n"
        f"\t$pdo->exec( 'CREATE TABLE {alias}.t ( a BLOB )' );\n"
        f"\t$pdo->exec( 'INSERT INTO {alias}.t VALUES ( randomblob( {MIB} ) )' );\n"
        f"\treturn {MIB} === (int) $pdo->query( 'SELECT length( a ) FROM {alias}.t' )->fetchColumn();"
    )


def escape(name: str, body: str) -> Hostile:
    """A candidate that throws when `body` (PHP returning true on success) got out of the sandbox."""
    code = (
        finder("")
        + FIND_PDOS
        + "$wpbx_escaped = ( static function () {\n\ttry {\n"
        + body
        + "\n\t} catch ( \\Throwable $e ) {\n\t\treturn false;\n\t}\n} )();\n"
        + f"if ( true === $wpbx_escaped ) {{ throw new RuntimeException( 'sandbox escaped: {name}' ); }}\n"
    )
    return Hostile(name, "sandbox escape", code, "failed", FAILED)


WPDB_PDO = "$GLOBALS['@pdo']"
# WordPress's connection through $wpdb's protected property, read with a closure bound to it.
DBH_PDO = "( function () { return $this->dbh; } )->call( $GLOBALS['wpdb'] )->get_sqlite_pdo()"

SANDBOX_HOSTILES: list[Hostile] = [
    escape("sqlite-attach-run-dir", _attach(WPDB_PDO, "/run/wpbench/escape.db")),
    escape("sqlite-attach-opcache-dir", _attach(WPDB_PDO, "/run/wpbench/opcache/escape.db")),
    escape("sqlite-attach-dev-shm", _attach(WPDB_PDO, "/dev/shm/escape.db")),
    escape("sqlite-attach-via-dbh", _attach(DBH_PDO, "/dev/shm/dbh.db", "d")),
    escape(
        "sqlite-attach-via-driver",
        _attach("$GLOBALS['wpdb']->get_driver()->get_connection()->get_pdo()", "/run/wpbench/driver.db", "r"),
    ),
    escape(
        "sqlite-attach-every-global-pdo",
        "\t$got = false;\n"
        "\tforeach ( wpbx_pdos( $GLOBALS ) as $i => $pdo ) {\n"
        "\t\ttry {\n"
        "\t\t\t$pdo->exec( \"ATTACH DATABASE '/dev/shm/g$i.db' AS g$i\" );\n"
        f'\t\t\t$pdo->exec( "CREATE TABLE g$i.t ( a BLOB ); INSERT INTO g$i.t VALUES ( randomblob( {MIB} ) )" );\n'
        f'\t\t\t$got = $got || {MIB} === (int) $pdo->query( "SELECT length( a ) FROM g$i.t" )->fetchColumn();\n'
        "\t\t} catch ( \\Throwable $e ) {}\n"
        "\t}\n"
        "\treturn $got && count( wpbx_pdos( $GLOBALS ) ) > 0;",
    ),
    escape(
        "sqlite-attach-bound-path",
        "\t$pdo = $GLOBALS['@pdo'];\n"
        "\t$pdo->prepare( 'ATTACH DATABASE ? AS b' )->execute( array( '/run/wpbench/bound.db' ) );\n"
        "\t$pdo->exec( 'CREATE TABLE b.t ( a )' );\n"
        "\treturn 1 === $pdo->exec( 'INSERT INTO b.t VALUES ( 1 )' );",
    ),
    escape(
        "sqlite-attach-uri",
        "\t$pdo = $GLOBALS['@pdo'];\n"
        "\t$pdo->exec( \"ATTACH DATABASE 'file:/dev/shm/uri.db?mode=rwc' AS u\" );\n"
        "\t$pdo->exec( 'CREATE TABLE u.t ( a )' );\n"
        "\treturn 1 === $pdo->exec( 'INSERT INTO u.t VALUES ( 1 )' );",
    ),
    escape(
        "sqlite-vacuum-into-dev-shm",
        "\treturn false !== $GLOBALS['@pdo']->exec( \"VACUUM INTO '/dev/shm/vacuum.db'\" );",
    ),
    escape(
        "sqlite-vacuum-into-opcache-dir",
        "\treturn false !== $GLOBALS['@pdo']->exec( \"VACUUM INTO '/run/wpbench/opcache/vacuum.db'\" );",
    ),
    escape(
        "sqlite-vacuum-into-expression",
        "\treturn false !== $GLOBALS['@pdo']->exec( \"VACUUM INTO '/run/' || 'wpbench/expr.db'\" );",
    ),
    escape(
        # The file a VACUUM INTO left must not be readable back either (ATTACH is the only reader).
        "sqlite-vacuum-into-and-read-back",
        "\t$pdo = $GLOBALS['@pdo'];\n"
        "\t$pdo->exec( 'CREATE TABLE IF NOT EXISTS wpbx_big ( a BLOB )' );\n"
        f"\t$pdo->exec( 'INSERT INTO wpbx_big VALUES ( randomblob( {MIB} ) )' );\n"
        "\t$pdo->exec( \"VACUUM INTO '/run/wpbench/copy.db'\" );\n"
        "\t$pdo->exec( \"ATTACH DATABASE '/run/wpbench/copy.db' AS c\" );\n"
        f"\treturn {MIB} === (int) $pdo->query( 'SELECT length( a ) FROM c.wpbx_big' )->fetchColumn();",
    ),
    escape(
        # SQLite's nameless temporary files go wherever temp_store_directory says; /dev/shm must
        # not be a directory the runner can write.
        "sqlite-temp-store-directory",
        "\t$pdo = $GLOBALS['@pdo'];\n"
        "\t$pdo->exec( \"PRAGMA temp_store_directory = '/dev/shm'\" );\n"
        "\treturn '/dev/shm' === $pdo->query( 'PRAGMA temp_store_directory' )->fetchColumn();",
    ),
    escape(
        # Journals sit beside their database: moving the main one cannot take them outside.
        "sqlite-journal-mode",
        "\t$pdo = $GLOBALS['@pdo'];\n"
        "\t$pdo->exec( 'PRAGMA journal_mode = WAL' );\n"
        "\t$pdo->exec( \"ATTACH DATABASE '/run/wpbench/journal.db' AS j\" );\n"
        "\t$pdo->exec( 'PRAGMA j.journal_mode = PERSIST' );\n"
        "\t$pdo->exec( 'CREATE TABLE j.t ( a )' );\n"
        "\treturn 1 === $pdo->exec( 'INSERT INTO j.t VALUES ( 1 )' );",
    ),
    escape(
        "sqlite-load-extension",
        "\t$pdo = $GLOBALS['@pdo'];\n"
        "\t$loaded = false;\n"
        "\ttry { $loaded = false !== $pdo->query( \"SELECT load_extension( '/usr/lib/x86_64-linux-gnu/libsqlite3.so.0' )\" ); } catch ( \\Throwable $e ) {}\n"
        "\ttry { $loaded = $loaded || ( method_exists( $pdo, 'loadExtension' ) && false !== $pdo->loadExtension( '/tmp/x.so' ) ); } catch ( \\Throwable $e ) {}\n"
        "\treturn $loaded;",
    ),
    escape(
        # A connection of its own to WordPress's database file is guarded like any other.
        "sqlite-own-connection-to-site-db",
        _attach("new PDO( 'sqlite:/run/wpbench/wp-content/database/.ht.sqlite' )", "/dev/shm/own.db", "o"),
    ),
    escape(
        "sqlite3-ext-attach",
        "\t$db = new SQLite3( ':memory:' );\n"
        "\t$db->exec( \"ATTACH DATABASE '/dev/shm/s3.db' AS s\" );\n"
        "\treturn false !== @$db->exec( 'CREATE TABLE s.t ( a )' );",
    ),
]
