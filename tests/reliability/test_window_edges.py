"""Edges of windows, paths and runs that break them on purpose (see docs/reliability.md)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

from asc_aprof import (
    AclError,
    AsyncProfiler,
    CollectionTimeout,
    ParseError,
    Profiler,
    Toolkit,
    UsageError,
    sim,
)
from asc_aprof._cann._collector import get_collector
from asc_aprof.sim import SimControl


# -- one caller's bad device id ---------------------------------------------------------------------
async def test_a_bad_device_fails_only_its_caller(
    toolkit: Toolkit, simctl: SimControl, tmp_path: Path
) -> None:
    simctl.set_device_count(8)
    simctl.set_latency(init=0.3)  # both callers join while the window is still gathering
    profiler = AsyncProfiler(tmp_path / "out", toolkit=toolkit)
    outcome: dict[int, object] = {}

    async def call(device: int) -> None:
        try:
            async with profiler.profile(device_id=device) as run:
                sim.launch(f"k{device}", device=device, duration_us=2.0)
            assert run.result is not None
            outcome[device] = [t.name for t in run.result.tasks if t.name.startswith("k")]
        except AclError as exc:
            outcome[device] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(call, 0)
        tg.start_soon(call, 40)
    assert outcome[0] == ["k0"]
    error = outcome[40]
    assert isinstance(error, AclError) and error.code == 100000
    assert "device 40" in str(error) and str(error).count("NULL") == 1


def test_a_single_bad_device_is_named_once(toolkit: Toolkit, simctl: SimControl, tmp_path: Path) -> None:
    simctl.set_device_count(8)
    with pytest.raises(AclError) as info, Profiler(tmp_path / "out", toolkit=toolkit).profile(device_id=40):
        pass
    text = str(info.value)
    assert text.startswith("aclprofCreateConfig returned NULL for device 40 (reported as 100000")
    assert text.count("aclprofCreateConfig") == 1


# -- result paths no collection can write into ------------------------------------------------------
def test_unusable_result_paths_are_refused_when_the_profiler_is_made(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    cases = {
        a_file / "below": "below a file",
        dangling / "out": "dangling symlink",
        Path("/proc/asc_aprof_out"): "pseudo file system",
        Path("/sys/asc_aprof_out"): "pseudo file system",
        tmp_path / "nul\x00here": "NUL byte",
        tmp_path / "lone\ud800surrogate": "cannot be encoded",
    }
    for path, words in cases.items():
        with pytest.raises(UsageError, match=words) as info:
            Profiler(path)
        assert "\n" not in str(info.value)


def test_run_ids_with_nul_or_lone_surrogates_are_usage_errors(tmp_path: Path) -> None:
    profiler = Profiler(tmp_path)
    for run_id in ("PROF_\x00", "PROF_\udfff\ud800"):
        with pytest.raises(UsageError, match="run id"):
            profiler.store_result(run_id)


# -- a caller that times out does not leave its run behind ---------------------------------------------
def test_cleanup_after_a_stop_timeout_removes_the_run_when_it_stops(
    toolkit: Toolkit, simctl: SimControl
) -> None:
    simctl.set_latency(stop=0.6)
    profiler = Profiler(toolkit=toolkit, call_timeout=0.1)  # the library's temporary root
    with pytest.raises(CollectionTimeout), profiler.profile() as run:
        sim.launch("k", duration_us=1.0)
    assert run.run_dir is not None and run.run_dir.exists()
    assert profiler.cleanup() == []  # still stopping: removed when it has stopped
    collector = get_collector()
    deadline = time.monotonic() + 10
    while not collector.idle() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not run.run_dir.exists()


# -- an export and a read of the same run at once -------------------------------------------------------
SLOW_MSPROF = """\
import pathlib, sys, time
run = pathlib.Path(sys.argv[sys.argv.index("-dir") + 1])
csv = next((run / "mindstudio_profiler_output").glob("op_summary_*.csv"))
full = csv.read_bytes()
csv.write_bytes(b"")          # msprof rewrites the file in place
time.sleep(0.6)
csv.write_bytes(full)
"""


def _run_with_csv(root: Path) -> str:
    run_id = "PROF_000001_20261201000000000_00000001ABCDEFGH"
    out = root / run_id / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    (out / "op_summary_20261201000000.csv").write_text(
        "Device_id,Task ID,Op Name,Task Type,Task Duration(us)\n0,1,k,AI_CORE,2.5\n0,2,k,AI_CORE,3.5\n"
    )
    return run_id


@pytest.fixture
def slow_toolkit(tmp_path: Path) -> Toolkit:
    script = tmp_path / "msprof.py"
    script.write_text(SLOW_MSPROF)
    return Toolkit(library=sim.toolkit().library, msprof_script=script, python=sys.executable)


def test_store_result_waits_for_an_export_of_the_same_run(slow_toolkit: Toolkit, tmp_path: Path) -> None:
    root = tmp_path / "out"
    run_id = _run_with_csv(root)
    profiler = Profiler(root, toolkit=slow_toolkit)
    exporter = threading.Thread(target=profiler.export, args=(run_id,))
    exporter.start()
    time.sleep(0.3)  # the export is rewriting the CSV now
    try:
        result = Profiler(root, toolkit=slow_toolkit).store_result(run_id)
    except ParseError as exc:  # what happened before the guard
        pytest.fail(f"read a half-written CSV: {exc}")
    finally:
        exporter.join()
    assert [t.duration for t in result.tasks] == [2.5, 3.5]


async def test_async_reads_wait_for_an_export_of_the_same_run(slow_toolkit: Toolkit, tmp_path: Path) -> None:
    root = tmp_path / "out"
    run_id = _run_with_csv(root)
    profiler = AsyncProfiler(root, toolkit=slow_toolkit)
    results: list[list[float]] = []

    async def read() -> None:
        await anyio.sleep(0.3)
        results.append([t.duration for t in (await profiler.store_result(run_id)).tasks])
        results.append([t.duration async for t in profiler.iter_tasks(run_id)])

    async with anyio.create_task_group() as tg:
        tg.start_soon(profiler.export, run_id)
        tg.start_soon(read)
    assert results == [[2.5, 3.5], [2.5, 3.5]]


# -- a pending manual start() and profile() in the same thread ---------------------------------------------
def test_profile_after_a_pending_start_fails_at_once(
    toolkit: Toolkit, simctl: SimControl, tmp_path: Path
) -> None:
    profiler = Profiler(tmp_path / "out", toolkit=toolkit, call_timeout=30)
    profiler.start(device_id=0)
    try:
        with (
            pytest.raises(UsageError, match="start\\(\\) is still collecting"),
            Profiler(tmp_path / "out", toolkit=toolkit).profile(device_id=1),
        ):
            pass
    finally:
        profiler.stop()
    with profiler.profile(device_id=0):  # after stop() it works again
        pass
    with pytest.raises(UsageError, match="inside a profile\\(\\) block"), profiler.profile(device_id=0):
        profiler.start(device_id=1)


async def test_async_profile_after_a_pending_start_fails_at_once(
    toolkit: Toolkit, simctl: SimControl, tmp_path: Path
) -> None:
    profiler = AsyncProfiler(tmp_path / "out", toolkit=toolkit, call_timeout=30)
    await profiler.start(device_id=0)
    try:
        with pytest.raises(UsageError, match="start\\(\\) is still collecting"):
            async with profiler.profile(device_id=1):
                pass
    finally:
        await profiler.stop()
    async with profiler.profile(device_id=0):
        pass
