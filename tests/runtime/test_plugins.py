"""wp_plugin_files artifacts: validation of the files map, and a valid plugin installed and loaded."""

from __future__ import annotations

import pytest
from gradekit import Graded, Grader, plugin_task

pytestmark = pytest.mark.docker

HEADER = "<?php\n/**\n * Plugin Name: Demo Plugin\n * Version: 1.0\n */\n"
OK = {"type": "custom_assertion", "code": "return true;"}

VALID = {
    "demo-plugin.php": HEADER
    + "require_once __DIR__ . '/includes/helpers.php';\n"
    + "function demo_plugin_file() { return plugin_basename( __FILE__ ); }\n"
    + "add_shortcode( 'demo', 'demo_plugin_shortcode' );\n",
    "includes/helpers.php": "<?php\nfunction demo_plugin_shortcode() { return 'from the demo plugin'; }\n",
    "readme.txt": "=== Demo ===\n",
}

CASES: dict[str, tuple[dict[str, str], str]] = {
    "traversal": ({**VALID, "../evil.php": "<?php"}, 'path "../evil.php": path traversal (..) is not allowed'),
    "nested_traversal": ({**VALID, "inc/../../evil.php": "<?php"}, "path traversal"),
    "absolute": ({**VALID, "/etc/evil.php": "<?php"}, 'path "/etc/evil.php": absolute paths are not allowed'),
    "backslash": ({**VALID, "inc\\evil.php": "<?php"}, "backslashes are not allowed"),
    "nul": ({**VALID, "evil\u0000.php": "<?php"}, "NUL byte"),
    "too_many": ({**VALID, **{f"f{i}.txt": "" for i in range(18)}}, "21 files (at most 20)"),
    "too_big": ({**VALID, "big.txt": "x" * (256 * 1024 + 1)}, '"big.txt" is 262145 bytes (at most 262144 per file)'),
    "total_too_big": ({**VALID, **{f"b{i}.txt": "x" * 250_000 for i in range(5)}}, "bytes in total (at most 1048576)"),
    "no_header": ({"demo.php": "<?php\n// Plugin: nope\n"}, 'no top-level PHP file with a "Plugin Name:" header'),
    "header_only_in_subdir": ({"sub/demo.php": HEADER}, "no top-level PHP file"),
    "two_headers": (
        {"a.php": HEADER, "b.php": HEADER},
        '2 top-level PHP files have a "Plugin Name:" header (a.php, b.php)',
    ),
    "empty": ({}, "no files"),
}


@pytest.fixture(scope="module")
def graded(grader: Grader, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Graded]:
    # Invalid maps and parse errors never start a runner: one container grades them all.
    invalid = {name: plugin_task(files, OK) for name, (files, _) in CASES.items()}
    invalid["parse_error_in_include"] = plugin_task({**VALID, "includes/helpers.php": "<?php\nfunction ( {\n"}, OK)
    results: dict[str, Graded] = grader.grade_batch(invalid, tmp_path_factory.mktemp("plugins"))
    valid = plugin_task(
        VALID,
        # Installed as upstream WP-Bench does: wp-bench-candidate-<random>/, never a name the candidate chose.
        {
            "type": "output_matches",
            "code": "echo demo_plugin_file();",
            "pattern": "#^wp-bench-candidate-[0-9a-f]{12}/demo-plugin\\.php$#",
        },
        {"type": "output_equals", "shortcode_content": "[demo]", "expected": "from the demo plugin"},
        {
            "type": "custom_assertion",
            "code": "return file_exists( WP_PLUGIN_DIR . '/' . dirname( demo_plugin_file() ) . '/readme.txt' )"
            " && did_action( 'plugin_loaded' ) > 0"
            " && has_action( 'activate_' . demo_plugin_file() ) === false;",
        },
        test_function="demo_plugin_file(): string",
    )
    results["valid"] = grader.grade(valid)
    return results


def test_a_valid_plugin_is_installed_and_loaded(graded: dict[str, Graded]) -> None:
    g = graded["valid"]
    assert g.status == "passed", g.explain()
    assert [a.passed for a in g.verdict.assertions] == [True, True, True, True]


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_invalid_files_map_is_a_failed_test(graded: dict[str, Graded], name: str) -> None:
    g = graded[name]
    assert (g.status, g.exit_code) == ("failed", 0), g.explain()
    assert g.verdict.reason.startswith("plugin files map invalid: ")
    assert CASES[name][1] in g.verdict.reason, g.verdict.reason
    assert g.verdict.scores.runtime == 0.0
    assert g.verdict.assertions[0].message == "not run: invalid plugin files map"


def test_every_php_file_is_syntax_checked(graded: dict[str, Graded]) -> None:
    g = graded["parse_error_in_include"]
    assert g.status == "failed", g.explain()
    assert g.verdict.reason.startswith("parse error: includes/helpers.php: PHP Parse error:")
