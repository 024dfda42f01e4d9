"""The one way a run's files are opened: regular files, no link below the run, no wait, bounded size.

Theory of operation
-------------------
A run directory comes from the user (or from CANN); what lies below it may not be what it seems:
a planted symbolic link can lead out of the run (and an export would write through it), a FIFO
blocks an ``open()`` forever, a sparse file claims gigabytes it does not hold. Every reader goes
through this module, so every reader applies the same rule (DECISIONS 23):

* the run folder itself may be reached through a link the user gave; below it, every directory
  is opened with ``O_NOFOLLOW | O_DIRECTORY`` relative to its parent's descriptor (``openat``),
  so no component is ever followed, however the path was checked before;
* a file is opened ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO or device opens at once instead of
  waiting for a writer), then ``fstat`` must say *regular file*, within the size bound of its
  kind (:class:`Bound`); anything else raises :class:`RunFileError` naming the file and the rule;
* :func:`check_tree` walks a whole run before something is written into it (an export), refusing
  any link or special file anywhere below it.

Nothing here parses: callers get bytes or a binary file object.
"""

from __future__ import annotations

import enum
import errno
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, Final

from .._model._errors import UsageError

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
_BELOW_DIR_FLAGS: Final = _DIR_FLAGS | os.O_NOFOLLOW
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
#: Directory levels :func:`check_tree` descends (a run is 3 deep: device_N/data/file).
_MAX_DEPTH: Final = 8


class Bound(enum.IntEnum):
    """Largest file of each kind that is read (bytes). A larger one is refused, naming the bound.

    Metadata files (``info.json``, ``sample.json``, ``start_info``, clock logs) are a few KiB in
    every real run. A raw data slice is read whole into memory by the raw reader; CANN closes a
    slice at 1 GB or less in every run seen (the simulated toolkit writes 64 MB for 500,000 tasks),
    so 2 GiB leaves room without letting a sparse file exhaust memory. CSVs are streamed, never
    held whole; their bound only stops a sparse or runaway file from being parsed for hours.
    """

    METADATA = 16 << 20
    RAW_SLICE = 2 << 30
    CSV = 64 << 30


class RunFileError(UsageError):
    """A file or folder of a run is refused by the reading rule (a link, not a regular file, too
    large, unreadable).

    :ivar path: the file or folder
    :ivar reason: what is wrong with it, in a few words
    """

    def __init__(self, path: Path, reason: str, fix: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}; {fix}")


class RunFileMissing(RunFileError):
    """The file or folder is not there."""


def _link_error(path: Path) -> RunFileError:
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return RunFileError(
        path,
        f"is a symbolic link (to {target})",
        "files below a run are never read or written through a link: replace it with the file or "
        "folder itself",
    )


def _os_error(path: Path, exc: OSError) -> RunFileError:
    if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and path.is_symlink()):
        return _link_error(path)
    if exc.errno == errno.ENOENT:
        return RunFileMissing(path, "does not exist", "check the run's path")
    return RunFileError(path, exc.strerror or str(exc), "check that it can be read")


def _relative_parts(run: Path, path: Path) -> tuple[str, ...]:
    try:
        parts = path.relative_to(run).parts
    except ValueError:
        raise RunFileError(path, f"is not inside the run {run}", "read files of the run only") from None
    if not parts or ".." in parts:
        raise RunFileError(path, f"is not a file inside the run {run}", "read files of the run only")
    return parts


def open_in_run(run: Path, path: Path, bound: Bound, *, buffered: bool = True) -> BinaryIO:
    """*path* (a file below *run*) opened for reading in binary, after the rule (module doc);
    *buffered* False: the raw :class:`io.FileIO` (for ``readinto`` straight into a buffer).

    :raises RunFileError: a link on the way or at the end, not a regular file, over *bound*
    """
    parts = _relative_parts(run, path)
    with RunFolder(run) as folder:  # (the file stays open after its folders' descriptors close)
        return folder.open("/".join(parts), bound, buffered=buffered)


def _open_file(parent: int, name: str, where: Callable[[], Path], bound: Bound, buffered: bool) -> BinaryIO:
    """*name* in the folder open as *parent*, after the rule (module doc); *where* gives its path
    for an error (made only then: building paths was a tenth of a small run's read)."""
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise _os_error(where(), exc) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RunFileError(
                where(),
                f"is not a regular file (a {_kind(info.st_mode)})",
                "a run holds regular files only: remove it from the run or replace it with the file",
            )
        if info.st_size > bound:
            raise RunFileError(
                where(),
                f"is {info.st_size:,} bytes, over the {bound.name.lower().replace('_', ' ')} bound of "
                f"{int(bound):,} bytes",
                _BOUND_FIX[bound],
            )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=-1 if buffered else 0)
    except BaseException:
        os.close(fd)
        raise


class RunFolder:
    """One run opened for a series of reads (``with RunFolder(run) as folder:``), by the same rule
    as :func:`open_in_run` and :func:`list_in_run`, each folder below the run opened once.

    A raw read lists four folders and opens a dozen files; opening every path component again
    for each of them was most of the fixed cost of reading a small run. The descriptors are
    this object's own (one thread uses it) and closed on exit.
    """

    def __init__(self, run: Path) -> None:
        self.run = run
        self._dirs: dict[tuple[str, ...], int] = {}  # folder parts -> descriptor (one thread)

    def __enter__(self) -> RunFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        dirs, self._dirs = self._dirs, {}
        for fd in dirs.values():
            os.close(fd)

    def _dir(self, parts: tuple[str, ...]) -> int:
        fd = self._dirs.get(parts)
        if fd is not None:
            return fd
        if not parts:
            try:
                fd = os.open(self.run, _DIR_FLAGS)
            except OSError as exc:
                raise _os_error(self.run, exc) from None
        else:
            parent = self._dir(parts[:-1])
            try:
                fd = os.open(parts[-1], _BELOW_DIR_FLAGS, dir_fd=parent)
            except OSError as exc:
                raise _os_error(self.run.joinpath(*parts), exc) from None
        self._dirs[parts] = fd
        return fd

    def list(self, folder: str = "") -> list[str] | None:
        """As :func:`list_in_run`: the names in *folder* (relative), None where it is missing."""
        parts = tuple(p for p in folder.split("/") if p)
        try:
            fd = self._dir(parts)
        except RunFileMissing:
            return None
        # listdir(fd) reads through a duplicate: the cached descriptor's position stays put.
        dup = os.dup(fd)
        try:
            return os.listdir(dup)
        finally:
            os.close(dup)

    def open(self, rel: str, bound: Bound, *, buffered: bool = True) -> BinaryIO:
        """As :func:`open_in_run` for the file *rel* (relative to the run, ``/``-separated)."""
        parts = tuple(p for p in rel.split("/") if p)
        if not parts or ".." in parts:
            path = self.run / rel
            raise RunFileError(path, f"is not a file inside the run {self.run}", "read files of the run only")
        return _open_file(
            self._dir(parts[:-1]), parts[-1], lambda: self.run.joinpath(*parts), bound, buffered
        )


_BOUND_FIX: Final = {
    Bound.METADATA: "a CANN metadata file is a few KiB: this one is not CANN's; restore the run's own",
    Bound.RAW_SLICE: "export the run with msprof.py and read its CSVs instead (they are streamed, not held)",
    Bound.CSV: "this CSV is larger than any export of a million-row slice; check that it is CANN's",
}


def read_in_run(run: Path, path: Path, bound: Bound) -> bytes:
    """The whole of *path* (a file below *run*), read after the rule of :func:`open_in_run`."""
    with open_in_run(run, path, bound) as stream:
        return stream.read()


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISDIR(mode):
        return "directory"
    return "special file"


def list_in_run(run: Path, folder: str = "") -> list[str] | None:
    """The names in *folder* (relative to *run*, ``""`` for the run itself), or None where it is
    missing. No component below *run* is followed.

    :raises RunFileError: *folder* or a folder on the way is a link, or cannot be listed
    """
    with RunFolder(run) as opened:
        return opened.list(folder)


def check_tree(run: Path) -> None:
    """Refuse *run* before anything is written into it: no link and no special file anywhere below.

    :raises RunFileError: naming the first link or special file found
    """
    for path, entry in _walk(os.fspath(run), 0):
        if entry.is_symlink():
            raise _link_error(Path(path))
        if not (entry.is_file(follow_symlinks=False) or entry.is_dir(follow_symlinks=False)):
            raise RunFileError(
                Path(path),
                f"is not a regular file (a {_kind(entry.stat(follow_symlinks=False).st_mode)})",
                "a run holds regular files only: remove it from the run before exporting it",
            )


def _walk(folder: str, depth: int) -> Iterator[tuple[str, os.DirEntry[str]]]:
    # The entry types come from the listing itself (d_type): no stat call per file.
    if depth > _MAX_DEPTH:
        return
    try:
        with os.scandir(folder) as scan:
            entries = sorted(scan, key=lambda e: e.name)
    except OSError as exc:
        raise _os_error(Path(folder), exc) from None
    for entry in entries:
        yield entry.path, entry
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(entry.path, depth + 1)
