"""Forbidden constructs on PHP's tokens (supervisor/constructs.php), case by case in the image's PHP:
what each authored pattern is taken to forbid, and which code shows it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from gradekit import php_cases
from hostile_semantics import SQL

pytestmark = pytest.mark.docker

CASES = Path(__file__).parent / "php" / "construct_cases.php"
EVAL = r"\beval\s*\("

TARGETS = {
    EVAL: ["eval"],
    r"/\beval\s*\(/i": ["eval"],
    r"\bshell_exec\s*\(": ["call:shell_exec", "backtick"],
    r"`": ["backtick"],
    r"\b(exec|system|passthru)\s*\(": ["call:exec", "call:system", "call:passthru"],
    r"query_posts\s*\(": ["call:query_posts"],
    SQL: ["sql:get_col", "sql:get_results", "sql:get_var", "sql:get_row", "sql:query"],
    # Any $wpdb->query() at all: the regex decides alone (it matches prepared queries too).
    r"\$wpdb->query\s*\(": [],
    r"remove_all_(filters|actions)": [],
    r"\$_GET": [],
}

# (pattern, code, constructs found)
FOUND: list[tuple[str, str, list[str]]] = [
    (EVAL, "EvAl ( 'x' );", ["eval"]),
    (EVAL, "/* eval( */ echo 'eval(';", []),
    (r"\bshell_exec\s*\(", "$f = 'SHELL' . '_exec'; $f( 'id' );", ["call:shell_exec"]),
    (r"\bshell_exec\s*\(", "if ( function_exists( 'shell_exec' ) ) {}", []),
    (r"\bsystem\s*\(", "update_option( 'system', 1 ); $kind = 'system'; add_filter( 'system', 'f' );", []),
    (r"\bsystem\s*\(", "add_filter( 'the_title', 'system' );", ["call:system"]),
    (r"\bsystem\s*\(", "call_user_func( 'sys' . 'tem', 'id' );", ["call:system"]),
    (r"\bsystem\s*\(", "$cb = 'system'; array_map( $cb, array( 'id' ) );", ["call:system"]),
    (r"\bsystem\s*\(", "( ( 'system' ) )( 'id' );", ["call:system"]),
    (r"\bsystem\s*\(", "echo strlen( 'system' );", []),
    (r"\bshell_exec\s*\(", "$o->shell_exec( 'x' ); Foo::shell_exec( 'x' );", []),
    (r"\bshell_exec\s*\(", "$run = shell_exec( ... );", ["call:shell_exec"]),
    (r"\bshell_exec\s*\(", "echo `id`;", ["backtick"]),
    (r"\b(exec|system|passthru)\s*\(", "namespace X; use function system as s; s( 'id' );", ["call:system"]),
    (SQL, '$wpdb->query( "DELETE FROM {$wpdb->posts} WHERE ID = {$id}" );', ["sql:query"]),
    (SQL, '$wpdb->query( "DELETE FROM {$wpdb->posts} WHERE ID = 1" );', []),
    (SQL, '$wpdb->query( $wpdb->prepare( "DELETE FROM t WHERE ID = %d", $id ) );', []),
    (SQL, "$sql = $wpdb->prepare( 'SELECT * FROM t WHERE a = %s', $a ); $wpdb->get_row( $sql );", []),
    (SQL, "$w = \"a = $a\"; $wpdb->get_row( 'SELECT * FROM t WHERE ' . $w );", ["sql:get_row"]),
    (SQL, "$db = &$wpdb; $db->get_col( <<<S\nSELECT a FROM t WHERE b = {$b}\nS\n);", ["sql:get_col"]),
    (SQL, "$wpdb->get_var( 'SELECT a FROM t WHERE b = ' . esc_sql( $b ) );", []),
    (SQL, '$a = $b; $b = $a; $b = "x = $id"; $wpdb->query( $a );', ["sql:query"]),
    # Variables assigned to each other many times: each is followed once (this would never end otherwise).
    (SQL, "$s = $t; $t = $s;\n" * 400 + "$wpdb->query( $s );", []),
]


@pytest.fixture(scope="module")
def outcomes(grader_image: str) -> dict[str, Any]:
    doc = {"targets": list(TARGETS), "found": [[p, code] for p, code, _ in FOUND]}
    return php_cases(grader_image, CASES, "-d", "extension=tokenizer", stdin=json.dumps(doc))


@pytest.mark.parametrize("pattern", list(TARGETS))
def test_what_a_pattern_forbids(outcomes: dict[str, Any], pattern: str) -> None:
    assert outcomes["targets"][pattern] == TARGETS[pattern]


@pytest.mark.parametrize(("index", "case"), list(enumerate(FOUND)), ids=[f"{i}" for i in range(len(FOUND))])
def test_what_the_tokens_show(outcomes: dict[str, Any], index: int, case: tuple[str, str, list[str]]) -> None:
    assert outcomes["found"][index] == case[2], case[1]
