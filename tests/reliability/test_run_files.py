"""Exported CSVs written by hand into a run, read through ``store_result`` and ``iter_tasks``.

What a broken or odd export gives the user: a :class:`ParseError` naming the file and the line
for a malformed row (a misplaced quote once let an ``IndexError`` escape from ``store_result``;
a ``nan`` duration once reached the median), and a warning naming a file that holds no task
(a header-only op_summary once gave 0 tasks without a word).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from asc_aprof import AsyncProfiler, ParseError, Profiler, Toolkit

pytestmark = pytest.mark.anyio

RUN_ID = "PROF_000001_20260101000000000_00000001AAAAAAAA"
HEADER = "Device_id,Task ID,Op Name,Task Type,Task Duration(us)"
GOOD = "0,1,k,AI_CORE,1.5"


def write_run(root: Path, *files: tuple[str, str]) -> Path:
    """A run in *root* with the given (relative path, text) files."""
    run = root / RUN_ID
    for relative, text in files:
        path = run / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return run


MERGED = "mindstudio_profiler_output/op_summary_20260101000000.csv"

BAD_ROWS = [
    ('0,1,x"y,",AI_CORE,5', "misplaced quote"),  # was an IndexError out of store_result
    ('0,2,"k",AI_CORE,1.5,extra', "expected 5 fields"),
    ('0,2,a"b,c"d,5,AI_CORE', "misplaced quote"),  # was a task with shifted columns
    ("0,2,k,AI_CORE,nan", "not a finite number"),  # was a NaN in the median
    ("0,2,k,AI_CORE,1e309", "not a finite number"),
]


@pytest.mark.parametrize(("row", "message"), BAD_ROWS)
def test_sync_malformed_row_is_a_parse_error_naming_file_and_line(
    toolkit: Toolkit, tmp_path: Path, row: str, message: str
) -> None:
    run = write_run(tmp_path, (MERGED, f"{HEADER}\n{GOOD}\n{row}\n{GOOD}\n"))
    with pytest.raises(ParseError) as info:
        Profiler(tmp_path, toolkit=toolkit).store_result(RUN_ID)
    assert (info.value.source, info.value.line) == (str(run / MERGED), 3)
    assert message in str(info.value)


@pytest.mark.parametrize(("row", "message"), BAD_ROWS)
async def test_async_malformed_row_is_a_parse_error_naming_file_and_line(
    toolkit: Toolkit, tmp_path: Path, row: str, message: str
) -> None:
    run = write_run(tmp_path, (MERGED, f"{HEADER}\n{GOOD}\n{row}\n{GOOD}\n"))
    profiler = AsyncProfiler(tmp_path, toolkit=toolkit)
    with pytest.raises(ParseError) as info:
        await profiler.store_result(RUN_ID)
    assert (info.value.source, info.value.line) == (str(run / MERGED), 3)
    assert message in str(info.value)
    with pytest.raises(ParseError, match=message):
        async for _ in profiler.iter_tasks(RUN_ID):
            pass


# -- files that hold no task ---------------------------------------------------------------------

EMPTY_CASES = [
    (f"{HEADER}\n", "holds no task: a header and no data row"),
    (f"{HEADER}", "holds no task: a header and no data row"),  # no final newline
    (f"{HEADER}\n0,1,k,AI_CORE,N/A\n0,2,k,PROFILING_ENABLE,0\n", "all 2 data rows skipped"),
]


def _warnings_about(caplog: pytest.LogCaptureFixture, path: Path) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "asc_aprof" and str(path) in r.getMessage()]


@pytest.mark.parametrize(("text", "said"), EMPTY_CASES)
def test_sync_a_file_without_tasks_is_reported(
    toolkit: Toolkit, tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str, said: str
) -> None:
    run = write_run(tmp_path, (MERGED, text))
    with caplog.at_level(logging.WARNING, logger="asc_aprof"):
        result = Profiler(tmp_path, toolkit=toolkit).store_result(RUN_ID)
    assert result.tasks == ()
    [message] = _warnings_about(caplog, run / MERGED)
    assert said in message


@pytest.mark.parametrize(("text", "said"), EMPTY_CASES)
async def test_async_a_file_without_tasks_is_reported(
    toolkit: Toolkit, tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str, said: str
) -> None:
    run = write_run(tmp_path, (MERGED, text))
    with caplog.at_level(logging.WARNING, logger="asc_aprof"):
        result = await AsyncProfiler(tmp_path, toolkit=toolkit).store_result(RUN_ID)
    assert result.tasks == ()
    [message] = _warnings_about(caplog, run / MERGED)
    assert said in message


def test_only_the_file_without_tasks_is_named(
    toolkit: Toolkit, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Old per-device layout: device 1's op_summary is header-only, device 0's has a task."""
    old_header = "Task ID,Op Name,Task Type,Task Duration(us)"
    run = write_run(
        tmp_path,
        ("device_0/summary/op_summary_0_1_20260101000000.csv", f"{old_header}\n1,k,AI_CORE,2.5\n"),
        ("device_1/summary/op_summary_1_1_20260101000000.csv", f"{old_header}\n"),
    )
    with caplog.at_level(logging.WARNING, logger="asc_aprof"):
        result = Profiler(tmp_path, toolkit=toolkit).store_result(RUN_ID)
    assert [(t.name, t.device) for t in result.tasks] == [("k", 0)]
    messages = [r.getMessage() for r in caplog.records if r.name == "asc_aprof"]
    assert len(messages) == 1
    assert str(run / "device_1/summary/op_summary_1_1_20260101000000.csv") in messages[0]
