"""One export of a run at a time in this process, and no read of a run while it is exported.

``msprof.py`` rewrites a run's CSVs in place (it renames older ones, writes new ones, deletes
per-device ones), so a ``store_result()`` racing an ``export()`` of the same run would read a
half-written file. Exports of a run are serialised here and reads wait for a running export, in
every driver (blocking and async). Another *process* exporting the same run is not seen: give
each process its own runs.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from .._model._latch import Latch

#: A run's identity: its directory's (device, inode), so that every spelling of it (relative,
#: through a link, with ``..``) is one key; the absolute path where it cannot be stat'ed.
RunKey = tuple[int, int] | Path

_lock = threading.Lock()
_running: dict[RunKey, Latch] = {}  # guarded by _lock: run -> set when its export ends


def _key(run_dir: Path) -> RunKey:
    try:
        found = os.stat(run_dir)
    except OSError:
        return run_dir.absolute()
    return (found.st_dev, found.st_ino)


def _claim(key: RunKey) -> Latch | None:
    """None: the caller exports now; else the latch of the export in progress."""
    with _lock:
        latch = _running.get(key)
        if latch is None:
            _running[key] = Latch()
        return latch


def _release(key: RunKey) -> None:
    # (by the key claimed: the export may have removed or renamed the run meanwhile)
    with _lock:
        latch = _running.pop(key)
    latch.set()


def _in_progress(run_dir: Path) -> Latch | None:
    key = _key(run_dir)
    with _lock:
        return _running.get(key)


@contextlib.contextmanager
def exporting(run_dir: Path) -> Iterator[None]:
    """Hold the run's export slot (blocking until another export of it ends)."""
    key = _key(run_dir)
    while (latch := _claim(key)) is not None:
        latch.wait()
    try:
        yield
    finally:
        _release(key)


@contextlib.asynccontextmanager
async def exporting_async(run_dir: Path) -> AsyncIterator[None]:
    """Hold the run's export slot (awaiting another export of it). Cancelled while waiting: nothing held."""
    key = _key(run_dir)
    while (latch := _claim(key)) is not None:
        await latch.wait_async()
    try:
        yield
    finally:
        _release(key)


def wait_for_export(run_dir: Path) -> None:
    """Block until no export of the run is running."""
    while (latch := _in_progress(run_dir)) is not None:
        latch.wait()


async def wait_for_export_async(run_dir: Path) -> None:
    """Await until no export of the run is running. Cancelled: nothing changes."""
    while (latch := _in_progress(run_dir)) is not None:
        await latch.wait_async()
