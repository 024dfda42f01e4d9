"""Section 1: parse speed — asc-aprof's parser against csv.DictReader, csv.reader and polars."""

from __future__ import annotations

import csv
import dataclasses
import functools
import gc
import sys
import time
import timeit
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio

from asc_aprof import AsyncProfiler, ProfilingTask, TaskParser
from asc_aprof._model._records import new_task
from asc_aprof._plans import _parser

from . import gen_csv
from ._common import (
    Config,
    Section,
    Table,
    Target,
    environment,
    fmt_rate,
    fmt_s,
    fmt_x,
    median,
    profile_call,
    tasks_gc_tracked,
)

RUN_ID = "PROF_000001_20260101000000000_00000001AAAAAAAA"
CSV_NAME = "op_summary_20260101000000.csv"
SYNC_CHUNK = 1 << 20  # what Profiler.store_result reads per feed
CONTROL_TYPES = frozenset({"PROFILING_ENABLE", "PROFILING_DISABLE"})


@dataclasses.dataclass(frozen=True)
class Layout:
    """The columns a task comes from in one CSV layout (device column None: *device* for all)."""

    name: str
    task_id: str
    op_name: str
    task_type: str
    duration: str
    device_column: str | None
    device: int | None = None

    @property
    def polars_columns(self) -> list[str]:
        cols = [self.task_id, self.op_name, self.task_type, self.duration]
        return ([self.device_column] if self.device_column else []) + cols


NEW = Layout("new op_summary", "Task ID", "Op Name", "Task Type", "Task Duration(us)", "Device_id")
OLD = Layout("old op_summary", "Task ID", "Op Name", "Task Type", "Task Duration(us)", None, device=0)
TASK_TIME = Layout("task_time", "task_id", "kernel_name", "kernel_type", "task_time(us)", "Device_id")


def run_file(root: Path) -> Path:
    """Where the new-layout CSV lives when laid out as an exported run under *root*."""
    return root / RUN_ID / "mindstudio_profiler_output" / CSV_NAME


def write_inputs(data_dir: Path, cfg: Config) -> dict[str, Path]:
    root = data_dir / "runs"
    return {
        "root": root,
        "new": gen_csv.write_csv(run_file(root), gen_csv.new_op_summary_lines(cfg.rows, devices=4)),
        "old": gen_csv.write_csv(
            data_dir / "old_op_summary.csv", gen_csv.old_op_summary_lines(cfg.side_rows)
        ),
        "task_time": gen_csv.write_csv(data_dir / "task_time.csv", gen_csv.task_time_lines(cfg.side_rows)),
    }


# -- the contenders -----------------------------------------------------------------------------
def aprof_sync(path: Path, layout: Layout, accelerated: bool | None = None) -> list[ProfilingTask]:
    """TaskParser fed 1 MiB reads: exactly what ``Profiler.store_result`` does per file."""
    parser = TaskParser(str(path), device=layout.device, accelerated=accelerated)
    out: list[ProfilingTask] = []
    with open(path, "rb") as stream:
        while chunk := stream.read(SYNC_CHUNK):
            out += parser.feed(chunk)
    out += parser.close()
    return out


async def _aprof_async(root: Path) -> list[ProfilingTask]:
    out: list[ProfilingTask] = []
    append = out.append
    async for task in AsyncProfiler(root).iter_tasks(RUN_ID):
        append(task)
    return out


def aprof_async(root: Path, backend: str) -> list[ProfilingTask]:
    """``AsyncProfiler(root).iter_tasks(run_id)``: 32 KiB anyio reads, parsed between checkpoints."""
    return anyio.run(_aprof_async, root, backend=backend)


def _task(task_id: str, name: str, ttype: str, duration: str, device: int | None) -> ProfilingTask:
    return ProfilingTask(None if task_id == "N/A" else int(task_id), name, ttype, float(duration), device)


def dict_reader(path: Path, layout: Layout) -> list[ProfilingTask]:
    """What a plain implementation does: csv.DictReader, a dict per row, same tuples out."""
    out: list[ProfilingTask] = []
    with open(path, newline="", encoding="utf-8") as stream:
        for row in csv.DictReader(stream):
            ttype = row[layout.task_type]
            duration = row[layout.duration]
            if ttype in CONTROL_TYPES or duration == "N/A":
                continue
            device = int(row[layout.device_column]) if layout.device_column else layout.device
            out.append(_task(row[layout.task_id], row[layout.op_name], ttype, duration, device))
    return out


def csv_reader(path: Path, layout: Layout) -> list[ProfilingTask]:
    """csv.reader with the column indexes looked up once in the header."""
    out: list[ProfilingTask] = []
    with open(path, newline="", encoding="utf-8") as stream:
        rows = csv.reader(stream)
        header = next(rows)
        i_id, i_name = header.index(layout.task_id), header.index(layout.op_name)
        i_type, i_dur = header.index(layout.task_type), header.index(layout.duration)
        i_dev = header.index(layout.device_column) if layout.device_column else None
        default = layout.device
        for row in rows:
            ttype = row[i_type]
            duration = row[i_dur]
            if ttype in CONTROL_TYPES or duration == "N/A":
                continue
            device = int(row[i_dev]) if i_dev is not None else default
            out.append(_task(row[i_id], row[i_name], ttype, duration, device))
    return out


def polars_rows(path: Path, layout: Layout) -> list[tuple[object, ...]]:
    """Reference for a native engine: polars.read_csv(columns=[...]).rows() (plain tuples)."""
    import polars as pl

    rows: list[tuple[object, ...]] = pl.read_csv(path, columns=layout.polars_columns).rows()
    return rows


def polars_tasks(path: Path, layout: Layout) -> list[ProfilingTask]:
    """Attribution: what an accelerator built on polars would hand back (the same ProfilingTasks)."""
    import polars as pl

    order = [layout.task_id, layout.op_name, layout.task_type, layout.duration]
    if layout.device_column is None:
        frame = pl.read_csv(path, columns=order).with_columns(pl.lit(layout.device).alias("device"))
    else:
        frame = pl.read_csv(path, columns=[*order, layout.device_column])
    return [new_task(row) for row in frame.select([*order, frame.columns[-1]]).iter_rows()]


def aprof_sync_gc_off(path: Path, layout: Layout) -> list[ProfilingTask]:
    """Attribution only: the sync path with the cyclic GC disabled for the parse."""
    gc.disable()
    try:
        return aprof_sync(path, layout)
    finally:
        gc.enable()


# -- timing -------------------------------------------------------------------------------------
Contender = tuple[str, Callable[[], Sequence[object]]]


def measure(contenders: Sequence[Contender], reps: int, check: Sequence[str]) -> dict[str, list[float]]:
    """Round-robin repetitions (noise hits every contender alike); outputs of *check* must agree."""
    times: dict[str, list[float]] = {name: [] for name, _ in contenders}
    reference: Sequence[object] | None = None
    for rep in range(reps):
        for name, fn in contenders:
            gc.collect()
            began = time.perf_counter()
            result = fn()
            times[name].append(time.perf_counter() - began)
            if rep == 0 and name in check:
                if reference is None:
                    reference = result
                elif result != reference:
                    raise AssertionError(f"{name} built different tasks than {check[0]}")
            del result
    return times


def per_row_costs(sample: str) -> list[list[str]]:
    """What one data row of the new layout costs, operation by operation (timeit, ns)."""
    env = {"line": sample, "ProfilingTask": ProfilingTask, "new": tuple.__new__}
    ops = [
        ("split the first 10 fields: line.split(',', 10)", "line.split(',', 10)"),
        ("look for a quote: line.find('\"')", "line.find('\"')"),
        (
            "count fields outside quotes (split on '\"', join, count)",
            "s = line.split('\"'); line.count(',') - ''.join(s[1::2]).count(',')",
        ),
        ("float(duration) + int(task id) + int(device)", "float('16.421'); int('17'); int('0')"),
        ("build the ProfilingTask (tuple.__new__)", "new(ProfilingTask, (1, 'k', 'AI_CORE', 1.0, 0))"),
        ("for comparison: csv.reader on the row (46 cells)", "next(csv.reader([line]))"),
    ]
    env["csv"] = csv
    rows = []
    for label, stmt in ops:
        timer = timeit.Timer(stmt, globals=env)
        number = 50_000
        best = min(timer.repeat(repeat=3, number=number)) / number
        rows.append([label, f"{best * 1e9:.0f} ns"])
    return rows


def run(cfg: Config, data_dir: Path, inputs: dict[str, Path]) -> Section:
    section = Section("parse", f"1. Parse: {cfg.rows:,}-row op_summary, new layout (46 columns)")
    new_path, root = inputs["new"], inputs["root"]
    size_mb = new_path.stat().st_size / 2**20
    section.intro = (
        f"Generated with `benchmarks/gen_csv.py`: {cfg.rows:,} rows over 4 devices, 46 columns (25 PMU), "
        f"quoted shape cells with embedded commas, trailing TABs; {size_mb:.0f} MB, laid out as an "
        f"exported run (`{RUN_ID}/mindstudio_profiler_output/{CSV_NAME}`). Every contender reads the same "
        "file from the (warm) page cache and builds the same 5 fields per row; the asc-aprof paths, "
        "csv.DictReader and csv.reader are checked to build equal `ProfilingTask` lists. polars returns "
        "plain tuples from `read_csv(columns=[5 columns]).rows()` and uses every core "
        f"({cfg.reps} repetitions, round-robin; median shown; GC enabled as in a normal program)."
    )
    contenders: list[Contender] = [
        ("asc-aprof sync (TaskParser.feed, 1 MiB reads)", lambda: aprof_sync(new_path, NEW)),
        ("asc-aprof async iter_tasks (asyncio)", lambda: aprof_async(root, "asyncio")),
        ("asc-aprof async iter_tasks (trio)", lambda: aprof_async(root, "trio")),
        ("csv.DictReader -> ProfilingTask", lambda: dict_reader(new_path, NEW)),
        ("csv.reader + column indexes -> ProfilingTask", lambda: csv_reader(new_path, NEW)),
        ("polars.read_csv(columns=...).rows()", lambda: polars_rows(new_path, NEW)),
        ("asc-aprof sync, gc disabled (attribution)", lambda: aprof_sync_gc_off(new_path, NEW)),
        ("polars -> ProfilingTask (accelerator sketch, attribution)", lambda: polars_tasks(new_path, NEW)),
    ]
    if _parser.ACCELERATED:  # the C row loop is on: show the pure-Python reference next to it
        contenders.append(
            ("asc-aprof sync, pure Python (accelerated=False)", lambda: aprof_sync(new_path, NEW, False))
        )
    names = [name for name, _ in contenders]
    sync_name, asyncio_name, _, dict_name, _, polars_name, gc_off_name, accel_name = names[:8]
    times = measure(contenders, cfg.reps, check=[n for n in names if n != polars_name])
    med = {name: median(ts) for name, ts in times.items()}
    headers = ["contender", "median", "rows/s", "DictReader time / this", "this / polars time", "all runs"]
    rows = [
        [
            name,
            fmt_s(med[name]),
            fmt_rate(cfg.rows / med[name]),
            fmt_x(med[dict_name] / med[name]),
            fmt_x(med[name] / med[polars_name]),
            ", ".join(f"{t:.2f}" for t in times[name]),
        ]
        for name in names
    ]
    section.tables.append(Table("", headers, rows))

    for label, name in (("sync", sync_name), ("async (asyncio)", asyncio_name)):
        vs_dict = med[dict_name] / med[name]
        vs_polars = med[name] / med[polars_name]
        section.targets.append(
            Target(f"{label} path vs csv.DictReader", ">= 3x faster", f"{vs_dict:.2f}x", vs_dict >= 3.0)
        )
        section.targets.append(
            Target(f"{label} path vs polars", "<= 1.5x polars' time", f"{vs_polars:.2f}x", vs_polars <= 1.5)
        )

    # Old layout and task_time, briefly.
    side: list[list[str]] = []
    for key, layout in (("old", OLD), ("task_time", TASK_TIME)):
        path = inputs[key]
        side_contenders: list[Contender] = [
            ("asc-aprof sync", functools.partial(aprof_sync, path, layout)),
            ("csv.DictReader", functools.partial(dict_reader, path, layout)),
            ("csv.reader", functools.partial(csv_reader, path, layout)),
            ("polars", functools.partial(polars_rows, path, layout)),
        ]
        side_times = measure(
            side_contenders, cfg.reps, check=["asc-aprof sync", "csv.DictReader", "csv.reader"]
        )
        m = {name: median(ts) for name, ts in side_times.items()}
        side.append(
            [
                f"{layout.name} ({path.stat().st_size / 2**20:.0f} MB)",
                fmt_rate(cfg.side_rows / m["asc-aprof sync"]),
                fmt_rate(cfg.side_rows / m["csv.DictReader"]),
                fmt_rate(cfg.side_rows / m["csv.reader"]),
                fmt_rate(cfg.side_rows / m["polars"]),
                fmt_x(m["csv.DictReader"] / m["asc-aprof sync"]),
                fmt_x(m["asc-aprof sync"] / m["polars"]),
            ]
        )
    section.tables.append(
        Table(
            f"Other layouts, {cfg.side_rows:,} rows each (rows/s, medians of {cfg.reps})",
            ["file", "asc-aprof sync", "DictReader", "csv.reader", "polars", "vs DictReader", "vs polars"],
            side,
        )
    )

    if not section.all_met:
        gc_share = 1.0 - med[gc_off_name] / med[sync_name]
        tracked = tasks_gc_tracked()
        accelerated = "active" in environment()["C parser accelerator"]
        if not accelerated:
            with open(new_path, encoding="utf-8") as stream:
                stream.readline()
                sample = stream.readline().rstrip("\n")
            section.tables.append(
                Table(
                    "Where a row's time goes (sync path, one new-layout row, timeit)",
                    ["operation", "cost"],
                    per_row_costs(sample),
                )
            )
        us = {name: med[name] / cfg.rows * 1e6 for name in names}
        gaps = [t for t in section.targets if not t.met]
        section.analysis += [
            "Measured gap: " + "; ".join(f"{t.name}: {t.measured} (target {t.goal})" for t in gaps) + ". "
            f"Per row: sync {us[sync_name]:.2f} µs, async {us[asyncio_name]:.2f} µs, DictReader "
            f"{us[dict_name]:.2f} µs, polars {us[polars_name]:.2f} µs.",
            (
                f"Garbage collection: about {gc_share:.0%} of the sync time (the gc-disabled row). "
                "`ProfilingTask` is a `NamedTuple` subclass and CPython untracks only *exact* tuples, so "
                "every task stays tracked by the cyclic GC, and each full collection triggered while the "
                "list grows walks every task parsed so far. polars' `.rows()` returns exact tuples, which "
                "the first young-generation pass untracks. The DictReader baseline builds the same tracked "
                "tuples, so GC does not flatter the DictReader ratio."
                if tracked
                else f"Garbage collection: about {gc_share:.0%} of the sync time (the gc-disabled row); "
                "the parser's records are not tracked by the GC in this version."
            ),
            (
                "Interpreter work per row in the parser's row loop (table above, and the profile below): "
                "the split, a quote-aware field count on *every* row (msprof quotes the shape cells, so "
                'every new-layout row takes the quoted branch: split on `"`, join the quoted segments, '
                "count their commas), three number conversions and the tuple. polars does the CSV work "
                "in Rust on every core."
                if not accelerated
                else "The parser ran its C row loop (accelerator active); the profile below shows "
                "where the remaining time goes."
            ),
            f"Handing polars' rows to `ProfilingTask` (the accelerator-sketch row) takes "
            f"{med[accel_name]:.2f} s, {med[accel_name] / med[polars_name]:.2f}x polars' time: creating "
            f"the {cfg.rows:,} records costs {med[accel_name] - med[polars_name]:.2f} s on top of "
            f"polars' parse, against the {0.5 * med[polars_name]:.2f} s margin that 1.5x allows"
            + (
                ". Even a native CSV engine misses the target here when it must return "
                "`ProfilingTask` objects; closing it needs a native row loop *and* cheap records "
                "(untracked by the GC, or columns converted lazily)."
                if med[accel_name] / med[polars_name] > 1.5
                else ": a native row loop that builds the same records can meet it."
            ),
            f"The async path takes {med[asyncio_name] / med[sync_name]:.2f}x the sync path's time: on top "
            "of the same parser it makes one worker-thread round trip per 32 KiB read (`aiter_file_tasks`, "
            f"{new_path.stat().st_size // (32 << 10):,} reads here) and one async-generator step per "
            "task in `iter_tasks`.",
        ]
        section.profiles.append(
            (
                f"cProfile of the sync path on the {cfg.rows:,}-row file (top 10 by own time)",
                profile_call(lambda: aprof_sync(new_path, NEW)),
            )
        )
    return section


if __name__ == "__main__":  # pragma: no cover - manual use: python -m benchmarks.parse FILE
    target = Path(sys.argv[1])
    took = time.perf_counter()
    n = len(aprof_sync(target, NEW))
    print(n, fmt_s(time.perf_counter() - took))
