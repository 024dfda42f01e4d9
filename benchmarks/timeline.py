"""What exact start times cost: the default read against the timed reads, on one op_summary file.

``python -m benchmarks.timeline [--rows N] [--repeats K]`` (standalone: not a section of RESULTS.md).
It writes a 4-device op_summary of N rows (default 500,000) laid out as an exported run and reads
it K times (default 5) each way, alternating the ways so drift hits them alike:

* the default read (``iter_file_tasks``: what ``store_result`` / ``summary`` do; the C row loop);
* the timed read (``read_timeline(counters=False)``: stream and exact start per task);
* the timed read with every counter column (``read_timeline()``).

It prints the median seconds and µs per row of each, and whether the default read still ran on
the accelerated loop (the timed reads are opt-in, so the default path must not change).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from asc_aprof import read_timeline
from asc_aprof._cann._layout import find_summary_csvs
from asc_aprof._plans._parser import ACCELERATED
from asc_aprof._runs._csv import iter_file_tasks

from . import gen_csv

RUN_ID = "PROF_000001_20260101000000000_00000001AAAAAAAA"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.timeline", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="aprof-timeline-") as tmp:
        run = Path(tmp) / RUN_ID
        path = run / "mindstudio_profiler_output" / "op_summary_20260101000000.csv"
        gen_csv.write_csv(path, gen_csv.new_op_summary_lines(args.rows, devices=4))
        files = find_summary_csvs(run)

        def default() -> int:
            return sum(len(batch) for batch in iter_file_tasks(files))

        ways: dict[str, Callable[[], int]] = {
            "default read (C row loop)": default,
            "timed read": lambda: len(read_timeline(run, counters=False).tasks),
            "timed read + counters": lambda: len(read_timeline(run).tasks),
        }
        times: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(args.repeats):
            for name, way in ways.items():
                began = time.perf_counter()
                count = way()
                times[name].append(time.perf_counter() - began)
                assert count == args.rows, (name, count)
    base = statistics.median(times["default read (C row loop)"])
    print(f"{args.rows:,} rows, {args.repeats} repeats, accelerator {'on' if ACCELERATED else 'OFF'}")
    print(f"{'read':<28} {'median s':>9} {'us/row':>8} {'x default':>10}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<28} {median:>9.3f} {median / args.rows * 1e6:>8.2f} {median / base:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
