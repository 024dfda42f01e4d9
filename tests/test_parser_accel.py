"""The C accelerator (``asc_aprof._plans._cparser``) against the pure-Python reference.

The contract: for every input, fed whole or in any split, both implementations give the same
tasks (same types, same values bit for bit), the same ``skipped`` counts in the same order,
the same ``data_rows``, the same PMU counters when asked for (``counters=True``: every column,
every value bit for bit, None for None), and the same errors (type, message, source, line). Plus: accelerated
tasks are real ``ProfilingTask`` objects that the cyclic GC does not track, the real msprof
files parse identically, and the extension leaks nothing and compiles warning-free.
"""

from __future__ import annotations

import csv
import dataclasses
import gc
import math
import os
import random
import shutil
import subprocess
import sys
import sysconfig
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from asc_aprof import ParseError, ProfilingTask, TaskCounters, TaskParser
from asc_aprof._plans import _parser
from asc_aprof._plans._parser import DEFAULT_MAX_LINE_LENGTH

from .reference import REAL_CSV, needs_real_csv
from .reliability.test_parser_fuzz import (
    LAYOUTS,
    OLD_LAYOUT_DEVICE,
    QUOTE_CELLS,
    Doc,
    QuotedDoc,
    corrupted,
    docs,
    fuzz_settings,
    quoted_docs,
    splits,
)
from .test_parser import NEW_HEADER, new_row

pytestmark = pytest.mark.skipif(
    _parser._parse_rows is None,
    reason="asc_aprof._plans._cparser is not built (no C compiler at install time): pure Python only",
)

C_SOURCE = Path(_parser.__file__).with_name("_cparser.c")


# -- running both implementations ----------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    tasks: tuple[tuple[tuple[str, str], ...], ...]  # (type name, repr) per field: -0.0, nan, 1 vs 1.0
    rows: int
    skipped: tuple[tuple[str, int], ...]  # insertion order too
    kind: str | None
    error: tuple[str, str, str, int | None] | None
    counters: tuple[tuple[str, tuple[str, ...]], ...] = ()  # column -> repr of every value


def _exact(task: ProfilingTask) -> tuple[tuple[str, str], ...]:
    assert type(task) is ProfilingTask
    return tuple((type(value).__name__, repr(value)) for value in dataclasses.astuple(task))


def run(
    data: bytes,
    cuts: Sequence[int],
    *,
    accelerated: bool,
    device: int | None = None,
    max_line_length: int = DEFAULT_MAX_LINE_LENGTH,
    counters: bool = False,
) -> Outcome:
    parser = TaskParser(
        "accel.csv",
        device=device,
        max_line_length=max_line_length,
        accelerated=accelerated,
        counters=counters,
    )
    assert parser.accelerated is accelerated
    tasks: list[ProfilingTask] = []
    taken: list[TaskCounters] = []
    error = None
    try:
        previous = 0
        for cut in [*cuts, len(data)]:
            tasks += parser.feed(data[previous:cut])
            taken.append(parser.take_counters())
            previous = cut
        tasks += parser.close()
        taken.append(parser.take_counters())
    except ParseError as exc:
        error = (type(exc).__name__, str(exc), exc.source, exc.line)
        with pytest.raises(ParseError):  # poisoned
            parser.feed(b"x\n")
    exact_counters: tuple[tuple[str, tuple[str, ...]], ...] = ()
    if error is None:
        assert len(tasks) + sum(parser.skipped.values()) == parser.data_rows
        if counters:
            joined = TaskCounters.concat(taken)
            assert len(joined) == len(tasks) and joined.columns == parser.counter_columns
            exact_counters = tuple((name, tuple(map(repr, joined.column(name)))) for name in joined.columns)
    return Outcome(
        tuple(map(_exact, tasks)) if error is None else (),
        parser.data_rows,
        tuple(parser.skipped.items()),
        parser.kind,
        error,
        exact_counters,
    )


def same(
    data: bytes,
    cuts: Sequence[int] = (),
    *,
    device: int | None = None,
    max_line_length: int = DEFAULT_MAX_LINE_LENGTH,
    counters: bool = False,
) -> Outcome:
    """Both implementations, whole and cut at *cuts*: one outcome."""
    outcomes = [
        run(
            data,
            split,
            accelerated=accelerated,
            device=device,
            max_line_length=max_line_length,
            counters=counters,
        )
        for split in ([[], cuts] if cuts else [[]])
        for accelerated in (False, True)
    ]
    assert outcomes[1:] == outcomes[:-1]
    return outcomes[0]


# -- generated documents -------------------------------------------------------------------------

#: Cells that take the fallback, or sit at the edge of the C fast path's grammar.
DURATIONS = [
    "82.11", "0", "1e3", " 7.5", "7.5 ", "\t7.5\t", "7.5\r", "+1.5", "-0", "-0.0", "1.", ".5", ".",
    "1e", "1e+", "1E-3", "1e-400", "1e400", "1e22", "1e23", "4.35", "0.1", "5e-324",
    "2.2250738585072014e-308", "9007199254740993", "123456789012345678901234567890",
    "0.1000000000000000055511151231257827021181583404541015625", "1_0", "inf", "-Infinity", "nan",
    "١٢", "\x0b7.5", "7.5\x0c", "\xa07.5", "N/A", " N/A ", '"N/A"', '"7.5"', "", "abc", "1.5.5",
]  # fmt: skip
INTEGERS = [
    "0", "7", "-1", "+3", " 4", "4 ", "\t4\r", "007", "1_000", "N/A", " N/A", "host", "HOST",
    "123456789012345678", "1234567890123456789", "9999999999999999999", "99999999999999999999",
    "-999999999999999999", "x", "", "٣", '"5"', "4.0", "2147483648",
]  # fmt: skip
TYPES = ["AI_CORE", "MIX_AIC", "AI_CPU", "PROFILING_ENABLE", "PROFILING_DISABLE", " PROFILING_ENABLE",
         "PROFILING_ENABLE\r", "", "核"]  # fmt: skip
NAME_BYTES = [
    b"add_custom", b"k", b"\xe6\xa0\xb8\xe5\x87\xbd\xe6\x95\xb0", b"\xff", b"\xe6\xa0", b"\xed\xa0\x80",
    b"\xef\xbb\xbfk", b"a\rb", b"a\tb", b"\x00", b'"q,uoted"', b'"esc""aped"', b'un"balanced', b"",
    b"x" * 70, b"\xc3\xa9" * 40,
]  # fmt: skip
LINE_ENDS = [b"\n", b"\r\n", b"\r\r\n"]


@st.composite
def tricky_docs(draw: st.DrawFn) -> tuple[bytes, int | None, int]:
    """A header of a known layout, then rows whose cells come from the tricky pools above."""
    layout = draw(st.sampled_from(sorted(LAYOUTS)))
    header, c_name, c_type, c_dur, c_id, c_dev = LAYOUTS[layout]
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):  # columns in any order, some unused ones dropped: a used one may be last
        used = {c_name, c_type, c_dur, c_id, c_dev}
        header = [c for c in header if c in used or rng.random() < 0.5]
        rng.shuffle(header)
    end = draw(st.sampled_from(LINE_ENDS))
    out = [(b"\xef\xbb\xbf" if rng.random() < 0.2 else b"") + ",".join(header).encode() + end]
    for _ in range(draw(st.integers(0, 14))):
        roll = rng.random()
        if roll < 0.08:
            out.append(rng.choice([b"", b" ", b"\r", b"\t"]) + rng.choice(LINE_ENDS))
            continue
        cells = [b"0" for _ in header]
        for i, column in enumerate(header):
            if "Start" in column or "start" in column or "stop" in column:
                cells[i] = b"1713390712311991.828\t"
            if column in ("Input Shapes", "Output Shapes"):
                cells[i] = b'"""8,2048;8,2048"""'
        cells[header.index(c_name)] = rng.choice(NAME_BYTES)
        cells[header.index(c_type)] = rng.choice(TYPES).encode()
        cells[header.index(c_dur)] = rng.choice(DURATIONS).encode()
        if c_id is not None:
            cells[header.index(c_id)] = rng.choice(INTEGERS).encode()
        if c_dev is not None:
            cells[header.index(c_dev)] = rng.choice(INTEGERS[:8] + INTEGERS).encode()
        for _ in range(rng.choice([0, 0, 1, 2])):  # quotes anywhere, well-formed or misplaced
            cells[rng.randrange(len(cells))] = rng.choice(QUOTE_CELLS).encode()
        if roll > 0.95:
            cells.append(b"extra")
        elif roll > 0.9:
            cells.pop()
        out.append(b",".join(cells) + (end if rng.random() < 0.9 else rng.choice(LINE_ENDS)))
    data = b"".join(out)
    if rng.random() < 0.4:
        data = data.rstrip(b"\r\n")
    device = OLD_LAYOUT_DEVICE if layout == "old_op_summary" else None
    limit = draw(st.sampled_from([DEFAULT_MAX_LINE_LENGTH] * 3 + [40, 90, 150, 250]))
    return data, device, limit


@fuzz_settings(1500)
@given(data=st.data(), doc=docs())
def test_valid_documents_same_result_whole_and_split(data: st.DataObject, doc: Doc) -> None:
    outcome = same(doc.data, data.draw(splits(len(doc.data))), device=doc.device)
    assert outcome.error is None
    assert len(outcome.tasks) == len(doc.tasks)


@fuzz_settings(2000)
@given(data=st.data(), doc=docs())
def test_corrupted_documents_same_result_whole_and_split(data: st.DataObject, doc: Doc) -> None:
    damaged = data.draw(corrupted(doc.data))
    same(damaged, data.draw(splits(len(damaged))), device=doc.device)


@fuzz_settings(2000)
@given(data=st.data(), doc=tricky_docs())
def test_tricky_cells_same_result_whole_and_split(
    data: st.DataObject, doc: tuple[bytes, int | None, int]
) -> None:
    raw, device, limit = doc
    same(raw, data.draw(splits(len(raw))), device=device, max_line_length=limit)


@fuzz_settings(1500)
@given(data=st.data(), doc=quoted_docs())
def test_quote_heavy_rows_same_result_whole_and_split(data: st.DataObject, doc: QuotedDoc) -> None:
    outcome = same(doc.data, data.draw(splits(len(doc.data))), device=doc.device)
    assert (outcome.error is None) == (doc.error_line is None)


# -- counters ------------------------------------------------------------------------------------

#: Counter cells: plain numbers, N/A in every spelling, and everything C must leave to Python.
COUNTER_CELLS = [
    "0.423", "0", "0.0", "12463669", "377.69", "-0", "-0.0", "1e3", "1E-3", "5e-324", "1.", ".5",
    "9007199254740993", "N/A", " N/A", "N/A ", '"N/A"', "n/a", '"0.5"', " 0.5", "0.5\t", "1_0", "",
    "nan", "inf", "-Infinity", "1e309", "abc", "١٢", '"1,5"', '"0.""5"',
    "0.1000000000000000055511151231257827021181583404541015625",
]  # fmt: skip
#: PMU column names of both chips (the header decides which are counters, not these names).
COUNTER_NAMES = [
    "aicore_time(us)", "aic_total_cycles", "aic_mac_ratio", "aiv_vec_time(us)", "aiv_vec_ratio",
    "aiv_main_mem_read_bw(GB/s)", "vec_exe_ratio", "memory_bound", "cube_utilization(%)", "x",
]  # fmt: skip


@st.composite
def counter_docs(draw: st.DrawFn) -> tuple[bytes, int | None]:
    """op_summary-like documents whose PMU columns sit anywhere (mostly last, after quoted
    shapes), with cells from :data:`COUNTER_CELLS` (mostly plain)."""
    layout = draw(st.sampled_from(["op_summary", "old_op_summary", "kernel_details"]))
    header, c_name, c_type, c_dur, c_id, c_dev = LAYOUTS[layout]
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    header = [c for c in header if c not in COUNTER_NAMES]
    names = rng.sample(COUNTER_NAMES, rng.randint(0, len(COUNTER_NAMES)))
    if rng.random() < 0.3:  # counters among the task columns, even before the ones read
        for name in names:
            header.insert(rng.randrange(len(header) + 1), name)
    else:
        header += names
    end = draw(st.sampled_from(LINE_ENDS))
    out = [",".join(header).encode() + end]
    for _ in range(draw(st.integers(0, 10))):
        cells = ["0" for _ in header]
        for i, column in enumerate(header):
            if column in ("Input Shapes", "Output Shapes"):
                cells[i] = rng.choice(['"""8,2048;8,2048"""', "N/A", '"8,2048"'])
            elif column in names:
                pool = COUNTER_CELLS if rng.random() < 0.15 else COUNTER_CELLS[:14]
                cells[i] = rng.choice(pool)
        cells[header.index(c_name)] = rng.choice(["k", "div_kernel", '"a,b"'])
        cells[header.index(c_type)] = rng.choice(TYPES[:4])
        cells[header.index(c_dur)] = rng.choice(["1.5", "381.688", "N/A", "7"])
        if c_id is not None:
            cells[header.index(c_id)] = rng.choice(["0", "17", "N/A"])
        if c_dev is not None:
            cells[header.index(c_dev)] = rng.choice(["0", "1", "host"])
        out.append(",".join(cells).encode() + end)
    return b"".join(out), OLD_LAYOUT_DEVICE if layout == "old_op_summary" else None


@fuzz_settings(1500)
@given(data=st.data(), doc=counter_docs())
def test_counters_same_result_whole_and_split(data: st.DataObject, doc: tuple[bytes, int | None]) -> None:
    raw, device = doc
    outcome = same(raw, data.draw(splits(len(raw))), device=device, counters=True)
    if outcome.error is None:  # with counters or without: the same tasks
        assert outcome.tasks == same(raw, device=device).tasks


@fuzz_settings(800)
@given(data=st.data(), doc=tricky_docs())
def test_counters_of_tricky_documents_same_result(
    data: st.DataObject, doc: tuple[bytes, int | None, int]
) -> None:
    raw, device, limit = doc
    same(raw, data.draw(splits(len(raw))), device=device, max_line_length=limit, counters=True)


@fuzz_settings(500)
@given(data=st.data(), doc=docs())
def test_counters_of_valid_documents_same_result(data: st.DataObject, doc: Doc) -> None:
    same(doc.data, data.draw(splits(len(doc.data))), device=doc.device, counters=True)


@pytest.mark.parametrize("cell", COUNTER_CELLS)
def test_every_counter_cell_in_an_otherwise_plain_row(cell: str) -> None:
    header = NEW_HEADER + ",aiv_vec_ratio,aiv_time(us)"
    plain = new_row("0", "1", "k", "AI_CORE", "1.0") + ",0.5,2.25"
    odd = new_row("0", "2", "k", "AI_CORE", "1.0") + f",{cell},3"
    outcome = same(_doc(plain, odd, plain, header=header), counters=True)
    text = next(csv.reader([cell])) if cell else [""]
    value = text[0].strip().strip('"').strip()
    try:
        valid = value == "N/A" or math.isfinite(float(value))
    except ValueError:
        valid = False
    assert (outcome.error is None) == valid, cell
    if valid:
        expected = None if value == "N/A" else float(value)
        assert dict(outcome.counters)["aiv_vec_ratio"] == ("0.5", repr(expected), "0.5")
    else:
        assert outcome.error is not None and "aiv_vec_ratio" in outcome.error[1] and outcome.error[3] == 3


# -- targeted cases ------------------------------------------------------------------------------


def _doc(*rows: str, header: str = NEW_HEADER, end: str = "\n") -> bytes:
    return (end.join([header, *rows]) + end).encode()


@pytest.mark.parametrize(
    "row",
    [
        new_row("0", "1", "k", "AI_CORE", "82.11"),
        new_row("0", "1", '"my,kernel ""v2"""', "AI_CORE", "4.25"),  # quote in the first k fields
        new_row("host", "N/A", "hcom", "COMMUNICATION", "3.5"),
        new_row("0", "1", "k", "AI_CORE", "N/A"),
        new_row("0", "1", "k", "PROFILING_ENABLE", "garbage"),  # control rows read no number
        new_row("0", "1", "k", "AI_CORE", "1_000.5"),
        new_row("0", "1_0", "k", "AI_CORE", "1"),
        new_row("0", "1", "k", "AI_CORE", "inf"),
        new_row("0", "1", "k", "AI_CORE", "abc"),
        new_row("0", "x1", "k", "AI_CORE", "1"),
        new_row("zero", "1", "k", "AI_CORE", "1"),
        new_row("0", "1", "k", "AI_CORE", "1", shapes="N/A") + '"',
        new_row("0", "1", "k", "AI_CORE", "1") + ",extra",
        new_row("0", "1", "k", "AI_CORE", "1", shapes='x"8,2048"'),  # misplaced quotes after k
        new_row("0", "1", "k", "AI_CORE", "1", shapes='"8,2048"x'),
        new_row("0", "1", "k", "AI_CORE", "1", shapes='"8,""2048"'),
        new_row("0", "1", 'x"y', "AI_CORE", "1"),  # and before it
        new_row("0", "1", "k", "AI_CORE", "nan"),
        new_row("0", "1", "k", "AI_CORE", "1e309"),
        new_row("0", "1", "k", "AI_CORE", "-1e400"),
        "0,1,2",
        "",
        "   ",
    ],
)
def test_each_fallback_matches(row: str) -> None:
    data = _doc(new_row("0", "9", "k", "AI_CORE", "1.0"), row, new_row("1", "10", "k", "AI_CORE", "2.0"))
    same(data, list(range(0, len(data), 17)))
    same(data.replace(b"\n", b"\r\n"), [len(data) // 2])


TT_HEADER = "Device_id,kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(us)"


@pytest.mark.parametrize("column", ["task_id", "Device_id", "task_time(us)"])
def test_every_edge_cell_in_an_otherwise_plain_row(column: str) -> None:
    cells = DURATIONS if column == "task_time(us)" else INTEGERS
    plain = {"Device_id": "1", "kernel_name": "k", "kernel_type": "AI_CORE", "stream_id": "3"}
    plain |= {"task_id": "2", "task_time(us)": "4.5", "task_start(us)": "1.000\t"}
    columns = TT_HEADER.split(",")
    for cell in cells:
        row = ",".join(cell if c == column else plain[c] for c in columns)
        same(_doc(",".join(plain[c] for c in columns), row, header=TT_HEADER))


@pytest.mark.parametrize("bad_at", [None, 3, 200, 700])
def test_runs_of_fallback_lines(bad_at: int | None) -> None:
    """Long runs of lines C leaves (taken by Python in growing batches) between plain ones."""
    rng = random.Random(bad_at)
    rows = []
    for run_length in (1, 2, 3, 300, 1, 5, 600, 2):
        rows += [new_row("host", str(i), "h", "AI_CPU", "1.5") for i in range(run_length)]
        rows += [new_row("0", str(i), "k", "AI_CORE", "2.5") for i in range(rng.randint(0, 3))]
        rows += [""] * rng.randint(0, 1)
    if bad_at is not None:
        rows[bad_at] = rows[bad_at].replace("1.5", "x")
    data = _doc(*rows)
    outcome = same(data, sorted(rng.randrange(len(data)) for _ in range(20)))
    assert (outcome.error is None) == (bad_at is None)


def test_invalid_utf8_in_a_name_falls_back_to_replacement() -> None:
    data = _doc(new_row("0", "1", "k", "AI_CORE", "1.0")).replace(b",k,", b",k\xff\xe6,")
    outcome = same(data)
    assert outcome.tasks[0][1] == ("str", repr("k\ufffd\ufffd"))


def test_line_limit_is_counted_in_characters() -> None:
    """A line over the limit in bytes but not in characters is accepted by both paths."""
    name = "核" * 100  # 300 bytes, 100 characters
    row = new_row("0", "1", name, "AI_CORE", "1.0")
    data = _doc(row)
    limit = len(row) + 10
    assert len(row.encode()) > limit
    assert same(data, max_line_length=limit).error is None
    assert same(data, max_line_length=len(row) - 1).error is not None


@pytest.mark.parametrize("end", ["\n", "\r\n"])
@pytest.mark.parametrize("delta", [-1, 0, 1])
def test_line_limit_boundary(end: str, delta: int) -> None:
    """A line of exactly the limit passes, one character more is refused (a CRLF's '\r' counts)."""
    row = "k" * 60 + ",AI_CORE,1.0"
    data = ("Op Name,Task Type,Task Duration(us)" + end + row + end).encode()
    limit = len(row) + len(end) - 1 + delta
    assert (same(data, max_line_length=limit).error is not None) == (delta < 0)


@pytest.mark.parametrize("header_end", ["\n", "\r\n"])
def test_used_columns_last_with_crlf(header_end: str) -> None:
    """With CRLF the '\r' is stripped before the last field; without, it belongs to it."""
    for header in ("kernel_type,task_time(us),kernel_name", "kernel_name,task_time(us),kernel_type"):
        rows = ["AI_CORE,1.5,k", "MIX_AIC,2,PROFILING_ENABLE", "", "X,3,k\r"]
        data = (header + header_end + "\r\n".join(rows) + "\r\n").encode()
        same(data, [len(header) + 5])


def test_floats_are_bit_identical_to_float() -> None:
    rng = random.Random(5)
    texts = ["0.1", "0.3", "1e22", "1e-22", "9007199254740993", "4.35", "0.000001", "8.98846567431158e307"]
    for _ in range(4000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 20)))
        dot = rng.randint(0, len(digits))
        text = digits[:dot] + "." + digits[dot:]
        if rng.random() < 0.3:
            text += f"e{rng.randint(-30, 30)}"
        texts.append(text)
    header = "kernel_name,kernel_type,task_time(us)"
    data = (header + "\n" + "".join(f"k,AI_CORE,{t}\n" for t in texts)).encode()
    parser = TaskParser("f", accelerated=True)
    tasks = parser.feed(data) + parser.close()
    assert [t.duration.hex() for t in tasks] == [float(t).hex() for t in texts]


def test_plain_rows_stay_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the header goes through Python's per-line code on a plain file."""
    data = _doc(*(new_row(str(i % 4), str(i), "k", "AI_CORE", f"{i}.5") for i in range(500)))
    parser = TaskParser("plain", accelerated=True)
    calls: list[list[str]] = []
    real = parser._lines

    def spy(lines: list[str]) -> list[ProfilingTask]:
        calls.append(list(lines))  # _rows pops the header off its argument
        return real(lines)

    monkeypatch.setattr(parser, "_lines", spy)
    assert len(parser.feed(data) + parser.close()) == 500
    assert calls == [[NEW_HEADER]]


# -- the records ---------------------------------------------------------------------------------


def test_accelerated_tasks_are_untracked_and_equal_the_pure_ones() -> None:
    data = _doc(
        new_row("0", "1", "add_custom", "AI_CORE", "82.11"),
        new_row("1", "2", "核函数", "MIX_AIC", "1e3"),
        new_row("host", "N/A", "hcom", "COMMUNICATION", "3.5"),  # a fallback line: Python builds it
    )
    fast = TaskParser("g", accelerated=True)
    pure = TaskParser("g", accelerated=False)
    fast_tasks = fast.feed(data) + fast.close()
    pure_tasks = pure.feed(data) + pure.close()
    assert fast_tasks == pure_tasks
    assert [type(t) for t in fast_tasks] == [ProfilingTask] * 3
    assert [gc.is_tracked(t) for t in fast_tasks[:2]] == [False, False]
    assert all(gc.is_tracked(t) for t in pure_tasks)
    assert fast_tasks[1].name == "核函数" and dataclasses.asdict(fast_tasks[1])["device"] == 1
    gc.collect()  # untracked records survive a full collection intact
    assert fast_tasks == pure_tasks


def test_a_default_device_of_another_type_keeps_records_tracked() -> None:
    """Only records of str/int/float/None are provably acyclic; anything else stays tracked."""
    data = b"kernel_name,kernel_type,task_time(us)\nk,AI_CORE,1.5\n"
    odd: object = []
    parser = TaskParser("odd", device=odd, accelerated=True)  # type: ignore[arg-type]
    (task,) = parser.feed(data)
    assert task.device is odd and gc.is_tracked(task)
    (task,) = TaskParser("int", device=3, accelerated=True).feed(data)
    assert task.device == 3 and not gc.is_tracked(task)


def test_no_leaks() -> None:
    data = _doc(
        *(new_row(str(i % 4), str(i), f"k{i % 40}", "AI_CORE", f"{i}.25") for i in range(300)),
        new_row("0", "1", "k", "PROFILING_ENABLE", "1"),
        new_row("host", "N/A", "k", "AI_CORE", "1"),
    )

    def parse() -> None:
        parser = TaskParser("leak", accelerated=True)
        parser.feed(data)
        parser.close()

    for _ in range(3):
        parse()
    refs = sys.getrefcount(ProfilingTask)
    tracemalloc.start()
    try:
        parse()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(50):
            parse()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert sys.getrefcount(ProfilingTask) == refs
    assert grown < 20_000, f"{grown} bytes kept after 50 parses"


def test_refuses_record_types_that_could_form_cycles() -> None:
    class WithDict(tuple[object, ...]):  # no __slots__: instances get a __dict__
        pass

    assert _parser._parse_rows is not None
    args: tuple[object, ...] = (
        b"a,b,c",
        0,
        5,
        3,
        3,
        -1,
        -1,
        0,
        1,
        2,
        None,
        False,
        {},
        WithDict,
        100,
        (),
        [],
        None,
    )
    with pytest.raises(TypeError, match="__dict__"):
        _parser._parse_rows([], *args)
    with pytest.raises(TypeError, match="tuple subclass or have 5 fields in __slots__"):
        _parser._parse_rows([], *args[:13], dict, 100, (), [], None)

    @dataclasses.dataclass(frozen=True, slots=True)
    class FourSlots:
        a: object
        b: object
        c: object
        d: object

    with pytest.raises(TypeError, match="5 fields in __slots__"):
        _parser._parse_rows([], *args[:13], FourSlots, 100, (), [], None)
    good: tuple[object, ...] = (b"a,b,c", 0, 5, 3, 3, -1, -1, 0, 1, 2, None, False, {}, ProfilingTask, 100)
    with pytest.raises(ValueError, match="start"):
        _parser._parse_rows([], b"a", *good[1:], (), [], None)
    with pytest.raises(ValueError, match="differ in length"):
        _parser._parse_rows([], *good, (1,), [], None)
    with pytest.raises(TypeError, match="bytearrays"):
        _parser._parse_rows([], *good, (1,), [b""], None)
    with pytest.raises(ValueError, match="ascend strictly"):
        _parser._parse_rows([], *good, (2, 1), [bytearray(), bytearray()], None)
    with pytest.raises(ValueError, match="ascend strictly"):
        _parser._parse_rows([], *good, (3,), [bytearray()], None)
    with pytest.raises(TypeError, match="7-tuple"):
        _parser._parse_rows([], *good, (), [], ([],))
    with pytest.raises(TypeError, match="5 bytearrays"):
        _parser._parse_rows([], *good, (), [], ([b""] * 5, {}, [], {}, [], {}, []))
    with pytest.raises(TypeError, match="dict, list pairs"):
        _parser._parse_rows([], *good, (), [], ([bytearray()] * 5, [], [], {}, [], {}, []))


# -- switches ------------------------------------------------------------------------------------


def test_accelerated_true_needs_the_extension(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_parser, "_parse_rows", None)
    with pytest.raises(RuntimeError, match="not built"):
        TaskParser(accelerated=True)
    assert TaskParser(accelerated=False).accelerated is False


@pytest.mark.parametrize(("value", "expected"), [("1", "False"), ("0", "True"), (None, "True")])
def test_environment_switch(value: str | None, expected: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ASC_APROF_PURE_PYTHON"}
    if value is not None:
        env["ASC_APROF_PURE_PYTHON"] = value
    code = "import asc_aprof._plans._parser as p; print(p.ACCELERATED, p.TaskParser().accelerated)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [expected, expected]


# -- real files and the C source -----------------------------------------------------------------


@needs_real_csv
@pytest.mark.parametrize("name", sorted(p.name for p in REAL_CSV.glob("*.csv")) if REAL_CSV.is_dir() else [])
def test_real_msprof_files_parse_identically(name: str) -> None:
    data = (REAL_CSV / name).read_bytes()
    outcome = same(data, list(range(0, len(data), 997)))
    assert outcome.error is None
    assert run(data, list(range(len(data))), accelerated=True) == outcome  # byte by byte


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_c_source_compiles_without_warnings(tmp_path: Path) -> None:
    include = sysconfig.get_paths()["include"]
    cmd = ["cc", "-Wall", "-Wextra", "-Werror", "-O2", "-fPIC", "-c", f"-I{include}", str(C_SOURCE)]
    done = subprocess.run([*cmd, "-o", str(tmp_path / "x.o")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
