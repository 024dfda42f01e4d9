"""Section 9: the columnar path -- per-kernel statistics of a run without a task object, against
what users write instead (pandas, polars), the ``summary --json`` report, and the task path
against the version before it.

In the parent: every contender computes the per-(device, kernel) statistics asc-aprof reports
(count, median, p10, p90, min, max, mean, total) from the 1,000,000-row, 46-column file of
section 1, round-robin, medians of the wall time. Children (``python -m benchmarks.columnar
MODE ...``) measure peak RSS growth per contender in a fresh interpreter. The ``summary --json``
row runs the command line in fresh processes. The A/B run against a baseline checkout
(``ASC_APROF_BENCH_BASELINE=<git rev>``) times ``Profiler.store_result`` there and here,
alternately, in fresh interpreters, as section 8 does.
"""

from __future__ import annotations

import gc
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

from asc_aprof import KernelStats, Profiler, aread_columns, kernel_stats, read_columns

from . import counters
from ._common import Config, Section, Table, Target, fmt_mb, fmt_s, fmt_x, median, run_child
from .memory import Meter
from .parse import NEW, RUN_ID, run_file

Contender = tuple[str, Callable[[], object]]
DEVICE = "Device_id"
#: (device, kernel) -> (count, median, p10, p90, min, max, mean, total)
Stats = dict[tuple[int | None, str], tuple[float, ...]]
STAT_NAMES = ("count", "median", "p10", "p90", "min", "max", "mean", "total")


# -- the contenders -----------------------------------------------------------------------------
def aprof_columns(run: Path) -> list[KernelStats]:
    """``kernel_stats(read_columns(run))``: columns filled by C, statistics by selection."""
    return kernel_stats(read_columns(run))


def aprof_columns_async(run: Path) -> list[KernelStats]:
    """The same through ``await aread_columns(run)`` (anyio file API, asyncio)."""

    async def main() -> list[KernelStats]:
        return kernel_stats(await aread_columns(run))

    return anyio.run(main)


def aprof_tasks(root: Path) -> list[KernelStats]:
    """The task-object path: ``kernel_stats(Profiler(root).store_result(run_id))``."""
    return kernel_stats(Profiler(root).store_result(RUN_ID))


def pandas_stats(path: Path) -> Stats:
    """pandas ``read_csv(usecols)`` + ``groupby``: the same statistics (quantiles linear)."""
    import pandas as pd

    frame = pd.read_csv(path, usecols=[DEVICE, NEW.op_name, NEW.duration])
    grouped = frame.groupby([DEVICE, NEW.op_name], sort=False)[NEW.duration]
    table = grouped.agg(
        count="count",
        median="median",
        p10=lambda s: s.quantile(0.1),
        p90=lambda s: s.quantile(0.9),
        min="min",
        max="max",
        mean="mean",
        total="sum",
    )
    return {
        (int(k[0]), str(k[1])): tuple(float(v) for v in row)
        for k, row in zip(table.index, table.values, strict=True)
    }


def polars_stats(path: Path) -> Stats:
    """polars ``read_csv(columns)`` + ``group_by``: the same statistics (quantiles linear)."""
    import polars as pl

    frame = pl.read_csv(path, columns=[DEVICE, NEW.op_name, NEW.duration])
    d = pl.col(NEW.duration)
    table = frame.group_by([DEVICE, NEW.op_name]).agg(
        d.count().alias("count"),
        d.median().alias("median"),
        d.quantile(0.1, "linear").alias("p10"),
        d.quantile(0.9, "linear").alias("p90"),
        d.min().alias("min"),
        d.max().alias("max"),
        d.mean().alias("mean"),
        d.sum().alias("total"),
    )
    return {(int(r[0]), str(r[1])): tuple(float(v) for v in r[2:]) for r in table.iter_rows()}


def as_stats(stats: Sequence[KernelStats]) -> Stats:
    return {
        (s.device, s.name): (
            s.count,
            s.median_us,
            s.p10_us,
            s.p90_us,
            s.min_us,
            s.max_us,
            s.mean_us,
            s.total_us,
        )
        for s in stats
    }


def check_same(ours: Stats, theirs: Stats, who: str) -> None:
    """Ours are rounded to 3 decimals (ns); theirs are not: equal within that."""
    if set(ours) != set(theirs):
        raise AssertionError(f"{who}: other kernels {sorted(theirs)} than asc-aprof's {sorted(ours)}")
    for key, mine in ours.items():
        for name, a, b in zip(STAT_NAMES, mine, theirs[key], strict=True):
            if not math.isclose(a, b, rel_tol=1e-9, abs_tol=6e-4):
                raise AssertionError(f"{who}: {key} {name} is {b}, asc-aprof says {a}")


# -- children -----------------------------------------------------------------------------------
def memory_child(mode: str, root: Path) -> dict[str, Any]:
    import pandas  # noqa: F401 - imported before the baseline, as asc_aprof and polars are
    import polars  # noqa: F401

    run = root / RUN_ID
    path = run_file(root)
    meter = Meter()
    meter.start()
    out: object
    if mode == "columns":
        out = aprof_columns(run)
    elif mode == "tasks":
        out = aprof_tasks(root)
    elif mode == "pandas":
        out = pandas_stats(path)
    elif mode == "polars":
        out = polars_stats(path)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    result = meter.stop()
    result["kernels"] = len(out) if isinstance(out, list | dict) else 0
    return result


def summary_json(run: Path, reps: int) -> tuple[list[float], int]:
    """``asc-aprof summary RUN --json`` in fresh processes: wall times, and the report's size."""
    script = Path(sys.executable).with_name("asc-aprof")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "asc_aprof.cli"]
    times, size = [], 0
    for _ in range(reps + 1):  # the first warms the page cache and the bytecode caches
        began = time.perf_counter()
        done = subprocess.run([*command, "summary", str(run), "--json"], capture_output=True, check=True)
        times.append(time.perf_counter() - began)
        size = len(done.stdout)
        json.loads(done.stdout)
    return times[1:], size


PANDAS_SCRIPT = """
import sys
import pandas as pd
frame = pd.read_csv(sys.argv[1], usecols=["Device_id", "Op Name", "Task Duration(us)"])
g = frame.groupby(["Device_id", "Op Name"], sort=False)["Task Duration(us)"]
print(g.agg(["count", "median", "min", "max", "mean", "sum"]).to_json())
"""


def import_process(reps: int) -> list[float]:
    """``python -c "import asc_aprof.cli"``: what every command pays before reading anything."""
    times = []
    for _ in range(reps + 1):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import asc_aprof.cli"], capture_output=True, check=True)
        times.append(time.perf_counter() - began)
    return times[1:]


def pandas_process(path: Path, reps: int) -> list[float]:
    times = []
    for _ in range(reps + 1):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", PANDAS_SCRIPT, str(path)], capture_output=True, check=True)
        times.append(time.perf_counter() - began)
    return times[1:]


def fmt_size(size: int) -> str:
    return fmt_mb(size) if size >= 2**20 else f"{size / 1024:.1f} KB"


# -- the section --------------------------------------------------------------------------------
#: Repetitions of this section's in-process contenders (at least; a shared machine is noisy).
MIN_REPS = 7


def measure(
    contenders: Sequence[Contender], reps: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU seconds (every thread of the process) per contender, round-robin."""
    times: dict[str, list[float]] = {name: [] for name, _ in contenders}
    cpu: dict[str, list[float]] = {name: [] for name, _ in contenders}
    for _ in range(reps):
        for name, fn in contenders:
            gc.collect()
            began, began_cpu = time.perf_counter(), time.process_time()
            result = fn()
            times[name].append(time.perf_counter() - began)
            cpu[name].append(time.process_time() - began_cpu)
            del result
    return times, cpu


def run(cfg: Config, data_dir: Path, inputs: dict[str, Path]) -> Section:
    root = inputs["root"]
    run_dir = root / RUN_ID
    path = run_file(root)
    section = Section(
        "columnar", f"10. Columnar statistics: per-kernel statistics of the {cfg.rows:,}-row op_summary"
    )
    section.intro = (
        f"The file of section 1 ({path.stat().st_size / 2**20:.0f} MB). Every contender computes the "
        "statistics `asc-aprof summary` shows per (device, kernel): count, median, p10, p90, min, max, "
        "mean, total. asc-aprof's columnar path is `kernel_stats(read_columns(run))`: the C row loop "
        "fills durations and coded devices / names / types (no task object), the statistics come from "
        "grouping the codes and selecting order statistics. pandas reads the 3 columns it needs "
        "(`read_csv(usecols=...)`) and aggregates with `groupby`; polars the same with "
        "`read_csv(columns=...)` and `group_by` (both multi-threaded where they can be; the machine "
        "has 2 cores). Their figures are checked against asc-aprof's (ours are rounded to the ns)."
    )
    columns = "asc-aprof columns, sync: kernel_stats(read_columns(run))"
    columns_async = "asc-aprof columns, async (asyncio): kernel_stats(await aread_columns(run))"
    tasks = "asc-aprof task objects: kernel_stats(store_result(run_id))"
    pandas = "pandas read_csv(usecols) + groupby"
    polars = "polars read_csv(columns) + group_by"
    contenders: list[Contender] = [
        (columns, lambda: aprof_columns(run_dir)),
        (columns_async, lambda: aprof_columns_async(run_dir)),
        (tasks, lambda: aprof_tasks(root)),
        (pandas, lambda: pandas_stats(path)),
        (polars, lambda: polars_stats(path)),
    ]
    ours = aprof_columns(run_dir)
    if ours != aprof_tasks(root) or ours != aprof_columns_async(run_dir):
        raise AssertionError("the columnar statistics differ from the task path's")
    check_same(as_stats(ours), pandas_stats(path), "pandas")
    check_same(as_stats(ours), polars_stats(path), "polars")
    reps = cfg.reps if cfg.quick else max(cfg.reps, MIN_REPS)
    times, cpu = measure(contenders, reps)
    med = {name: median(ts) for name, ts in times.items()}
    cpu_med = {name: median(ts) for name, ts in cpu.items()}
    section.tables.append(
        Table(
            f"Wall time, {reps} repetitions round-robin (targets), and CPU seconds of all the process' "
            "threads (attribution: less sensitive to other load on the machine)",
            ["contender", "median", "pandas time / this", "this / polars time", "CPU s", "all runs"],
            [
                [
                    name,
                    fmt_s(med[name]),
                    fmt_x(med[pandas] / med[name]),
                    fmt_x(med[name] / med[polars]),
                    f"{cpu_med[name]:.2f}",
                    ", ".join(f"{t:.2f}" for t in times[name]),
                ]
                for name, _ in contenders
            ],
        )
    )
    vs_pandas = med[pandas] / med[columns]
    vs_polars = med[columns] / med[polars]
    vs_sync = med[columns_async] / med[columns]
    section.targets += [
        Target("columnar statistics vs pandas read_csv(usecols) + groupby", ">= 1.5x faster",
               f"{vs_pandas:.2f}x", vs_pandas >= 1.5),
        Target("columnar statistics vs polars", "<= 1.5x polars' time", f"{vs_polars:.2f}x",
               vs_polars <= 1.5),
        Target("async columnar path vs the sync one", "<= 1.3x its time", f"{vs_sync:.2f}x", vs_sync <= 1.3),
    ]  # fmt: skip
    section.notes.append(
        f"The task-object path takes {fmt_x(med[tasks] / med[columns])} the columnar one's time: it builds "
        f"{cfg.rows:,} `ProfilingTask` objects before computing anything."
    )

    modes = {"columns": columns, "tasks": tasks, "pandas": pandas, "polars": polars}
    mem = {mode: run_child("columnar", ["memory", mode, str(root)]) for mode in modes}
    section.tables.append(
        Table(
            "Memory (fresh interpreter each, pandas, polars and asc_aprof imported first; peak RSS growth "
            "while computing the statistics)",
            ["how", "peak RSS growth", "per row"],
            [
                [modes[m], fmt_mb(r["growth_bytes"]), f"{r['growth_bytes'] / cfg.rows:.0f} B"]
                for m, r in mem.items()
            ],
        )
    )
    growth = mem["columns"]["growth_bytes"]
    section.targets.append(
        Target(
            "columnar statistics, peak memory growth",
            "< 40 MB",
            f"{fmt_mb(growth)} (pandas {fmt_mb(mem['pandas']['growth_bytes'])}, "
            f"polars {fmt_mb(mem['polars']['growth_bytes'])})",
            growth < 40 * 2**20,
        )
    )

    json_times, size = summary_json(run_dir, cfg.reps)
    pandas_times = pandas_process(path, cfg.reps)
    import_times = import_process(cfg.reps)
    json_median = median(json_times)
    section.tables.append(
        Table(
            "Fresh processes (imports included)",
            ["command", "median", "output", "all runs"],
            [
                [
                    "asc-aprof summary RUN --json",
                    fmt_s(json_median),
                    fmt_size(size),
                    ", ".join(f"{t:.2f}" for t in json_times),
                ],
                [
                    "python -c 'import asc_aprof.cli' (the start-up alone)",
                    fmt_s(median(import_times)),
                    "",
                    ", ".join(f"{t:.2f}" for t in import_times),
                ],
                [
                    "python -c 'pandas read_csv(usecols) + groupby, to_json'",
                    fmt_s(median(pandas_times)),
                    "",
                    ", ".join(f"{t:.2f}" for t in pandas_times),
                ],
            ],
        )
    )
    section.targets += [
        Target(
            f"summary --json of a {cfg.rows:,}-task run: time", "< 2 s", fmt_s(json_median), json_median < 2
        ),
        Target(
            f"summary --json of a {cfg.rows:,}-task run: size", "< 15 MB", fmt_size(size), size < 15 * 2**20
        ),
    ]

    rev = os.environ.get("ASC_APROF_BENCH_BASELINE")
    if rev:
        ab(section, rev, root)
    else:
        section.notes.append(
            "The task-object path against the version before the columnar one: set "
            "ASC_APROF_BENCH_BASELINE to that git revision (e.g. the branch point) to measure it."
        )
    return section


def ab(section: Section, rev: str, root: Path) -> None:
    """The task-object path against *rev*, measured as section 8 measures parsing."""
    counters.ab(
        section,
        rev,
        root,
        caption="The task-object path against {rev}",
        target="task-object path (store_result) vs {rev}",
    )


if __name__ == "__main__":
    if sys.argv[1] == "memory":
        print(json.dumps(memory_child(sys.argv[2], Path(sys.argv[3]))))
    else:
        raise SystemExit(f"unknown child {sys.argv[1]!r}")
