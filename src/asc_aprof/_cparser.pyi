"""Type stub of the optional C row loop (``_cparser.c``); see :mod:`asc_aprof._parser`."""

from ._records import ProfilingTask

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
    /,
) -> tuple[int, int, int, bool]: ...
