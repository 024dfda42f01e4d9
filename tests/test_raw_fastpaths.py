"""The raw reader's fast paths against their references: the column decoders against the
record-by-record loops, integer printed starts against the exporter's Decimal arithmetic, the
index-list pairing against the pairing as the exporter writes it, and the collector pause."""

from __future__ import annotations

import decimal
import gc
import struct
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from asc_aprof._plans._raw import _decode
from asc_aprof._plans._raw._decode import (
    HOST_MAGIC,
    SQE_TYPES,
    STARS_MAGIC,
    StarsColumns,
    api_records,
    node_basic_records,
    stars_columns,
    stars_records,
    task_track_records,
)
from asc_aprof._plans._raw._run import INVALID_CONTEXT, DeviceClock, _paired_tasks
from asc_aprof._plans._raw._types import DeclinedError
from asc_aprof._runs._raw_files import _GcPause

U16 = st.integers(0, 0xFFFF)
U32 = st.integers(0, 0xFFFFFFFF)
U64 = st.integers(0, (1 << 64) - 1)
# Mostly valid values, sometimes the ones the decoders decline or drop.
MAGIC = st.one_of(st.just(HOST_MAGIC), st.just(HOST_MAGIC), st.just(HOST_MAGIC), U16)
LEVEL = st.one_of(st.sampled_from(sorted(_decode.LEVELS)), U16)


def outcome(decode: object, data: bytes) -> object:
    """What a decoder returns, or the decline it raises (reason and message)."""
    try:
        return decode(data)  # type: ignore[operator]
    except DeclinedError as exc:
        return exc.declined


api_record = st.builds(
    lambda m, lv, ty, th, s, e, it: struct.pack("<HHIIIQQQ", m, lv, ty, th, 24, s, e, it),
    MAGIC,
    LEVEL,
    U32,
    U32,
    st.one_of(st.just(0), U64),
    st.one_of(st.just((1 << 64) - 1), U64),
    U64,
)
track_record = st.builds(
    lambda m, lv, ty, th, ts, dev, s, t, b, tt, k: struct.pack(
        "<HHIIIQHHHHQQ16x", m, lv, ty, th, 24, ts, dev, s, t, b, tt, k
    ),
    MAGIC,
    LEVEL,
    U32,
    U32,
    U64,
    U16,
    U16,
    U16,
    U16,
    U64,
    U64,
)
basic_record = st.builds(
    lambda m, lv, ty, th, ts, node, tt, op, block, flag: struct.pack(
        "<HHIIIQQIQII12x", m, lv, ty, th, 24, ts, node, tt, op, block, flag
    ),
    MAGIC,
    LEVEL,
    U32,
    U32,
    U64,
    U64,
    U32,
    U64,
    U32,
    U32,
)


@given(st.lists(api_record, max_size=12), st.binary(max_size=39))
def test_api_columns_equal_the_record_loop(recs: list[bytes], torn: bytes) -> None:
    data = torn + b"".join(recs)
    assert outcome(api_records, data) == outcome(_decode._api_records, data)


@given(st.lists(track_record, max_size=12), st.binary(max_size=63))
def test_task_track_columns_equal_the_record_loop(recs: list[bytes], torn: bytes) -> None:
    data = torn + b"".join(recs)
    assert outcome(task_track_records, data) == outcome(_decode._task_track_records, data)


@given(st.lists(basic_record, max_size=12), st.binary(max_size=63))
def test_node_basic_columns_equal_the_record_loop(recs: list[bytes], torn: bytes) -> None:
    data = torn + b"".join(recs)
    assert outcome(node_basic_records, data) == outcome(_decode._node_basic_records, data)


stars_record = st.builds(
    lambda function, bits, sqe, magic, stream, task, counter, rest: (
        struct.pack("<HHHHQ", function | bits << 6 | sqe << 10, magic, stream, task, counter) + rest
    ),
    st.sampled_from([0, 1, 0, 1, 34, 35, 2]),
    st.integers(0, 15),
    st.integers(0, 63),
    st.one_of(st.just(STARS_MAGIC), st.just(STARS_MAGIC), U16),
    U16,
    U16,
    U64,
    st.binary(min_size=48, max_size=48),
)


@given(st.lists(stars_record, max_size=12), st.binary(max_size=63))
def test_stars_columns_equal_the_stars_records(recs: list[bytes], torn: bytes) -> None:
    data = torn + b"".join(recs)
    reference = outcome(stars_records, data)
    columns = outcome(stars_columns, data)
    if not isinstance(reference, tuple):
        assert columns == reference
        return
    tasks, subtasks = reference
    assert columns == (
        StarsColumns(
            [r.function | r.sqe_type << 10 for r in tasks],
            [r.stream_id for r in tasks],
            [r.task_id for r in tasks],
            [r.counter for r in tasks],
        ),
        subtasks,
    )


# -- printed starts -------------------------------------------------------------------------------

_CONTEXT = decimal.Context(prec=28, rounding=decimal.ROUND_HALF_EVEN)


def decimal_start(ns: float, offset: float) -> str:
    """The exporter's printed start as written: Decimal(str(ns)) / 1000 + Decimal(str(offset))."""
    value = _CONTEXT.add(
        _CONTEXT.divide(decimal.Decimal(str(ns)), decimal.Decimal(1000)), decimal.Decimal(str(offset))
    )
    return str(value.quantize(decimal.Decimal("0.000"), context=_CONTEXT))


def clock(offset: float, begin: str = "1784171285670891") -> DeviceClock:
    return DeviceClock(
        dev_cnt=3815.4, hwts_freq=5e7, host_mon=76274.8, local_offset=offset, collect_begin=begin
    )


OFFSETS = st.one_of(
    st.just(float("1784171285670891") - float("76274796599930") / 1000.0),
    st.floats(min_value=1e12, max_value=2e15, allow_nan=False),
    st.floats(min_value=-1e3, max_value=1e17, allow_nan=False, allow_infinity=False),
)
NS = st.one_of(
    st.floats(min_value=7.0e13, max_value=9.0e13),
    st.floats(min_value=0.0, max_value=1e5),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.integers(0, 10**15).map(float),
)


@given(NS, OFFSETS)
def test_integer_printed_starts_equal_the_exporters_decimal_sum(ns: float, offset: float) -> None:
    c = clock(offset)
    try:
        expected = decimal_start(ns, offset)
    except decimal.InvalidOperation:
        # the exporter cannot print it either: the reader declines the run (never an escaping error)
        with pytest.raises(DeclinedError, match="start time out of range"):
            c.printed(ns)
        return
    start, start_ns = c.printed(ns)
    assert start == expected == c.local(ns)
    assert start_ns == int(decimal.Decimal(expected) * 1000)
    texts, values = c.printed_all([ns, ns], text=False)
    assert values == [start_ns, start_ns]
    assert all(t is None or t == start for t in texts)


@given(
    st.integers(min_value=1784171285600000_000, max_value=1784171285700000_000),
    st.floats(min_value=0.0, max_value=100000.0, allow_nan=False),
    st.sampled_from(["1784171285670891", "1784171285670891.5", "0178417128567089", "99", "１２"]),
)
def test_the_integer_start_filter_equals_the_string_one(start_ns: int, duration: float, begin: str) -> None:
    c = clock(1.0, begin)
    text = f"{start_ns // 1000}.{start_ns % 1000:03d}"
    duration = round(duration, 3)
    assert (
        c.kept_ns(start_ns, None, duration) == c.kept(text, duration) == c.kept_ns(start_ns, text, duration)
    )


# -- pairing --------------------------------------------------------------------------------------


def reference_pairs(
    columns: StarsColumns, c: DeviceClock
) -> list[tuple[int, int, int, str, float, float, int, int]]:
    """The exporter's pairing, record by record: per (task, stream) in time order, an end before
    its start dropped, a start followed by another start before its end dropped."""
    base, hertz, offset = c.terms()
    timed = sorted(
        (
            (float(counter - base) / hertz * 1e9 + offset, stream, task, header, counter)
            for header, stream, task, counter in zip(*columns, strict=True)
        ),
        key=lambda item: item[0],
    )
    groups: dict[
        tuple[int, int], tuple[list[tuple[float, int, int, int, int]], list[tuple[float, int, int, int, int]]]
    ] = {}
    for item in timed:
        starts, ends = groups.setdefault((item[2], item[1]), ([], []))
        (starts if item[3] & 63 == 0 else ends).append(item)
    out: list[tuple[int, int, int, str, float, float, int, int]] = []
    for starts, ends in groups.values():
        i = j = 0
        while i < len(starts) and j < len(ends):
            s, e = starts[i], ends[j]
            if e[0] < s[0]:
                j += 1
            elif i + 1 == len(starts) or e[0] < starts[i + 1][0]:
                out.append(
                    (s[1], s[2], INVALID_CONTEXT, SQE_TYPES[s[3] >> 10], s[0], e[0] - s[0], s[4], e[4])
                )
                i += 1
                j += 1
            else:
                i += 1
    out.sort(key=lambda t: t[4])
    return out


@given(
    st.lists(
        st.tuples(
            st.integers(0, 1), st.integers(0, 3), st.integers(0, 2), st.integers(0, 4), st.integers(0, 40)
        ),
        max_size=40,
    )
)
def test_index_pairing_equals_the_exporters_pairing(recs: list[tuple[int, int, int, int, int]]) -> None:
    # Few streams, tasks and counter values: lost records, repeats and equal times are common.
    columns = StarsColumns(
        [function | sqe << 10 for function, sqe, _, _, _ in recs],
        [stream for _, _, stream, _, _ in recs],
        [task for _, _, _, task, _ in recs],
        [1_000_000 + 20 * counter for *_, counter in recs],
    )
    c = clock(1.0)
    assert [tuple(t) for t in _paired_tasks(columns, c, "device_0", False)] == reference_pairs(columns, c)


# -- the collector pause --------------------------------------------------------------------------


def test_the_collector_pause_restores_the_collector_as_it_found_it() -> None:
    pause = _GcPause()
    was = gc.isenabled()
    try:
        gc.enable()
        with pause():
            assert not gc.isenabled()
            with pause():
                assert not gc.isenabled()
            assert not gc.isenabled()  # the outer decode still runs
        assert gc.isenabled()
        gc.disable()  # the caller's own choice is kept
        with pause():
            assert not gc.isenabled()
        assert not gc.isenabled()
        gc.enable()
        with pytest.raises(KeyError), pause():
            raise KeyError("boom")
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


def test_overlapping_decodes_in_threads_switch_the_collector_back_on_after_the_last() -> None:
    pause = _GcPause()
    inside = threading.Barrier(3)  # both decodes and this thread
    leave = threading.Event()

    def decode() -> None:
        with pause():
            inside.wait(timeout=30)
            leave.wait(timeout=30)

    threads = [threading.Thread(target=decode) for _ in range(2)]
    was = gc.isenabled()
    gc.enable()
    try:
        for thread in threads:
            thread.start()
        assert inside.wait(timeout=30) is not None
        assert not gc.isenabled()
        leave.set()
        for thread in threads:
            thread.join(timeout=30)
        assert gc.isenabled()
    finally:
        leave.set()
        (gc.enable if was else gc.disable)()
