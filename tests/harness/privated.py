"""A private Docker daemon for fault tests: its own data root, exec root, pidfile and socket, so
stopping and restarting it never disturbs anyone else's containers on the machine's engine.

    python tests/harness/privated.py start IMAGE   # prints the DOCKER_HOST to use
    python tests/harness/privated.py stop

The data root is kept under /var/cache/wpbench (the grader image is loaded into it once, with
`docker save | docker load`, and again only when the image id changes).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(os.environ.get("WPBENCH_PRIVATE_DOCKERD", "/var/cache/wpbench/private-dockerd"))
RUN = Path("/run/wpbench-pd")  # short: a unix socket path is at most 107 bytes
# Its own bridge: with `--bridge none` dockerd deletes the host's `docker0` at start, which belongs to
# the machine's engine. Grader containers use no network; the bridge only has to exist, with an
# address of its own (no route leaves it).
BRIDGE, BRIDGE_ADDRESS = "wpbpd0", "10.254.213.1/24"


@dataclass
class PrivateDaemon:
    root: Path = ROOT
    run: Path = RUN

    @property
    def socket(self) -> Path:
        return self.run / "docker.sock"

    @property
    def host(self) -> str:
        return f"unix://{self.socket}"

    @property
    def pidfile(self) -> Path:
        return self.run / "dockerd.pid"

    def argv(self) -> list[str]:
        return ["dockerd", "--data-root", str(self.root / "data"), "--exec-root", str(self.run / "exec"),
                "--pidfile", str(self.pidfile), "-H", self.host, "--bridge", BRIDGE, "--iptables=false",
                "--ip-masq=false", "--ip-forward=false", "--cgroup-parent", "wpbench-private",
                "--shutdown-timeout", "10"]  # fmt: skip

    def pid(self) -> int | None:
        try:
            pid = int(self.pidfile.read_text().strip())
            os.kill(pid, 0)
            return pid
        except (OSError, ValueError):
            return None

    def docker(self, *args: str, **kw) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["docker", "-H", self.host, *args], capture_output=True, text=True, **kw)

    def answering(self) -> bool:
        return self.docker("version", "--format", "{{.Server.Version}}").returncode == 0

    def start(self, timeout: float = 60) -> None:
        if self.pid() and self.answering():
            return
        if shutil.which("dockerd") is None:
            raise RuntimeError("dockerd not installed")
        self.run.mkdir(parents=True, exist_ok=True)
        (self.root / "data").mkdir(parents=True, exist_ok=True)
        if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode != 0:
            subprocess.run(["ip", "link", "add", BRIDGE, "type", "bridge"], check=True)
            subprocess.run(["ip", "addr", "add", BRIDGE_ADDRESS, "dev", BRIDGE], check=True)
            subprocess.run(["ip", "link", "set", BRIDGE, "up"], check=True)
        log = (self.run / "dockerd.log").open("ab")
        subprocess.Popen(self.argv(), stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not self.answering():
            if time.monotonic() > deadline:
                raise RuntimeError(f"private dockerd did not answer within {timeout} s; see {self.run}/dockerd.log")
            time.sleep(0.2)

    def stop(self, timeout: float = 60) -> None:
        """SIGTERM, as a service manager stops the daemon; wait until it has exited."""
        pid = self.pid()
        if pid is None:
            return
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self.pid() == pid and time.monotonic() < deadline:
            time.sleep(0.1)

    def ensure_image(self, image: str) -> str:
        """The image loaded from the machine's engine (once per image id). Returns its id."""
        want = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", image], capture_output=True,
                              text=True, check=True).stdout.strip()  # fmt: skip
        have = self.docker("image", "inspect", "--format", "{{.Id}}", image).stdout.strip()
        if have != want:
            if have:  # the tag's previous image: not kept, so the data root does not grow with each rebuild
                self.docker("rmi", "-f", have)
            save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
            subprocess.run(["docker", "-H", self.host, "load", "-q"], stdin=save.stdout, check=True,
                           capture_output=True)  # fmt: skip
            save.wait()
        return want


if __name__ == "__main__":
    daemon = PrivateDaemon()
    if sys.argv[1:2] == ["start"]:
        daemon.start()
        if len(sys.argv) > 2:
            daemon.ensure_image(sys.argv[2])
        print(daemon.host)
    elif sys.argv[1:2] == ["stop"]:
        daemon.stop()
    else:
        sys.exit(__doc__)
