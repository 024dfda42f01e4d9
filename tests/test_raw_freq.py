"""The clock table of ``._freq`` on made-up records: the exporter's row rules and what it declines."""

from __future__ import annotations

import math
import struct

import pytest

from asc_aprof._model._records import ProfilingTask
from asc_aprof._plans._columns import TaskColumns
from asc_aprof._plans._raw import DeclinedError, DeclineReason
from asc_aprof._plans._raw._freq import RECORD, clock_table

CNTVCT = 1000.0  # dev_start.log cntvct 1e12 over 1e9, as DeviceClock keeps it
DEV = int(CNTVCT * 1e9)


def record(kind: int, *entries: tuple[int, int], count: int | None = None) -> bytes:
    flat: list[int] = []
    for syscnt, value in entries:
        flat += [syscnt, value, 0]
    flat += [0] * (3 * 55 - len(flat))
    return RECORD.pack(len(entries) if count is None else count, kind, *flat)


def test_an_entry_before_the_collection_sets_the_first_row_and_later_ones_add_rows() -> None:
    data = record(0, (DEV - 5, 800), (DEV - 1, 1650), (DEV + 10, 800), (DEV + 20, 1650))
    table = clock_table("7", CNTVCT, 1650.0, [("f", data)], [])  # FreqParser only (310B)
    assert table.rows == ((DEV, 1650.0), (DEV + 10, 800.0), (DEV + 20, 1650.0))
    assert [table.mhz_at(c) for c in (DEV - 1, DEV, DEV + 10, DEV + 19, DEV + 20)] == [
        1650,
        1650,
        800,
        800,
        1650,
    ]


def test_on_a_910b_both_parsers_read_lpmfreqconv_and_voltages_are_no_clock() -> None:
    freq = clock_table("5", CNTVCT, 1650.0, [("f", record(0, (DEV + 10, 800)))], [])
    assert freq.rows == ((DEV, 1650.0), (DEV, 1650.0), (DEV + 10, 800.0), (DEV + 10, 800.0))
    info = clock_table(
        "5", CNTVCT, 1650.0, [], [("i", record(0, (DEV + 3, 800)) + record(1, (DEV + 4, 700)))]
    )
    assert info.rows == ((DEV, 1650.0), (DEV + 3, 800.0))
    assert clock_table("7", CNTVCT, 1650.0, [], [("i", record(0, (DEV + 3, 800)))]).rows == ()


def test_a_zero_clock_makes_the_table_unusable() -> None:
    table = clock_table("7", CNTVCT, 1650.0, [("f", record(0, (DEV + 1, 0)))], [])
    assert math.isnan(table.mhz_at(DEV + 2)) and not table.changes()


@pytest.mark.parametrize(
    ("freq", "lpm", "reason"),
    [
        ([("f", record(0, count=56))], [], DeclineReason.MALFORMED),
        ([("f", record(0)[:-1])], [], DeclineReason.MALFORMED),
        ([], [("i", record(3, (DEV + 1, 5)))], DeclineReason.UNKNOWN_RECORD),
        ([("f", record(0))], [("i", record(0))], DeclineReason.UNSUPPORTED),
        ([], [("i", record(0, (DEV + 1, 800), (DEV + 1, 900)))], DeclineReason.AMBIGUOUS),
    ],
)
def test_what_is_not_modelled_is_declined(
    freq: list[tuple[str, bytes]], lpm: list[tuple[str, bytes]], reason: DeclineReason
) -> None:
    with pytest.raises(DeclinedError) as caught:
        clock_table("5", CNTVCT, 1650.0, freq, lpm)
    assert caught.value.declined.reason is reason


def test_columns_carry_the_clock_without_it_counting_in_equality() -> None:
    tasks = [ProfilingTask(1, "k", "AI_CORE", 1.0, 0), ProfilingTask(2, "k", "AI_CORE", 2.0, 0)]
    plain = TaskColumns(tasks)
    assert all(math.isnan(m) for m in plain.aic_mhz())
    clocked = plain.with_aic_mhz([1650.0, 800.0])
    assert list(clocked.aic_mhz()) == [1650.0, 800.0] and clocked == plain
    assert struct.calcsize("<d") * len(tasks) == clocked.buffers()["aic_mhz"].nbytes
    with pytest.raises(ValueError, match="2 tasks"):
        plain.with_aic_mhz([1.0])
