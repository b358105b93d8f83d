"""Flags as small structs: each command turns click's keyword arguments into a frozen dataclass of its
own (`flags_from`) and hands it to one library call. Shared here: the cluster flags."""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable
from typing import Any, TypeVar

import click

from wpbench_k8s.cluster.connection import DEFAULT_NAMESPACE, Cluster, cluster_errors

T = TypeVar("T")
REQUEST_TIMEOUT = 10.0  # seconds, kubectl's --request-timeout for our cluster commands
F = Callable[..., Any]


def flags_from(cls: type[T], params: dict[str, Any]) -> T:
    """An instance of the dataclass `cls` from click's params: each field by its name; a field that is
    itself a flags dataclass is built from the same params."""
    hints = typing.get_type_hints(cls)
    values = {}
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        kind = hints[field.name]
        nested = isinstance(kind, type) and dataclasses.is_dataclass(kind)
        values[field.name] = flags_from(kind, params) if nested else params.get(field.name)
    return cls(**values)


def add_options(func: F, options: list[Callable[[F], F]]) -> F:
    for option in reversed(options):
        func = option(func)
    return func


@dataclasses.dataclass(frozen=True)
class ClusterFlags:
    """Where the run lives, as kubectl spells it."""

    kubeconfig: str | None
    context: str | None
    namespace: str | None
    request_timeout: float | None = REQUEST_TIMEOUT

    def connect(self) -> Cluster:
        return Cluster(self.kubeconfig, self.context, self.namespace, request_timeout=self.request_timeout)


def cluster_options(func: F) -> F:
    """--kubeconfig, --context, --namespace/-n, --request-timeout (the fields of ClusterFlags)."""
    return add_options(func, [
        click.option("--kubeconfig", envvar="KUBECONFIG", type=click.Path(dir_okay=False), help="kubeconfig file."),
        click.option("--context", help="kubeconfig context (default: the current one)."),
        click.option("--namespace", "-n", help=f"Namespace (default: the context's, else {DEFAULT_NAMESPACE})."),
        click.option("--request-timeout", type=click.FloatRange(min=0.1, max=600), default=REQUEST_TIMEOUT,
                     show_default=True,
                     help="Seconds one API request may take (never resent once the server has it); an unanswering "
                          "server fails in one line naming it (exit 3)."),
    ])  # fmt: skip


def reports_cluster_errors(func: F) -> F:
    """A command whose API server cannot be reached, or refuses, says so in one line (exit 3)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with cluster_errors():
            return func(*args, **kwargs)

    return wrapper


OUTPUT_FORMATS = ("json", "yaml")


def output_format_option(*names: str) -> Callable[[F], F]:
    """`-o/--output-format json|yaml` (kubectl's -o): the command prints one document scripts can read."""
    return click.option(
        *names,
        "output_format",
        type=click.Choice(OUTPUT_FORMATS),
        default=None,
        help="Print one machine-readable document (json or yaml) on stdout instead of text.",
    )


def emit(doc: Any, output_format: str) -> None:
    """Print `doc` as JSON or YAML on stdout."""
    if output_format == "yaml":
        import yaml

        click.echo(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), nl=False)
    else:
        import json

        click.echo(json.dumps(doc, indent=2, ensure_ascii=False))


def plain_console(stderr: bool = False) -> Any:
    """A rich Console for the command's text: outside a terminal (CI, pipes) nothing is cut at 80 columns."""
    from rich.console import Console

    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(stderr=stderr, width=1000, soft_wrap=True)
