"""What keeps an event loop running while the raw reader decodes in another thread: the switch
interval pinned low while any decode runs (and restored after the last), big containers taken
apart and made in steps (C and pure code alike), the public records built in slices, and big
record files read into memory maps (read as bytes would be) and, handed over, let go of once
decoded."""

from __future__ import annotations

import dataclasses
import gc
import mmap
import sys
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from asc_aprof import Profiler, ProfilingTask, Toolkit, sim
from asc_aprof._cann._files import RunFolder
from asc_aprof._plans._raw import RawResult, RawTask, _accel, _decode, _host, _run
from asc_aprof._plans._raw._chunked import clear_items, empty, to_tuple
from asc_aprof._plans._raw._decode import PieceSource
from asc_aprof._plans._raw._types import DeclinedError, PackedPart, PackedRows
from asc_aprof._runs import _drive
from asc_aprof._runs import _raw_files as _driver
from asc_aprof._runs._raw_files import SWITCH_INTERVAL, _SwitchPin, read_run
from asc_aprof.sim import SimControl

from .reference import REAL_RUNS, real_run_names

needs_c = pytest.mark.skipif(_accel.C is None, reason="the optional C extension _cdevice is not built")


def interval_is(seconds: float) -> bool:
    """Whether the switch interval is *seconds* (it is kept in whole microseconds)."""
    return abs(sys.getswitchinterval() - seconds) < 1e-9


@pytest.fixture
def interval() -> Iterator[None]:
    saved = sys.getswitchinterval()
    sys.setswitchinterval(0.01)
    try:
        yield
    finally:
        sys.setswitchinterval(saved)


@pytest.fixture(params=["c", "pure"])
def accelerated(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Runs the test with the C loops and with the pure code."""
    if request.param == "c" and _accel.C is None:
        pytest.skip("the optional C extension _cdevice is not built")
    monkeypatch.delenv("ASC_APROF_PURE_PYTHON", raising=False)
    monkeypatch.setattr(_accel, "ACCELERATED", request.param == "c")
    return bool(request.param == "c")


def _result(count: int) -> RawResult:
    tasks = tuple(
        RawTask(i % 2, 1, i, 0, f"op{i}", "AI_CORE", "AI_CORE", i / 8, i * 125.0, i, i, i + 1)
        for i in range(count)
    )
    return RawResult(tasks, "op_summary", False)


# -- the switch interval ------------------------------------------------------------------------


def test_the_switch_pin_lowers_the_interval_and_restores_it(interval: None) -> None:
    pin = _SwitchPin()
    with pin():
        assert interval_is(SWITCH_INTERVAL)
        with pin():
            assert interval_is(SWITCH_INTERVAL)
        assert interval_is(SWITCH_INTERVAL)  # the outer decode still runs
    assert interval_is(0.01)
    with pytest.raises(KeyError), pin():
        raise KeyError("boom")
    assert interval_is(0.01)


def test_the_switch_pin_keeps_a_lower_interval_and_one_set_meanwhile(interval: None) -> None:
    pin = _SwitchPin()
    sys.setswitchinterval(0.0001)
    with pin():
        assert interval_is(0.0001)
    assert interval_is(0.0001)
    sys.setswitchinterval(0.01)
    with pin():
        sys.setswitchinterval(0.002)  # someone else's choice, made while a decode ran
    assert interval_is(0.002)


def test_overlapping_decodes_in_threads_restore_the_interval_after_the_last(interval: None) -> None:
    pin = _SwitchPin()
    inside = threading.Barrier(3)  # both decodes and this thread
    leave = threading.Event()
    seen: list[float] = []

    def decode(wait: bool) -> None:
        with pin():
            inside.wait(timeout=30)
            if wait:
                leave.wait(timeout=30)
                seen.append(sys.getswitchinterval())

    first = threading.Thread(target=decode, args=(False,))
    second = threading.Thread(target=decode, args=(True,))
    try:
        first.start()
        second.start()
        inside.wait(timeout=30)
        first.join(timeout=30)
        assert interval_is(SWITCH_INTERVAL)  # the second decode still runs
        leave.set()
        second.join(timeout=30)
        assert seen == [pytest.approx(SWITCH_INTERVAL)]
        assert interval_is(0.01)
    finally:
        leave.set()


@needs_c
def test_release_points_are_spaced_twice_the_pinned_switch_interval() -> None:
    # A waiting thread asks for the GIL after a switch interval without a release; releases
    # closer than that would keep restarting its wait.
    assert _accel.C is not None
    assert _accel.C.RELEASE_INTERVAL_NS >= 2 * SWITCH_INTERVAL * 1e9


@pytest.mark.skipif(not real_run_names(), reason="no real runs beside the repository")
def test_concurrent_read_runs_pin_the_interval_and_restore_it(
    interval: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    (run_dir,) = (REAL_RUNS / real_run_names()[0]).glob("PROF_*")
    inside = threading.Barrier(2)
    seen: list[float] = []
    decode = _run.decode_run

    def decode_run(*args: Any, **kwargs: Any) -> RawResult:
        inside.wait(timeout=30)  # both decodes run at once here
        seen.append(sys.getswitchinterval())
        return decode(*args, **kwargs)

    monkeypatch.setattr(_driver, "decode_run", decode_run)
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(read_run(run_dir))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert seen == [pytest.approx(SWITCH_INTERVAL)] * 2
    assert len(results) == 2 and all(isinstance(r, RawResult) for r in results)
    assert results[0] == results[1]
    assert interval_is(0.01)


# -- containers in steps ------------------------------------------------------------------------


class _Record(NamedTuple):
    number: int
    name: str


def test_empty_takes_lists_and_dicts_apart(accelerated: bool) -> None:
    items = [_Record(i, f"n{i}") for i in range(1000)]
    index = {(i, i + 1): [record] for i, record in enumerate(items)}
    keep = items[:]
    empty(items, None, index)
    assert items == [] and index == {}
    assert keep[999] == _Record(999, "n999")  # emptied, not the items themselves


def test_to_tuple_moves_a_lists_items(accelerated: bool) -> None:
    items = [_Record(i, f"n{i}") for i in range(1000)]
    expected = tuple(items)
    made = to_tuple(items)
    assert made == expected and type(made) is tuple and items == []
    assert to_tuple([]) == ()


@needs_c
def test_the_c_tuple_is_left_out_of_the_collector_only_where_no_item_may_be_in_a_cycle() -> None:
    c = _accel.C
    assert c is not None
    records = c.public_tasks(_result(10).tasks, ProfilingTask)  # records of atoms: untracked
    assert records and not any(gc.is_tracked(r) for r in records)
    assert not gc.is_tracked(c.tuple_of(list(records)))
    assert gc.is_tracked(c.tuple_of([[], *records]))  # a list may be in a cycle
    assert gc.is_tracked(c.tuple_of([{}, *records]))  # so may a dict, tracked or not (yet)
    assert gc.is_tracked(c.tuple_of([([],), *records]))  # and a tracked tuple


class _Item:
    """An object a weak reference can watch."""


def test_clear_items_frees_a_slice_of_a_tuple_only_its_box_holds(accelerated: bool) -> None:
    items = [_Item() for _ in range(10)]
    watched = [weakref.ref(item) for item in items]
    box = [tuple(items)]
    del items
    if not accelerated:
        assert not clear_items(box, 0, 4)  # (a tuple cannot change in Python)
        assert all(ref() is not None for ref in watched)
        return
    assert clear_items(box, 2, 5)
    assert [ref() is None for ref in watched] == [False, False, True, True, True] + [False] * 5
    assert all(item is None for item in box[0][2:5])
    assert clear_items(box, 8, 100)  # (a range past the end stops at it)
    assert [ref() is None for ref in watched][8:] == [True, True]


@needs_c
def test_clear_items_leaves_a_tuple_someone_else_holds_as_it_is() -> None:
    items = tuple(_Item() for _ in range(10))
    box = [items]
    assert not clear_items(box, 0, 10)
    assert all(item is not None for item in items) and box[0] is items


@pytest.mark.anyio
@pytest.mark.parametrize("shared", [False, True])
async def test_release_frees_a_results_records_and_never_a_tuple_shared_with_the_caller(
    accelerated: bool, shared: bool
) -> None:
    # The result's records are freed whichever way it goes (slices of its own tuple, or a copy);
    # a tuple the caller still holds keeps every record.
    tasks = tuple(_Item() for _ in range(3 * _drive._FREE_SLICE + 5))
    watched = [weakref.ref(task) for task in tasks[:: _drive._FREE_SLICE // 2]]
    kept = tasks if shared else None
    box: list[object] = [RawResult(tasks, "op_summary", False)]  # type: ignore[arg-type]
    del tasks
    await _drive.release(box)
    assert box == []
    if shared:
        assert kept is not None and all(item is not None for item in kept)
        assert all(ref() is not None for ref in watched)
    else:
        assert all(ref() is None for ref in watched)


@pytest.mark.anyio
async def test_release_frees_packed_rows_in_a_worker_thread() -> None:
    # Packed rows are a few big blocks: unmapping them takes milliseconds, GIL or not, so the
    # loop's thread hands them to a worker thread to free.
    freed_in: list[int] = []

    class Rows:  # (stands for the capsule that holds the rows)
        def __del__(self) -> None:
            freed_in.append(threading.get_ident())

    box: list[object] = [RawResult(PackedRows([PackedPart(Rows(), 0, [], 0, False)]), "op_summary", False)]
    await _drive.release(box)
    assert box == [] and len(freed_in) == 1 and freed_in[0] != threading.get_ident()


# -- the public records in slices ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "stop"),
    [(None, None), (0, 0), (0, 3), (3, 7), (5, None), (None, 4), (-3, None), (2, 100), (6, 2), (100, 200)],
)
def test_slices_of_the_public_records_are_the_slices_of_all(
    accelerated: bool, start: int | None, stop: int | None
) -> None:
    result = _result(10)
    every = [raw.task() for raw in result.tasks]
    assert result.profiling_tasks() == every
    got = result.profiling_tasks(start, stop)
    assert got == every[start:stop]
    assert all(type(task) is ProfilingTask for task in got)


def test_slices_of_the_public_records_add_up_to_all(accelerated: bool) -> None:
    result = _result(1000)
    pieces = [task for at in range(0, 1000, 64) for task in result.profiling_tasks(at, at + 64)]
    assert pieces == result.profiling_tasks() == [raw.task() for raw in result.tasks]
    assert repr(pieces) == repr(result.profiling_tasks())


@needs_c
def test_the_c_public_records_check_their_range() -> None:
    assert _accel.C is not None
    tasks = _result(3).tasks
    for start, stop in ((-1, 2), (2, 1), (0, 4)):
        with pytest.raises(ValueError, match="start <= stop"):
            _accel.C.public_tasks(tasks, ProfilingTask, start, stop)


# -- big files in memory maps -------------------------------------------------------------------


@pytest.mark.skipif(not real_run_names(), reason="no real runs beside the repository")
def test_runs_read_from_memory_maps_read_as_from_bytes(accelerated: bool) -> None:
    for name in real_run_names()[:6]:
        (run_dir,) = (REAL_RUNS / name).glob("PROF_*")
        plan, in_bytes = _driver._files(run_dir, mapped_min=1 << 60)
        mapped_plan, in_maps = _driver._files(run_dir, mapped_min=1)
        assert plan == mapped_plan and in_bytes.keys() == in_maps.keys()
        assert {rel for rel, data in in_maps.items() if isinstance(data, mmap.mmap)} == {
            rel for rel in plan.record_files if in_bytes[rel]
        }
        assert all(isinstance(data, bytes) for data in in_bytes.values())
        assert all(bytes(in_maps[rel]) == data for rel, data in in_bytes.items())
        for flags in ({"with_task_time": True, "with_counters": True}, {}):
            got: list[object] = []
            for files in (in_bytes, in_maps):
                try:
                    got.append(_run.decode_run(plan, files, **flags))
                except DeclinedError as exc:
                    got.append(exc.declined)
            assert got[0] == got[1] and repr(got[0]) == repr(got[1]), name


@pytest.mark.skipif(not real_run_names(), reason="no real runs beside the repository")
@pytest.mark.parametrize("flags", [{}, {"with_task_time": True, "with_counters": True}])
def test_files_handed_over_are_let_go_once_decoded(
    accelerated: bool, monkeypatch: pytest.MonkeyPatch, flags: dict[str, bool]
) -> None:
    # Handed over (consume), the host files and the device task logs are freed before the
    # rows are put together; the rest (the PMU records, read last) stays; the result is the
    # same as when the caller keeps them.
    alive: dict[str, bool] = {}
    result = _run._result

    def spy(*args: Any, **kwargs: Any) -> RawResult:
        alive.update({rel: ref() is not None for rel, ref in refs.items()})
        return result(*args, **kwargs)

    monkeypatch.setattr(_run, "_result", spy)
    decoded = 0
    for name in real_run_names()[:6]:
        (run_dir,) = (REAL_RUNS / name).glob("PROF_*")
        plan, files = _driver._files(run_dir, mapped_min=1)
        done = {p for ps in plan.host_data.values() for p in ps}
        done |= {p for dev in plan.devices for p in (*dev.stars, *dev.ts_track)}
        refs = {rel: weakref.ref(data) for rel, data in files.items() if isinstance(data, mmap.mmap)}
        assert done & refs.keys() and refs.keys() - done, name
        try:
            kept: object = _run.decode_run(plan, dict(files), **flags)
        except DeclinedError as exc:
            kept = exc.declined
        alive.clear()
        try:
            got: object = _run.decode_run(plan, files, consume=True, **flags)
        except DeclinedError as exc:
            got = exc.declined
        assert got == kept and repr(got) == repr(kept), name
        if isinstance(got, RawResult):
            decoded += 1
            assert alive == {rel: rel not in done for rel in refs}, name
            assert files.keys() == set(plan.wanted) - done, name
    assert decoded


def test_joined_slices_go_into_a_map_from_a_size_on(monkeypatch: pytest.MonkeyPatch) -> None:
    slices = [bytes(range(256)) * 40, b"", b"\x07" * 12345, bytes(range(100))]
    assert _decode.joined([slices[0]]) is slices[0]
    assert _decode.joined([]) == b""
    small = _decode.joined(slices)
    assert type(small) is bytes and small == b"".join(slices)
    monkeypatch.setattr(_decode, "MAPPED_MIN", 1000)
    monkeypatch.setattr(_decode, "_COPY_STEP", 777)  # several steps per slice
    big = _decode.joined(slices)
    assert isinstance(big, mmap.mmap) and bytes(big) == small


def test_a_file_that_changes_size_while_read_is_read_as_read_would(tmp_path: Path) -> None:
    path = tmp_path / "data"
    path.write_bytes(bytes(range(256)) * 100)
    for size in (25600, 25000, 30000):  # as opened; grown since; shrunk since
        with open(path, "rb", buffering=0) as stream:
            data = _driver._read_mapped(stream, size)
        assert bytes(data) == path.read_bytes()
        assert isinstance(data, mmap.mmap) == (size == 25600)


def spied_decodes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, str]]:
    """read_run's decodes from now on, each as (lean, how it ended: "done" or the exception)."""
    leans: list[tuple[bool, str]] = []
    decode = _run.decode_run

    def decode_spy(*args: Any, **kwargs: Any) -> RawResult:
        try:
            result = decode(*args, **kwargs)
        except Exception as exc:
            leans.append((kwargs["lean"], type(exc).__name__))
            raise
        leans.append((kwargs["lean"], "done"))
        return result

    monkeypatch.setattr(_driver, "decode_run", decode_spy)
    return leans


@pytest.mark.parametrize("kernels", [3, 0], ids=["kernels", "no_kernel"])
def test_a_lean_read_gives_what_a_whole_decode_gives(
    accelerated: bool,
    kernels: int,
    toolkit: Toolkit,
    simctl: SimControl,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # read_run decodes lean (op_summary's rows only): at level 1 no host task is made (by the C
    # loops) and each device keeps its rows only; a run without a kernel row needs what that
    # let go (task_time stands in), and is decoded again whole. Either way: the whole decode's
    # answer.
    with Profiler(tmp_path, toolkit=toolkit).profile(cleanup=False) as run:
        if kernels:
            sim.launch("k", count=kernels, duration_us=2.0)
    assert run.run_dir is not None
    made: list[bool] = []  # HostTables.with_host_tasks of each decode
    decode, tables = _run.decode_run, _host.host_tables

    def tables_spy(*args: Any, **kwargs: Any) -> Any:
        found = tables(*args, **kwargs)
        made.append(found.with_host_tasks)
        return found

    monkeypatch.setattr(_run, "host_tables", tables_spy)
    walks: list[str] = []  # each lean host walk's end
    lean_host = _run._lean_host

    def walk_spy(*args: Any, **kwargs: Any) -> Any:
        try:
            found = lean_host(*args, **kwargs)
        except Exception as exc:
            walks.append(type(exc).__name__)
            raise
        walks.append("done")
        return found

    monkeypatch.setattr(_run, "_lean_host", walk_spy)
    leans = spied_decodes(monkeypatch)
    got = read_run(run.run_dir)
    plan, files = _driver._files(run.run_dir)
    try:
        whole: object = decode(plan, files)
    except DeclinedError as exc:
        whole = exc.declined
    assert repr(got) == repr(whole)
    if kernels:
        assert isinstance(got, RawResult) and len(got.tasks) == kernels
        assert leans == [(True, "done")]
        if _host.lean_walk_ready():  # the lean walk made the GE tasks: no host task at all
            assert walks == ["done"] and made == [True]  # (the whole decode below)
        else:  # the pure host loops make every host task
            assert walks == [] and made == [True, True]
    else:
        assert [lean for lean, _ in leans] == [True, False] and leans[0][1] == "WholeDecodeNeeded"
        assert made[1] is True


def test_a_packed_pass_that_declines_after_letting_go_of_the_task_log_reads_the_run_whole(
    toolkit: Toolkit, simctl: SimControl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The packed pass empties the box it is handed the task log in once the records are read; a
    # None after that leaves nothing for the steps: the run is decoded again whole, same answer.
    if _accel.active() is None:
        pytest.skip("the C device loops are not built")
    with Profiler(tmp_path, toolkit=toolkit).profile(cleanup=False) as run:
        sim.launch("k", count=3, duration_us=2.0)
    assert run.run_dir is not None
    expected = read_run(run.run_dir, packed=True)
    real = _accel.active()

    class Declining:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def packed_device(self, box: list[object], *args: Any) -> None:
            box.clear()
            return None

    monkeypatch.setattr(_run, "_accelerated", Declining)
    leans = spied_decodes(monkeypatch)
    got = read_run(run.run_dir, packed=True)
    assert leans == [(True, "WholeDecodeNeeded"), (False, "done")]
    assert isinstance(got, RawResult) and isinstance(expected, RawResult)
    assert list(got.tasks) == list(expected.tasks) and len(got.tasks) == 3


def test_a_devices_logs_are_read_when_the_decode_first_asks_for_them(
    toolkit: Toolkit, simctl: SimControl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The metadata and small host files are read at once; the host's record files and each
    # device's task logs only when the decode asks (then kept until let go); one let go unread
    # is never read.
    with Profiler(tmp_path, toolkit=toolkit).profile(cleanup=False) as run:
        sim.launch("k", count=3, duration_us=2.0)
    assert run.run_dir is not None
    opened: list[str] = []
    real_open = RunFolder.open

    def open_spy(self: RunFolder, rel: str, *args: Any, **kwargs: Any) -> Any:
        opened.append(rel)
        return real_open(self, rel, *args, **kwargs)

    monkeypatch.setattr(RunFolder, "open", open_spy)
    with RunFolder(run.run_dir) as folder:
        plan, files = _driver._run_files(folder, counters=True)
        (dev,) = plan.devices
        logs = [*dev.stars, *dev.ts_track, *dev.ffts]
        host_records = [p for kind in _driver.HOST_RECORD_FILES for p in plan.host_data.get(kind, ())]
        assert len(logs) >= 2 and all(rel in files for rel in logs)
        assert len(host_records) == 3 and all(rel in files for rel in host_records)
        assert set(opened) == set(plan.wanted) - set(logs) - set(host_records)
        assert bytes(files[host_records[0]]) and opened.count(host_records[0]) == 1
        assert bytes(files[logs[0]]) == (run.run_dir / logs[0]).read_bytes()
        assert bytes(files[logs[0]]) and opened.count(logs[0]) == 1  # read once, then kept
        assert files.pop(logs[1]) is None and logs[1] not in files and logs[1] not in opened
        assert sorted(files) == sorted(set(plan.wanted) - {logs[1]})
        with pytest.raises(KeyError):
            files[logs[1]]


def test_record_files_are_read_a_piece_at_a_time(
    toolkit: Toolkit, simctl: SimControl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # _RunFiles.pieces: a host record file not read yet comes in pieces of whole records (one
    # buffer read into again), then is forgotten; one read already comes whole; a length that is
    # not a whole number of records gives None, nothing read. The lean host walk reads so, and
    # the packed pass a device's task log.
    with Profiler(tmp_path, toolkit=toolkit).profile(cleanup=False) as run:
        sim.launch("k", count=40, duration_us=2.0)
    assert run.run_dir is not None
    monkeypatch.setattr(_driver, "PIECE", 256)
    with RunFolder(run.run_dir) as folder:
        plan, files = _driver._run_files(folder, counters=False)
        assert isinstance(files, PieceSource)
        (track,) = plan.host_data["task_track"]
        whole = (run.run_dir / track).read_bytes()
        assert len(whole) > 256 and len(whole) % 64 == 0
        pieces = files.pieces(track, 64)
        assert pieces is not None
        got = [bytes(piece) for piece in pieces]  # (copied: the buffer is read into again)
        assert b"".join(got) == whole and all(len(p) % 64 == 0 and len(p) <= 256 for p in got)
        assert len(got) == -(-len(whole) // 256) and track not in files
        assert files.pieces(plan.host_data["api_event"][0], 48) is None  # (40-byte records)
        (basic,) = plan.host_data["node_basic_info"]
        held = files[basic]
        found = files.pieces(basic, 64)
        assert found is not None and list(found) == [held]
        # a device's task log too, for the packed pass (an iterator of pieces, not the bytes)
        (dev,) = plan.devices
        log = _run._task_log(files, dev)
        assert not isinstance(log, bytes | mmap.mmap)
        assert b"".join(bytes(piece) for piece in log) == b"".join(
            (run.run_dir / p).read_bytes() for p in dev.stars
        )
    # and a packed read hands the packed pass the pieces
    handed: list[object] = []
    packed_device = _run._packed_device

    def spy(dev: object, files: object, box: list[object], *args: Any) -> Any:
        handed.append(box[0])
        return packed_device(dev, files, box, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(_run, "_packed_device", spy)
    result = read_run(run.run_dir, packed=True)
    assert isinstance(result, RawResult) and len(result.tasks) == 40
    assert len(handed) == 1 and not isinstance(handed[0], bytes | mmap.mmap)


@pytest.mark.skipif(not real_run_names(), reason="no real runs beside the repository")
def test_a_packed_read_gives_the_same_tasks(accelerated: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # packed=True (what iter_tasks() reads with): the tasks packed where the C loops pack them
    # (runs whose op_summary types are known: no N/A row), each the record of the unpacked read, and
    # their public records equal; everything else of the result equal too. A level-1 device
    # without host tasks is packed straight from its task log (_packed_device).
    packed_runs = clocked = 0
    fused: list[bool] = []
    packed_device = _run._packed_device

    def spy(*args: Any, **kwargs: Any) -> Any:
        found = packed_device(*args, **kwargs)
        fused.append(found is not None)
        return found

    monkeypatch.setattr(_run, "_packed_device", spy)
    for name in real_run_names():
        (run_dir,) = (REAL_RUNS / name).glob("PROF_*")
        plain, packed = read_run(run_dir), read_run(run_dir, packed=True)
        if not isinstance(plain, RawResult):
            assert packed == plain, name
            continue
        assert isinstance(packed, RawResult), name
        if isinstance(packed.tasks, PackedRows):
            packed_runs += 1
        assert tuple(packed.tasks) == plain.tasks and repr(tuple(packed.tasks)) == repr(plain.tasks), name
        assert packed.profiling_tasks() == plain.profiling_tasks(), name
        assert packed.profiling_tasks(1, 3) == plain.profiling_tasks(1, 3), name
        assert dataclasses.replace(packed, tasks=plain.tasks) == plain, name
        # what profile() makes of a read: per device, public records and clocks
        assert repr(packed.split_by_device()) == repr(plain.split_by_device()), name
        assert repr(packed.aic_mhz()) == repr(plain.aic_mhz()), name
        clocked += bool(packed.clocks) and isinstance(packed.tasks, PackedRows)
    assert (packed_runs > 0) is accelerated
    assert any(fused) is (accelerated and _host.accelerated_default())
    assert (clocked > 0) is accelerated  # (910b_l1_div: packed, with clock data)


def test_an_unknown_ge_type_at_level_1_is_decoded_again_whole(
    toolkit: Toolkit, simctl: SimControl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A lean read made no host task; a GE task typed N/A (the level-0 join would type its row,
    # which reads the host tasks) sends the run to a whole decode, which gives the answer.
    with Profiler(tmp_path, toolkit=toolkit).profile(cleanup=False) as run:
        sim.launch("k", count=3, duration_us=2.0)
    assert run.run_dir is not None
    plan, files = _driver._files(run.run_dir)
    whole = _run.decode_run(plan, files)
    monkeypatch.setattr(_run, "_any_unknown_type", lambda ge_tasks: True)  # (as if one were N/A)
    leans = spied_decodes(monkeypatch)
    got = read_run(run.run_dir)
    expected = ["WholeDecodeNeeded", "done"] if _host.accelerated_default() else ["done"]
    assert [how for _, how in leans] == expected and repr(got) == repr(whole)
