"""Repeatable fuzzing of the reading side: mutated real runs and hostile CSVs, fixed seeds.

    python -m tests.fuzz [--seed N] [--cases N] [--seconds S] [--only CASE]

Each case is made by ``random.Random(f"{seed}:{case}")`` alone, so any failure is replayed with
``--seed N --only CASE``. A *raw* case copies a real run (``shared/reference/real_runs``; skipped
without it) and breaks it: bit flips, truncation, junk appended, a range of ``0xff`` (huge or
negative counts), records duplicated or swapped, a file removed, a metadata value replaced with a
hostile one, an extra device. A *csv* case writes an exported run whose op_summary or task_time
rows are hostile (quotes, exponents, NaN, NUL, huge numbers, odd encodings, long lines). Both go
through the public reading APIs (``open_run(...).result()``, ``.columns()``, ``.timeline()``,
``read_timeline``, ``write_trace``, ``kernel_stats``); any exception that is not an
:class:`~asc_aprof.AprofError` is a failure, printed with its case, and the exit status is 1.

CI runs a fixed seed for a bounded number of cases (``tests/reliability/test_third_pass.py``);
docs/reliability.md gives the longer run.
"""

from __future__ import annotations

import argparse
import logging
import random
import re
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

from asc_aprof import AprofError, open_run, read_timeline, write_trace
from asc_aprof._model._errors import ToolkitNotFoundError
from asc_aprof._model._toolkit import Toolkit
from asc_aprof._plans._raw._types import Declined, DeclineReason
from asc_aprof._runs._raw_files import read_export_rows, read_run
from asc_aprof.stats import kernel_stats

from .reference import REAL_RUNS, real_run_names

#: Values a metadata field is replaced with.
HOSTILE_VALUES = (
    "nan", "inf", "-inf", "1e999999999", "1e30", "4.9e-324", "-1", "0", "", "%", "%(x)s", "\u00b2",
    "\u0661\u0662", "9" * 400, "[" * 5000, '"', "null", "true", "1.5", "18446744073709551616",
)  # fmt: skip
#: Cells a CSV field is replaced with.
HOSTILE_CELLS = (
    "nan", "inf", "1e999999999", "1e999990", "-0", "", "N/A", '"', '""', 'a"b', '"a,b"', "\x00",
    "\ufeff1", "1" * 5000, "0x10", "1_000", "\u0661", "-1", "18446744073709551616", "1e-999999",
    "1784171285754947.983\t", "\r", "\n", "\u2028", "é", "\udcff",
)  # fmt: skip
OP_COLUMNS = (
    "Device_id", "Model ID", "Task ID", "Stream ID", "Op Name", "OP Type", "OP State", "Task Type",
    "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)", "Block Num", "Input Shapes",
    "aic_mac_ratio",
)  # fmt: skip
TASK_TIME_COLUMNS = (
    "Device_id", "kernel_name", "kernel_type", "stream_id", "task_id", "task_time(us)",
    "task_start(us)", "task_stop(us)",
)  # fmt: skip
RUN_NAME = "PROF_000001_20260101000000000_00012345ABCDEFGH"


def _no_toolkit() -> Toolkit:
    # An export is never what a case tests: it would take seconds (and needs CANN or the sim).
    raise ToolkitNotFoundError("the fuzzer never exports")


# -- raw cases --------------------------------------------------------------------------------------


def _files(run: Path) -> list[Path]:
    return sorted(p for p in run.rglob("*") if p.is_file())


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    how = rng.randrange(8)
    if not buf or how == 0:  # junk appended
        return bytes(buf) + rng.randbytes(rng.choice((1, 7, 64, 1000)))
    if how == 1:  # bit flips
        for _ in range(rng.choice((1, 2, 8, 64))):
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        return bytes(buf)
    if how == 2:  # truncated
        return bytes(buf[: rng.randrange(len(buf))])
    if how == 3:  # a range of 0xff: huge or negative counts, ids, lengths
        i = rng.randrange(len(buf))
        buf[i : i + rng.choice((1, 2, 4, 8, 16))] = b"\xff" * len(buf[i : i + 16])
        return bytes(buf[: len(data)])
    if how == 4:  # records duplicated (a record-sized chunk copied in place after itself)
        size = rng.choice((16, 32, 64, 128))
        i = rng.randrange(0, max(1, len(buf) - size))
        return bytes(buf[: i + size] + buf[i : i + size] + buf[i + size :])
    if how == 5:  # two chunks swapped (records reordered)
        size = rng.choice((16, 32, 64))
        if len(buf) < 2 * size:
            return bytes(reversed(buf))
        i, j = (
            sorted(rng.sample(range(0, len(buf) - size + 1, size), 2)) if len(buf) >= 3 * size else (0, size)
        )
        a, b = bytes(buf[i : i + size]), bytes(buf[j : j + size])
        buf[i : i + size], buf[j : j + size] = b, a
        return bytes(buf)
    if how == 6:  # zeroed
        i = rng.randrange(len(buf))
        buf[i : i + rng.choice((1, 8, 64))] = bytes(len(buf[i : i + 64]))[: len(buf[i : i + 64])]
        return bytes(buf[: len(data)])
    return b""  # emptied


def _mutate_text(rng: random.Random, text: str) -> str:
    """A metadata file with one value replaced (JSON, INI or ``key: value`` lines)."""
    spans = [m.span(1) for m in re.finditer(r'"[^"]*"\s*:\s*"?([^",}\n]*)"?', text)]
    spans += [m.span(1) for m in re.finditer(r"^[^:\n]+:\s*(.*)$", text, re.M)]
    if not spans:
        return text + rng.choice(HOSTILE_VALUES)
    start, end = rng.choice(spans)
    return text[:start] + rng.choice(HOSTILE_VALUES) + text[end:]


def raw_case(rng: random.Random, base: Path, names: list[str]) -> Path:
    (source,) = (REAL_RUNS / rng.choice(names)).glob("PROF_*")
    run = base / source.name
    shutil.copytree(source, run, ignore=shutil.ignore_patterns("mindstudio_profiler_output", "summary"))
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        files = _files(run)
        target = rng.choice(files)
        roll = rng.random()
        if roll < 0.05:
            target.unlink()
        elif roll < 0.1 and (run / "device_0").is_dir():
            extra = run / f"device_{rng.choice((1, 7, 63, 64))}"
            if not extra.exists():
                shutil.copytree(run / "device_0", extra)
        elif "/data/" not in str(target) and roll < 0.55:
            try:
                target.write_text(_mutate_text(rng, target.read_text()))
            except UnicodeDecodeError:
                target.write_bytes(_mutate_bytes(rng, target.read_bytes()))
        else:
            target.write_bytes(_mutate_bytes(rng, target.read_bytes()))
    return run


# -- CSV cases --------------------------------------------------------------------------------------


def _good_cell(rng: random.Random, column: str, i: int) -> str:
    if "Start" in column or "start" in column or "stop" in column:
        return f"{1784171285754947 + i}.{rng.randrange(1000):03d}\t"
    if column in ("Op Name", "OP Type", "kernel_name"):
        return rng.choice(("Add", "MatMul", "k"))
    if column in ("Task Type", "kernel_type"):
        return rng.choice(("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "N/A", "PROFILING_ENABLE"))
    if column == "Input Shapes":
        return '"""8,2048"""'
    if column == "OP State":
        return "dynamic"
    if "ratio" in column or "(us)" in column:
        return repr(rng.random() * 100)
    return str(rng.randrange(4) if column == "Device_id" else rng.randrange(100))


def csv_case(rng: random.Random, base: Path) -> Path:
    out = base / RUN_NAME / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    columns = list(rng.choice((OP_COLUMNS, TASK_TIME_COLUMNS)))
    if rng.random() < 0.2:
        rng.shuffle(columns)
    if rng.random() < 0.1:
        del columns[rng.randrange(len(columns))]
    rows = []
    # Half the cases break one column only: a bad duration makes the whole file a ParseError,
    # which would hide what a start, shape or counter cell does further on.
    hit = [rng.randrange(len(columns))] if rng.random() < 0.5 else list(range(len(columns)))
    for i in range(rng.choice((0, 1, 5, 50))):
        cells = [_good_cell(rng, c, i) for c in columns]
        for _ in range(rng.choice((0, 1, 1, 2, 4))):
            cells[rng.choice(hit)] = rng.choice(HOSTILE_CELLS)
        if rng.random() < 0.05:
            cells.append("extra")
        rows.append(",".join(cells))
    text = ",".join(columns) + "\n" + "\n".join(rows) + rng.choice(("\n", "", "\r\n", "\n\n"))
    data = text.encode("utf-8", "surrogateescape")
    if rng.random() < 0.2:
        data = _mutate_bytes(rng, data)
    if rng.random() < 0.05:
        data = b"\xef\xbb\xbf" + data
    kind = "op_summary" if columns[1] in ("Model ID", "Task ID") or "Op Name" in columns else "task_time"
    (out / f"{kind}_20260101000000.csv").write_bytes(data)
    return out.parent


# -- the public APIs --------------------------------------------------------------------------------


def _calls(run: Path, raw: bool, scratch: Path) -> Iterator[tuple[str, Callable[[], object]]]:
    reader = "raw" if raw else "msprof"

    yield "result", lambda: open_run(run, reader=reader, toolkit=_no_toolkit).result()
    yield "result(counters)", lambda: open_run(run, reader=reader, toolkit=_no_toolkit).result(counters=True)
    yield (
        "columns + kernel_stats",
        lambda: kernel_stats(open_run(run, reader=reader, toolkit=_no_toolkit).columns(counters=True)),
    )
    yield "info", lambda: open_run(run, reader=reader, toolkit=_no_toolkit).info
    if raw:
        # The raw reader turns its own bugs into an INTERNAL decline (reader="auto" then falls
        # back to msprof.py): for the fuzzer that is a failure like an escaping exception.
        yield "read_run", lambda: _not_internal(read_run(run, counters=True))
        yield "read_export_rows", lambda: _not_internal(read_export_rows(run, pmu=True))
    if not raw:
        yield "read_timeline + write_trace", lambda: write_trace([read_timeline(run)], scratch / "t.json.gz")


class InternalDecline(Exception):
    """The raw reader declined a run as INTERNAL: a bug it caught (see :func:`_calls`)."""


def _not_internal(outcome: object) -> None:
    if isinstance(outcome, Declined) and outcome.reason is DeclineReason.INTERNAL:
        raise InternalDecline(str(outcome))


def run_case(seed: int, case: int, names: list[str]) -> list[str]:
    """Failures of one case (an exception that is no AprofError), as printable lines."""
    rng = random.Random(f"{seed}:{case}")
    raw = bool(names) and rng.random() < 0.6
    failures = []
    with tempfile.TemporaryDirectory(prefix="aprof-fuzz-") as tmp:
        base = Path(tmp)
        run = raw_case(rng, base, names) if raw else csv_case(rng, base)
        for name, call in _calls(run, raw, base):
            try:
                call()
            except AprofError:
                pass
            except Exception as exc:  # what the fuzzer is for
                where = "".join(traceback.format_tb(exc.__traceback__)[-2:]).rstrip()
                kind = "raw" if raw else "csv"
                failures.append(
                    f"seed {seed} case {case} ({kind}) {name}: {type(exc).__name__}: {exc}\n{where}"
                )
    return failures


def fuzz(
    seed: int, cases: int, seconds: float | None = None, only: int | None = None
) -> tuple[int, list[str]]:
    """(cases run, failures) for *cases* cases of *seed*, stopping after *seconds* if given."""
    names = real_run_names()
    deadline = None if seconds is None else time.monotonic() + seconds
    failures: list[str] = []
    done = 0
    logging.disable(logging.CRITICAL)  # a declined run logs; thousands of them say nothing new
    try:
        for case in [only] if only is not None else range(cases):
            if deadline is not None and time.monotonic() > deadline:
                break
            failures += run_case(seed, case, names)
            done += 1
    finally:
        logging.disable(logging.NOTSET)
    return done, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=None, help="stop after this long")
    parser.add_argument("--only", type=int, default=None, help="run this case alone")
    args = parser.parse_args(argv)
    if not REAL_RUNS.is_dir():
        print(f"no real runs at {REAL_RUNS}: CSV cases only", file=sys.stderr)
    done, failures = fuzz(args.seed, args.cases, args.seconds, args.only)
    for line in failures:
        print(line, end="\n\n")
    print(f"{done} cases, {len(failures)} failures (seed {args.seed})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
