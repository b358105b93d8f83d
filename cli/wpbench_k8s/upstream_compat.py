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
- other built-in types name their subject `target` upstream: it is renamed to our parameter.
- upstream's verifier runs inside WP-CLI, which loads wp-admin/includes/admin.php after WordPress
  boots, so upstream tests may call admin APIs (add_settings_section(), ...): the setup loads it.
"""

from __future__ import annotations

import json
from typing import Any

from wpbench_runtime.contract import Assertion, RuntimeChecks, StaticChecks, StaticPattern

_UPSTREAM_DELIMITERS = "/#~@!"

# Upstream's `target` for each built-in type, as our parameter name.
_TARGET_PARAM = {
    "function_exists": "function",
    "class_exists": "class",
    "shortcode_exists": "shortcode",
    "hook_registered": "hook",
    "returns_value": "function",
    "query_result": "query",
    "option_value": "option",
    "output_contains": "code",
    "output_not_contains": "code",
    "output_equals": "code",
    "output_matches": "code",
}


def upstream_pattern(pattern: str) -> str:
    """The regex upstream's verifier runs for a pattern (made explicit for ours)."""
    if pattern[:1] and pattern[0] in _UPSTREAM_DELIMITERS:
        return pattern
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


def _assertion(a: Assertion) -> Assertion:
    data = a.model_dump()
    kind = data["type"]
    common = {"type": "custom_assertion", "description": data.get("description", ""), "weight": data["weight"]}
    if kind == "custom_assertion":
        return Assertion.model_validate({**common, "code": _truthy(str(data.get("code") or "return false;"))})
    if kind == "rest_response" and ("target" in data or "route" not in data):
        return Assertion.model_validate({**common, "code": _rest_response(data)})
    if "target" in data and kind in _TARGET_PARAM:
        data[_TARGET_PARAM[kind]] = data.pop("target")
    return Assertion.model_validate(data)


ADMIN_INCLUDES = "require_once ABSPATH . 'wp-admin/includes/admin.php';"


def runtime_checks(checks: RuntimeChecks) -> RuntimeChecks:
    setup = ADMIN_INCLUDES + ("\n" + checks.setup if checks.setup else "")
    return checks.model_copy(update={"setup": setup, "assertions": [_assertion(a) for a in checks.assertions]})
