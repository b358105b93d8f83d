"""The small set of errors the CLI turns into exit codes."""

from __future__ import annotations

import sys

from pydantic import ValidationError


def warn(message: str) -> None:
    """A warning about accepted input (the run goes on): one line on stderr."""
    print(f"warning: {message}", file=sys.stderr)


class WPBenchError(Exception):
    """Base for errors the CLI reports without a traceback."""

    exit_code = 1


class InputError(WPBenchError):
    """Bad input (config, dataset, completions, flags): the message names the file and field."""

    exit_code = 2


class ExecutorError(WPBenchError):
    """The execution backend could not run at all (no Docker engine, image missing, ...)."""

    exit_code = 3


class InfraError(WPBenchError):
    """The infrastructure failed for one task (container could not start, pod evicted, ...).

    Retried a bounded number of times; if it persists the record says infra_error, never a
    model failure.
    """

    exit_code = 3


class OutputWriteError(WPBenchError):
    """A result file could not be written (disk full, read-only, gone). The .partial file keeps every
    record written before, and `wpbench-k8s run --resume` continues from it."""

    exit_code = 5


def first_error(exc: ValidationError) -> tuple[str, str]:
    """(dotted field path, message) of a pydantic error, for messages that name the field."""
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"])
    message = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
    return field, message
