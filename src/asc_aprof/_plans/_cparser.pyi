"""Type stub of the optional C row loop (``_cparser.c``); see :mod:`asc_aprof._parser`."""

from .._model._records import ProfilingTask

def parse_rows(
    out: list[ProfilingTask],
    buf: bytes,
    start: int,
    end: int,
    ncols: int,
    split_at: int,
    i_dev: int,
    i_id: int,
    i_name: int,
    i_type: int,
    i_dur: int,
    default_device: int | None,
    crlf: bool,
    skipped: dict[str, int],
    cls: type[ProfilingTask],
    max_line_length: int,
    counter_idx: tuple[int, ...],
    counter_out: list[bytearray],
    columnar: tuple[object, ...] | None,
    /,
) -> tuple[int, int, int, bool]: ...
def group_rows(
    devices: bytes | bytearray, names: bytes | bytearray, ndevices: int, nnames: int, skip: int, /
) -> tuple[list[tuple[int, int, int]], bytes, list[int]]: ...
def take(values: bytes | bytearray, order: bytes, start: int, stop: int, drop_nan: bool, /) -> bytes: ...
def order_stats(values: bytes | bytearray, ranks: tuple[int, ...], /) -> tuple[float, ...]: ...
def fsum(values: bytes | bytearray, /) -> float | None: ...

#: 1 where records are built through tuple.__new__ (CPython >= 3.14, or ASC_APROF_RECORDS_VIA_NEW=1)
RECORDS_VIA_NEW: int
