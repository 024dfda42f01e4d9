"""The HTML report: one self-contained file, charts drawn by plotly (the ``report`` extra).

Theory of operation
-------------------
:mod:`asc_aprof._outputs._report_model` computes everything shown; this module only lays it out. The page
inlines plotly.js once in its head and every chart as a plotly figure (SVG in the browser), so the
file opens offline: no CDN, no fetch, no font download. plotly is imported here, lazily, and
this module is imported only by :func:`write_report` (never by ``import asc_aprof``).

Sections, in order: the inputs; per (device, kernel) the duration distribution (a violin of the
samples, thinned to 2,000 evenly spread quantiles when there are more, and the median with its
95 % interval as a marker) and a table; the hardware counters and the bound verdict when the data
has counters (:func:`counters_block` draws one kernel's, from a mapping name -> value and a verdict
string); per chip, the roofline (log-log: arithmetic intensity against achieved operations per
second, one point per kernel, the memory slopes and compute ceilings of the chip) or, where the
counters give no intensity, speed-of-light bars (each resource's fraction of its peak, a marker at
the largest), or a sentence saying why there is neither; for two inputs compared, base vs new
per kernel with intervals and the regression
verdict; for sweeps, case vs median with intervals; a small timeline overview; the methods.

Every chart sits in a ``<div class="aprof-chart" data-chart="...">``, so a test can find them all
and check each one rendered.
"""

from __future__ import annotations

import datetime as _dt
import html
import itertools
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from .._model._errors import UsageError
from .._plans._sol import MEMORY_RESOURCES, ChipFacts
from .._plans._verdict import SOL_BOUND
from .._runs._info import RunInfo
from .._version import __version__
from ._replace import replacing
from ._report_model import (
    TIMELINE_BINS,
    TIMELINE_TASKS,
    CaseView,
    ChangeView,
    KernelView,
    MedianInterval,
    ReportModel,
    RooflineKind,
    RooflineView,
    TimelineRow,
    case_order,
)


def install_hint() -> str:
    """How to get plotly where the user is: from a source checkout, the extra of the checkout."""
    checkout = Path(__file__).resolve().parents[3]
    if (checkout / "pyproject.toml").is_file() and (checkout / "src" / "asc_aprof").is_dir():
        how = f"pip install -e '{checkout}[report]' (or pip install plotly)"
    else:
        how = "pip install 'asc-aprof[report]' (or pip install plotly)"
    return f"the HTML report needs plotly, which is not installed here: {how}"


#: Distribution and sweep charts drawn at most (kernels by total time); the tables list them all.
MAX_KERNEL_CHARTS: Final = 24
CONFIG: Final = {"displaylogo": False, "responsive": True}

_CSS: Final = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; color: #1f2933;
       background: #f7f8fa; }
header { background: #1f3a5f; color: #fff; padding: 18px 28px; }
header h1 { margin: 0 0 4px 0; font-size: 22px; }
header p { margin: 0; opacity: .85; font-size: 13px; }
nav { padding: 8px 28px; background: #e8edf3; font-size: 13px; }
nav a { margin-right: 16px; color: #1f3a5f; }
main { padding: 8px 28px 40px 28px; }
section { background: #fff; border: 1px solid #dde3ea; border-radius: 6px; padding: 12px 18px;
          margin: 16px 0; }
details { margin: 2px 0 6px 0; font-size: 13px; }
summary { cursor: pointer; }
h2 { font-size: 18px; margin: 6px 0 10px 0; }
h3 { font-size: 15px; margin: 14px 0 6px 0; }
table { border-collapse: collapse; font-size: 12.5px; margin: 6px 0; }
th, td { border-bottom: 1px solid #e4e8ee; padding: 3px 9px; text-align: left; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(600px, 1fr)); gap: 10px; }
.aprof-chart { min-height: 260px; }
.verdict { font-weight: 600; }
.REGRESSION { color: #b42318; font-weight: 700; }
.faster { color: #067647; font-weight: 700; }
.muted { color: #667085; font-size: 12.5px; }
.counters { display: inline-block; vertical-align: top; margin: 4px 18px 8px 0; }
"""


def _plotly() -> Any:
    try:
        import plotly.graph_objects as go
        import plotly.offline
    except ImportError as exc:
        raise UsageError(install_hint()) from exc
    return go, plotly.offline


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value != 0 and abs(value) < 0.01:
        return f"{value:.4g}"
    return f"{value:,.3f}"


def _interval(m: MedianInterval) -> str:
    if m.count == 1:
        return "- (1 sample)"
    return f"[{_fmt(m.low)}, {_fmt(m.high)}]" + ("" if m.coverage >= 0.95 else f" (covers {m.coverage:.0%})")


def _device(device: int | None) -> str:
    return "host" if device is None else str(device)


def _where(group: str | None, device: int | None, case: str | None = None) -> str:
    return (
        (f"{group} · " if group else "")
        + (f"case {case} · " if case is not None else "")
        + ("host" if device is None else f"device {device}")
    )


class _Page:
    """Figures into divs, with one id counter per page."""

    def __init__(self) -> None:
        self.go, self.offline = _plotly()
        self._ids = itertools.count(1)
        self.charts = 0

    def figure(self, fig: Any, name: str, height: int = 320) -> str:
        fig.update_layout(
            template="plotly_white",
            height=height,
            margin={"l": 60, "r": 20, "t": 48, "b": 50},
            font={"size": 12},
            legend={"font": {"size": 11}},
        )
        div_id = f"aprof-chart-{next(self._ids)}"
        self.charts += 1
        body = fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config=CONFIG)
        return f'<div class="aprof-chart" data-chart="{_e(name)}">{body}</div>'


def counters_block(counters: Mapping[str, float | None], verdict: str | None) -> str:
    """One kernel's counters (medians by column name) and its bound verdict, as an HTML fragment.

    The counters issue's per-kernel summary plugs in here: give it the counter medians and the
    verdict its rule reached (None: no verdict shown).
    """
    rows = "".join(
        f'<tr><td>{_e(name)}</td><td class="num">{_fmt(value)}</td></tr>' for name, value in counters.items()
    )
    shown = (
        f'<span class="verdict">{_e(verdict)}</span>' if verdict else '<span class="muted">no verdict</span>'
    )
    return (
        f"<details><summary>{len(counters)} counters · bound verdict: {shown}</summary>"
        f'<table><tr><th>counter (median)</th><th class="num">value</th></tr>{rows}</table></details>'
    )


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[bool]) -> str:
    cells = "".join(
        f'<th class="{"num" if n else ""}">{_e(h)}</th>' for h, n in zip(head, numeric, strict=True)
    )
    body = "".join(
        "<tr>"
        + "".join(f'<td class="{"num" if n else ""}">{v}</td>' for v, n in zip(row, numeric, strict=True))
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{cells}</tr>{body}</table>"


def _clock(kernel: KernelView) -> str:
    """The kernel's median AI Core clock, with its range when its tasks ran at several ("-": unknown)."""
    if kernel.aic_mhz is None:
        return "-"
    text = f"{kernel.aic_mhz:.0f}"
    low, high = kernel.aic_mhz_range or (kernel.aic_mhz, kernel.aic_mhz)
    return text if low == high else f"{text} ({low:.0f}–{high:.0f})"


def _kernel_order(kernels: Sequence[KernelView]) -> list[str]:
    totals: dict[str, float] = {}
    for k in kernels:
        totals[k.name] = totals.get(k.name, 0.0) + k.median.median * k.median.count
    return sorted(totals, key=lambda name: -totals[name])


def _distribution_section(page: _Page, model: ReportModel) -> str:
    go = page.go
    order = _kernel_order(model.kernels)
    charts = []
    for name in order[:MAX_KERNEL_CHARTS]:
        views = [k for k in model.kernels if k.name == name]
        fig = go.Figure()
        for view in views:
            x = _where(view.group, view.device, view.case)
            fig.add_trace(
                go.Violin(
                    x=[x] * len(view.samples),
                    y=list(view.samples),
                    name=x,
                    box_visible=True,
                    points="outliers" if len(view.samples) > 200 else "all",
                    spanmode="hard",
                    showlegend=False,
                    hoverinfo="y",
                )
            )
        fig.add_trace(
            go.Scatter(
                x=[_where(v.group, v.device, v.case) for v in views],
                y=[v.median.median for v in views],
                mode="markers",
                name="median, 95% interval",
                marker={"color": "#111", "symbol": "diamond", "size": 9},
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [v.median.high - v.median.median for v in views],
                    "arrayminus": [v.median.median - v.median.low for v in views],
                    "thickness": 2,
                    "width": 8,
                },
            )
        )
        fig.update_layout(
            title={"text": _e(name), "font": {"size": 13}}, yaxis_title="duration (µs)", violingap=0.05
        )
        charts.append(page.figure(fig, f"distribution:{name}"))
    # An input column only where the inputs were labelled, a case column only in a sweep.
    labelled = any(k.group for k in model.kernels)
    swept = any(k.case is not None for k in model.kernels)
    clocked = any(k.aic_mhz is not None for k in model.kernels)
    rows = [
        [
            *([_e(k.group or "-")] if labelled else []),
            *([_e(k.case or "-")] if swept else []),
            _e(_device(k.device)),
            _e(k.name),
            _e(k.type),
            str(k.median.count),
            _fmt(k.median.median),
            _interval(k.median),
            _fmt(k.p10),
            _fmt(k.p90),
            _fmt(k.min),
            _fmt(k.max),
            *([_clock(k)] if clocked else []),
        ]
        for k in model.kernels
    ]
    head = [
        *(["input"] if labelled else []),
        *(["case"] if swept else []),
        "device",
        "kernel",
        "type",
        "count",
        "median",
        "95% interval",
        "p10",
        "p90",
        "min",
        "max",
        *(["AI Core clock (MHz)"] if clocked else []),
    ]
    numeric = [False] * (labelled + swept) + [False, False, False, True, True, True, True, True, True, True]
    numeric += [True] * clocked
    more = ""
    if len(order) > MAX_KERNEL_CHARTS:
        more = (
            f'<p class="muted">Charts of the {MAX_KERNEL_CHARTS} kernels with the most time; '
            "the table has all.</p>"
        )

    return (
        '<section id="kernels"><h2>Kernels: duration per (device, kernel)</h2>'
        '<p class="muted">Times in µs. Violins show the samples; the diamond is the median with its '
        "95% distribution-free interval."
        + (
            " AI Core clock: the median at the tasks' starts (their range when it changed), as the "
            "run's clock records and the exporter's freq.db give it."
            if clocked
            else ""
        )
        + "</p>"
        f'<div class="grid">{"".join(charts)}</div>{more}{_table(head, rows, numeric)}</section>'
    )


def _counters_section(page: _Page, model: ReportModel) -> str:
    with_counters = [k for k in model.kernels if k.counters]
    if not with_counters:
        return (
            '<section id="counters"><h2>Hardware counters</h2><p class="muted">No counters in these '
            "inputs: they come from op_summary's PMU columns of exported runs (give the PROF_* runs, "
            "not a JSON result).</p></section>"
        )
    go = page.go
    ratio_names = list(
        dict.fromkeys(
            n for k in with_counters for n, v in k.counters.items() if "ratio" in n and v is not None
        )
    )
    chart = ""
    if ratio_names:
        rows = [f"{k.name} · {_where(k.group, k.device, k.case)}" for k in with_counters]
        z = [[k.counters.get(n) for n in ratio_names] for k in with_counters]
        fig = go.Figure(
            go.Heatmap(
                z=z,
                x=ratio_names,
                y=rows,
                zmin=0,
                zmax=1,
                colorscale="Blues",
                texttemplate="%{z:.2f}",
                hovertemplate="%{y}<br>%{x}: %{z:.3f}<extra></extra>",
            )
        )
        fig.update_layout(title={"text": "Pipe ratios (median per kernel)", "font": {"size": 13}})
        chart = page.figure(fig, "counters:ratios", height=max(260, 90 + 34 * len(rows)))
    # One reason shared by every verdict (often: no ratio above the thresholds) is said once.
    reasons = {k.verdict.split(": ", 1)[1] for k in with_counters if k.verdict and ": " in k.verdict}
    shared = next(iter(reasons)) if len(with_counters) > 1 and len(reasons) == 1 else None

    def shown(verdict: str | None) -> str | None:
        return verdict.split(": ", 1)[0] if shared is not None and verdict and ": " in verdict else verdict

    blocks = "".join(
        f'<div class="counters"><h3>{_e(k.name)} · {_e(_where(k.group, k.device, k.case))}</h3>'
        f"{counters_block(k.counters, shown(k.verdict))}</div>"
        for k in with_counters
    )
    said = f'<p class="muted">Every verdict below: {_e(shared)}.</p>' if shared is not None else ""
    blocks = f"{said}<div>{blocks}</div>"
    return f'<section id="counters"><h2>Hardware counters and bound verdict</h2>{chart}{blocks}</section>'


#: Roof colours: memory slopes and compute ceilings.
_ROOF_COLOURS: Final = {"gm": "#b42318", "l2": "#dc6803", "cube": "#1f3a5f", "vector": "#067647"}


def _si(value: float | None, unit: str) -> str:
    """``1.15 TB/s``: *value* (per second) with a decimal prefix ("-": unknown)."""
    if value is None:
        return "-"
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:,.3g} {prefix}{unit}"
    return f"{value:,.3g} {unit}"


def _rate_unit(resource: str) -> str:
    return "B/s" if resource in MEMORY_RESOURCES else "op/s"


def _chip_line(chip: ChipFacts) -> str:
    """Which cores and clock the roofs use, and where from."""
    cores = f"{chip.cube_cores or '?'} AI Cores, {chip.vector_cores or '?'} vector cores"
    clock = f"{chip.mhz:g} MHz" if chip.mhz is not None else "clock unknown"
    whence = "the run's info.json" if chip.from_run else "the chip table"
    rates = f"per-cycle rates of the chip table's {chip.spec.name}" if chip.spec else "no chip-table entry"
    return f"{chip.name}: {cores}, {clock} (from {whence}); {rates}"


def _point_hover(kernel: KernelView) -> str:
    """Every figure of one kernel, for its point's hover."""
    sol = kernel.sol
    assert sol is not None
    lines = [f"<b>{_e(kernel.label)}</b>", f"median {_fmt(kernel.median.median)} µs"]
    if sol.intensity is not None:
        lines.append(f"intensity {sol.intensity:.3g} op/B, achieved {_si(sol.flops, 'op/s')}")
    lines += [
        f"{_e(name)}: {value:.1%} of peak ({_si(sol.achieved.get(name), _rate_unit(name))} of "
        f"{_si(sol.peaks.get(name), _rate_unit(name))})"
        if name in sol.achieved
        else f"{_e(name)}: {value:.1%} of peak"
        for name, value in sol.fractions.items()
    ]
    if kernel.bound is not None:
        lines.append(f"verdict: {_e(kernel.bound.label)}")
    return "<br>".join(lines)


def _roofline_figure(page: _Page, view: RooflineView) -> str:
    go = page.go
    points = [k for k in view.kernels if k.sol is not None]
    x = [k.sol.intensity for k in points if k.sol is not None]
    y = [k.sol.flops for k in points if k.sol is not None]
    ceilings = {n: v for n, v in view.roofs.items() if n not in MEMORY_RESOURCES}
    slopes = {n: v for n, v in view.roofs.items() if n in MEMORY_RESOURCES}
    ridges = [c / b for c in ceilings.values() for b in slopes.values()]
    known = [v for v in [*x, *ridges] if v is not None and v > 0]
    lo, hi = min(known) / 10.0, max(known) * 10.0
    fig = go.Figure()
    top = max(ceilings.values(), default=None)
    for name, bandwidth in slopes.items():
        end = min(hi, top / bandwidth) if top else hi
        fig.add_trace(
            go.Scatter(
                x=[lo, end],
                y=[bandwidth * lo, bandwidth * end],
                mode="lines",
                name=f"{name} {_si(bandwidth, 'B/s')}",
                line={
                    "color": _ROOF_COLOURS.get(name, "#667085"),
                    "dash": "solid" if name == "gm" else "dash",
                },
                hovertemplate=f"{_e(name)} bandwidth roof: {_si(bandwidth, 'B/s')}<extra></extra>",
            )
        )
    gm = slopes.get("gm") or max(slopes.values(), default=None)
    for name, ceiling in ceilings.items():
        start = max(lo, ceiling / gm) if gm else lo
        fig.add_trace(
            go.Scatter(
                x=[start, hi],
                y=[ceiling, ceiling],
                mode="lines",
                name=f"{name} {_si(ceiling, 'op/s')}",
                line={"color": _ROOF_COLOURS.get(name, "#667085")},
                hovertemplate=f"{_e(name)} compute roof (FP16): {_si(ceiling, 'op/s')}<extra></extra>",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=y,
            mode="markers",
            name="kernels",
            marker={"color": "#111", "size": 11, "symbol": "circle"},
            text=[_point_hover(k) for k in points],
            hovertemplate="%{text}<extra></extra>",
        )
    )
    fig.update_layout(
        title={"text": f"Roofline · {_e(view.chip.name)}", "font": {"size": 13}},
        xaxis={"type": "log", "title": "arithmetic intensity (operations per GM byte)"},
        yaxis={"type": "log", "title": "achieved (operations per second)"},
    )
    return page.figure(fig, f"roofline:{view.chip.name}", height=420)


def _sol_figure(page: _Page, view: RooflineView) -> str:
    go = page.go
    points = [k for k in view.kernels if k.sol is not None]
    labels = [k.label for k in points]
    resources = list(dict.fromkeys(n for k in points if k.sol is not None for n in k.sol.fractions))
    fig = go.Figure()
    for resource in resources:
        fig.add_trace(
            go.Bar(
                y=labels,
                x=[k.sol.fractions.get(resource) if k.sol else None for k in points],
                orientation="h",
                name=resource,
                hovertemplate=f"%{{y}}<br>{_e(resource)}: %{{x:.1%}} of peak<extra></extra>",
            )
        )
    limiters = [k.sol.limiter if k.sol else None for k in points]
    fig.add_trace(
        go.Scatter(
            x=[lim[1] if lim else None for lim in limiters],
            y=labels,
            mode="markers",
            name="largest fraction",
            marker={"color": "#111", "size": 11, "symbol": "diamond"},
            text=[_point_hover(k) for k in points],
            hovertemplate="%{text}<extra></extra>",
        )
    )
    fig.add_vline(x=1.0, line_color="#b42318")
    fig.add_vline(x=SOL_BOUND, line_dash="dot", line_color="#98a2b3")
    fig.update_layout(
        title={"text": f"Speed of light · {_e(view.chip.name)}", "font": {"size": 13}},
        xaxis={"title": "fraction of the chip's peak", "tickformat": ".0%"},
        barmode="group",
    )
    height = max(280, 120 + 28 * len(points) * max(1, min(len(resources), 4)))
    return page.figure(fig, f"sol:{view.chip.name}", height=height)


def _roofline_section(page: _Page, model: ReportModel) -> str:
    if not model.rooflines:
        note = model.roofline_note or "No roofline."
        return f'<section id="roofline"><h2>Roofline</h2><p class="muted">{_e(note)}</p></section>'
    parts = []
    for view in model.rooflines:
        chart = (_roofline_figure if view.kind is RooflineKind.ROOFLINE else _sol_figure)(page, view)
        rows = [
            [
                _e(k.label),
                _e(k.bound.label if k.bound is not None else "-"),
                _fmt(k.sol.intensity) if k.sol else "-",
                _e(_si(k.sol.flops, "op/s")) if k.sol else "-",
                _e(", ".join(f"{n} {v:.0%}" for n, v in (k.sol.fractions.items() if k.sol else ()))),
            ]
            for k in view.kernels
        ]
        table = _table(
            ["kernel", "verdict", "intensity (op/B)", "achieved", "fraction of peak"],
            rows,
            [False, False, True, True, False],
        )
        parts.append(
            f'<h3>{_e(view.chip.name)} · {_e(view.kind.value)}</h3><p class="muted">'
            f"{_e(_chip_line(view.chip))}</p>{chart}{table}"
        )
    return (
        '<section id="roofline"><h2>Roofline and speed of light</h2><p class="muted">Each kernel\'s '
        "figures against its chip's peaks (docs/speed_of_light.md). Where ArithmeticUtilization and "
        "Memory were both collected, a roofline: operations per GM byte against operations per "
        "second, under the GM / L2 bandwidth slopes and the cube / vector FP16 ceilings. Otherwise the "
        "fraction of each resource's peak the counters give, a diamond at the largest; at "
        f"{SOL_BOUND:.0%} or more that resource is the roof that limits the kernel.</p>"
        f"{''.join(parts)}</section>"
    )


def _comparison_section(page: _Page, model: ReportModel) -> str:
    if model.comparison is None or model.compared is None:
        return ""
    base, new = model.compared
    changes: Sequence[ChangeView] = model.comparison
    if not changes:
        return (
            f'<section id="compare"><h2>{_e(new)} vs {_e(base)}</h2>'
            '<p class="muted">No (device, kernel) appears in both inputs.</p></section>'
        )
    go = page.go
    labels = [f"{c.name} · {_where(None, c.device)}" for c in changes]
    colors = [
        "#b42318" if c.verdict == "REGRESSION" else "#067647" if c.verdict == "faster" else "#475467"
        for c in changes
    ]
    fig = go.Figure(
        go.Scatter(
            x=[c.change_pct for c in changes],
            y=labels,
            mode="markers",
            marker={"color": colors, "size": 10},
            error_x={
                "type": "data",
                "symmetric": False,
                "array": [c.ci_high_pct - c.change_pct for c in changes],
                "arrayminus": [c.change_pct - c.ci_low_pct for c in changes],
            },
            name="median change",
            hovertemplate="%{y}: %{x:+.2f}%<extra></extra>",
        )
    )
    for edge in (-model.threshold_pct, model.threshold_pct):
        fig.add_vline(x=edge, line_dash="dot", line_color="#b42318" if edge > 0 else "#067647")
    fig.add_vline(x=0, line_color="#98a2b3")
    fig.update_layout(
        title={"text": f"Median change, {new} vs {base} (95% bootstrap interval)", "font": {"size": 13}},
        xaxis_title="change (%)",
    )
    chart = page.figure(fig, "compare:change", height=max(260, 110 + 34 * len(changes)))
    rows = [
        [
            _e(_device(c.device)),
            _e(c.name),
            f'<span class="{_e(c.verdict)}">{_e(c.verdict)}</span>',
            _fmt(c.base.median),
            _interval(c.base),
            _fmt(c.new.median),
            _interval(c.new),
            f"{c.change_pct:+.2f}%",
            f"[{c.ci_low_pct:+.2f}%, {c.ci_high_pct:+.2f}%]",
        ]
        for c in changes
    ]
    head = [
        "device",
        "kernel",
        "verdict",
        f"{base} median",
        "interval",
        f"{new} median",
        "interval",
        "change",
        "interval",
    ]
    numeric = [False, False, False, True, True, True, True, True, True]
    return (
        f'<section id="compare"><h2>Comparison: {_e(new)} vs {_e(base)}</h2>'
        f'<p class="muted">REGRESSION: significantly slower by more than {model.threshold_pct:g}%; '
        "faster: significantly faster by more than that.</p>"
        f"{chart}{_table(head, rows, numeric)}</section>"
    )


def _cases_section(page: _Page, model: ReportModel) -> str:
    if not model.cases:
        return ""
    go = page.go
    cases: Sequence[CaseView] = model.cases
    names = [n for n in _kernel_order(model.kernels) if any(c.name == n for c in cases)]
    order = case_order(list(dict.fromkeys(c.case for c in cases)))
    charts = []
    for name in names[:MAX_KERNEL_CHARTS]:
        fig = go.Figure()
        series: dict[str, list[CaseView]] = {}
        for c in cases:
            if c.name == name:
                series.setdefault(_where(c.group, c.device), []).append(c)
        for where, points in series.items():
            fig.add_trace(
                go.Scatter(
                    x=[p.case for p in points],
                    y=[p.median.median for p in points],
                    mode="lines+markers",
                    name=where,
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": [p.median.high - p.median.median for p in points],
                        "arrayminus": [p.median.median - p.median.low for p in points],
                    },
                )
            )
        fig.update_layout(
            title={"text": _e(name), "font": {"size": 13}},
            xaxis={"title": "case", "type": "category", "categoryorder": "array", "categoryarray": order},
            yaxis_title="median (µs)",
        )
        charts.append(page.figure(fig, f"cases:{name}"))
    return (
        '<section id="cases"><h2>Cases: median per case</h2><p class="muted">Median duration of each '
        "kernel per case and device, with its 95% distribution-free interval.</p>"
        f'<div class="grid">{"".join(charts)}</div></section>'
    )


def _timeline_section(page: _Page, model: ReportModel) -> str:
    rows: Sequence[TimelineRow] = model.timeline
    if not rows:
        return (
            '<section id="timeline"><h2>Timeline</h2><p class="muted">No start times in these inputs '
            "(JSON results carry none): give the PROF_* runs for a timeline.</p></section>"
        )
    go = page.go
    total = sum(len(r.starts_ms) for r in rows)
    fig = go.Figure()
    if total <= TIMELINE_TASKS:
        kernels = list(dict.fromkeys(k for r in rows for k in r.kernels))
        for kernel in kernels:
            ys, bases, widths = [], [], []
            for r in rows:
                for start, dur, k in zip(r.starts_ms, r.durations_ms, r.kernels, strict=True):
                    if k == kernel:
                        ys.append(r.label)
                        bases.append(start)
                        widths.append(dur)
            fig.add_trace(
                go.Bar(
                    y=ys,
                    x=widths,
                    base=bases,
                    orientation="h",
                    name=kernel,
                    hovertemplate="%{y}<br>start %{base:.3f} ms, %{x:.4f} ms<extra>"
                    + _e(kernel)
                    + "</extra>",
                )
            )
        fig.update_layout(barmode="overlay", bargap=0.35)
        note = "Each bar is a task."
    else:
        end = max(s + d for r in rows for s, d in zip(r.starts_ms, r.durations_ms, strict=True)) or 1.0
        width = end / TIMELINE_BINS
        z = []
        for r in rows:
            busy = [0.0] * TIMELINE_BINS
            for start, dur in zip(r.starts_ms, r.durations_ms, strict=True):
                first = min(int(start / width), TIMELINE_BINS - 1)
                last = min(int((start + dur) / width), TIMELINE_BINS - 1)
                for b in range(first, last + 1):
                    lo, hi = max(start, b * width), min(start + dur, (b + 1) * width)
                    busy[b] += max(0.0, hi - lo) / width
            z.append([min(v, 1.0) for v in busy])
        fig.add_trace(
            go.Heatmap(
                z=z,
                x=[(i + 0.5) * width for i in range(TIMELINE_BINS)],
                y=[r.label for r in rows],
                zmin=0,
                zmax=1,
                colorscale="Viridis",
                colorbar={"title": "busy"},
                hovertemplate="%{y}, %{x:.2f} ms: busy %{z:.0%}<extra></extra>",
            )
        )
        note = f"{total:,} tasks: the share of each of {TIMELINE_BINS} time bins the device was busy."
    fig.update_layout(
        title={"text": "Timeline overview", "font": {"size": 13}}, xaxis_title="ms since the first task"
    )
    chart = page.figure(fig, "timeline", height=max(240, 110 + 40 * len(rows)))
    return (
        f'<section id="timeline"><h2>Timeline</h2><p class="muted">{_e(note)} For every task with its '
        "streams and counters, open <code>asc-aprof trace</code>'s file in Perfetto or chrome://tracing.</p>"
        f"{chart}</section>"
    )


def _info_cells(info: RunInfo | None) -> list[str]:
    """The collection columns of the inputs table (``-`` where a run does not say)."""
    if info is None:
        return ["-"] * 6
    at = info.collected_at.strftime("%Y-%m-%d %H:%M:%S") if info.collected_at else None
    source = info.source.value if info.source else None
    return [_e(v or "-") for v in (info.chip, info.cann_version, info.level, info.metrics, at, source)]


def render(model: ReportModel) -> tuple[str, int]:
    """The page of *model*, and how many charts it holds."""
    page = _Page()
    infos = {info.run_id: info for info in model.runs}
    inputs = _table(
        ["input", "run", "tasks", "chip", "CANN", "task time", "metrics", "collected (UTC)", "read from"],
        [[_e(g), _e(r), str(n), *_info_cells(infos.get(r))] for g, r, n in model.inputs],
        [False, False, True, False, False, False, False, False, False],
    )
    collection = model.collection()
    sections = [
        _distribution_section(page, model),
        _counters_section(page, model),
        _roofline_section(page, model),
        _comparison_section(page, model),
        _cases_section(page, model),
        _timeline_section(page, model),
    ]
    nav = "".join(
        f'<a href="#{anchor}">{label}</a>'
        for anchor, label, present in (
            ("inputs", "Inputs", True),
            ("kernels", "Kernels", True),
            ("counters", "Counters", True),
            ("roofline", "Roofline", True),
            ("compare", "Comparison", model.comparison is not None),
            ("cases", "Cases", bool(model.cases)),
            ("timeline", "Timeline", True),
            ("methods", "Methods", True),
        )
        if present
    )
    skip = (
        f"{model.skip} leading sample(s) of each kernel dropped per run and device"
        if model.skip
        else "no sample dropped"
    )
    notes = "".join(f'<p class="muted">{_e(n)}</p>' for n in model.notes)
    methods = (
        '<section id="methods"><h2>Methods</h2><p class="muted">Medians interpolate linearly (as numpy). '
        "A median's 95% interval is distribution-free: the order statistics [x<sub>(k)</sub>, "
        "x<sub>(n+1-k)</sub>] with k the largest rank whose binomial coverage is at least 95% (exact up to "
        "2,000 samples, normal approximation above); with fewer than 6 samples no such interval exists and "
        "min..max is shown with its coverage in parentheses. Comparisons bootstrap the median change "
        f"(1,000 resamples, as <code>asc-aprof compare</code>). Warm-up: {_e(skip)}.</p>{notes}</section>"
    )
    headline = f'<p class="sol">Speed of light: {_e(model.headline)}</p>' if model.headline else ""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    plotly_js = page.offline.get_plotlyjs()
    text = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(model.title)}</title><style>{_CSS}</style>"
        f'<script type="text/javascript">{plotly_js}</script></head><body>'
        f"<header><h1>{_e(model.title)}</h1><p>asc-aprof {_e(__version__)} · {stamp} · "
        f"{sum(n for _, _, n in model.inputs):,} tasks in {len(model.inputs)} run(s)</p>"
        f"{f'<p>{_e(collection)}</p>' if collection else ''}"
        f"{headline}</header>"
        f"<nav>{nav}</nav><main>"
        f'<section id="inputs"><h2>Inputs</h2>{inputs}</section>'
        f"{''.join(sections)}{methods}</main></body></html>\n"
    )
    return text, page.charts


def write_html(model: ReportModel, path: str | os.PathLike[str]) -> Path:
    """Write the page of *model* to *path* (complete or not at all: written beside it, renamed; see
    :func:`~asc_aprof._outputs._replace.replacing`)."""
    text, _ = render(model)
    target = Path(path)
    with replacing(target) as stream:
        stream.write(text.encode("utf-8"))
    return target
