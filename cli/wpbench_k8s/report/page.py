"""The report as one self-contained HTML file: no network at view time.

plotly.js (from the plotly package) and the per-test records are embedded gzip-compressed and
base64-encoded, and inflated by the browser's DecompressionStream: 4.8 MB of plotly.js take 2 MB.
"""

from __future__ import annotations

import base64
import gzip
import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from wpbench_k8s import __version__
from wpbench_k8s.report.charts import build_charts
from wpbench_k8s.report.view import Report, pygments_css

_HERE = resources.files("wpbench_k8s.report")


def _packed(data: bytes) -> str:
    # mtime=0: the same input gives the same file
    return base64.b64encode(gzip.compress(data, compresslevel=9, mtime=0)).decode("ascii")


@cache
def plotly_js() -> str:
    """plotly.js as shipped by the plotly package, packed."""
    source = resources.files("plotly") / "package_data" / "plotly.min.js"
    return _packed(source.read_bytes())


def _fmt(value: float | None, spec: str = "{:.2f}") -> str:
    return "—" if value is None else spec.format(value)


def _signed(value: float | None, spec: str = "{:+.2f}") -> str:
    return "—" if value is None else spec.format(value)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = _fmt
    env.filters["signed"] = _signed
    return env


def render(report: Report) -> str:
    charts = build_charts(report)
    template = _environment().from_string((_HERE / "report.html.j2").read_text(encoding="utf-8"))
    records = json.dumps(report.records, separators=(",", ":"), default=str).encode("utf-8")
    context: dict[str, Any] = {
        "report": report,
        "charts": charts,
        "version": __version__,
        "css": (_HERE / "report.css").read_text(encoding="utf-8") + pygments_css(),
        "script": (_HERE / "report.js").read_text(encoding="utf-8"),
        "plotly_js": plotly_js(),
        "records_packed": _packed(records),
    }
    return template.render(**context)


def write_page(report: Report, path: Path) -> int:
    """Write atomically (a failed render leaves nothing behind); returns the size in bytes."""
    from wpbench_k8s.outputs import atomic_write

    html = render(report)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, html)
    return len(html.encode("utf-8"))
