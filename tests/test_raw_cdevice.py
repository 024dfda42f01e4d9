"""The raw reader's C device loops (``_cdevice``) against the pure-Python reference in ``_run``:
the same records, floats, printed starts, filters and declines, on generated input meant to
hit the edges (lost starts and ends, equal times, bit-packed stream ids, duplicate ids, starts
where integers do not reach and the Decimal path prints, durations that round on a tie).

Every comparison runs the pure code with ``_accel.ACCELERATED`` off, the switch that
``ASC_APROF_PURE_PYTHON=1`` clears at import. The real runs are compared in
``tests/real/test_real_cdevice.py``.
"""

from __future__ import annotations

import functools
import math
import os
import random
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from asc_aprof._plans._raw import _accel, _run
from asc_aprof._plans._raw._decode import SQE_TYPES, STARS_MAGIC, StarsColumns
from asc_aprof._plans._raw._host import GeTask, HostTask
from asc_aprof._plans._raw._run import INVALID_CONTEXT, DevicePlan, _Device, _paired_tasks, _top_down
from asc_aprof._plans._raw._types import DeclinedError, PackedPart, PackedRows

from .test_raw_fastpaths import OFFSETS as FASTPATH_OFFSETS
from .test_raw_fastpaths import clock

pytestmark = pytest.mark.skipif(_accel.C is None, reason="the optional C extension _cdevice is not built")

T = TypeVar("T")


def both(call: Callable[[], T]) -> tuple[object, object]:
    """What *call* gives (or the error it raises) with C and with the pure code."""

    def outcome(accelerated: bool) -> object:
        saved = _accel.ACCELERATED
        _accel.ACCELERATED = accelerated
        try:
            return call()
        except DeclinedError as exc:
            return exc.declined
        except ArithmeticError as exc:  # the Decimal context's, on starts beyond 28 digits
            return type(exc)
        finally:
            _accel.ACCELERATED = saved

    return outcome(True), outcome(False)


def exact(value: object) -> object:
    """*value* with floats as their repr (-0.0 and 0.0 differ), and record types kept."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, tuple | list):
        return (type(value).__name__, [exact(v) for v in value])
    return value


needs_c = pytest.mark.skipif(_accel.C is None, reason="the optional C extension _cdevice is not built")


def same(call: Callable[[], object]) -> None:
    fast, pure = both(call)
    assert exact(fast) == exact(pure)


@pytest.fixture(autouse=True)
def accelerated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("ASC_APROF_PURE_PYTHON", raising=False)  # it would turn C off at every call
    saved = _accel.ACCELERATED
    _accel.ACCELERATED = True
    yield
    _accel.ACCELERATED = saved


@pytest.mark.parametrize(("value", "expected"), [("1", "False"), ("0", "True"), (None, "True")])
def test_the_environment_switch_turns_the_c_device_loops_off(value: str | None, expected: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ASC_APROF_PURE_PYTHON"}
    if value is not None:
        env["ASC_APROF_PURE_PYTHON"] = value
    code = "import asc_aprof._plans._raw._accel as a; print(a.active() is not None)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [expected]


def test_the_switch_set_at_run_time_turns_off_both_halves_of_the_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from asc_aprof._plans._raw import _host

    monkeypatch.setattr(_accel, "ACCELERATED", True)
    monkeypatch.delenv("ASC_APROF_PURE_PYTHON", raising=False)
    assert _accel.active() is _accel.C
    monkeypatch.setenv("ASC_APROF_PURE_PYTHON", "1")
    assert _accel.active() is None and not _host.accelerated_default()
    monkeypatch.delenv("ASC_APROF_PURE_PYTHON")  # unset again: both come back
    assert _accel.active() is _accel.C and _host.accelerated_default()


# -- round(x, 3) -------------------------------------------------------------------------------------

DURATIONS = st.one_of(
    st.floats(min_value=0.0, max_value=1e6),
    st.floats(allow_nan=True, allow_infinity=True),
    # exact ties of the third decimal: k / 2**j with few bits
    st.builds(lambda k, j: k / 2.0**j, st.integers(0, 10**7), st.integers(0, 12)),
    st.builds(lambda k: k / 2000.0, st.integers(0, 10**9)),
    st.floats(min_value=2.0**50, max_value=2.0**60),
    st.floats(min_value=0.0, max_value=1e-300),
)


@given(DURATIONS)
def test_round3_is_pythons_round(x: float) -> None:
    assert _accel.C is not None
    got, expected = _accel.C.round3(x), round(x, 3)
    assert repr(got) == repr(expected)


# -- printed starts ------------------------------------------------------------------------------------


OFFSETS = st.one_of(
    FASTPATH_OFFSETS,
    # exponent forms (1e16 and up, below 1e-4), negative offsets, many decimals: the Decimal path
    st.floats(min_value=1e-7, max_value=1e-3),
    st.sampled_from([0.0, 1e16, 9.999999999999998e15, 1e-4, 0.1, 123456789.123456789]),
)
NS = st.one_of(
    st.floats(min_value=7.0e13, max_value=9.0e13),
    st.floats(min_value=0.0, max_value=1e5),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.integers(0, 10**15).map(float),
    # around 1 µs (the integer path needs 1000 ns or more) and many decimals
    st.floats(min_value=999.0, max_value=1001.0),
    st.floats(min_value=1e-4, max_value=1e-1),
    st.sampled_from([0.5, 1000.0, 999.9995, 1e16, 9.999999999999998e15, 5e-324, -0.0, -1.0, 1e15]),
    # halfway between two ns, and one unit in the last place beside it
    st.builds(
        lambda k, up: math.nextafter(k + 0.5, math.inf if up else -math.inf),
        st.integers(0, 10**15),
        st.booleans(),
    ),
    st.integers(0, 10**14).map(lambda k: k + 0.5),
)


@given(st.lists(NS, max_size=6), OFFSETS, st.booleans())
def test_printed_starts_equal_the_pure_ones(values: list[float], offset: float, text: bool) -> None:
    c = clock(offset)
    same(lambda: c.printed_all(values, text=text))


# -- pairing -------------------------------------------------------------------------------------------

RECORD = st.tuples(
    st.integers(0, 1),  # start or end
    st.integers(0, 3),  # SQE type
    st.one_of(st.integers(0, 2), st.integers(2040, 2050), st.sampled_from([0x8000, 0x8001, 0x8805])),
    st.one_of(st.integers(0, 4), st.sampled_from([0x8003, 0xFFFF])),
    st.integers(0, 40),  # few counter values: equal times are common
)


def columns_of(recs: list[tuple[int, int, int, int, int]], big: bool = False) -> StarsColumns:
    scale = 2**63 if big else 1_000_000
    return StarsColumns(
        [function | sqe << 10 for function, sqe, _, _, _ in recs],
        [stream for _, _, stream, _, _ in recs],
        [task for _, _, _, task, _ in recs],
        [scale + 20 * counter for *_, counter in recs],
    )


@given(st.lists(RECORD, max_size=40), st.booleans(), st.booleans())
def test_pairing_equals_the_pure_pairing(
    recs: list[tuple[int, int, int, int, int]], expanded: bool, big: bool
) -> None:
    columns = columns_of(recs, big)
    c = clock(1.0)
    same(lambda: _paired_tasks(columns, c, "device_0", expanded))


@given(st.integers(0, 2**32 - 1), st.booleans())
@settings(max_examples=10, deadline=None)
def test_pairing_of_many_groups_equals_the_pure_pairing(seed: int, shuffled: bool) -> None:
    # Beyond the groups' first table (it starts small and grows): some 6,000 (stream, task)
    # groups, with stray ends, starts without ends and ties; in file order, or shuffled (the
    # records then sorted by time first).
    rng = random.Random(seed)
    recs: list[tuple[int, int, int, int, int]] = []
    for k in range(12_000):
        stream, task = rng.randrange(3), rng.randrange(2_000)
        function = rng.randrange(2) if rng.random() < 0.1 else k % 2
        recs.append((function, rng.randrange(4), stream, task, k // 3))
    if shuffled:
        rng.shuffle(recs)
    columns = columns_of(recs)
    c = clock(1.0)
    same(lambda: _paired_tasks(columns, c, "device_0", False))


@given(st.lists(RECORD, max_size=20), st.integers(2, 63))
def test_pairing_declines_as_the_pure_code(recs: list[tuple[int, int, int, int, int]], bad: int) -> None:
    # A function the reader does not know, or an SQE type beyond the table, anywhere.
    columns = columns_of(recs)
    columns.headers.append(bad if bad < 32 else len(SQE_TYPES) << 10)
    columns.streams.append(0)
    columns.tasks.append(0)
    columns.counters.append(1_000_000)
    c = clock(1.0)
    fast, pure = both(lambda: _paired_tasks(columns, c, "device_0", False))
    assert fast == pure and not isinstance(pure, list)


def stars_record(clean: bool, counters: st.SearchStrategy[int] | None = None) -> st.SearchStrategy[bytes]:
    """A stars_soc record; *clean*: one the C decoder takes (else sometimes one it leaves);
    *counters*: its counter (else a mix of small, float-rounding and any)."""
    return st.builds(
        lambda function, bits, sqe, magic, stream, task, counter, rest: (
            struct.pack("<HHHHQ", function | bits << 6 | sqe << 10, magic, stream, task, counter) + rest
        ),
        st.sampled_from([0, 1] if clean else [0, 1, 34, 35, 2]),
        st.integers(0, 15),  # header bits 6-9, which the decoder clears
        st.integers(0, 3) if clean else st.integers(0, 63),
        st.just(STARS_MAGIC) if clean else st.one_of(st.just(STARS_MAGIC), st.integers(0, 0xFFFF)),
        st.integers(0, 2) if clean else st.one_of(st.integers(0, 2), st.integers(0, 0xFFFF)),
        st.integers(0, 4),
        counters
        if counters is not None
        else st.one_of(
            st.integers(0, 40).map(lambda k: 1_000_000 + 20 * k),
            st.integers(0, 40).map(lambda k: 2**53 - 60 + 3 * k),  # from 2**53 on floats round
            st.integers(0, 2**64 - 1),
        ),
        st.binary(min_size=48, max_size=48),
    )


@given(
    st.lists(stars_record(True), max_size=30),
    st.lists(st.tuples(st.integers(0, 30), stars_record(False)), max_size=2),
    st.binary(max_size=63),
    st.booleans(),
)
def test_pairing_from_the_stars_bytes_equals_the_pure_decode_and_pairing(
    recs: list[bytes], odd: list[tuple[int, bytes]], torn: bytes, expanded: bool
) -> None:
    for at, rec in odd:
        recs.insert(at, rec)
    data = torn + b"".join(recs)
    c = clock(1.0)
    same(lambda: _run._stars_tasks(data, c, "device_0", expanded))


# -- the top-down join ------------------------------------------------------------------------------------

HOST_KEY = st.tuples(
    st.integers(0, 3), st.integers(0, 3), st.sampled_from([0, 1, INVALID_CONTEXT]), st.sampled_from([0, 0, 1])
)


def host_task(key: tuple[int, int, int, int], kind: str) -> HostTask:
    return HostTask(0, *key, kind, f"kernel_{kind}", 7)


def device_task(stream: int, task: int, context: int, start: float, duration: float) -> Any:
    return _run._DeviceTask(stream, task, context, "AI_CORE", start, duration, 100, 200)


DEVICE = st.tuples(
    st.integers(0, 3),
    st.integers(0, 3),
    st.sampled_from([0, 1, INVALID_CONTEXT]),
    st.one_of(st.integers(0, 5).map(float), st.floats(-2.0, 1e9), st.just(-1.0)),
    st.floats(0.0, 1e6),
)


@given(
    st.lists(st.tuples(HOST_KEY, st.sampled_from(["KERNEL_AICORE", "FFTS_PLUS", "EVENT_RECORD"]))),
    st.lists(DEVICE, max_size=12),
)
def test_top_down_equals_the_pure_join(
    hosts: list[tuple[tuple[int, int, int, int], str]], devices: list[tuple[int, int, int, float, float]]
) -> None:
    # Duplicate ids on either side are common here: both decline them alike.
    host = [host_task(key, kind) for key, kind in hosts]
    device = [device_task(*d) for d in devices]
    same(lambda: _top_down(host, device, "device_0"))


# -- op_summary rows ------------------------------------------------------------------------------------

PLAN = DevicePlan(0, "device_0", "", "", "", "", "", (), (), ())


def op_rows(
    ascend: list[Any], ge: list[GeTask], offset: float, begin: str, level0: bool, rows_only: bool = False
) -> tuple[list[Any], list[Any]]:
    hashes = {"h1": "hashed_name"}
    out = _Device(PLAN, clock(offset, begin), list(ascend), [], list(ge), hashes, level0, rows_only=rows_only)
    assert isinstance(out.op_rows, list)  # (not packed)
    return out.joined, out.op_rows


GE_TYPE = st.sampled_from(["KERNEL_AICORE", "KERNEL_AIVEC", "WRITE_BACK", "INVALID", "N/A"])
GE_TASK = st.tuples(HOST_KEY, st.sampled_from(["h1", "op"]), GE_TYPE, st.integers(0, 48))
START = st.one_of(
    st.floats(7.0e13, 9.0e13),
    st.floats(0.0, 3e6),
    st.integers(0, 40).map(lambda k: 8.0e13 + 500.25 * k),
    st.just(-1.0),
)


@given(
    st.lists(st.tuples(HOST_KEY, START, st.floats(0.0, 1e7)), max_size=12),
    st.lists(st.tuples(GE_TASK, st.sampled_from([0, 0, 0, 1])), max_size=16),
    st.one_of(OFFSETS, st.just(1784171285670891.0 - 8.0e10)),
    st.sampled_from(["1784171285670891", "1784171205670891", "0", "17841712856708910", "abc"]),
    st.booleans(),
    st.booleans(),
)
def test_op_summary_rows_equal_the_pure_rows(
    tasks: list[tuple[tuple[int, int, int, int], float, float]],
    ge_tasks: list[tuple[tuple[tuple[int, int, int, int], str, str, int], int]],
    offset: float,
    begin: str,
    level0: bool,
    rows_only: bool,
) -> None:
    # Top-down tasks in start order (as _top_down gives them), some never run (start -1);
    # equal starts and repeated ids are common, and both decline them alike.
    ascend = sorted(
        (
            _run._Ascend(s, t, c, b, start, -1 if start == -1 else duration, "KERNEL", "AI_CORE", 10, 20)
            for (s, t, c, b), start, duration in tasks
        ),
        key=lambda a: a.start,
    )
    # device 0's GE tasks among device 1's (the C join indexes device 0's as _ge_index does)
    ge = [
        GeTask(device, s, t, c, b, op_name, kind, block, block + 1)
        for ((s, t, c, b), op_name, kind, block), device in ge_tasks
    ]
    same(lambda: op_rows(ascend, ge, offset, begin, level0, rows_only))
    if rows_only:
        # the same rows, bare, without the pairs; everything else let go
        try:
            joined, bare = op_rows(ascend, ge, offset, begin, level0, rows_only=True)
            _, wrapped = op_rows(ascend, ge, offset, begin, level0)
        except (DeclinedError, ArithmeticError):  # (declined alike: compared above)
            return
        assert joined == [] and exact(bare) == exact([row.raw for row in wrapped])
        # packed (C only): the same records, made from the packed rows, and their public ones
        out = _Device(
            PLAN, clock(offset, begin), list(ascend), [], list(ge), {"h1": "hashed_name"}, level0, packed=True
        )
        packed = out.op_rows
        event(f"packed: {isinstance(packed, PackedRows)}, rows: {min(len(bare), 2)}")
        if isinstance(packed, PackedRows):
            assert exact(packed.records(0, len(packed))) == exact(bare)
            assert packed.records(0, len(packed), public=True) == [raw.task() for raw in bare]
        else:  # (a value with no packed form: the records themselves)
            assert exact(packed) == exact(bare)


# -- one device's host records --------------------------------------------------------------------------


@given(st.lists(st.tuples(st.integers(0, 2), HOST_KEY, st.sampled_from(["KERNEL_AICORE", "WRITE_BACK"]))))
def test_device_host_and_ge_tasks_equal_the_pure_ones(
    tasks: list[tuple[int, tuple[int, int, int, int], str]],
) -> None:
    host = tuple(HostTask(d, *key, kind, "k", 0) for d, key, kind in tasks)
    ge = tuple(GeTask(d, s, t, c, b, "op", kind, 1, 2) for d, (s, t, c, b), kind in tasks)
    for device in (0, 1, 3):
        same(functools.partial(_run._of_device, host, device))
        same(functools.partial(_run._ge_index, ge, device))


# -- records hash as the pure ones ----------------------------------------------------------------------


def records_hash_alike() -> int:
    """C records equal the pure ones and hash alike (see src/asc_aprof/_plans/_record_new.h); returns
    the extension's ``RECORDS_VIA_NEW``. tests/test_record_hash.py runs it both ways."""
    columns = columns_of([(0, 0, 1, 2, 3), (1, 0, 1, 2, 5), (0, 1, 2, 3, 7), (1, 1, 2, 3, 9)])
    c = clock(1.0)
    host = [host_task((1, 2, INVALID_CONTEXT, 0), "KERNEL_AICORE"), host_task((3, 3, 0, 1), "EVENT_RECORD")]
    for call in (
        lambda: _paired_tasks(columns, c, "device_0", False),
        lambda: _top_down(host, _paired_tasks(columns, c, "device_0", False), "device_0"),
    ):
        fast, pure = both(call)
        assert isinstance(fast, list) and isinstance(pure, list) and len(fast) >= 2
        assert exact(fast) == exact(pure)
        assert [hash(r) for r in fast] == [hash(r) for r in pure] and len(set(fast)) == len(fast)
    assert _accel.C is not None
    return int(_accel.C.RECORDS_VIA_NEW)


@needs_c
@pytest.mark.parametrize("level0", [False, True])
def test_packed_rows_are_the_rows_records(level0: bool) -> None:
    # A device of 3,000 kernels (several packed slices): the packed rows make the records the
    # unpacked op_summary makes, one at a time, by slices and iterated, and their public ones.
    offset = float("1784171285670891") - float("76274796599930") / 1000.0
    ascend = [
        _run._Ascend(
            1, t, INVALID_CONTEXT, 0, 8.0e13 + 500.25 * t, 1000.0 + t, "KERNEL", "AI_CORE", 10 + t, 20 + t
        )
        for t in range(3000)
    ]
    ge = [
        GeTask(0, 1, t, INVALID_CONTEXT, 0, "h1" if t % 2 else f"op{t % 7}", "AI_CORE", 8, 16)
        for t in range(3000)
    ]
    hashes = {"h1": "hashed_name"}
    bare = _Device(PLAN, clock(offset), list(ascend), [], list(ge), hashes, level0, rows_only=True).op_rows
    packed = _Device(PLAN, clock(offset), list(ascend), [], list(ge), hashes, level0, packed=True).op_rows
    assert isinstance(packed, PackedRows) and len(bare) == len(packed) == 3000
    assert exact(list(packed)) == exact(bare)
    assert exact(packed[1234]) == exact(bare[1234]) and exact(packed[-1]) == exact(bare[-1])
    assert exact(packed[2040:2060]) == exact(tuple(bare[2040:2060])) and packed[5:5] == ()
    assert packed.records(100, 2200, public=True) == [raw.task() for raw in bare[100:2200]]
    with pytest.raises(IndexError):
        packed[3000]
    both = PackedRows([*packed._parts, *packed._parts])  # (devices after each other)
    assert len(both) == 6000 and exact(both.records(2990, 3010)) == exact([*bare[2990:], *bare[:10]])


@needs_c
def test_a_value_with_no_packed_form_gives_the_records() -> None:
    offset = float("1784171285670891") - float("76274796599930") / 1000.0
    ascend = [_run._Ascend(1, 7, INVALID_CONTEXT, 0, 8.0e13, 1000.0, "K", "AI_CORE", 2**64 + 5, 20)]
    ge = [GeTask(0, 1, 7, INVALID_CONTEXT, 0, "op", "AI_CORE", 8, 16)]
    rows = _Device(PLAN, clock(offset), list(ascend), [], list(ge), {}, False, packed=True).op_rows
    assert isinstance(rows, list) and rows[0].start_cycles == 2**64 + 5


# -- one device's rows packed straight from its task log ---------------------------------------------


def steps_rows(
    data: bytes, ge: list[GeTask], limits: dict[int, float] | None, hashes: dict[str, str]
) -> list[Any] | None:
    """The rows _device makes step by step of a level-1 device without host tasks (None: declined)."""
    c = clock(float("1784171285670891") - float("76274796599930") / 1000.0)
    try:
        device_tasks, subtasks = _run._stars_tasks(data, c, "device_0", False)
        if subtasks:
            return None
        for task in device_tasks:
            limit = (limits or {}).get(task.stream_id)
            if limit is not None and task.start >= limit:
                return None
        ascend = _top_down([], device_tasks, "device_0")
        rows = _Device(PLAN, c, ascend, [], list(ge), hashes, False, rows_only=True).op_rows
    except DeclinedError:
        return None
    assert isinstance(rows, list)
    return rows


#: Counters of tasks that start within the collection of clock(...) below (the rows are kept)
KEPT_COUNTERS = st.one_of(
    st.integers(0, 60).map(lambda k: 3_815_399_831_000 + 20 * k), st.integers(0, 2**64 - 1)
)


@st.composite
def task_log(draw: st.DrawFn) -> bytes:
    """A task log of tasks of distinct ids (each a start and, mostly, an end record), in time
    order, with a few records of any kind among them."""
    keys = draw(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 6)), unique=True, max_size=12))
    recs: list[tuple[int, bytes]] = []
    for stream, task in keys:
        start = draw(st.integers(0, 400)) * 20 + 3_815_399_831_000
        sqe = draw(st.integers(0, 3))
        recs.append((start, struct.pack("<HHHHQ", sqe << 10, STARS_MAGIC, stream, task, start) + bytes(48)))
        if draw(st.integers(0, 9)):  # (else its end was lost)
            end = start + draw(st.integers(1, 50))
            recs.append(
                (end, struct.pack("<HHHHQ", 1 | sqe << 10, STARS_MAGIC, stream, task, end) + bytes(48))
            )
    recs.sort(key=lambda r: r[0])
    out = [rec for _, rec in recs]
    for at, rec in draw(
        st.lists(st.tuples(st.integers(0, 30), stars_record(True, KEPT_COUNTERS)), max_size=2)
    ):
        out.insert(at, rec)
    return b"".join(out)


@needs_c
@given(
    task_log(),
    # per id of the log's (stream, task) grid: its GE task (some of another device, context or
    # type, some left out), and at times a second one
    st.lists(
        st.tuples(
            st.sampled_from([INVALID_CONTEXT, INVALID_CONTEXT, INVALID_CONTEXT, 0]),
            st.sampled_from(["h1", "op"]),
            st.sampled_from(["AI_CORE", "AI_CORE", "AI_VECTOR_CORE", "WRITE_BACK", "INVALID"]),
            st.sampled_from([0, 0, 0, 1, None]),
            st.integers(0, 12),
        ),
        min_size=21,
        max_size=21,
    ),
    st.one_of(
        st.none(),
        st.dictionaries(
            st.integers(0, 2),
            st.integers(0, 60).map(lambda k: 76_274_796_620_000.0 + 80_000.0 * k),
            max_size=2,
        ),
    ),
)
@settings(max_examples=300)
def test_a_device_packed_from_its_task_log_has_the_rows_of_the_steps(
    data: bytes,
    ge_tasks: list[tuple[int, str, str, int | None, int]],
    limits: dict[int, float] | None,
) -> None:
    ge = [
        GeTask(device, at // 7, at % 7, ctx, 0, name, kind, block, 16)
        for at, (ctx, name, kind, device, block) in enumerate(ge_tasks)
        if device is not None
    ]
    ge += [g._replace(op_name="second") for g in ge if g.block_num == 12]
    hashes = {"h1": "hashed_name"}
    expected = steps_rows(data, ge, limits, hashes)
    c = clock(float("1784171285670891") - float("76274796599930") / 1000.0)
    base, hertz, offset = c.terms()
    assert _accel.C is not None
    args = (
        STARS_MAGIC,
        base,
        hertz,
        offset,
        SQE_TYPES,
        ge,
        hashes,
        0,
        c.c_printer(),
        limits,
        INVALID_CONTEXT,
    )
    found = _accel.C.packed_device(data, *args)
    # handed over in a box, the task log is let go of once its records are read
    box = [data]
    boxed = _accel.C.packed_device(box, *args)
    # or as an iterator of pieces (each of whole records: else None)
    cut = len(data) // 128 * 64
    in_pieces = _accel.C.packed_device([iter([data[:cut], b"", data[cut:]])], *args)
    event(f"packed: {found is not None}, steps: {'declined' if expected is None else min(len(expected), 2)}")
    assert (boxed is None) == (found is None)
    assert (in_pieces is None) == (found is None or len(data) % 64 != 0)
    if in_pieces is not None:
        assert found is not None
        again = PackedRows([PackedPart(in_pieces[0], in_pieces[1], in_pieces[2], 0, False)])
        first = PackedRows([PackedPart(found[0], found[1], found[2], 0, False)])
        assert exact(again.records(0, len(again))) == exact(first.records(0, len(first)))
    if found is None:
        return  # (the steps decide)
    assert expected is not None and box == [] and boxed is not None
    packed = PackedRows([PackedPart(found[0], found[1], found[2], 0, False)])
    assert exact(packed.records(0, len(packed))) == exact(expected)
    again = PackedRows([PackedPart(boxed[0], boxed[1], boxed[2], 0, False)])
    assert exact(again.records(0, len(again))) == exact(expected)


@needs_c
@pytest.mark.parametrize(
    ("stream", "block"), [(3, 8), (70_000, 8), (3, 1 << 32)], ids=["fits", "stream_id", "block_dims"]
)
def test_rows_whose_ids_or_block_dims_do_not_fit_a_packed_row_stay_records(stream: int, block: int) -> None:
    # a packed row keeps stream and batch ids in 16 bits, task ids and block dims in 32
    ascend = [_run._Ascend(stream, 5, INVALID_CONTEXT, 0, 8.0e13, 2000.0, "KERNEL", "AI_CORE", 10, 20)]
    ge = [GeTask(0, stream, 5, INVALID_CONTEXT, 0, "op", "AI_CORE", block, block)]
    offset, begin = 1784171285670891.0 - 8.0e10, "1784171285670891"
    _, bare = op_rows(ascend, ge, offset, begin, False, rows_only=True)
    out = _Device(PLAN, clock(offset, begin), list(ascend), [], list(ge), {}, False, packed=True)
    rows = out.op_rows
    assert isinstance(rows, PackedRows) is ((stream, block) == (3, 8))
    assert len(bare) == 1 and exact(list(rows)) == exact(bare)
