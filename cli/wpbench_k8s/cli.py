"""The `wpbench-k8s` command line. Each command lives in `wpbench_k8s.commands.<module>`."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from contextlib import redirect_stderr, redirect_stdout
from typing import TextIO

import click

from wpbench_k8s import __version__
from wpbench_k8s.commands import cancel, dataset, logs, report, requeue, results, runs, status, submit
from wpbench_k8s.commands import run as run_command
from wpbench_k8s.errors import WPBenchError

# Each command module contributes `commands: list[click.Command]`, listed here in `--help` order.
COMMAND_MODULES = (run_command, submit, status, results, runs, logs, cancel, requeue, dataset, report)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="wpbench-k8s")
def cli() -> None:
    """Grade WordPress code written by models: locally on Docker (`run`) or on Kubernetes (`submit`)."""


for _module in COMMAND_MODULES:
    for _command in _module.commands:
        cli.add_command(_command)


def run(argv: Sequence[str], stdout: TextIO, stderr: TextIO) -> int:
    """Run one command line with the given streams and return its exit code (nothing calls sys.exit).

    Exit codes: 0 done, 2 bad input or usage, 130 aborted, a command's own code otherwise
    (`WPBenchError.exit_code`, or what it passed to sys.exit). Tests call this in-process.
    """
    with redirect_stdout(stdout), redirect_stderr(stderr):
        try:
            code = cli.main(args=list(argv), prog_name="wpbench-k8s", standalone_mode=False)
        except click.exceptions.Abort:
            click.echo("aborted", err=True)
            return 130
        except click.ClickException as exc:
            exc.show(file=stderr)
            return 2 if isinstance(exc, click.UsageError | click.BadParameter) else exc.exit_code
        except WPBenchError as exc:
            click.echo(f"error: {exc}", err=True)
            return exc.exit_code
        except SystemExit as exc:  # a command that ends the process with a code (run)
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code if isinstance(code, int) else 0  # click returns an Exit's code (e.g. --help)


def main(argv: list[str] | None = None) -> None:
    """The console script: the process's arguments and streams."""
    sys.exit(run(sys.argv[1:] if argv is None else argv, sys.stdout, sys.stderr))
