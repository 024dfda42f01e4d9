"""Trace files: a simulated 4-device sweep and synthetic timelines, checked against the format's rules."""

from __future__ import annotations

import decimal
import gzip
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asc_aprof import (
    AsyncProfiler,
    ProfilingTask,
    SweepItem,
    TimedTask,
    Timeline,
    Toolkit,
    UsageError,
    sim,
    sweep_timelines,
    write_trace,
)
from asc_aprof._outputs._trace import CLOCK_TRACK
from asc_aprof.cli import main as cli_main

from . import trace_format

KERNELS = (("matmul_custom", "MIX_AIC", 42.0), ("add_custom", "AI_VECTOR_CORE", 8.5))


def run_case(case: int, device: int) -> None:
    rng = random.Random(case * 16 + device)
    for name, ttype, base in KERNELS:
        for _ in range(6):
            sim.launch(
                name,
                device=device,
                task_type=ttype,
                duration_us=round(base * (1 + 0.1 * case) * rng.uniform(0.97, 1.06), 3),
            )


async def four_device_sweep(toolkit: Toolkit, root: Path, cases: int = 8) -> list[SweepItem[int]]:
    profiler = AsyncProfiler(root, toolkit=toolkit, reader="msprof")  # traces read exported CSVs
    items: list[SweepItem[int]] = []
    async with profiler.sweep(range(cases), run_case, devices=[0, 1, 2, 3]) as stream:
        async for item in stream:
            assert item.error is None
            items.append(item)
    return items


def exact_start(event: dict[str, Any], origin: int) -> int:
    """The event's start in ns, from its ts text (Decimal), checked to carry at most 3 decimals."""
    ts = event["ts"]
    assert isinstance(ts, decimal.Decimal) and -ts.as_tuple().exponent <= 3  # type: ignore[operator]
    return origin + int(ts * 1000)


async def test_trace_of_a_simulated_four_device_sweep(toolkit: Toolkit, tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    items = await four_device_sweep(toolkit, root)
    timelines = sweep_timelines(items, root)
    out = write_trace(timelines, tmp_path / "sweep.json.gz")
    assert out.read_bytes()[:2] == b"\x1f\x8b"
    data = trace_format.load(out)
    assert trace_format.check(data) == []
    assert trace_format.names(data, "process_name") == {(d + 1, 0): f"Device {d}" for d in range(4)}
    threads = trace_format.names(data, "thread_name")
    assert set(threads.values()) == {"Runs", "Stream 2"}  # the simulator runs one stream per device
    origin = int(data["otherData"]["origin_unix_ns"])
    events = trace_format.complete_events(data)
    # every task of every item, once, on its device's process, exact to the ns
    expected = Counter(
        (item.device + 1, t.name, t.type, t.id, round(t.duration * 1000))
        for item in items
        for t in (item.result.tasks if item.result else ())
    )
    seen = Counter(
        (e["pid"], e["name"], e["cat"], e["args"]["task_id"], e["args"]["duration_ns"]) for e in events
    )
    assert seen == expected
    by_start = {e["args"]["start_unix_ns"]: e for e in events}
    for timeline in timelines:
        for timed in timeline.tasks:
            event = by_start[str(timed.start_ns)]
            assert exact_start(event, origin) == timed.start_ns
            assert event["dur"] * 1000 == timed.duration_ns
            assert event["args"]["case"] == timeline.case(timed.task.device)
            assert 0 <= event["args"]["counters"]["aic_mac_ratio"] <= 1
    assert min(e["ts"] for e in events) == 0  # relative to the first task
    runs = trace_format.complete_events(data, "run")
    assert sorted((e["pid"], e["name"]) for e in runs) == sorted((i.device + 1, str(i.case)) for i in items)
    for run in runs:  # each run lane slice spans exactly its tasks
        mine = [e for e in events if e["pid"] == run["pid"] and e["args"]["case"] == run["name"]]
        assert run["ts"] == min(e["ts"] for e in mine)
        assert run["ts"] + run["dur"] == max(e["ts"] + e["dur"] for e in mine)
        assert run["args"]["tasks"] == len(mine) == 12


def timeline_of(spans: list[tuple[int, int]], *, stream: int | None = 5, device: int | None = 0) -> Timeline:
    base = 1_784_171_285_754_947_983
    tasks = tuple(
        TimedTask(ProfilingTask(i, f"k{i % 3}", "AI_CORE", dur / 1000, device), base + start, stream)
        for i, (start, dur) in enumerate(spans)
    )
    return Timeline("PROF_000001_20260101000000000_00000001AAAAAAAA", tasks)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 3_000)), min_size=1, max_size=40))
def test_overlapping_tasks_go_to_overlap_threads(
    tmp_path_factory: pytest.TempPathFactory, spans: list[tuple[int, int]]
) -> None:
    out = write_trace([timeline_of(spans)], tmp_path_factory.mktemp("t") / "t.json")
    data = trace_format.load(out)
    assert trace_format.check(data) == []
    events = trace_format.complete_events(data)
    origin = int(data["otherData"]["origin_unix_ns"])
    assert sorted((exact_start(e, origin), int(e["dur"] * 1000)) for e in events) == sorted(
        (1_784_171_285_754_947_983 + s, d) for s, d in spans
    )
    threads = trace_format.names(data, "thread_name")
    used = {threads[(e["pid"], e["tid"])] for e in events}
    assert "Stream 5" in used and all(t == "Stream 5" or t.startswith("Stream 5 (overlap ") for t in used)


def test_input_order_does_not_make_overlap_threads(tmp_path: Path) -> None:
    early = timeline_of([(0, 100), (200, 100)])
    late = Timeline("PROF_2", tuple(t._replace(start_ns=(t.start_ns or 0) + 1000) for t in early.tasks))
    data = trace_format.load(write_trace([late, early], tmp_path / "t.json"))
    assert trace_format.check(data) == []
    assert set(trace_format.names(data, "thread_name").values()) == {"Runs", "Stream 5"}


def test_far_apart_starts_stay_exact_to_the_ns(tmp_path: Path) -> None:
    two_years = 2 * 365 * 86_400 * 10**9 + 7
    first = timeline_of([(0, 1)])
    second = Timeline(
        "PROF_2", tuple(t._replace(start_ns=(t.start_ns or 0) + two_years) for t in first.tasks)
    )
    data = trace_format.load(write_trace([first, second], tmp_path / "t.json"))
    origin = int(data["otherData"]["origin_unix_ns"])
    assert sorted(exact_start(e, origin) - origin for e in trace_format.complete_events(data)) == [
        0,
        two_years,
    ]
    assert '"ts": 63072000000000.007' in (tmp_path / "t.json").read_text()


def test_host_rows_missing_streams_and_starts(tmp_path: Path) -> None:
    host = timeline_of([(0, 10)], device=None, stream=None)
    no_start = Timeline("PROF_3", (TimedTask(ProfilingTask(1, "k", "AI_CORE", 1.0, 0), None, 1),))
    data = trace_format.load(write_trace([host, no_start], tmp_path / "t.json"))
    assert trace_format.check(data) == []
    assert trace_format.names(data, "process_name") == {(0, 0): "Host"}
    assert "Stream ?" in trace_format.names(data, "thread_name").values()
    assert data["otherData"]["tasks_without_start"] == 1
    with pytest.raises(UsageError, match="no task with a start time in PROF_3"):
        write_trace([no_start], tmp_path / "none.json")
    assert not (tmp_path / "none.json").exists()


def test_gzip_holds_the_same_trace_and_is_reproducible(tmp_path: Path) -> None:
    timeline = timeline_of([(0, 10), (20, 5)])
    plain = write_trace([timeline], tmp_path / "t.json").read_bytes()
    zipped = write_trace([timeline], tmp_path / "t.json.gz").read_bytes()
    assert gzip.decompress(zipped) == plain
    assert write_trace([timeline], tmp_path / "t.json.gz").read_bytes() == zipped  # no time, no temp name
    with gzip.open(tmp_path / "t.json.gz") as stream:
        assert stream.read() == plain
    assert json.loads(plain)["displayTimeUnit"] == "ns"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


async def test_cli_trace_labels_and_exports(
    toolkit: Toolkit, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "sweep"
    await four_device_sweep(toolkit, root, cases=4)
    out = tmp_path / "cli.json"
    assert cli_main(["trace", f"tile64={root}", "-o", str(out)]) == 0
    assert "tasks on 4 device(s)" in capsys.readouterr().out
    data = trace_format.load(out)
    assert trace_format.check(data) == []
    assert {e["name"] for e in trace_format.complete_events(data, "run")} == {"tile64"}
    # a run not exported yet is read natively (no toolkit needed, whatever --simulate says)
    raw = tmp_path / "raw"
    profiler = AsyncProfiler(raw, toolkit=toolkit)
    async with profiler.profile(cleanup=False) as run:
        sim.launch("late_kernel", count=2)
    assert run.run_dir is not None
    for exported in run.run_dir.rglob("*.csv"):
        exported.unlink()
    assert cli_main(["trace", str(run.run_dir), "-o", str(out), "--no-counters", "--simulate"]) == 0
    events = trace_format.complete_events(trace_format.load(out))
    assert [e["name"] for e in events] == ["late_kernel"] * 2 and "counters" not in events[0]["args"]


def test_cli_trace_refuses_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "r.json"
    report.write_text("{}")
    assert cli_main(["trace", str(report), "-o", str(tmp_path / "t.json")]) == 1
    assert "has no start times" in capsys.readouterr().err


def test_the_checker_catches_what_the_viewers_refuse() -> None:
    def meta(pid: int, tid: int) -> list[dict[str, Any]]:
        return [
            {"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": "p"}},
            {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": "t"}},
        ]

    def x(ts: str, dur: str, tid: int = 1) -> dict[str, Any]:
        return {
            "ph": "X",
            "pid": 1,
            "tid": tid,
            "ts": decimal.Decimal(ts),
            "dur": decimal.Decimal(dur),
            "name": "k",
            "cat": "c",
        }

    good = {"traceEvents": [*meta(1, 1), x("0", "10"), x("2", "3"), x("10", "1")]}
    assert trace_format.check(good) == []
    crossing = {"traceEvents": [*meta(1, 1), x("0", "10"), x("5", "10")]}
    assert any("without nesting" in p for p in trace_format.check(crossing))
    unnamed = {"traceEvents": [*meta(1, 1), x("0", "1", tid=2)]}
    assert trace_format.check(unnamed) == ["thread 1/2 has events but no thread_name"]
    negative = {"traceEvents": [*meta(1, 1), x("-1", "1")]}
    assert trace_format.check(negative) == ["event 2: negative ts / dur"]
    assert trace_format.check({"traceEvents": [{"ph": "B", "pid": 1, "tid": 1, "name": "k"}]}) != []
    assert trace_format.check({"traceEvents": {}}) == ["traceEvents is not a list"]


def test_the_ai_core_clock_is_a_counter_track_of_its_changes(tmp_path: Path) -> None:
    """Each task's clock in its args; per device a point at each task start where it changes
    (also when every clock is the same); none for tasks without a clock."""
    base = 1_784_171_285_754_947_983
    clocks = [1650.0, 1650.0, 800.0, 800.0, 1650.0]
    tasks = [
        TimedTask(ProfilingTask(i, "k", "AI_CORE", 1.0, 0), base + 10_000 * i, 1, None, mhz)
        for i, mhz in enumerate(clocks)
    ]
    tasks += [TimedTask(ProfilingTask(9, "k", "AI_CORE", 1.0, 1), base, 1, None, 1650.0)]
    tasks += [TimedTask(ProfilingTask(10, "k", "AI_CORE", 1.0, 2), base, 1)]  # no clock known
    data = trace_format.load(write_trace([Timeline("PROF_1", tuple(tasks))], tmp_path / "t.json"))
    assert trace_format.check(data) == []
    track = [
        (e["pid"], e["ts"], e["args"]["value"]) for e in data["traceEvents"] if e.get("name") == CLOCK_TRACK
    ]
    assert track == [(1, 0.0, 1650.0), (1, 20.0, 800.0), (1, 40.0, 1650.0), (2, 0.0, 1650.0)]
    events = [e for e in trace_format.complete_events(data) if e["cat"] != "run"]
    args = {(e["pid"], e["args"]["task_id"]): e["args"].get("aic_mhz") for e in events}
    assert args[(1, 2)] == 800.0 and args[(2, 9)] == 1650.0 and args[(3, 10)] is None
    # a timeline read from CSVs (no clock) equals one read natively: the clock is not compared
    assert tasks[0] == TimedTask(tasks[0].task, tasks[0].start_ns, 1)
