"""The thin file-system driver of the raw reader: list, read, decode (blocking or in a thread)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import io
import logging
import os
import sys
import threading
from collections.abc import Callable, Generator, Iterator, MutableMapping
from pathlib import Path
from typing import Any, Final, TypeVar, cast

import anyio.to_thread

from .._cann._files import Bound, RunFileError, RunFileMissing, RunFolder, check_tree
from .._plans._raw._decode import MAPPED_MIN, RawData, mapped
from .._plans._raw._run import ExportRows, RunPlan, decode_devices, decode_run, dirs_to_list, export_rows
from .._plans._raw._types import (
    Declined,
    DeclinedError,
    DeclineReason,
    RawReadDeclined,
    RawResult,
    Reader,
    WholeDecodeNeeded,
)

logger = logging.getLogger("asc_aprof")

T = TypeVar("T")


class _WhileDecoding:
    """A process-wide setting changed while at least one decode runs, in any thread, and put back
    after the last one ends: ``with pause():`` around each decode; the first in changes it
    (:meth:`_begin`), the last out restores it (:meth:`_end`), both under the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._decoding = 0  # guarded by _lock: decodes running now

    def _begin(self) -> None:
        """Change the setting (the first decode starts; called with _lock held)."""

    def _end(self) -> None:
        """Restore it (the last decode ended; called with _lock held)."""

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._decoding == 0:
                self._begin()
            self._decoding += 1
        try:
            yield
        finally:
            with self._lock:
                self._decoding -= 1
                if self._decoding == 0:
                    self._end()


class _GcPause(_WhileDecoding):
    """Keeps Python's cyclic garbage collector off while runs are decoded, in any thread.

    A decode builds some twenty small container objects per task, none of them in a reference
    cycle, so collection passes over them find nothing while costing about a fifth of the
    decode's time (measured: 1.16 against 1.46 G instructions for a 10,000-task run). The
    collector is switched off while at least one decode runs and back on after the last one,
    if it was on before the first; cycles other threads make meanwhile are collected then.
    """

    def __init__(self) -> None:
        super().__init__()
        self._paused = False  # guarded by _lock: whether this pause switched the collector off

    def _begin(self) -> None:
        if gc.isenabled():
            gc.disable()
            self._paused = True

    def _end(self) -> None:
        if self._paused:
            self._paused = False
            gc.enable()


class _FullPassesHeld(_WhileDecoding):
    """Holds back the collector's full passes (its oldest generation) while at least one read
    runs, and lets them come again after the last one (:func:`gc.set_threshold`'s third value).

    A full pass walks every tracked object of the process in one step on whichever thread
    triggers it: some 28,000 after importing anyio, a backend and the readers, plus whatever the
    read holds meanwhile (a growing list of a million records is a million items to visit): 6-30
    ms on a 2-core machine, which the event loop waits out whole. The young generations are still
    collected as usual (their passes walk only recent objects); cyclic garbage that reaches the
    oldest generation meanwhile waits until the read ends. ``gc.freeze()`` of the objects older
    than the read was tried first: after the first full pass in a read, CPython counts only the
    read's own survivors as long-lived, and the next full passes came every few thousand
    allocations (9-10 of up to 27 ms in a 1,000,000-task ``profile()``, against 2 before).
    Left alone where automatic collection is off (threshold 0), and a threshold the program sets
    meanwhile is kept. (On CPython 3.14 the oldest generation is collected in increments and the
    third value is ignored: nothing to hold there.)
    """

    def __init__(self) -> None:
        super().__init__()
        self._saved: int | None = None  # guarded by _lock: the third threshold before the first read

    def _begin(self) -> None:
        young, middle, oldest = gc.get_threshold()
        if young and oldest < HELD_THRESHOLD:
            gc.set_threshold(young, middle, HELD_THRESHOLD)
            self._saved = oldest

    def _end(self) -> None:
        if self._saved is not None:
            young, middle, oldest = gc.get_threshold()
            if oldest == HELD_THRESHOLD:
                gc.set_threshold(young, middle, self._saved)
            self._saved = None


class _SwitchPin(_WhileDecoding):
    """Pins the interpreter's switch interval (:func:`sys.setswitchinterval`) to
    :data:`SWITCH_INTERVAL` at most while runs are decoded, in any thread.

    A decode holds the GIL in long stretches (its C loops let it go only at release points, see
    ``_release.h``). A thread that wants the GIL, such as the event loop's while
    :func:`read_run_async` decodes in a worker, waits one switch interval (5 ms by default) before
    it asks the holder to hand over, and then gets it at the holder's next release point or
    bytecode boundary: the interval bounds how late the loop runs. Pinned low while a decode
    runs, the loop waits well under 2 ms; the other threads of the process switch more often
    meanwhile, which costs them little. The value in force before the first decode comes back
    after the last one, unless someone set another one meanwhile (that one is kept).
    """

    def __init__(self) -> None:
        super().__init__()
        self._saved: float | None = None  # guarded by _lock: the interval before the first decode
        self._pinned = 0.0  # guarded by _lock: the interval as set (as the interpreter reads it back)

    def _begin(self) -> None:
        before = sys.getswitchinterval()
        if before > SWITCH_INTERVAL:
            sys.setswitchinterval(SWITCH_INTERVAL)
            self._saved = before
            self._pinned = sys.getswitchinterval()

    def _end(self) -> None:
        if self._saved is not None:
            if sys.getswitchinterval() == self._pinned:
                sys.setswitchinterval(self._saved)
            self._saved = None


#: The switch interval while a decode runs (seconds): see :class:`_SwitchPin`. The C loops let
#: the GIL go at most every twice as long (``_release.h``: more often would keep a waiting thread
#: from ever asking for it).
SWITCH_INTERVAL: Final = 0.00025
#: The collector's third threshold while reads run: full passes never come (a C int's largest)
HELD_THRESHOLD: Final = 2**31 - 1

_gc_paused = _GcPause()
_switch_pinned = _SwitchPin()
#: ``with reading():`` around an awaited read (see :class:`_FullPassesHeld`)
reading = _FullPassesHeld()


@contextlib.contextmanager
def _decoding() -> Iterator[None]:
    """Around every decode: the collector off, the switch interval pinned (both process-wide)."""
    with _gc_paused(), _switch_pinned():
        yield


def decoding(fn: Callable[[], T]) -> T:
    """``fn()`` as a decode runs (for whole-run work a worker thread does for the event loop:
    splitting, columns, timelines of a decoded run): the collector off, the switch interval pinned."""
    with _decoding():
        return fn()


def _listing(run_dir: Path | RunFolder) -> dict[str, list[str]]:
    if isinstance(run_dir, Path):
        with RunFolder(run_dir) as folder:
            return _listing(folder)
    try:
        root = run_dir.list()
    except RunFileError as exc:
        raise DeclinedError(DeclineReason.NOT_A_RUN, str(exc)) from None
    if root is None:
        raise DeclinedError(DeclineReason.NOT_A_RUN, f"{run_dir.run}: no such directory")
    listing: dict[str, list[str]] = {"": root}
    for rel in dirs_to_list(root):
        # A link among the run's folders is refused (RunFileError), never declined: msprof.py
        # would follow it too.
        listing[rel] = run_dir.list(rel) or []
    return listing


def _files(
    path: Path, counters: bool = True, mapped_min: int = MAPPED_MIN
) -> tuple[RunPlan, dict[str, RawData]]:
    """The run's plan and the contents of every file it wants, read now by the reading rule
    (:mod:`asc_aprof._cann._files`; see :class:`_RunFiles` for how each is read). Without
    *counters* the PMU records (``ffts_profile``, a third of a run's bytes) are not read.

    :raises RunFileError: a link, a FIFO or another special file, or a file over its bound
    """
    with RunFolder(path) as folder:
        plan, files = _run_files(folder, counters, mapped_min)
        return plan, {rel: files[rel] for rel in files}


def _run_files(folder: RunFolder, counters: bool, mapped_min: int = MAPPED_MIN) -> tuple[RunPlan, _RunFiles]:
    """The run's plan and its files as a decode reads them (:class:`_RunFiles`, over *folder*,
    which must stay open while they are read)."""
    plan = RunPlan.from_listing(_listing(folder))
    skipped = set() if counters else {p for dev in plan.devices for p in dev.ffts}
    later = {p for dev in plan.devices for p in (*dev.stars, *dev.ts_track, *dev.ffts)}
    later.update(p for kind in HOST_RECORD_FILES for p in plan.host_data.get(kind, ()))
    files = _RunFiles(folder, plan.record_files, mapped_min)
    for rel in plan.wanted:
        if rel not in skipped:
            files.add(rel, now=rel not in later)
    return plan, files


#: The host files of records, one per task or call (api_event, node_basic_info, task_track).
HOST_RECORD_FILES: Final = ("api_event", "node_basic_info", "task_track")
#: The most bytes :meth:`_RunFiles.pieces` reads at a time.
PIECE: Final = 4 << 20


class _RunFiles(MutableMapping[str, RawData]):
    """The files of one run a decode reads, by relative path: the run's metadata and small host
    files read when made; the host's record files (:data:`HOST_RECORD_FILES`) and each device's
    task and PMU logs (``stars_soc``, ``ts_track``, ``ffts_profile``: most of a big run's bytes)
    only when the decode first asks for them, so that a slice or one device's logs are in memory
    while they are decoded, not every file from the start.
    ``pop`` (the decode lets go of a file it is done with) forgets a file read or not.

    Each file is read by the reading rule of :mod:`asc_aprof._cann._files` (a regular file, no
    link, within its bound), unbuffered: bytes, or, for a file of binary records of *mapped_min*
    bytes or more, an anonymous memory map (see :data:`RawData`: the decode reads both alike, and
    a map is freed with the GIL released, where freeing a bytes object of 64 MB holds it for about
    10 ms). A file read later can still be refused then (:class:`RunFileError`), or declined as
    malformed where it is gone or unreadable: before any task is given, as one read fails.
    Used by one thread, with the folder open.
    """

    def __init__(self, folder: RunFolder, record_files: frozenset[str], mapped_min: int) -> None:
        self._folder = folder
        self._record_files = record_files
        self._mapped_min = mapped_min
        self._held: dict[str, RawData] = {}  # read
        self._later: dict[str, None] = {}  # wanted, not read yet (in order)

    def add(self, rel: str, *, now: bool) -> None:
        if now:
            self._held[rel] = self._read(rel)
        else:
            self._later[rel] = None

    @contextlib.contextmanager
    def _opened(self, rel: str) -> Iterator[io.FileIO]:
        """*rel* opened by the reading rule; a file gone or unreadable is declined as malformed."""
        bound = Bound.RAW_SLICE if "/data/" in rel else Bound.METADATA
        try:
            with self._folder.open(rel, bound, buffered=False) as opened:
                yield cast(io.FileIO, opened)
        except RunFileMissing as exc:  # listed a moment ago: the run is being changed
            raise DeclinedError(DeclineReason.MALFORMED, str(exc)) from None
        except RunFileError:
            raise
        except OSError as exc:
            where = self._folder.run / rel
            raise DeclinedError(DeclineReason.MALFORMED, f"{where}: {exc.strerror}") from None

    def _read(self, rel: str) -> RawData:
        with self._opened(rel) as stream:
            size = os.fstat(stream.fileno()).st_size
            if rel in self._record_files and size >= max(self._mapped_min, 1):
                return _read_mapped(stream, size)
            return stream.readall()

    def pieces(self, rel: str, multiple: int) -> Iterator[RawData] | None:
        """As :class:`PieceSource` says: a file not read yet is read a piece of at most
        :data:`PIECE` bytes at a time into one buffer (a piece is good until the next is asked
        for), a file read already given whole. Forgotten (as ``pop``) once every piece is given."""
        if rel in self._held:
            data = self._held[rel]
            return iter([data]) if len(data) % multiple == 0 else None
        if rel not in self._later:
            raise KeyError(rel)
        with self._opened(rel) as stream:
            if os.fstat(stream.fileno()).st_size % multiple:
                return None
        return self._pieces(rel, multiple)

    def _pieces(self, rel: str, multiple: int) -> Iterator[RawData]:
        # One map, read into again for each piece (a bytes object per piece would be freed into
        # the heap and keep its pages: glibc raises its mmap threshold past that size).
        step = max(PIECE // multiple, 1) * multiple
        with self._opened(rel) as stream:  # (opened again: by the rule, as any read)
            buffer = mapped(step)
            view = memoryview(buffer)
            try:
                while True:
                    got = 0
                    while got < step and (count := stream.readinto(view[got:])):  # (GIL released)
                        got += count
                    if not got:
                        break
                    yield buffer if got == step else bytes(view[:got])
                    if got < step:
                        break
            finally:
                view.release()
                buffer.close()
        self.pop(rel)

    def __getitem__(self, rel: str) -> RawData:
        data = self._held.get(rel)
        if data is None:
            if rel not in self._later:
                raise KeyError(rel)
            data = self._held[rel] = self._read(rel)
            del self._later[rel]
        return data

    def __setitem__(self, rel: str, data: RawData) -> None:
        self._later.pop(rel, None)
        self._held[rel] = data

    def __delitem__(self, rel: str) -> None:
        if rel not in self:
            raise KeyError(rel)
        self.pop(rel)

    def pop(self, rel: str, default: Any = None) -> Any:  # (without reading a file not read yet)
        self._later.pop(rel, None)
        return self._held.pop(rel, default)

    def __contains__(self, rel: object) -> bool:
        return rel in self._held or rel in self._later

    def __iter__(self) -> Iterator[str]:
        return iter([*self._held, *self._later])

    def __len__(self) -> int:
        return len(self._held) + len(self._later)


def _read_mapped(stream: io.FileIO, size: int) -> RawData:
    """The rest of *stream* (*size* bytes, as it was when opened) in a new memory map; bytes
    where the file changed size meanwhile (what ``read()`` would have given)."""
    out = mapped(size)
    view = memoryview(out)
    try:
        got = 0
        while got < size:
            count = stream.readinto(view[got:])  # (the GIL is released while the kernel copies)
            if not count:
                break
            got += count
        rest = stream.readall() if got == size else b""
        if got == size and not rest:
            return out
        return bytes(view[:got]) + rest
    finally:
        view.release()


def read_run(
    run_dir: str | os.PathLike[str],
    *,
    with_task_time: bool = False,
    counters: bool = False,
    packed: bool = False,
) -> RawResult | Declined:
    """Read run *run_dir* natively, or say why not (blocking; milliseconds for thousands of tasks).

    *with_task_time*: also give every row of the task_time CSV (``RawResult.task_time``);
    *counters*: also the PMU counters (``RawResult.counters``; declined where not verified);
    *packed*: the tasks may come as :class:`~asc_aprof._plans._raw.PackedRows` (a fifth of the
    memory; each record made when asked for), for a reader that takes them a slice at a time.
    """
    path = Path(run_dir)
    try:
        try:
            return _read_run(path, with_task_time, counters, lean=True, packed=packed)
        except WholeDecodeNeeded:  # (rare, see there)
            return _read_run(path, with_task_time, counters, lean=False)
    except DeclinedError as exc:
        return exc.declined
    except RunFileError:
        raise  # refused (a link, a FIFO, too large): no other reader may read it either
    except Exception as exc:  # a bug here must not cost the run: msprof.py can still read it
        logger.warning("raw reader failed on %s", path, exc_info=True)
        return Declined(DeclineReason.INTERNAL, f"{type(exc).__name__}: {exc}")


def _read_run(
    path: Path, with_task_time: bool, counters: bool, *, lean: bool, packed: bool = False
) -> RawResult:
    with RunFolder(path) as folder:
        # The metadata and host data are read before the pause (a read that blocks, and a
        # cancelled read_run_async abandons, must not keep the collector off for the whole
        # process); each device's logs during it, when its turn comes (regular files only).
        plan, files = _run_files(folder, counters)
        with _decoding():
            # (handed over: the decode drops each file it is done with)
            return decode_run(
                plan,
                files,
                with_task_time=with_task_time,
                with_counters=counters,
                consume=True,
                lean=lean,
                packed=packed,
            )


@dataclasses.dataclass(frozen=True, slots=True)
class RawPart:
    """Tasks of a run read a device at a time (:class:`DeviceReads`): ``result.tasks[first:]``."""

    result: RawResult
    first: int = 0


class DeviceReads:
    """:func:`read_run` of a run's op_summary tasks (no counters), a device at a time.

    Each :meth:`next_part` (blocking: a worker thread's, for an event loop) decodes the next
    device with tasks, once the one before was given, so a reader that lets go of each part
    holds one device's tasks, not the run's. The run's folder stays open between parts (no other
    file is opened anew, nothing is read twice) until the last part, an error, or :meth:`close`.

    A later device can still decline. Where only the packed pass cannot take it, the run is
    decoded whole (as read_run does) and the part continues after the tasks already given: the
    two give the same tasks in the same order (the raw reader's tests). Where the run is
    declined, :meth:`next_part` says why: what that means for the tasks given (another source
    takes over, or the read fails) is the caller's policy.
    """

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.path = Path(run_dir)
        self.given = 0  # guarded by _lock: tasks given so far
        self._lock = threading.Lock()  # held while a part is made
        self._parts: Generator[RawResult, None, None] | None = self._decoded()  # guarded by _lock
        self._closing = False  # set by close() from any thread; read under _lock

    def _decoded(self) -> Generator[RawResult, None, None]:
        with RunFolder(self.path) as folder:
            plan, files = _run_files(folder, False)  # (before the pause, as in _read_run)
            parts = decode_devices(plan, files, consume=True)
            try:
                while True:
                    with _decoding():
                        part = next(parts, None)
                    if part is None:
                        return
                    yield part
                    del part  # (the reader's alone while the next device is made)
            finally:
                parts.close()

    def next_part(self) -> RawPart | Declined | None:
        """The next device's tasks; None after the last; or why the run is declined (the parts
        end then).

        :raises RunFileError: a file refused (a link, a FIFO, too large): no reader may read it
        """
        with self._lock:
            try:
                return self._next()
            except BaseException:
                self._close_now()
                raise
            finally:
                if self._closing:
                    self._close_now()

    def _next(self) -> RawPart | Declined | None:
        if self._parts is None:
            return None
        try:
            try:
                part = next(self._parts, None)
            except WholeDecodeNeeded:  # (rare: see read_run)
                self._close_now()
                whole = _read_run(self.path, False, False, lean=False)
                first = self.given
                if len(whole.tasks) < first:  # (a bug: the two decodes disagree)
                    return Declined(
                        DeclineReason.INTERNAL,
                        f"the whole decode gave {len(whole.tasks)} tasks, {first} given a device at a time",
                    )
                self.given = len(whole.tasks)
                return RawPart(whole, first) if self.given > first else None
        except DeclinedError as exc:
            self._close_now()
            return exc.declined
        except RunFileError:
            raise
        except Exception as exc:  # as read_run: a bug here must not cost the run
            logger.warning("raw reader failed on %s", self.path, exc_info=True)
            self._close_now()
            return Declined(DeclineReason.INTERNAL, f"{type(exc).__name__}: {exc}")
        if part is None:
            self._close_now()
            return None
        self.given += len(part.tasks)
        return RawPart(part)

    def _close_now(self) -> None:
        parts, self._parts = self._parts, None
        if parts is not None:
            parts.close()

    def close(self) -> None:
        """Ends the parts (the folder closed). Safe from any thread, a part being made or not:
        then it ends once that part is made."""
        self._closing = True
        if self._lock.acquire(blocking=False):
            try:
                self._close_now()
            finally:
                self._lock.release()


def read_by_device(
    run_dir: str | os.PathLike[str], *, checked: bool
) -> tuple[RawResult, DeviceReads] | Declined:
    """The first device's tasks of run *run_dir* and the :class:`DeviceReads` that gives the
    rest (blocking), or why the run is declined; with *checked*, :func:`check_tree` first.

    :raises RunFileError: a file refused (a link, a FIFO, too large)
    """
    if checked:
        check_tree(Path(run_dir))
    reads = DeviceReads(run_dir)
    part = reads.next_part()
    if part is None:  # (cannot be: a run without tasks is declined)
        return Declined(DeclineReason.NO_TASKS, "no task")
    if isinstance(part, Declined):
        return part
    return part.result, reads


def read_export_rows(run_dir: str | os.PathLike[str], *, pmu: bool = False) -> ExportRows | Declined:
    """The rows ``msprof.py export summary`` would write for run *run_dir* (for a CSV writer), or
    why not. Unlike :func:`read_run`, a bug raises: the caller has no other way to read the run.

    *pmu*: also op_summary's PMU cells as printed (``DeviceRows.pmu_header`` / ``pmu_cells``).
    """
    try:
        with RunFolder(Path(run_dir)) as folder:
            plan, files = _run_files(folder, pmu)  # (as in read_run)
            with _decoding():
                return export_rows(plan, files, pmu=pmu, consume=True)
    except DeclinedError as exc:
        return exc.declined


async def read_run_async(
    run_dir: str | os.PathLike[str], *, counters: bool = False, checked: bool = False, packed: bool = False
) -> RawResult | Declined:
    """:func:`read_run` in a worker thread, so the event loop never waits on it; with *checked*,
    :func:`~asc_aprof._cann._files.check_tree` first, in the same thread.

    Cancelled: returns at once; the thread finishes its (side-effect free) read in the background.
    """
    return await anyio.to_thread.run_sync(
        functools.partial(_checked_read if checked else read_run, run_dir, counters=counters, packed=packed),
        abandon_on_cancel=True,
    )


def _checked_read(run_dir: str | os.PathLike[str], *, counters: bool, packed: bool) -> RawResult | Declined:
    check_tree(Path(run_dir))  # (raises RunFileError: refused, as read_run refuses it)
    return read_run(run_dir, counters=counters, packed=packed)


def raw_or_fallback(reader: Reader, outcome: RawResult | Declined, run_dir: object) -> RawResult | None:
    """The raw reader's result, or None where ``msprof.py`` has to produce it instead.

    :raises RawReadDeclined: the reader is ``RAW`` and the run was declined
    """
    if isinstance(outcome, RawResult):
        return outcome
    if reader is Reader.RAW:
        raise RawReadDeclined(run_dir, outcome)
    logger.info("run %s: raw reader declined (%s); using msprof.py", run_dir, outcome)
    return None
