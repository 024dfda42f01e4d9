"""The raw reader's sans-IO pieces without real data: record layouts, what it declines, the
exporter's arithmetic it reproduces, and the host call tree (conformance to the real exporter is
tested on real runs in tests/real/test_raw_reader.py)."""

from __future__ import annotations

import configparser
import decimal
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from asc_aprof._model._errors import InvalidArgumentError
from asc_aprof._plans._raw import Declined, DeclinedError, DeclineReason, Reader, RunPlan, dirs_to_list
from asc_aprof._plans._raw._decode import (
    HOST_MAGIC,
    STARS_MAGIC,
    ApiRecord,
    NodeBasicRecord,
    TaskTrackRecord,
    api_records,
    context_records,
    hash_dic,
    ini_first_section,
    records,
    stars_records,
    task_track_records,
    ts_track_flips,
    type_info_dic,
)
from asc_aprof._plans._raw._host import HostRecords, host_tables
from asc_aprof._plans._raw._run import DeviceClock, stream_task_ids
from asc_aprof._runs._raw_files import read_run


def stars(
    function: int, stream: int, task: int, counter: int, *, sqe: int = 0, magic: int = STARS_MAGIC
) -> bytes:
    return struct.pack("<HHHHQ", function | sqe << 10, magic, stream, task, counter) + b"\0" * 48


def test_records_drop_the_torn_head_of_a_file_not_its_tail() -> None:
    data = b"x" * 3 + bytes(range(8)) + bytes(range(8, 16))
    assert [bytes(r) for r in records(data, 8)] == [bytes(range(8)), bytes(range(8, 16))]


def test_stars_records_split_the_task_log_from_the_subtask_log() -> None:
    subtask = struct.pack("<HHHHQHHHH", 34, STARS_MAGIC, 46, 1, 99, 6, 0, 4 << 13, 0) + b"\0" * 40
    tasks, subtasks = stars_records(stars(0, 5, 7, 10, sqe=3) + stars(1, 5, 7, 20, sqe=3) + subtask)
    assert [(t.function, t.sqe_type, t.stream_id, t.task_id, t.counter) for t in tasks] == [
        (0, 3, 5, 7, 10),
        (1, 3, 5, 7, 20),
    ]
    assert [(s.function, s.subtask_type, s.subtask_id, s.ffts_type) for s in subtasks] == [(34, 6, 0, 4)]


def test_a_bad_magic_is_declined_never_skipped() -> None:
    with pytest.raises(DeclinedError) as info:
        stars_records(stars(0, 1, 1, 1, magic=0x1234))
    assert info.value.declined.reason is DeclineReason.MALFORMED
    bad_host = struct.pack("<HHIIIQQQ", HOST_MAGIC, 12345, 5, 1, 24, 1, 2, 3)
    with pytest.raises(DeclinedError, match="level 12345"):
        api_records(bad_host)


def test_host_records_decode_their_fields() -> None:
    api = struct.pack("<HHIIIQQQ", HOST_MAGIC, 10000, 5, 7, 24, 100, 200, 42)
    assert api_records(api) == [ApiRecord(10000, 5, 7, 100, 200, 42)]
    assert api_records(struct.pack("<HHIIIQQQ", HOST_MAGIC, 10000, 5, 7, 24, 0, 200, 42)) == []  # start 0
    with pytest.raises(DeclinedError, match="event records"):
        api_records(struct.pack("<HHIIIQQQ", HOST_MAGIC, 10000, 5, 7, 24, 1, (1 << 64) - 1, 42))
    track = struct.pack("<HHIIIQHHHHQQ", HOST_MAGIC, 5000, 802, 7, 24, 150, (1 << 12) | 3, 34, 9, 0, 66, 42)
    assert task_track_records(track + b"\0" * 16) == [
        TaskTrackRecord(5000, 802, 7, 150, 1, 3, 34, 9, 0, 66, 42)
    ]
    ctx = struct.pack("<HHIIIQQI55I", HOST_MAGIC, 10000, 4, 7, 24, 150, 1, 2, 0, 1, *([0] * 53))
    assert [c.context_ids for c in context_records(ctx)] == ["0,1"]
    flip = struct.pack("<BBHLQHHHH", 1, 14, 40, 0, 777, 34, 65535, 98, 65535) + b"\0" * 16
    assert [(f.stream_id, f.counter, f.flip_num) for f in ts_track_flips(flip)] == [(34, 777, 65535)]
    with pytest.raises(DeclinedError, match="tag 10"):
        ts_track_flips(struct.pack("<BBHLQHHHH", 1, 10, 40, 0, 777, 34, 0, 0, 0) + b"\0" * 16)


def test_type_info_lines_with_two_underscores_are_declined() -> None:
    types: dict[str, dict[str, str]] = {}
    type_info_dic(b"5000_66:KERNEL_AIVEC\n10000_5:launch\nnot a line\n", types)
    assert types == {"runtime": {"66": "KERNEL_AIVEC"}, "node": {"5": "launch"}}
    with pytest.raises(DeclinedError, match="type_info_dic"):
        type_info_dic(b"5000_6_6:X\n", types)


def listing(**extra: list[str]) -> dict[str, list[str]]:
    base = {
        "": ["host", "device_0"],
        "host": ["info.json", "sample.json", "start_info", "host_start.log", "info.json.done"],
        "host/data": [
            "aging.api_event.data.slice_0",
            "aging.compact.task_track.slice_0",
            "unaging.additional.hash_dic.slice_0",
            "unaging.additional.type_info_dic.slice_0",
            "aging.compact.task_track.slice_0.done",
        ],
        "device_0": ["info.json.0", "sample.json", "start_info.0", "dev_start.log.0", "host_start.log.0"],
        "device_0/data": ["stars_soc.data.0.slice_1", "stars_soc.data.0.slice_0", "all_file.complete"],
    }
    for key, names in extra.items():
        base[key.replace("__", "/")] = names
    return base


def test_plan_reads_only_known_files_in_slice_order() -> None:
    assert dirs_to_list(["host", "device_0", "mindstudio_profiler_output"]) == [
        "host",
        "host/data",
        "device_0",
        "device_0/data",
    ]
    plan = RunPlan.from_listing(listing())
    assert plan.devices[0].stars == (
        "device_0/data/stars_soc.data.0.slice_0",
        "device_0/data/stars_soc.data.0.slice_1",
    )
    assert "host/data/aging.compact.task_track.slice_0" in plan.wanted
    assert not any(p.endswith(".done") for p in plan.wanted)


@pytest.mark.parametrize(
    ("change", "reason", "what"),
    [
        ({"": ["host", "mindstudio_profiler_output"]}, DeclineReason.NOT_A_RUN, "device_N"),
        ({"host__data": ["aging.api_event.data.slice_0"]}, DeclineReason.MISSING_FILE, "task_track"),
        ({"device_0__data": []}, DeclineReason.MISSING_FILE, "stars_soc"),
        (
            {"device_0__data": ["stars_soc.data.0.slice_0", "block_log.data.0.slice_0"]},
            DeclineReason.UNKNOWN_FILE,
            "block",
        ),
        (
            {"device_0": ["sample.json", "start_info.0", "dev_start.log.0", "host_start.log.0"]},
            DeclineReason.MISSING_FILE,
            "info.json",
        ),
        (
            {
                "device_0": [
                    "info.json.0",
                    "info.json.1",
                    "sample.json",
                    "start_info.0",
                    "dev_start.log.0",
                    "host_start.log.0",
                ]
            },
            DeclineReason.AMBIGUOUS,
            "info",
        ),
    ],
)
def test_plan_declines_what_it_does_not_know(
    change: dict[str, list[str]], reason: DeclineReason, what: str
) -> None:
    with pytest.raises(DeclinedError) as info:
        if "" in change:
            dirs_to_list(change[""])
        RunPlan.from_listing(listing(**change))
    assert info.value.declined.reason is reason and what in info.value.declined.message


def test_plan_reads_a_run_without_host_data() -> None:
    # The second run of an overlapping CANN 8.5 collection has no host/: task_time only.
    assert dirs_to_list(["device_1"]) == ["device_1", "device_1/data"]
    full = listing()
    plan = RunPlan.from_listing({k: v for k, v in full.items() if not k.startswith("host")})
    assert plan.host_info is None and plan.host_data == {}
    assert [d.folder for d in plan.devices] == ["device_0"]


def test_plan_declines_unknown_host_files() -> None:
    names = [*listing()["host/data"], "aging.additional.hccl_info.slice_0"]
    with pytest.raises(DeclinedError, match="hccl_info") as info:
        RunPlan.from_listing(listing(host__data=names))
    assert info.value.declined.reason is DeclineReason.UNKNOWN_FILE


def test_stream_ids_are_unpacked_only_where_real_runs_show_it() -> None:
    assert stream_task_ids(34, 7, 0, expanded=True) == (34, 7)
    assert stream_task_ids(0x8000, 5, 3, expanded=False) == (0, 5)  # 310B control task
    assert stream_task_ids(0x8001, 46, 0, expanded=True) == (46, 1)  # 910B MIX kernel
    for stream, sqe, expanded in ((0x1005, 0, False), (0x8003, 3, True), (0x2001, 0, False)):
        with pytest.raises(DeclinedError, match="bit-packed"):
            stream_task_ids(stream, 1, sqe, expanded=expanded)


CLOCK = DeviceClock(
    dev_cnt=float("3815411022853") / 1e9,
    hwts_freq=float("49.999001") * 1e6,
    host_mon=float(76274797196435) / 1e9,
    local_offset=float("1784171285670891") - float("76274796599930") / 1000.0,
    collect_begin="1784171285670891",
)


def test_counters_become_times_with_the_exporters_float_arithmetic() -> None:
    # Real row 1 of 910b_l1_div: 381.688 us from start 1784171285754947.983.
    start = CLOCK.ns(3815411022853 + 1_184_250_000)
    assert CLOCK.ns(3815411022853) == pytest.approx(76274797196435.0)
    assert CLOCK.local(start) == str(
        (
            decimal.Decimal(str(start)) / decimal.Decimal(1000) + decimal.Decimal(str(CLOCK.local_offset))
        ).quantize(decimal.Decimal("0.000"))
    )


@given(st.floats(min_value=7.0e13, max_value=9.0e13, allow_nan=False))
def test_printed_start_ignores_the_callers_decimal_context(ns: float) -> None:
    expected = (
        decimal.Decimal(str(ns)) / decimal.Decimal(1000) + decimal.Decimal(str(CLOCK.local_offset))
    ).quantize(decimal.Decimal("0.000"), context=decimal.Context(prec=28, rounding=decimal.ROUND_HALF_EVEN))
    with decimal.localcontext(decimal.Context(prec=6, rounding=decimal.ROUND_FLOOR)):
        assert CLOCK.local(ns) == str(expected)


def slow_kept(start: str, duration: float, begin: str) -> bool:
    """The exporter's rule as written: string comparisons of the tab-suffixed start."""
    cell = start + "\t"
    end = str((decimal.Decimal(cell) + decimal.Decimal(str(duration))).quantize(decimal.Decimal("0.000")))
    return cell > begin or cell < begin < end


@given(
    st.integers(min_value=1784171285600000_000, max_value=1784171285700000_000),
    st.floats(min_value=0.0, max_value=100000.0, allow_nan=False),
)
def test_the_start_filter_shortcut_equals_the_exporters_string_rule(start_ns: int, duration: float) -> None:
    start = str(decimal.Decimal(start_ns) / 1000)
    if "." not in start:
        start += ".000"
    duration = round(duration, 3)
    assert CLOCK.kept(start, duration) == slow_kept(start, duration, CLOCK.collect_begin)


def test_reader_setting_is_checked() -> None:
    assert Reader.of("raw") is Reader.RAW and Reader.of(Reader.MSPROF) is Reader.MSPROF
    with pytest.raises(InvalidArgumentError, match="reader must be one of"):
        Reader.of("csv")


# -- the host call tree ---------------------------------------------------------------------------

NODE_LAUNCH = 5
KERNEL_AIVEC = 66


def host_records(
    apis: list[ApiRecord], tracks: list[TaskTrackRecord], basics: tuple[NodeBasicRecord, ...] = ()
) -> HostRecords:
    rec = HostRecords(
        {"1": "my_node", "2": "my_kernel"},
        {"runtime": {"66": "KERNEL_AIVEC", "802": "task_track"}, "node": {"5": "launch"}},
    )
    rec.apis, rec.tracks, rec.node_basics = apis, tracks, list(basics)
    return rec


def acl(start: int, end: int) -> ApiRecord:
    return ApiRecord(20000, 3 << 16, 7, start, end, 0)


def node(start: int, end: int) -> ApiRecord:
    return ApiRecord(10000, NODE_LAUNCH, 7, start, end, 1)


def track(ts: int, task: int) -> TaskTrackRecord:
    return TaskTrackRecord(5000, 802, 7, ts, 0, 0, 34, task, 0, KERNEL_AIVEC, 2)


def names(tables: object) -> list[tuple[int, str]]:
    return [(g.task_id, g.op_name) for g in tables.ge_tasks]  # type: ignore[attr-defined]


def test_a_task_in_a_node_launch_takes_the_nodes_name() -> None:
    tables = host_tables(
        host_records([acl(0, 100), node(10, 50)], [track(20, 0), track(60, 1)]), level0=True, all_export=True
    )
    # Task 1 came after the launch: it keeps its kernel name (level 0, task_track only).
    assert names(tables) == [(0, "my_node"), (1, "my_kernel")]
    assert [(h.task_id, h.context_id, h.task_type) for h in tables.host_tasks] == [
        (0, 4294967295, "KERNEL_AIVEC"),
        (1, 4294967295, "KERNEL_AIVEC"),
    ]


def test_a_nested_acl_call_is_dropped_without_closing_the_node() -> None:
    tables = host_tables(
        host_records([node(10, 50), acl(20, 30)], [track(40, 0)]), level0=True, all_export=True
    )
    assert names(tables) == [(0, "my_node")]


def test_an_acl_call_that_outlives_the_node_closes_it_early() -> None:
    # The ACL call starts inside the launch and ends after it: the exporter's tree closes the
    # launch there, so a task recorded later inside the launch's window gets no node.
    tables = host_tables(
        host_records([acl(0, 100), node(10, 50), acl(20, 120)], [track(40, 0)]), level0=True, all_export=True
    )
    assert names(tables) == [(0, "my_kernel")]


def test_level1_takes_type_and_block_dims_from_node_basic_info() -> None:
    basic = NodeBasicRecord(10000, 0, 7, 15, 1, 2, 1, (3 << 16) | 20, 0)
    tables = host_tables(
        host_records([node(10, 50)], [track(20, 0)], (basic,)), level0=False, all_export=True
    )
    assert [(g.op_name, g.task_type, g.block_num, g.mix_block_num) for g in tables.ge_tasks] == [
        ("my_node", "AI_VECTOR_CORE", 20, 60)
    ]


def test_level1_declines_kernels_outside_a_node_launch_and_wrapped_task_ids() -> None:
    with pytest.raises(DeclinedError, match="outside a node launch"):
        host_tables(host_records([], [track(20, 0)]), level0=False, all_export=True)
    flip = TaskTrackRecord(5000, 802, 7, 15, 0, 0, 34, 65535, 1, 98, 0)
    rec = host_records([node(10, 50)], [flip, track(20, 0)])
    rec.types["runtime"]["98"] = "FLIP_TASK"
    with pytest.raises(DeclinedError, match="wrapped"):
        host_tables(rec, level0=True, all_export=True)


def test_hash_lines_split_as_text_mode_reads_them() -> None:
    hashes: dict[str, str] = {}
    hash_dic(b"1:one\r\n2:two\r3:th\x0cree\n", hashes)
    assert hashes == {"1": "one", "2": "two", "3": "th\x0cree"}


def test_a_failure_inside_the_reader_declines_instead_of_breaking_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asc_aprof._runs import _raw_files as _driver

    for part in ("host/data", "device_0/data"):
        (tmp_path / part).mkdir(parents=True)
    for name in ("host/info.json", "host/sample.json"):
        (tmp_path / name).write_text("{}", encoding="utf-8")

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("boom")

    monkeypatch.setattr(_driver, "RunPlan", type("P", (), {"from_listing": staticmethod(broken)}))
    outcome = read_run(tmp_path)
    assert isinstance(outcome, Declined) and outcome.reason is DeclineReason.INTERNAL
    assert "KeyError" in outcome.message


_INI_KEYS = st.sampled_from(["clock_monotonic_raw", "cntvct", "cntvct_diff", "Cntvct", "a b", "x"])
_INI_VALUES = st.sampled_from(["0", "76274797196435", "-1", "1.5", "", " 7", "1e3", "%d"])
_INI_LINES = st.tuples(_INI_KEYS, st.sampled_from([": ", ":", " = ", ": "]), _INI_VALUES)


@given(
    header=st.sampled_from(["[Device0]\n", "[Host]\n", "", "[a b]\n", "; c\n[Device1]\n"]),
    lines=st.lists(_INI_LINES, max_size=5),
    tail=st.sampled_from(["", "\n", "[Second]\nk: 1\n", "  continued\n", "# note\n"]),
)
def test_ini_first_section_fast_path_is_configparsers(
    header: str, lines: list[tuple[str, str, str]], tail: str
) -> None:
    """host_start.log's plain form is read without ConfigParser; every text gives what it gives."""
    text = header + "".join(f"{k}{sep}{v}\n" for k, sep, v in lines) + tail
    parser = configparser.ConfigParser()
    try:
        parser.read_string(text)
        sections = parser.sections()
        expected: object = dict(parser.items(sections[0])) if sections else DeclinedError
    except configparser.Error:
        expected = DeclinedError
    try:
        got: object = dict(ini_first_section(text.encode(), "host_start.log.0"))
    except DeclinedError:
        got = DeclinedError
    assert got == expected
