"""The ``asc-aprof`` command line: demo, summary, export, compare, trace, report.

rich (the ``cli`` extra) draws tables and progress bars when installed; without it the output is
plain text. Neither this module nor rich is imported by ``import asc_aprof``.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import math
import os
import random
import shutil
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import anyio

from ._cann._discovery import discover_toolkit
from ._cann._export import run_export_async
from ._cann._layout import MERGED_DIR
from ._model._errors import AprofError, ToolkitNotFoundError
from ._model._records import CONTROL_TASK_TYPES, ProfilingResult, ProfilingTask
from ._model._toolkit import Toolkit
from ._outputs._json_report import (
    JsonRuns,
    load_json_columns,
    no_samples_error,
    read_runs,
    report,
    runs_of,
    stored_report,
)
from ._plans._columns import TaskColumns
from ._plans._raw import RawReadDeclined, Reader
from ._plans._stats import DURATION, KernelChange, KernelStats, compare_runs, kernel_stats, run_kernel_stats
from ._plans._verdict import VERDICT_RULE, Verdict, VerdictKind
from ._runs._info import RunInfo, collection_line
from ._runs._run import RunUnreadable, SourcesDisagree
from ._version import __version__
from .sim._build import SimulatorBuildError


class CliError(Exception):
    """A failure reported as one line on stderr."""


# -- output helpers -----------------------------------------------------------------------------------
def _rich_console() -> Any:
    try:
        from rich.console import Console
    except ImportError:
        return None
    return Console()


def _numeric(values: Sequence[str]) -> bool:
    try:
        for value in values:
            float(value.rstrip("%"))
    except ValueError:
        return False
    return bool(values)


@dataclasses.dataclass(frozen=True, slots=True)
class Column:
    """A table column and how it gives way on a narrow terminal.

    :ivar drop: 0: always shown; otherwise columns are hidden highest ``drop`` first (columns of
        one level together) until the table fits
    :ivar wrap: free text (kernel names) that rich may fold; every other cell is never cut
    :ivar key: names the row (case, device, kernel): the heading of a row in the stacked layout
    """

    name: str
    drop: int = 0
    wrap: bool = False
    key: bool = False


GAP: Final = 2  # spaces between columns, in the plain layout and in the rich one (no borders)
WRAP_MIN: Final = 16  # a folded kernel name keeps at least this many characters per line


def terminal_width(console: Any = None) -> int | None:
    """The width tables must fit: rich's, the terminal's or ``$COLUMNS``; None (no limit) in a pipe."""
    if console is not None:
        return int(console.width)
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else None


def fit_columns(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int | None, *, fold: bool
) -> list[int] | None:
    """Indices of the columns to show within *width*, or None when only the stacked layout fits.

    Numbers keep their full width; with *fold* (rich) free-text columns may shrink to
    ``WRAP_MIN`` characters and wrap.
    """
    natural = [max([len(c.name), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    need = [
        min(w, max(WRAP_MIN, len(c.name))) if fold and c.wrap else w
        for c, w in zip(columns, natural, strict=True)
    ]
    shown = list(range(len(columns)))

    def total() -> int:
        return sum(need[i] for i in shown) + GAP * (len(shown) - 1)

    for level in sorted({c.drop for c in columns if c.drop}, reverse=True):
        if width is None or total() <= width:
            break
        shown = [i for i in shown if columns[i].drop != level]  # a level goes as a whole (p10 and p90)
    if width is not None and total() > width:
        return None
    return shown


def stacked_lines(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> list[str]:
    """One block per row: its key cells on a line, then ``name value`` pairs wrapped to *width*."""
    lines: list[str] = []
    for row in rows:
        keys = [f"{c.name} {v}" for c, v in zip(columns, row, strict=True) if c.key]
        pairs = [f"{c.name} {v}" for c, v in zip(columns, row, strict=True) if not c.key]
        lines.append("  ".join(keys) if keys else pairs.pop(0))
        line = " "
        for pair in pairs:
            if len(line) > 1 and len(line) + 2 + len(pair) > width:
                lines.append(line)
                line = " "
            line += " " + pair if len(line) == 1 else "  " + pair
        if len(line) > 1:
            lines.append(line)
    return lines


def print_table(
    title: str,
    columns: Sequence[Column | str],
    rows: Sequence[Sequence[str]],
    *,
    console: Any = None,
    width: int | None = None,
) -> None:
    """A table on stdout that fits the terminal; numbers are never cut.

    rich (when installed and stdout is a terminal, or *console* is given) or aligned plain text.
    A narrow terminal hides the least important columns first (a note says which) and, when even
    the essential ones do not fit, prints one block per row instead.
    """
    cols = [c if isinstance(c, Column) else Column(c) for c in columns]
    if console is None and sys.stdout.isatty():
        console = _rich_console()
    limit = width if width is not None else terminal_width(console)
    right = [_numeric([row[i] for row in rows]) for i in range(len(cols))]
    shown = fit_columns(cols, rows, limit, fold=console is not None)
    out: Callable[[str], None] = print if console is None else _plain_printer(console)

    def say(text: str) -> None:  # prose (title, note) wraps, never inside a word (a run id stays whole)
        if limit is not None:
            text = textwrap.fill(text, width=limit, break_long_words=False, break_on_hyphens=False)
        out(text)

    if shown is None:
        assert limit is not None
        say(title)
        for text in stacked_lines(cols, rows, limit):
            out(text)
        return
    hidden = [c.name for i, c in enumerate(cols) if i not in shown]
    if console is not None:
        from rich import box
        from rich.table import Table

        table = Table(
            title=title,
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            collapse_padding=True,
        )
        for i in shown:
            natural = max([len(cols[i].name), *(len(r[i]) for r in rows)])
            table.add_column(
                cols[i].name,
                justify="right" if right[i] else "left",
                no_wrap=not cols[i].wrap,
                overflow="fold",  # never "42.…": at worst a cell continues on the next line
                min_width=None if cols[i].wrap else natural,
            )
        for row in rows:
            table.add_row(*(row[i] for i in shown))
        console.print(table)
    else:
        widths = {i: max([len(cols[i].name), *(len(r[i]) for r in rows)]) for i in shown}

        def line(cells: Sequence[str]) -> str:
            parts = (
                cells[n].rjust(widths[i]) if right[i] else cells[n].ljust(widths[i])
                for n, i in enumerate(shown)
            )
            return (" " * GAP).join(parts).rstrip()

        say(title)
        out(line([cols[i].name for i in shown]))
        out((" " * GAP).join("-" * widths[i] for i in shown))
        for row in rows:
            out(line([row[i] for i in shown]))
    if hidden:
        say(f"({', '.join(hidden)} hidden to fit {limit} columns: widen the terminal to see them)")


def _plain_printer(console: Any) -> Callable[[str], None]:
    def write(text: str) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    return write


class Progress:
    """A progress line (rich bar on a terminal, plain lines otherwise) on stderr."""

    def __init__(self, label: str, total: int) -> None:
        self.label, self.total, self.done = label, total, 0
        self._bar: Any = None
        if sys.stderr.isatty():
            try:
                from rich.progress import Progress as RichProgress
            except ImportError:
                return
            self._bar = RichProgress(transient=True)
            self._bar.start()
            self._task = self._bar.add_task(label, total=total)

    def advance(self, note: str = "") -> None:
        """One item finished; *note* says which (the line is printed after it, not before)."""
        self.done += 1
        if self._bar is not None:
            self._bar.update(self._task, advance=1, description=f"{self.label} (last: {note})")
        else:
            print(f"[{self.done}/{self.total}] {note}", file=sys.stderr)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def print_collection(infos: Sequence[RunInfo]) -> None:
    """What the runs say of their collection (chip, CANN, level, metric group, start), after a
    table, wrapped to the terminal. The source each was read from is in ``--json``: the table
    is the same whichever source gave the tasks."""
    line = collection_line(infos)
    if line:
        print("\n".join(textwrap.wrap(f"collection: {line}", terminal_width() or TABLE_WIDTH)))


def fmt(value: float) -> str:
    return f"{value:.3f}"


def _toolkit_for(args: argparse.Namespace) -> Toolkit:
    if getattr(args, "simulate", False):
        from . import sim

        return sim.toolkit()
    return discover_toolkit()


def load_columns(
    path: Path, args: argparse.Namespace, *, counters: bool = False, infos: list[RunInfo] | None = None
) -> list[TaskColumns] | JsonRuns:
    """The runs under *path* as columns (no task object is made), or, for a version-3 report
    without samples, what it holds (its statistics). *infos*: gets what each run read from disk
    says about its collection.

    With *counters*, a JSON file must hold them (a report written with ``--metrics``).
    """
    if path.is_file() and path.suffix == ".json":
        loaded = load_json_columns(path)
        if loaded.runs is None:
            return loaded
        if counters and any(r.counters is None for r in loaded.runs):
            raise CliError(
                f"{path}: this JSON has no PMU counters (write it with `asc-aprof summary --metrics --json`)"
            )
        return list(loaded.runs)
    runs = read_runs(
        path,
        toolkit=lambda: _toolkit_for(args),
        export_timeout=args.timeout,
        counters=counters,
        reader=args.reader,
    )
    if infos is not None:
        infos.extend(info for _, info in runs)
    return [columns for columns, _ in runs]


def compared_columns(path: Path, args: argparse.Namespace, counters: bool) -> list[TaskColumns]:
    """One side of ``compare``: it needs every sample (a report without them is refused)."""
    loaded = load_columns(path, args, counters=counters)
    if isinstance(loaded, JsonRuns):
        raise no_samples_error(path)
    return loaded


def stats_rows(stats: Sequence[KernelStats]) -> list[list[str]]:
    grand = math.fsum(s.total_us for s in stats) or 1.0
    return [
        [
            "-" if s.device is None else str(s.device),
            s.name,
            s.type,
            str(s.count),
            fmt(s.median_us),
            fmt(s.p10_us),
            fmt(s.p90_us),
            fmt(s.min_us),
            fmt(s.max_us),
            fmt(s.mean_us),
            f"{100.0 * s.total_us / grand:.1f}%",
        ]
        for s in stats
    ]


STATS_COLUMNS: Final = (
    Column("device", key=True),
    Column("kernel", wrap=True, key=True),
    Column("type", drop=2),
    Column("count"),
    Column("median"),
    Column("p10", drop=4),
    Column("p90", drop=4),
    Column("min", drop=6),
    Column("max", drop=6),
    Column("mean", drop=5),
    Column("share", drop=3),
)
COMPARE_COLUMNS: Final = (
    Column("device", key=True),
    Column("kernel", wrap=True, key=True),
    Column("verdict"),
    Column("base", drop=1),
    Column("new", drop=1),
    Column("change"),
    Column("interval"),
)
DEMO_COLUMNS: Final = (
    Column("case", key=True),
    Column("device", key=True),
    Column("kernel", wrap=True, key=True),
    Column("type", drop=2),
    Column("count", drop=1),
    Column("median"),
    Column("p10", drop=3),
    Column("p90", drop=3),
)


# -- the --metrics table ------------------------------------------------------------------------------
#: The plain-text --metrics table fits this width (kernel names are shortened to make it).
TABLE_WIDTH: Final = 80
METRICS_COLUMNS: Final = ("dev", "kernel", "count", "median", "verdict", "key counters")


def fmt_value(value: float) -> str:
    """A counter value: ratios with 3 decimals, large figures without."""
    if abs(value) >= 10_000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.1f}"
    return f"{value:.3f}".rstrip("0").rstrip(".") if value else "0"


def short_column(column: str, prefixed: bool) -> str:
    """``aiv_vec_ratio`` -> ``vec`` (``v.vec`` when both cores show), ``ub_read_bw(GB/s)`` -> ``ub_read``."""
    core = ""
    for prefix, mark in (("aic_", "c."), ("aiv_", "v.")):
        if column.startswith(prefix):
            column, core = column[len(prefix) :], mark if prefixed else ""
    for tail in ("_bw(GB/s)", "_exe_ratio", "_ratio", "(GB/s)", "(KB)", "(us)"):
        if column.endswith(tail):
            column = column[: -len(tail)]
            break
    return core + column


def fmt_ratio(value: float) -> str:
    """A ratio in two decimals without the leading zero (``.43``), as the table shows it."""
    text = f"{value:.2f}"
    return text[1:] if text.startswith("0.") else text


def key_figures(verdict: Verdict, limit: int = 3) -> str:
    """The busiest pipe ratios (``scalar .98 vec .43``), or the largest figures of a group
    without ratios (``v.ub_read 83.2 v.main_mem_read 1.3 GB/s``)."""
    ratios = bool(verdict.ratios)
    pairs = verdict.ratios if ratios else tuple(sorted(verdict.figures, key=lambda p: -p[1]))
    pairs = tuple(p for p in pairs if p[1]) or pairs
    both = len({name[:4] for name, _ in pairs if name[:4] in ("aic_", "aiv_")}) > 1
    value = fmt_ratio if ratios else fmt_value
    shown = [f"{short_column(name, both)} {value(v)}" for name, v in pairs[:limit]]
    unit = " GB/s" if not ratios and pairs and pairs[0][0].endswith("(GB/s)") else ""
    return (" ".join(shown) + unit) if shown else verdict.reason


def metrics_rows(stats: Sequence[KernelStats], width: int = TABLE_WIDTH) -> list[list[str]]:
    """The --metrics rows, fitted to *width*: long kernel names cut to 20 characters first, then
    fewer counters shown, then the names cut further."""
    rows: list[list[str]] = []
    for limit, names in ((3, 0), (3, 20), (2, 20), (1, 20), (1, 12)):
        rows = []
        for s in stats:
            verdict = s.verdict
            assert verdict is not None
            device = "-" if s.device is None else str(s.device)
            name = s.name if not names or len(s.name) <= names else s.name[: names - 1] + "…"
            figures = key_figures(verdict, limit)
            rows.append([device, name, str(s.count), fmt(s.median_us), verdict.label, figures])
        if table_width(METRICS_COLUMNS, rows) <= width:
            break
    return rows


def table_width(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> int:
    """The width of :func:`print_table`'s plain-text table."""
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    return sum(widths) + 2 * (len(columns) - 1)


def print_metrics_legend(explain: bool) -> None:
    if explain:
        for line in textwrap.wrap("verdict rule: " + VERDICT_RULE, width=TABLE_WIDTH):
            print(line)
        print("every counter's median per kernel: --json")
    else:
        print("how the verdict is decided: --explain; every counter's median per kernel: --json")


# -- commands -------------------------------------------------------------------------------------------
def _stored_stats(path: Path, loaded: JsonRuns, args: argparse.Namespace) -> list[KernelStats]:
    """The statistics a report without samples was written with, filtered by --device / --name."""
    if len(args.paths) > 1 or args.samples:
        what = "merged with other inputs" if len(args.paths) > 1 else "written with --samples"
        raise CliError(f"{no_samples_error(path)}; it cannot be {what}")
    if args.skip != loaded.skip:
        raise CliError(
            f"{path}: its statistics were computed with --skip {loaded.skip}, not {args.skip}; "
            f"{no_samples_error(path)}"
        )
    stats = [
        k
        for k in loaded.kernels
        if (args.device is None or k.device == args.device) and (args.name is None or k.name == args.name)
    ]
    if args.metrics and any(k.verdict is None for k in stats):
        raise CliError(
            f"{path}: this JSON has no PMU counters (write it with `asc-aprof summary --metrics --json`)"
        )
    if not stats:
        raise CliError(f"{path}: no kernel matches --device / --name among its {len(loaded.kernels)} kernels")
    return stats


def cmd_summary(args: argparse.Namespace) -> int:
    columns: list[TaskColumns] = []
    stored: list[tuple[Path, JsonRuns]] = []
    infos: list[RunInfo] = []
    for path in args.paths:
        loaded = load_columns(Path(path), args, counters=args.metrics, infos=infos)
        if isinstance(loaded, JsonRuns):
            stored.append((Path(path), loaded))
        else:
            columns.extend(loaded)
    if stored:
        stats = _stored_stats(*stored[0], args)
        run_ids = list(stored[0][1].run_ids)
    else:
        stats = run_kernel_stats(columns, device=args.device, name=args.name, skip=args.skip)
        run_ids = [c.run_id or "-" for c in columns]
    if args.json:
        data = stored_report(stored[0][1], stats) if stored else None
        json.dump(
            data or report(columns, stats, samples=args.samples, skip=args.skip, infos=infos), sys.stdout
        )
        print()
        return 0
    if not stats:
        tasks = [t for c in columns for t in c.iter_tasks()]  # only to say why nothing matched
        raise CliError(no_match_message(tasks, device=args.device, name=args.name, skip=args.skip))
    chips = [info.chip or "unknown chip" for info in infos] if len(infos) == len(columns) else []
    if not stored and len(set(chips)) > 1:
        # Device 0 of a 910B and device 0 of a 310B are different devices: one table per chip.
        for n, chip in enumerate(sorted(set(chips))):
            if n:
                print()
            mine = [c for c, on in zip(columns, chips, strict=True) if on == chip]
            chip_stats = run_kernel_stats(mine, device=args.device, name=args.name, skip=args.skip)
            if chip_stats:
                _print_summary(
                    args,
                    chip_stats,
                    [c.run_id or "-" for c in mine],
                    [i for i in infos if (i.chip or "unknown chip") == chip],
                    f" on {chip}",
                )
        return 0
    _print_summary(args, stats, run_ids, infos, "")
    return 0


def _print_summary(
    args: argparse.Namespace,
    stats: Sequence[KernelStats],
    run_ids: Sequence[str],
    infos: Sequence[RunInfo],
    on: str,
) -> None:
    runs = ", ".join(run_ids)
    if args.metrics:
        print_table(f"Kernels{on} in {runs} (µs; counter medians)", METRICS_COLUMNS, metrics_rows(stats))
        print_collection(infos)
        judged = (VerdictKind.BOUND, VerdictKind.LATENCY, VerdictKind.NOT_BOUND)
        if any(s.verdict is not None and s.verdict.kind in judged for s in stats):
            print_metrics_legend(args.explain)
        return
    print_table(f"Kernels{on} in {runs} (times in µs)", STATS_COLUMNS, stats_rows(stats))
    print_collection(infos)
    if all(s.type in CONTROL_TASK_TYPES for s in stats):
        print(
            "note: no kernel was recorded; these are CANN control tasks (name N/A), which the export "
            "lists when nothing ran on the device while it was profiled"
        )


def no_match_message(
    tasks: Sequence[ProfilingTask], *, device: int | None, name: str | None, skip: int
) -> str:
    """Why ``summary`` found nothing for --device / --name / --skip, and what there is instead."""
    if not tasks:
        return "the run(s) hold no task at all: was anything launched while profiling?"
    devices = sorted({t.device for t in tasks}, key=lambda d: -1 if d is None else d)
    listed = ", ".join("host" if d is None else str(d) for d in devices)
    on_device = [t for t in tasks if device is None or t.device == device]
    if not on_device:
        return f"no task on --device {device}; the run(s) have tasks on device(s) {listed}"
    where = "" if device is None else f" on device {device}"
    counts: dict[str, int] = {}
    for task in on_device:
        counts[task.name] = counts.get(task.name, 0) + 1
    if name is not None and name not in counts:
        close = (
            difflib.get_close_matches(name, list(counts), n=1, cutoff=0.5)
            or [n for n in counts if name in n or n in name][:1]
        )
        hint = f" (did you mean --name {close[0]}?)" if close else ""
        kernels = ", ".join(sorted(counts))
        return f"no kernel named {name!r}{where}{hint}; the kernels there are: {kernels}"
    most = max(counts[k] for k in ([name] if name is not None else list(counts)))
    return (
        f"--skip {skip} drops every sample: the kernels{where} have at most {most} sample(s) each "
        "(a kernel with no more samples than --skip is left out)"
    )


def cmd_export(args: argparse.Namespace) -> int:
    runs = [run for path in args.paths for run in runs_of(Path(path))]
    toolkit = _toolkit_for(args)
    failures: list[tuple[Path, str]] = []
    progress = Progress("exporting", len(runs))

    async def export_all() -> None:
        limiter = anyio.CapacityLimiter(args.jobs)

        async def one(run: Path) -> None:
            async with limiter:
                began = time.monotonic()
                try:
                    await run_export_async(toolkit, run, timeout=args.timeout)
                    if args.timeline:
                        await run_export_async(toolkit, run, what="timeline", timeout=args.timeout)
                except AprofError as exc:
                    failures.append((run, str(exc).splitlines()[0]))
                    progress.advance(f"{run.name} export FAILED")
                else:
                    progress.advance(f"{run.name} exported in {time.monotonic() - began:.1f} s")

        async with anyio.create_task_group() as tg:
            for run in runs:
                tg.start_soon(one, run)

    try:
        anyio.run(export_all)
    finally:
        progress.close()
    for run, why in failures:
        print(f"asc-aprof: export failed: {run}: {why}", file=sys.stderr)
    print(f"exported {len(runs) - len(failures)} of {len(runs)} run(s)")
    if args.timeline:
        failed = {run for run, _ in failures}
        for run in runs:
            if run not in failed:
                for trace in timeline_files(run):
                    print(f"timeline: {trace}")
        print(f"(open a timeline in {TRACE_VIEWERS})")
    return 1 if failures else 0


TRACE_VIEWERS: Final = "https://ui.perfetto.dev or chrome://tracing"


def timeline_files(run: Path) -> list[Path]:
    """The newest timeline JSON of a run (``msprof_<ts>.json``), per output directory."""
    found: list[Path] = []
    for directory in (run / MERGED_DIR, *sorted(run.glob("device_*/timeline"))):
        traces = sorted(directory.glob("msprof_*.json"))
        if traces:
            found.append(traces[-1])
    return found


def cmd_compare(args: argparse.Namespace) -> int:
    metric = args.metric or DURATION
    counted = metric != DURATION
    base = compared_columns(Path(args.base), args, counted)
    new = compared_columns(Path(args.new), args, counted)
    changes = compare_runs(base, new, metric=metric, skip=args.skip)
    if not changes:
        raise CliError(
            "no kernel appears in both BASE and NEW" + (f" with a value of {metric}" if counted else "")
        )
    slower = [c for c in changes if c.significant and c.change_pct > args.threshold]
    # slower in time but not in cycles (duration x AI Core clock): the clock's change, not the kernel's
    ambiguous = [c for c in slower if c.clock_explains(args.threshold)]
    regressions = [c for c in slower if c not in ambiguous]
    if args.json:
        json.dump(
            {
                "format": "asc-aprof.compare",
                "version": 2,
                "metric": metric,
                "threshold_pct": args.threshold,
                "kernels": [c.to_dict() for c in changes],
                "regressions": [c.name for c in regressions],
                "ambiguous": [c.name for c in ambiguous],
            },
            sys.stdout,
        )
        print()
    else:
        rows = [_change_row(c, c in regressions, c in ambiguous) for c in changes]
        what = "Median change NEW vs BASE (µs, " if not counted else f"Median {metric} NEW vs BASE ("
        print_table(f"{what}95% bootstrap interval)", COMPARE_COLUMNS, rows)
        for c in ambiguous:
            print(
                f"{AMBIGUOUS_CLOCK}: {_kernel_on(c.name, c.device)} is {_pct(c.change_pct)} in time but "
                f"{_pct(c.cycles_change_pct or 0.0)} in cycles [{_pct(c.cycles_ci_low_pct or 0.0)}, "
                f"{_pct(c.cycles_ci_high_pct or 0.0)}] (AI Core clock {c.base_aic_mhz:g} -> "
                f"{c.new_aic_mhz:g} MHz median): not counted as a regression"
            )
    if args.fail_on_regression and regressions:
        names = ", ".join(_kernel_on(c.name, c.device) for c in regressions)
        how = "slower" if metric == DURATION else f"higher in {metric}"
        print(
            f"asc-aprof: {len(regressions)} kernel(s) significantly {how} by more than "
            f"{args.threshold:g}%: {names}",
            file=sys.stderr,
        )
        return 1
    return 0


def _kernel_on(name: str, device: int | None) -> str:
    return name if device is None else f"{name} on device {device}"


def _pct(value: float) -> str:
    return f"{value:+.2f}%" if math.isfinite(value) else "n/a"


#: compare's verdict for a kernel slower in time but not in cycles (see KernelChange.clock_explains).
AMBIGUOUS_CLOCK = "AMBIGUOUS: the clock changed"


def _change_row(c: KernelChange, regression: bool, ambiguous: bool = False) -> list[str]:
    flagged = "REGRESSION" if c.metric == DURATION else "INCREASE"
    verdict = flagged if regression else ("significant" if c.significant else "same")
    if ambiguous:
        verdict = AMBIGUOUS_CLOCK
    shown = fmt if c.metric == DURATION else fmt_value
    return [
        "-" if c.device is None else str(c.device),
        c.name,
        verdict,
        shown(c.base_median),
        shown(c.new_median),
        _pct(c.change_pct),
        f"[{_pct(c.ci_low_pct)}, {_pct(c.ci_high_pct)}]",
    ]


def check_output(output: str, example: str) -> None:
    """Refuse ``-o`` before reading anything: a folder, or a file in a folder that is missing."""
    path = Path(output)
    if path.is_dir():
        raise CliError(f"-o {output}: is a folder; give a file name, e.g. -o {path / example}")
    if not path.parent.is_dir():
        raise CliError(
            f"-o {output}: the folder {path.parent} does not exist; make it first (mkdir -p {path.parent})"
        )


def cmd_trace(args: argparse.Namespace) -> int:
    from ._outputs._cli_inputs import load_timelines, parse_labelled
    from ._outputs._trace import write_trace

    check_output(args.output, "trace.json.gz")
    timelines = [
        timeline
        for spec in args.paths
        for timeline in load_timelines(
            parse_labelled(spec),
            toolkit=lambda: _toolkit_for(args),
            timeout=args.timeout,
            counters=not args.no_counters,
            reader=args.reader,
        )
    ]
    out = write_trace(timelines, args.output)
    tasks = [t for tl in timelines for t in tl.tasks if t.start_ns is not None]
    devices = {t.task.device for t in tasks}
    streams = {(t.task.device, t.stream) for t in tasks}
    print(
        f"wrote {out}: {len(tasks)} tasks on {len(devices)} device(s) and {len(streams)} stream(s) from "
        f"{len(timelines)} run(s); open it in Perfetto (ui.perfetto.dev) or chrome://tracing"
    )
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from ._outputs._cli_inputs import load_report_input, parse_labelled
    from ._outputs._report_model import build_model, slices_of
    from ._runs._timeline import Timeline

    check_output(args.output, "report.html")
    specs = [parse_labelled(spec) for spec in args.paths]
    several = len(specs) > 1
    groups = []
    for spec in specs:
        loaded = load_report_input(
            spec, toolkit=lambda: _toolkit_for(args), timeout=args.timeout, reader=args.reader
        )
        label = loaded.label or (spec.path.name if several else None)
        sources: list[ProfilingResult | Timeline] = [*loaded.results, *loaded.timelines]
        groups.append((label, slices_of(label, sources, skip=args.skip, cases=loaded.cases)))
    compare = len(groups) == 2 and not args.no_compare
    model = build_model(groups, compare=compare, title=args.title, threshold=args.threshold, skip=args.skip)
    from ._outputs._report_html import write_html

    out = write_html(model, args.output)
    kernels = len({(k.device, k.name) for k in model.kernels})
    extra = " with a comparison" if model.comparison is not None else ""
    extra += f", {len({c.case for c in model.cases})} cases" if model.cases else ""
    print(f"wrote {out}: {kernels} (device, kernel) pair(s){extra}; open it in a browser (works offline)")
    return 0


DEMO_KERNELS: Final = (
    ("matmul_custom", "MIX_AIC", 42.0),
    ("add_custom", "AI_VECTOR_CORE", 8.5),
    ("softmax_custom", "AI_CORE", 15.0),
)


def cmd_history(args: argparse.Namespace) -> int:
    from . import history  # (the store loads only for this command)

    if args.history_command == "record":
        record = history.runs_record(
            args.paths, label=args.label, toolkit=lambda: _toolkit_for(args), reader=args.reader
        )
        with history.HistoryStore(args.db) as store:
            record_id = store.add(record)
            where = store.location
        git = record.environment.git
        commit = f", commit {git.commit[:10]}{' (dirty)' if git.dirty else ''}" if git else ""
        print(f"recorded {len(record.kernels)} kernel(s) as record {record_id} in {where}{commit}")
        return 0
    with history.HistoryStore(args.db) as store:
        stored = store.kernels(args.kernel)
        where = store.location
    if args.kernel is not None and not stored:
        raise CliError(f"no record of kernel {args.kernel!r} in {where} (see `asc-aprof history show`)")
    if args.history_command == "gate":
        outcomes = history.gate(
            args.db, kernel=args.kernel, window=args.window, min_change=args.threshold / 100
        )
        failed = [o for o in outcomes if o.verdict.fails]
        for outcome in outcomes:
            print(outcome.message())
        if failed:
            names = ", ".join(o.kernel for o in failed)
            print(
                f"asc-aprof: gate failed: {len(failed)} kernel(s) slower beyond noise: {names}",
                file=sys.stderr,
            )
            return 1
        return 0
    if args.html:
        title = args.title or "asc-aprof history"
        history.write_trend(
            stored, args.html, window=args.window, min_change=args.threshold / 100, title=title
        )
        print(f"wrote {args.html}")
        return 0
    if args.json:
        json.dump([s.to_dict() for s in stored], sys.stdout)
        print()
        return 0
    if not stored:
        print(f"{where}: no record yet (asc-aprof history record PATH...)")
        return 0
    by_key: dict[str, list[Any]] = {}
    for item in stored:
        by_key.setdefault(item.entry.key, []).append(item)
    for n, (key, items) in enumerate(by_key.items()):
        if n:
            print()
        rows = []
        for item in items:
            env, e = item.environment, item.entry
            commit = f"{env.git.commit[:10]}{'*' if env.git.dirty else ''}" if env.git else "-"
            rows.append(
                [
                    str(item.record_id),
                    env.recorded_at.strftime("%Y-%m-%d %H:%M"),
                    commit,
                    item.label or "-",
                    str(e.count),
                    f"{e.median_us:,.3f}",
                    f"[{e.ci_low_us:,.3f}, {e.ci_high_us:,.3f}]",
                    f"{e.p10_us:,.3f}",
                    f"{e.p90_us:,.3f}",
                    "-" if e.aic_mhz is None else f"{e.aic_mhz:.0f}",
                ]
            )
        print_table(
            f"{key} (times in µs; * dirty checkout)",
            [
                "record",
                "recorded (UTC)",
                "commit",
                "label",
                "count",
                "median",
                "95% interval",
                "p10",
                "p90",
                "MHz",
            ],
            rows,
        )
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from . import sim
    from ._profilers._async import AsyncProfiler

    for flag, value, least in (
        ("--devices", args.devices, 1),
        ("--cases", args.cases, 1),
        ("--repeats", args.repeats, 1),
    ):
        if value < least:
            raise CliError(f"{flag} {value}: give at least {least}")
    if args.devices > sim.MAX_DEVICES:
        raise CliError(
            f"--devices {args.devices}: the simulated toolkit has at most {sim.MAX_DEVICES} devices"
        )
    out: Path | None = None
    if args.out is not None:
        out = Path(args.out)
        if out.exists() and not out.is_dir():
            raise CliError(f"--out {out}: is not a folder; give a folder for the runs (made if missing)")
        out.mkdir(parents=True, exist_ok=True)
    toolkit = sim.toolkit()
    control = sim.control()
    control.set_device_count(max(args.devices, 8))
    control.set_jitter(0.02, seed=0, outlier_rate=0.01)  # run-to-run noise, as on hardware
    devices = list(range(args.devices))
    progress = Progress("profiling", args.cases)
    results: list[tuple[int, int, ProfilingResult]] = []

    def launch(case: int, device: int) -> None:
        rng = random.Random(case)
        for name, ttype, base in DEMO_KERNELS:
            for _ in range(args.repeats):
                # each case scales the kernels a little, like a tile-size sweep would; plus jitter
                duration = base * (1 + 0.05 * case) * rng.uniform(0.97, 1.06)
                sim.launch(name, device=device, task_type=ttype, duration_us=duration)

    async def main() -> None:
        profiler = AsyncProfiler(out, toolkit=toolkit)
        async with profiler.sweep(range(args.cases), launch, devices=devices) as items:
            async for item in items:
                if item.error is not None:
                    raise item.error
                assert item.result is not None
                results.append((item.case, item.device, item.result))
                progress.advance(f"case {item.case} done on device {item.device}")

    began = time.monotonic()
    interrupted = False
    try:
        anyio.run(main)
    except KeyboardInterrupt:
        interrupted = True  # the finished cases are still worth a table
    finally:
        progress.close()
    elapsed = time.monotonic() - began
    _print_demo(args, results, elapsed, interrupted)
    if interrupted:
        print("asc-aprof: interrupted", file=sys.stderr)
        return 130
    if out is not None:
        print(
            f"\nThe runs are in {out} (PROF_* folders: a window covers the cases that ran at once). Next:\n"
            f"  asc-aprof summary {out}             per-kernel table of every run\n"
            f"  asc-aprof summary {out} --metrics   why is it slow: PMU counters and a verdict\n"
            f"  asc-aprof report {out} -o report.html\n"
            f"  asc-aprof trace {out} -o trace.json.gz   (open in https://ui.perfetto.dev)"
        )
    else:
        print(
            "\nThe runs were deleted at exit; to keep them and try summary, report and trace on\n"
            "them: asc-aprof demo --out DIR"
        )
    return 0


def _print_demo(
    args: argparse.Namespace,
    results: list[tuple[int, int, ProfilingResult]],
    elapsed: float,
    interrupted: bool,
) -> None:
    rows: list[list[str]] = []
    total = 0
    for case, device, result in sorted(results):
        total += len(result.tasks)
        for stat in sorted(kernel_stats(result.tasks), key=lambda s: s.name):
            rows.append(
                [
                    str(case),
                    str(device),
                    stat.name,
                    stat.type,
                    str(stat.count),
                    fmt(stat.median_us),
                    fmt(stat.p10_us),
                    fmt(stat.p90_us),
                ]
            )
    done = f"{len(results)} of {args.cases}" if interrupted else str(args.cases)
    print_table(
        f"{done} case(s) on {args.devices} simulated device(s): {total} tasks profiled, "
        f"exported and parsed in {elapsed:.2f} s (times in µs)",
        DEMO_COLUMNS,
        rows,
    )
    print(
        textwrap.fill(
            "A case is one profiling window of a sweep: the same three kernels, a little slower per "
            "case, as a tile-size sweep would run them; each device profiles one case at a time.",
            width=80,
        )
    )


READ_RULE: Final = (
    "Each run is read natively from its raw data when the raw reader accepts it (no toolkit needed;\n"
    "{counters} reads the PMU counters there too, where they were verified); else from its exported\n"
    "CSVs; else it is exported with msprof.py first (that needs a toolkit: --simulate picks the\n"
    "simulated one). --reader chooses (auto, raw, msprof), as Profiler(reader=...). When no source\n"
    "works, the error gives each source's reason."
)


# -- parser ------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="asc-aprof",
        description="Profile Ascend NPU kernels: summaries, exports and comparisons of msprof runs.",
        epilog="example: asc-aprof demo --devices 4 --cases 8",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    fmt_cls = argparse.RawDescriptionHelpFormatter

    def common(p: argparse.ArgumentParser, *, reads: bool = True) -> None:
        p.add_argument("--simulate", action="store_true", help="use the simulated CANN toolkit")
        p.add_argument(
            "--timeout", type=float, default=1800.0, help="export timeout in seconds (default 1800)"
        )
        if reads:
            p.add_argument(
                "--reader",
                choices=[r.value for r in Reader],
                default=Reader.AUTO.value,
                help=(
                    "how a run is read (as Profiler(reader=...)): auto (default) reads its raw data "
                    "natively when the raw reader accepts it (PMU counters included), else its exported "
                    "CSVs, else exports it with msprof.py (that needs a toolkit); raw: natively only; "
                    "msprof: its CSVs, else an export"
                ),
            )
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)

    demo = sub.add_parser(
        "demo",
        help="a multi-device sweep on the simulated toolkit",
        formatter_class=fmt_cls,
        description=(
            "Sweeps CASES cases over DEVICES simulated devices: each case is one profiling window in which\n"
            "three kernels run REPEATS times, a little slower per case (as a tile-size sweep would be)."
        ),
        epilog="example:\n  asc-aprof demo --devices 4 --cases 8 --out ./demo_runs",
    )
    demo.add_argument("--devices", type=int, default=4, help="simulated devices (default 4)")
    demo.add_argument("--cases", type=int, default=8, help="cases to sweep (default 8)")
    demo.add_argument("--repeats", type=int, default=20, help="launches of each kernel per case (default 20)")
    demo.add_argument(
        "--out",
        metavar="DIR",
        help="keep the runs in DIR (made if missing), to try summary, report and trace on them; "
        "default: a temporary folder deleted at exit",
    )
    demo.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    demo.set_defaults(func=cmd_demo)

    summary = sub.add_parser(
        "summary",
        help="per-kernel table of one or more runs",
        formatter_class=fmt_cls,
        description=READ_RULE.format(counters="--metrics"),
        epilog=(
            "examples:\n  asc-aprof summary ./prof_out\n"
            "  asc-aprof summary ./prof_out/PROF_000001_... --name add_custom --skip 1 --json\n"
            "  asc-aprof summary ./prof_out --metrics   (why is it slow: counters and a verdict)"
        ),
    )
    summary.add_argument(
        "paths", nargs="+", metavar="PATH", help="result directory, PROF_* run, or JSON report"
    )
    summary.add_argument("--device", type=int, help="only this device")
    summary.add_argument("--name", help="only this kernel")
    summary.add_argument(
        "--skip", type=int, default=0, help="drop N leading samples of each kernel (warm-up)"
    )
    summary.add_argument("--json", action="store_true", help="print a JSON report instead of a table")
    summary.add_argument(
        "--samples",
        action="store_true",
        help="with --json: keep every duration per kernel (what `compare` needs; off: statistics only)",
    )
    summary.add_argument(
        "--metrics",
        action="store_true",
        help="read the PMU counters: their medians and a bound verdict per kernel (all of them in --json)",
    )
    summary.add_argument(
        "--explain", action="store_true", help="with --metrics: print the rule the verdict follows"
    )
    common(summary)
    summary.set_defaults(func=cmd_summary)

    export = sub.add_parser(
        "export",
        help="run msprof.py export on runs, concurrently",
        formatter_class=fmt_cls,
        epilog=(
            "examples:\n  asc-aprof export ./prof_out --jobs 4\n"
            "  asc-aprof export ./prof_out --timeline   # prints each msprof_<time>.json; open it in\n"
            "                                           # https://ui.perfetto.dev or chrome://tracing"
        ),
    )
    export.add_argument("paths", nargs="+", metavar="PATH", help="result directory or PROF_* run")
    export.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="concurrent exports (default: CPUs)"
    )
    export.add_argument(
        "--timeline",
        action="store_true",
        help=(
            "also export the timeline (doubles the time): PROF_*/mindstudio_profiler_output/"
            "msprof_<time>.json, a Chrome trace that https://ui.perfetto.dev or chrome://tracing opens"
        ),
    )
    common(export, reads=False)
    export.set_defaults(func=cmd_export)

    compare = sub.add_parser(
        "compare",
        help="median change per kernel between two runs, with a bootstrap interval",
        formatter_class=fmt_cls,
        description=READ_RULE.format(counters="--metric"),
        epilog=(
            "examples:\n  asc-aprof compare base.json new.json --threshold 5 --fail-on-regression\n"
            "  asc-aprof compare ./base_run ./new_run --metric aiv_mte2_ratio"
        ),
    )
    compare.add_argument("base", metavar="BASE", help="JSON report, result directory or PROF_* run")
    compare.add_argument("new", metavar="NEW", help="JSON report, result directory or PROF_* run")
    compare.add_argument(
        "--threshold", type=float, default=5.0, help="regression threshold in percent (default 5)"
    )
    compare.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 on a significant regression (one that disappears in cycles, duration x AI Core "
        "clock, is AMBIGUOUS: the clock changed, and does not fail)",
    )
    compare.add_argument("--skip", type=int, default=0, help="drop N leading samples of each kernel")
    compare.add_argument(
        "--metric",
        metavar="NAME",
        help="compare this PMU counter's median (a CSV column, e.g. aiv_vec_ratio) instead of durations",
    )
    compare.add_argument("--json", action="store_true", help="print JSON instead of a table")
    common(compare)
    compare.set_defaults(func=cmd_compare)

    labelled = "PROF_* run or result directory; LABEL=PATH labels its runs with a case"
    trace = sub.add_parser(
        "trace",
        help="a timeline file for Perfetto / chrome://tracing (one process per device, thread per stream)",
        formatter_class=fmt_cls,
        epilog=(
            "examples:\n  asc-aprof trace ./prof_out -o trace.json.gz\n"
            "  asc-aprof trace tile64=./runs_a tile128=./runs_b -o sweep.json"
        ),
    )
    trace.add_argument("paths", nargs="+", metavar="PATH", help=labelled)
    trace.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="trace file to write (.json, or .json.gz)"
    )
    trace.add_argument("--no-counters", action="store_true", help="leave the PMU counters out of the events")
    common(trace)
    trace.set_defaults(func=cmd_trace)

    report_cmd = sub.add_parser(
        "report",
        help="a self-contained HTML report: distributions, counters, comparison, cases, timeline",
        formatter_class=fmt_cls,
        epilog=(
            "examples:\n  asc-aprof report ./prof_out -o report.html\n"
            "  asc-aprof report base=base.json new=./prof_new -o compare.html\n"
            "two PATHs are compared (the first is the base); needs the report extra (plotly)"
        ),
    )
    report_cmd.add_argument("paths", nargs="+", metavar="PATH", help=f"JSON report or result, {labelled}")
    report_cmd.add_argument("-o", "--output", required=True, metavar="FILE", help="HTML file to write")
    report_cmd.add_argument("--title", help="page title (default: asc-aprof report)")
    report_cmd.add_argument(
        "--skip", type=int, default=0, help="drop N leading samples of each kernel per run"
    )
    report_cmd.add_argument(
        "--threshold", type=float, default=5.0, help="regression threshold in percent (default 5)"
    )
    report_cmd.add_argument("--no-compare", action="store_true", help="two PATHs: do not compare them")
    common(report_cmd)
    report_cmd.set_defaults(func=cmd_report)
    history_cmd = sub.add_parser(
        "history",
        help="results across commits: record runs, show trends, gate on regressions",
        formatter_class=fmt_cls,
        description=(
            "A store of per-kernel figures over time: SQLite by default (--db, else $ASC_APROF_HISTORY,\n"
            "else ~/.local/share/asc-aprof/history.sqlite3), or PostgreSQL for a postgresql:// URL."
        ),
        epilog=(
            "examples:\n  asc-aprof history record ./prof_out --label nightly\n"
            "  asc-aprof history show --kernel add_custom\n  asc-aprof history show --html trend.html\n"
            "  asc-aprof history gate   (exit 1 when a kernel's newest record is slower beyond noise)"
        ),
    )
    history_sub = history_cmd.add_subparsers(dest="history_command", required=True)

    def store_flags(p: argparse.ArgumentParser, *, debug: bool = True) -> None:
        p.add_argument(
            "--db",
            metavar="PATH_OR_URL",
            help="the store (default: $ASC_APROF_HISTORY, else ~/.local/share/asc-aprof/history.sqlite3)",
        )
        if debug:
            p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)

    def gate_flags(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--kernel", metavar="NAME", help="only this kernel (its name, or 'chip / type / name')"
        )
        p.add_argument(
            "--window", type=int, default=5, help="records before the newest it is compared with (default 5)"
        )
        p.add_argument(
            "--threshold", type=float, default=5.0, help="smallest slow-down flagged, in percent (default 5)"
        )

    record_cmd = history_sub.add_parser(
        "record",
        help="store per-kernel figures of runs or JSON reports",
        description=READ_RULE.format(counters="(always)"),
    )
    record_cmd.add_argument(
        "paths",
        nargs="+",
        metavar="RUN_OR_REPORT",
        help="PROF_* run, result directory, or JSON report with samples",
    )
    record_cmd.add_argument(
        "--label", metavar="TEXT", help="a label kept with the record (e.g. nightly, tile=128)"
    )
    store_flags(record_cmd, debug=False)
    common(record_cmd)
    show_cmd = history_sub.add_parser("show", help="a table per kernel over time, as JSON, or a trend page")
    show_cmd.add_argument("--json", action="store_true", help="print every stored kernel entry as JSON")
    show_cmd.add_argument(
        "--html", metavar="FILE", help="write a trend page (needs the report extra: plotly)"
    )
    show_cmd.add_argument("--title", help="the trend page's title")
    gate_flags(show_cmd)
    store_flags(show_cmd)
    gate_cmd = history_sub.add_parser(
        "gate", help="exit 1 when a kernel's newest record is slower beyond noise"
    )
    gate_flags(gate_cmd)
    store_flags(gate_cmd)
    history_cmd.set_defaults(func=cmd_history)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``asc-aprof`` console script."""
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except BrokenPipeError:
        # stdout closed early (e.g. piped into head): not an error worth a message
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps interpreter shutdown quiet
        return 141
    except (CliError, AprofError, OSError) as exc:
        if args.debug:
            raise
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        first = lines[0]
        if isinstance(exc, RunUnreadable | RawReadDeclined | SourcesDisagree):
            first = exc.message(flags=True)  # the fix in the words of the command line
        if isinstance(exc, ToolkitNotFoundError):
            first = (
                "no CANN toolkit found: `source <CANN install>/set_env.sh` (sets ASCEND_HOME_PATH), or "
                f"pass --simulate for the simulated toolkit ({len(exc.searched)} places searched; "
                "--debug lists them)"
            )
        # Our own errors say what to do; an unexpected OS error may need the traceback.
        hint = "" if isinstance(exc, AprofError | CliError) else " (use --debug for a traceback)"
        print(f"asc-aprof: error: {first}{hint}", file=sys.stderr)
        if isinstance(exc, SimulatorBuildError):
            # what to fix is in the compiler's own words: the command and its stderr tail
            for line in lines[1:]:
                print(f"asc-aprof: {line}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("asc-aprof: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
