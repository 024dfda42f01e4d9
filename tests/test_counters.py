"""Per-task PMU counters: the columnar store, which columns are counters, and the parser reading them."""

from __future__ import annotations

import csv
import io
import math
import pickle

import pytest

from asc_aprof import ParseError, ProfilingResult, ProfilingTask, TaskCounters, TaskParser
from asc_aprof._model._counters import TASK_COLUMNS, CounterBuilder, counter_indexes
from asc_aprof._model._records import make_result
from asc_aprof._plans import _parser

from .reference import REAL_CSV, REAL_RUNS, needs_real_csv, needs_real_runs
from .test_parser import NEW_HEADER, new_row

PATHS = [False, True] if _parser._parse_rows is not None else [False]


# -- the store ------------------------------------------------------------------------------------


def test_columns_rows_and_values() -> None:
    counters = TaskCounters({"aiv_vec_ratio": [0.5, None, 0.25], "aiv_time(us)": [1.0, 2.0, 3.0]})
    assert counters.columns == ("aiv_vec_ratio", "aiv_time(us)") and len(counters) == 3
    assert "aiv_vec_ratio" in counters and "aic_mac_ratio" not in counters
    assert counters.column("aiv_vec_ratio") == [0.5, None, 0.25]
    assert counters.row(1) == {"aiv_vec_ratio": None, "aiv_time(us)": 2.0}
    assert counters.row(-1) == {"aiv_vec_ratio": 0.25, "aiv_time(us)": 3.0}
    assert list(counters.rows()) == [counters.row(i) for i in range(3)]
    view = counters.values("aiv_vec_ratio")
    assert view.format == "d" and view.readonly and view[0] == 0.5 and math.isnan(view[1])
    with pytest.raises(TypeError):
        view[0] = 1  # a read-only view
    with pytest.raises(IndexError, match="3 tasks"):
        counters.row(3)
    with pytest.raises(KeyError, match="aiv_vec_ratio, aiv_time"):
        counters.column("aic_mac_ratio")


def test_immutable_equal_hashable_picklable() -> None:
    a = TaskCounters({"x": [1.0, None]})
    with pytest.raises(AttributeError):
        a._length = 5
    assert a == TaskCounters({"x": [1.0, None]})  # None equals None (NaN inside)
    assert a != TaskCounters({"x": [1.0, 2.0]})
    assert a != TaskCounters({"y": [1.0, None]})
    assert a != TaskCounters({"x": [1.0, None, 3.0]})
    assert hash(a) == hash(TaskCounters({"x": [1.0, None]}))
    assert pickle.loads(pickle.dumps(a)) == a
    assert "2 tasks, 1 columns: x" in repr(a)


def test_lengths_must_agree() -> None:
    with pytest.raises(ValueError, match="'b' has 1 values, not 2"):
        TaskCounters({"a": [1.0, 2.0], "b": [1.0]})
    assert len(TaskCounters(length=4)) == 4 and TaskCounters(length=4).columns == ()
    assert list(TaskCounters(length=2).rows()) == [{}, {}]  # no column: still a dict per task


def test_select_and_concat_with_different_columns() -> None:
    a = TaskCounters({"x": [1.0, 2.0, 3.0]})
    b = TaskCounters({"y": [9.0], "x": [None]})
    assert a.select([2, 0]) == TaskCounters({"x": [3.0, 1.0]})
    joined = TaskCounters.concat([a, None, b], lengths=[3, 2, 1])
    assert joined.columns == ("x", "y") and len(joined) == 6
    assert joined.column("x") == [1.0, 2.0, 3.0, None, None, None]
    assert joined.column("y") == [None, None, None, None, None, 9.0]
    with pytest.raises(ValueError, match="lengths"):
        TaskCounters.concat([a, None])
    with pytest.raises(ValueError, match="3 tasks, not 2"):
        TaskCounters.concat([a], lengths=[2])
    empty = TaskCounters.concat([TaskCounters({"z": []}), TaskCounters(length=0)])
    assert empty.columns == ("z",) and len(empty) == 0  # the columns of a header-only file stay
    builder = CounterBuilder()
    builder.pad(2)
    builder.extend(a)
    built = builder.build()
    assert built.column("x") == [None, None, 1.0, 2.0, 3.0] and len(builder) == 0


def test_to_dict_round_trip_and_result_format_2() -> None:
    tasks = (ProfilingTask(1, "k", "AI_CORE", 2.0, 0), ProfilingTask(2, "k", "AI_CORE", 3.0, 0))
    counters = TaskCounters({"aic_mac_ratio": [0.9, None]})
    result = make_result(tasks, "PROF_1", counters)
    data = result.to_dict()
    assert data["version"] == 2 and data["counters"] == {"aic_mac_ratio": [0.9, None]}
    assert ProfilingResult.from_dict(data) == result
    plain = make_result(tasks, "PROF_1")
    assert plain.counters is None and plain.to_dict()["counters"] is None
    version1 = {k: v for k, v in plain.to_dict().items() if k != "counters"} | {"version": 1}
    assert ProfilingResult.from_dict(version1).counters is None
    assert ProfilingResult.from_dict(version1).tasks == tasks
    broken = data | {"counters": {"aic_mac_ratio": [0.9]}}
    with pytest.raises(ValueError, match=r"malformed asc-aprof result: .*1 values, not 2"):
        ProfilingResult.from_dict(broken)
    with pytest.raises(ValueError, match="unsupported result version 3"):
        ProfilingResult.from_dict(data | {"version": 3})


# -- which columns are counters ---------------------------------------------------------------------


def test_counter_columns_are_every_column_not_describing_the_task() -> None:
    header = [*NEW_HEADER.split(","), "aiv_vec_ratio", "memory_bound", "aiv_vec_ratio", ""]
    picked = [header[i] for i in counter_indexes(header)]
    assert picked == ["aicore_time(us)", "aic_total_cycles", "aiv_vec_ratio", "memory_bound"]
    assert not set(picked) & TASK_COLUMNS
    kernel_details = ["Step Id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)"]
    assert counter_indexes([*kernel_details, "aiv_time(us)"]) == (6,)
    task_time = (
        "Device_id,kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(us),task_stop(us)"
    )
    assert counter_indexes(task_time.split(",")) == ()


# -- the parser -----------------------------------------------------------------------------------

HEADER = NEW_HEADER + ",aiv_vec_ratio,aiv_main_mem_read_bw(GB/s)"


def parse(
    data: bytes, accelerated: bool, chunk: int | None = None
) -> tuple[list[ProfilingTask], TaskCounters]:
    parser = TaskParser("c.csv", counters=True, accelerated=accelerated)
    tasks: list[ProfilingTask] = []
    parts: list[TaskCounters] = []
    step = chunk or len(data) or 1
    for start in range(0, len(data), step):
        tasks += parser.feed(data[start : start + step])
        parts.append(parser.take_counters())
    tasks += parser.close()
    parts.append(parser.take_counters())
    return tasks, TaskCounters.concat(parts)


@pytest.mark.parametrize("accelerated", PATHS)
def test_counters_aligned_with_tasks_across_feeds(accelerated: bool) -> None:
    rows = [
        new_row("0", "0", "k", "PROFILING_ENABLE", "0") + ",0,0",  # a control row: no task, no counters
        new_row("0", "1", "k", "AI_CORE", "1.5") + ",0.423,83.153",
        new_row("0", "2", "k", "AI_CORE", "N/A") + ",0.1,0.1",  # N/A duration: skipped with its counters
        new_row("1", "3", "cpu", "AI_CPU", "2.5") + ",N/A,N/A",
        new_row("0", "4", "k", "AI_CORE", "3.5") + ',"0.5", 7 ',  # quoted, padded: Python reads them
    ]
    data = (HEADER + "\n" + "\n".join(rows) + "\n").encode()
    for chunk in (None, 7, 100):
        tasks, counters = parse(data, accelerated, chunk)
        assert [t.id for t in tasks] == [1, 3, 4] and len(counters) == 3
        assert counters.columns == (
            "aicore_time(us)",
            "aic_total_cycles",
            "aiv_vec_ratio",
            "aiv_main_mem_read_bw(GB/s)",
        )
        assert counters.column("aiv_vec_ratio") == [0.423, None, 0.5]
        assert counters.column("aiv_main_mem_read_bw(GB/s)") == [83.153, None, 7.0]
        assert counters.column("aic_total_cycles") == [78923.0] * 3


@pytest.mark.parametrize("accelerated", PATHS)
@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("abc", "counter 'aiv_vec_ratio' is not a number or N/A: 'abc'"),
        ("", "counter 'aiv_vec_ratio' is not a number or N/A: ''"),
        ("nan", "counter 'aiv_vec_ratio' is not a finite number: 'nan'"),
        ("1e400", "counter 'aiv_vec_ratio' is not a finite number: '1e400'"),
    ],
)
def test_a_bad_counter_is_a_parse_error_naming_column_and_line(
    accelerated: bool, cell: str, message: str
) -> None:
    good = new_row("0", "1", "k", "AI_CORE", "1.5") + ",0.5,1"
    bad = new_row("0", "2", "k", "AI_CORE", "1.5") + f",{cell},1"
    data = (HEADER + "\n" + good + "\n" + bad + "\n").encode()
    with pytest.raises(ParseError) as caught:
        parse(data, accelerated)
    assert message in str(caught.value) and caught.value.line == 3 and caught.value.source == "c.csv"
    # without counters the same file parses: the cells are not read
    assert len(TaskParser("c.csv", accelerated=accelerated).feed(data)) == 2


def test_without_counters_nothing_is_kept() -> None:
    parser = TaskParser("c.csv")
    parser.feed((HEADER + "\n" + new_row("0", "1", "k", "AI_CORE", "1") + ",0.5,1\n").encode())
    assert parser.counter_columns == () and parser.take_counters().columns == ()


def test_counters_with_keep_on_the_pure_path() -> None:
    parser = TaskParser("c.csv", keep=[("Stream ID",)], counters=True, accelerated=False)
    tasks = parser.feed((HEADER + "\n" + new_row("0", "1", "k", "AI_CORE", "1") + ",0.5,1\n").encode())
    assert (
        len(tasks) == 1 and parser.kept == [("2",)] and parser.take_counters().row(0)["aiv_vec_ratio"] == 0.5
    )


def _csv_counters(text: str, columns: tuple[str, ...]) -> dict[str, list[float | None]]:
    """What csv.DictReader gives for the columns, N/A as None (the independent reference)."""
    out: dict[str, list[float | None]] = {c: [] for c in columns}
    for row in csv.DictReader(io.StringIO(text)):
        if row.get("Task Type", row.get("Accelerator Core")) in ("PROFILING_ENABLE", "PROFILING_DISABLE"):
            continue
        duration = row.get("Task Duration(us)", row.get("Duration(us)", ""))
        if duration.strip() == "N/A":
            continue
        for column in columns:
            cell = row[column].strip()
            out[column].append(None if cell == "N/A" else float(cell))
    return out


@needs_real_csv
@pytest.mark.parametrize("accelerated", PATHS)
def test_real_csvs_counters_equal_csv_values(accelerated: bool) -> None:
    seen = 0
    for path in sorted(REAL_CSV.glob("*.csv")):
        if "task_time" in path.name:
            continue
        data = path.read_bytes()
        _, counters = parse(data, accelerated, chunk=4096)
        expected = _csv_counters(data.decode("utf-8"), counters.columns)
        assert counters.to_dict() == expected, path.name
        seen += bool(counters.columns)
    assert seen >= 5  # op_summary files of both chips and a torch_npu kernel_details have PMU columns


@needs_real_runs
def test_real_expected_exports_counters_equal_csv_values() -> None:
    for path in sorted(REAL_RUNS.glob("*/expected/op_summary_*.csv")):
        data = path.read_bytes()
        tasks, counters = parse(data, _parser._parse_rows is not None, chunk=1 << 16)
        assert len(counters) == len(tasks) and counters.columns
        assert counters.to_dict() == _csv_counters(data.decode("utf-8"), counters.columns), path
