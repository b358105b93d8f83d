"""Hostile candidates against the verifier's semantics (test_adversarial_semantics.py): answers that
know no expected value yet satisfy a loose comparison, forbidden constructs written past their regex
or past PCRE's limits, and PHP issues the candidate tries to hide or relabel.

Each case is its own small task, graded in the real image. `status` is the grader's exact verdict
status; `upstream` (when set) is the status after the upstream profile's reading of PHP issues
(wpbench_k8s.scoring.php_issues_as_error), for the cases whose attack is on that reading.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gradekit import task

EVAL = r"\beval\s*\("
SHELL = r"\bshell_exec\s*\("
# wpk-core-v1's pattern for interpolated SQL reaching $wpdb (database tests).
SQL = r"""/\$wpdb->(?:get_col|get_results|get_var|get_row|query)\s*\(\s*(?:\"[^\"]*\$(?!wpdb->)|([\"'])[^\"']*\1\s*\.\s*\$(?!wpdb->))/"""


@dataclass(frozen=True)
class Case:
    name: str
    cls: str
    task: dict[str, Any]
    status: str
    reason: str = ""
    upstream: str | None = None
    issues: tuple[tuple[str, str, str], ...] = field(
        default=()
    )  # (level, message fragment, phase) that must be recorded


def _equals(code: str, assertion: dict[str, Any], name: str) -> Case:
    return Case(name, "loose comparison", task(code, assertion, test_id=f"sem-{name}"), "failed", "assertions failed")


def _forbidden(name: str, pattern: str, code: str, reason: str = "forbidden pattern matched") -> Case:
    doc = task(
        "function wpbs_ok() { return 1; }\n" + code,
        {"type": "returns_value", "function": "wpbs_ok", "expected": 1},
        test_id=f"sem-{name}",
        static_checks={"forbidden_patterns": [{"pattern": pattern, "description": "forbidden construct"}]},
    )
    return Case(name, "forbidden-pattern evasion", doc, "failed", reason)


UNIVERSAL_OPTION = "add_filter( 'pre_option', function () { return true; }, PHP_INT_MAX );"
UNIVERSAL_ARRAY_OPTION = "add_filter( 'pre_option', function () { return array( true ); }, PHP_INT_MAX );"
WPDB_TRUE = (
    "$GLOBALS['wpdb'] = new class( $GLOBALS['wpdb'] ) {\n"
    "\tpublic function __construct( private object $inner ) {}\n"
    "\tpublic function __get( $n ) { return $this->inner->$n; }\n"
    "\tpublic function __set( $n, $v ) { $this->inner->$n = $v; }\n"
    "\tpublic function __call( $n, $a ) { return $this->inner->$n( ...$a ); }\n"
    "\tpublic function get_var( ...$a ) { return true; }\n"
    "\tpublic function get_col( ...$a ) { return array( true ); }\n"
    "\tpublic function get_results( ...$a ) { return array( true ); }\n"
    "};"
)
COUNT = "SELECT COUNT(*) FROM {prefix}posts WHERE post_type = 'wpbs'"

# Code that hides its own deprecation: an error handler of its own, set and removed again.
HIDE = (
    "set_error_handler( function () { return true; } );\n"
    "trigger_error( 'hidden deprecation', E_USER_DEPRECATED );\n"
    "$undefined_array = array(); $x = $undefined_array['hidden-warning'];\n"
    "restore_error_handler();\n"
)
OK_FN = "function wpbs_ok() { return 1; }\n"
OK = {"type": "returns_value", "function": "wpbs_ok", "expected": 1}


def _issue(name: str, code: str, *, upstream: str, issues: tuple[tuple[str, str, str], ...], extra: Any = None) -> Case:
    assertions = [OK] + ([extra] if extra else [])
    doc = task(OK_FN + code, *assertions, test_id=f"sem-{name}")
    return Case(name, "hidden PHP issue", doc, "passed", upstream=upstream, issues=issues)


CASES: list[Case] = [
    # --- loose comparison: a universal answer must not equal what it does not know -------------
    _equals(
        UNIVERSAL_OPTION,
        {"type": "option_value", "option": "wpbs_n", "expected": 7, "compare": "equals"},
        "option-true-equals-7",
    ),
    _equals(
        UNIVERSAL_ARRAY_OPTION,
        {"type": "option_value", "option": "wpbs_list", "expected": "gold", "compare": "contains"},
        "option-array-true-contains-gold",
    ),
    _equals(
        UNIVERSAL_ARRAY_OPTION,
        {"type": "option_value", "option": "wpbs_list", "expected": ["gold"], "compare": "equals"},
        "option-array-true-equals-list",
    ),
    _equals(
        WPDB_TRUE,
        {"type": "query_result", "query": COUNT, "expected": 3, "compare": "equals"},
        "wpdb-true-count-equals-3",
    ),
    _equals(
        WPDB_TRUE,
        {
            "type": "query_result",
            "mode": "col",
            "query": "SELECT post_title FROM {prefix}posts",
            "expected": "Gold",
            "compare": "contains",
        },
        "wpdb-array-true-col-contains",
    ),
    _equals(
        "function wpbs_value( ...$a ) { return true; }",
        {"type": "returns_value", "function": "wpbs_value", "expected": "secret", "compare": "equals"},
        "function-true-equals-string",
    ),
    _equals(
        "add_filter( 'rest_pre_dispatch', function () { return new WP_REST_Response( true, 200 ); } );",
        {"type": "rest_response", "route": "/wpbs/v1/x", "expected": {"id": 9}, "compare": "equals"},
        "rest-true-equals-object",
    ),
    _equals(
        "function wpbs_value( ...$a ) { return null; }",
        {"type": "returns_value", "function": "wpbs_value", "expected": 0, "compare": "equals"},
        "function-null-equals-0",
    ),
    # --- forbidden patterns: what PHP runs, not only the text; a check that gives up is a hit ----
    _forbidden("eval-upper", EVAL, "if ( false ) { EVAL( '1;' ); }"),
    _forbidden("eval-comment", r"/\beval\s*\(/i", "if ( false ) { eval/**/( '1;' ); }"),
    _forbidden("eval-hash-comment", EVAL, "if ( false ) { eval # why not\n( '1;' ); }"),
    _forbidden("shell-backtick", SHELL, "if ( false ) { $o = `true`; }"),
    _forbidden("shell-qualified-upper", SHELL, "if ( false ) { \\SHELL_EXEC /* x */ ( 'true' ); }"),
    _forbidden("shell-variable-function", SHELL, "if ( false ) { $f = 'shell_' . 'exec'; $f( 'true' ); }"),
    _forbidden("shell-callback", SHELL, "if ( false ) { array_map( 'SHELL_EXEC', array( 'true' ) ); }"),
    _forbidden(
        "sql-heredoc",
        SQL,
        "if ( false ) { global $wpdb; $wpdb->get_results( <<<Q\nSELECT * FROM t WHERE id = $id\nQ\n); }",
    ),
    _forbidden(
        "sql-variable",
        SQL,
        'if ( false ) { global $wpdb; $sql = "DELETE FROM t WHERE id = $id"; $wpdb->query( $sql ); }',
    ),
    _forbidden(
        "sql-append-alias",
        SQL,
        "if ( false ) { $db = $GLOBALS['wpdb']; $q = 'SELECT * FROM t'; $q .= ' WHERE id = ' . $id; $db->GET_VAR( $q ); }",
    ),
    _forbidden(
        "pcre-backtrack",
        r"/\beval\s*\(.*\$_GET/s",
        "if ( false ) { eval( $_GET['c'] ); }\n/* " + "x" * 1_500_000 + " */",
        "could not be checked",
    ),
    # --- PHP issues the candidate hides or relabels (upstream profile counts them) --------------
    _issue(
        "issue-own-handler",
        HIDE,
        upstream="error",
        issues=(("Deprecated", "hidden deprecation", "candidate"), ("Warning", "hidden-warning", "candidate")),
    ),
    _issue(
        "issue-handler-in-assertion",
        "set_error_handler( function () { return true; } );\n"
        "function wpbs_noisy() { trigger_error( 'noisy', E_USER_DEPRECATED ); return 'v'; }",
        upstream="failed",
        issues=(("Deprecated", "noisy", "assertion:1"),),
        extra={"type": "returns_value", "function": "wpbs_noisy", "expected": "v"},
    ),
    _issue(
        "issue-rewrite-record",
        "trigger_error( 'relabelled', E_USER_DEPRECATED );\n"
        "try { ( Closure::bind( function () { foreach ( self::$pending as $i => $p ) { self::$pending[ $i ]['phase'] = 'teardown'; } },"
        " null, \\WPBench\\Runner\\Issues::class ) )(); } catch ( \\Throwable $e ) {}\n",
        upstream="error",
        issues=(("Deprecated", "relabelled", "candidate"),),
    ),
    _issue(
        "issue-drain-record",
        "trigger_error( 'drained', E_USER_DEPRECATED );\n"
        "try { ( Closure::bind( function () { self::$pending = array(); }, null, \\WPBench\\Runner\\Issues::class ) )(); } catch ( \\Throwable $e ) {}\n"
        "if ( function_exists( 'wpbench_issues_take' ) ) { wpbench_issues_take( str_repeat( 'a', 64 ) ); }\n",
        upstream="error",
        issues=(("Deprecated", "drained", "candidate"),),
    ),
]
