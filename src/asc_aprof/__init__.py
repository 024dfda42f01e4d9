"""asc-aprof: exact on-device timings for Ascend NPU kernels, sync and async, without torch.

Implements the ``asc.lib.profiling`` API (:class:`Profiler`, :class:`AicoreMetrics`,
:class:`ProfileType`, :class:`ProfilingResult`, :class:`ProfilingTask`, :func:`task_time_median`,
:class:`MsprofInterface`) over CANN's ``libmsprofiler.so`` and ``msprof.py``, plus an anyio-based
:class:`AsyncProfiler`, a benchmark loop (:func:`bench`, :func:`do_bench`, ``Profiler.bench``)
with a racing autotuner (:func:`tune`, ``Profiler.tune``, ``AsyncProfiler.tune``) and its on-disk
cache, and ways to look at results: :func:`read_timeline` (exact start times, streams, counters),
:func:`write_trace` (a Perfetto / chrome://tracing file) and :func:`write_report` (an offline HTML
report; the ``report`` extra). ``asc_aprof.sim`` is a simulated CANN toolkit for machines without
an NPU.

Why is it slow: ``counters=True`` (``profile()``, ``store_result()``, ``iter_tasks()``,
``sweep()``) keeps every task's PMU counters (:class:`TaskCounters`); :func:`kernel_stats` gives
per-kernel statistics, counter medians and a bound :class:`Verdict` (:data:`VERDICT_RULE`);
:func:`compare_tasks` compares durations or one counter between two runs
(:func:`run_kernel_stats` / :func:`compare_runs`: over several runs each).
"""

from __future__ import annotations

import contextlib as _contextlib

from ._async import AsyncProfiler, SweepItem, SweepItems
from ._bench import AttributionError, BenchConfig, BenchResult, KernelTime, StopReason
from ._bench_api import bench, do_bench, tune
from ._binding import MsprofInterface, ProfilerConfig
from ._columns import NO_ID, TaskColumns
from ._core import ProfileRun
from ._counters import TaskCounters
from ._discovery import discover_toolkit
from ._enums import AicoreMetrics, ProfileType
from ._errors import (
    AclError,
    AprofError,
    CollectionTimeout,
    ExportError,
    InvalidArgumentError,
    NoSamplesError,
    ParseError,
    ToolkitNotFoundError,
    UsageError,
)
from ._files import RunFileError
from ._parser import TaskParser
from ._profiler import Profiler
from ._progress import ProgressEvent
from ._records import ProfilingResult, ProfilingTask, task_time_median
from ._reporting import write_report
from ._run import (
    AsyncRun,
    Run,
    RunUnreadable,
    aopen_run,
    aread_columns,
    open_run,
    read_columns,
    read_timeline,
    sweep_timelines,
)
from ._runinfo import RunInfo, RunSource
from ._stats import KernelChange, KernelStats, compare_runs, compare_tasks, kernel_stats, run_kernel_stats
from ._timeline import TimedTask, Timeline
from ._toolkit import Toolkit
from ._trace import write_trace
from ._tune import Candidate, CandidateStatus, TuneError, TuneResult, TuneStop
from ._verdict import VERDICT_RULE, Verdict, VerdictKind, bound_verdict
from ._version import __version__

__all__ = (
    "NO_ID",
    "VERDICT_RULE",
    "AclError",
    "AicoreMetrics",
    "AprofError",
    "AsyncProfiler",
    "AsyncRun",
    "AttributionError",
    "BenchConfig",
    "BenchResult",
    "Candidate",
    "CandidateStatus",
    "CollectionTimeout",
    "ExportError",
    "InvalidArgumentError",
    "KernelChange",
    "KernelStats",
    "KernelTime",
    "MsprofInterface",
    "NoSamplesError",
    "ParseError",
    "ProfileRun",
    "ProfileType",
    "Profiler",
    "ProfilerConfig",
    "ProfilingResult",
    "ProfilingTask",
    "ProgressEvent",
    "Run",
    "RunFileError",
    "RunInfo",
    "RunSource",
    "RunUnreadable",
    "StopReason",
    "SweepItem",
    "SweepItems",
    "TaskColumns",
    "TaskCounters",
    "TaskParser",
    "TimedTask",
    "Timeline",
    "Toolkit",
    "ToolkitNotFoundError",
    "TuneError",
    "TuneResult",
    "TuneStop",
    "UsageError",
    "Verdict",
    "VerdictKind",
    "__version__",
    "aopen_run",
    "aread_columns",
    "bench",
    "bound_verdict",
    "compare_runs",
    "compare_tasks",
    "discover_toolkit",
    "do_bench",
    "kernel_stats",
    "open_run",
    "read_columns",
    "read_timeline",
    "run_kernel_stats",
    "sweep_timelines",
    "task_time_median",
    "tune",
    "write_report",
    "write_trace",
)

for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("asc_aprof."):
        with _contextlib.suppress(AttributeError, TypeError):
            _obj.__module__ = "asc_aprof"
del _name, _obj
