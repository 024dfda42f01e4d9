"""The host call tree in C (``asc_aprof._plans._raw._chost``) against the pure-Python loops.

On generated host record streams (calls nested, overlapping and tied in time, several threads,
every queue level, node launches without names or with Lccl names, node records outside every
launch, GE types that are skipped or declined, flips, maintenance and DPU records, batch ids,
MIX kernels, timestamps at the top of the 64-bit range) both give the same host and GE tasks,
of the same classes, or the same error; records the decoders would not make are left to the
pure loops. Every real run gives the same tables and the same read either way.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from asc_aprof._plans._raw import RawResult, _host, _run
from asc_aprof._plans._raw._decode import (
    HOST_MAGIC,
    LEVELS,
    ApiRecord,
    HeaderRecord,
    NodeBasicRecord,
    TaskTrackRecord,
)
from asc_aprof._plans._raw._host import GeTask, HostRecords, HostTask, host_tables
from asc_aprof._plans._raw._types import DeclinedError, WholeDecodeNeeded
from asc_aprof._runs._raw_files import read_run

from .real.conftest import copy_run
from .reference import REAL_RUNS, real_run_names

needs_c = pytest.mark.skipif(
    _host._C_HOST_TABLES is None,
    reason="asc_aprof._plans._raw._chost is not built (no C compiler at install time): pure Python only",
)
pytestmark = needs_c

U64_MAX = (1 << 64) - 1
HASHES = {"1": "node_a", "2": "", "3": "LcclAllReduce", "6": "kernel_b", "7": "N/A"}
TYPES = {
    "runtime": {
        "66": "KERNEL_AIVEC",
        "67": "KERNEL_MIX_AIC",
        "68": "FFTS_PLUS",
        "69": "STARS_COMMON",
        "70": "EVENT_RECORD",
        "98": "FLIP_TASK",
        "99": "MAINTENANCE",
        "802": "task_track",
    },
    "node": {"5": "launch", "7": "StreamSyncTaskFinish"},
    "model": {"1": "StreamSyncTaskFinish"},
    "acl": {"1": "aclopExecute"},  # ACL types are named by group; a table must exist to check them
}

THREAD = st.sampled_from([1, 1, 2, 3])
TIME = st.integers(0, 60)


def usual(values: list[int], odd_values: list[int], odd: bool) -> st.SearchStrategy[int]:
    """*values*; in an odd stream (half of them) sometimes one that is declined or unknown."""
    return st.sampled_from(values * 8 + odd_values if odd else values)


@st.composite
def api(draw: st.DrawFn, base: int, odd: bool) -> ApiRecord:
    level = draw(usual([20000, 10000], [15000, 5000, 12345], odd))
    if level == 20000:
        stype = draw(usual([1, 3, 3, 9], [8], odd)) << 16 | draw(st.integers(0, 3))
    else:
        stype = draw(st.sampled_from([5, 5, 5, 7, 1]))
    start = draw(st.one_of(st.just(0), TIME))
    end = start + draw(st.sampled_from([0, 1, 5, 10, 20, 40]))
    item = draw(st.integers(1, 4))
    return ApiRecord(level, stype, draw(THREAD), _at(base, start), _at(base, end), item)


@st.composite
def basic(draw: st.DrawFn, base: int, odd: bool) -> NodeBasicRecord:
    level = draw(usual([10000], [5000], odd))
    ge_type = draw(st.sampled_from([0, 1, 2, 2, 6, 9, 11, 42]))
    block = draw(st.integers(0, 3)) << 16 | draw(st.integers(0, 40))
    return NodeBasicRecord(level, 0, draw(THREAD), _at(base, draw(TIME)), 1, ge_type, 0, block, 0)


@st.composite
def tensor(draw: st.DrawFn, base: int, odd: bool) -> HeaderRecord:
    level = draw(usual([10000], [20000], odd))
    return HeaderRecord(level, 0, draw(THREAD), _at(base, draw(TIME)))


@st.composite
def track(draw: st.DrawFn, base: int, odd: bool) -> TaskTrackRecord:
    return TaskTrackRecord(
        draw(usual([5000], [10000, 12345], odd)),
        802,
        draw(THREAD),
        _at(base, draw(TIME)),
        draw(usual([0], [1], odd)),
        draw(st.integers(0, 1)),
        draw(st.integers(1, 3)),
        draw(st.integers(0, 5)),
        draw(usual([0], [1], odd)),
        draw(st.sampled_from([66, 66, 66, 67, 68, 69, 70, 98, 99, 100])),
        draw(st.sampled_from([1, 2, 3, 5, 6, 6, 6, 7])),
    )


def _at(base: int, offset: int) -> int:
    return min(base + offset, U64_MAX)


@st.composite
def streams(draw: st.DrawFn) -> HostRecords:
    base = draw(st.sampled_from([0, 0, 0, 1 << 40, (1 << 63) - 30, U64_MAX - 100]))
    records = HostRecords(dict(HASHES), {k: dict(v) for k, v in TYPES.items()})
    odd = draw(st.booleans())
    records.apis = draw(st.lists(api(base, odd), max_size=12))
    records.node_basics = draw(st.lists(basic(base, odd), max_size=6))
    records.tensors = draw(st.lists(tensor(base, odd), max_size=3))
    records.tracks = draw(st.lists(track(base, odd), max_size=12))
    return records


def outcome(records: HostRecords, *, accelerated: bool, **flags: bool) -> object:
    """The tables (every record with its class), or the error (a decline's reason and message)."""
    try:
        tables = host_tables(records, accelerated=accelerated, **flags)
    except DeclinedError as exc:
        return exc.declined
    except Exception as exc:  # an unknown level is a KeyError on both paths (the driver reports it)
        return type(exc), exc.args
    return [(type(t), t) for t in tables.host_tasks], [(type(g), g) for g in tables.ge_tasks]


@settings(max_examples=250)
@given(records=streams(), level0=st.booleans(), all_export=st.booleans())
def test_c_loops_equal_the_pure_loops(records: HostRecords, level0: bool, all_export: bool) -> None:
    flags = {"level0": level0, "all_export": all_export}
    assert outcome(records, accelerated=True, **flags) == outcome(records, accelerated=False, **flags)


@settings(max_examples=250)
@given(records=streams(), all_export=st.booleans())
def test_c_loops_without_host_tasks_give_the_ge_tasks_or_leave_a_repeated_id_to_the_pure_loops(
    records: HostRecords, all_export: bool
) -> None:
    """``host_tasks=False`` (a lean read at level 1): no host task, the same GE tasks, where no
    two host tasks of a device share their ids (and the ids fit the C check's packed key); else
    every host task, from the pure loops (the reader declines a repeated id then, as it would)."""
    flags = {"level0": False, "all_export": all_export}
    pure = outcome(records, accelerated=False, **flags)
    try:
        lean = host_tables(records, accelerated=True, host_tasks=False, **flags)
    except DeclinedError as exc:
        assert exc.declined == pure
        return
    except Exception as exc:
        assert (type(exc), exc.args) == pure
        return
    assert isinstance(pure, tuple)
    ids = [(h.device_id, h.stream_id, h.task_id, h.context_id, h.batch_id) for _, h in pure[0]]
    packable = all(d < 1 << 10 and s < 1 << 20 and t < 1 << 32 for d, s, t, _, _ in ids)
    event(f"ids unique and packable: {len(set(ids)) == len(ids) and packable}")
    if len(set(ids)) == len(ids) and packable:
        assert not lean.with_host_tasks and lean.host_tasks == []
        assert [(type(g), g) for g in lean.ge_tasks] == pure[1]
    else:
        assert lean.with_host_tasks and ([(type(t), t) for t in lean.host_tasks], lean.ge_tasks) == (
            pure[0],
            [g for _, g in pure[1]],
        )


def packed(records: HostRecords) -> dict[str, bytes]:
    """The files the records come from (records the decoders decline are left out)."""
    return {
        "apis": b"".join(
            struct.pack(
                "<HHIIIQQQ", HOST_MAGIC, a.level, a.struct_type, a.thread_id, 24, a.start, a.end, a.item_id
            )
            for a in records.apis
            if a.level in LEVELS and a.end != U64_MAX  # an event record: declined when decoded
        ),
        "tracks": b"".join(
            struct.pack(
                "<HHIIIQHHHHQQ16x",
                HOST_MAGIC,
                t.level,
                t.struct_type,
                t.thread_id,
                24,
                t.timestamp,
                t.dev_type << 12 | t.device_id,
                t.stream_id,
                t.task_id,
                t.batch_id,
                t.task_type,
                t.kernel_hash,
            )
            for t in records.tracks
            if t.level in LEVELS
        ),
        "node_basics": b"".join(
            struct.pack(
                "<HHIIIQQIQII12x",
                HOST_MAGIC,
                b.level,
                b.struct_type,
                b.thread_id,
                24,
                b.timestamp,
                b.node_hash,
                b.task_type,
                b.op_type_hash,
                b.block_word,
                b.op_flag,
            )
            for b in records.node_basics
            if b.level in LEVELS
        ),
    }


def taken(files: dict[str, bytes], tensors: list[HeaderRecord]) -> HostRecords:
    """HostRecords as the reader makes them from *files* (decoded, or kept to be read in place)."""
    records = HostRecords(dict(HASHES), {k: dict(v) for k, v in TYPES.items()})
    for kind, data in files.items():
        records.take(kind, data)
    records.tensors = tensors
    return records


@settings(max_examples=200)
@given(records=streams(), level0=st.booleans(), all_export=st.booleans(), torn=st.integers(0, 3))
def test_c_loops_reading_the_files_in_place_equal_the_pure_loops(
    records: HostRecords, level0: bool, all_export: bool, torn: int
) -> None:
    files = {kind: b"\x5a" * torn + data for kind, data in packed(records).items()}  # a torn head is dropped
    fast = taken(files, records.tensors)
    assert fast.in_place.keys() == files.keys()
    flags = {"level0": level0, "all_export": all_export}
    kept = [a for a in records.apis if a.level in LEVELS and a.end != U64_MAX and a.start]
    assert fast.has("apis") == bool(kept)
    found = outcome(fast, accelerated=True, **flags)
    # read in place (no record was decoded), and handed over: let go of once read
    assert not fast.apis and not fast.node_basics and not fast.tracks and not fast.in_place
    assert found == outcome(taken(files, records.tensors), accelerated=False, **flags)


def test_files_a_decoder_would_decline_are_decoded_when_taken() -> None:
    event = struct.pack("<HHIIIQQQ", HOST_MAGIC, 20000, 3 << 16, 7, 24, 10, U64_MAX, 0)
    records = HostRecords({}, {})
    with pytest.raises(DeclinedError, match="event records"):
        records.take("apis", event)
    bad = struct.pack("<HHIIIQQIQII12x", HOST_MAGIC, 12345, 0, 7, 24, 1, 1, 0, 0, 0, 0)
    with pytest.raises(DeclinedError, match="level 12345"):
        records.take("node_basics", bad)
    records.take("tracks", b"")
    assert records.in_place == {"tracks": b""} and not records.has("tracks")


def tree() -> HostRecords:
    """A node launch inside an ACL call with a kernel, a MIX kernel and an event in it, and a
    second thread whose node record hangs outside every launch."""
    records = HostRecords(dict(HASHES), {k: dict(v) for k, v in TYPES.items()})
    records.apis = [ApiRecord(20000, 3 << 16, 7, 10, 100, 0), ApiRecord(10000, 5, 7, 20, 50, 1)]
    records.node_basics = [NodeBasicRecord(10000, 0, 7, 25, 1, 2, 0, 2 << 16 | 8, 0)]
    records.tensors = [HeaderRecord(10000, 0, 8, 5)]
    records.tracks = [
        TaskTrackRecord(5000, 802, 7, 30, 0, 0, 2, 1, 0, 66, 6),
        TaskTrackRecord(5000, 802, 7, 31, 0, 0, 2, 2, 0, 67, 6),
        TaskTrackRecord(5000, 802, 8, 32, 0, 0, 3, 3, 0, 70, 5),
    ]
    return records


def test_the_c_loops_make_the_tasks_a_tree_gives() -> None:
    tables = host_tables(tree(), level0=False, all_export=True, accelerated=True)
    invalid = 4294967295
    assert tables.host_tasks == [
        HostTask(0, 2, 1, invalid, 0, "KERNEL_AIVEC", "kernel_b", 30),
        HostTask(0, 2, 2, invalid, 0, "KERNEL_MIX_AIC", "kernel_b", 31),
        HostTask(0, 2, 2, 0, 0, "KERNEL_MIX_AIC", "kernel_b", 31),
        HostTask(0, 3, 3, invalid, 0, "EVENT_RECORD", "N/A", 32),
    ]
    assert tables.ge_tasks == [
        GeTask(0, 2, 1, invalid, 0, "node_a", "AI_VECTOR_CORE", 8, 16),
        GeTask(0, 2, 2, invalid, 0, "node_a", "AI_VECTOR_CORE", 8, 16),
    ]
    assert all(type(t) is HostTask for t in tables.host_tasks)
    assert all(type(g) is GeTask for g in tables.ge_tasks)


def declines(records: HostRecords, level0: bool, message: str) -> None:
    """Both paths decline *records* with the same reason and message, which contains *message*."""
    flags = {"level0": level0, "all_export": True}
    found = outcome(records, accelerated=True, **flags)
    assert found == outcome(records, accelerated=False, **flags)
    assert message in getattr(found, "message", "")


def test_without_host_tasks_the_c_loops_make_none_unless_two_share_their_ids() -> None:
    lean = host_tables(tree(), level0=False, all_export=True, accelerated=True, host_tasks=False)
    full = host_tables(tree(), level0=False, all_export=True, accelerated=True)
    assert (lean.host_tasks, lean.ge_tasks, lean.with_host_tasks) == ([], full.ge_tasks, False)
    # the kernel's task record twice (same device, stream, task, context): every host task is
    # made after all (by the pure loops), for the reader to decline the run as with them
    twice = tree()
    twice.tracks = [*twice.tracks, twice.tracks[0]._replace(timestamp=33)]
    again = host_tables(twice, level0=False, all_export=True, accelerated=True, host_tasks=False)
    pure = host_tables(twice, level0=False, all_export=True, accelerated=False)
    assert again.with_host_tasks and again == pure
    assert [t.task_id for t in again.host_tasks].count(1) == 2
    # read in place, the files are let go of before that check: the decode is done again whole
    # (read_run then makes every host task, and declines the run as it would)
    files = packed(twice)
    with pytest.raises(WholeDecodeNeeded):
        host_tables(taken(files, twice.tensors), level0=False, all_export=True, host_tasks=False)
    whole = host_tables(taken(files, twice.tensors), level0=False, all_export=True)
    assert whole.host_tasks == pure.host_tasks and whole.ge_tasks == pure.ge_tasks


def test_both_decline_a_node_with_tensor_records_only_at_level1() -> None:
    records = tree()
    records.node_basics = []
    records.tensors = [HeaderRecord(10000, 0, 7, 26)]
    declines(records, False, "has no node_basic_info at task time level 1")
    records.tensors = [HeaderRecord(10000, 0, 7, 60)]  # after the launch: it hangs alone
    flags = {"level0": False, "all_export": True}
    assert outcome(records, accelerated=True, **flags) == outcome(records, accelerated=False, **flags)


def test_both_decline_hccl_nodes_and_skip_ffts_plus_ones() -> None:
    records = tree()
    records.node_basics = [records.node_basics[0]._replace(task_type=9)]
    declines(records, False, "HCCL node 'node_a'")
    records.node_basics = [records.node_basics[0]._replace(task_type=6)]
    tables = host_tables(records, level0=False, all_export=True, accelerated=True)
    assert tables.ge_tasks == [] and tables == host_tables(
        records, level0=False, all_export=True, accelerated=False
    )


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r.tracks.__setitem__(0, r.tracks[0]._replace(timestamp=-1)),
        lambda r: r.tracks.__setitem__(0, r.tracks[0]._replace(task_id=True)),
        lambda r: r.apis.__setitem__(0, r.apis[0]._replace(end=1 << 64)),
        lambda r: r.node_basics.__setitem__(0, r.node_basics[0]._replace(block_word=2.0)),
        lambda r: r.tensors.__setitem__(0, r.tensors[0][:3]),
        lambda r: setattr(r, "apis", tuple(r.apis)),
    ],
    ids=["negative", "bool", "above_u64", "float", "short_record", "not_a_list"],
)
def test_records_the_decoders_would_not_make_are_left_to_the_pure_loops(
    change: Callable[[HostRecords], None],
) -> None:
    records = tree()
    change(records)
    lookups = _host._c_lookups(records)
    args = (records.apis, records.node_basics, records.tensors, records.tracks, False, True, lookups)
    assert _host._C_HOST_TABLES is not None
    assert _host._C_HOST_TABLES(*args) is None
    flags = {"level0": False, "all_export": True}
    assert outcome(records, accelerated=True, **flags) == outcome(records, accelerated=False, **flags)


def test_the_pure_python_switch_turns_the_c_loops_off(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    c_loops = _host._C_HOST_TABLES

    def spy(*args: Any) -> object:
        calls.append(args)
        return c_loops(*args)  # type: ignore[misc]

    monkeypatch.setattr(_host, "_C_HOST_TABLES", spy)
    monkeypatch.setenv("ASC_APROF_PURE_PYTHON", "1")
    pure = host_tables(tree(), level0=False, all_export=True)
    assert not calls and not _host.accelerated_default()
    files = packed(tree())
    assert not taken(files, []).in_place  # decoded when taken: nothing for the C loops to read
    monkeypatch.delenv("ASC_APROF_PURE_PYTHON")
    assert host_tables(tree(), level0=False, all_export=True) == pure
    assert len(calls) == 1 and _host.accelerated_default()
    assert taken(files, []).in_place.keys() == files.keys()


def test_a_build_without_the_extension_reads_in_pure_python() -> None:
    # The extension is optional: with it hidden, the module loads, says so, and declines nothing.
    code = (
        "import sys; sys.modules['asc_aprof._plans._raw._chost'] = None\n"
        "from asc_aprof._plans._raw import _host\n"
        "print(_host._C_HOST_TABLES, _host.accelerated_default())"
    )
    env = {k: v for k, v in os.environ.items() if k != "ASC_APROF_PURE_PYTHON"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["None", "False"]


# -- real runs ------------------------------------------------------------------------------------


@pytest.mark.skipif(not REAL_RUNS.is_dir(), reason="no real runs beside the repository")
@pytest.mark.parametrize("name", real_run_names())
def test_real_runs_read_the_same_with_c_and_pure_loops(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, run_id = copy_run(name, tmp_path)
    seen: list[tuple[HostRecords, dict[str, bool]]] = []

    def capture(records: HostRecords, **flags: bool) -> _host.HostTables:
        # a copy: the decode empties its records once it has the tables (freed in steps)
        copied = HostRecords(records.hashes, records.types)
        for kind in ("apis", "node_basics", "tensors", "contexts", "tracks"):
            setattr(copied, kind, list(getattr(records, kind)))
        copied.in_place = dict(records.in_place)
        seen.append((copied, flags))
        return host_tables(records, **flags)

    monkeypatch.setattr(_run, "host_tables", capture)
    monkeypatch.setenv("ASC_APROF_PURE_PYTHON", "1")
    pure = read_run(path / run_id, with_task_time=True)
    monkeypatch.delenv("ASC_APROF_PURE_PYTHON")
    fast = read_run(path / run_id, with_task_time=True)
    assert dataclasses.asdict(fast) == dataclasses.asdict(pure)
    (pure_records, flags), (fast_records, fast_flags) = seen
    assert fast_flags == flags and fast_records.in_place  # the C loops read the files in place
    c_tables = outcome(fast_records, accelerated=True, **flags)
    assert c_tables == outcome(pure_records, accelerated=False, **flags)
    assert isinstance(c_tables, tuple) and c_tables[0]  # tables, not an error: the run has tasks


# -- the lean walk (GE tasks only, the calls kept as intervals) -----------------------------------


def lean_walk(
    files: dict[str, bytes], tensors: list[HeaderRecord], all_export: bool, cuts: list[int]
) -> object:
    """The lean walk's GE tasks (with their classes, in (device, stream, task) order) of the files,
    each fed in slices cut after the records *cuts* names; or "whole" where it declines the run,
    or the error a lookup raised (as :func:`outcome` gives them)."""
    sizes = {"apis": 40, "node_basics": 64, "tracks": 64}
    names = {"apis": "api_event", "node_basics": "node_basic_info", "tracks": "task_track"}

    def feed(kind: str) -> None:
        data, size = files[kind], sizes[kind]
        bounds = sorted({0, len(data), *(size * c for c in cuts if size * c < len(data))})
        for lo, hi in itertools.pairwise(bounds):
            walk.feed(names[kind], data[lo:hi])

    try:
        walk = _host.LeanWalk(
            HostRecords(dict(HASHES), {k: dict(v) for k, v in TYPES.items()}), all_export=all_export
        )
        feed("apis")
        walk.walk()
        feed("node_basics")
        walk.tensors(tensors)
        feed("tracks")
        packs = walk.finish()
    except WholeDecodeNeeded:
        return "whole"
    except DeclinedError as exc:
        return exc.declined
    except Exception as exc:
        return type(exc), exc.args
    made = [(type(g), g) for pack in packs.values() for g in pack]
    assert all(len(pack) and all(g.device_id == d for g in pack) for d, pack in packs.items())
    return sorted(made, key=lambda x: (x[1].device_id, x[1].stream_id, x[1].task_id))


@settings(max_examples=500)
@given(
    records=streams(),
    all_export=st.booleans(),
    cuts=st.lists(st.integers(1, 11), max_size=3),
)
def test_the_lean_walk_gives_the_queue_walks_ge_tasks_or_declines(
    records: HostRecords, all_export: bool, cuts: list[int]
) -> None:
    """Fed the files a slice at a time, the lean walk gives the GE tasks the pure loops give at
    level 1 (the same records, per device), or declines the run ("whole": read it whole) where
    the pure loops decline it, or two host tasks share their ids; a lookup's error is theirs."""
    files = packed(records)
    lean = lean_walk(files, records.tensors, all_export, cuts)
    pure = outcome(taken(files, records.tensors), accelerated=False, level0=False, all_export=all_export)
    if isinstance(pure, tuple) and len(pure) == 2 and isinstance(pure[0], list):
        ids = [(h.device_id, h.stream_id, h.task_id, h.context_id) for _, h in pure[0]]
        unique = len(set(ids)) == len(ids) and all(d < 1 << 10 and s < 1 << 20 for d, s, _, _ in ids)
        event(f"pure tables, ids unique: {unique}, lean: {'whole' if lean == 'whole' else 'tasks'}")
        if unique:
            assert lean == sorted(pure[1], key=lambda x: (x[1].device_id, x[1].stream_id, x[1].task_id))
        else:
            assert lean == "whole"
    else:
        event(f"pure declines, lean: {'whole' if lean == 'whole' else 'other'}")
        # a decline (or error) of the pure loops: the lean walk declines too, or raises the same
        assert lean == "whole" or lean == pure, (lean, pure)


def test_the_lean_walk_declines_a_slice_of_part_records_and_is_fed_in_order() -> None:
    records = tree()
    files = packed(records)
    walk = _host.LeanWalk(records, all_export=True)
    with pytest.raises(WholeDecodeNeeded, match="api_event"):
        walk.feed("api_event", files["apis"][:-1])  # (a torn slice: the whole decode drops its head)
    walk = _host.LeanWalk(records, all_export=True)
    with pytest.raises(ValueError, match="out of order"):
        walk.feed("task_track", files["tracks"])  # (before the calls are walked)


def test_the_lean_walk_packs_the_tree_and_its_records_read_as_a_sequence() -> None:
    records = tree()
    files = packed(records)
    walk = _host.LeanWalk(records, all_export=True)
    walk.feed("api_event", files["apis"])
    walk.walk()
    walk.feed("node_basic_info", files["node_basics"])
    walk.tensors(records.tensors)
    walk.feed("task_track", files["tracks"])
    (pack,) = walk.finish().values()
    full = host_tables(tree(), level0=False, all_export=True, accelerated=False)
    assert isinstance(pack, _host.PackedGe) and len(pack) == 2
    assert list(pack) == full.ge_tasks and all(type(g) is GeTask for g in pack)
    assert pack[-1] == pack[1] == full.ge_tasks[1] and pack[0:2] == pack[:] == full.ge_tasks
    assert pack[::-1] == full.ge_tasks[::-1] and pack[5:9] == []
    with pytest.raises(IndexError):
        pack[2]
    assert not pack.unknown_type()


@pytest.mark.skipif(not REAL_RUNS.is_dir(), reason="no real runs beside the repository")
@pytest.mark.parametrize("name", real_run_names())
def test_real_runs_read_lean_the_same_with_the_lean_walk_and_the_pure_loops(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # read_run's lean decode: at level 1 the GE tasks by the lean walk (C), against the pure loops
    path, run_id = copy_run(name, tmp_path)
    walks: list[dict[int, _host.PackedGe]] = []
    lean_host = _run._lean_host

    def spy(*args: Any, **kwargs: Any) -> dict[int, _host.PackedGe]:
        walks.append(lean_host(*args, **kwargs))
        return walks[-1]

    monkeypatch.setattr(_run, "_lean_host", spy)
    monkeypatch.setenv("ASC_APROF_PURE_PYTHON", "1")
    pure = read_run(path / run_id)
    monkeypatch.delenv("ASC_APROF_PURE_PYTHON")
    assert not walks
    fast = read_run(path / run_id)
    assert dataclasses.asdict(fast) == dataclasses.asdict(pure)
    assert isinstance(fast, RawResult) and fast.tasks
    assert len(walks) == (0 if fast.level0 else 1)  # (the lean walk runs at level 1 only)
    if walks:
        assert sum(len(p) for p in walks[0].values()) == len(fast.tasks)


def test_the_lean_walk_of_a_big_stream_equals_the_pure_loops() -> None:
    # 150,000 kernels, each in its own node launch: the walk's arrays pass the size where the C
    # loops' scratch memory is mapped (and grown by remapping) rather than taken from the heap.
    n = 150_000
    records = HostRecords(dict(HASHES), {k: dict(v) for k, v in TYPES.items()})
    records.apis = [ApiRecord(10000, 5, 7, 10 * i + 10, 10 * i + 15, 1) for i in range(n)]
    records.node_basics = [
        NodeBasicRecord(10000, 0, 7, 10 * i + 11, 1, 2, 0, 1 << 16 | i % 40, 0) for i in range(n)
    ]
    records.tracks = [
        TaskTrackRecord(5000, 802, 7, 10 * i + 12, 0, 0, i // 60_000, i % 60_000, 0, 66, 6) for i in range(n)
    ]
    found = lean_walk(packed(records), [], True, [n // 3])
    pure = outcome(records, accelerated=False, level0=False, all_export=True)
    assert isinstance(pure, tuple) and len(pure[1]) == n
    assert found == sorted(pure[1], key=lambda x: (x[1].device_id, x[1].stream_id, x[1].task_id))
