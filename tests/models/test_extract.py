"""PHP and plugin-files extraction from completions as models actually write them."""

from __future__ import annotations

import json

import pytest

from wpbench_k8s.models.extract import extract_candidate, extract_files, extract_php, fenced_blocks

FN = "function wpbp_x( int $a ): int {\n\treturn $a + 1;\n}"


@pytest.mark.parametrize(
    "text",
    [
        f"```php\n<?php\n{FN}\n```",
        f"Here is the solution:\n\n```php\n{FN}\n```\n\nThis adds one to the input.",
        f"Sure! ```php\n{FN}\n```",  # fence opened after prose on the same line
        f"```PHP\n<?php\n\n{FN}\n?>\n```",
        f"~~~php\n{FN}\n~~~",
        f"````php\n{FN}\n````",
        f"   ```php\n{FN}\n   ```",  # indented fences
        f"```\n<?php\n{FN}\n```",  # untagged block opening with <?php
        f"```\n{FN}\n```",  # untagged block that looks like PHP
        f"<?php\n{FN}\n",  # no fence, a file
        f"Here you go.\n<?php\n{FN}\n?>\nThat's it.",  # no fence, prose around a tagged file
        f"{FN}\n",  # bare code
        f"```php\n<?php\n{FN}\n",  # fence never closed (cut off at max_tokens)
    ],
)
def test_php_is_found_however_it_is_wrapped(text: str) -> None:
    out = extract_php(text)
    assert out.error is None
    assert out.code == FN + "\n"


def test_the_php_block_wins_among_several_languages() -> None:
    text = (
        'Install:\n```bash\nwp plugin activate x\n```\nConfig:\n```json\n{"a": 1}\n```\n'
        f"Code:\n```php\n{FN}\n```\nStyles:\n```css\n.x{{}}\n```"
    )
    assert extract_php(text).code == FN + "\n"


def test_usage_examples_and_rewrites_are_dropped_new_helpers_kept() -> None:
    helper = "function wpbp_helper() {\n\treturn 2;\n}"
    text = (
        f"```php\n{FN}\n```\nAnd a helper it needs:\n```php\n{helper}\n```\n"
        "Usage:\n```php\necho wpbp_x( 1 );\n```\n"
        "Or more compactly:\n```php\nfunction wpbp_x( $a ) { return $a + 1; }\n```"
    )
    code = extract_php(text).code
    assert code == f"{FN}\n\n{helper}\n"


def test_the_largest_php_block_is_the_main_one() -> None:
    text = f"```php\necho wpbp_x( 2 );\n```\n\n```php\n{FN}\n```"
    assert extract_php(text).code == FN + "\n"


def test_inline_html_after_a_closing_tag_is_kept() -> None:
    text = "<?php\nfunction t() { ?>\n<p>Hi</p>\n<?php }\n"
    assert extract_php(text).code == "function t() { ?>\n<p>Hi</p>\n<?php }\n"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty completion"),
        ("   \n", "empty completion"),
        ("I cannot help with that request.", "no PHP code"),
        ('```json\n{"files": {}}\n```\n```bash\nls\n```', "fenced blocks are bash, json"),
    ],
)
def test_nothing_gradable_says_why(text: str, why: str) -> None:
    out = extract_php(text)
    assert out.code is None and out.error is not None and why in out.error


def test_fenced_blocks_reports_languages_and_open_fences() -> None:
    blocks = fenced_blocks("a\n```php\nx\n```\n```{.json}\n{}\n```\n```\nopen")
    assert [(b.lang, b.body, b.closed) for b in blocks] == [
        ("php", "x", True),
        ("json", "{}", True),
        ("", "open", False),
    ]


PLUGIN = {"files": {"my-plugin.php": "<?php\n/**\n * Plugin Name: Mine\n */\n", "inc/a.php": "<?php\n// a\n"}}


@pytest.mark.parametrize(
    "text",
    [
        "```json\n" + json.dumps(PLUGIN, indent=2) + "\n```",
        "Here is the plugin:\n```json\n" + json.dumps(PLUGIN) + "\n```\nActivate it in wp-admin.",
        json.dumps(PLUGIN),  # bare JSON
        "The plugin: " + json.dumps(PLUGIN) + " -- enjoy",  # bare JSON inside prose
        "```\n" + json.dumps(PLUGIN) + "\n```",  # untagged fence
        "```json\n" + json.dumps(PLUGIN["files"]) + "\n```",  # a bare path -> contents map
        "```json\n" + json.dumps({"files": [{"path": k, "content": v} for k, v in PLUGIN["files"].items()]}) + "\n```",
        # raw newlines inside JSON strings, as models sometimes write them
        '{"files": {"my-plugin.php": "<?php\n/**\n * Plugin Name: Mine\n */\n", "inc/a.php": "<?php\n// a\n"}}',
    ],
)
def test_plugin_files_map_is_found(text: str) -> None:
    out = extract_files(text)
    assert out.error is None
    assert out.files == PLUGIN["files"]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("```php\n<?php echo 1;\n```", 'no JSON object with a "files" map'),
        ('{"files": {}}', "`files` map is empty"),
        ('{"files": {"a.php": 3}}', "must be file contents"),
        ('{"files": "a.php"}', "must map paths to contents"),
    ],
)
def test_plugin_files_errors(text: str, why: str) -> None:
    out = extract_files(text)
    assert out.files is None and out.error is not None and why in out.error


def test_extract_candidate_keeps_the_raw_completion() -> None:
    raw = f"Answer:\n```php\n{FN}\n```"
    cand = extract_candidate(raw, "php_snippet", label="m")
    assert (cand.code, cand.raw, cand.extraction_error, cand.label) == (FN + "\n", raw, None, "m")
    bad = extract_candidate("no code here", "wp_plugin_files")
    assert bad.files is None and bad.code is None and bad.extraction_error
