<?php
/**
 * wp-config.php of the WP-Bench grader image (installed as /opt/wordpress/wp-config.php).
 *
 * WordPress core under /opt/wordpress is read-only at run time; everything a test writes
 * (wp-content, the SQLite database, plugins, uploads) lives in the /run/wpbench tmpfs, laid
 * out fresh for every container from /opt/wpbench/baseline.
 */

// Database: the SQLite Database Integration drop-in (wp-content/db.php) reads these.
define( 'DB_NAME', 'wordpress' );
define( 'DB_USER', 'wordpress' );
define( 'DB_PASSWORD', '' );
define( 'DB_HOST', 'localhost' );
define( 'DB_CHARSET', 'utf8mb4' );
define( 'DB_COLLATE', '' );
define( 'DB_DIR', '/run/wpbench/wp-content/database/' );
define( 'DB_FILE', '.ht.sqlite' );

define( 'WP_CONTENT_DIR', '/run/wpbench/wp-content' );
define( 'WP_CONTENT_URL', 'http://wpbench.test/wp-content' );
define( 'WP_HOME', 'http://wpbench.test' );
define( 'WP_SITEURL', 'http://wpbench.test' );

// Nothing may reach for the network: no updates, no cron spawning, no external HTTP.
define( 'AUTOMATIC_UPDATER_DISABLED', true );
define( 'WP_AUTO_UPDATE_CORE', false );
define( 'DISABLE_WP_CRON', true );
define( 'WP_HTTP_BLOCK_EXTERNAL', true );
define( 'FS_METHOD', 'direct' );

// Errors: reported with E_ALL; the runner's handler records warnings and writes them to
// stderr. WP_DEBUG_DISPLAY null leaves display_errors as the runner set it (stderr), never stdout.
define( 'WP_DEBUG', true );
define( 'WP_DEBUG_DISPLAY', null );
define( 'WP_DEBUG_LOG', false );
define( 'WP_DISABLE_FATAL_ERROR_HANDLER', true );
define( 'WP_MEMORY_LIMIT', '256M' );
define( 'WP_MAX_MEMORY_LIMIT', '256M' );

// Fixed salts: the image is a disposable grader, never a public site.
define( 'AUTH_KEY', 'wpbench-auth-key-5b0d7e0c3f2a4e1b9c6d8a7f' );
define( 'SECURE_AUTH_KEY', 'wpbench-secure-auth-key-1e2d3c4b5a69788f' );
define( 'LOGGED_IN_KEY', 'wpbench-logged-in-key-9f8e7d6c5b4a3928170' );
define( 'NONCE_KEY', 'wpbench-nonce-key-0a1b2c3d4e5f60718293a4b5' );
define( 'AUTH_SALT', 'wpbench-auth-salt-c6d7e8f90a1b2c3d4e5f6071' );
define( 'SECURE_AUTH_SALT', 'wpbench-secure-auth-salt-8293a4b5c6d7e8f9' );
define( 'LOGGED_IN_SALT', 'wpbench-logged-in-salt-0a1b2c3d4e5f607182' );
define( 'NONCE_SALT', 'wpbench-nonce-salt-93a4b5c6d7e8f90a1b2c3d4e' );

$table_prefix            = 'wp_';
$GLOBALS['table_prefix'] = $table_prefix; // WordPress may be booted from a function scope.

require_once '/opt/wpbench/wp/offline.php';
require_once '/opt/wpbench/wp/hashing.php';

if ( ! defined( 'ABSPATH' ) ) {
	define( 'ABSPATH', __DIR__ . '/' );
}
require_once ABSPATH . 'wp-settings.php';
