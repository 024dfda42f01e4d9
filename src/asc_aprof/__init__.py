"""asc-aprof: exact on-device timings for Ascend NPU kernels, sync and async, without torch.

Implements the ``asc.lib.profiling`` API (:class:`Profiler`, :class:`AicoreMetrics`,
:class:`ProfileType`, :class:`ProfilingResult`, :class:`ProfilingTask`, :func:`task_time_median`,
:class:`MsprofInterface`) over CANN's ``libmsprofiler.so`` and ``msprof.py``, plus an anyio-based
:class:`AsyncProfiler`. ``asc_aprof.sim`` is a simulated CANN toolkit for machines without an NPU.
"""

from __future__ import annotations

import contextlib as _contextlib

from ._async import AsyncProfiler, SweepItem
from ._binding import MsprofInterface, ProfilerConfig
from ._collector import CollectionTimeout
from ._core import ProfileRun
from ._discovery import discover_toolkit
from ._enums import AicoreMetrics, ProfileType
from ._errors import (
    AclError,
    AprofError,
    ExportError,
    ParseError,
    ToolkitNotFoundError,
    UsageError,
)
from ._parser import TaskParser
from ._profiler import Profiler
from ._progress import ProgressEvent
from ._records import ProfilingResult, ProfilingTask, task_time_median
from ._toolkit import Toolkit
from ._version import __version__

__all__ = (
    "AclError",
    "AicoreMetrics",
    "AprofError",
    "AsyncProfiler",
    "CollectionTimeout",
    "ExportError",
    "MsprofInterface",
    "ParseError",
    "ProfileRun",
    "ProfileType",
    "Profiler",
    "ProfilerConfig",
    "ProfilingResult",
    "ProfilingTask",
    "ProgressEvent",
    "SweepItem",
    "TaskParser",
    "Toolkit",
    "ToolkitNotFoundError",
    "UsageError",
    "__version__",
    "discover_toolkit",
    "task_time_median",
)

for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("asc_aprof."):
        with _contextlib.suppress(AttributeError, TypeError):
            _obj.__module__ = "asc_aprof"
del _name, _obj
