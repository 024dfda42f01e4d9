"""The level-0 type join (DECISIONS 21) and its tolerant step (issue 30), on small exports.

An op_summary row of type ``N/A`` takes the type of the task_time row of its device, stream id,
task id and start; failing that, of the task_time row of its device, stream id and task id whose
start is nearest its own within ``NEAREST_START_BOUND_NS`` that no row took yet. These tests write
an export by hand, read it through ``open_run(..., reader="msprof")`` (the CSV reader), and
check the raw reader's join (``_join_level0``) gives the same types and counts on the same rows.
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asc_aprof import Level0Join, NoSamplesError, ProfilingResult, TaskColumns, aopen_run, open_run
from asc_aprof import task_time_median as median
from asc_aprof._model._join import NEAREST_START_BOUND_NS, nearest_start
from asc_aprof._plans._raw._run import _Ascend, _Device, _join_level0, _Row
from asc_aprof._plans._raw._types import RawTask

BOUND = NEAREST_START_BOUND_NS
RUN = "PROF_000001_20260716124852756_00203843ICHPOOKD"
OP_HEADER = (
    "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),"
    "Task Duration(us),Task Wait Time(us),Block Num\n"
)
TT_HEADER = "Device_id,kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(us),task_stop(us)\n"
#: Starts are this many ns plus a test's offsets (the real cells carry 19 digits).
BASE = 1784177335339093044

#: (stream, task id, start offset in ns)
Op = tuple[int, int, int]
#: (stream, task id, start offset in ns, kernel_type)
Entry = tuple[int, int, int, str]


def us(offset: int) -> str:
    ns = BASE + offset
    return f"{ns // 1000}.{ns % 1000:03d}\t"


def write_run(root: Path, ops: Sequence[Op], entries: Sequence[Entry], *, op_type: str = "N/A") -> Path:
    """A run folder holding one export: *ops* as op_summary rows, *entries* as task_time rows."""
    output = root / RUN / "mindstudio_profiler_output"
    output.mkdir(parents=True)
    with open(output / "op_summary_20260716124900.csv", "w", encoding="utf-8") as f:
        f.write(OP_HEADER)
        for stream, task, start in ops:
            f.write(f"0,4294967295,{task},{stream},k,N/A,N/A,{op_type},{us(start)},1.5,0,0\n")
    with open(output / "task_time_20260716124900.csv", "w", encoding="utf-8") as f:
        f.write(TT_HEADER)
        for stream, task, start, ttype in entries:
            f.write(f"0,k,{ttype},{stream},{task},1.0,{us(start)},{us(start + 1000)}\n")
    return root / RUN


def read(root: Path, ops: Sequence[Op], entries: Sequence[Entry]) -> ProfilingResult:
    return open_run(write_run(root, ops, entries), reader="msprof").result()


def types(result: ProfilingResult) -> list[str]:
    return [t.type for t in result.tasks]


# -- the exact match, then the tolerant step --------------------------------------------------------
def test_an_exact_match_comes_before_a_nearer_looking_one(tmp_path: Path) -> None:
    result = read(tmp_path, [(46, 1, 0)], [(46, 1, -1000, "KERNEL_MIX_AIC"), (46, 1, 0, "KERNEL_AIVEC")])
    assert types(result) == ["KERNEL_AIVEC"]
    assert result.level0_join == Level0Join(exact=1, nearest=0, unmatched=0)
    assert result.level0_join is not None and not result.level0_join.tolerant


def test_without_an_exact_match_the_nearest_start_within_the_bound_gives_the_type(tmp_path: Path) -> None:
    # op_summary 1.18 µs before task_time: the median offset of the real PyPTO runs' MIX tasks
    result = read(tmp_path, [(46, 1, 0)], [(46, 1, 1180, "KERNEL_MIX_AIC")])
    assert types(result) == ["KERNEL_MIX_AIC"]
    assert result.level0_join == Level0Join(exact=0, nearest=1, unmatched=0, bound_ns=BOUND)
    assert result.level0_join.tolerant
    assert median(result.tasks) == 1.5


@pytest.mark.parametrize(
    ("offset", "typed"), [(BOUND, True), (-BOUND, True), (BOUND + 1, False), (-BOUND - 1, False)]
)
def test_the_bound_is_inclusive_and_past_it_the_row_keeps_na(
    tmp_path: Path, offset: int, typed: bool
) -> None:
    result = read(
        tmp_path, [(46, 1, 0), (46, 3, 0)], [(46, 1, offset, "KERNEL_MIX_AIC"), (46, 3, 0, "KERNEL_AICPU")]
    )
    assert types(result) == ["KERNEL_MIX_AIC" if typed else "N/A", "KERNEL_AICPU"]
    assert result.level0_join == Level0Join(exact=1, nearest=int(typed), unmatched=int(not typed))
    if not typed:
        # the error there was before the tolerant step, word for word
        with pytest.raises(NoSamplesError) as caught:
            median(result.tasks)
        assert str(caught.value) == (
            "no AI Core task in the result, so there is no kernel to take a median of (its 2 task(s) "
            "are of types KERNEL_AICPU (1), N/A (1); only AI Core types count, or N/A when name= is given)"
        )
        assert median(result.tasks, name="k") == 1.5  # named, the N/A task counts (DECISIONS 21)


def test_the_nearest_of_several_starts_wins_and_a_tie_takes_the_earlier(tmp_path: Path) -> None:
    nearer = read(
        tmp_path / "a", [(46, 1, 0)], [(46, 1, -2000, "KERNEL_AIVEC"), (46, 1, 1000, "KERNEL_MIX_AIC")]
    )
    assert types(nearer) == ["KERNEL_MIX_AIC"]
    tie = read(
        tmp_path / "b", [(46, 1, 0)], [(46, 1, -1000, "KERNEL_AIVEC"), (46, 1, 1000, "KERNEL_MIX_AIC")]
    )
    assert types(tie) == ["KERNEL_AIVEC"]


def test_each_task_time_row_is_taken_once(tmp_path: Path) -> None:
    result = read(tmp_path, [(46, 1, 0), (46, 1, 500)], [(46, 1, 1000, "KERNEL_MIX_AIC")])
    assert types(result) == ["KERNEL_MIX_AIC", "N/A"]
    assert result.level0_join == Level0Join(exact=0, nearest=1, unmatched=1)


def test_a_row_an_earlier_row_matched_exactly_is_not_taken_again(tmp_path: Path) -> None:
    result = read(tmp_path, [(46, 1, 0), (46, 1, 500)], [(46, 1, 0, "KERNEL_MIX_AIC")])
    assert types(result) == ["KERNEL_MIX_AIC", "N/A"]
    assert result.level0_join == Level0Join(exact=1, nearest=0, unmatched=1)


def test_an_exact_match_after_a_tolerant_one_still_types_its_row(tmp_path: Path) -> None:
    # Decided row by row as the file streams: a later exact match is never refused. Two rows of
    # one stream and task id 0.5 µs apart are one task (ids recur after 65,536 tasks).
    result = read(tmp_path, [(46, 1, -500), (46, 1, 0)], [(46, 1, 0, "KERNEL_MIX_AIC")])
    assert types(result) == ["KERNEL_MIX_AIC", "KERNEL_MIX_AIC"]
    assert result.level0_join == Level0Join(exact=1, nearest=1, unmatched=0)


def test_never_by_name_nor_across_ids_streams_or_devices(tmp_path: Path) -> None:
    # Same kernel name "k" everywhere, starts 0.1 µs apart: another task id or stream is no match.
    result = read(
        tmp_path, [(46, 1, 0), (42, 3, 0)], [(46, 2, 100, "KERNEL_MIX_AIC"), (43, 3, 100, "KERNEL_AIVEC")]
    )
    assert types(result) == ["N/A", "N/A"]
    assert result.level0_join == Level0Join(exact=0, nearest=0, unmatched=2)


def test_ambiguous_and_control_entries_are_not_taken(tmp_path: Path) -> None:
    entries = [(46, 1, 1000, "KERNEL_MIX_AIC"), (46, 1, 1000, "KERNEL_AIVEC"), (46, 3, 1000, "EVENT_RECORD")]
    result = read(tmp_path, [(46, 1, 0), (46, 3, 0)], entries)
    assert types(result) == ["N/A", "N/A"]


def test_a_run_with_types_in_op_summary_reports_no_join(tmp_path: Path) -> None:
    run = write_run(tmp_path, [(46, 1, 0)], [(46, 1, 0, "KERNEL_AIVEC")], op_type="AI_VECTOR_CORE")
    result = open_run(run, reader="msprof").result()
    assert types(result) == ["AI_VECTOR_CORE"] and result.level0_join is None
    assert open_run(run, reader="msprof").columns().level0_join is None


# -- every reader records it ------------------------------------------------------------------------
OPS: list[Op] = [(42, 1, 0), (46, 1, 5000), (42, 3, 300_000), (46, 3, 305_000), (46, 5, 600_000)]
ENTRIES: list[Entry] = [
    (42, 1, 0, "KERNEL_AICPU"),
    (46, 1, 6180, "KERNEL_MIX_AIC"),
    (42, 3, 300_000, "KERNEL_AICPU"),
    (46, 3, 305_840, "KERNEL_MIX_AIC"),
]
JOIN = Level0Join(exact=2, nearest=2, unmatched=1)


def test_tasks_columns_and_timeline_read_the_same_join(tmp_path: Path) -> None:
    run = open_run(write_run(tmp_path, OPS, ENTRIES), reader="msprof")
    result = run.result()
    assert types(result) == ["KERNEL_AICPU", "KERNEL_MIX_AIC", "KERNEL_AICPU", "KERNEL_MIX_AIC", "N/A"]
    assert result.level0_join == JOIN
    columns = run.columns()
    assert columns.tasks() == list(result.tasks) and columns.level0_join == JOIN
    assert TaskColumns.from_result(result).level0_join == JOIN
    assert columns.result().level0_join == JOIN
    assert pickle.loads(pickle.dumps(columns)).level0_join == JOIN
    assert [t.task for t in run.timeline().tasks] == list(result.tasks)
    assert list(run.tasks()) == list(result.tasks)
    # metadata of the read: not compared, not in the JSON form
    assert ProfilingResult.from_dict(result.to_dict()) == result
    assert "level0_join" not in result.to_dict()


async def test_the_async_reads_record_the_same_join(tmp_path: Path) -> None:
    run = await aopen_run(write_run(tmp_path, OPS, ENTRIES), reader="msprof")
    assert (await run.result()).level0_join == JOIN
    assert (await run.columns()).level0_join == JOIN


def test_the_record_is_a_frozen_slotted_value() -> None:
    join = Level0Join(exact=600, nearest=300, unmatched=0)
    assert str(join) == (
        "level-0 types from task_time: 600 rows by exact start, 300 by the nearest start within 5 µs, "
        "0 left N/A"
    )
    assert not hasattr(join, "__dict__") and pickle.loads(pickle.dumps(join)) == join
    with pytest.raises(AttributeError):
        join.nearest = 0  # type: ignore[misc]


def test_nearest_start() -> None:
    assert nearest_start([], 10) is None
    assert nearest_start([10 - BOUND - 1, 10 + BOUND + 1], 10) is None
    assert nearest_start([0, 7, 13], 10) == 7  # 3 before, 3 after: the earlier
    assert nearest_start([0, 7, 12], 10) == 12
    assert nearest_start([0, 7, 12], 10, lambda s: s != 12) == 7


# -- the raw reader joins as the CSV reader does ----------------------------------------------------
class _Clock:
    """A task's printed start is BASE plus its start (ns); every task passes the start filter."""

    def printed(self, start: float) -> tuple[str, int]:
        return (str(start), BASE + int(start))

    def kept(self, start: str, duration: float) -> bool:
        return True


class _Stub:
    """The parts of a raw reader's device that its level-0 join reads."""

    def __init__(self, ops: Sequence[Op], entries: Sequence[Entry]) -> None:
        self.rows_only = False  # (its rows are _Row records, their device tasks beside them)
        self.clock = _Clock()
        self.groups: dict[tuple[int, int, int], list[_Ascend]] = {}
        self.cells: dict[int, tuple[str, str]] = {}
        for stream, task, start, ttype in entries:
            listed = _Ascend(stream, task, 0, 0, float(start), 1000.0, "", "", 0, 0)
            self.groups.setdefault((stream, task, 0), []).append(listed)
            self.cells[id(listed)] = ("k", ttype)
        self.op_rows = [
            _Row(
                RawTask(0, stream, task, 0, "k", "N/A", "N/A", 1.5, 1500.0, BASE + start, 0, 0),
                _Ascend(stream, task, 4294967295, 0, float(start), 1500.0, "", "", 0, 0),
            )
            for stream, task, start in ops
        ]
        self.row_records = self.op_rows

    def task_time_cells(self) -> dict[int, tuple[str, str]]:
        return self.cells

    def _groups(self) -> dict[tuple[int, int, int], list[_Ascend]]:
        return self.groups

    def joined_types(self, rows: Sequence[_Row]) -> tuple[list[str | None], int]:
        return _Device.joined_types(cast(_Device, self), rows)

    def _nearest_types(
        self, rows: Sequence[_Row], out: list[str | None], hit: bytearray, missed: list[int]
    ) -> int:
        return _Device._nearest_types(cast(_Device, self), rows, out, hit, missed)


KINDS = ["KERNEL_AIVEC", "KERNEL_MIX_AIC", "KERNEL_AICPU", "EVENT_RECORD", "N/A", "PROFILING_ENABLE"]


@settings(max_examples=120, deadline=None)
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from([42, 46]), st.sampled_from([1, 3]), st.integers(0, 12).map(lambda k: k * 1000)
        ),
        max_size=8,
    ),
    entries=st.lists(
        st.tuples(
            st.sampled_from([42, 46]),
            st.sampled_from([1, 3]),
            st.integers(-2, 14).map(lambda k: k * 1000 + 500 * (k % 2)),
            st.sampled_from(KINDS),
        ),
        max_size=8,
    ),
)
def test_the_raw_readers_join_equals_the_csv_readers(ops: list[Op], entries: list[Entry]) -> None:
    if not ops:
        return
    with tempfile.TemporaryDirectory() as root:
        result = read(Path(root), ops, entries)
    tasks, join = _join_level0([cast(_Device, _Stub(ops, entries))])
    assert [t.type for t in tasks] == types(result)
    assert join == result.level0_join
