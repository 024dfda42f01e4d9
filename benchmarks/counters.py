"""Section 7: per-task PMU counters -- their cost, against csv.DictReader and polars, and what
parsing without them costs now against the version before counters existed.

In the parent: every contender reads the 1,000,000-row, 46-column file of section 1 (25 PMU
columns) round-robin. Children (``python -m benchmarks.counters MODE ...``) measure peak RSS per
task with and without counters, and the A/B run against a baseline checkout:
``ASC_APROF_BENCH_BASELINE=<git rev>`` builds that revision's sources (C extension included) in
a temporary directory and times ``Profiler.store_result`` there and here, alternately, in fresh
interpreters.
"""

from __future__ import annotations

import csv
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

from asc_aprof import AsyncProfiler, Profiler, ProfilingTask, TaskParser

from ._common import REPO_ROOT, Config, Section, Table, Target, fmt_mb, fmt_s, fmt_x, median, run_child
from .memory import Meter
from .parse import CONTROL_TYPES, NEW, RUN_ID, SYNC_CHUNK, run_file

Contender = tuple[str, Callable[[], object]]
CounterRow = dict[str, float | None]


def counter_columns(path: Path) -> list[str]:
    """The PMU columns of the file: every column after ``Context ID``."""
    with open(path, newline="", encoding="utf-8") as stream:
        header = next(csv.reader(stream))
    return header[header.index("Context ID") + 1 :]


# -- the contenders -----------------------------------------------------------------------------
def aprof_store(root: Path, counters: bool) -> int:
    """``Profiler(root).store_result(run_id, counters=...)``: tasks, and the columnar counters."""
    result = Profiler(root).store_result(RUN_ID, counters=counters)
    return len(result.tasks)


def aprof_store_dicts(root: Path) -> list[CounterRow]:
    """The same, then one dict of counters per task (what DictReader users end up holding)."""
    result = Profiler(root).store_result(RUN_ID, counters=True)
    assert result.counters is not None
    return list(result.counters.rows())


def aprof_pure(root: Path) -> int:
    """Attribution: the pure-Python row loop reading the counters (``accelerated=False``)."""
    path = run_file(root)
    parser = TaskParser(str(path), counters=True, accelerated=False)
    n = 0
    with open(path, "rb") as stream:
        while chunk := stream.read(SYNC_CHUNK):
            n += len(parser.feed(chunk))
    n += len(parser.close())
    return n


async def _async_store(root: Path) -> int:
    result = await AsyncProfiler(root).store_result(RUN_ID, counters=True)
    return len(result.tasks)


async def _async_stream(root: Path) -> int:
    n = 0
    async for _task, _row in AsyncProfiler(root).iter_tasks(RUN_ID, counters=True):
        n += 1
    return n


def dict_reader_counters(path: Path, columns: Sequence[str]) -> list[CounterRow]:
    """csv.DictReader: the tasks, and a dict of every counter (float, N/A as None) per task."""
    tasks: list[ProfilingTask] = []
    out: list[CounterRow] = []
    with open(path, newline="", encoding="utf-8") as stream:
        for row in csv.DictReader(stream):
            ttype, duration = row[NEW.task_type], row[NEW.duration]
            if ttype in CONTROL_TYPES or duration == "N/A":
                continue
            tasks.append(
                ProfilingTask(
                    int(row[NEW.task_id]), row[NEW.op_name], ttype, float(duration), int(row["Device_id"])
                )
            )
            out.append({c: None if row[c] == "N/A" else float(row[c]) for c in columns})
    return out


def polars_counters(path: Path, columns: Sequence[str]) -> int:
    """polars.read_csv of the task columns and every counter (N/A as null): a frame, no rows."""
    import polars as pl

    frame = pl.read_csv(
        path,
        columns=[*NEW.polars_columns, *columns],
        null_values="N/A",
        schema_overrides={c: pl.Float64 for c in columns},
    )
    return int(frame.height)


# -- children -----------------------------------------------------------------------------------
def memory_child(mode: str, root: Path) -> dict[str, Any]:
    meter = Meter()
    meter.start()
    result = Profiler(root).store_result(RUN_ID, counters=mode == "counters")
    out = meter.stop()
    out["tasks"] = len(result.tasks)
    if result.counters is not None:
        out["counter_bytes"] = sum(
            len(result.counters.values(c)) * 8 for c in result.counters.columns
        )  # the arrays' payload
        out["columns"] = len(result.counters.columns)
    return out


AB_SCRIPT = """
import gc, json, sys, time
import asc_aprof
from asc_aprof import Profiler
root, run_id, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
Profiler(root).store_result(run_id)  # warm the page cache and the imports
times = []
for _ in range(reps):
    gc.collect()
    began = time.process_time()
    result = Profiler(root).store_result(run_id)
    times.append(time.process_time() - began)
    del result
print(json.dumps({"times": times, "module": asc_aprof.__file__}))
"""


#: Fresh interpreters per tree in the A/B run.
AB_CHILDREN = 7


def build_baseline(rev: str, into: Path) -> Path:
    """*rev*'s sources under *into*, with its C extension built in place; the ``src`` to import."""
    archive = subprocess.run(["git", "archive", rev], cwd=REPO_ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
        cwd=into,
        capture_output=True,
        check=True,
    )
    return into / "src"


def ab_child(src: Path | None, root: Path, reps: int) -> dict[str, Any]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-c", AB_SCRIPT, str(root), RUN_ID, str(reps)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    result: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
    return result


# -- the section --------------------------------------------------------------------------------
def measure(contenders: Sequence[Contender], reps: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name, _ in contenders}
    for _ in range(reps):
        for name, fn in contenders:
            gc.collect()
            began = time.perf_counter()
            result = fn()
            times[name].append(time.perf_counter() - began)
            del result
    return times


def run(cfg: Config, data_dir: Path, inputs: dict[str, Path]) -> Section:
    root = inputs["root"]
    path = run_file(root)
    columns = counter_columns(path)
    section = Section(
        "counters",
        f"8. Per-task counters: every PMU column of the {cfg.rows:,}-row, 46-column op_summary",
    )
    section.intro = (
        f"The file of section 1 ({path.stat().st_size / 2**20:.0f} MB, {len(columns)} PMU columns). "
        "`store_result(run_id, counters=True)` parses the tasks and every counter into columns "
        "(`TaskCounters`: one array of doubles per column); the DictReader contender builds the same "
        "tasks and a dict of every counter per task (float, `N/A` as None), and the asc-aprof row "
        "after it builds the same dicts from the columns (`list(result.counters.rows())`); polars "
        "reads the same columns (the 5 a task needs and the counters, `N/A` as null) into a frame. "
        f"{cfg.reps} repetitions, round-robin, medians; GC on."
    )
    no_counters = "asc-aprof sync, no counters: store_result(run_id)"
    sync = "asc-aprof sync, counters: store_result(run_id, counters=True)"
    dicts = "asc-aprof sync, counters + a dict per task (counters.rows())"
    async_store = "asc-aprof async (asyncio): store_result(run_id, counters=True)"
    stream = "asc-aprof async (asyncio): iter_tasks(run_id, counters=True), pairs"
    reader = "csv.DictReader -> tasks + a dict of counters per task"
    polars = "polars.read_csv(5 task columns + counters), a frame"
    pure = "asc-aprof sync, counters, pure Python (attribution)"
    contenders: list[Contender] = [
        (no_counters, lambda: aprof_store(root, False)),
        (sync, lambda: aprof_store(root, True)),
        (dicts, lambda: aprof_store_dicts(root)),
        (async_store, lambda: anyio.run(_async_store, root)),
        (stream, lambda: anyio.run(_async_stream, root)),
        (reader, lambda: dict_reader_counters(path, columns)),
        (polars, lambda: polars_counters(path, columns)),
        (pure, lambda: aprof_pure(root)),
    ]
    if aprof_store_dicts(root) != dict_reader_counters(path, columns):
        raise AssertionError("asc-aprof's counters differ from csv.DictReader's")
    times = measure(contenders, cfg.reps)
    med = {name: median(ts) for name, ts in times.items()}
    section.tables.append(
        Table(
            "",
            ["contender", "median", "µs/row", "DictReader time / this", "this / polars time", "all runs"],
            [
                [
                    name,
                    fmt_s(med[name]),
                    f"{med[name] / cfg.rows * 1e6:.2f}",
                    fmt_x(med[reader] / med[name]),
                    fmt_x(med[name] / med[polars]),
                    ", ".join(f"{t:.2f}" for t in times[name]),
                ]
                for name, _ in contenders
            ],
        )
    )
    for label, name in (
        ("sync path with every counter", sync),
        ("the same, building a dict per task", dicts),
    ):
        ratio = med[reader] / med[name]
        section.targets.append(
            Target(
                f"{label} vs csv.DictReader building the dicts", ">= 3x faster", f"{ratio:.2f}x", ratio >= 3
            )
        )
    vs_polars = med[sync] / med[polars]
    section.targets.append(
        Target(
            "sync path with every counter vs polars, same columns",
            "<= 2x polars' time",
            f"{vs_polars:.2f}x",
            vs_polars <= 2,
        )
    )
    section.notes.append(
        f"Counters cost {med[sync] - med[no_counters]:.2f} s on top of the tasks "
        f"({(med[sync] - med[no_counters]) / cfg.rows / len(columns) * 1e9:.0f} ns a cell)."
    )

    mem = {mode: run_child("counters", ["memory", mode, str(root)]) for mode in ("plain", "counters")}
    per_task = {mode: res["growth_bytes"] / max(res["tasks"], 1) for mode, res in mem.items()}
    payload = mem["counters"]["counter_bytes"] / max(mem["counters"]["tasks"], 1)
    section.tables.append(
        Table(
            "Memory (fresh interpreter each, peak RSS growth during `store_result`)",
            ["how", "tasks", "peak RSS growth", "per task"],
            [
                [
                    "store_result(run_id)",
                    f"{mem['plain']['tasks']:,}",
                    fmt_mb(mem["plain"]["growth_bytes"]),
                    f"{per_task['plain']:.0f} B",
                ],
                [
                    "store_result(run_id, counters=True)",
                    f"{mem['counters']['tasks']:,}",
                    fmt_mb(mem["counters"]["growth_bytes"]),
                    f"{per_task['counters']:.0f} B",
                ],
            ],
        )
    )
    section.notes.append(
        f"Memory per task with counters: {per_task['counters']:.0f} B peak, of which the counter "
        f"columns hold {payload:.0f} B ({mem['counters']['columns']} columns x 8 B); without counters "
        f"{per_task['plain']:.0f} B."
    )

    rev = os.environ.get("ASC_APROF_BENCH_BASELINE")
    if rev:
        ab(section, rev, root)
    else:
        section.notes.append(
            "Parsing without counters against the version before them: set ASC_APROF_BENCH_BASELINE "
            "to that git revision (e.g. the branch point) to measure it."
        )
    return section


def ab(
    section: Section,
    rev: str,
    root: Path,
    *,
    caption: str = "Without counters, against {rev}",
    target: str = "parsing without counters vs {rev}",
) -> None:
    """Alternating fresh interpreters, the baseline's store_result then this tree's, each timed
    in CPU seconds (the parse is single-threaded; other processes on a shared machine then shift
    it less than the wall clock) and kept as its best of 2 runs after a warm-up. *caption* and
    *target* name the table and the target (``{rev}`` is filled in)."""
    workdir = Path(tempfile.mkdtemp(prefix="asc-aprof-baseline-"))
    try:
        src = build_baseline(rev, workdir)
        runs: dict[str, list[float]] = {"baseline": [], "this tree": []}
        modules: dict[str, str] = {}
        for _ in range(AB_CHILDREN):
            for side, where in (("baseline", src), ("this tree", None)):
                res = ab_child(where, root, 2)
                runs[side].append(min(res["times"]))
                modules[side] = res["module"]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if not modules["baseline"].startswith(str(workdir)):
        raise AssertionError(f"the baseline child imported {modules['baseline']}, not the baseline")
    base, ours = median(runs["baseline"]), median(runs["this tree"])
    section.tables.append(
        Table(
            f"{caption.format(rev=rev)}: `Profiler.store_result(run_id)` in {AB_CHILDREN} fresh "
            "interpreters per tree, alternating (CPU seconds, each child's best of 2; median)",
            ["tree", "median", "all children"],
            [[side, fmt_s(median(ts)), ", ".join(f"{t:.3f}" for t in ts)] for side, ts in runs.items()],
        )
    )
    ratio = ours / base
    section.targets.append(
        Target(target.format(rev=rev), "<= 1.05x its time", f"{ratio:.3f}x", ratio <= 1.05)
    )


if __name__ == "__main__":
    if sys.argv[1] == "memory":
        print(json.dumps(memory_child(sys.argv[2], Path(sys.argv[3]))))
    else:
        raise SystemExit(f"unknown child {sys.argv[1]!r}")
