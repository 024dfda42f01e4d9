"""Type stub of the optional C device loops (``_cdevice.c``); see :mod:`asc_aprof._raw._run`."""

import mmap
from typing import Any

def paired_tasks(
    headers: list[int],
    streams: list[int],
    tasks: list[int],
    counters: list[int],
    base: float,
    hertz: float,
    offset: float,
    sqe_names: tuple[str, ...],
    context: int,
    cls: type[Any],
    /,
) -> list[Any] | None: ...
def top_down(host: list[Any], device: list[Any], unknown: str, cls: type[Any], /) -> list[Any] | None: ...
def op_summary(
    ascend: list[Any],
    ge: list[Any] | tuple[Any, ...],
    hashes: dict[str, str],
    device: int,
    level0: bool,
    printer: tuple[object, ...],
    raw_cls: type[Any],
    row_cls: type[Any],
    rows_only: bool = False,
    /,
) -> tuple[list[Any] | None, list[Any]] | None: ...
def printed_all(
    values: list[float], text: bool, printer: tuple[object, ...], /
) -> tuple[list[str | None], list[int]]: ...
def round3(x: float, /) -> float: ...
def of_device(records: list[Any] | tuple[Any, ...], device: int, /) -> list[Any]: ...
def ge_index(records: list[Any] | tuple[Any, ...], device: int, /) -> dict[Any, list[Any]]: ...
def paired_stars(
    data: bytes | mmap.mmap,
    magic: int,
    base: float,
    hertz: float,
    offset: float,
    sqe_names: tuple[str, ...],
    context: int,
    cls: type[Any],
    /,
) -> list[Any] | None: ...
def public_tasks(
    tasks: tuple[Any, ...], cls: type[Any], start: int = ..., stop: int = ..., /
) -> list[Any]: ...
def empty(container: list[Any] | dict[Any, Any], /) -> None: ...
def tuple_of(items: list[Any], /) -> tuple[Any, ...]: ...
def clear_items(box: list[Any], start: int, stop: int, /) -> bool: ...

#: The least time between two releases of the GIL at release points (ns; see _release.h)
RELEASE_INTERVAL_NS: int

#: 1 where records are built through tuple.__new__ (CPython >= 3.14, or ASC_APROF_RECORDS_VIA_NEW=1)
RECORDS_VIA_NEW: int
