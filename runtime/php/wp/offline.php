<?php
/**
 * Keeps the grader's WordPress offline. Required from wp-config.php, before wp-settings.php.
 *
 * Hooks are pre-registered through $wp_filter (WordPress turns the array into WP_Hook objects
 * when plugin.php loads), so no must-use plugin is needed and get_mu_plugins() stays empty.
 */

namespace WPBench\Offline;

/** Removes the update checks WordPress schedules and runs (they call api.wordpress.org). */
function remove_update_checks(): void {
	$hooks = array(
		array( 'init', 'wp_schedule_update_checks' ),
		array( 'admin_init', '_maybe_update_core' ),
		array( 'admin_init', '_maybe_update_plugins' ),
		array( 'admin_init', '_maybe_update_themes' ),
		array( 'wp_version_check', 'wp_version_check' ),
		array( 'wp_update_plugins', 'wp_update_plugins' ),
		array( 'wp_update_themes', 'wp_update_themes' ),
		array( 'wp_maybe_auto_update', 'wp_maybe_auto_update' ),
		array( 'load-plugins.php', 'wp_update_plugins' ),
		array( 'load-update.php', 'wp_update_plugins' ),
		array( 'load-update-core.php', 'wp_update_plugins' ),
		array( 'load-themes.php', 'wp_update_themes' ),
		array( 'load-update.php', 'wp_update_themes' ),
		array( 'load-update-core.php', 'wp_update_themes' ),
	);
	foreach ( $hooks as $hook ) {
		remove_action( $hook[0], $hook[1] );
	}
}

/**
 * Sends mail nowhere: PHP's mail() is disabled in the runner (it would start a shell), so
 * PHPMailer is pointed at a closed loopback port. wp_mail() then fails the way it does on an
 * offline host (returns false, fires wp_mail_failed) after phpmailer_init has run.
 *
 * @param object $phpmailer PHPMailer instance.
 */
function offline_mailer( $phpmailer ): void {
	$phpmailer->isSMTP();
	$phpmailer->Host        = '127.0.0.1';
	$phpmailer->Port        = 9;
	$phpmailer->SMTPAuth    = false;
	$phpmailer->SMTPAutoTLS = false;
	$phpmailer->SMTPSecure  = '';
	$phpmailer->Timeout     = 1;
}

$GLOBALS['wp_filter']['muplugins_loaded'][ -1000 ][] = array(
	'function'      => __NAMESPACE__ . '\remove_update_checks',
	'accepted_args' => 0,
);
$GLOBALS['wp_filter']['phpmailer_init'][ PHP_INT_MAX ][] = array(
	'function'      => __NAMESPACE__ . '\offline_mailer',
	'accepted_args' => 1,
);
