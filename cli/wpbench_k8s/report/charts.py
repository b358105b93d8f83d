"""The report's charts as Plotly figures (plotly.js draws them in the page).

Each chart says how many marks it draws (bars, points, heatmap cells), so a browser test can
check that what the page shows matches the data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
from plotly.utils import PlotlyJSONEncoder

from wpbench_k8s.report.view import Entry, Report

RADAR_MODELS = 5  # upstream's radar shows the top models; more lines are unreadable
_LAYOUT = {"margin": {"l": 60, "r": 20, "t": 30, "b": 60}, "font": {"size": 12}, "template": "plotly_white"}
_STATUS_COLOURS = {"passed": "#2e7d32", "failed": "#e65100", "error": "#c62828", "timeout": "#6a1b9a",
                   "harness_error": "#455a64", "infra_error": "#90a4ae", "not_graded": "#bdbdbd"}  # fmt: skip


@dataclass
class Chart:
    id: str
    title: str
    figure: go.Figure
    marks: int  # bars (zero-height ones too), points or heatmap cells drawn
    mark: str  # "bar", "point" or "cell"
    height: int = 380
    note: str = ""

    def figure_json(self) -> str:
        return json.dumps(self.figure.to_plotly_json(), cls=PlotlyJSONEncoder, separators=(",", ":"))


def _layout(fig: go.Figure, height: int, **extra: Any) -> go.Figure:
    fig.update_layout(height=height, **_LAYOUT, **extra)
    return fig


def short_labels(entries: list[Entry], width: int = 40) -> list[str]:
    """Axis labels: long names (an authored exploit's description) cut, still one per entry."""
    labels = [e.label if len(e.label) <= width else e.label[: width - 1] + "…" for e in entries]
    return [f"{label} #{i + 1}" if labels.count(label) > 1 else label for i, label in enumerate(labels)]


def overall_chart(entries: list[Entry]) -> Chart:
    """Score and execution pass rate per model; `--runs N` adds ± std error bars."""
    labels = short_labels(entries)
    with_std = any(e.score_std is not None for e in entries)
    score = go.Bar(
        name="score",
        x=labels,
        y=[e.score for e in entries],
        error_y={"type": "data", "array": [e.score_std or 0 for e in entries], "visible": with_std},
        text=[f"{e.score:.2f}" if e.score is not None else "" for e in entries],
        textposition="outside",
        marker_color="#1565c0",
    )
    rates = [e.execution_pass_rate for e in entries]
    passed = go.Bar(
        name="execution pass rate",
        x=labels,
        y=rates,
        error_y={"type": "data", "array": [e.pass_rate_std or 0 for e in entries], "visible": with_std},
        marker_color="#90caf9",
    )
    fig = _layout(go.Figure([score, passed]), 380, barmode="group", yaxis={"range": [0, 1.12]},
                  legend={"orientation": "h", "y": 1.1})  # fmt: skip
    marks = 2 * len(entries)  # plotly draws a flat bar for a missing value too
    note = "error bars: standard deviation over runs" if with_std else ""
    return Chart("chart-overall", "Overall scores", fig, marks, "bar", note=note)


def _heatmap(chart_id: str, title: str, entries: list[Entry], columns: list[str], attr: str) -> Chart:
    z = [[getattr(e, attr).get(c) for c in columns] for e in entries]
    text = [["" if v is None else f"{v:.2f}" for v in row] for row in z]
    fig = go.Figure(
        go.Heatmap(
            z=z, x=columns, y=short_labels(entries), zmin=0, zmax=1, colorscale="RdYlGn", text=text,
            texttemplate="%{text}", hovertemplate="%{y}<br>%{x}: %{z:.2f}<extra></extra>", xgap=2, ygap=2,
        )
    )  # fmt: skip
    height = max(260, 90 + 36 * len(entries))
    _layout(fig, height, yaxis={"autorange": "reversed", "automargin": True}, xaxis={"automargin": True})
    cells = sum(v is not None for row in z for v in row)
    return Chart(chart_id, title, fig, cells, "cell", height=height)


def radar_chart(entries: list[Entry], categories: list[str]) -> Chart | None:
    """Category scores of the top models (by score), like upstream's notebook, over the categories
    all of them were graded in (a missing category is not a zero). Needs three such categories."""
    top = sorted((e for e in entries if e.headline is not None), key=lambda e: -(e.headline or 0))[:RADAR_MODELS]
    shared = [c for c in categories if all(e.categories.get(c) is not None for e in top)]
    if len(shared) < 3:
        return None
    traces = []
    for e, name in zip(top, short_labels(top), strict=True):
        values = [e.categories[c] for c in shared]
        traces.append(go.Scatterpolar(r=[*values, values[0]], theta=[*shared, shared[0]], name=name,
                                      mode="lines+markers", fill="toself", opacity=0.6))  # fmt: skip
    fig = _layout(go.Figure(traces), 460, polar={"radialaxis": {"range": [0, 1]}}, legend={"orientation": "h"})
    # the closing point repeats the first, so each line draws one marker more than it has categories
    return Chart("chart-radar", f"Top {len(top)} models by category", fig, len(top) * (len(shared) + 1),
                 "point", height=460)  # fmt: skip


def cost_chart(entries: list[Entry]) -> Chart:
    shown = [e for e in entries if e.headline is not None]
    fig = go.Figure(
        go.Scatter(
            x=[e.cost_usd for e in shown], y=[e.headline for e in shown], text=short_labels(shown),
            mode="markers+text", textposition="middle right", marker={"size": 12, "color": "#1565c0"},
            hovertemplate="%{text}<br>cost $%{x:.4f}<br>overall %{y:.2f}<extra></extra>",
        )
    )  # fmt: skip
    _layout(fig, 380, xaxis={"title": "model cost (USD)", "rangemode": "tozero"},
            yaxis={"title": "overall (the headline score)", "range": [-0.05, 1.1]})  # fmt: skip
    note = "" if any(e.cost_usd for e in shown) else "no model call reported a cost"
    return Chart("chart-cost", "Cost vs score", fig, len(shown), "point", note=note)


def skills_chart(report: Report) -> Chart | None:
    deltas = [(run.label, d) for run in report.runs for d in run.skills_delta]
    if not deltas:
        return None
    prefix = len(report.runs) > 1
    labels = [f"{run} · {d.model}" if prefix else d.model for run, d in deltas]
    fig = go.Figure(
        [
            go.Bar(name="Δ score", x=labels, y=[d.score for _, d in deltas], marker_color="#00897b"),
            go.Bar(name="Δ pass rate", x=labels, y=[d.pass_rate for _, d in deltas], marker_color="#80cbc4"),
        ]
    )
    _layout(fig, 340, barmode="group", yaxis={"title": "with skills - baseline", "range": [-1.05, 1.05]},
            legend={"orientation": "h", "y": 1.1})  # fmt: skip
    marks = 2 * len(deltas)
    return Chart("chart-skills", "Skills A/B: Δ per model", fig, marks, "bar", height=340)


def status_chart(entries: list[Entry]) -> Chart:
    """Grader statuses per model: what the failures were."""
    statuses = sorted({s for e in entries for s in e.statuses}, key=lambda s: (s != "passed", s))
    traces = [
        go.Bar(name=s, x=short_labels(entries), y=[e.statuses.get(s, 0) for e in entries],
               marker_color=_STATUS_COLOURS.get(s))
        for s in statuses
    ]  # fmt: skip
    fig = _layout(go.Figure(traces), 340, barmode="stack", yaxis={"title": "records"},
                  legend={"orientation": "h", "y": 1.12})  # fmt: skip
    marks = len(statuses) * len(entries)  # plotly draws a (flat) bar for a zero count too
    return Chart("chart-statuses", "Grader statuses", fig, marks, "bar", height=340)


def build_charts(report: Report) -> list[Chart]:
    entries = report.entries
    charts: list[Chart | None] = [
        overall_chart(entries),
        cost_chart(entries),
        _heatmap("chart-categories", "Score by category", entries, report.categories, "categories")
        if report.categories
        else None,
        _heatmap("chart-difficulty", "Score by difficulty", entries, report.difficulties, "difficulties")
        if report.difficulties
        else None,
        radar_chart(entries, report.categories),
        skills_chart(report),
        status_chart(entries),
    ]
    return [c for c in charts if c is not None]
