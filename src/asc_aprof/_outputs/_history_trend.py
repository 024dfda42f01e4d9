"""The history's trend page: one self-contained HTML file, one plotly chart per kernel.

Each chart shows a kernel's median per record (in the order recorded) with the median's interval
as error bars and p10 / p90 as a band; hovering a point gives the record: when, commit, label,
count, clock. A record the gate judges a regression against the records before it is drawn red
and listed above the charts. plotly.js is inlined once (the file opens offline), as in the report.
"""

from __future__ import annotations

import datetime as _dt
import html
import os
from collections.abc import Sequence
from pathlib import Path

from .._plans._gate import GateOutcome, GatePoint, GateVerdict, judge
from .._version import __version__
from ._history_store import StoredKernel
from ._replace import replacing
from ._report_html import _plotly

_CSS = """
body { font-family: system-ui, sans-serif; margin: 0 auto; max-width: 1100px; padding: 16px; color: #1d2939; }
h1 { font-size: 22px; } h2 { font-size: 16px; margin-top: 28px; }
.muted { color: #667085; font-size: 12.5px; } .regression { color: #b42318; }
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def by_kernel(stored: Sequence[StoredKernel]) -> dict[str, list[StoredKernel]]:
    """The stored entries per kernel key, oldest record first."""
    out: dict[str, list[StoredKernel]] = {}
    for item in sorted(stored, key=lambda s: s.record_id):
        out.setdefault(item.entry.key, []).append(item)
    return out


def point(item: StoredKernel) -> GatePoint:
    e = item.entry
    return GatePoint(item.record_id, e.median_us, e.ci_low_us, e.ci_high_us, e.aic_mhz)


def judged_series(items: Sequence[StoredKernel], window: int, min_change: float) -> list[GateOutcome]:
    """The gate's decision on every record of one kernel, each against the records before it."""
    points = [point(i) for i in items]
    key = items[0].entry.key
    return [judge(key, points[: n + 1], window=window, min_change=min_change) for n in range(len(points))]


def _hover(item: StoredKernel, outcome: GateOutcome) -> str:
    env, e = item.environment, item.entry
    commit = f"{env.git.commit[:10]}{' (dirty)' if env.git.dirty else ''}" if env.git else "-"
    clock = f"{e.aic_mhz:.0f} MHz" if e.aic_mhz is not None else "unknown"
    return (
        f"record {item.record_id} · {env.recorded_at:%Y-%m-%d %H:%M} UTC<br>commit {commit}"
        f"{f' · {_e(item.label)}' if item.label else ''}<br>median {e.median_us:.3f} µs "
        f"[{e.ci_low_us:.3f}, {e.ci_high_us:.3f}] · n={e.count}<br>clock {clock}<br>{outcome.verdict.value}"
    )


def render_trend(
    stored: Sequence[StoredKernel], *, window: int, min_change: float, title: str
) -> tuple[str, int]:
    """The page's HTML and its number of charts."""
    go, offline = _plotly()
    charts: list[str] = []
    flagged: list[str] = []
    for n, (key, items) in enumerate(by_kernel(stored).items(), start=1):
        outcomes = judged_series(items, window, min_change)
        x = list(range(1, len(items) + 1))
        medians = [i.entry.median_us for i in items]
        fig = go.Figure()
        fig.add_trace(
            go.Scatter(
                x=x + x[::-1],
                y=[i.entry.p90_us for i in items] + [i.entry.p10_us for i in items][::-1],
                fill="toself",
                mode="lines",
                line={"width": 0},
                fillcolor="rgba(70,130,180,0.15)",
                hoverinfo="skip",
                name="p10-p90",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=medians,
                mode="lines+markers",
                name="median",
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [i.entry.ci_high_us - i.entry.median_us for i in items],
                    "arrayminus": [i.entry.median_us - i.entry.ci_low_us for i in items],
                },
                marker={
                    "size": 9,
                    "color": [
                        "#b42318" if o.verdict is GateVerdict.REGRESSION else "#1f77b4" for o in outcomes
                    ],
                },
                text=[_hover(i, o) for i, o in zip(items, outcomes, strict=True)],
                hovertemplate="%{text}<extra></extra>",
            )
        )
        fig.update_layout(
            xaxis={"title": "record (oldest first)", "dtick": 1},
            yaxis_title="median (µs)",
            template="plotly_white",
            height=340,
            margin={"l": 60, "r": 20, "t": 20, "b": 50},
        )
        body = fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"aprof-trend-{n}")
        charts.append(
            f'<section class="trend"><h2>{_e(key)}</h2><div class="aprof-chart" data-chart="{_e(key)}">'
            f"{body}</div></section>"
        )
        flagged += [o.message() for o in outcomes if o.verdict is GateVerdict.REGRESSION]
    listed = (
        "".join(f'<li class="regression">{_e(m)}</li>' for m in flagged)
        if flagged
        else '<li class="muted">none</li>'
    )
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{_CSS}</style>"
        f'<script type="text/javascript">{offline.get_plotlyjs()}</script></head><body>'
        f'<h1>{_e(title)}</h1><p class="muted">asc-aprof {_e(__version__)} · {stamp} · '
        f"{len(charts)} kernel(s). Each record judged against the {window} before it: a regression "
        f"when its median's interval lies above all of theirs and its median is over {min_change:.0%} "
        "above their median (in cycles too where the clock is known).</p>"
        f"<h2>Regressions</h2><ul>{listed}</ul>{''.join(charts)}</body></html>\n"
    )
    return text, len(charts)


def write_trend(
    stored: Sequence[StoredKernel],
    path: str | os.PathLike[str],
    *,
    window: int,
    min_change: float,
    title: str,
) -> Path:
    """Write the trend page to *path* (complete or not at all)."""
    text, _ = render_trend(stored, window=window, min_change=min_change, title=title)
    target = Path(path)
    with replacing(target) as stream:
        stream.write(text.encode("utf-8"))
    return target
