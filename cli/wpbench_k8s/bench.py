"""`make bench`: what one graded test costs over the bare cost of a container.

    python -m wpbench_k8s.bench --image wpbench-grader:dev [--samples 15]

From one run, sequentially and interleaved, it measures the wall time of
  - `docker run --rm --entrypoint true IMAGE`: container start and stop, the floor; and
  - a trivial passing test through the full lockdown flags, the way the Docker executor runs it;
and prints their medians and ratio (target <= 1.6), plus the time spent inside the container.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

from wpbench_k8s.executor.base import GraderSpec
from wpbench_k8s.executor.docker import lockdown_args
from wpbench_runtime.contract import Assertion, GradeTask, RuntimeChecks, Verdict

TARGET_RATIO = 1.6
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


def graded_argv(image: str) -> list[str]:
    return ["docker", "run", "-i", "--rm", *lockdown_args(GraderSpec(image=image)), image]


def time_floor(image: str) -> float:
    started = time.perf_counter()
    subprocess.run(floor_argv(image), check=True, capture_output=True)
    return time.perf_counter() - started


def time_graded(image: str, payload: str) -> tuple[float, Verdict]:
    started = time.perf_counter()
    proc = subprocess.run(graded_argv(image), input=payload, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    verdict = Verdict.model_validate_json(proc.stdout)
    if verdict.status != "passed":
        raise RuntimeError(f"the trivial test did not pass: {verdict.status}: {verdict.reason}\n{proc.stderr[-2000:]}")
    return wall, verdict


def measure(image: str, samples: int, warmup: int) -> tuple[Samples, Samples]:
    """Interleaves the two kinds of run so drift on the host affects both alike."""
    payload = TRIVIAL_TASK.model_dump_json()
    floor, graded = Samples(), Samples()
    for i in range(warmup + samples):
        floor_wall = time_floor(image)
        graded_wall, verdict = time_graded(image, payload)
        if i < warmup:
            continue
        floor.wall.append(floor_wall)
        graded.wall.append(graded_wall)
        graded.inside_ms.append(verdict.duration_ms)
        boot = re.match(r"ok \((\d+) ms\)", verdict.phases.get("boot", ""))
        if boot:
            graded.boot_ms.append(int(boot.group(1)))
    return floor, graded


def report(console: Console, image: str, floor: Samples, graded: Samples) -> float:
    ratio = graded.median / floor.median
    table = Table(title=f"wpbench bench: {image}, {len(floor.wall)} samples each, sequential")
    table.add_column("measure")
    for name in ("median", "min", "max"):
        table.add_column(name, justify="right")

    def ms(values: list[float]) -> list[str]:
        return [f"{statistics.median(values):.0f} ms", f"{min(values):.0f} ms", f"{max(values):.0f} ms"]

    table.add_row("docker run --rm --entrypoint true", *ms([w * 1000 for w in floor.wall]))
    table.add_row("trivial test, full lockdown (wall)", *ms([w * 1000 for w in graded.wall]))
    table.add_row("  inside the container (verdict)", *ms([float(v) for v in graded.inside_ms]))
    if graded.boot_ms:
        table.add_row("  WordPress boot (runner)", *ms([float(v) for v in graded.boot_ms]))
    console.print(table)
    verdict = "[green]meets[/green]" if ratio <= TARGET_RATIO else "[red]misses[/red]"
    console.print(f"ratio trivial test / bare container: [bold]{ratio:.2f}[/bold] ({verdict} target {TARGET_RATIO})")
    return ratio


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wpbench_k8s.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--image", default="wpbench-grader:dev", help="grader image (default: %(default)s)")
    parser.add_argument("--samples", type=int, default=15, help="measured runs of each kind (default: %(default)s)")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured runs first (default: %(default)s)")
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
    try:
        floor, graded = measure(args.image, args.samples, args.warmup)
    except (RuntimeError, subprocess.CalledProcessError, ValueError) as exc:
        console.print(f"[red]bench failed:[/red] {exc}")
        return 1
    ratio = report(console, args.image, floor, graded)
    if args.json:
        summary = {
            "image": args.image,
            "samples": args.samples,
            "bare_median_s": round(floor.median, 4),
            "trivial_median_s": round(graded.median, 4),
            "inside_median_ms": statistics.median(graded.inside_ms),
            "boot_median_ms": statistics.median(graded.boot_ms) if graded.boot_ms else None,
            "ratio": round(ratio, 3),
        }
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
