"""Execution profiles: which benchmark's semantics a run reproduces.

`upstream` and `upstream-v2` reproduce WordPress/wp-bench at the commits their `reproduces` names, so
that the same completions get the same verdicts and headline numbers: `upstream` is scoring v3.0 (the
execution-only benchmark, headline = execution pass rate), `upstream-v2` scoring v2.0 (knowledge and
execution, headline = 0.3 x knowledge + 0.7 x execution pass rate over the tracks present). `wpbench`
is this project's own behaviour (lenient code extraction, stratified selection, stricter knowledge
matching, pooled headline). docs/profiles.md lists every difference and its effect on scores. A run
records its profile in the manifest and the summary metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

ProfileName = Literal["upstream", "upstream-v2", "wpbench"]
PROFILE_NAMES: tuple[ProfileName, ...] = ("upstream", "upstream-v2", "wpbench")
UPSTREAM_PROFILES: frozenset[str] = frozenset({"upstream", "upstream-v2"})

# The upstream code each profile was checked against (see docs/profiles.md, "How parity was checked").
UPSTREAM_V3 = "WordPress/wp-bench e19d3a8 (trunk 2026-09-20: scoring 3.0, execution only)"
UPSTREAM_V2 = "WordPress/wp-bench bf059e2 (trunk 2026-08-06: scoring 2.0, knowledge and execution)"


def is_upstream(name: str) -> bool:
    """Whether a profile reproduces upstream WP-Bench (any of its versions)."""
    return name in UPSTREAM_PROFILES


@dataclass(frozen=True)
class Profile:
    name: ProfileName
    default_temperature: float | None  # sent on every request when the config names none
    default_request_timeout: float  # seconds per model request
    strict_extraction: bool  # strip one outer fence and nothing else; prose stays and fails to parse
    php_issues_fail: bool  # a PHP warning, notice or deprecation fails the test
    selection: Literal["category_round_robin_per_type", "stratified"]
    full_prompt_hash: bool  # 64 hex digits without prefix (upstream) or "sha256:" + 16 (ours)
    scoring: Literal["3.0", "2.0", "wpbench"]  # which summary rules (scoring.headline_scores)
    reproduces: str  # what metadata.profile_reproduces says ("" for ours: the package version)


_UPSTREAM_V3 = Profile(
    name="upstream",
    default_temperature=0.0,
    default_request_timeout=300.0,
    strict_extraction=True,
    php_issues_fail=True,
    selection="category_round_robin_per_type",
    full_prompt_hash=True,
    scoring="3.0",
    reproduces=UPSTREAM_V3,
)
PROFILES: dict[ProfileName, Profile] = {
    "upstream": _UPSTREAM_V3,
    # the earlier version differs only in its summary rules (knowledge counted beside execution)
    "upstream-v2": replace(_UPSTREAM_V3, name="upstream-v2", scoring="2.0", reproduces=UPSTREAM_V2),
    "wpbench": Profile(
        name="wpbench",
        default_temperature=None,
        default_request_timeout=120.0,
        strict_extraction=False,
        php_issues_fail=False,
        selection="stratified",
        full_prompt_hash=False,
        scoring="wpbench",
        reproduces="",
    ),
}


def get_profile(name: ProfileName) -> Profile:
    return PROFILES[name]
