"""The `wpbench-k8s` command line. Each command lives in `wpbench_k8s.commands.<module>`."""

from __future__ import annotations

import importlib
import sys

import click

from wpbench_k8s import __version__
from wpbench_k8s.errors import WPBenchError

# Modules under wpbench_k8s.commands that contribute commands; each has `commands: list[click.Command]`.
COMMAND_MODULES = ("run", "dataset", "cluster", "report")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="wpbench-k8s")
def cli() -> None:
    """Grade WordPress code written by models: locally on Docker (`run`) or on Kubernetes (`submit`)."""


for _name in COMMAND_MODULES:
    try:
        _module = importlib.import_module(f"wpbench_k8s.commands.{_name}")
    except ModuleNotFoundError as exc:  # a command module not written yet
        if exc.name != f"wpbench_k8s.commands.{_name}":
            raise
        continue
    for _command in _module.commands:
        cli.add_command(_command)


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="wpbench-k8s", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2 if isinstance(exc, click.UsageError | click.BadParameter) else exc.exit_code)
    except WPBenchError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except SystemExit:
        raise
