"""The raw reader's PMU counters against the real exporter: for every real run, the counters read
natively from ``ffts_profile`` equal what ``store_result(counters=True)`` reads from the real
``msprof.py``'s op_summary, cell by cell (``N/A`` = None), or the reader declines with a reason;
and every entry point that takes ``counters=True`` gets them without running ``msprof.py``.

The oracle is the session's exports (``exported`` in conftest.py), read back by the CSV path.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from asc_aprof import AsyncProfiler, Profiler, TaskCounters, Toolkit, aread_columns, read_columns
from asc_aprof._plans._raw import Declined, DeclineReason, RawReadDeclined, RawResult
from asc_aprof._plans._raw._pmu import GROUP_EVENTS
from asc_aprof._runs._raw_files import read_export_rows, read_run

from ..reference import needs_real_runs, real_run_names
from .test_raw_reader import fresh, swap_in_real_run

pytestmark = needs_real_runs

RUNS = real_run_names()
#: Runs whose counters the raw reader reads natively: all of them (docs/raw_reader.md).
NATIVE = set(RUNS)


@pytest.fixture(scope="module")
def outcomes(exported: dict[str, tuple[Path, str]]) -> dict[str, RawResult | Declined]:
    return {name: read_run(path / run_id, counters=True) for name, (path, run_id) in exported.items()}


def csv_counters(exported: dict[str, tuple[Path, str]], name: str, toolkit: Toolkit) -> TaskCounters:
    result_path, run_id = exported[name]
    profiler = Profiler(result_path, toolkit=toolkit, reader="msprof")  # the exported CSVs
    counters = profiler.store_result(run_id, counters=True).counters
    assert counters is not None
    return counters


@pytest.mark.parametrize("name", RUNS)
def test_raw_counters_equal_the_real_exporters(
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
    expected = csv_counters(exported, name, real_toolkit)
    got = outcome.counters
    assert got is not None and got.columns == expected.columns and len(got) == len(expected)
    for column in expected.columns:
        for index, (ours, theirs) in enumerate(zip(got.column(column), expected.column(column), strict=True)):
            assert ours == theirs, f"{name} task {index} {column}: {ours} != {theirs}"
    assert got == expected


def test_how_many_runs_have_native_counters(outcomes: dict[str, RawResult | Declined]) -> None:
    native = {name for name, outcome in outcomes.items() if isinstance(outcome, RawResult)}
    declined = {name: str(o) for name, o in outcomes.items() if isinstance(o, Declined)}
    assert native == NATIVE, declined
    assert len(native) == 36  # every real run: 24 of 910B (levels 0 and 1), 12 of 310B
    with_columns = {n for n in native if (c := outcomes[n].counters) is not None and c.columns}  # type: ignore[union-attr]
    assert len(with_columns) == 35  # 310b_08lpnormv2_OKKRIB has task_time only: no PMU column


def op_summary_cells(exported: dict[str, tuple[Path, str]], name: str) -> tuple[list[str], list[list[str]]]:
    result_path, run_id = exported[name]
    files = sorted((result_path / run_id / "mindstudio_profiler_output").glob("op_summary_*.csv"))
    if not files:
        return [], []
    with open(files[-1], newline="", encoding="utf-8") as stream:
        rows = list(csv.reader(stream))
    start = rows[0].index("Context ID") + 1
    return rows[0][start:], [row[start:] for row in rows[1:]]


@pytest.mark.parametrize("name", RUNS)
def test_export_rows_print_the_pmu_cells_as_the_exporter(
    name: str, exported: dict[str, tuple[Path, str]]
) -> None:
    header, cells = op_summary_cells(exported, name)
    result_path, run_id = exported[name]
    rows = read_export_rows(result_path / run_id, pmu=True)
    if isinstance(rows, Declined):
        # The CSV writer's own limits (it writes task_time too: equal starts there are declined).
        assert rows == read_export_rows(result_path / run_id) and "task_time" in rows.message, rows
        return
    got_header = {d.pmu_header for d in rows.devices if d.op_summary}
    got_cells = [list(c) for d in rows.devices for c in d.pmu_cells]
    if not header:
        assert got_header <= {()} and not got_cells
        return
    assert got_header == {tuple(header)}
    assert got_cells == cells  # strings, exactly as printed (0 / 0.0 / N/A / 12463669)


def test_level1_div_time_columns_use_the_block_number(outcomes: dict[str, RawResult | Declined]) -> None:
    outcome = outcomes["910b_l1_div"]
    assert isinstance(outcome, RawResult) and outcome.counters is not None
    for index, task in enumerate(outcome.tasks):
        row = outcome.counters.row(index)
        cycles, time = row["aiv_total_cycles"], row["aiv_time(us)"]
        assert cycles is not None and time is not None and task.block_num == 20
        # 1650 MHz AI Core clock, 40 vector cores: 20 blocks take one wave
        assert time == round(cycles * 1e6 / 1650e6 / 20, 2)
        assert row["aicore_time(us)"] == 0.0 and row["aic_total_cycles"] == 0.0  # the unused side


def test_level0_time_columns_are_zero_and_pypto_mix_rows_na(
    outcomes: dict[str, RawResult | Declined],
) -> None:
    add = outcomes["910b_l0_add_ascendc"]
    assert isinstance(add, RawResult) and add.counters is not None
    assert set(add.counters.column("aiv_time(us)")) == {0.0}  # no block number at level 0
    assert all(v is not None and v > 0 for v in add.counters.column("aiv_total_cycles"))
    pypto = outcomes["910b_l0_add_pypto_b16"]
    assert isinstance(pypto, RawResult) and pypto.counters is not None
    # The whole-task rows of MIX kernels meet no PMU record (those carry context ids): N/A.
    assert set(pypto.counters.column("aiv_total_cycles")) == {None}


def test_310b_counters_are_unprefixed_with_memory_bound(outcomes: dict[str, RawResult | Declined]) -> None:
    outcome = outcomes["310b_addcmul"]
    assert isinstance(outcome, RawResult) and outcome.counters is not None
    row = outcome.counters.row(0)
    assert list(row)[:2] == ["aicore_time(us)", "total_cycles"] and list(row)[-1] == "memory_bound"
    mte2, vec, mac = row["mte2_exe_ratio"], row["vec_exe_ratio"], row["mac_exe_ratio"]
    assert mte2 is not None and vec is not None and mac is not None
    assert row["memory_bound"] == round(mte2 / max(vec, mac), 3)


# -- entry points ---------------------------------------------------------------------------------


def test_store_result_with_counters_reads_natively(
    tmp_path: Path, exported: dict[str, tuple[Path, str]], real_toolkit: Toolkit
) -> None:
    result_path, run_id = fresh("910b_l1_div", tmp_path)
    profiler = Profiler(result_path, toolkit=real_toolkit, reader="raw")
    result = profiler.store_result(run_id, counters=True)
    assert result.counters == csv_counters(exported, "910b_l1_div", real_toolkit)
    columns = read_columns(result_path / run_id, counters=True)
    assert columns.counters == result.counters
    assert not (result_path / run_id / "mindstudio_profiler_output").exists()  # msprof.py never ran


async def test_async_entry_points_with_counters_read_natively(
    tmp_path: Path, exported: dict[str, tuple[Path, str]], real_toolkit: Toolkit
) -> None:
    result_path, run_id = fresh("910b_l0_matmul_torch", tmp_path)
    expected = csv_counters(exported, "910b_l0_matmul_torch", real_toolkit)
    profiler = AsyncProfiler(result_path, toolkit=real_toolkit, reader="raw")
    stored = await profiler.store_result(run_id, counters=True)
    assert stored.counters == expected
    streamed = [pair async for pair in profiler.iter_tasks(run_id, counters=True)]
    assert [counters for _, counters in streamed] == list(expected.rows())
    assert (await aread_columns(result_path / run_id, counters=True)).counters == expected
    assert not (result_path / run_id / "mindstudio_profiler_output").exists()


def test_profile_with_counters_reads_the_stopped_run_natively(
    toolkit: Toolkit, tmp_path: Path, exported: dict[str, tuple[Path, str]], real_toolkit: Toolkit
) -> None:
    result_path = tmp_path / "runs"
    events: list[str] = []
    profiler = Profiler(
        result_path, toolkit=toolkit, progress=swap_in_real_run("910b_l1_div", result_path, events)
    )
    with profiler.profile(device_id=0, counters=True) as run:
        pass
    assert run.result is not None and run.result.counters == csv_counters(
        exported, "910b_l1_div", real_toolkit
    )
    assert "export_started" not in events


async def test_async_profile_with_counters_reads_natively(
    toolkit: Toolkit, tmp_path: Path, exported: dict[str, tuple[Path, str]], real_toolkit: Toolkit
) -> None:
    result_path = tmp_path / "runs"
    events: list[str] = []
    profiler = AsyncProfiler(
        result_path, toolkit=toolkit, progress=swap_in_real_run("310b_addcmul", result_path, events)
    )
    async with profiler.profile(device_id=0, counters=True) as run:
        pass
    assert run.result is not None and run.result.counters == csv_counters(
        exported, "310b_addcmul", real_toolkit
    )
    assert "export_started" not in events


# -- what is declined -----------------------------------------------------------------------------


def writable(run_dir: Path) -> None:
    """The copy keeps the reference's read-only modes: make it editable."""
    for path in [run_dir, *run_dir.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def set_metrics(run_dir: Path, aic: str, aiv: str, *, reverse: bool = False) -> None:
    """Pretend the run collected other groups (events included, in reverse order with *reverse*:
    not the collector's; the counts stay the real ones)."""
    writable(run_dir)
    path = run_dir / "device_0" / "sample.json"
    sample = json.loads(path.read_text())
    sample["ai_core_metrics"], sample["aiv_metrics"] = aic, aiv
    for key, group in (("ai_core_profiling_events", aic), ("aiv_profiling_events", aiv)):
        events = list(GROUP_EVENTS.get(group, ()))
        sample[key] = ",".join(hex(e) for e in (events[::-1] if reverse else events))
    path.write_text(json.dumps(sample))


def test_unverified_metric_groups_are_declined_by_name(tmp_path: Path, real_toolkit: Toolkit) -> None:
    result_path, run_id = fresh("910b_l1_div", tmp_path)
    # Memory with the collector's events was verified on generated data: the same group with
    # other events was not
    set_metrics(result_path / run_id, "Memory", "Memory")
    assert isinstance(read_run(result_path / run_id, counters=True), RawResult)
    set_metrics(result_path / run_id, "Memory", "Memory", reverse=True)
    declined = read_run(result_path / run_id, counters=True)
    assert isinstance(declined, Declined) and declined.reason is DeclineReason.UNSUPPORTED
    assert "'Memory'" in declined.message and "not verified" in declined.message
    assert isinstance(read_run(result_path / run_id), RawResult)  # the tasks alone are still read
    with pytest.raises(RawReadDeclined, match="Memory"):
        Profiler(result_path, toolkit=real_toolkit, reader="raw").store_result(run_id, counters=True)
    # A CSV writer still gets the cells, computed from the exporter's code ("parser only").
    rows = read_export_rows(result_path / run_id, pmu=True)
    assert not isinstance(rows, Declined)
    (device,) = rows.devices
    assert "aiv_main_mem_read_bw(GB/s)" in device.pmu_header and len(device.pmu_cells) == 510
    # MemoryAccess's names are no event's: the exporter's table insert fails, op_summary has no
    # PMU column (its code; the README's group table says the same of real CANN).
    set_metrics(result_path / run_id, "MemoryAccess", "MemoryAccess")
    declined = read_run(result_path / run_id, counters=True)
    assert isinstance(declined, Declined) and "MemoryAccess" in declined.message
    rows = read_export_rows(result_path / run_id, pmu=True)
    assert not isinstance(rows, Declined) and rows.devices[0].pmu_header == ()


def test_a_run_without_ffts_profile_declines_counters(tmp_path: Path) -> None:
    result_path, run_id = fresh("310b_addcmul", tmp_path)
    writable(result_path / run_id)
    data = result_path / run_id / "device_0" / "data"
    for path in data.glob("ffts_profile.*"):
        path.unlink()
    declined = read_run(result_path / run_id, counters=True)
    assert isinstance(declined, Declined) and declined.reason is DeclineReason.UNSUPPORTED
    assert "ffts_profile" in declined.message
    outcome = read_run(result_path / run_id)
    assert isinstance(outcome, RawResult) and outcome.counters is None


def test_counters_are_finite_or_none(outcomes: dict[str, RawResult | Declined]) -> None:
    for name, outcome in outcomes.items():
        assert isinstance(outcome, RawResult) and outcome.counters is not None
        assert len(outcome.counters) == len(outcome.tasks), name
        for column in outcome.counters.columns:
            assert all(v is None or math.isfinite(v) for v in outcome.counters.column(column)), (name, column)
