"""Values the real exporter cannot store: it drops the whole table, so the raw reader declines.

msprof.py writes the decoded records into SQLite before it joins them, and SQLite integers are
signed 64-bit: a record holding an unsigned 64-bit word of 2**63 or more makes the insert raise
(``OverflowError: Python int too large to convert to SQLite INTEGER``), and the exporter loses
that whole table (310b_addcmul with one task_track timestamp set so: 5 rows of ``N/A`` where the
raw reader gave 1 task; 910b_l1_div with one ffts_profile word so: 521 ``KERNEL_AIVEC`` rows for
509 ``AI_VECTOR_CORE``). Such a run is declined, never answered differently.

Only the top byte of each such word is looked at (little-endian: its last byte), as strided
slices, so the check costs a pass over a sixty-fourth of the bytes, not a decode. Each slice
covers :data:`WINDOW` records: one slice of a whole 64 MB file (and the ``max`` over it) is two C
calls that hold the GIL some 15 ms, a stall for an event loop waiting on a worker thread. Records
may span slice files: each file is read at the phase the bytes before it leave.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from ._decode import HOST_COMPACT_SIZE, RawData
from ._pmu import PMU_SIZE
from ._types import DeclinedError, DeclineReason

#: (record size, offsets of the unsigned 64-bit words the exporter stores) per kind of file
_TIMESTAMP: Final = 16  # task_track and node_basic_info: the header's timestamp
_HOST_WORDS: Final = (HOST_COMPACT_SIZE, (_TIMESTAMP,))
#: ffts_profile ("<4HQ4HQ12Q"): the words the exporter's FftsPmuBean keeps: the total cycles
#: (field 10), the 8 PMU events (12-19) and the two times (20-21); fields 4, 9 and 11 it ignores
_FFTS_WORDS: Final = (PMU_SIZE, (32, *range(48, PMU_SIZE, 8)))
#: Records looked at per strided slice (a few tens of microseconds each).
WINDOW: Final = 1 << 14


def _top_bit_at(slices: Iterable[RawData], size: int, offsets: tuple[int, ...]) -> bool:
    before = 0
    for data in slices:
        phase = before % size
        step = WINDOW * size
        for offset in offsets:
            top = (offset + 7 - phase) % size  # the word's last byte, in this file's bytes
            for start in range(top, len(data), step):
                if max(data[start : start + step : size]) >= 0x80:
                    return True
        before += len(data)
    return False


#: The host files whose records the exporter stores with a timestamp word (see _HOST_WORDS).
STORED_HOST_FILES: Final = ("task_track", "node_basic_info")


def host_slice_unstorable(data: RawData) -> bool:
    """Whether one slice of whole records of a :data:`STORED_HOST_FILES` file holds a timestamp
    the exporter cannot store (for a reader that looks at a slice at a time)."""
    return _top_bit_at((data,), *_HOST_WORDS)


def check_storable(
    host_data: Mapping[str, tuple[str, ...]], ffts: Iterable[tuple[str, ...]], files: Mapping[str, RawData]
) -> None:
    """Decline the run when a record the exporter stores holds a word of 2**63 or more.

    *host_data*: the plan's host files per kind (empty: not looked at here, see
    :func:`host_slice_unstorable`); *ffts*: each device's ffts_profile files, looked at where
    they were read (with counters).

    :raises DeclinedError: UNSUPPORTED, naming the file kind
    """
    for kind in STORED_HOST_FILES:
        names = host_data.get(kind, ())
        if _top_bit_at((files[n] for n in names if n in files), *_HOST_WORDS):
            raise DeclinedError(DeclineReason.UNSUPPORTED, _message(f"a {kind} timestamp", names))
    for names in ffts:
        if _top_bit_at((files[n] for n in names if n in files), *_FFTS_WORDS):
            raise DeclinedError(DeclineReason.UNSUPPORTED, _message("an ffts_profile word", names))


def _message(what: str, names: tuple[str, ...]) -> str:
    where = names[0] if len(names) == 1 else f"{names[0]} and {len(names) - 1} more"
    return f"{what} of 2**63 or more in {where}: msprof.py cannot store it and drops the whole table"
