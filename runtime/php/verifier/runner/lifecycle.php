<?php
/**
 * \WPBench\Runtime\Lifecycle: WordPress's request lifecycle for the candidate's code, for test-authored
 * PHP (setup, assertions, teardown).
 *
 * The runner boots WordPress completely before setup and candidate run, so the callbacks a candidate
 * adds to plugins_loaded, after_setup_theme, init or wp_loaded never run by themselves, and a bare
 * do_action( 'init' ) runs all of core's init callbacks a second time (every core block registered
 * again: ~100 "already registered" notices). So the runner records every hooked callback right before
 * it includes the candidate (snapshot(), called only by the runner), and these methods run only the
 * callbacks added since then, through WordPress's own do_action(): priorities, accepted_args, the
 * `all` hook, did_action() and callbacks added or removed while the hook runs behave as in WordPress.
 *
 *     \WPBench\Runtime\Lifecycle::boot();               // plugins_loaded … wp_loaded, once per request
 *     \WPBench\Runtime\Lifecycle::fire( 'admin_init' ); // any hook; returns how many callbacks it ran
 *     \WPBench\Runtime\Lifecycle::activate();           // the plugin's activation hook (and deactivate())
 *     \WPBench\Runtime\Lifecycle::added( 'init' );      // the candidate's callbacks on a hook
 *
 * "Added" means: hooked now, and not hooked at the same priority under the same WordPress callback id
 * when the snapshot was taken. That includes callbacks hooked by the candidate and by anything that
 * ran after it (assertions), not those setup added. Before the snapshot exists (in setup) every method
 * throws a LogicException, which makes setup fail as mis-authored.
 *
 * Trust: this is a convenience for tests, not a security boundary, and the verdict does not depend on
 * it. The snapshot is kept out of the candidate's way (a private static property rather than a global,
 * taken by the runner through a bound closure, never retaken), so ordinary candidate code cannot change
 * what counts as "added". Candidate code that goes out of its way (Reflection, Closure::bind) can, but
 * all that gains it is running or skipping hook callbacks in its own process, which it can do directly
 * with do_action() or remove_all_actions() anyway. Nothing here touches the event channel or its nonce.
 */

namespace WPBench\Runtime;

final class Lifecycle {
	/** What boot() fires, in WordPress's order (wp-settings.php). */
	public const BOOT_HOOKS = array( 'plugins_loaded', 'after_setup_theme', 'init', 'wp_loaded' );

	/**
	 * Each hook's callbacks array at snapshot time: hook => priority => callback id => entry. The arrays
	 * are shared with WP_Hook copy-on-write, so taking the snapshot copies nothing.
	 *
	 * @var array<int|string, array<int, array<string, mixed>>>|null
	 */
	private static ?array $snapshot = null;

	/** plugin_basename() of the candidate's (main) file, as register_activation_hook() computes it. */
	private static string $plugin = '';

	private static bool $booted = false;

	/**
	 * Records every hooked callback. The runner calls this right before it includes the candidate,
	 * through a closure bound to this class; it is private so neither tests nor candidates can retake it.
	 */
	private static function snapshot( string $candidate_file ): void {
		global $wp_filter;
		if ( null !== self::$snapshot ) {
			return;
		}
		$seen = array();
		foreach ( $wp_filter as $hook => $wp_hook ) {
			if ( $wp_hook instanceof \WP_Hook ) {
				$seen[ $hook ] = $wp_hook->callbacks;
			}
		}
		self::$plugin   = \plugin_basename( $candidate_file );
		self::$snapshot = $seen;
	}

	/**
	 * Fires plugins_loaded, after_setup_theme, init and wp_loaded for the callbacks added since the
	 * snapshot, once per request: later calls do nothing. Use fire() to run a hook again.
	 */
	public static function boot(): void {
		self::snapshot_taken();
		if ( self::$booted ) {
			return;
		}
		self::$booted = true; // before firing: a callback that calls boot() does not recurse
		foreach ( self::BOOT_HOOKS as $hook ) {
			self::fire( $hook );
		}
	}

	/**
	 * Runs do_action( $hook, ...$args ) with only the callbacks added since the snapshot: the others
	 * stay hooked, in place, but do nothing while it runs. Every call fires again.
	 *
	 * @return int How many added callbacks were hooked when it started (0: nothing fired, did_action()
	 *             unchanged).
	 */
	public static function fire( string $hook, mixed ...$args ): int {
		global $wp_filter;
		$added = \count( self::added( $hook ) );
		if ( 0 === $added ) {
			return 0;
		}
		$wp_hook = $wp_filter[ $hook ];
		$noop    = static function ( $value = null ) {
			return $value;
		};
		// Mute the callbacks the snapshot knows by swapping in a no-op for each: keys, priorities and
		// order stay as they are, so remove_action()/has_action() during the run see the real hook.
		$muted = array();
		foreach ( self::$snapshot[ $hook ] ?? array() as $priority => $entries ) {
			foreach ( $entries as $id => $unused ) {
				if ( isset( $wp_hook->callbacks[ $priority ][ $id ] ) ) {
					$muted[ $priority ][ $id ]                           = $wp_hook->callbacks[ $priority ][ $id ]['function'];
					$wp_hook->callbacks[ $priority ][ $id ]['function'] = $noop;
				}
			}
		}
		try {
			\do_action( $hook, ...$args );
		} finally {
			// Restore what is still muted (a callback removed or re-added meanwhile stays as it is now).
			foreach ( $muted as $priority => $functions ) {
				foreach ( $functions as $id => $function ) {
					if ( isset( $wp_hook->callbacks[ $priority ][ $id ] ) && $noop === $wp_hook->callbacks[ $priority ][ $id ]['function'] ) {
						$wp_hook->callbacks[ $priority ][ $id ]['function'] = $function;
					}
				}
			}
		}
		return $added;
	}

	/**
	 * Runs the activation hook of the candidate's plugin, `activate_<plugin_basename>`, with the argument
	 * WordPress's activate_plugin() passes ($network_wide). For a wp_plugin_files candidate that is what
	 * register_activation_hook( __FILE__, ... ) in its main file hooks; for a snippet, the snippet's file.
	 *
	 * @return int How many activation callbacks ran.
	 */
	public static function activate( bool $network_wide = false ): int {
		return self::fire( self::activation_hook(), $network_wide );
	}

	/**
	 * Runs the plugin's deactivation hook, `deactivate_<plugin_basename>`, with the argument WordPress's
	 * deactivate_plugins() passes ($network_deactivating).
	 *
	 * @return int How many deactivation callbacks ran.
	 */
	public static function deactivate( bool $network_wide = false ): int {
		return self::fire( self::deactivation_hook(), $network_wide );
	}

	/** `activate_<plugin_basename of the candidate's main file>`. */
	public static function activation_hook(): string {
		self::snapshot_taken();
		return 'activate_' . self::$plugin;
	}

	/** `deactivate_<plugin_basename of the candidate's main file>`. */
	public static function deactivation_hook(): string {
		self::snapshot_taken();
		return 'deactivate_' . self::$plugin;
	}

	/**
	 * The callbacks on $hook added since the snapshot, in the order WordPress runs them.
	 *
	 * @return list<array{priority: int, function: callable, accepted_args: int}>
	 */
	public static function added( string $hook ): array {
		global $wp_filter;
		$seen    = self::snapshot_taken()[ $hook ] ?? array();
		$wp_hook = $wp_filter[ $hook ] ?? null;
		if ( ! $wp_hook instanceof \WP_Hook ) {
			return array();
		}
		$callbacks = $wp_hook->callbacks;
		\ksort( $callbacks, \SORT_NUMERIC );
		$found = array();
		foreach ( $callbacks as $priority => $entries ) {
			foreach ( $entries as $id => $entry ) {
				if ( ! isset( $seen[ $priority ][ $id ] ) ) {
					$found[] = array(
						'priority'      => (int) $priority,
						'function'      => $entry['function'],
						'accepted_args' => (int) $entry['accepted_args'],
					);
				}
			}
		}
		return $found;
	}

	/** @return array<int|string, array<int, array<string, mixed>>> */
	private static function snapshot_taken(): array {
		if ( null === self::$snapshot ) {
			throw new \LogicException( 'WPBench\Runtime\Lifecycle: no snapshot yet. The runner takes it right before it includes the candidate, so Lifecycle works in assertions and teardown, not in setup.' );
		}
		return self::$snapshot;
	}
}
