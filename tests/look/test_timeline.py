"""Timed reads: exact start times, streams and counters, opt-in, equal to the default read's tasks."""

from __future__ import annotations

import csv
import decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asc_aprof import (
    AsyncProfiler,
    Profiler,
    ProfileType,
    Timeline,
    Toolkit,
    UsageError,
    read_timeline,
    sim,
    sweep_timelines,
)
from asc_aprof._cann._layout import CsvFile, find_summary_csvs
from asc_aprof._plans._parser import ACCELERATED
from asc_aprof._runs._csv import RunReader, cell_ns, iter_file_tasks
from asc_aprof._runs._timeline import counter_columns

HEADER = (
    "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),"
    "Task Duration(us),Task Wait Time(us),Block Num,Input Shapes,aic_mac_ratio,aiv_vec_ratio\n"
)


def csv_starts(path: Path) -> list[tuple[str, int, int]]:
    """(name, stream, start ns) of every task row, read with csv and Decimal alone."""
    out = []
    with open(path, newline="", encoding="utf-8") as stream:
        for row in csv.DictReader(stream):
            if "Op Name" in row:
                column = "Task Start Time(us)" if "Task Start Time(us)" in row else "Task Start Time"
                name, s, start, unit = row["Op Name"], row["Stream ID"], row[column], 1000
            elif "task_start(ns)" in row:
                name, s, start, unit = row["kernel_name"], row["stream_id"], row["task_start(ns)"], 1
            else:
                name, s, start, unit = row["kernel_name"], row["stream_id"], row["task_start(us)"], 1000
            if row.get("Task Type", row.get("kernel_type")) in ("PROFILING_ENABLE", "PROFILING_DISABLE"):
                continue
            out.append((name, int(s), int(decimal.Decimal(start.strip()) * unit)))
    return out


def profile_some(toolkit: Toolkit, result_dir: Path, **kwargs: object) -> Path:
    profiler = Profiler(result_dir, toolkit=toolkit, reader="msprof")  # timelines read CSVs
    with profiler.profile(cleanup=False, **kwargs) as run:  # type: ignore[arg-type]
        sim.launch("add_kernel", task_type="AI_VECTOR_CORE", duration_us=8.125, count=4)
        sim.launch("mm_kernel", task_type="MIX_AIC", duration_us=40.0, count=3)
    assert run.run_dir is not None
    return run.run_dir


def test_timed_read_keeps_the_default_tasks_and_exact_starts(toolkit: Toolkit, result_dir: Path) -> None:
    run = profile_some(toolkit, result_dir)
    timeline = read_timeline(run)
    files = find_summary_csvs(run)
    default = [t for batch in iter_file_tasks(files) for t in batch]
    assert [t.task for t in timeline.tasks] == default
    (op_summary,) = [f.path for f in files if f.kind == "op_summary"]
    expected = csv_starts(op_summary)
    assert [(t.task.name, t.stream, t.start_ns) for t in timeline.tasks] == expected
    assert all(len(str(t.start_ns)) == 19 for t in timeline.tasks)  # no digit lost to a float
    assert [t.duration_ns for t in timeline.tasks] == [8125] * 4 + [40000] * 3
    ratios = {t.counters["aic_mac_ratio"] for t in timeline.tasks if t.counters}
    assert ratios and all(r is not None and 0 <= r <= 1 for r in ratios)
    assert timeline.run_id == run.name and timeline.cases == {}


def test_counters_can_be_left_out(toolkit: Toolkit, result_dir: Path) -> None:
    run = profile_some(toolkit, result_dir)
    assert all(t.counters is None for t in read_timeline(run, counters=False).tasks)


def test_old_layout_reads_ns_starts(simctl: object, result_dir: Path) -> None:
    run = profile_some(sim.toolkit(layout="old"), result_dir)
    timeline = read_timeline(run)
    files = find_summary_csvs(run)
    expected = [row for f in files for row in csv_starts(f.path)]
    assert sorted((t.task.name, t.stream, t.start_ns) for t in timeline.tasks) == sorted(expected)
    assert all(t.start_ns is not None for t in timeline.tasks)


def test_level0_types_are_joined_in_the_timed_read(toolkit: Toolkit, result_dir: Path) -> None:
    run = profile_some(
        toolkit, result_dir, profile_types=ProfileType.TASK_TIME_L0 | ProfileType.AICORE_METRICS
    )
    timeline = read_timeline(run)
    default = [t for batch in iter_file_tasks(find_summary_csvs(run)) for t in batch]
    assert [t.task for t in timeline.tasks] == default
    assert {t.task.type for t in timeline.tasks} == {"KERNEL_AIVEC", "KERNEL_MIX_AIC"}
    (op_summary,) = [f.path for f in find_summary_csvs(run) if f.kind == "op_summary"]
    assert [(t.task.name, t.stream, t.start_ns) for t in timeline.tasks] == csv_starts(op_summary)


def test_default_read_stays_on_the_accelerated_loop(tmp_path: Path) -> None:
    path = tmp_path / "op_summary_1.csv"
    path.write_text(HEADER + "0,1,1,2,k,k,d,AI_CORE,1784171285754947.983\t,1.5,0,1,N/A,0.5,0.25\n")
    default = RunReader([CsvFile(path, "op_summary", None, "1", 0)])
    default.next_file()
    assert default._parser is not None and default._parser.accelerated == ACCELERATED
    timed = RunReader([CsvFile(path, "op_summary", None, "1", 0)], timed=True)
    timed.next_file()
    timed.feed(path.read_bytes())
    assert timed._parser is not None and not timed._parser.accelerated


ROW = '0,1,{id},7,k{mod},k,d,AI_CORE,{start}\t,1.5,0,1,"""8,16""",{ratio},N/A\n'


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 30),
    cuts=st.lists(st.integers(1, 64), min_size=1, max_size=40),
    blank_lines=st.integers(0, 2),
    crlf=st.booleans(),
)
def test_timed_read_is_independent_of_chunking(
    rows: int, cuts: list[int], blank_lines: int, crlf: bool
) -> None:
    body = (
        "\n" * blank_lines
        + HEADER
        + "".join(
            ROW.format(id=i, mod=i % 3, start=f"17841712857{i:05d}.{(i * 37) % 1000:03d}", ratio=i / 100)
            for i in range(rows)
        )
    )
    data = body.replace("\n", "\r\n").encode() if crlf else body.encode()

    def read(pieces: list[bytes]) -> list[tuple[object, ...]]:
        reader = RunReader(
            [CsvFile(Path("<mem>"), "op_summary", None, "1", 0)], timed=True, extra=counter_columns
        )
        reader.next_file()
        out: list[tuple[object, ...]] = []
        for piece in [*pieces, b""]:
            tasks = reader.feed(piece)
            out += [(t, *cells) for t, cells in zip(tasks, reader.kept, strict=True)]
        return out

    whole = read([data])
    pieces, pos = [], 0
    for cut in cuts:
        pieces.append(data[pos : pos + cut])
        pos += cut
    pieces.append(data[pos:])
    assert read([p for p in pieces if p]) == whole
    assert len(whole) == rows
    for i, (_task, stream, start, mac, vec) in enumerate(whole):
        assert stream == "7" and mac == repr(i / 100) and vec == "N/A"
        assert cell_ns(str(start), 1000) == int(
            decimal.Decimal(f"17841712857{i:05d}.{(i * 37) % 1000:03d}") * 1000
        )


def test_cells_to_ns() -> None:
    assert cell_ns("1784171285754947.983\t", 1000) == 1784171285754947983
    assert cell_ns('"1784171285754947983"', 1) == 1784171285754947983
    assert cell_ns("N/A", 1000) is None and cell_ns(None, 1000) is None and cell_ns("1.5", None) is None
    assert cell_ns("nan", 1000) is None and cell_ns("inf", 1000) is None


def test_counter_columns_are_the_pmu_columns() -> None:
    header = HEADER.strip().split(",")
    assert counter_columns(header) == ("aic_mac_ratio", "aiv_vec_ratio")
    task_time = (
        "Device_id,kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(us),task_stop(us)"
    )
    assert counter_columns(task_time.split(",")) == ()


def test_read_timeline_refuses_what_is_not_an_exported_run(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such run directory"):
        read_timeline(tmp_path / "missing")
    (tmp_path / "PROF_000001_20260101000000000_00000001AAAAAAAA").mkdir()
    with pytest.raises(UsageError, match="export"):
        read_timeline(tmp_path / "PROF_000001_20260101000000000_00000001AAAAAAAA")


def test_timeline_is_frozen_with_read_only_cases() -> None:
    timeline = Timeline("PROF_1", (), {0: "a"})
    with pytest.raises(AttributeError):
        timeline.run_id = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        timeline.cases[1] = "b"  # type: ignore[index]
    assert timeline.case(0) == "a" and timeline.case(1) is None


async def test_sweep_timelines_label_each_device_with_its_case(toolkit: Toolkit, result_dir: Path) -> None:
    def run(case: int, device: int) -> None:
        sim.launch(f"k{case}", device=device, duration_us=5.0 + case, count=2)

    profiler = AsyncProfiler(result_dir, toolkit=toolkit, reader="msprof")  # timelines read CSVs
    items = []
    async with profiler.sweep(range(6), run, devices=[0, 1, 2]) as stream:
        async for item in stream:
            items.append(item)
    timelines = sweep_timelines(items, result_dir)
    labelled = {
        (t.task.device, t.task.name, timeline.case(t.task.device))
        for timeline in timelines
        for t in timeline.tasks
    }
    assert labelled == {(item.device, f"k{item.case}", str(item.case)) for item in items}
    with pytest.raises(UsageError, match=r"case\(s\) .* is not in"):
        sweep_timelines(items, result_dir / "elsewhere")


@settings(max_examples=300, deadline=None)
@given(
    whole=st.integers(0, 10**17),
    frac=st.text("0123456789", max_size=5),
    unit=st.sampled_from([1, 1000]),
    pad=st.sampled_from(["", "\t", " ", '"']),
)
def test_fast_cell_conversion_equals_decimal(whole: int, frac: str, unit: int, pad: str) -> None:
    text = f"{whole}.{frac}" if frac else str(whole)
    cell = f'"{text}"' if pad == '"' else text + pad
    expected = int((decimal.Decimal(text) * unit).to_integral_value())
    assert cell_ns(cell, unit) == expected
