<?php
/**
 * Build-time steps of the grader image (run as root by the Dockerfile, never at run time).
 *
 *   php -n build.php baseline        install the baseline site into /opt/wpbench/baseline
 *   php -n build.php warm            fill the opcache file cache /opt/wpbench/opcache for WordPress
 *   php -n build.php warm-verifier   add the verifier's runner files to that cache
 *
 * The child modes (install-child, warm-child) run inside a php process started with the
 * runner's own settings (php-flags.php), so the cache is valid for the runner.
 */

namespace WPBench\Build;

const RUN_DIR      = '/run/wpbench';
const CONTENT_DIR  = '/run/wpbench/wp-content';
const BASELINE_DIR = '/opt/wpbench/baseline';
const OPCACHE_DIR  = '/opt/wpbench/opcache';
const SQLITE_DIR   = '/opt/wpbench/sqlite-database-integration';
const WP_DIR       = '/opt/wordpress';

function say( string $msg ): void {
	fwrite( STDERR, "build.php: $msg\n" );
}

function fail( string $msg ): never {
	say( "ERROR: $msg" );
	exit( 1 );
}

function sh( string $cmd ): void {
	passthru( $cmd, $rc );
	if ( 0 !== $rc ) {
		fail( "command failed ($rc): $cmd" );
	}
}

/** php argv for a child running with the runner's settings. */
function php_argv( string $file_cache, bool $opcache ): array {
	$flags = require __DIR__ . '/php-flags.php';
	$argv  = array( PHP_BINARY, '-n' );
	if ( $opcache ) {
		foreach ( $flags['zend_extensions'] as $ext ) {
			array_push( $argv, '-d', "zend_extension=$ext" );
		}
	}
	foreach ( $flags['extensions'] as $ext ) {
		array_push( $argv, '-d', "extension=$ext" );
	}
	foreach ( $flags['ini'] as $key => $value ) {
		if ( 'opcache.file_cache' === $key ) {
			$value = $file_cache;
		}
		array_push( $argv, '-d', "$key=$value" );
	}
	return $argv;
}

function run_child( array $argv ): void {
	$cmd = implode( ' ', array_map( 'escapeshellarg', $argv ) );
	sh( $cmd );
}

/** A fresh wp-content in the tmpfs location: db.php drop-in, empty plugins, theme symlinks. */
function lay_out_fresh_content(): void {
	sh( 'rm -rf ' . escapeshellarg( CONTENT_DIR ) );
	foreach ( array( '', '/database', '/plugins', '/themes', '/uploads' ) as $dir ) {
		mkdir( CONTENT_DIR . $dir, 0755, true );
	}
	$dropin = file_get_contents( SQLITE_DIR . '/db.copy' );
	$dropin = str_replace(
		array( '{SQLITE_IMPLEMENTATION_FOLDER_PATH}', '{SQLITE_PLUGIN}' ),
		array( SQLITE_DIR, 'sqlite-database-integration/load.php' ),
		$dropin
	);
	file_put_contents( CONTENT_DIR . '/db.php', $dropin );
	file_put_contents( CONTENT_DIR . '/index.php', "<?php\n// Silence is golden.\n" );
	file_put_contents( CONTENT_DIR . '/plugins/index.php', "<?php\n// Silence is golden.\n" );
	file_put_contents( CONTENT_DIR . '/themes/index.php', "<?php\n// Silence is golden.\n" );
	// Themes stay in the read-only core tree; wp-content/themes holds one symlink per theme so a
	// test may still add a theme of its own.
	foreach ( glob( WP_DIR . '/wp-content/themes/*', GLOB_ONLYDIR ) as $theme ) {
		symlink( $theme, CONTENT_DIR . '/themes/' . basename( $theme ) );
	}
}

function step_baseline(): void {
	lay_out_fresh_content();
	run_child( array_merge( php_argv( '', false ), array( __FILE__, 'install-child' ) ) );
	// A freshly installed site writes ~40 options on its first boot (widgets, cron events,
	// block CSS and theme pattern caches). Every test would pay for them, so the baseline is
	// the site after that first boot, with transient expiries moved out of the clock's reach.
	run_child( array_merge( php_argv( '', false ), array( __FILE__, 'settle-child' ) ) );
	run_child( array_merge( php_argv( '', false ), array( __FILE__, 'settle-child', 'check' ) ) );
	foreach ( glob( CONTENT_DIR . '/database/*' ) as $file ) {
		if ( str_ends_with( $file, '-wal' ) && filesize( $file ) > 0 ) {
			fail( "uncheckpointed WAL left behind: $file" );
		}
		if ( str_ends_with( $file, '-wal' ) || str_ends_with( $file, '-shm' ) ) {
			unlink( $file );
		}
	}
	$pdo   = new \PDO( 'sqlite:' . CONTENT_DIR . '/database/.ht.sqlite' );
	$check = $pdo->query( 'PRAGMA integrity_check' )->fetchColumn();
	if ( 'ok' !== $check ) {
		fail( "baseline database integrity_check: $check" );
	}
	$pdo = null;
	sh( 'rm -rf ' . BASELINE_DIR . ' && cp -a ' . CONTENT_DIR . ' ' . BASELINE_DIR . ' && chmod -R a+rX,go-w ' . BASELINE_DIR );
	say( 'baseline installed: ' . filesize( BASELINE_DIR . '/database/.ht.sqlite' ) . ' bytes of SQLite' );
}

function step_install_child(): void {
	define( 'WP_INSTALLING', true );
	// The install must not try HTTP (wp_install probes pretty permalinks with a loopback request).
	$GLOBALS['wp_filter']['pre_http_request'][0][] = array(
		'function'      => static fn() => new \WP_Error( 'wpbench_offline', 'The grader image build is offline.' ),
		'accepted_args' => 0,
	);
	require '/opt/wpbench/wp/boot.php';
	require_once ABSPATH . 'wp-admin/includes/upgrade.php';
	$result = wp_install( 'WP-Bench', 'admin', 'admin@wpbench.test', true, '', 'wpbench-admin', 'en_US' );
	if ( empty( $result['user_id'] ) ) {
		fail( 'wp_install did not create the admin user' );
	}
	// Nothing may reach for the network later: drop scheduled update checks and their caches.
	foreach ( array( 'wp_version_check', 'wp_update_plugins', 'wp_update_themes', 'wp_maybe_auto_update' ) as $hook ) {
		wp_clear_scheduled_hook( $hook );
	}
	foreach ( array( 'update_core', 'update_plugins', 'update_themes' ) as $transient ) {
		delete_site_transient( $transient );
	}
	if ( ! ( $GLOBALS['wpdb'] instanceof \WP_SQLite_DB ) ) {
		fail( 'WordPress did not load the SQLite drop-in' );
	}
	if ( ! is_blog_installed() ) {
		fail( 'is_blog_installed() is false after wp_install' );
	}
	say( 'wp_install done: WordPress ' . $GLOBALS['wp_version'] . ', theme ' . get_stylesheet() . ', SQLite driver ' . SQLITE_DRIVER_VERSION );
}

function step_settle_child( bool $check ): void {
	define( 'SAVEQUERIES', true );
	require '/opt/wpbench/wp/boot.php';
	global $wpdb;
	if ( ! $check ) {
		$timeouts = $wpdb->get_col( "SELECT option_name FROM {$wpdb->options} WHERE option_name LIKE '%transient_timeout_%'" );
		foreach ( $timeouts as $name ) {
			$wpdb->update( $wpdb->options, array( 'option_value' => '4102444800' ), array( 'option_name' => $name ) ); // 2100-01-01
		}
		say( 'settled the baseline: ' . count( $wpdb->queries ) . ' queries on the first boot, ' . count( $timeouts ) . ' transient expiries pinned' );
		return;
	}
	$writes = array_filter( $wpdb->queries, static fn( array $q ): bool => (bool) preg_match( '/^\s*(INSERT|UPDATE|DELETE|REPLACE)\b/i', $q[0] ) );
	say( 'a settled boot runs ' . count( $wpdb->queries ) . ' queries, ' . count( $writes ) . ' of them writes' );
	foreach ( $writes as $q ) {
		say( 'WARNING: a boot of the baseline still writes: ' . substr( $q[0], 0, 200 ) );
	}
}

function step_warm(): void {
	sh( 'rm -rf ' . CONTENT_DIR . ' ' . OPCACHE_DIR . ' && cp -a ' . BASELINE_DIR . ' ' . CONTENT_DIR );
	mkdir( OPCACHE_DIR, 0755, true );
	$t0 = microtime( true );
	run_child( array_merge( php_argv( OPCACHE_DIR, true ), array( __FILE__, 'warm-child' ) ) );
	if ( getenv( 'WPBENCH_WARM_ALL' ) !== '0' ) {
		passthru( implode( ' ', array_map( 'escapeshellarg', array_merge( php_argv( OPCACHE_DIR, true ), array( '-d', 'display_errors=0', __FILE__, 'compile-child' ) ) ) ) );
	}
	sh( 'rm -rf ' . RUN_DIR . '/*' );
	sh( 'chmod -R a+rX,go-w ' . OPCACHE_DIR );
	$ids = glob( OPCACHE_DIR . '/*', GLOB_ONLYDIR );
	if ( 1 !== count( $ids ) ) {
		fail( 'expected exactly one opcache system-id directory, found ' . count( $ids ) );
	}
	$info = array(
		'wordpress_version'          => wp_version(),
		'php_version'                => PHP_VERSION,
		'sqlite_integration_version' => sqlite_version(),
		'database'                   => 'sqlite',
		'opcache_system_id'          => basename( $ids[0] ),
	);
	file_put_contents( '/opt/wpbench/runtime.json', json_encode( $info, JSON_PRETTY_PRINT ) . "\n" );
	say( sprintf( 'opcache warmed in %.1f s: %s', microtime( true ) - $t0, trim( shell_exec( 'du -sh ' . OPCACHE_DIR ) ) ) );
}

function wp_version(): string {
	preg_match( "/^\\\$wp_version = '([^']+)'/m", file_get_contents( WP_DIR . '/wp-includes/version.php' ), $m ) || fail( 'no $wp_version' );
	return $m[1];
}

function sqlite_version(): string {
	preg_match( '/^ \* Version: (\S+)/m', file_get_contents( SQLITE_DIR . '/load.php' ), $m ) || fail( 'no SQLite integration version' );
	return $m[1];
}

/** Boots WordPress like the runner, walks the common paths, then compiles the rest. */
function step_warm_child(): void {
	if ( ! function_exists( 'opcache_compile_file' ) || ! ini_get( 'opcache.file_cache_only' ) ) {
		fail( 'opcache file cache is not active in the warm-up child' );
	}
	require '/opt/wpbench/wp/boot.php';
	// Paths tests commonly take: REST, shortcodes, queries, users, options, meta, mail.
	wp_set_current_user( 1 );
	rest_do_request( new \WP_REST_Request( 'GET', '/wp/v2/posts' ) );
	rest_do_request( new \WP_REST_Request( 'GET', '/wp/v2/users/me' ) );
	$post_id = wp_insert_post( array( 'post_title' => 'warm', 'post_status' => 'publish', 'post_content' => '<!-- wp:paragraph --><p>x</p><!-- /wp:paragraph -->' ) );
	update_post_meta( $post_id, 'warm', 1 );
	( new \WP_Query( array( 'post_type' => 'post' ) ) )->get_posts();
	do_shortcode( '[gallery]' );
	do_blocks( get_post( $post_id )->post_content );
	apply_filters( 'the_content', 'warm' );
	wp_mail( 'warm@wpbench.test', 'warm', 'warm' );
	wp_set_current_user( 0 );
	say( 'warm-up booted WordPress and included ' . count( get_included_files() ) . ' files' );
}

/**
 * Compiles the rest of WordPress (what a test might include) into the cache, in a process that
 * has not booted WordPress. A few files redeclare each other's symbols (wp-admin/includes/noop.php
 * vs l10n.php); those compile errors are expected, so this child's exit status is not checked.
 */
function step_compile_child(): void {
	$cache = OPCACHE_DIR . '/' . basename( glob( OPCACHE_DIR . '/*', GLOB_ONLYDIR )[0] );
	$roots = array( WP_DIR . '/wp-includes', WP_DIR . '/wp-admin/includes', SQLITE_DIR, WP_DIR . '/wp-content/themes' );
	$count = 0;
	foreach ( $roots as $root ) {
		$it = new \RecursiveIteratorIterator( new \RecursiveDirectoryIterator( $root, \FilesystemIterator::SKIP_DOTS ) );
		foreach ( $it as $file ) {
			$path = $file->getPathname();
			if ( ! $file->isFile() || ! str_ends_with( $path, '.php' ) || file_exists( $cache . $path . '.bin' ) ) {
				continue;
			}
			if ( @opcache_compile_file( $path ) ) {
				++$count;
			}
		}
	}
	say( "compiled $count more files" );
}

function step_warm_verifier(): void {
	run_child( array_merge( php_argv( OPCACHE_DIR, true ), array( __FILE__, 'warm-verifier-child' ) ) );
	sh( 'chmod -R a+rX,go-w ' . OPCACHE_DIR );
}

function step_warm_verifier_child(): void {
	foreach ( array_merge( glob( '/opt/wpbench/verifier/runner/*.php' ), glob( '/opt/wpbench/verifier/common/*.php' ) ) as $file ) {
		opcache_compile_file( $file ) || fail( "could not compile $file" );
	}
}

$steps = array(
	'baseline'             => __NAMESPACE__ . '\step_baseline',
	'install-child'        => __NAMESPACE__ . '\step_install_child',
	'settle-child'         => static fn() => step_settle_child( 'check' === ( $GLOBALS['argv'][2] ?? '' ) ),
	'warm'                 => __NAMESPACE__ . '\step_warm',
	'warm-child'           => __NAMESPACE__ . '\step_warm_child',
	'compile-child'        => __NAMESPACE__ . '\step_compile_child',
	'warm-verifier'        => __NAMESPACE__ . '\step_warm_verifier',
	'warm-verifier-child'  => __NAMESPACE__ . '\step_warm_verifier_child',
);
$step = $argv[1] ?? '';
if ( ! isset( $steps[ $step ] ) ) {
	fail( 'usage: build.php ' . implode( '|', array_keys( $steps ) ) );
}
$steps[ $step ]();
