"""Invariants of fast mode's reset (runtime/php/verifier/supervisor/sequence.php), read off the sources.

The reset must empty every place a runner can write: each writable `open_basedir` entry and each tmpfs
the executor mounts must lie inside one of `WRITABLE_ROOTS`. A sequence grades each task with the same
`grade()` as a container of its own, prints the verdict before the reset, and says `ready` only after it.
"""

from __future__ import annotations

import re
from pathlib import Path

from wpbench_k8s.executor.docker import lockdown_args
from wpbench_k8s.manifest import GraderSpec

VERIFIER = Path(__file__).resolve().parents[2] / "runtime" / "php" / "verifier"
SEQUENCE = (VERIFIER / "supervisor" / "sequence.php").read_text()
SANDBOX = (VERIFIER / "supervisor" / "sandbox.php").read_text()
ENTRY = (VERIFIER / "wpbench-grade").read_text()
RUN_DIR = re.search(r"const RUN_DIR\s*=\s*'([^']+)'", SANDBOX).group(1)  # type: ignore[union-attr]


def writable_roots() -> list[str]:
    body = re.search(r"const WRITABLE_ROOTS = array\((.*?)\);", SEQUENCE, re.S).group(1)  # type: ignore[union-attr]
    roots = re.findall(r"(RUN_DIR|'[^']+')\s*=>", body)
    return [RUN_DIR if r == "RUN_DIR" else r.strip("'") for r in roots]


def open_basedir() -> list[str]:
    line = re.search(r"const OPEN_BASEDIR = (.*?);", SANDBOX).group(1)  # type: ignore[union-attr]
    text = "".join(RUN_DIR if part.strip() == "RUN_DIR" else part.strip().strip("'") for part in line.split("."))
    return [p.rstrip("/") for p in text.split(":") if p]


def inside(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r + "/") for r in roots)


def test_every_writable_place_of_the_runner_is_reset() -> None:
    roots = writable_roots()
    assert RUN_DIR in roots and "/tmp" in roots
    writable = [p for p in open_basedir() if not p.startswith("/opt/")]  # /opt is the read-only image
    assert writable and all(inside(p, roots) for p in writable), (writable, roots)


def test_every_tmpfs_the_executor_mounts_is_reset() -> None:
    args = lockdown_args(GraderSpec())
    mounts = [args[i + 1].split(":")[0] for i, a in enumerate(args) if a == "--tmpfs"]
    assert mounts and all(inside(m, writable_roots()) for m in mounts), mounts
    assert "--ipc" in args and args[args.index("--ipc") + 1] == "none"  # no /dev/shm in the first place


def test_a_sequence_grades_as_a_single_container_does_and_resets_before_ready() -> None:
    assert "grade( static fn(): string => read_input( $argv ), $info, $mode, false )" in ENTRY
    loop = SEQUENCE[SEQUENCE.index("function sequence(") : SEQUENCE.index("function reset_container(")]
    order = [loop.index(s) for s in ("grade(", "conclude(", "reset_container()", "prepare_site(", "END_LINE")]
    assert order == sorted(order), "verdict, then reset, then the next site, then the end line"
    assert "'ready' : 'closed'" in loop and "'' === $left" in loop
    # the reset kills everything as PID 1 and checks that nothing is left
    reset = SEQUENCE[SEQUENCE.index("function reset_container(") :]
    for needed in ("1 !== \\getmypid()", "\\posix_kill( -1, \\SIGKILL )", "other_processes()", "/proc/sysvipc/"):
        assert needed in reset, needed
