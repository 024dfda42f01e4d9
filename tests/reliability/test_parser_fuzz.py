"""Property-based fuzzing of the sans-IO :class:`asc_aprof.TaskParser`.

Documents are generated in every layout the parser knows (merged op_summary with ``Device_id``,
the old per-device op_summary, task_time, torch_npu kernel_details), with msprof's quirks: a BOM,
CRLF endings, no final newline, blank lines, the trailing TAB on start times, quoted names with
commas and quotes, non-ASCII names, ``host`` devices, ``N/A`` ids and durations,
``PROFILING_ENABLE`` / ``PROFILING_DISABLE`` control rows. Each document comes with the tasks and
skip counts it must parse to, computed independently of the parser.

Properties:

* a valid document parses to exactly its tasks, and every data row is accounted for:
  ``len(tasks) + sum(parser.skipped.values()) == parser.data_rows ==`` rows written;
* any split of the byte stream gives the same tasks, counters and errors as feeding it whole;
* random corruption (flipped, inserted, deleted, duplicated bytes, truncation) gives either tasks
  (still fully accounted for) or a :class:`ParseError`, never another exception, and the same
  outcome whatever the split;
* quote-heavy rows (well-formed quoted cells and every way to misplace a quote, in the columns
  read and the others) give what an independent reader gives: RFC 4180 quoting checked by a
  regular expression, the fields split by :mod:`csv`; a row that breaks the quoting rule or has
  the wrong field count is a :class:`ParseError` at its line, on the pure and the C path alike.

Examples: enough for several thousand per CI run (deterministic: ``derandomize``, no database).
Set ``ASC_APROF_FUZZ_EXAMPLES=N`` for N examples per property with fresh random seeds (nightly).
"""

from __future__ import annotations

import csv
import io
import math
import os
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asc_aprof import ParseError, ProfilingTask, TaskParser

_NIGHTLY = os.environ.get("ASC_APROF_FUZZ_EXAMPLES")

F = TypeVar("F", bound=Callable[..., None])


def fuzz_settings(ci_examples: int) -> Callable[[F], F]:
    """*ci_examples* deterministic examples, or ``$ASC_APROF_FUZZ_EXAMPLES`` random ones."""
    if _NIGHTLY:
        chosen = settings(
            max_examples=int(_NIGHTLY),
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
    else:
        chosen = settings(
            max_examples=ci_examples,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
    return chosen


# -- documents -----------------------------------------------------------------------------------

NEW_HEADER = [
    "Device_id", "Model ID", "Task ID", "Stream ID", "Op Name", "OP Type", "OP State", "Task Type",
    "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)", "Block Dim", "Mix Block Dim",
    "HF32 Eligible", "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes",
    "Output Data Types", "Output Formats", "Context ID", "aicore_time(us)", "aic_total_cycles",
]  # fmt: skip
OLD_HEADER = [
    "Model ID", "Task ID", "Stream ID", "Op Name", "OP Type", "Task Type", "Task Start Time",
    "Task Duration(us)", "Task Wait Time(us)", "Block Dim",
]  # fmt: skip
TASK_TIME_HEADER = [
    "Device_id", "kernel_name", "kernel_type", "stream_id", "task_id", "task_time(us)",
    "task_start(us)", "task_stop(us)",
]  # fmt: skip
KERNEL_DETAILS_HEADER = [
    "Name",
    "Type",
    "Accelerator Core",
    "Start Time(us)",
    "Duration(us)",
    "Wait Time(us)",
]

#: layout -> (header, name column, type column, duration column, id column, device column)
LAYOUTS: dict[str, tuple[list[str], str, str, str, str | None, str | None]] = {
    "op_summary": (NEW_HEADER, "Op Name", "Task Type", "Task Duration(us)", "Task ID", "Device_id"),
    "old_op_summary": (OLD_HEADER, "Op Name", "Task Type", "Task Duration(us)", "Task ID", None),
    "task_time": (TASK_TIME_HEADER, "kernel_name", "kernel_type", "task_time(us)", "task_id", "Device_id"),
    "kernel_details": (KERNEL_DETAILS_HEADER, "Name", "Accelerator Core", "Duration(us)", None, None),
}
OLD_LAYOUT_DEVICE = 5
TASK_TYPES = ["AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "AI_CPU", "COMMUNICATION", "KERNEL_AICORE"]
CONTROL = ["PROFILING_ENABLE", "PROFILING_DISABLE"]

#: Characters names are drawn from: commas and quotes (CSV quoting), TAB, non-ASCII, punctuation.
NAME_CHARS = "abcxyzABC019_-.:;/()[]{}<>=+*&%$#@!?~^| ,\"'\t\x7f核函数éßΩ😀"
DURATIONS = ["N/A", "0", "0.000", "82.11", "1e3", " 7.5", "3.25", "1000000.000"]


@dataclass(frozen=True)
class Doc:
    """A generated CSV and what it must parse to."""

    data: bytes
    layout: str
    device: int | None  # the parser's default device
    tasks: tuple[ProfilingTask, ...]
    rows: int
    skipped: tuple[tuple[str, int], ...]


@st.composite
def docs(draw: st.DrawFn) -> Doc:
    """A document: the structure is drawn by hypothesis, the cells by a seeded ``random.Random``.

    Drawing every cell through hypothesis costs ~4 ms a document; a drawn seed keeps each
    example reproducible (and still shrinks the layout and row count) at a fraction of that,
    which is what lets CI run thousands of examples within its time budget.
    """
    layout = draw(st.sampled_from(sorted(LAYOUTS)))
    crlf = draw(st.booleans())
    n_rows = draw(st.integers(0, 12))
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    header, c_name, c_type, c_dur, c_id, c_dev = LAYOUTS[layout]
    default_device = OLD_LAYOUT_DEVICE if layout == "old_op_summary" else None
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n" if crlf else "\n")
    writer.writerow(header)
    base = {column: "0" for column in header}
    for column in header:
        if "Start" in column or "start" in column or "stop" in column:
            base[column] = "1713390712311991.828\t"  # msprof's trailing TAB
    if "Input Shapes" in base:
        base["Input Shapes"] = base["Output Shapes"] = '"8,2048;8,2048"'
    tasks: list[ProfilingTask] = []
    skipped: dict[str, int] = {}
    for _ in range(n_rows):
        if rng.random() < 0.1:
            out.write("\r\n" if crlf else "\n")  # a blank line: not a data row
        name = "".join(rng.choice(NAME_CHARS) for _ in range(rng.randint(1, 12)))
        ttype = rng.choice(TASK_TYPES + CONTROL)
        roll = rng.random()
        if roll < 0.3:
            duration = rng.choice(DURATIONS)
        elif roll < 0.6:
            duration = str(rng.randint(0, 10**6))
        else:
            duration = f"{rng.uniform(0, 1e7):.3f}"
        task_id: int | None = None if rng.random() < 0.15 else rng.randint(0, 2**31)
        device: int | None = None if rng.random() < 0.15 else rng.randint(0, 63)
        row = dict(base)
        row[c_name], row[c_type], row[c_dur] = name, ttype, duration
        if c_id is not None:
            row[c_id] = "N/A" if task_id is None else str(task_id)
        else:
            task_id = None
        if c_dev is not None:
            row[c_dev] = "host" if device is None else str(device)
        else:
            device = default_device
        writer.writerow([row[column] for column in header])
        if ttype in CONTROL:
            skipped[ttype] = skipped.get(ttype, 0) + 1
        elif duration == "N/A":
            skipped["duration N/A"] = skipped.get("duration N/A", 0) + 1
        else:
            tasks.append(ProfilingTask(task_id, name, ttype, float(duration), device))
    text = out.getvalue()
    if rng.random() < 0.5:
        text = text.rstrip("\r\n")  # no final newline
    if rng.random() < 0.2:
        text = "\ufeff" + text
    return Doc(
        text.encode("utf-8"), layout, default_device, tuple(tasks), n_rows, tuple(sorted(skipped.items()))
    )


@st.composite
def splits(draw: st.DrawFn, size: int) -> list[int]:
    """Sorted cut points in ``[0, size]`` (may repeat: empty feeds are allowed)."""
    style = draw(st.sampled_from(["random", "bytewise", "none"]))
    if style == "bytewise":
        return list(range(size + 1))
    if style == "none" or size == 0:
        return []
    return sorted(draw(st.lists(st.integers(0, size), max_size=30)))


MUTATION_BYTES = st.sampled_from(
    [b",", b'"', b"\n", b"\r", b"\r\n", b"\t", b"\x00", b"\xff", b"\xe6", b"N/A", b" "]
)


@st.composite
def corrupted(draw: st.DrawFn, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "duplicate", "truncate", "random"]))
        pos = draw(st.integers(0, len(buf)))
        if kind == "flip" and buf:
            buf[min(pos, len(buf) - 1)] = draw(st.integers(0, 255))
        elif kind == "insert":
            buf[pos:pos] = draw(st.one_of(MUTATION_BYTES, st.binary(min_size=1, max_size=8)))
        elif kind == "delete":
            del buf[pos : pos + draw(st.integers(1, 40))]
        elif kind == "duplicate":
            buf[pos:pos] = buf[pos : pos + draw(st.integers(1, 80))]
        elif kind == "truncate":
            del buf[pos:]
        else:
            buf[pos:pos] = draw(st.binary(max_size=40))
    return bytes(buf)


# -- driving the parser --------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    tasks: tuple[ProfilingTask, ...] | None
    rows: int
    skipped: tuple[tuple[str, int], ...]
    error: str | None


def run(data: bytes, cuts: Sequence[int], device: int | None) -> Outcome:
    """Feed *data* cut at *cuts*, then close; any exception but ParseError escapes."""
    parser = TaskParser("fuzz.csv", device=device)
    tasks: list[ProfilingTask] = []
    error: str | None = None
    try:
        previous = 0
        for cut in [*cuts, len(data)]:
            tasks += parser.feed(data[previous:cut])
            previous = cut
        tasks += parser.close()
    except ParseError as exc:
        error = f"{exc.line}: {exc}"
        assert exc.source == "fuzz.csv"
        with pytest.raises(ParseError):  # poisoned: every later call raises again
            parser.feed(b"x\n")
    skipped = tuple(sorted(parser.skipped.items()))
    if error is None:
        # every data row is accounted for
        assert len(tasks) + sum(parser.skipped.values()) == parser.data_rows
        assert parser.tasks_out == len(tasks)
        return Outcome(tuple(tasks), parser.data_rows, skipped, None)
    return Outcome(None, parser.data_rows, skipped, error)


# -- properties ----------------------------------------------------------------------------------


@fuzz_settings(2000)
@given(doc=docs())
def test_valid_documents_parse_to_their_tasks_and_account_for_every_row(doc: Doc) -> None:
    outcome = run(doc.data, [], doc.device)
    assert outcome.error is None, outcome.error
    assert outcome.tasks == doc.tasks
    assert outcome.rows == doc.rows
    assert outcome.skipped == doc.skipped
    assert len(doc.tasks) + sum(n for _, n in doc.skipped) == doc.rows


@fuzz_settings(2500)
@given(data=st.data(), doc=docs())
def test_any_split_gives_the_same_result_as_whole(data: st.DataObject, doc: Doc) -> None:
    cuts = data.draw(splits(len(doc.data)))
    assert run(doc.data, cuts, doc.device) == run(doc.data, [], doc.device)


@fuzz_settings(3000)
@given(data=st.data(), doc=docs())
def test_corruption_gives_tasks_or_parse_error_whatever_the_split(data: st.DataObject, doc: Doc) -> None:
    damaged = data.draw(corrupted(doc.data))
    whole = run(damaged, [], doc.device)  # raises if anything but ParseError escapes
    cuts = data.draw(splits(len(damaged)))
    assert run(damaged, cuts, doc.device) == whole


# -- quote-heavy rows against an independent reader ----------------------------------------------

#: Well-formed quoted cells, then misplaced quotes (inside an unquoted field, after a closing one).
QUOTE_CELLS = [
    '"k"', '""', '""""', '"""8,2048"""', '"a,""b"",c"', '","', '"x\ty"', '"核,函"', '"2.5"', '"N/A"',
    '"PROFILING_ENABLE"', '" "',
    'x"y', '"ab"c', 'k"', '"', '"a', 'a"b"', '""5', '" "x', 'a""b', '"a""', ',"', '"a"",', 'x"y,"',
]  # fmt: skip
_FIELD = r'(?:[^",]*|"[^"]*(?:""[^"]*)*")'
WELL_QUOTED = re.compile(rf"{_FIELD}(?:,{_FIELD})*")


@dataclass(frozen=True)
class QuotedDoc:
    data: bytes
    device: int | None
    tasks: tuple[ProfilingTask, ...]
    skipped: tuple[tuple[str, int], ...]
    error_line: int | None  # the first malformed row, 1-based (the header is line 1)
    quote_error: bool  # that row breaks the quoting rule (rather than the field count)


@st.composite
def quoted_docs(draw: st.DrawFn) -> QuotedDoc:
    """Rows with quote cells in the name, type, duration and unread columns; the expected outcome."""
    layout = draw(st.sampled_from(sorted(LAYOUTS)))
    header, c_name, c_type, c_dur, c_id, c_dev = LAYOUTS[layout]
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    device = OLD_LAYOUT_DEVICE if layout == "old_op_summary" else None
    lines = [",".join(header)]
    tasks: list[ProfilingTask] = []
    skipped: dict[str, int] = {}
    error_line: int | None = None
    quote_error = False
    targets = [c_name, c_type, c_dur, *(c for c in header if c not in (c_name, c_type, c_dur, c_id, c_dev))]
    for number in range(2, draw(st.integers(1, 10)) + 2):
        cells = {column: "0" for column in header}
        cells[c_name], cells[c_type], cells[c_dur] = "k", "AI_CORE", f"{number}.5"
        for _ in range(draw(st.integers(0, 3))):
            cells[rng.choice(targets)] = rng.choice(QUOTE_CELLS)
        line = ",".join(cells[column] for column in header)
        lines.append(line)
        if error_line is not None:
            continue
        if not WELL_QUOTED.fullmatch(line):
            error_line, quote_error = number, True
            continue
        fields = next(csv.reader([line], strict=True))
        if len(fields) != len(header):
            error_line = number
            continue
        row = dict(zip(header, fields, strict=True))
        if row[c_type] in CONTROL:
            skipped[row[c_type]] = skipped.get(row[c_type], 0) + 1
            continue
        if row[c_dur] == "N/A":
            skipped["duration N/A"] = skipped.get("duration N/A", 0) + 1
            continue
        try:
            duration = float(row[c_dur])
        except ValueError:
            error_line = number
            continue
        assert math.isfinite(duration)
        task_id = None if c_id is None else int(row[c_id])
        dev = device if c_dev is None else int(row[c_dev])
        tasks.append(ProfilingTask(task_id, row[c_name], row[c_type], duration, dev))
    data = ("\n".join(lines) + "\n").encode()
    return QuotedDoc(data, device, tuple(tasks), tuple(sorted(skipped.items())), error_line, quote_error)


@pytest.mark.parametrize("accelerated", [False, None], ids=["pure", "default"])
@fuzz_settings(1500)
@given(data=st.data(), doc=quoted_docs())
def test_quote_heavy_rows_parse_as_an_independent_reader_reads_them(
    accelerated: bool | None, data: st.DataObject, doc: QuotedDoc
) -> None:
    for cuts in ([], data.draw(splits(len(doc.data)))):
        parser = TaskParser("fuzz_q.csv", device=doc.device, accelerated=accelerated)
        tasks: list[ProfilingTask] = []
        try:
            previous = 0
            for cut in [*cuts, len(doc.data)]:
                tasks += parser.feed(doc.data[previous:cut])
                previous = cut
            tasks += parser.close()
        except ParseError as exc:
            assert (exc.source, exc.line) == ("fuzz_q.csv", doc.error_line), str(exc)
            assert ("quote" in str(exc).split(": ", 1)[1]) == doc.quote_error, str(exc)
            continue
        assert doc.error_line is None, f"line {doc.error_line} was accepted"
        assert tuple(tasks) == doc.tasks
        assert tuple(sorted(parser.skipped.items())) == doc.skipped


# -- shapes the random search is unlikely to reach -----------------------------------------------


def row_for(header: list[str], **cells: str) -> str:
    values = {column: "0" for column in header}
    values.update(cells)
    return ",".join(values[column] for column in header)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(
            ",".join(NEW_HEADER).replace("Op Name", "Op\rName").encode() + b"\n",
            id="cr-inside-header",
        ),
        pytest.param(
            (
                ",".join(NEW_HEADER)
                + "\n"
                + row_for(NEW_HEADER, **{"Op Name": '"' + "x" * 200_000 + '"', "Task Type": "AI_CORE"})
                + "\n"
            ).encode(),
            id="quoted-field-over-128KiB",
        ),
        pytest.param(
            (
                ",".join(NEW_HEADER)
                + "\n"
                + row_for(NEW_HEADER, **{"Op Name": '"k"', "Task Type": "AI\rCORE"})
                + "\n"
            ).encode(),
            id="cr-inside-unquoted-field-of-a-quoted-row",
        ),
    ],
)
def test_odd_bytes_give_tasks_or_parse_error(data: bytes) -> None:
    whole = run(data, [], None)
    assert run(data, list(range(0, len(data), 7)), None) == whole


def test_line_length_limit_does_not_depend_on_the_split() -> None:
    """A line over ``max_line_length`` is refused (or accepted) however the bytes arrive."""
    data = (",".join(NEW_HEADER) + "\n" + row_for(NEW_HEADER, **{"Op Name": "k" * 1000}) + "\n").encode()
    outcomes = set()
    for step in (len(data), 50, 1):
        parser = TaskParser("limit.csv", max_line_length=600)
        try:
            for i in range(0, len(data), step):
                parser.feed(data[i : i + step])
            parser.close()
            outcomes.add("accepted")
        except ParseError as exc:
            outcomes.add(f"refused at line {exc.line}")
    assert len(outcomes) == 1, outcomes
