"""`make bench`: what one graded test costs over the bare cost of a container, and the whole suite.

    python -m wpbench_gradebench --image wpbench-grader:dev [--samples 15] [--concurrency 2] [--no-suite]

From one run, sequentially and interleaved, it measures the wall time of
  - `docker run --rm --entrypoint true IMAGE`: container start and stop, the floor; and
  - a trivial passing test through the Docker executor (full lockdown, Engine API), as a run grades it
    (so in a container the executor started ahead of need, while the previous run went on);
and prints their medians and ratio (target <= 1.25), plus the time spent inside the container. Then it
grades every reference solution of wpk-core-v1 at the given concurrency (no verdict cache) and prints
the seconds per test (target <= 0.27 at concurrency 2). Both depend on the host's load: it is printed.

The whole suite runs once per execution isolation (container per test, the default, and fast mode,
`fork_per_test`), each run's containers under a cgroup of their own: the summed CPU time of every grader
container (cgroup v1 `cpuacct.usage` of that parent, which keeps what its removed children used) is the
work no scheduling can avoid, so wall / (CPU / cores) says how far the suite is from the physical limit
(1.0), and the two walls say fast mode's throughput against container-per-test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import secrets
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from wpbench_k8s.errors import WPBenchError
from wpbench_k8s.executor.docker import DockerExecutor
from wpbench_k8s.manifest import GraderSpec
from wpbench_k8s.outcome import Scored, decide_outcome
from wpbench_runtime.contract import Assertion, GradeTask, RuntimeChecks, Verdict

TARGET_RATIO = 1.25
TARGET_SUITE_SECONDS_PER_TEST = 0.27
TRIVIAL_TASK = GradeTask(
    test_id="bench-trivial",
    code="function wpbench_bench_answer() { return 42; }",
    runtime_checks=RuntimeChecks(
        assertions=[
            Assertion.model_validate({"type": "returns_value", "function": "wpbench_bench_answer", "expected": 42}),
        ]
    ),
)


@dataclass
class Samples:
    """Wall times (seconds) of one kind of run, plus what the graded runs reported."""

    wall: list[float] = field(default_factory=list)
    inside_ms: list[int] = field(default_factory=list)  # verdict.duration_ms
    boot_ms: list[int] = field(default_factory=list)  # WordPress boot, from verdict.phases

    @property
    def median(self) -> float:
        return statistics.median(self.wall)


def floor_argv(image: str) -> list[str]:
    return ["docker", "run", "--rm", "--entrypoint", "true", image]


def time_floor(image: str) -> float:
    started = time.perf_counter()
    subprocess.run(floor_argv(image), check=True, capture_output=True)
    return time.perf_counter() - started


def time_graded(executor: DockerExecutor) -> tuple[float, Verdict]:
    started = time.perf_counter()
    facts = executor.run_grader(TRIVIAL_TASK)
    wall = time.perf_counter() - started
    decision = decide_outcome(facts)
    if not isinstance(decision, Scored) or decision.verdict.status != "passed":
        raise RuntimeError(f"the trivial test did not pass: {decision}\n{facts.stderr[-2000:]}")
    return wall, decision.verdict


def measure(image: str, samples: int, warmup: int) -> tuple[Samples, Samples]:
    """Interleaves the two kinds of run so drift on the host affects both alike."""
    executor = DockerExecutor(GraderSpec(image=image), "bench")
    executor.preflight()
    floor, graded = Samples(), Samples()
    try:
        return _measure(executor, image, samples, warmup, floor, graded)
    finally:
        executor.cleanup()


def _measure(
    executor: DockerExecutor, image: str, samples: int, warmup: int, floor: Samples, graded: Samples
) -> tuple[Samples, Samples]:
    for i in range(warmup + samples):
        floor_wall = time_floor(image)
        graded_wall, verdict = time_graded(executor)
        if i < warmup:
            continue
        floor.wall.append(floor_wall)
        graded.wall.append(graded_wall)
        graded.inside_ms.append(verdict.duration_ms)
        boot = re.match(r"ok \((\d+) ms\)", verdict.phases.get("boot", ""))
        if boot:
            graded.boot_ms.append(int(boot.group(1)))
    return floor, graded


@dataclass
class SuiteRun:
    tests: int
    passed: int
    wall: float
    concurrency: int
    isolation: str = "reset_per_test"
    grader_cpu: float | None = None  # seconds, summed over every grader container (None: no cgroup to read)
    executor_cpu: float = 0.0  # seconds of this process (the executor, the pipeline)

    @property
    def per_test(self) -> float:
        return self.wall / self.tests

    @property
    def limit_ratio(self) -> float | None:
        """wall / (grader CPU / cores): 1.0 is the physical limit of this host."""
        cores = os.cpu_count() or 1
        return self.wall / (self.grader_cpu / cores) if self.grader_cpu else None


CGROUP_ROOT = Path("/sys/fs/cgroup")


def cgroup_cpu_seconds(parent: str) -> float | None:
    """CPU time charged to a cgroup (v1 cpuacct, else v2 cpu.stat), in seconds; None when unreadable."""
    try:
        return int((CGROUP_ROOT / "cpuacct" / parent.lstrip("/") / "cpuacct.usage").read_text()) / 1e9
    except (OSError, ValueError):
        pass
    try:
        stat = dict(line.split() for line in (CGROUP_ROOT / parent.lstrip("/") / "cpu.stat").read_text().splitlines())
        return int(stat["usage_usec"]) / 1e6
    except (OSError, ValueError, KeyError):
        return None


def remove_cgroup(parent: str) -> None:
    """Removes the (empty) parent cgroup the engine made for the bench, in every hierarchy."""
    for hierarchy in [CGROUP_ROOT, *CGROUP_ROOT.iterdir()] if CGROUP_ROOT.is_dir() else []:
        with contextlib.suppress(OSError):
            (hierarchy / parent.lstrip("/")).rmdir()


def whole_suite(
    image: str, concurrency: int, suite: str = "wpk-core-v1", isolation: str = "reset_per_test"
) -> SuiteRun:
    """Every reference solution of the suite, graded as `run --check-reference-solution --no-cache` does."""
    from wpbench_k8s.config import load_config
    from wpbench_k8s.pipeline import ItemGrader, execute_manifest, plan_run

    config = load_config(None, {"grader.image": image, "run.suite": suite, "run.execution_concurrency": concurrency,
                                "run.continue_on_error": True, "run.execution_isolation": isolation})  # fmt: skip
    manifest = plan_run(config, "reference")
    # The reference solutions only, as measured before tests carried alternative solutions: figures stay comparable.
    manifest.items = [item for item in manifest.items if item.variant == "baseline"]
    executor = DockerExecutor(manifest.grader, manifest.run_id)
    executor.cgroup_parent = f"/wpbench-bench-{secrets.token_hex(4)}"
    manifest.grader = executor.preflight()
    own_before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    try:
        outcome = execute_manifest(manifest, ItemGrader(manifest, executor), lambda record: None)
    finally:
        wall = time.perf_counter() - started
        executor.cleanup()  # every container removed: the parent cgroup holds all they used
    own_after = resource.getrusage(resource.RUSAGE_SELF)
    grader_cpu = cgroup_cpu_seconds(executor.cgroup_parent)
    remove_cgroup(executor.cgroup_parent)
    passed = sum(r.scores.execution_pass for r in outcome.records)
    own = (own_after.ru_utime - own_before.ru_utime) + (own_after.ru_stime - own_before.ru_stime)
    return SuiteRun(tests=len(manifest.items), passed=passed, wall=wall, concurrency=concurrency, isolation=isolation,
                    grader_cpu=grader_cpu, executor_cpu=own)  # fmt: skip


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def report(console: Console, image: str, floor: Samples, graded: Samples) -> float:
    ratio = graded.median / floor.median
    table = Table(title=f"wpbench bench: {image}, {len(floor.wall)} samples each, sequential")
    table.add_column("measure")
    for name in ("median", "min", "max"):
        table.add_column(name, justify="right")

    def ms(values: list[float]) -> list[str]:
        return [f"{statistics.median(values):.0f} ms", f"{min(values):.0f} ms", f"{max(values):.0f} ms"]

    table.add_row("docker run --rm --entrypoint true", *ms([w * 1000 for w in floor.wall]))
    table.add_row("trivial test, Docker executor (wall)", *ms([w * 1000 for w in graded.wall]))
    table.add_row("  inside the container (verdict)", *ms([float(v) for v in graded.inside_ms]))
    if graded.boot_ms:
        table.add_row("  WordPress boot (runner)", *ms([float(v) for v in graded.boot_ms]))
    console.print(table)
    verdict = "[green]meets[/green]" if ratio <= TARGET_RATIO else "[red]misses[/red]"
    console.print(f"ratio trivial test / bare container: [bold]{ratio:.2f}[/bold] ({verdict} target {TARGET_RATIO})")
    return ratio


ISOLATIONS = ("reset_per_test", "fork_per_test")
TARGET_FAST_SPEEDUP = 5.0
TARGET_LIMIT_RATIO = 1.5


def report_suites(console: Console, suites: list[SuiteRun]) -> None:
    cores = os.cpu_count() or 1
    first = suites[0]
    table = Table(title=f"whole suite wpk-core-v1, {first.tests} reference solutions, concurrency {first.concurrency}, "
                        f"{cores} cores")  # fmt: skip
    for name in ("execution isolation", "wall", "s/test", "grader CPU (cgroups)", "CPU/test", "wall / (CPU / cores)",
                 "executor CPU", "passed"):  # fmt: skip
        table.add_column(name, justify="left" if name == "execution isolation" else "right")
    for suite in suites:
        cpu = suite.grader_cpu
        table.add_row(
            suite.isolation,
            f"{suite.wall:.1f} s",
            f"{suite.per_test:.3f}",
            f"{cpu:.1f} s" if cpu else "unreadable",
            f"{cpu * 1000 / suite.tests:.0f} ms" if cpu else "-",
            f"{suite.limit_ratio:.2f}" if suite.limit_ratio else "-",
            f"{suite.executor_cpu:.1f} s",
            f"{suite.passed}/{suite.tests}",
        )
    console.print(table)
    default = suites[0]
    verdict = "[green]meets[/green]" if default.per_test <= TARGET_SUITE_SECONDS_PER_TEST else "[red]misses[/red]"
    console.print(f"container per test: [bold]{default.per_test:.3f} s/test[/bold] ({verdict} target "
                  f"{TARGET_SUITE_SECONDS_PER_TEST})")  # fmt: skip
    fast = next((s for s in suites if s.isolation == "fork_per_test"), None)
    if fast is not None:
        speedup = default.wall / fast.wall
        verdict = "[green]meets[/green]" if speedup >= TARGET_FAST_SPEEDUP else "[red]misses[/red]"
        console.print(f"fast mode throughput: [bold]{speedup:.2f}x[/bold] container per test ({verdict} goal "
                      f"{TARGET_FAST_SPEEDUP:g}x)")  # fmt: skip
        if fast.limit_ratio:
            verdict = "[green]meets[/green]" if fast.limit_ratio <= TARGET_LIMIT_RATIO else "[red]misses[/red]"
            console.print(f"fast mode wall / physical limit: [bold]{fast.limit_ratio:.2f}[/bold] ({verdict} goal "
                          f"<= {TARGET_LIMIT_RATIO:g})")  # fmt: skip
    console.print("fast mode (fork_per_test) is for development; published numbers come from container per test")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wpbench_gradebench", description=__doc__.split("\n")[0])
    parser.add_argument("--image", default="wpbench-grader:dev", help="grader image (default: %(default)s)")
    parser.add_argument("--samples", type=int, default=15, help="measured runs of each kind (default: %(default)s)")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured runs first (default: %(default)s)")
    parser.add_argument("--concurrency", type=int, default=2, help="whole-suite concurrency (default: %(default)s)")
    parser.add_argument("--no-suite", action="store_true", help="skip the whole-suite run")
    parser.add_argument("--json", action="store_true", help="also print the numbers as one JSON line")
    args = parser.parse_args(argv)
    if args.samples < 1:
        parser.error("--samples must be at least 1")
    console = Console()
    try:
        inspect = subprocess.run(["docker", "image", "inspect", args.image], capture_output=True, check=False)
    except FileNotFoundError:
        console.print("[red]docker CLI not found[/red]: run `make docker` (scripts/ensure-docker.sh)")
        return 2
    if inspect.returncode != 0:
        console.print(f"[red]image {args.image} not found[/red]: build it with `make runtime-image`")
        return 2
    load_before = load_average()
    try:
        floor, graded = measure(args.image, args.samples, args.warmup)
        suites = [] if args.no_suite else [whole_suite(args.image, args.concurrency, isolation=i) for i in ISOLATIONS]
    except (RuntimeError, subprocess.CalledProcessError, ValueError, WPBenchError) as exc:
        console.print(f"[red]bench failed:[/red] {exc}")
        return 1
    ratio = report(console, args.image, floor, graded)
    if suites:
        report_suites(console, suites)
    load_after = load_average()
    console.print(f"host load average (1/5/15 min): before {load_before}, after {load_after}; {os.cpu_count()} CPUs")
    if args.json:
        summary = {
            "image": args.image,
            "samples": args.samples,
            "bare_median_s": round(floor.median, 4),
            "trivial_median_s": round(graded.median, 4),
            "inside_median_ms": statistics.median(graded.inside_ms),
            "boot_median_ms": statistics.median(graded.boot_ms) if graded.boot_ms else None,
            "ratio": round(ratio, 3),
            "suites": [
                {
                    "execution_isolation": suite.isolation,
                    "tests": suite.tests,
                    "passed": suite.passed,
                    "wall_s": round(suite.wall, 2),
                    "s_per_test": round(suite.per_test, 4),
                    "concurrency": suite.concurrency,
                    "grader_cpu_s": round(suite.grader_cpu, 2) if suite.grader_cpu else None,
                    "grader_cpu_ms_per_test": round(suite.grader_cpu * 1000 / suite.tests)
                    if suite.grader_cpu
                    else None,
                    "wall_over_limit": round(suite.limit_ratio, 2) if suite.limit_ratio else None,
                    "executor_cpu_s": round(suite.executor_cpu, 2),
                }
                for suite in suites
            ],
            "load_before": load_before,
            "load_after": load_after,
        }
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
