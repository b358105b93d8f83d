<?php
/**
 * Password hashing at bcrypt's minimum cost in the grader. Required from wp-config.php, before
 * wp-settings.php (pre-registered through $wp_filter, like offline.php).
 *
 * PHP 8.4 raised bcrypt's default cost to 12: one wp_hash_password() or wp_check_password() then
 * costs ~0.25 s of CPU, and a test that creates a handful of users spent most of its time there.
 * The sites here are disposable and their passwords are test fixtures, so the cost buys nothing.
 * Hashes stay real bcrypt hashes (`$wp$2y$04$...`) and are checked the usual way; the filter runs
 * first, so a candidate's own `wp_hash_password_options` filter still decides. The baseline's
 * admin password is hashed under the same setting at build time, so nothing needs a rehash.
 */

namespace WPBench\Hashing;

const BCRYPT_COST = 4;

/**
 * @param array<string, mixed> $options
 * @param string|int           $algorithm
 * @return array<string, mixed>
 */
function minimum_cost( $options, $algorithm = \PASSWORD_BCRYPT ) {
	if ( \PASSWORD_BCRYPT === $algorithm && \is_array( $options ) && ! isset( $options['cost'] ) ) {
		$options['cost'] = BCRYPT_COST;
	}
	return $options;
}

$GLOBALS['wp_filter']['wp_hash_password_options'][ PHP_INT_MIN ][] = array(
	'function'      => __NAMESPACE__ . '\minimum_cost',
	'accepted_args' => 2,
);
