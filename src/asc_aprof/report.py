"""Looking at runs: timelines with exact starts, Perfetto traces and offline HTML reports.

``read_timeline(run)`` is ``open_run(run).timeline()``; :func:`write_trace` writes a Trace Event
Format file, :func:`write_report` a self-contained HTML page (the ``report`` extra: plotly).
"""

from __future__ import annotations

from ._outputs._report_write import write_report
from ._outputs._trace import write_trace
from ._runs._run import aread_columns, read_columns, read_timeline, sweep_timelines
from ._runs._timeline import TimedTask, Timeline

__all__ = [
    "TimedTask",
    "Timeline",
    "aread_columns",
    "read_columns",
    "read_timeline",
    "sweep_timelines",
    "write_report",
    "write_trace",
]
