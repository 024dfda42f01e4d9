"""A raw run read a device at a time: ``Run.batches`` / ``tasks`` and ``iter_tasks`` give a device's
tasks before the next device is decoded, the same tasks in the same order as a whole read; a
device declined late is taken over by the next source (``reader='auto'``) after the tasks given,
or fails the read (``reader='raw'``); sources that disagree are never mixed.
"""

from __future__ import annotations

import csv
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from asc_aprof import (
    AicoreMetrics,
    MsprofInterface,
    RunSource,
    SourcesDisagree,
    Toolkit,
    aopen_run,
    open_run,
    sim,
)
from asc_aprof._model._enums import DEFAULT_PROFILE_TYPES
from asc_aprof._plans._raw import RawReadDeclined, _run
from asc_aprof._runs import _raw_files
from asc_aprof.sim import SimControl

#: Tasks per device (the second device runs fewer)
COUNTS = (700, 400)


@pytest.fixture
def two_devices(toolkit: Toolkit, simctl: SimControl, tmp_path: Path) -> Path:
    """A simulated raw run on devices 0 and 1 (no CSV yet)."""
    acl = MsprofInterface(toolkit)
    acl.init(tmp_path)
    config = acl.create_config(range(2), AicoreMetrics.PIPE_UTILIZATION, DEFAULT_PROFILE_TYPES)
    acl.start(config)
    for device, count in enumerate(COUNTS):
        sim.launch(f"kernel_{device}", device=device, count=count, duration_us=3.0)
    acl.stop(config)
    acl.destroy_config(config)
    acl.finalize()
    (run,) = tmp_path.glob("PROF_*")
    return run


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The folders of the devices whose rows were made, in order, as they were made."""
    folders: list[str] = []
    device = _run._HostSide.device

    def spy(self: Any, index: int, dev: _run.DevicePlan, *args: Any, **kwargs: Any) -> Any:
        folders.append(dev.folder)
        return device(self, index, dev, *args, **kwargs)

    monkeypatch.setattr(_run._HostSide, "device", spy)
    return folders


def _decline_device_1(run: Path) -> None:
    """device_1 declined by the raw reader, late (its info.json names another device)."""
    info = run / "device_1" / "info.json.1"
    fields = json.loads(info.read_text())
    fields["devices"] = "7"
    info.write_text(json.dumps(fields))


def test_a_device_is_given_before_the_next_is_decoded(two_devices: Path, made: list[str]) -> None:
    whole = open_run(two_devices, reader="raw").result().tasks
    made.clear()
    run = open_run(two_devices, reader="raw")
    batches = run.batches()
    first = next(batches)
    assert made == ["device_0"] and {t.device for t in first.tasks} == {0}
    rest = [t for b in batches for t in b.tasks]
    assert made == ["device_0", "device_1"]
    assert [*first.tasks, *rest] == list(whole)
    assert len(whole) == sum(COUNTS) and run.info.source is RunSource.RAW


@pytest.mark.anyio
async def test_iter_tasks_gives_a_device_before_the_next_is_decoded(
    two_devices: Path, made: list[str]
) -> None:
    whole = (await (await aopen_run(two_devices, reader="raw")).result()).tasks
    made.clear()
    run = await aopen_run(two_devices, reader="raw")
    seen: list[Any] = []
    async for task in run.tasks():
        if not seen:
            assert made == ["device_0"]
        seen.append(task)
    assert made == ["device_0", "device_1"] and seen == list(whole)


@pytest.mark.anyio
async def test_closing_early_closes_the_reads(two_devices: Path, made: list[str]) -> None:
    run = await aopen_run(two_devices, reader="raw")
    tasks = run.tasks()
    first = await tasks.__anext__()
    await tasks.aclose()
    assert first.device == 0 and made == ["device_0"]  # device 1 never decoded


def test_a_packed_pass_declined_late_continues_from_the_whole_decode(
    two_devices: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = open_run(two_devices, reader="raw").result().tasks
    packed = _run._packed_device

    def not_device_1(dev: _run.DevicePlan, *args: Any) -> Any:
        return None if dev.device == 1 else packed(dev, *args)

    monkeypatch.setattr(_run, "_packed_device", not_device_1)
    run = open_run(two_devices, reader="raw")
    assert list(run.tasks()) == list(whole) and run.info.source is RunSource.RAW


def _csv_rows(run: Path) -> list[Path]:
    return sorted(run.glob("mindstudio_profiler_output/op_summary_*.csv"))


@pytest.fixture
def exported(two_devices: Path, toolkit: Toolkit) -> Path:
    """The run with its CSVs (the simulated msprof.py), then device_1 declined by the raw reader."""
    open_run(two_devices, toolkit=toolkit, reader="msprof").result()
    assert _csv_rows(two_devices)
    _decline_device_1(two_devices)
    return two_devices


def test_a_device_declined_late_is_taken_over_by_the_csvs(exported: Path, made: list[str]) -> None:
    expected = open_run(exported, reader="msprof").result().tasks
    made.clear()
    run = open_run(exported)
    got = list(run.tasks())
    assert made == ["device_0", "device_1"]  # device 0 given from the raw data
    assert got == list(expected) and len(got) == sum(COUNTS)
    assert run.info.source is RunSource.CSV
    assert [s.source for s in run.info.skipped] == [RunSource.RAW]
    assert "device_1/info.json" in run.info.skipped[0].reason


@pytest.mark.anyio
async def test_a_device_declined_late_is_taken_over_by_the_csvs_async(exported: Path) -> None:
    expected = (await (await aopen_run(exported, reader="msprof")).result()).tasks
    run = await aopen_run(exported)
    got = [t async for t in run.tasks()]
    assert got == list(expected) and run.info.source is RunSource.CSV


def test_a_device_declined_late_fails_a_raw_read(exported: Path) -> None:
    given: list[Any] = []
    with pytest.raises(RawReadDeclined, match=r"device_1/info\.json"):
        for task in open_run(exported, reader="raw").tasks():
            given.append(task)
    assert len(given) == COUNTS[0] and {t.device for t in given} == {0}


def _change_last_device_0_row(run: Path) -> None:
    for path in _csv_rows(run):
        with path.open(newline="") as f:
            rows = list(csv.reader(f))
        head = rows[0]
        device = head.index("Device_id")
        at = max(i for i, row in enumerate(rows[1:], 1) if row[device] == "0")
        rows[at][head.index("Op Name")] = "another_kernel"
        with path.open("w", newline="") as f:
            csv.writer(f).writerows(rows)


@pytest.mark.anyio
async def test_sources_that_disagree_are_never_mixed(exported: Path) -> None:
    _change_last_device_0_row(exported)
    with pytest.raises(SourcesDisagree, match=r"gave 700 tasks.*Fix: read it with reader='msprof'"):
        async for _ in (await aopen_run(exported)).tasks():
            pass


def _devices_given(batches: Iterator[Any]) -> list[int]:
    return sorted({t.device for b in batches for t in b.tasks})


def test_counters_are_read_whole(two_devices: Path, made: list[str]) -> None:
    # (with counters the run is decoded whole: the counters are joined across the run)
    assert _devices_given(open_run(two_devices, reader="raw").batches(counters=True)) == [0, 1]
    assert made == ["device_0", "device_1"]


@pytest.mark.anyio
async def test_cancelled_while_the_next_device_is_read(
    two_devices: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The read returns at once; the worker thread finishes the device unseen, then the folder is
    # closed (the reads end).
    started, go_on = threading.Event(), threading.Event()
    device = _run._HostSide.device

    def held(self: Any, index: int, dev: _run.DevicePlan, *args: Any, **kwargs: Any) -> Any:
        if dev.device == 1:
            started.set()
            go_on.wait(10)
        return device(self, index, dev, *args, **kwargs)

    monkeypatch.setattr(_run._HostSide, "device", held)
    reads: list[_raw_files.DeviceReads] = []
    init = _raw_files.DeviceReads.__init__

    def kept(self: _raw_files.DeviceReads, *args: Any) -> None:
        init(self, *args)
        reads.append(self)

    monkeypatch.setattr(_raw_files.DeviceReads, "__init__", kept)
    run = await aopen_run(two_devices, reader="raw")
    got: list[Any] = []

    async def cancel_once_device_1_is_read() -> None:
        await anyio.to_thread.run_sync(started.wait, 10)
        scope.cancel()

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_once_device_1_is_read)
            async for task in run.tasks():
                got.append(task)
    assert scope.cancelled_caught and not go_on.is_set()
    assert len(got) == COUNTS[0] and reads and reads[0]._parts is not None  # (still decoding)
    go_on.set()
    for _ in range(500):
        if reads[0]._parts is None:
            break
        await anyio.sleep(0.01)
    assert reads[0]._parts is None
