"""Shared pieces: configuration, statistics, child processes, hot-path profiles, report sections."""

from __future__ import annotations

import cProfile
import dataclasses
import datetime as _dt
import importlib.metadata
import json
import os
import platform
import pstats
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from asc_aprof._plans import _parser

#: The directory holding the ``benchmarks`` package (the repository root).
REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass(frozen=True)
class Config:
    """What one ``python -m benchmarks`` run measures."""

    rows: int = 1_000_000
    reps: int = 3
    quick: bool = False
    #: rows of the old-layout and task_time files (the brief comparison)
    side_rows: int = 250_000
    #: simulated tasks collected in the event-loop stall benchmark
    stall_tasks: int = 1_000_000
    sweep_cases: tuple[int, ...] = (16, 64)
    sweep_devices: tuple[int, ...] = (4, 8)
    sweep_reps: int = 3
    #: cases the sequential sync loop really runs (larger counts are extrapolated from it)
    sequential_cases: int = 16
    kernels_per_case: int = 2000
    overhead_cycles: int = 200
    overhead_full_cycles: int = 20


def quick_config(rows: int | None) -> Config:
    n = rows or 50_000
    return Config(
        rows=n,
        reps=2,
        quick=True,
        side_rows=max(n // 4, 1000),
        stall_tasks=n,
        sweep_cases=(16,),
        sweep_devices=(4,),
        sweep_reps=1,
        sequential_cases=4,
        overhead_cycles=30,
        overhead_full_cycles=5,
    )


# -- statistics ---------------------------------------------------------------------------------
def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (*q* in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), round(q / 100.0 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def timed(fn: Callable[[], object]) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


# -- formatting ---------------------------------------------------------------------------------
def fmt_rate(rows_per_s: float) -> str:
    if rows_per_s >= 1e6:
        return f"{rows_per_s / 1e6:.2f} M/s"
    return f"{rows_per_s / 1e3:.0f} k/s"


def fmt_s(seconds: float) -> str:
    return f"{seconds:.3f} s" if seconds < 100 else f"{seconds:.1f} s"


def fmt_ms(seconds: float) -> str:
    return "-" if seconds != seconds else f"{seconds * 1e3:.2f} ms"  # NaN: nothing measured


def fmt_us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} µs"


def fmt_x(ratio: float) -> str:
    return f"{ratio:.2f}x"


def fmt_mb(n_bytes: float) -> str:
    return f"{n_bytes / 2**20:.1f} MB"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(row) for row in rows]
    return "\n".join(out)


# -- report sections ----------------------------------------------------------------------------
@dataclasses.dataclass
class Target:
    name: str
    goal: str
    measured: str
    met: bool


@dataclasses.dataclass
class Table:
    caption: str
    headers: list[str]
    rows: list[list[str]]


@dataclasses.dataclass
class Section:
    key: str
    title: str
    intro: str = ""
    tables: list[Table] = dataclasses.field(default_factory=list)
    targets: list[Target] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    #: shown only when a target is missed: the measured gap and what limits it
    analysis: list[str] = dataclasses.field(default_factory=list)
    profiles: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    #: what did not run at all (a child that crashed or hung): fails a --quick run, which CI makes
    broken: list[str] = dataclasses.field(default_factory=list)

    @property
    def all_met(self) -> bool:
        return all(t.met for t in self.targets)


# -- environment --------------------------------------------------------------------------------
def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def environment() -> dict[str, str]:
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "asc-aprof": f"{_version('asc-aprof')} ({os.environ.get('ASC_APROF_BENCH_SOURCE') or _git_state()})",
        "C parser accelerator": _accelerator(),
        "anyio": _version("anyio"),
        "trio": _version("trio"),
        "polars": _version("polars"),
        "parser row loop": "C accelerator" if _parser.ACCELERATED else "pure Python",
        "cpus": str(os.cpu_count()),
        "load average (1/5/15 min) at start": _loadavg(),
        "platform": platform.platform(),
        "machine": platform.machine(),
    }


def _accelerator() -> str:
    try:
        from asc_aprof._plans import _parser
    except ImportError:
        return "n/a"
    if not hasattr(_parser, "ACCELERATED"):
        return "none in this version (pure-Python parser)"
    return "active" if getattr(_parser, "ACCELERATED") else "off or not built (pure-Python parser)"  # noqa: B009


def tasks_gc_tracked() -> bool:
    """Whether the parser's ProfilingTask records are tracked by the cyclic GC."""
    import gc

    from asc_aprof import TaskParser

    parser = TaskParser()
    tasks = parser.feed(b"Op Name,Task Type,Task Duration(us)\nk,AI_CORE,1.0\n") + parser.close()
    gc.collect()
    return gc.is_tracked(tasks[0])


def _git_state() -> str:
    """The commit measured, and whether src/ had uncommitted changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "not a git checkout"
    return f"git {head}" + (" + uncommitted changes in src/" if dirty else "")


def _loadavg() -> str:
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


# -- child processes ----------------------------------------------------------------------------
def run_child(module: str, args: Sequence[str], timeout: float = 600.0) -> dict[str, Any]:
    """Run ``python -m benchmarks.<module> args`` in a fresh interpreter; its last stdout line is JSON."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"benchmarks.{module} {' '.join(args)} exited with {proc.returncode}:\n{proc.stderr[-3000:]}"
        )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# -- hot-path profiles --------------------------------------------------------------------------
#: Functions that only wait (the loop's poll, lock and event waits): left out of a hot-path top-N.
WAITING = ("poll", "select", "acquire", "wait", "sleep", "_run_once")


def top_functions(profile: cProfile.Profile, limit: int = 10, skip_waiting: bool = True) -> str:
    """The *limit* functions with the most own time, as a fixed-width text table."""
    stats = pstats.Stats(profile)
    # pstats keeps its table in an untyped attribute: (file, line, name) -> (cc, nc, tt, ct, callers)
    entries: dict[tuple[str, int, str], tuple[int, int, float, float, object]] = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in entries.values()) or 1.0
    rows = []
    for (filename, lineno, name), (_, ncalls, tottime, cumtime, _) in entries.items():
        if skip_waiting and filename == "~" and any(w in name for w in WAITING):
            continue
        rows.append((tottime, cumtime, ncalls, _where(filename, lineno, name)))
    rows.sort(reverse=True)
    lines = [f"{'tottime':>9} {'share':>6} {'cumtime':>9} {'ncalls':>9}  function"]
    for tottime, cumtime, ncalls, where in rows[:limit]:
        lines.append(f"{tottime:9.3f} {tottime / total:6.1%} {cumtime:9.3f} {ncalls:9d}  {where}")
    lines.append(f"(total profiled own time {total:.3f} s)")
    return "\n".join(lines)


def _where(filename: str, lineno: int, name: str) -> str:
    if filename == "~":
        return name
    path = Path(filename)
    parts = path.parts
    for anchor in ("asc_aprof", "benchmarks", "anyio", "trio", "asyncio"):
        if anchor in parts:
            path = Path(*parts[parts.index(anchor) :])
            break
    else:
        path = Path(path.name)
    return f"{path}:{lineno}({name})"


def profile_call(fn: Callable[[], object], limit: int = 10) -> str:
    profile = cProfile.Profile()
    profile.enable()
    try:
        fn()
    finally:
        profile.disable()
    return top_functions(profile, limit)
