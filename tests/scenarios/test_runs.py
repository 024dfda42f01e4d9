"""Runs on every driver: start()/stop(), export and store, cleanup, and the errors of each."""

from __future__ import annotations

from pathlib import Path

import pytest

from asc_aprof import ExportError, Toolkit, UsageError, sim
from asc_aprof._cann._paths import default_result_root
from asc_aprof.sim import SimControl

from ..helpers import HANG_MARKER, wait_gone
from .drivers import Driver, scenario


@scenario
async def test_manual_start_stop_export_store(
    driver: Driver, toolkit: Toolkit, result_dir: Path, simctl: SimControl
) -> None:
    profiler = driver.profiler(result_dir, toolkit=toolkit)
    await profiler.start(device_id=1)
    assert simctl.running_devices() == [1]
    sim.launch("k", device=1, duration_us=7.0, count=3)
    await profiler.stop()
    assert simctl.running_devices() == [] and not simctl.initialized()
    run_dir = await profiler.export()
    result = await profiler.store_last_result()
    assert result.run_id == run_dir.name
    assert [(t.name, t.duration, t.device) for t in result.tasks] == [("k", 7.0, 1)] * 3
    again = await profiler.store_result(run_dir.name)
    assert again.tasks == result.tasks and again.run_id == result.run_id
    assert profiler.last_result is again
    if driver.name == "sync":  # Profiler.stop() with nothing started returns quietly, as upstream's
        assert await profiler.stop() is None
    else:
        with pytest.raises(UsageError):
            await profiler.stop()


@scenario
async def test_default_root_runs_are_cleaned_up(driver: Driver, toolkit: Toolkit) -> None:
    profiler = driver.profiler(toolkit=toolkit)
    async with profiler.profile() as run:
        sim.launch("k")
    assert run.run_id is not None
    assert not (default_result_root() / run.run_id).exists()
    async with profiler.profile(cleanup=False) as kept:
        sim.launch("k")
    assert kept.run_id is not None and (default_result_root() / kept.run_id).is_dir()
    assert await profiler.cleanup() == [default_result_root() / kept.run_id]
    assert not (default_result_root() / kept.run_id).exists()


@scenario
async def test_store_last_result_uses_start_time_not_name(
    driver: Driver, toolkit: Toolkit, result_dir: Path
) -> None:
    profiler = driver.profiler(result_dir, toolkit=toolkit)
    async with profiler.profile(cleanup=False):
        sim.launch("newest")
    # another process's older run with a higher counter
    other = driver.profiler(result_dir, toolkit=toolkit)
    old = result_dir / "PROF_000042_20200101000000000_00000001AAAAAAAA"
    old.mkdir()
    assert (await other.store_last_result()).tasks[0].name == "newest"


@scenario
async def test_bad_run_ids(driver: Driver, toolkit: Toolkit, result_dir: Path, tmp_path: Path) -> None:
    profiler = driver.profiler(result_dir, toolkit=toolkit)
    async with profiler.profile() as run:
        sim.launch("k")
    outside = tmp_path / "outside"
    (outside / "PROF_000001_20260101000000000_00000001AAAAAAAA").mkdir(parents=True)
    (result_dir / "PROF_999999_20260101000000000_00000001AAAAAAAA").symlink_to(
        outside / "PROF_000001_20260101000000000_00000001AAAAAAAA"
    )
    for bad in (
        "..",
        "../outside",
        str(outside),
        "PROF_999999_20260101000000000_00000001AAAAAAAA",
        "missing",
        "",
    ):
        with pytest.raises(UsageError):
            await profiler.store_result(bad)
    assert run.run_id is not None
    assert (await profiler.store_result(run.run_id)).tasks


@scenario
async def test_task_time_fallback_is_logged(
    driver: Driver, toolkit: Toolkit, result_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # reader="msprof": the CSVs are what is read (with reader="auto" the raw data comes first)
    profiler = driver.profiler(result_dir, toolkit=toolkit, reader="msprof")
    async with profiler.profile(cleanup=False) as run:
        sim.launch("k", count=2)
    assert run.run_id is not None
    for csv_file in (result_dir / run.run_id).rglob("op_summary_*.csv"):
        csv_file.unlink()
    with caplog.at_level("WARNING", logger="asc_aprof"):
        result = await profiler.store_result(run.run_id)
    assert [t.duration for t in result.tasks if t.type.startswith(("AI_", "KERNEL_"))] == [10.0, 10.0]
    assert "using task_time" in caplog.text


@scenario
async def test_long_campaign_forgets_finished_windows(
    driver: Driver, toolkit: Toolkit, result_dir: Path
) -> None:
    profiler = driver.profiler(result_dir, toolkit=toolkit)
    for i in range(70):
        await profiler.start()
        sim.launch(f"k{i}")
        await profiler.stop()
    assert len(profiler._windows) <= 65
    await profiler.export()
    assert (await profiler.store_last_result()).tasks[0].name == "k69"


# -- export errors ----------------------------------------------------------------------------------


@scenario
async def test_export_error_keeps_raw_data_and_retry_succeeds(
    driver: Driver, simctl: SimControl, result_dir: Path
) -> None:
    # reader="msprof": the simulated runs would be read natively, never exported.
    failing = driver.profiler(result_dir, toolkit=sim.toolkit(export_fault="exit:3"), reader="msprof")
    with pytest.raises(ExportError) as info:
        async with failing.profile() as run:
            sim.launch("k", count=2)
    assert info.value.returncode == 3
    assert "msprof.py" in " ".join(info.value.command)
    assert run.run_id is not None and str(result_dir / run.run_id) in str(info.value)
    assert (result_dir / run.run_id).is_dir()
    retry = driver.profiler(result_dir, toolkit=sim.toolkit())
    await retry.export(run.run_id)
    assert len((await retry.store_result(run.run_id)).tasks) == 2


@scenario
async def test_no_csv_is_an_explained_error(driver: Driver, simctl: SimControl) -> None:
    profiler = driver.profiler(toolkit=sim.toolkit(export_fault="nocsv"), reader="msprof")
    with pytest.raises(ExportError, match="exits 0 when it exported nothing"):
        async with profiler.profile():
            sim.launch("k")


@scenario
async def test_export_timeout_is_an_export_error(driver: Driver, simctl: SimControl) -> None:
    profiler = driver.profiler(toolkit=sim.toolkit(export_fault="hang"), export_timeout=1.0, reader="msprof")
    with pytest.raises(ExportError, match="did not finish within 1 s") as info:
        async with profiler.profile():
            sim.launch("k")
    assert "helper pid" in info.value.stderr_tail
    assert wait_gone(HANG_MARKER) == []
