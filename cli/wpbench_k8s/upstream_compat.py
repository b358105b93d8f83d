"""Upstream WP-Bench's check semantics, expressed in this grader's contract (upstream profile only).

The grader runs the same static and runtime checks for both profiles; where upstream's verifier
reads a check differently, the upstream profile rewrites the check before it reaches the grader:

- static patterns: upstream wraps a pattern in `~...~` (escaping `~`) unless it starts with one of
  `/ # ~ @ !`; ours also takes `%...%`, `|...|` and backtick-delimited patterns as written, so a
  pattern such as `%s%` would match differently. The rewrite makes the delimiters explicit.
- `custom_assertion` passes upstream on any truthy return, ours only on `true`: the code is run
  in a closure whose result is cast to bool.
- `rest_response` upstream takes `target`, `expected_status`, `expected_data` (loose `==` against
  the whole response data), `body_contains` and `body_not_contains`, checked in that order: it
  becomes a custom assertion with those semantics.
- every other built-in type names its subject `target` upstream and reads it its own way (output
  and returns_value targets are PHP code, option and query results are compared with === / ==):
  each becomes a custom assertion with upstream's semantics.
- upstream's verifier runs inside WP-CLI, which loads wp-admin/includes/admin.php after WordPress
  boots, so upstream tests may call admin APIs (add_settings_section(), ...): the setup loads it.

It also holds upstream's one text rule outside the grader, shared by code extraction and knowledge
answers: `strip_outer_fence`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from wpbench_runtime.contract import Assertion, RuntimeChecks, StaticChecks, StaticPattern

_UPSTREAM_DELIMITERS = "/#~@!"


def strip_outer_fence(text: str) -> str:
    """Upstream WP-Bench's extraction: trim, drop a first line that opens a ``` fence, drop a final
    ``` (and what follows it on that line), trim again. Prose before or after the fence, or a second
    block, stays in the code, where PHP reports a parse error."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[-1]
    if stripped.endswith("```"):
        stripped = stripped.rsplit("```", 1)[0]
    return stripped.strip()


def upstream_answer(raw: str) -> str:
    """What upstream stores as a knowledge record's `output.answer`: one outer fence stripped."""
    return strip_outer_fence(raw).strip()


_FLAGS = re.compile(r"[imsxuADSUXJn]*")
NEVER_MATCHES = "~(?!)~"


def _delimited(pattern: str) -> bool:
    """Whether PCRE takes the pattern as written: same delimiter at the end plus flags, none unescaped inside."""
    delimiter = pattern[0]
    end = pattern.rfind(delimiter)
    if end == 0 or not _FLAGS.fullmatch(pattern[end + 1 :]):
        return False
    body, i = pattern[1:end], 0
    while i < len(body):
        if body[i] == "\\":
            i += 2
            continue
        if body[i] == delimiter:
            return False
        i += 1
    return True


def upstream_pattern(pattern: str) -> str:
    """The regex upstream's verifier runs for a pattern (made explicit for ours).

    Upstream passes a pattern starting with `/ # ~ @ !` to preg_match as written; when that is not
    a valid delimited regex, preg_match fails and the pattern counts as not found.
    """
    if pattern[:1] and pattern[0] in _UPSTREAM_DELIMITERS:
        return pattern if _delimited(pattern) else NEVER_MATCHES
    return "~" + pattern.replace("~", "\\~") + "~"


def static_checks(checks: StaticChecks) -> StaticChecks:
    def rewrite(patterns: list[StaticPattern]) -> list[StaticPattern]:
        return [p.model_copy(update={"pattern": upstream_pattern(p.pattern)}) for p in patterns]

    return StaticChecks(
        required_patterns=rewrite(checks.required_patterns),
        forbidden_patterns=rewrite(checks.forbidden_patterns),
    )


def _php_value(value: Any) -> str:
    """A PHP expression for a JSON value (decoded to arrays, as upstream reads its JSON suites)."""
    encoded = json.dumps(value).replace("\\", "\\\\").replace("'", "\\'")
    return f"json_decode( '{encoded}', true )"


def _truthy(code: str) -> str:
    return f"return (bool) ( static function () {{\n{code}\n}} )();"


def _rest_response(a: dict[str, Any]) -> str:
    """PHP with upstream's rest_response semantics, returning true or false."""
    method = str(a.get("method") or "GET").upper()
    route = a.get("target") if isinstance(a.get("target"), str) else ""
    lines = [
        "if ( ! did_action( 'rest_api_init' ) ) { do_action( 'rest_api_init' ); }",
        f"$request = new \\WP_REST_Request( {_php_value(method)}, {_php_value(route)} );",
    ]
    if isinstance(a.get("params"), dict):
        lines.append(
            f"foreach ( {_php_value(a['params'])} as $key => $value ) {{ "
            "if ( is_string( $key ) ) { $request->set_param( $key, $value ); } }"
        )
    if isinstance(a.get("headers"), dict):
        lines.append(
            f"foreach ( {_php_value(a['headers'])} as $key => $value ) {{ "
            "if ( is_string( $key ) && is_string( $value ) ) { $request->set_header( $key, $value ); } }"
        )
    if "body" in a:
        lines.append(f"$request->set_body( wp_json_encode( {_php_value(a['body'])} ) );")
        lines.append("$request->set_header( 'content-type', 'application/json' );")
    lines += [
        "$response = rest_do_request( $request );",
        "$data = rest_get_server()->response_to_data( $response, false );",
        "$status = $response->get_status();",
    ]
    status = a.get("expected_status")
    if status is not None:
        if not isinstance(status, int | float) and not (isinstance(status, str) and status.strip().isnumeric()):
            return "return false;"  # upstream: a non-numeric expected_status is an error
        lines.append(f"if ( {int(float(status))} !== $status ) {{ return false; }}")
    if "expected_data" in a:
        lines.append(f"return {_php_value(a['expected_data'])} == $data;")
        return "\n".join(lines)
    lines.append("$encoded = (string) wp_json_encode( $data );")
    contains, not_contains = a.get("body_contains"), a.get("body_not_contains")
    if isinstance(contains, str):
        lines.append(f"if ( ! str_contains( $encoded, {_php_value(contains)} ) ) {{ return false; }}")
    if isinstance(not_contains, str):
        lines.append(f"if ( str_contains( $encoded, {_php_value(not_contains)} ) ) {{ return false; }}")
    has_expectation = status is not None or isinstance(contains, str) or isinstance(not_contains, str)
    lines.append("return true;" if has_expectation else "return false;")
    return "\n".join(lines)


_OPEN_TAG = re.compile(r"^<\?php\s*", re.IGNORECASE)


def _inline(code: str) -> str:
    """Test-authored code run as upstream's safe_eval runs it (leading <?php stripped), in a closure."""
    return f"( static function () {{\n{_OPEN_TAG.sub('', code, count=1)}\n}} )()"


def _output_of(code: str) -> str:
    return f"ob_start();\n{_inline(code)};\n$output = ob_get_clean();\n$output = false !== $output ? $output : '';\n"


def _hook_registered(hook: str, callback: Any) -> str:
    lines = [
        "global $wp_filter;",
        f"$hook = {_php_value(hook)};",
        "if ( ! isset( $wp_filter[ $hook ] ) ) { return false; }",
    ]
    if not isinstance(callback, str):
        return "\n".join([*lines, "return true;"])
    return "\n".join(
        [
            *lines,
            f"$want = {_php_value(callback)};",
            "foreach ( $wp_filter[ $hook ]->callbacks as $callbacks ) {",
            "  foreach ( $callbacks as $entry ) {",
            "    $f = $entry['function'];",
            "    if ( is_string( $f ) && $want === $f ) { return true; }",
            "    if ( is_array( $f ) && 2 === count( $f ) ) {",
            "      $class = is_object( $f[0] ) ? get_class( $f[0] ) : $f[0];",
            '      if ( $want === "{$class}::{$f[1]}" || $want === $f[1] ) { return true; }',
            "    }",
            "  }",
            "}",
            "return false;",
        ]
    )


def _upstream_check(kind: str, a: dict[str, Any]) -> str | None:
    """PHP returning true or false with upstream's semantics for a built-in type, or None if unknown."""
    target = a["target"] if isinstance(a.get("target"), str) else ""
    expected = a.get("expected")
    text = expected if isinstance(expected, str) else ""
    if kind == "function_exists":
        return f"return function_exists( {_php_value(target)} );"
    if kind == "class_exists":
        return f"return class_exists( {_php_value(target)} );"
    if kind == "shortcode_exists":
        return f"global $shortcode_tags; return isset( $shortcode_tags[ {_php_value(target)} ] );"
    if kind == "hook_registered":
        return _hook_registered(target, a.get("callback"))
    if kind == "output_contains":
        return _output_of(target) + f"return str_contains( $output, {_php_value(text)} );"
    if kind == "output_not_contains":
        return _output_of(target) + f"return ! str_contains( $output, {_php_value(text)} );"
    if kind == "output_equals":
        return _output_of(target) + f"return trim( {_php_value(text)} ) === trim( $output );"
    if kind == "output_matches":
        pattern = text if text[:1] and text[0] in "/#~@" else f"/{text}/"
        return _output_of(target) + f"return (bool) preg_match( {_php_value(pattern)}, $output );"
    if kind == "rest_response":
        return _rest_response(a)
    if kind == "returns_value":
        return f"return {_php_value(expected)} === {_inline(target)};"
    if kind == "query_result":
        return f"global $wpdb; return {_php_value(expected)} == $wpdb->get_results( {_php_value(target)} );"
    if kind == "option_value":
        return f"return {_php_value(expected)} === get_option( {_php_value(target)} );"
    if kind == "post_meta_value":
        post_id = a.get("post_id") if isinstance(a.get("post_id"), int) else 0
        meta_key = a.get("meta_key") if isinstance(a.get("meta_key"), str) else ""
        return f"return {_php_value(expected)} === get_post_meta( {post_id}, {_php_value(meta_key)}, true );"
    return None


def _assertion(a: Assertion) -> Assertion:
    data = a.model_dump()
    kind = data["type"]
    common = {"type": "custom_assertion", "description": data.get("description", ""), "weight": data["weight"]}
    if kind == "custom_assertion":
        return Assertion.model_validate({**common, "code": _truthy(str(data.get("code") or "return false;"))})
    # Upstream names every built-in check's subject in `target` (post_meta_value excepted, whose post_id and
    # meta_key read the same in both): a test without `target` is written for this grader and keeps our
    # semantics (e.g. `shortcode_content` on an output assertion).
    check = None if "target" not in data else _upstream_check(kind, data)
    if check is None:
        return a
    return Assertion.model_validate({**common, "code": check})


ADMIN_INCLUDES = "require_once ABSPATH . 'wp-admin/includes/admin.php';"


# Upstream loads a wp_plugin_files candidate before the test's setup; our runner runs setup first. For a
# plugin test the setup is deferred to right after the plugin is loaded (the runner's `plugin_loaded`
# action, first in line). A candidate graded as a snippet (an authored exploit string) has no plugin
# directory, and its setup runs at once, as upstream runs a snippet's.
_PLUGIN_FIRST = """$wpbench_setup = static function () {{
{setup}
}};
if ( glob( WP_PLUGIN_DIR . '/wp-bench-candidate-*', GLOB_ONLYDIR ) ) {{
	add_action( 'plugin_loaded', static function () use ( $wpbench_setup ) {{
		static $done = false;
		if ( ! $done ) {{ $done = true; $wpbench_setup(); }}
	}}, PHP_INT_MIN );
}} else {{
	$wpbench_setup();
}}"""


def runtime_checks(checks: RuntimeChecks, *, plugin: bool = False) -> RuntimeChecks:
    """Upstream's semantics for a test's runtime checks (`plugin`: a wp_plugin_files test)."""
    own = checks.setup
    if plugin and own.strip():
        own = _PLUGIN_FIRST.format(setup=_OPEN_TAG.sub("", own, count=1))
    setup = ADMIN_INCLUDES + ("\n" + own if own else "")
    return checks.model_copy(update={"setup": setup, "assertions": [_assertion(a) for a in checks.assertions]})
