"""`wpbench-controller` arguments for leader election, instances and tenants: bad timing is a usage error."""

from __future__ import annotations

import pytest

from wpbench_controller.main import parse_args


def test_leader_election_needs_a_namespace_and_lease_above_renew_above_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    with pytest.raises(SystemExit) as no_namespace:
        parse_args(["--leader-election-lease", "l"])
    assert no_namespace.value.code == 2
    for lease, renew, retry in (("10", "10", "2"), ("15", "2", "2"), ("15", "10", "0")):
        with pytest.raises(SystemExit) as bad:
            parse_args(["--leader-election-lease", "l", "--leader-election-namespace", "ns", "--lease-seconds", lease,
                        "--renew-seconds", renew, "--retry-seconds", retry])  # fmt: skip
        assert bad.value.code == 2
    monkeypatch.setenv("POD_NAMESPACE", "sys")
    args = parse_args(["--leader-election-lease", "l", "--instance", "sys/wpbench", "--namespace-selector", "t=1"])
    assert (args.leader_election_namespace, args.instance, args.namespace_selector) == ("sys", "sys/wpbench", "t=1")


def test_without_a_lease_there_is_no_election() -> None:
    assert parse_args([]).leader_election_lease == ""
