"""\\WPBench\\Runtime\\Lifecycle: tests fire only what the candidate hooked, against the runner's own snapshot."""

from __future__ import annotations

import pytest
from gradekit import Graded, Grader, plugin_task, task

pytestmark = pytest.mark.docker

LC = "\\WPBench\\Runtime\\Lifecycle"


def check(code: str) -> dict[str, object]:
    return {"type": "custom_assertion", "code": code}


# The candidate logs what runs; setup hooks a callback of its own before the candidate (so the
# runner's snapshot, taken after setup, must count it as "not the candidate's").
LOGGER = """
function lc_log( $what ) { $GLOBALS['lc_log'][] = $what; }
foreach ( array( 'plugins_loaded', 'after_setup_theme', 'init', 'wp_loaded' ) as $h ) {
    add_action( $h, function () use ( $h ) { lc_log( $h ); } );
}
add_action( 'init', function () { lc_log( 'init:late-added' ); add_action( 'init', function () { lc_log( 'init:99' ); }, 99 ); }, 20 );
add_action( 'init', function () {
    register_block_type( 'lc/box', array( 'render_callback' => function () { return 'box'; } ) );
} );
"""
SETUP = "$GLOBALS['lc_log'] = array();\nadd_action( 'init', function () { $GLOBALS['lc_log'][] = 'setup-init'; }, 5 );"

# Only the loggers: running them again is harmless (a block registered twice would warn).
LOGGER_ONLY = LOGGER.split("add_action( 'init', function () { lc_log( 'init:late-added' )")[0]

BLOCK_NOTICES = "already registered"


def boot_task(*assertions: dict[str, object], code: str = LOGGER) -> dict[str, object]:
    return task(code, *assertions, runtime={"setup": SETUP})


ACTIVATING_PLUGIN = {
    "lc-demo.php": "<?php\n/**\n * Plugin Name: LC Demo\n */\n"
    "require __DIR__ . '/inc/more.php';\n"
    "register_activation_hook( __FILE__, function ( ...$args ) { $GLOBALS['lc_activated'][] = $args; } );\n"
    "register_deactivation_hook( __FILE__, function ( ...$args ) { $GLOBALS['lc_deactivated'][] = $args; } );\n"
    "add_action( 'init', function () { $GLOBALS['lc_inits'] = ( $GLOBALS['lc_inits'] ?? 0 ) + 1; } );\n",
    # WordPress never runs this one: register_activation_hook() keys on the file it is given.
    "inc/more.php": "<?php\nregister_activation_hook( __FILE__, function () { $GLOBALS['lc_wrong_file'] = true; } );\n",
}


@pytest.fixture(scope="module")
def graded(grader: Grader) -> dict[str, Graded]:
    tasks: dict[str, dict[str, object]] = {
        "boot": boot_task(
            check(
                f"{LC}::boot();\n"
                "return array( 'plugins_loaded', 'after_setup_theme', 'init', 'init:late-added', 'init:99', 'wp_loaded' )"
                " === $GLOBALS['lc_log'];"
            ),
            check("return WP_Block_Type_Registry::get_instance()->is_registered( 'lc/box' );"),
            check("return 'box' === do_blocks( '<!-- wp:lc/box /-->' );"),
            # Core's init callbacks are hooked as before, with their real functions.
            check(
                "global $wp_filter;\n"
                "return 1 === has_action( 'init', 'wp_widgets_init' )\n"
                "    && 'wp_widgets_init' === $wp_filter['init']->callbacks[1]['wp_widgets_init']['function'];"
            ),
        ),
        "boot_twice": boot_task(
            check(
                f"{LC}::boot();\n{LC}::boot();\nreturn 1 === count( array_keys( $GLOBALS['lc_log'], 'init', true ) );"
            ),
            # boot() stays done for the whole request, also in later assertions ...
            check(f"{LC}::boot();\nreturn 1 === count( array_keys( $GLOBALS['lc_log'], 'init', true ) );"),
            # ... while fire() runs the candidate's callbacks again, and says how many it found.
            check(
                f"$n = {LC}::fire( 'init' );\n"
                "return 1 === $n && 2 === count( array_keys( $GLOBALS['lc_log'], 'init', true ) )"
                " && array( 'plugins_loaded', 'after_setup_theme', 'init', 'wp_loaded', 'init' ) === $GLOBALS['lc_log'];"
            ),
            code=LOGGER_ONLY,
        ),
        # The problem the helper solves: a bare do_action( 'init' ) re-registers every core block.
        "bare_do_action": boot_task(check("do_action( 'init' );\nreturn true;")),
        "fire_args": task(
            "add_action( 'lc_custom', function ( $a, $b ) { $GLOBALS['lc_args'] = array( $a, $b ); }, 10, 2 );",
            check(
                f"$before = did_action( 'lc_custom' );\n$n = {LC}::fire( 'lc_custom', 'x', 7 );\n"
                "return 1 === $n && array( 'x', 7 ) === $GLOBALS['lc_args'] && $before + 1 === did_action( 'lc_custom' );"
            ),
            # Nothing of the candidate on a hook: nothing fires, did_action() is unchanged.
            check(
                f"$before = did_action( 'wp_head' );\n"
                f"return 0 === {LC}::fire( 'wp_head' ) && $before === did_action( 'wp_head' )"
                f" && array() === {LC}::added( 'wp_head' );"
            ),
            check(
                f"$added = {LC}::added( 'lc_custom' );\n"
                "return 1 === count( $added ) && 10 === $added[0]['priority'] && 2 === $added[0]['accepted_args'];"
            ),
        ),
        "setup_too_early": task(
            "echo 'CANDIDATE-RAN';",
            check("return true;"),
            runtime={"setup": f"{LC}::boot();", "teardown": f"echo {LC}::class;"},
        ),
        "snapshot_is_private": task(
            f"try {{ {LC}::snapshot( __FILE__ ); $GLOBALS['lc_retook'] = true; }}"
            " catch ( Error $e ) { $GLOBALS['lc_retook'] = false; }\n"
            "add_action( 'init', function () { $GLOBALS['lc_inits'] = ( $GLOBALS['lc_inits'] ?? 0 ) + 1; } );",
            check(f"{LC}::boot();\nreturn false === $GLOBALS['lc_retook'] && 1 === $GLOBALS['lc_inits'];"),
        ),
        "plugin_activation": plugin_task(
            ACTIVATING_PLUGIN,
            # The plugin's directory is wp-bench-candidate-<random> (upstream WP-Bench's name for it).
            check(
                f"return 1 === preg_match( '#^activate_wp-bench-candidate-[0-9a-f]{{12}}/lc-demo\\.php$#', {LC}::activation_hook() );"
            ),
            check(
                f"$n = {LC}::activate();\n"
                "return 1 === $n && array( array( false ) ) === $GLOBALS['lc_activated']"
                " && empty( $GLOBALS['lc_wrong_file'] ) && ! isset( $GLOBALS['lc_deactivated'] );"
            ),
            check(
                f"{LC}::activate( true );\nreturn array( array( false ), array( true ) ) === $GLOBALS['lc_activated'];"
            ),
            check(
                f"return 1 === {LC}::deactivate() && array( array( false ) ) === $GLOBALS['lc_deactivated']"
                f" && 'de' . {LC}::activation_hook() === {LC}::deactivation_hook();"
            ),
            # Activation fires nothing else of the plugin; boot() runs its init callback once.
            check(
                f"$none = ! isset( $GLOBALS['lc_inits'] );\n{LC}::boot();\nreturn $none && 1 === $GLOBALS['lc_inits'];"
            ),
            runtime={"teardown": f"{LC}::deactivate();\necho 'deactivations:' . count( $GLOBALS['lc_deactivated'] );"},
        ),
        "snippet_activation": task(
            "register_activation_hook( __FILE__, function ( $network_wide ) { $GLOBALS['lc_activated'] = func_get_args(); } );",
            check(f"return 1 === {LC}::activate() && array( false ) === $GLOBALS['lc_activated'];"),
        ),
        # A candidate without activation hooks: nothing to run.
        "no_activation_hook": task(
            "function lc_nothing() {}",
            check(f"return 0 === {LC}::activate() && 0 === {LC}::deactivate();"),
        ),
    }
    return grader.grade_many(tasks)


def passed_all(g: Graded) -> bool:
    return g.status == "passed" and all(a.passed for a in g.verdict.assertions)


def test_boot_runs_the_candidates_lifecycle_callbacks_in_order(graded: dict[str, Graded]) -> None:
    g = graded["boot"]
    assert passed_all(g), g.explain()


def test_boot_does_not_rerun_core_init(graded: dict[str, Graded]) -> None:
    g = graded["boot"]
    assert not [i for i in g.verdict.php_issues if BLOCK_NOTICES in i.message], g.explain()
    assert g.verdict.php_issues == [], g.explain()
    # Nor setup's own init callback, hooked before the snapshot: the exact log the first assertion
    # checks has no 'setup-init'.


def test_a_bare_do_action_init_is_what_boot_avoids(graded: dict[str, Graded]) -> None:
    g = graded["bare_do_action"]
    assert g.status == "passed", g.explain()
    assert sum(BLOCK_NOTICES in i.message for i in g.verdict.php_issues) > 50, g.explain()


def test_boot_is_idempotent_and_fire_runs_again(graded: dict[str, Graded]) -> None:
    g = graded["boot_twice"]
    assert passed_all(g), g.explain()
    assert g.verdict.php_issues == [], g.explain()


def test_fire_passes_arguments_and_counts_like_do_action(graded: dict[str, Graded]) -> None:
    g = graded["fire_args"]
    assert passed_all(g), g.explain()


def test_lifecycle_in_setup_is_a_mis_authored_test(graded: dict[str, Graded]) -> None:
    g = graded["setup_too_early"]
    assert g.status == "harness_error", g.explain()
    assert "no snapshot yet" in g.verdict.reason, g.verdict.reason
    assert "CANDIDATE-RAN" not in g.verdict.stdout
    assert "WPBench\\Runtime\\Lifecycle" in g.verdict.stdout  # the class is there for teardown too


def test_the_candidate_cannot_retake_the_snapshot(graded: dict[str, Graded]) -> None:
    g = graded["snapshot_is_private"]
    assert passed_all(g), g.explain()


def test_activate_runs_the_plugins_activation_hook(graded: dict[str, Graded]) -> None:
    g = graded["plugin_activation"]
    assert passed_all(g), g.explain()
    assert "deactivations:2" in g.verdict.stdout, g.explain()


def test_activate_for_a_snippet(graded: dict[str, Graded]) -> None:
    assert passed_all(graded["snippet_activation"]), graded["snippet_activation"].explain()
    assert passed_all(graded["no_activation_hook"]), graded["no_activation_hook"].explain()
