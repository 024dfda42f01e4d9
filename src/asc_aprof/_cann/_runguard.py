"""One export of a run at a time in this process, and no read of a run while it is exported.

``msprof.py`` rewrites a run's CSVs in place (it renames older ones, writes new ones, deletes
per-device ones), so a ``store_result()`` racing an ``export()`` of the same run would read a
half-written file. Exports of a run are serialised here and reads wait for a running export, in
every driver (blocking and async). Another *process* exporting the same run is not seen: give
each process its own runs.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from .._model._latch import Latch

_lock = threading.Lock()
_running: dict[Path, Latch] = {}  # guarded by _lock: run directory -> set when its export ends


def _claim(run_dir: Path) -> Latch | None:
    """None: the caller exports now; else the latch of the export in progress."""
    key = run_dir.absolute()
    with _lock:
        latch = _running.get(key)
        if latch is None:
            _running[key] = Latch()
        return latch


def _release(run_dir: Path) -> None:
    with _lock:
        latch = _running.pop(run_dir.absolute())
    latch.set()


def _in_progress(run_dir: Path) -> Latch | None:
    with _lock:
        return _running.get(run_dir.absolute())


@contextlib.contextmanager
def exporting(run_dir: Path) -> Iterator[None]:
    """Hold the run's export slot (blocking until another export of it ends)."""
    while (latch := _claim(run_dir)) is not None:
        latch.wait()
    try:
        yield
    finally:
        _release(run_dir)


@contextlib.asynccontextmanager
async def exporting_async(run_dir: Path) -> AsyncIterator[None]:
    """Hold the run's export slot (awaiting another export of it). Cancelled while waiting: nothing held."""
    while (latch := _claim(run_dir)) is not None:
        await latch.wait_async()
    try:
        yield
    finally:
        _release(run_dir)


def wait_for_export(run_dir: Path) -> None:
    """Block until no export of the run is running."""
    while (latch := _in_progress(run_dir)) is not None:
        latch.wait()


async def wait_for_export_async(run_dir: Path) -> None:
    """Await until no export of the run is running. Cancelled: nothing changes."""
    while (latch := _in_progress(run_dir)) is not None:
        await latch.wait_async()
