"""Statistics of runs: per-kernel medians with intervals, comparisons, counters and the verdict.

Every function takes results (:class:`~asc_aprof.ProfilingResult`) or columns
(:class:`TaskColumns`, from ``open_run(p).columns()``) and gives the same figures either way.
"""

from __future__ import annotations

from ._model._chips import CHIP_TABLE, ChipSpec, chip_spec
from ._model._counters import TaskCounters
from ._plans._columns import NO_ID, TaskColumns
from ._plans._sol import ChipFacts, SolFigures, chip_facts, speed_of_light
from ._plans._stats import (
    KernelChange,
    KernelStats,
    compare_runs,
    compare_tasks,
    kernel_stats,
    run_kernel_stats,
)
from ._plans._verdict import VERDICT_RULE, Verdict, VerdictKind, bound_verdict

__all__ = [
    "CHIP_TABLE",
    "NO_ID",
    "VERDICT_RULE",
    "ChipFacts",
    "ChipSpec",
    "KernelChange",
    "KernelStats",
    "SolFigures",
    "TaskColumns",
    "TaskCounters",
    "Verdict",
    "VerdictKind",
    "bound_verdict",
    "chip_facts",
    "chip_spec",
    "compare_runs",
    "compare_tasks",
    "kernel_stats",
    "run_kernel_stats",
    "speed_of_light",
]
