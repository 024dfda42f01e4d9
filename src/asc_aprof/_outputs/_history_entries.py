"""What a history record holds, made from runs (as columns) or bench results, and where it was made.

A run's kernels are grouped by (chip, task type, name) over all its devices: the history follows a
kernel on a kind of chip, not on one device. Control tasks (``N/A``) are left out. Each group gives
its sample count, median with the median's 95% distribution-free interval, p10 / p90, the median of
each PMU counter where the run has them, and the median AI Core clock of its tasks where the
columns carry one (``aic_mhz``).
"""

from __future__ import annotations

import datetime as _dt
import math
import socket
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from .._model._records import CONTROL_TASK_TYPES
from .._plans._bench import BenchResult
from .._plans._columns import TaskColumns
from .._plans._stats import counter_medians, median_interval, quantile
from .._version import __version__
from ._history_store import Environment, GitState, KernelEntry

UNKNOWN_CHIP = "unknown chip"


def git_state(where: Path) -> GitState | None:
    """The git commit, branch and dirty flag of the checkout holding *where* (None: not a checkout,
    or no git)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=where, capture_output=True, text=True, timeout=10, check=False
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return None
    branch = git("symbolic-ref", "--quiet", "--short", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return GitState(commit, branch or None, bool(status))


def environment(cann_version: str | None = None, *, where: Path | None = None) -> Environment:
    """Now, this host, this asc-aprof, and the git state of *where* (default: the working directory)."""
    return Environment(
        recorded_at=_dt.datetime.now(_dt.timezone.utc),
        host=socket.gethostname(),
        aprof_version=__version__,
        cann_version=cann_version,
        git=git_state(where or Path.cwd()),
    )


def _entry(
    chip: str, task_type: str, name: str, durations: list[float], counters: Mapping[str, float | None],
    clocks: list[float],
) -> KernelEntry:  # fmt: skip
    ordered = sorted(durations)
    low, high, _ = median_interval(ordered)
    finite = [c for c in clocks if math.isfinite(c) and c > 0]
    return KernelEntry(
        chip=chip,
        task_type=task_type,
        kernel=name,
        count=len(ordered),
        median_us=quantile(ordered, 0.5),
        ci_low_us=low,
        ci_high_us=high,
        p10_us=quantile(ordered, 0.1),
        p90_us=quantile(ordered, 0.9),
        counters=counters,
        aic_mhz=quantile(sorted(finite), 0.5) if finite else None,
    )


def entries_from_columns(runs: Iterable[tuple[TaskColumns, str | None]]) -> tuple[KernelEntry, ...]:
    """One entry per (chip, task type, kernel) over *runs* (columns with their chip, None: unknown)."""
    groups: dict[tuple[str, str, str], tuple[list[float], list[float]]] = {}
    counted: dict[tuple[str, str, str], list[tuple[TaskColumns, list[int]]]] = {}
    for columns, chip in runs:
        names, types = columns.names, columns.types
        durations = columns.durations()
        name_codes, type_codes = columns.name_codes(), columns.type_codes()
        clocks = columns.aic_mhz()  # NaN where unknown (CSVs, runs without clock data)
        picked: dict[tuple[str, str, str], list[int]] = {}
        for index in range(len(durations)):
            task_type = types[type_codes[index]]
            if task_type in CONTROL_TASK_TYPES:
                continue
            key = (chip or UNKNOWN_CHIP, task_type, names[name_codes[index]])
            samples, clock_samples = groups.setdefault(key, ([], []))
            samples.append(float(durations[index]))
            clock_samples.append(float(clocks[index]))
            picked.setdefault(key, []).append(index)
        if columns.counters is not None:
            for key, indexes in picked.items():
                counted.setdefault(key, []).append((columns, indexes))
    out = []
    for key in sorted(groups):
        samples, clock_samples = groups[key]
        medians: Mapping[str, float | None] = {}
        parts = counted.get(key, [])
        if len(parts) == 1 and parts[0][0].counters is not None:  # counters of one run only
            medians = counter_medians(parts[0][0].counters, parts[0][1])
        out.append(_entry(*key, samples, medians, clock_samples))
    return tuple(out)


def entries_from_bench(
    results: Iterable[BenchResult], *, name: str, chip: str | None = None
) -> tuple[KernelEntry, ...]:
    """One entry for the call *name* (task type ``CALL``): the call times of every result
    (several devices' results are pooled)."""
    samples = [s for result in results for s in result.samples_us]
    if not samples:
        return ()
    return (_entry(chip or UNKNOWN_CHIP, "CALL", name, samples, {}, []),)
