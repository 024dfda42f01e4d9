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
import importlib as _importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time each name loads on first use
    from . import report as report
    from . import sim as sim
    from . import stats as stats
    from ._async import AsyncProfiler as AsyncProfiler
    from ._async import SweepItem as SweepItem
    from ._async import SweepItems as SweepItems
    from ._bench import AttributionError as AttributionError
    from ._bench import BenchConfig as BenchConfig
    from ._bench import BenchResult as BenchResult
    from ._bench import KernelTime as KernelTime
    from ._bench import StopReason as StopReason
    from ._bench_api import bench as bench
    from ._bench_api import do_bench as do_bench
    from ._bench_api import tune as tune
    from ._binding import MsprofInterface as MsprofInterface
    from ._binding import ProfilerConfig as ProfilerConfig
    from ._columns import NO_ID as NO_ID
    from ._columns import TaskColumns as TaskColumns
    from ._counters import TaskCounters as TaskCounters
    from ._discovery import discover_toolkit as discover_toolkit
    from ._enums import AicoreMetrics as AicoreMetrics
    from ._enums import ProfileType as ProfileType
    from ._errors import AclError as AclError
    from ._errors import AprofError as AprofError
    from ._errors import CollectionTimeout as CollectionTimeout
    from ._errors import ExportError as ExportError
    from ._errors import InvalidArgumentError as InvalidArgumentError
    from ._errors import NoSamplesError as NoSamplesError
    from ._errors import ParseError as ParseError
    from ._errors import ToolkitNotFoundError as ToolkitNotFoundError
    from ._errors import UsageError as UsageError
    from ._files import RunFileError as RunFileError
    from ._parser import TaskParser as TaskParser
    from ._profiler import Profiler as Profiler
    from ._progress import ProgressEvent as ProgressEvent
    from ._protocol import ProfileRun as ProfileRun
    from ._records import ProfilingResult as ProfilingResult
    from ._records import ProfilingTask as ProfilingTask
    from ._records import task_time_median as task_time_median
    from ._reporting import write_report as write_report
    from ._run import AsyncRun as AsyncRun
    from ._run import Run as Run
    from ._run import RunUnreadable as RunUnreadable
    from ._run import aopen_run as aopen_run
    from ._run import aread_columns as aread_columns
    from ._run import open_run as open_run
    from ._run import read_columns as read_columns
    from ._run import read_timeline as read_timeline
    from ._run import sweep_timelines as sweep_timelines
    from ._runinfo import RunInfo as RunInfo
    from ._runinfo import RunSource as RunSource
    from ._stats import KernelChange as KernelChange
    from ._stats import KernelStats as KernelStats
    from ._stats import compare_runs as compare_runs
    from ._stats import compare_tasks as compare_tasks
    from ._stats import kernel_stats as kernel_stats
    from ._stats import run_kernel_stats as run_kernel_stats
    from ._timeline import TimedTask as TimedTask
    from ._timeline import Timeline as Timeline
    from ._toolkit import Toolkit as Toolkit
    from ._trace import write_trace as write_trace
    from ._tune import Candidate as Candidate
    from ._tune import CandidateStatus as CandidateStatus
    from ._tune import TuneError as TuneError
    from ._tune import TuneResult as TuneResult
    from ._tune import TuneStop as TuneStop
    from ._verdict import VERDICT_RULE as VERDICT_RULE
    from ._verdict import Verdict as Verdict
    from ._verdict import VerdictKind as VerdictKind
    from ._verdict import bound_verdict as bound_verdict

#: Where each public name lives (loaded on first use, so ``import asc_aprof`` stays light: the
#: pytest plugin's entry point imports it in every test session of every user).
_WHERE: dict[str, str] = {
    "AsyncProfiler": "._async",
    "SweepItem": "._async",
    "SweepItems": "._async",
    "AttributionError": "._bench",
    "BenchConfig": "._bench",
    "BenchResult": "._bench",
    "KernelTime": "._bench",
    "StopReason": "._bench",
    "bench": "._bench_api",
    "do_bench": "._bench_api",
    "tune": "._bench_api",
    "MsprofInterface": "._binding",
    "ProfilerConfig": "._binding",
    "NO_ID": "._columns",
    "TaskColumns": "._columns",
    "ProfileRun": "._protocol",
    "TaskCounters": "._counters",
    "discover_toolkit": "._discovery",
    "AicoreMetrics": "._enums",
    "ProfileType": "._enums",
    "AclError": "._errors",
    "AprofError": "._errors",
    "CollectionTimeout": "._errors",
    "ExportError": "._errors",
    "InvalidArgumentError": "._errors",
    "NoSamplesError": "._errors",
    "ParseError": "._errors",
    "ToolkitNotFoundError": "._errors",
    "UsageError": "._errors",
    "RunFileError": "._files",
    "TaskParser": "._parser",
    "Profiler": "._profiler",
    "ProgressEvent": "._progress",
    "ProfilingResult": "._records",
    "ProfilingTask": "._records",
    "task_time_median": "._records",
    "write_report": "._reporting",
    "AsyncRun": "._run",
    "Run": "._run",
    "RunUnreadable": "._run",
    "aopen_run": "._run",
    "aread_columns": "._run",
    "open_run": "._run",
    "read_columns": "._run",
    "read_timeline": "._run",
    "sweep_timelines": "._run",
    "RunInfo": "._runinfo",
    "RunSource": "._runinfo",
    "KernelChange": "._stats",
    "KernelStats": "._stats",
    "compare_runs": "._stats",
    "compare_tasks": "._stats",
    "kernel_stats": "._stats",
    "run_kernel_stats": "._stats",
    "TimedTask": "._timeline",
    "Timeline": "._timeline",
    "Toolkit": "._toolkit",
    "write_trace": "._trace",
    "Candidate": "._tune",
    "CandidateStatus": "._tune",
    "TuneError": "._tune",
    "TuneResult": "._tune",
    "TuneStop": "._tune",
    "VERDICT_RULE": "._verdict",
    "Verdict": "._verdict",
    "VerdictKind": "._verdict",
    "bound_verdict": "._verdict",
}
#: Public submodules: the simulated toolkit, statistics, reports and traces, the command line.
_SUBMODULES = frozenset({"sim", "stats", "report", "cli", "pytest_plugin", "ray_sweep"})

#: The curated top level: the spec's names, the async profiler, the front door for a run,
#: bench and tune, the toolkit and the errors. Statistics (``asc_aprof.stats``), reports and
#: traces (``asc_aprof.report``) and the simulated toolkit (``asc_aprof.sim``) are submodules;
#: their names also resolve here, as they did before (``asc_aprof.kernel_stats``).
__all__ = (
    "AclError",
    "AicoreMetrics",
    "AprofError",
    "AsyncProfiler",
    "AsyncRun",
    "AttributionError",
    "BenchConfig",
    "BenchResult",
    "CollectionTimeout",
    "ExportError",
    "InvalidArgumentError",
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
    "Run",
    "RunFileError",
    "RunInfo",
    "RunSource",
    "RunUnreadable",
    "SweepItem",
    "SweepItems",
    "Toolkit",
    "ToolkitNotFoundError",
    "TuneError",
    "TuneResult",
    "UsageError",
    "__version__",
    "aopen_run",
    "bench",
    "discover_toolkit",
    "do_bench",
    "open_run",
    "report",
    "sim",
    "stats",
    "task_time_median",
    "tune",
)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        if name in _SUBMODULES:
            return _importlib.import_module(f".{name}", __name__)
        raise AttributeError(f"module 'asc_aprof' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module, __name__), name)
    if getattr(value, "__module__", "").startswith("asc_aprof."):
        with _contextlib.suppress(AttributeError, TypeError):
            value.__module__ = "asc_aprof"  # shown and pickled as asc_aprof.X, where users find it
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE, *_SUBMODULES})
