"""The two kind configurations describe the same cluster: scripts/kind-config-local.yaml (the node image built
here) is scripts/kind-config.yaml (kind's published image) plus what this machine needs, nothing less."""

from __future__ import annotations

from pathlib import Path

import yaml

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _patches(cfg: dict) -> dict[str, dict]:
    docs = [yaml.safe_load(p) for p in cfg.get("kubeadmConfigPatches", [])]
    return {d["kind"]: d for d in docs}


def test_the_local_kind_config_is_the_published_one_plus_this_machines_needs() -> None:
    published = yaml.safe_load((SCRIPTS / "kind-config.yaml").read_text())
    local = yaml.safe_load((SCRIPTS / "kind-config-local.yaml").read_text())
    assert local["nodes"] == published["nodes"] == [{"role": "control-plane"}, {"role": "worker"}, {"role": "worker"}]
    theirs, ours = _patches(published), _patches(local)
    for key, value in theirs["KubeletConfiguration"].items():  # every kubelet setting kept (podPidsLimit)
        assert ours["KubeletConfiguration"][key] == value, key
    assert ours["KubeletConfiguration"]["failCgroupV1"] is False
    # apart from the local cluster's pod bridge (10.244.0.0/24) and service range (10.96.0.0/16) on this host
    assert not local["networking"]["podSubnet"].startswith("10.244.")
    assert not local["networking"]["serviceSubnet"].startswith("10.96.")


def test_kind_env_names_the_addresses_the_local_config_uses() -> None:
    env = dict(
        line.split("#")[0].strip().split("=", 1)
        for line in (SCRIPTS / "kind-env.sh").read_text().splitlines()
        if line.startswith("KIND_") and "=" in line and "$" not in line.split("=", 1)[1]
    )
    net = yaml.safe_load((SCRIPTS / "kind-config-local.yaml").read_text())["networking"]
    assert (net["apiServerAddress"], str(net["apiServerPort"])) == (env["KIND_API_ADDR"], env["KIND_API_PORT"])
    assert (net["podSubnet"], net["serviceSubnet"]) == (env["KIND_POD_SUBNET"], env["KIND_SERVICE_SUBNET"])
