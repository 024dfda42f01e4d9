"""asc-aprof: exact on-device timings for Ascend NPU kernels, sync and async, without torch.

Implements the ``asc.lib.profiling`` API (:class:`Profiler`, :class:`AicoreMetrics`,
:class:`ProfileType`, :class:`ProfilingResult`, :class:`ProfilingTask`, :func:`task_time_median`,
:class:`MsprofInterface`) over CANN's ``libmsprofiler.so`` and ``msprof.py``, plus an anyio-based
:class:`AsyncProfiler`. ``asc_aprof.sim`` is a simulated CANN toolkit for machines without an NPU.

Why is it slow: ``counters=True`` (``profile()``, ``store_result()``, ``iter_tasks()``,
``sweep()``) keeps every task's PMU counters (:class:`TaskCounters`); :func:`kernel_stats` gives
per-kernel statistics, counter medians and a bound :class:`Verdict` (:data:`VERDICT_RULE`);
:func:`compare_tasks` compares durations or one counter between two runs.
"""

from __future__ import annotations

import contextlib as _contextlib

from ._async import AsyncProfiler, SweepItem, SweepItems
from ._binding import MsprofInterface, ProfilerConfig
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
from ._parser import TaskParser
from ._profiler import Profiler
from ._records import ProfilingResult, ProfilingTask, task_time_median
from ._stats import KernelChange, KernelStats, compare_tasks, kernel_stats
from ._toolkit import Toolkit
from ._verdict import VERDICT_RULE, Verdict, VerdictKind, bound_verdict
from ._version import __version__

__all__ = (
    "VERDICT_RULE",
    "AclError",
    "AicoreMetrics",
    "AprofError",
    "AsyncProfiler",
    "CollectionTimeout",
    "ExportError",
    "InvalidArgumentError",
    "KernelChange",
    "KernelStats",
    "MsprofInterface",
    "NoSamplesError",
    "ParseError",
    "ProfileRun",
    "ProfileType",
    "Profiler",
    "ProfilerConfig",
    "ProfilingResult",
    "ProfilingTask",
    "SweepItem",
    "SweepItems",
    "TaskCounters",
    "TaskParser",
    "Toolkit",
    "ToolkitNotFoundError",
    "UsageError",
    "Verdict",
    "VerdictKind",
    "__version__",
    "bound_verdict",
    "compare_tasks",
    "discover_toolkit",
    "kernel_stats",
    "task_time_median",
)

for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("asc_aprof."):
        with _contextlib.suppress(AttributeError, TypeError):
            _obj.__module__ = "asc_aprof"
del _name, _obj
