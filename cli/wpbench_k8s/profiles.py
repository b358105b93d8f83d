"""Execution profiles: which benchmark's semantics a run reproduces.

`upstream` reproduces WordPress/wp-bench (the version named in UPSTREAM_VERSION) so that the same
completions get the same verdicts and headline numbers; `wpbench` is this project's own behaviour
(lenient code extraction, stratified selection, stricter knowledge matching, pooled headline).
docs/profiles.md lists every difference and its effect on scores. A run records its profile in the
manifest and the summary metadata.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ProfileName = Literal["upstream", "wpbench"]
PROFILE_NAMES: tuple[ProfileName, ...] = ("upstream", "wpbench")

# The upstream code this profile was checked against (see docs/profiles.md, "How parity was checked").
UPSTREAM_VERSION = "WordPress/wp-bench 4346d1b (scoring v2.0 execution_pass; selection.py 02e3282; records.py 01b6dca)"


@dataclass(frozen=True)
class Profile:
    name: ProfileName
    default_temperature: float | None  # sent on every request when the config names none
    default_request_timeout: float  # seconds per model request
    strict_extraction: bool  # strip one outer fence and nothing else; prose stays and fails to parse
    php_issues_fail: bool  # a PHP warning, notice or deprecation fails the test
    headline: Literal["execution_pass_rate", "mean_correctness"]
    selection: Literal["category_round_robin_per_type", "stratified"]
    full_prompt_hash: bool  # 64 hex digits without prefix (upstream) or "sha256:" + 16 (ours)


PROFILES: dict[ProfileName, Profile] = {
    "upstream": Profile(
        name="upstream",
        default_temperature=0.0,
        default_request_timeout=300.0,
        strict_extraction=True,
        php_issues_fail=True,
        headline="execution_pass_rate",
        selection="category_round_robin_per_type",
        full_prompt_hash=True,
    ),
    "wpbench": Profile(
        name="wpbench",
        default_temperature=None,
        default_request_timeout=120.0,
        strict_extraction=False,
        php_issues_fail=False,
        headline="mean_correctness",
        selection="stratified",
        full_prompt_hash=False,
    ),
}


def get_profile(name: ProfileName) -> Profile:
    return PROFILES[name]
