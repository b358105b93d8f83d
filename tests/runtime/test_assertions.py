"""Every assertion type, passing and failing, in one grader container (each row is its own check)."""

from __future__ import annotations

from typing import Any

import pytest
from gradekit import Graded, Grader, task

pytestmark = pytest.mark.docker

CANDIDATE = r"""
function wpbt_greet( $name ) { return "Hello, $name"; }
function wpbt_echo( $x ) { echo "<p>$x</p>"; }
function wpbt_add( int $a, int $b ) { return $a + $b; }
function wpbt_list() { return array( 'a', 'b', 'c' ); }
class WPBT_Widget {
	public function init() {}
	public static function boot( $title ) { return $title; }
}
function wpbt_init_cb() {}
add_action( 'init', 'wpbt_init_cb', 15 );
add_action( 'wp_footer', array( new WPBT_Widget(), 'init' ) );
add_filter( 'the_title', array( 'WPBT_Widget', 'boot' ), 5 );
add_shortcode( 'wpbt', function ( $atts ) {
	$atts = shortcode_atts( array( 'name' => 'World' ), $atts );
	return 'Hi ' . esc_html( $atts['name'] );
} );
add_action( 'rest_api_init', function () {
	register_rest_route( 'wpbt/v1', '/echo', array(
		'methods'             => 'GET, POST',
		'permission_callback' => function () { return current_user_can( 'edit_posts' ); },
		'callback'            => function ( $request ) {
			return array( 'user' => get_current_user_id(), 'q' => $request->get_param( 'q' ), 'nested' => array( 'k' => 'v', 'n' => 3 ) );
		},
	) );
} );
update_option( 'wpbt_option', 'on' );
$GLOBALS['wpbt_pid'] = wp_insert_post( array( 'post_title' => 'Meta host', 'post_status' => 'publish' ) );
update_post_meta( $GLOBALS['wpbt_pid'], 'wpbt_meta', 'blue' );
"""

POST_ID = "return $GLOBALS['wpbt_pid'];"
ROW_QUERY = "SELECT post_title, post_status FROM {prefix}posts WHERE post_title = 'Meta host'"

# (assertion, expected to pass, a fragment of the message)
CASES: list[tuple[dict[str, Any], bool, str]] = [
    ({"type": "custom_assertion", "code": "return wpbt_add( 2, 3 ) === 5;"}, True, "returned true"),
    ({"type": "custom_assertion", "code": "return 'yes';"}, False, 'returned "yes"'),
    ({"type": "custom_assertion", "code": "throw new Exception( 'nope' );"}, False, "threw Exception: nope"),
    ({"type": "function_exists", "function": "wpbt_greet"}, True, "exists"),
    ({"type": "function_exists", "function": "wpbt_nope"}, False, "not defined"),
    ({"type": "class_exists", "class": "WPBT_Widget"}, True, "exists"),
    ({"type": "class_exists", "class": "WPBT_Nope"}, False, "not defined"),
    ({"type": "shortcode_exists", "shortcode": "wpbt"}, True, "registered"),
    ({"type": "shortcode_exists", "shortcode": "wpbt_nope"}, False, "not registered"),
    ({"type": "hook_registered", "hook": "init", "callback": "wpbt_init_cb", "priority": 15}, True, "hooked"),
    (
        {"type": "hook_registered", "hook": "init", "callback": "wpbt_init_cb", "priority": 10},
        False,
        "wpbt_init_cb at priority 15",
    ),
    ({"type": "hook_registered", "hook": "wp_footer", "callback": "WPBT_Widget::init"}, True, "hooked"),
    (
        {"type": "hook_registered", "hook": "the_title", "callback": ["WPBT_Widget", "boot"], "priority": 5},
        True,
        "hooked",
    ),
    ({"type": "hook_registered", "hook": "wpbt_nope_hook"}, False, "nothing is hooked"),
    ({"type": "output_contains", "function": "wpbt_echo", "args": ["x"], "expected": "<p>x</p>"}, True, "contains"),
    ({"type": "output_contains", "shortcode_content": '[wpbt name="Ada"]', "expected": "Hi Bob"}, False, "Hi Ada"),
    ({"type": "output_not_contains", "shortcode_content": "[wpbt]", "expected": "Ada"}, True, "does not contain"),
    ({"type": "output_not_contains", "code": "echo 'abc'; return 'def';", "expected": "cd"}, False, "abcdef"),
    ({"type": "output_equals", "shortcode_content": '[wpbt name="Ada"]', "expected": " Hi Ada\n"}, True, "equals"),
    (
        {"type": "output_equals", "function": "wpbt_greet", "args": ["Ada"], "expected": "Hello Ada"},
        False,
        "Hello, Ada",
    ),
    ({"type": "output_matches", "code": "echo wpbt_greet( 'Zed' );", "pattern": "/^hello, z/i"}, True, "matches"),
    ({"type": "output_matches", "shortcode_content": "[wpbt]", "pattern": "^Bye"}, False, "does not match"),
    (
        {
            "type": "rest_response",
            "route": "/wpbt/v1/echo",
            "user": "admin",
            "params": {"q": "z"},
            "status": 200,
            "data": {"q": "z", "nested": {"n": 3}, "user": 1},
            "body_contains": '"k":"v"',
        },
        True,
        "GET /wpbt/v1/echo -> 200",
    ),
    ({"type": "rest_response", "route": "/wpbt/v1/echo", "status": 200}, False, "status 401"),
    (
        {
            "type": "rest_response",
            "route": "/wpbt/v1/echo",
            "method": "POST",
            "user": 1,
            "body": {"q": "json"},
            "data_path": "q",
            "expected": "json",
        },
        True,
        "POST",
    ),
    (
        {"type": "rest_response", "route": "/wpbt/v1/echo", "user": 1, "data_path": "nested.k", "expected": "w"},
        False,
        "'nested.k'",
    ),
    ({"type": "returns_value", "function": "wpbt_add", "args": [2, 3], "expected": 5}, True, "as expected"),
    ({"type": "returns_value", "function": "wpbt_list", "expected": "b"}, False, '["a","b","c"]'),
    (
        {
            "type": "returns_value",
            "function": "wpbt_list",
            "args_code": "return array();",
            "expected": "b",
            "compare": "contains",
        },
        True,
        "contains",
    ),
    (
        {"type": "returns_value", "function": "wpbt_greet", "args": ["Q"], "expected": "^Hello", "compare": "matches"},
        True,
        "matches",
    ),
    (
        {"type": "returns_value", "function": "wpbt_add", "args": ["2", "3"], "expected": "5", "compare": "equals"},
        True,
        "equals",
    ),
    ({"type": "returns_value", "function": "wpbt_undefined", "expected": 1}, False, "not defined"),
    (
        {
            "type": "query_result",
            "query": "SELECT option_value FROM {prefix}options WHERE option_name = 'wpbt_option'",
            "expected": "on",
        },
        True,
        "as expected",
    ),
    (
        {
            "type": "query_result",
            "mode": "col",
            "query": "SELECT post_title FROM {prefix}posts",
            "expected": "Nope",
            "compare": "contains",
        },
        False,
        "Meta host",
    ),
    (
        {
            "type": "query_result",
            "mode": "row",
            "query": ROW_QUERY,
            "expected": {"post_title": "Meta host", "post_status": "publish"},
        },
        True,
        "row",
    ),
    ({"type": "query_result", "query": "SELECT nope FROM {prefix}nope", "expected": 1}, False, "query failed"),
    ({"type": "option_value", "option": "wpbt_option", "expected": "on"}, True, "as expected"),
    ({"type": "option_value", "option": "wpbt_option", "expected": "off"}, False, '"on"'),
    ({"type": "option_value", "option": "wpbt_never_set", "absent": True}, True, "not set"),
    ({"type": "option_value", "option": "wpbt_option", "absent": True}, False, "is set"),
    (
        {"type": "post_meta_value", "post_id_code": POST_ID, "meta_key": "wpbt_meta", "expected": "blue"},
        True,
        "as expected",
    ),
    ({"type": "post_meta_value", "post_id": 999999, "meta_key": "wpbt_meta", "expected": "blue"}, False, 'got ""'),
    (
        {
            "type": "post_meta_value",
            "post_id_code": POST_ID,
            "meta_key": "wpbt_meta",
            "single": False,
            "expected": ["blue"],
        },
        True,
        "as expected",
    ),
]


@pytest.fixture(scope="module")
def graded(grader: Grader) -> dict[str, Graded]:
    assertions = [{**a, "description": f"case {i}", "weight": 1 + i % 3} for i, (a, _, _) in enumerate(CASES)]
    results: dict[str, Graded] = grader.grade_many(
        {
            "all": task(CANDIDATE, *assertions, test_function="wpbt_greet( string $name ): string"),
            "no_test_function": task(
                "function other() {}",
                {"type": "function_exists", "function": "other"},
                test_function="function missing_fn( $a )",
            ),
        }
    )
    return results


@pytest.mark.parametrize(
    ("index", "case"),
    list(enumerate(CASES)),
    ids=[f"{i}-{c[0]['type']}-{'pass' if c[1] else 'fail'}" for i, c in enumerate(CASES)],
)
def test_assertion_type(graded: dict[str, Graded], index: int, case: tuple[dict[str, Any], bool, str]) -> None:
    _, should_pass, fragment = case
    row = graded["all"].assertion(index)
    assert row.passed is should_pass, row
    assert fragment in row.message, row
    assert row.type == case[0]["type"] and row.scored and row.description == f"case {index}"


def test_every_type_is_covered_both_ways() -> None:
    from wpbench_runtime.contract import ASSERTION_TYPES

    covered = {(a["type"], ok) for a, ok, _ in CASES}
    assert covered == {(t, ok) for t in ASSERTION_TYPES for ok in (True, False)}


def test_scores_weigh_assertions(graded: dict[str, Graded]) -> None:
    g = graded["all"]
    weights = [1 + i % 3 for i in range(len(CASES))]
    passed = sum(w for w, (_, ok, _) in zip(weights, CASES, strict=True) if ok)
    assert g.status == "failed", g.explain()
    assert g.verdict.scores.runtime == pytest.approx(passed / sum(weights), abs=1e-6)
    assert g.verdict.scores.static == 1.0 and g.verdict.scores.static_policy_pass
    assert not g.verdict.scores.execution_pass
    assert g.verdict.reason.startswith(f"{sum(1 for c in CASES if not c[1])} of {len(CASES)} assertions failed")


def test_test_function_is_an_unscored_function_exists(graded: dict[str, Graded]) -> None:
    first = graded["all"].verdict.assertions[0]
    assert (first.index, first.type, first.scored, first.weight, first.passed) == (
        -1,
        "function_exists",
        False,
        0.0,
        True,
    )
    missing = graded["no_test_function"]
    assert missing.status == "failed", missing.explain()
    assert missing.assertion(-1).passed is False
    assert missing.assertion(0).passed is True
    assert missing.verdict.scores.runtime == 1.0  # unscored, yet it decides execution_pass
    assert "test_function missing_fn() is not defined" in missing.verdict.reason
