"""The sans-IO parser on every layout and quirk, fed whole and byte by byte.

Every test runs twice: on the pure-Python row loop and on the C accelerator.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from asc_aprof import ParseError, ProfilingTask, TaskParser
from asc_aprof._plans import _parser
from asc_aprof._plans._parser import parse_bytes

from .reference import REAL_CSV, needs_real_csv

NOT_BUILT = "asc_aprof._plans._cparser is not built (no C compiler at install time): pure Python only"


@pytest.fixture(
    autouse=True,
    params=[
        pytest.param(False, id="pure"),
        pytest.param(
            True,
            id="accelerated",
            marks=pytest.mark.skipif(_parser._parse_rows is None, reason=NOT_BUILT),
        ),
    ],
)
def implementation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[bool]:
    """New parsers use the pure or the accelerated row loop, whatever the environment says."""
    accelerated = bool(request.param)
    monkeypatch.setattr(_parser, "ACCELERATED", accelerated)
    assert TaskParser().accelerated is accelerated
    yield accelerated


NEW_HEADER = (
    "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),"
    "Task Duration(us),Task Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,"
    "Input Data Types,Input Formats,Output Shapes,Output Data Types,Output Formats,Context ID,"
    "aicore_time(us),aic_total_cycles"
)


def new_row(dev: str, task: str, name: str, ttype: str, dur: str, shapes: str = '"""8,2048;8,2048"""') -> str:
    return (
        f"{dev},4294967295,{task},2,{name},{name},dynamic,{ttype},1713390712311991.828\t,{dur},0,8,0,NO,"
        f"{shapes},FLOAT16;FLOAT16,ND;ND,{shapes},FLOAT16,ND,N/A,9.87,78923"
    )


def feed_bytewise(data: bytes, **kw: object) -> list[ProfilingTask]:
    parser = TaskParser("bytes", **kw)  # type: ignore[arg-type]
    out: list[ProfilingTask] = []
    for i in range(len(data)):
        out += parser.feed(data[i : i + 1])
    return out + parser.close()


def both(data: bytes, **kw: object) -> list[ProfilingTask]:
    whole = parse_bytes(data, **kw)  # type: ignore[arg-type]
    assert feed_bytewise(data, **kw) == whole
    return whole


def test_new_layout_with_quirks() -> None:
    text = (
        "\n".join(
            [
                NEW_HEADER,
                new_row("0", "1", "add_custom", "AI_CORE", "82.11"),
                new_row("1", "2", "add_custom", "AI_VECTOR_CORE", "80.5"),
                new_row("host", "N/A", "hcom", "COMMUNICATION", "3.5"),
            ]
        )
        + "\n"
    )
    tasks = both(text.encode())
    assert tasks == [
        ProfilingTask(1, "add_custom", "AI_CORE", 82.11, 0),
        ProfilingTask(2, "add_custom", "AI_VECTOR_CORE", 80.5, 1),
        ProfilingTask(None, "hcom", "COMMUNICATION", 3.5, None),
    ]


def test_crlf_bom_and_no_final_newline() -> None:
    text = (
        "\ufeff"
        + NEW_HEADER
        + "\r\n"
        + new_row("3", "7", "k", "MIX_AIC", "1.5")
        + "\r\n"
        + new_row("3", "8", "k", "MIX_AIC", "2")
    )
    tasks = both(text.encode("utf-8"))
    assert [(t.id, t.duration, t.device) for t in tasks] == [(7, 1.5, 3), (8, 2.0, 3)]


def test_quoted_name_with_comma_and_embedded_quotes() -> None:
    row = new_row("0", "5", '"my,kernel ""v2"""', "AI_CORE", "4.25")
    tasks = both((NEW_HEADER + "\n" + row + "\n").encode())
    assert tasks == [ProfilingTask(5, 'my,kernel "v2"', "AI_CORE", 4.25, 0)]


def test_old_layout_unitless_start_and_device_from_path() -> None:
    header = (
        "Model ID,Task ID,Stream ID,Op Name,OP Type,Task Type,Task Start Time,Task Duration(us),"
        "Task Wait Time(us),Block Dim"
    )
    data = (header + "\n4294967295,1,47,add_custom,add_custom,AI_CORE,1043640017380.831,82.11,0,8\n").encode()
    assert both(data, device=5) == [ProfilingTask(1, "add_custom", "AI_CORE", 82.11, 5)]


def test_task_time_control_rows_are_counted_not_dropped_blindly() -> None:
    data = (
        b"Device_id,kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(us),task_stop(us)\n"
        b"0,N/A,PROFILING_ENABLE,0,1,0.02,1.000\t,1.020\t\n"
        b"0,Addcmul,KERNEL_AICORE,1,0,18.542,2.000\t,20.542\t\n"
        b"0,N/A,PROFILING_DISABLE,0,2,0.041,30.000\t,30.041\t\n"
        b"0,N/A,DEVICE_RINGBUFFER_CONTROL,0,3,0.1,31.000\t,31.100\t\n"
    )
    parser = TaskParser("tt")
    tasks = parser.feed(data) + parser.close()
    assert parser.kind == "task_time"
    assert [t.type for t in tasks] == ["KERNEL_AICORE", "DEVICE_RINGBUFFER_CONTROL"]
    assert parser.skipped == {"PROFILING_ENABLE": 1, "PROFILING_DISABLE": 1}
    assert parser.data_rows == 4 and parser.tasks_out == 2


def test_old_task_time_ns_columns_and_quoted_numbers() -> None:
    data = (
        b"kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(ns),task_stop(ns)\n"
        b'trans_TransData_0,AI_CORE,148,3,"7.62","155149754006240","155149754013860"\n'
    )
    assert both(data) == [ProfilingTask(3, "trans_TransData_0", "AI_CORE", 7.62, None)]


def test_na_duration_is_skipped_with_reason() -> None:
    data = (NEW_HEADER + "\n" + new_row("0", "1", "k", "AI_CORE", "N/A") + "\n").encode()
    parser = TaskParser("x")
    assert parser.feed(data) + parser.close() == []
    assert parser.skipped == {"duration N/A": 1}


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (new_row("0", "1", "k", "AI_CORE", "abc"), "duration is not a number"),
        (new_row("0", "x1", "k", "AI_CORE", "1.0"), "task id is not an integer"),
        (new_row("zero", "1", "k", "AI_CORE", "1.0"), "Device_id"),
        ("0,1,2", "expected 23 fields, got 3"),
        (new_row("0", "1", "k", "AI_CORE", "1.0") + ",extra", "expected 23 fields, got 24"),
        (new_row("0", "1", "k", "AI_CORE", "1.0", shapes="N/A") + '"', "unbalanced quotes"),
    ],
)
def test_malformed_rows_name_file_and_line(row: str, message: str) -> None:
    data = (NEW_HEADER + "\n" + new_row("0", "1", "k", "AI_CORE", "1.0") + "\n" + row + "\n").encode()
    parser = TaskParser("op_summary_1.csv")
    with pytest.raises(ParseError) as info:
        parser.feed(data)
        parser.close()
    assert info.value.source == "op_summary_1.csv"
    assert info.value.line == 3
    assert message in str(info.value)
    with pytest.raises(ParseError):  # poisoned
        parser.feed(b"more\n")


def test_truncated_mid_row_is_an_error() -> None:
    full = (NEW_HEADER + "\n" + new_row("0", "1", "k", "AI_CORE", "1.0") + "\n").encode()
    cut = full[: len(full) - 20]
    with pytest.raises(ParseError, match="expected 23 fields"):
        parse_bytes(cut, "cut.csv")


def test_unknown_header_and_empty_input() -> None:
    with pytest.raises(ParseError, match="unknown header"):
        parse_bytes(b"a,b,c\n1,2,3\n", "weird.csv")
    with pytest.raises(ParseError, match="empty file"):
        parse_bytes(b"", "empty.csv")


def test_overlong_line_is_refused() -> None:
    parser = TaskParser("big", max_line_length=100)
    with pytest.raises(ParseError, match="longer than 100 characters"):
        parser.feed(b"x" * 101 + b"\n")
    tail = TaskParser("tail", max_line_length=100)
    with pytest.raises(ParseError, match="longer than 100 characters"):
        tail.feed(b"x" * 401)  # no newline yet: bounded all the same


def test_multibyte_utf8_split_across_feeds() -> None:
    data = (NEW_HEADER + "\n" + new_row("0", "1", "核函数", "AI_CORE", "1.0") + "\n").encode()
    assert both(data)[0].name == "核函数"


REAL_EXPECTED = {
    "hansheng1001__AscendCContest__op_summary_20240418055200.csv": ("op_summary", 1, {}),
    "hansheng1001__AscendCContest__task_time_20240418055200.csv": (
        "task_time",
        3,
        {"PROFILING_ENABLE": 1, "PROFILING_DISABLE": 1},
    ),
    "A-Y-1__AscendC-S4__op_summary_20250401202358.csv": ("op_summary", 1, {}),
    "BobbyWeng__cannbot-ascendc-vs-pypto__op_summary_20260716124357.csv": ("op_summary", 60, {}),
    "vllm-project__vllm-ascend__task_time_20260823165421.csv": (
        "task_time",
        4,
        {"PROFILING_ENABLE": 1, "PROFILING_DISABLE": 1},
    ),
    "xiaobingling93-pixel__Ascend-msinsight__kernel_details.csv": ("kernel_details", 60, {}),
}


@needs_real_csv
@pytest.mark.parametrize("name", sorted(REAL_EXPECTED))
def test_real_msprof_files(name: str) -> None:
    data = (REAL_CSV / name).read_bytes()
    kind, count, skipped = REAL_EXPECTED[name]
    parser = TaskParser(name)
    tasks = parser.feed(data) + parser.close()
    assert feed_bytewise(data) == tasks
    assert (parser.kind, len(tasks), parser.skipped) == (kind, count, skipped)


@needs_real_csv
def test_real_file_values() -> None:
    tasks = parse_bytes(
        (REAL_CSV / "hansheng1001__AscendCContest__op_summary_20240418055200.csv").read_bytes()
    )
    assert tasks == [ProfilingTask(0, "Addcmul", "AI_VECTOR_CORE", 18.542, 0)]
    tasks = parse_bytes((REAL_CSV / "vllm-project__vllm-ascend__op_summary_20260823165421.csv").read_bytes())
    assert [t.type for t in tasks] == ["AI_VECTOR_CORE", "AI_VECTOR_CORE", "MIX_AIC"]


def test_device_ids_of_directories_and_cells() -> None:
    from asc_aprof._cann._layout import device_of_directory

    assert device_of_directory("device_3") == 3
    assert device_of_directory("7") == 7
    assert device_of_directory("host") is None
    assert device_of_directory("device_x") is None


# -- quotes: one rule for counting and splitting (RFC 4180 quoting) ------------------------------

SHORT_HEADER = "Op Name,Task Type,Task Duration(us)"


@pytest.mark.parametrize(
    ("header", "row"),
    [
        (SHORT_HEADER, 'x"y,",AI_CORE,5'),  # csv kept the first quote literal: an IndexError escaped
        (SHORT_HEADER, 'a"b,c"d,5,f'),  # counted as 3 fields, split as 4: a task with shifted columns
        (SHORT_HEADER, '"ab"c,AI_CORE,5'),  # text after a closing quote
        (SHORT_HEADER, 'k,AI_CORE,5"'),  # a quote at the end of an unquoted field
        (SHORT_HEADER, 'k,AI"_CORE",5'),
        (SHORT_HEADER, 'k,AI_CORE,""5'),
        (NEW_HEADER, new_row("0", "1", "k", "AI_CORE", "1.0", shapes='x"8,2048"')),  # after the k-th comma
        (NEW_HEADER, new_row("0", "1", "k", "AI_CORE", "1.0", shapes='"8,2048"x')),
        (NEW_HEADER, new_row("0", "1", "k", "AI_CORE", "1.0", shapes='"""8,2048""" ')),
        (NEW_HEADER, new_row("0", "1", 'k"', "AI_CORE", "1.0")),
    ],
)
def test_misplaced_quotes_are_a_parse_error_naming_file_and_line(header: str, row: str) -> None:
    good = new_row("0", "1", "k", "AI_CORE", "1.0") if header == NEW_HEADER else "k,AI_CORE,1.0"
    data = "\n".join([header, good, row, good, ""]).encode()
    for whole in (True, False):
        parser = TaskParser("op_summary_q.csv")
        with pytest.raises(ParseError) as info:
            if whole:
                parser.feed(data)
            else:
                for i in range(len(data)):
                    parser.feed(data[i : i + 1])
            parser.close()
        assert (info.value.source, info.value.line) == ("op_summary_q.csv", 3)
        assert "quote" in str(info.value)


@pytest.mark.parametrize(
    ("cell", "value"),
    [
        ('"k"', "k"),
        ('""', ""),
        ('""""', '"'),
        ('"""1,2"""', '"1,2"'),  # the triple-quoted shape cells of real files
        ('"a,""b"",c"', 'a,"b",c'),
        ('"x\ty"', "x\ty"),
        ('","', ","),
    ],
)
def test_well_formed_quoted_cells_split_like_csv(cell: str, value: str) -> None:
    import csv

    for header, row in [
        (SHORT_HEADER, f"{cell},AI_CORE,1.5"),
        (SHORT_HEADER, f"k,{cell},1.5"),
        (NEW_HEADER, new_row("0", "1", cell, "AI_CORE", "1.5", shapes=cell)),
    ]:
        fields = next(csv.reader([row]))
        assert len(fields) == len(header.split(","))
        name, ttype = (fields[0], fields[1]) if header == SHORT_HEADER else (fields[4], fields[7])
        tasks = both(f"{header}\n{row}\n".encode())
        assert [(t.name, t.type, t.duration) for t in tasks] == [(name, ttype, 1.5)]
        assert value in (name, ttype)


@pytest.mark.parametrize(
    "duration", ["nan", "NaN", "-nan", "inf", "-inf", "Infinity", " inf ", "1e309", "-1e309"]
)
def test_non_finite_durations_are_refused(duration: str) -> None:
    for header, row in [
        (SHORT_HEADER, f"k,AI_CORE,{duration}"),
        (SHORT_HEADER, f'k,AI_CORE,"{duration}"'),
        (NEW_HEADER, new_row("0", "1", "k", "AI_CORE", duration)),
    ]:
        ok = "k,AI_CORE,1.0" if header == SHORT_HEADER else new_row("0", "1", "k", "AI_CORE", "1.0")
        parser = TaskParser("nf.csv")
        with pytest.raises(ParseError) as info:
            parser.feed(f"{header}\n{ok}\n{row}\n".encode())
            parser.close()
        assert info.value.line == 3 and "not a finite number" in str(info.value)


def test_large_finite_durations_are_kept() -> None:
    data = f"{SHORT_HEADER}\nk,AI_CORE,1e308\nk,AI_CORE,1.7976931348623157e308\nk,AI_CORE,-0.0\n".encode()
    assert [t.duration for t in both(data)] == [1e308, 1.7976931348623157e308, -0.0]


# -- the same public API on both paths -----------------------------------------------------------

PLAIN = f"{SHORT_HEADER}\nk,AI_CORE,1.5\nj,MIX_AIC,2\n".encode()


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_feed_takes_any_bytes_like_object(kind: type) -> None:
    for cut in (0, 5, len(SHORT_HEADER) + 1, len(PLAIN)):  # with and without a pending partial line
        parser = TaskParser("b")
        tasks = parser.feed(kind(PLAIN[:cut])) + parser.feed(kind(PLAIN[cut:])) + parser.close()
        assert [(t.name, t.duration) for t in tasks] == [("k", 1.5), ("j", 2.0)]


@pytest.mark.parametrize("value", ["k,AI_CORE,1\n", 5, None, [1, 2]])
def test_feed_refuses_what_is_not_bytes(value: object) -> None:
    parser = TaskParser("b")
    parser.feed(PLAIN[:10])
    with pytest.raises(TypeError, match="bytes"):
        parser.feed(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("limit", "accepted"), [(1e6, True), (40.0, True), (38.9, False), (float("inf"), True)]
)
def test_max_line_length_may_be_a_float(limit: float, accepted: bool) -> None:
    row = "k" * 27 + ",AI_CORE,1.5"  # 39 characters
    data = f"{SHORT_HEADER}\n{row}\n".encode()
    parser = TaskParser("f", max_line_length=limit)  # type: ignore[arg-type]
    if accepted:
        assert len(parser.feed(data) + parser.close()) == 1
    else:
        with pytest.raises(ParseError, match="longer than 38 characters"):
            parser.feed(data)


@pytest.mark.parametrize("limit", [float("nan"), -1, "100", None])
def test_max_line_length_must_be_a_number_of_characters(limit: object) -> None:
    with pytest.raises((TypeError, ValueError), match="max_line_length"):
        TaskParser("f", max_line_length=limit)  # type: ignore[arg-type]


def test_a_quoted_stretch_seen_before_is_still_checked_in_its_row() -> None:
    """The pure path remembers checked stretches; what surrounds them is checked on every row."""
    good = new_row("0", "1", "k", "AI_CORE", "1.0")
    for bad in (
        good.replace(',"""8', ',x"""8', 1),
        good.replace('2048""",FLOAT16;', '2048"""x,FLOAT16;', 1),
        good.replace('2048""",FLOAT16,', '2048"""x,FLOAT16,', 1),
    ):
        assert bad != good
        parser = TaskParser("s.csv")
        with pytest.raises(ParseError, match="misplaced quote") as info:
            parser.feed("\n".join([NEW_HEADER, good, good, bad, good, ""]).encode())
        assert info.value.line == 4
