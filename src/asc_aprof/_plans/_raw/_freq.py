"""The AI Core clock of a device, as the exporter's ``freq.db`` holds it (sans-IO).

Theory of operation
-------------------
CANN writes the AI Core clock into two kinds of device file, both arrays of 888-byte records
(``II`` + 55 x ``QII``, little-endian): a count of valid entries, a type word, then entries of
(system counter, value, reserved).

- ``lpmFreqConv.data.N.slice_K`` (CANN 8.0 runs): every entry is a clock change in MHz; the type
  word is 0 in the one real file seen.
- ``lpmInfoConv.data.N.slice_K`` (CANN 9.0 runs): the type word says what the values are: 0 the
  AI Core clock (MHz), 1 the AI Core voltage, 2 the bus voltage (mV); one record of each in turn.

The exporter's pure-Python path turns them into table ``FreqParse(syscnt, freq)`` of
``device_N/sqlite/freq.db``: each parser that reads a file starts its rows with
``(dev_cnt, info.json aic_frequency)`` (``dev_cnt``: dev_start.log's ``cntvct`` as the exporter
converts it, ``int(float(cntvct) / 1e9 * 1e9)``), an entry before ``dev_cnt`` replaces that first
row's clock (so the last one before the collection wins), and every later entry is a row.
``FreqParser`` (chips 5 and 7) reads lpmFreqConv files only, ``LpmInfoConvParser`` (chip 5 only)
reads lpmInfoConv *and* lpmFreqConv files, taking the type-0 entries; so on a 910B a lpmFreqConv
file gives every row twice (checked: the real exporter's freq.db of the CANN 8.0 run
A-Y-1/AscendC-S4 ``Eye`` has ``(894505187820033, 1650)`` twice). The exporter reads the rows
sorted by counter; the clock at a counter is the last row's at or before it, info.json's before
the first row, and a table with a 0 MHz row is ignored as a whole (its PMU times use info.json's
clock then).

What this module will not model it declines (the run falls back to ``msprof.py``): a record count
above 55, a size that is not whole records, a type word the exporter has no table for, and a
device with both kinds of file (their relative order follows the directory listing).
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Sequence
from typing import Final

from ._types import ClockTable, DeclinedError, DeclineReason

#: One clock record: count, type word, 55 x (system counter, value, reserved).
ENTRIES: Final = 55
RECORD: Final = struct.Struct("<II" + "QII" * ENTRIES)
assert RECORD.size == 888

#: lpmInfoConv record types (the exporter's LpmInfoConvParser).
TYPE_AIC_FREQ: Final = 0
TYPE_AIC_VOLTAGE: Final = 1
TYPE_BUS_VOLTAGE: Final = 2
_TYPES: Final = (TYPE_AIC_FREQ, TYPE_AIC_VOLTAGE, TYPE_BUS_VOLTAGE)

#: The chips whose exporter reads each kind (data_parsers_config: FreqParser '5,7,15,16',
#: LpmInfoConvParser '5'), as info.json ``platform_version``.
FREQ_PARSER_CHIPS: Final = frozenset({"5", "7"})
LPM_INFO_PARSER_CHIPS: Final = frozenset({"5"})


def _records(data: bytes, what: str) -> list[tuple[int, list[tuple[int, int]]]]:
    """(type word, entries) of every record of *data*."""
    if len(data) % RECORD.size:
        raise DeclinedError(
            DeclineReason.MALFORMED, f"{what}: {len(data)} bytes is not whole 888-byte records"
        )
    out = []
    for fields in RECORD.iter_unpack(data):
        count = fields[0]
        if count > ENTRIES:
            raise DeclinedError(
                DeclineReason.MALFORMED, f"{what}: a record counts {count} entries (at most {ENTRIES})"
            )
        out.append((fields[1], [(fields[2 + 3 * i], fields[3 + 3 * i]) for i in range(count)]))
    return out


def _rows_into(rows: list[list[float]], entries: Sequence[tuple[int, int]], dev_cnt: int) -> None:
    for syscnt, value in entries:
        if syscnt < dev_cnt:
            rows[0][1] = value
        else:
            rows.append([syscnt, value])


def clock_table(
    chip: str,
    cntvct: float,
    rated_mhz: float,
    freq_files: Sequence[tuple[str, bytes]],
    lpm_files: Sequence[tuple[str, bytes]],
) -> ClockTable:
    """The ``FreqParse`` rows of a device.

    *cntvct*: dev_start.log's value over 1e9 (``DeviceClock.dev_cnt``); *rated_mhz*: info.json
    ``aic_frequency``; *freq_files* / *lpm_files*: (path, bytes) of its lpmFreqConv / lpmInfoConv
    files in slice order.

    :raises DeclinedError: for what the module doc says it does not model
    """
    if freq_files and lpm_files:
        raise DeclinedError(
            DeclineReason.UNSUPPORTED,
            f"{freq_files[0][0]} beside {lpm_files[0][0]}: the exporter's order of them follows the listing",
        )
    dev_cnt = int(cntvct * 1e9)
    rows: list[list[float]] = []
    if freq_files and chip in FREQ_PARSER_CHIPS:  # FreqParser
        mine = [[dev_cnt, rated_mhz]]
        for path, data in freq_files:
            if not data:
                break  # (the exporter stops at an empty file)
            for _, entries in _records(data, path):
                _rows_into(mine, entries, dev_cnt)
        rows += mine
    if chip in LPM_INFO_PARSER_CHIPS:  # LpmInfoConvParser: type-0 entries of either kind
        freq: list[list[float]] = []
        for path, data in (*lpm_files, *freq_files):
            if len(data) < RECORD.size:
                continue  # (the exporter skips such a file)
            for kind, entries in _records(data, path):
                if kind not in _TYPES:
                    raise DeclinedError(DeclineReason.UNKNOWN_RECORD, f"{path}: record type {kind}")
                if kind == TYPE_AIC_FREQ:
                    if not freq:
                        freq.append([dev_cnt, rated_mhz])
                    _rows_into(freq, entries, dev_cnt)
        rows += freq
    rows.sort(key=lambda r: r[0])
    _check_ties(rows, (freq_files or lpm_files or (("", b""),))[0][0])
    return ClockTable(tuple((int(c), float(m)) for c, m in rows), rated_mhz)


def _check_ties(rows: Sequence[Sequence[float]], what: str) -> None:
    """Two rows at one counter with different clocks: which comes last in the exporter's table
    depends on which of its two parsers finished first."""
    for a, b in itertools.pairwise(rows):
        if a[0] == b[0] and a[1] != b[1]:
            raise DeclinedError(
                DeclineReason.AMBIGUOUS, f"{what}: clocks {a[1]} and {b[1]} MHz at one counter ({a[0]})"
            )
