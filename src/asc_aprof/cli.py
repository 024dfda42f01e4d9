"""The ``asc-aprof`` command line: demo, summary, export, compare.

rich (the ``cli`` extra) draws tables and progress bars when installed; without it the output is
plain text. Neither this module nor rich is imported by ``import asc_aprof``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import anyio

from ._counters import TaskCounters
from ._discovery import discover_toolkit
from ._errors import AprofError, ToolkitNotFoundError
from ._export import run_export_async
from ._layout import find_summary_csvs
from ._records import ProfilingResult
from ._report import load_json, report, runs_of
from ._report import load_results as load_results_of
from ._stats import DURATION, KernelChange, KernelStats, compare_tasks, kernel_stats
from ._toolkit import Toolkit
from ._verdict import VERDICT_RULE, Verdict, VerdictKind


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


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A table on stdout: rich on a terminal when installed, aligned plain text otherwise."""
    right = [_numeric([row[i] for row in rows]) for i in range(len(columns))]
    console = _rich_console()
    if console is not None and sys.stdout.isatty():
        from rich.table import Table

        table = Table(title=title)
        for col, is_right in zip(columns, right, strict=True):
            table.add_column(col, justify="right" if is_right else "left")
        for row in rows:
            table.add_row(*row)
        console.print(table)
        return
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    print(title)
    header = zip(columns, widths, right, strict=True)
    print("  ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in header).rstrip())
    print("  ".join("-" * w for w in widths))
    for row in rows:
        cells = zip(row, widths, right, strict=True)
        print("  ".join(v.rjust(w) if r else v.ljust(w) for v, w, r in cells).rstrip())


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
        self.done += 1
        if self._bar is not None:
            self._bar.update(self._task, advance=1, description=f"{self.label} {note}".strip())
        else:
            print(f"[{self.done}/{self.total}] {self.label} {note}".rstrip(), file=sys.stderr)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def fmt(value: float) -> str:
    return f"{value:.3f}"


def _toolkit_for(args: argparse.Namespace) -> Toolkit:
    if getattr(args, "simulate", False):
        from . import sim

        return sim.toolkit()
    return discover_toolkit()


def load_results(
    path: Path, args: argparse.Namespace, *, export: bool = True, counters: bool = False
) -> list[ProfilingResult]:
    """Results from a JSON report/result file, a result directory or a PROF_* run (see _report).

    With *counters*, a JSON file must hold them (a report written with ``--metrics``).
    """
    if path.is_file() and path.suffix == ".json":
        results = load_json(path)
        if counters and any(r.counters is None for r in results):
            raise CliError(
                f"{path}: this JSON has no PMU counters (write it with `asc-aprof summary --metrics --json`)"
            )
        return results
    runs = runs_of(path)
    needs_export = export and any(not find_summary_csvs(run) for run in runs)
    toolkit = _toolkit_for(args) if needs_export else None
    return load_results_of(path, toolkit=toolkit, export_timeout=args.timeout, counters=counters)


def joined(results: Sequence[ProfilingResult], counters: bool) -> tuple[list[Any], TaskCounters | None]:
    """Every result's tasks in one list, and (with *counters*) their counters aligned with it."""
    tasks = [t for r in results for t in r.tasks]
    if not counters:
        return tasks, None
    return tasks, TaskCounters.concat([r.counters for r in results], [len(r.tasks) for r in results])


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
    "device",
    "kernel",
    "type",
    "count",
    "median",
    "p10",
    "p90",
    "min",
    "max",
    "mean",
    "share",
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


def print_metrics_legend() -> None:
    for line in textwrap.wrap("verdict rule: " + VERDICT_RULE, width=TABLE_WIDTH):
        print(line)
    print("every counter's median per kernel: --json")


# -- commands -------------------------------------------------------------------------------------------
def cmd_summary(args: argparse.Namespace) -> int:
    results: list[ProfilingResult] = []
    for path in args.paths:
        results.extend(load_results(Path(path), args, counters=args.metrics))
    tasks, counters = joined(results, args.metrics)
    stats = kernel_stats(tasks, counters=counters, device=args.device, name=args.name, skip=args.skip)
    if args.json:
        json.dump(report(results, stats), sys.stdout)
        print()
        return 0
    if not stats:
        raise CliError("no task matched (check --device / --name / --skip)")
    runs = ", ".join(r.run_id for r in results)
    if args.metrics:
        print_table(f"Kernels in {runs} (µs; counter medians)", METRICS_COLUMNS, metrics_rows(stats))
        judged = (VerdictKind.BOUND, VerdictKind.LATENCY, VerdictKind.NOT_BOUND)
        if any(s.verdict is not None and s.verdict.kind in judged for s in stats):
            print_metrics_legend()
        return 0
    print_table(f"Kernels in {runs} (times in µs)", STATS_COLUMNS, stats_rows(stats))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    runs = [run for path in args.paths for run in runs_of(Path(path))]
    toolkit = _toolkit_for(args)
    failures: list[tuple[Path, str]] = []
    progress = Progress("export", len(runs))

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
                    progress.advance(f"{run.name} FAILED")
                else:
                    progress.advance(f"{run.name} ok in {time.monotonic() - began:.1f} s")

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
    return 1 if failures else 0


def cmd_compare(args: argparse.Namespace) -> int:
    metric = args.metric or DURATION
    counted = metric != DURATION
    base, base_counters = joined(load_results(Path(args.base), args, counters=counted), counted)
    new, new_counters = joined(load_results(Path(args.new), args, counters=counted), counted)
    changes = compare_tasks(
        base, new, metric=metric, skip=args.skip, base_counters=base_counters, new_counters=new_counters
    )
    if not changes:
        raise CliError(
            "no kernel appears in both BASE and NEW"
            + (f" with a value of {metric}" if counted else "")
        )
    regressions = [c for c in changes if c.significant and c.change_pct > args.threshold]
    if args.json:
        json.dump(
            {
                "format": "asc-aprof.compare",
                "version": 2,
                "metric": metric,
                "threshold_pct": args.threshold,
                "kernels": [c.to_dict() for c in changes],
                "regressions": [c.name for c in regressions],
            },
            sys.stdout,
        )
        print()
    else:
        rows = [_change_row(c, c in regressions) for c in changes]
        what = "Median change NEW vs BASE (µs, " if not counted else f"Median {metric} NEW vs BASE ("
        print_table(
            f"{what}95% bootstrap interval)",
            ("device", "kernel", "verdict", "base", "new", "change", "interval"),
            rows,
        )
    if args.fail_on_regression and regressions:
        names = ", ".join(c.name for c in regressions)
        how = "slower" if metric == DURATION else f"higher in {metric}"
        print(
            f"asc-aprof: {len(regressions)} kernel(s) significantly {how} by more than "
            f"{args.threshold:g}%: {names}",
            file=sys.stderr,
        )
        return 1
    return 0


def _pct(value: float) -> str:
    return f"{value:+.2f}%" if math.isfinite(value) else "n/a"


def _change_row(c: KernelChange, regression: bool) -> list[str]:
    flagged = "REGRESSION" if c.metric == DURATION else "INCREASE"
    verdict = flagged if regression else ("significant" if c.significant else "same")
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


DEMO_KERNELS: Final = (
    ("matmul_custom", "MIX_AIC", 42.0),
    ("add_custom", "AI_VECTOR_CORE", 8.5),
    ("softmax_custom", "AI_CORE", 15.0),
)


def cmd_demo(args: argparse.Namespace) -> int:
    from . import sim
    from ._async import AsyncProfiler

    toolkit = sim.toolkit()
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
        profiler = AsyncProfiler(toolkit=toolkit)
        async with profiler.sweep(range(args.cases), launch, devices=devices) as items:
            async for item in items:
                if item.error is not None:
                    raise item.error
                assert item.result is not None
                results.append((item.case, item.device, item.result))
                progress.advance(f"case {item.case} on device {item.device}")

    began = time.monotonic()
    try:
        anyio.run(main)
    finally:
        progress.close()
    elapsed = time.monotonic() - began
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
    print_table(
        f"{args.cases} case(s) on {args.devices} simulated device(s): {total} tasks profiled, "
        f"exported and parsed in {elapsed:.2f} s (times in µs)",
        ("case", "device", "kernel", "type", "count", "median", "p10", "p90"),
        rows,
    )
    return 0


# -- parser ------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="asc-aprof",
        description="Profile Ascend NPU kernels: summaries, exports and comparisons of msprof runs.",
        epilog="example: asc-aprof demo --devices 4 --cases 8",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True)
    fmt_cls = argparse.RawDescriptionHelpFormatter

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--simulate", action="store_true", help="use the simulated CANN toolkit")
        p.add_argument(
            "--timeout", type=float, default=1800.0, help="export timeout in seconds (default 1800)"
        )
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)

    demo = sub.add_parser(
        "demo",
        help="a multi-device sweep on the simulated toolkit",
        formatter_class=fmt_cls,
        epilog="example:\n  asc-aprof demo --devices 4 --cases 8",
    )
    demo.add_argument("--devices", type=int, default=4, help="simulated devices (default 4)")
    demo.add_argument("--cases", type=int, default=8, help="cases to sweep (default 8)")
    demo.add_argument("--repeats", type=int, default=20, help="launches of each kernel per case (default 20)")
    demo.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    demo.set_defaults(func=cmd_demo)

    summary = sub.add_parser(
        "summary",
        help="per-kernel table of one or more runs",
        formatter_class=fmt_cls,
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
        "--metrics",
        action="store_true",
        help="read the PMU counters: their medians and a bound verdict per kernel (all of them in --json)",
    )
    common(summary)
    summary.set_defaults(func=cmd_summary)

    export = sub.add_parser(
        "export",
        help="run msprof.py export on runs, concurrently",
        formatter_class=fmt_cls,
        epilog="example:\n  asc-aprof export ./prof_out --jobs 4",
    )
    export.add_argument("paths", nargs="+", metavar="PATH", help="result directory or PROF_* run")
    export.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="concurrent exports (default: CPUs)"
    )
    export.add_argument("--timeline", action="store_true", help="also export the timeline (doubles the time)")
    common(export)
    export.set_defaults(func=cmd_export)

    compare = sub.add_parser(
        "compare",
        help="median change per kernel between two runs, with a bootstrap interval",
        formatter_class=fmt_cls,
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
        "--fail-on-regression", action="store_true", help="exit 1 on a significant regression"
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
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, ToolkitNotFoundError):
            first = (
                "no CANN toolkit found (libmsprofiler.so + msprof.py): source <cann>/set_env.sh to set "
                "ASCEND_HOME_PATH, or pass --simulate to use the simulated toolkit"
            )
        # Our own errors say what to do; an unexpected OS error may need the traceback.
        hint = "" if isinstance(exc, AprofError | CliError) else " (use --debug for a traceback)"
        print(f"asc-aprof: error: {first}{hint}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("asc-aprof: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
