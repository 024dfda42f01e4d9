"""Type stub of the optional C host loops (``_chost.c``); see :mod:`asc_aprof._raw._host`."""

import mmap
from collections.abc import Sequence
from typing import Any

def host_tables(
    apis: Sequence[tuple[int, ...]] | bytes | mmap.mmap,
    basics: Sequence[tuple[int, ...]] | bytes | mmap.mmap,
    tensors: Sequence[tuple[int, ...]],
    tracks: Sequence[tuple[int, ...]] | bytes | mmap.mmap,
    level0: bool,
    all_export: bool,
    lookups: tuple[object, ...],
    keys_only: bool = False,
    /,
) -> tuple[list[object], list[object]] | None: ...
def in_place(data: bytes | mmap.mmap, size: int, api: bool, /) -> bool: ...

#: 1 where records are built through tuple.__new__ (CPython >= 3.14, or ASC_APROF_RECORDS_VIA_NEW=1)
RECORDS_VIA_NEW: int

def lean_new(lookups: tuple[object, ...], all_export: bool, /) -> object: ...
def lean_feed(walk: object, kind: int, data: bytes | mmap.mmap, /) -> bool: ...
def lean_walk(walk: object, /) -> bool: ...
def lean_tensors(walk: object, records: list[Any], /) -> bool: ...
def lean_finish(walk: object, /) -> tuple[dict[int, tuple[object, int]], list[Any]] | None: ...
def ge_items(ge: object, templates: list[Any], device: int, start: int, stop: int, /) -> list[Any]: ...
