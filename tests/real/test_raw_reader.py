"""The raw reader against the real exporter: for every real run, the tasks read natively from the
raw ``PROF_*`` data equal what the library reads from the real ``msprof.py``'s CSVs, task by task
(or the reader declines with a stated reason), and the ``reader=`` seam of the profilers uses it.

The oracle is the session's exports (``exported`` in conftest.py: every real run copied and
exported by the real msprof.py through ``Profiler.export()``), read back with ``store_result()``.
"""

from __future__ import annotations

import csv
import re
import shutil
import struct
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from asc_aprof import AsyncProfiler, Profiler, ProfilingTask, Toolkit, sim
from asc_aprof._model._progress import ProgressEvent
from asc_aprof._plans._raw import Declined, DeclineReason, RawReadDeclined, RawResult
from asc_aprof._runs._raw_files import read_run, read_run_async

from ..reference import REAL_RUNS, needs_real_runs, real_run_names
from .conftest import copy_run

pytestmark = needs_real_runs

RUNS = real_run_names()
#: Runs the raw reader is expected to read natively (all of them; see docs/raw_reader.md).
NATIVE = set(RUNS)


@pytest.fixture(scope="module")
def outcomes(exported: dict[str, tuple[Path, str]]) -> dict[str, RawResult | Declined]:
    return {name: read_run(path / run_id) for name, (path, run_id) in exported.items()}


def csv_tasks(exported: dict[str, tuple[Path, str]], name: str, toolkit: Toolkit) -> list[ProfilingTask]:
    result_path, run_id = exported[name]
    return list(Profiler(result_path, toolkit=toolkit, reader="msprof").store_result(run_id).tasks)


@pytest.mark.parametrize("name", RUNS)
def test_raw_tasks_equal_the_real_exporters(
    name: str,
    outcomes: dict[str, RawResult | Declined],
    exported: dict[str, tuple[Path, str]],
    real_toolkit: Toolkit,
) -> None:
    outcome = outcomes[name]
    if isinstance(outcome, Declined):
        assert isinstance(outcome.reason, DeclineReason) and outcome.message
        assert name not in NATIVE, f"{name} declined: {outcome}"
        return
    expected = csv_tasks(exported, name, real_toolkit)
    got = outcome.profiling_tasks()
    assert len(got) == len(expected)
    for index, (ours, theirs) in enumerate(zip(got, expected, strict=True)):
        assert ours == theirs, f"{name} task {index}"
    for raw in outcome.tasks:
        # The exporter rounds its own float duration to 3 decimals; ours keeps the float too.
        assert round(raw.duration_ns / 1000.0, 3) == raw.duration
        assert raw.end_cycles >= raw.start_cycles


def test_how_many_runs_are_read_natively(outcomes: dict[str, RawResult | Declined]) -> None:
    native = {name for name, outcome in outcomes.items() if isinstance(outcome, RawResult)}
    declined = {name: str(o) for name, o in outcomes.items() if isinstance(o, Declined)}
    assert native == NATIVE, declined
    assert len(native) >= 36  # 24 runs of 910B, 12 of 310B (and the CANN 8.0 910B4 run where present)


def newest_rows(output: Path, kind: str) -> list[dict[str, str]]:
    files = sorted(output.glob(f"{kind}_*.csv"))
    if not files:
        return []
    with open(files[-1], newline="", encoding="utf-8") as stream:
        return list(csv.DictReader(stream))


@pytest.mark.parametrize("name", RUNS)
def test_start_times_streams_and_block_dims_equal_the_csv_cells(
    name: str, outcomes: dict[str, RawResult | Declined], exported: dict[str, tuple[Path, str]]
) -> None:
    outcome = outcomes[name]
    assert isinstance(outcome, RawResult)
    result_path, run_id = exported[name]
    output = result_path / run_id / "mindstudio_profiler_output"
    kind = outcome.source
    rows = [
        r
        for r in newest_rows(output, kind)
        if r.get("kernel_type") not in ("PROFILING_ENABLE", "PROFILING_DISABLE")
    ]
    assert len(rows) == len(outcome.tasks)
    start_column, stream_column = (
        ("Task Start Time(us)", "Stream ID") if kind == "op_summary" else ("task_start(us)", "stream_id")
    )
    for raw, row in zip(outcome.tasks, rows, strict=True):
        assert raw.start_ns == int(Decimal(row[start_column].strip()) * 1000)
        assert raw.stream_id == int(row[stream_column])
        if kind == "op_summary":
            assert raw.csv_type == row["Task Type"]
            block = row.get("Block Num", row.get("Block Dim"))
            if outcome.level0:
                assert raw.block_num is None and block == "0"
            else:
                assert raw.block_num == int(block or "-1")
                assert raw.mix_block_num == int(row["Mix Block Num"])


def test_level1_div_reads_names_types_and_block_dims(outcomes: dict[str, RawResult | Declined]) -> None:
    outcome = outcomes["910b_l1_div"]
    assert isinstance(outcome, RawResult) and not outcome.level0 and outcome.source == "op_summary"
    assert len(outcome.tasks) == 510
    assert {(t.name, t.type, t.block_num) for t in outcome.tasks} == {("div_kernel", "AI_VECTOR_CORE", 20)}
    starts = [t.start_ns for t in outcome.tasks]
    assert starts == sorted(starts) and len(set(starts)) == 510


def test_a_run_without_op_summary_gives_task_times_tasks(outcomes: dict[str, RawResult | Declined]) -> None:
    outcome = outcomes["310b_08lpnormv2_OKKRIB"]
    assert isinstance(outcome, RawResult) and outcome.source == "task_time"
    assert [t.type for t in outcome.tasks] == ["DEVICE_RINGBUFFER_CONTROL"]


def test_pypto_mix_tasks_take_their_type_by_the_nearest_start_as_the_csv_join_does(
    outcomes: dict[str, RawResult | Declined],
) -> None:
    for name in (n for n in RUNS if "_pypto_" in n):
        outcome = outcomes[name]
        assert isinstance(outcome, RawResult) and outcome.level0
        types = [t.type for t in outcome.tasks]
        assert set(types) == {"KERNEL_MIX_AIC", "KERNEL_AICPU"}, name
        join = outcome.level0_join
        assert join is not None and join.nearest == types.count("KERNEL_MIX_AIC") and not join.unmatched


@pytest.mark.parametrize("name", RUNS)
def test_task_time_rows_equal_the_exporters_task_time_csv(
    name: str, exported: dict[str, tuple[Path, str]]
) -> None:
    # Every row the exporter's task_time CSV holds (events, AI CPU tasks, MIX contexts, control
    # tasks), which the level-0 join reads, compared cell by cell.
    result_path, run_id = exported[name]
    outcome = read_run(result_path / run_id, with_task_time=True)
    if isinstance(outcome, Declined):
        # Equal starts on two streams: the exporter orders them by set iteration.
        assert outcome.reason is DeclineReason.AMBIGUOUS and "same time" in outcome.message, outcome
        assert name == "910b_l0_mul_pypto_b16"
        return
    assert outcome.task_time is not None
    rows = newest_rows(result_path / run_id / "mindstudio_profiler_output", "task_time")
    expected = [
        (
            int(r["Device_id"]),
            r["kernel_name"],
            r["kernel_type"],
            int(r["stream_id"]),
            int(r["task_id"]),
            float(r["task_time(us)"]),
            int(Decimal(r["task_start(us)"].strip()) * 1000),
        )
        for r in rows
    ]
    got = [
        (t.device, t.name, t.type, t.stream_id, t.task_id, t.duration, t.start_ns) for t in outcome.task_time
    ]
    assert got == expected


# -- the reader= seam -----------------------------------------------------------------------------


def fresh(name: str, into: Path) -> tuple[Path, str]:
    result_path, run_id = copy_run(name, into)
    assert not (result_path / run_id / "mindstudio_profiler_output").exists()
    return result_path, run_id


@pytest.mark.parametrize("reader", ["auto", "raw"])
def test_store_result_of_an_unexported_run_reads_it_natively(
    reader: str, tmp_path: Path, exported: dict[str, tuple[Path, str]], real_toolkit: Toolkit
) -> None:
    result_path, run_id = fresh("910b_l1_div", tmp_path)
    profiler = Profiler(result_path, toolkit=real_toolkit, reader=reader)
    result = profiler.store_result(run_id)
    assert list(result.tasks) == csv_tasks(exported, "910b_l1_div", real_toolkit)
    assert profiler.store_last_result().tasks == result.tasks
    assert not (result_path / run_id / "mindstudio_profiler_output").exists()  # msprof.py never ran


def test_msprof_reader_exports_a_run_without_csvs(tmp_path: Path, real_toolkit: Toolkit) -> None:
    """The one policy (DECISIONS 23): reader='msprof' reads the run's CSVs, else exports it first."""
    result_path, run_id = fresh("310b_addcmul", tmp_path)
    profiler = Profiler(result_path, toolkit=real_toolkit, reader="msprof", export_timeout=300)
    result = profiler.store_result(run_id)
    assert (result_path / run_id / "mindstudio_profiler_output").is_dir()  # the real msprof.py ran
    assert (
        result.tasks == Profiler(result_path, toolkit=real_toolkit, reader="raw").store_result(run_id).tasks
    )
    with pytest.raises(ValueError, match="reader must be one of"):
        Profiler(result_path, toolkit=real_toolkit, reader="fast")


def add_unknown_raw_file(run_dir: Path) -> None:
    # A host file of a kind the raw reader has no model of; the real exporter ignores its name.
    (run_dir / "host" / "data" / "aging.additional.mystery_info.slice_0").write_bytes(b"\0" * 256)


def test_declined_runs_raise_with_raw_and_fall_back_with_auto(
    tmp_path: Path, exported: dict[str, tuple[Path, str]], real_toolkit: Toolkit
) -> None:
    result_path, run_id = fresh("910b_l0_add_ascendc", tmp_path)
    add_unknown_raw_file(result_path / run_id)
    declined = read_run(result_path / run_id)
    assert isinstance(declined, Declined) and declined.reason is DeclineReason.UNKNOWN_FILE
    assert "mystery_info" in declined.message
    with pytest.raises(RawReadDeclined, match="mystery_info") as info:
        Profiler(result_path, toolkit=real_toolkit, reader="raw").store_result(run_id)
    assert info.value.declined == declined
    result = Profiler(result_path, toolkit=real_toolkit, reader="auto", export_timeout=300).store_result(
        run_id
    )
    assert (result_path / run_id / "mindstudio_profiler_output").is_dir()  # exported by the real msprof.py
    assert list(result.tasks) == csv_tasks(exported, "910b_l0_add_ascendc", real_toolkit)


async def test_async_iter_tasks_and_store_result_read_natively(
    tmp_path: Path, exported: dict[str, tuple[Path, str]], real_toolkit: Toolkit
) -> None:
    result_path, run_id = fresh("910b_l0_matmul_torch", tmp_path)
    profiler = AsyncProfiler(result_path, toolkit=real_toolkit, reader="raw")
    streamed = [task async for task in profiler.iter_tasks(run_id)]
    assert streamed == csv_tasks(exported, "910b_l0_matmul_torch", real_toolkit)
    assert list((await profiler.store_result(run_id)).tasks) == streamed
    outcome = await read_run_async(result_path / run_id)
    assert isinstance(outcome, RawResult) and outcome.profiling_tasks() == streamed
    assert not (result_path / run_id / "mindstudio_profiler_output").exists()


# -- profile(): the protocol's ReadRaw step -------------------------------------------------------


def swap_in_real_run(name: str, result_path: Path, events: list[str]) -> Callable[[ProgressEvent], None]:
    """A progress callback that, once the (simulated) collection stopped, replaces the run's raw
    data with real run *name*'s: the protocol then reads what a real device wrote."""

    def on_event(event: ProgressEvent) -> None:
        events.append(event.kind)
        if event.kind != "collection_stopped" or event.run_id is None:
            return
        run_dir = result_path / event.run_id
        source = next((REAL_RUNS / name).glob("PROF_*"))
        for part in ("host", "device_0"):
            shutil.rmtree(run_dir / part, ignore_errors=True)
            shutil.copytree(source / part, run_dir / part)

    return on_event


def test_profile_reads_the_stopped_run_natively(
    toolkit: Toolkit, tmp_path: Path, exported: dict[str, tuple[Path, str]], real_toolkit: Toolkit
) -> None:
    result_path = tmp_path / "runs"
    events: list[str] = []
    progress = swap_in_real_run("910b_l1_div", result_path, events)
    profiler = Profiler(result_path, toolkit=toolkit, progress=progress)
    with profiler.profile(device_id=0) as run:
        pass
    assert run.result is not None
    assert list(run.result.tasks) == csv_tasks(exported, "910b_l1_div", real_toolkit)
    assert "export_started" not in events and events[-1] == "parse_finished"
    assert run.run_dir is not None and not (run.run_dir / "mindstudio_profiler_output").exists()


def add_unknown_file_on_stop(result_path: Path, events: list[str]) -> Callable[[ProgressEvent], None]:
    """A progress callback that adds a raw file the reader has no model of to the stopped run."""

    def on_event(event: ProgressEvent) -> None:
        events.append(event.kind)
        if event.kind == "collection_stopped" and event.run_id is not None:
            add_unknown_raw_file(result_path / event.run_id)

    return on_event


def test_profile_reads_simulated_runs_natively(toolkit: Toolkit, tmp_path: Path) -> None:
    events: list[str] = []
    profiler = Profiler(tmp_path / "runs", toolkit=toolkit, progress=lambda e: events.append(e.kind))
    with profiler.profile(device_id=0) as run:
        assert sim.launch("k", count=3) == 3  # the simulator writes CANN's raw formats
    assert run.result is not None and [t.name for t in run.result.tasks] == ["k"] * 3
    assert "export_started" not in events


def test_profile_falls_back_to_msprof_where_the_raw_reader_declines(
    toolkit: Toolkit, real_toolkit: Toolkit, tmp_path: Path
) -> None:
    # The simulated msprof.py is built on the raw reader and refuses what it declines; the real
    # one ignores the unknown file and exports the simulated run.
    events: list[str] = []
    progress = add_unknown_file_on_stop(tmp_path / "runs", events)
    profiler = Profiler(tmp_path / "runs", toolkit=real_toolkit, progress=progress, export_timeout=300)
    with profiler.profile(device_id=0) as run:
        assert sim.launch("k", count=2) == 2
    assert run.result is not None and "export_started" in events
    assert [t.name for t in run.result.tasks] == ["k"] * 2  # the real msprof.py's CSVs
    with (
        pytest.raises(RawReadDeclined, match="raw reader declined"),
        Profiler(
            tmp_path / "runs2",
            toolkit=toolkit,
            reader="raw",
            progress=add_unknown_file_on_stop(tmp_path / "runs2", []),
        ).profile(device_id=0),
    ):
        pass


async def test_async_profile_reads_the_stopped_run_natively(
    toolkit: Toolkit, tmp_path: Path, exported: dict[str, tuple[Path, str]], real_toolkit: Toolkit
) -> None:
    result_path = tmp_path / "runs"
    events: list[str] = []
    progress = swap_in_real_run("310b_addcmul", result_path, events)
    profiler = AsyncProfiler(result_path, toolkit=toolkit, progress=progress)
    async with profiler.profile(device_id=0) as run:
        pass
    assert run.result is not None
    assert list(run.result.tasks) == csv_tasks(exported, "310b_addcmul", real_toolkit)
    assert "export_started" not in events


def test_msprof_reader_never_reads_raw_in_profile(
    toolkit: Toolkit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asc_aprof._runs import _drive

    calls: list[Path] = []

    def spy(run_dir: Path, **_: object) -> Declined:
        calls.append(run_dir)
        return Declined(DeclineReason.NOT_A_RUN, "spy")

    monkeypatch.setattr(_drive, "read_run", spy)
    with Profiler(tmp_path / "a", toolkit=toolkit, reader="msprof").profile(device_id=0) as run:
        pass
    assert run.result is not None and calls == []
    with Profiler(tmp_path / "b", toolkit=toolkit).profile(device_id=0) as run:
        pass
    assert run.result is not None and len(calls) == 1


# -- several devices: runs derived from real ones, exported by the real msprof.py ----------------


def add_devices(run_dir: Path, devices: dict[int, int]) -> None:
    """Turn a one-device real run into a several-device one: ``device_N`` is a copy of device_0
    keeping only its first *records* stars_soc records (so the devices differ), and every host
    task_track record is repeated for each new device (its device id field changed)."""
    first = run_dir / "device_0"
    for device, records in devices.items():
        folder = run_dir / f"device_{device}"
        shutil.copytree(first, folder)
        for path in sorted(folder.rglob("*"), reverse=True):
            name = re.sub(r"\.0(\.|$)", rf".{device}\1", path.name).replace(
                ".data.0.slice", f".data.{device}.slice"
            )
            if name != path.name:
                path.rename(path.with_name(name))
        for conf in (folder / f"info.json.{device}", folder / "sample.json"):
            text = conf.read_text(encoding="utf-8").replace('"devices":"0"', f'"devices":"{device}"')
            conf.write_text(text, encoding="utf-8")
        start = folder / f"host_start.log.{device}"
        start.write_text(
            start.read_text(encoding="utf-8").replace("[Device0]", f"[Device{device}]"), encoding="utf-8"
        )
        soc = folder / "data" / f"stars_soc.data.{device}.slice_0"
        soc.write_bytes(soc.read_bytes()[: records * 64])
    for track in (run_dir / "host" / "data").glob("*.compact.task_track.slice_*"):
        if track.name.endswith((".done", ".complete")):
            continue
        data = track.read_bytes()
        out = bytearray(data)
        for device in devices:
            for offset in range(0, len(data) - 63, 64):
                record = bytearray(data[offset : offset + 64])
                (word,) = struct.unpack_from("<H", record, 24)
                struct.pack_into("<H", record, 24, (word & 0xF000) | device)
                out += record
        track.write_bytes(bytes(out))


@pytest.mark.parametrize("name", ["910b_l1_div", "910b_l0_add_ascendc"])
def test_several_devices_merge_as_the_real_exporter_merges_them(
    name: str, tmp_path: Path, real_toolkit: Toolkit
) -> None:
    result_path, run_id = fresh(name, tmp_path)
    run_dir = result_path / run_id
    add_devices(run_dir, {10: 900, 2: 400})
    outcome = read_run(run_dir)
    assert isinstance(outcome, RawResult), outcome
    Profiler(result_path, toolkit=real_toolkit, export_timeout=300).export(run_id, timeline=False)
    expected = list(Profiler(result_path, toolkit=real_toolkit, reader="msprof").store_result(run_id).tasks)
    assert outcome.profiling_tasks() == expected
    # Devices in folder-name order, as the exporter merges its per-device CSVs.
    order = [t.device for t in expected]
    assert sorted(set(order), key=order.index) == [0, 10, 2]
