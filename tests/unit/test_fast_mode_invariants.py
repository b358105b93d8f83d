"""Invariants of fast mode's reset (runtime/php/verifier/supervisor/sequence.php), read off the sources.

The reset must empty every place a runner can write: each writable `open_basedir` entry and each tmpfs
the executor mounts must lie inside one of `WRITABLE_ROOTS`. A sequence grades each task with the same
`grade()` as a container of its own, prints the verdict before the reset, and says `ready` only after it.
The fork server (runtime/php/native/forkserver.c) forks from a boot that holds no database connection, no
writable shared mapping and no descriptor but its control socket, and each forked runner gets the seccomp
filter again with its own pid; the runtime tests (tests/runtime/test_fast_mode.py) attack it for real.
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
RUNNER = (VERIFIER / "runner" / "runner.php").read_text()
FORKSERVER = (VERIFIER.parent / "native" / "forkserver.c").read_text()
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
    steps = ("grade(", "conclude(", "reset_container()", "lay_out_site(", "END_LINE", "next_runner(")
    body = loop[loop.index("while ( true )") :]
    order = [body.find(s) for s in steps]
    assert -1 not in order and order == sorted(order), "verdict, reset, the next site, the end line, its runner"
    assert "'ready' : 'closed'" in loop and "'' === $left" in loop
    # the reset kills everything but the fork server as PID 1 and checks that nothing else is left
    reset = SEQUENCE[SEQUENCE.index("function reset_container(") :]
    for needed in ("1 !== \\getmypid()", "kill_others( 5.0 )", "/proc/sysvipc/"):
        assert needed in reset, needed
    kill = SANDBOX[SANDBOX.index("function kill_others(") :]
    kill = kill[: kill.index("\n}\n")]
    for needed in ("\\posix_kill( -1, \\SIGKILL )", "other_processes()", "$GLOBALS['wpbench_fork_server']['pid']"):
        assert needed in kill, needed
    assert "$spare  " in kill and "= '';" in kill, "a fork server that died spares nothing (its pid may be reused)"


def test_the_fork_server_forks_only_from_a_clean_boot_and_walls_each_runner_again() -> None:
    serve_php = RUNNER[RUNNER.index("function serve_forks(") :]
    assert serve_php.index("->close()") < serve_php.index("\\wpbench_fork_runner()"), "database closed first"
    assert "db_connect" not in serve_php[: serve_php.index("\n}\n")]
    main = RUNNER[RUNNER.index("function main(") :]
    forked = main[main.index("serve_forks();") :]
    assert forked.index("$out = open_events();") < forked.index("->db_connect()"), "the same descriptors as afresh"
    entry = FORKSERVER[FORKSERVER.index("PHP_FUNCTION(wpbench_fork_runner)") :]
    checks = entry.index("!descriptors_clean() || !mappings_private() || prctl(PR_GET_DUMPABLE")
    assert entry.index("if (!is_server || used)") < entry.index("used = 1;") < checks < entry.index("serve();")
    assert "is_server = started_as_server();" in FORKSERVER[FORKSERVER.index("PHP_MINIT_FUNCTION") :]
    started = FORKSERVER[FORKSERVER.index("static int started_as_server") :]
    assert "type != SOCK_SEQPACKET" in started and "peer.pid == getppid()" in started
    child = FORKSERVER[FORKSERVER.index("static int become_runner") :]
    child = child[: child.index("\n}\n")]
    assert "dup2(ends[i], i)" in child and "deny_foreign_signals((unsigned int) getpid())" in child
    assert "PR_GET_DUMPABLE" in child
    # the supervisor's ends never reach a runner it starts itself
    assert "\\SOCK_SEQPACKET | \\SOCK_CLOEXEC" in SANDBOX and "\\MSG_CMSG_CLOEXEC" in SANDBOX
    # every runner loads the extension, so both modes show a candidate the same functions
    argv = SANDBOX[SANDBOX.index("function runner_argv(") :]
    assert "'extension=' . FORKSERVER_EXTENSION" in argv[: argv.index("\n}\n")]
