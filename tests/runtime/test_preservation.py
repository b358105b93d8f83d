"""\\WPBench\\Runtime\\Preservation: before/after snapshots of posts and users, every rule it states.

Setup creates fixtures and captures; each task's candidate makes one kind of change; the assertions ask
preserved() with and without the allowance that change needs. Every assertion must pass (each one
states its expected outcome with `===`), so a task's verdict is `passed` exactly when every rule held.
"""

from __future__ import annotations

import pytest
from gradekit import Graded, Grader, task

pytestmark = pytest.mark.docker

P = "\\WPBench\\Runtime\\Preservation"

SETUP = f"""
global $wpdb;
$cat   = wp_insert_term( 'PV Cat', 'category' );
$cat2  = wp_insert_term( 'PV Other', 'category' );
$a = wp_insert_post( array( 'post_title' => 'A', 'post_status' => 'publish', 'post_category' => array( $cat['term_id'] ) ) );
wp_set_post_tags( $a, array( 'pv-one', 'pv-two' ) );
add_post_meta( $a, '_pv_num', '1' );
add_post_meta( $a, '_pv_arr', array( 'n' => '1' ) );
add_post_meta( $a, '_legacy_a', 'old' );
$b = wp_insert_post( array( 'post_title' => 'B', 'post_status' => 'draft' ) );
$c = wp_insert_post( array( 'post_title' => 'C', 'post_status' => 'publish' ) );
wp_update_post( array( 'ID' => $a, 'post_content' => 'revised' ) ); // leaves a revision behind
$p = wp_insert_post( array( 'post_title' => 'P', 'post_type' => 'page', 'post_status' => 'publish' ) );
$k = wp_insert_post( array( 'post_title' => 'K', 'post_type' => 'page', 'post_status' => 'publish', 'post_parent' => $p ) );
$u = wp_insert_user( array( 'user_login' => 'pv_user', 'user_pass' => 'pv-' . wp_generate_password(), 'role' => 'author' ) );
update_user_meta( $u, 'pv_pref', 'a' );
$GLOBALS['pv'] = array(
    'a' => $a, 'b' => $b, 'c' => $c, 'p' => $p, 'k' => $k, 'u' => $u, 'cat2' => (int) $cat2['term_id'],
    'posts'     => (int) $wpdb->get_var( "SELECT COUNT(*) FROM $wpdb->posts WHERE post_type <> 'revision'" ),
    'revisions' => (int) $wpdb->get_var( "SELECT COUNT(*) FROM $wpdb->posts WHERE post_type = 'revision'" ),
    'users'     => (int) $wpdb->get_var( "SELECT COUNT(*) FROM $wpdb->users" ),
);
$GLOBALS['before_posts'] = {P}::capture_posts();
$GLOBALS['before_users'] = {P}::capture_users();
"""


def check(code: str) -> dict[str, object]:
    return {"type": "custom_assertion", "code": "$v = $GLOBALS['pv']; $s = $GLOBALS['before_posts'];\n" + code}


def preserved(allow: str, expected: bool, snapshot: str = "$s") -> dict[str, object]:
    return check(f"return {'true' if expected else 'false'} === {snapshot}->preserved( {allow} );")


def case(candidate: str, *assertions: dict[str, object]) -> dict[str, object]:
    return task("$v = $GLOBALS['pv'];\n" + candidate, *assertions, runtime={"setup": SETUP})


CASES: dict[str, dict[str, object]] = {
    "unchanged": case(
        "",
        preserved("", True),
        preserved("array()", True, "$GLOBALS['before_users']"),
        # Every non-revision post is captured, unrelated ones too; revisions are not.
        check("return $v['revisions'] > 0 && count( $s ) === $v['posts'];"),
        check("return count( $GLOBALS['before_users'] ) === $v['users'] && $v['users'] >= 2;"),
        # Records created after the capture are not constrained.
        check(
            "wp_insert_post( array( 'post_title' => 'new', 'post_status' => 'publish' ) ); return true === $s->preserved();"
        ),
        check("return array() === $s->differences();"),
    ),
    "field": case(
        "global $wpdb; $wpdb->update( $wpdb->posts, array( 'post_title' => 'A changed' ), array( 'ID' => $v['a'] ) );",
        preserved("", False),
        check("$s->preserved(); return array( \"record {$v['a']}: field post_title changed\" ) === $s->differences();"),
        preserved("array( $v['a'] => array( 'fields' => array( 'post_title' ) ) )", True),
        # An allowance is for its own record only.
        preserved("array( $v['b'] => array( 'fields' => array( 'post_title' ) ) )", False),
        preserved("array( $v['a'] => array( 'meta' => array( 'post_title' ) ) )", False),
    ),
    "no_automatic_exemptions": case(
        # wp_update_post() refreshes post_modified (and may add _edit_last-style side effects): nothing is exempt.
        "global $wpdb; $wpdb->update( $wpdb->posts, array( 'post_modified' => '2001-01-01 00:00:00',"
        " 'post_modified_gmt' => '2001-01-01 00:00:00' ), array( 'ID' => $v['b'] ) );",
        preserved("", False),
        preserved("array( $v['b'] => array( 'fields' => array( 'post_modified' ) ) )", False),
        preserved("array( $v['b'] => array( 'fields' => array( 'post_modified', 'post_modified_gmt' ) ) )", True),
    ),
    "meta_serialized_type": case(
        "update_post_meta( $v['a'], '_pv_arr', array( 'n' => 1 ) );",  # '1' (string) became 1 (int)
        preserved("", False),
        preserved("array( $v['a'] => array( 'meta' => array( '_pv_arr' ) ) )", True),
        preserved("array( $v['a'] => array( 'meta' => array( '_pv_num' ) ) )", False),
    ),
    "meta_duplicate_value": case(
        "add_post_meta( $v['a'], '_pv_num', '1' );",
        preserved("", False),
        preserved("array( $v['a'] => array( 'meta' => array( '_pv_num' ) ) )", True),
    ),
    "meta_missing_key": case(
        "delete_post_meta( $v['a'], '_pv_num' );",
        preserved("", False),
        preserved("array( $v['a'] => array( 'meta' => array( '_pv_num' ) ) )", True),
    ),
    "meta_prefixes": case(
        "update_post_meta( $v['a'], '_legacy_a', 'new' ); add_post_meta( $v['a'], '_legacy_b', 'x' );",
        preserved("", False),
        preserved("array( $v['a'] => array( 'meta_prefixes' => array( '_legacy_' ) ) )", True),
        preserved("array( $v['a'] => array( 'meta' => array( '_legacy_a' ) ) )", False),
        preserved("array( $v['a'] => array( 'meta_prefixes' => array( '_leg' ), 'meta' => array() ) )", True),
    ),
    "terms": case(
        "wp_set_post_categories( $v['a'], array( $v['cat2'] ) );",
        preserved("", False),
        preserved("array( $v['a'] => array( 'terms' => array( 'category' ) ) )", True),
        preserved("array( $v['a'] => array( 'terms' => array( 'post_tag' ) ) )", False),
        # post_category is derived from the relationships, so it is not a field that changed.
        preserved("array( $v['a'] => array( 'fields' => array( 'post_category' ) ) )", False),
    ),
    "terms_unordered": case(
        "wp_set_post_tags( $v['a'], array( 'pv-two', 'pv-one' ) );",
        preserved("", True),
    ),
    "deleted": case(
        "wp_delete_post( $v['c'], true );",
        preserved("", False),
        preserved("array( $v['c'] => array( 'deleted' => true ) )", True),
        preserved("array( $v['c'] => array( 'deleted' => true ), $v['a'] => array( 'deleted' => true ) )", False),
        check("$s->preserved(); return array( \"record {$v['c']} was deleted\" ) === $s->differences();"),
    ),
    # WP_Post::to_array()'s derived ancestors and page_template are fields too (post_category, tags_input are not).
    "ancestors": case(
        "global $wpdb; $wpdb->update( $wpdb->posts, array( 'post_parent' => $v['b'] ), array( 'ID' => $v['p'] ) );",
        preserved("array( $v['p'] => array( 'fields' => array( 'post_parent', 'ancestors' ) ) )", False),
        preserved(
            "array( $v['p'] => array( 'fields' => array( 'post_parent', 'ancestors' ) ),"
            " $v['k'] => array( 'fields' => array( 'ancestors' ) ) )",
            True,
        ),
    ),
    "page_template": case(
        "update_post_meta( $v['k'], '_wp_page_template', 'wide.php' );",
        preserved("array( $v['k'] => array( 'meta' => array( '_wp_page_template' ) ) )", False),
        preserved(
            "array( $v['k'] => array( 'meta' => array( '_wp_page_template' ), 'fields' => array( 'page_template' ) ) )",
            True,
        ),
    ),
    "users": case(
        "global $wpdb; update_user_meta( $v['u'], 'pv_pref', 'b' );"
        " $wpdb->update( $wpdb->users, array( 'display_name' => 'Renamed' ), array( 'ID' => $v['u'] ) );",
        preserved("", False, "$GLOBALS['before_users']"),
        preserved("array( $v['u'] => array( 'meta' => array( 'pv_pref' ) ) )", False, "$GLOBALS['before_users']"),
        preserved(
            "array( $v['u'] => array( 'meta' => array( 'pv_pref' ), 'fields' => array( 'display_name' ) ) )",
            True,
            "$GLOBALS['before_users']",
        ),
        preserved("", True),  # the post snapshot is not about users
    ),
}

# Unknown IDs and keys throw: the assertion fails, naming what was wrong.
THROWS = {
    "unknown_id": ("$s->preserved( array( 987654 => array() ) );", "the posts snapshot holds no record 987654"),
    "unknown_key": ("$s->preserved( array( $v['a'] => array( 'field' => array() ) ) );", "unknown allowance key(s)"),
    "terms_on_users": (
        "$GLOBALS['before_users']->preserved( array( $v['u'] => array( 'terms' => array() ) ) );",
        "unknown allowance key(s)",
    ),
    "bad_list": ("$s->preserved( array( $v['a'] => array( 'meta' => '_pv_num' ) ) );", "must be a list of strings"),
    "capture_in_assertion": (f"{P}::capture_posts();", "capturing later is refused"),
}
CASES["throws"] = case("", *(check(code + " return true;") for code, _ in THROWS.values()))

# The candidate tries to take, copy or replace a snapshot; none of it works, and its real change is seen.
HOSTILE = f"""
$GLOBALS['pv_denied'] = array();
foreach ( array(
    'capture' => static fn() => {P}::capture_posts(),
    'clone'   => static fn() => clone $GLOBALS['before_posts'],
    'serialize' => static fn() => serialize( $GLOBALS['before_posts'] ),
    'unserialize' => static fn() => unserialize( sprintf( 'O:%d:"%s":0:{{}}', strlen( {P}::class ), {P}::class ) ),
) as $what => $try ) {{
    try {{ $try(); }} catch ( \\LogicException $e ) {{ $GLOBALS['pv_denied'][] = $what; }}
}}
$GLOBALS['before_posts'] = new class {{ public function preserved( $a = array() ) {{ return true; }} }};
wp_delete_post( $v['c'], true );
"""
CASES["hostile_candidate"] = case(
    HOSTILE,
    check("return array( 'capture', 'clone', 'serialize', 'unserialize' ) === $GLOBALS['pv_denied'];"),
    check(f"return $s instanceof {P} && false === $s->preserved();"),
    # The object holds a handle, not the before-state.
    check("$props = array_values( (array) $s ); return 1 === count( $props ) && is_int( $props[0] );"),
)


@pytest.fixture(scope="module")
def graded(grader: Grader) -> dict[str, Graded]:
    return grader.grade_many(CASES)


@pytest.mark.parametrize("name", sorted(set(CASES) - {"throws"}))
def test_rule_holds(graded: dict[str, Graded], name: str) -> None:
    g = graded[name]
    assert g.status == "passed", g.explain()
    assert all(a.passed for a in g.verdict.assertions), g.explain()


@pytest.mark.parametrize("index,name", list(enumerate(THROWS)))
def test_misuse_throws(graded: dict[str, Graded], index: int, name: str) -> None:
    row = graded["throws"].assertion(index)
    assert not row.passed
    assert THROWS[name][1] in row.message, row.message
