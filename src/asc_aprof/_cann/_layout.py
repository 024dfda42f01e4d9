"""Where runs and exported CSVs live on disk (every CANN layout), without parsing them.

A *run* is one ``PROF_<counter>_<YYYYMMDDhhmmssmmm>_<suffix>`` directory made by one
``aclprofStart``; the suffix is the 8-digit pid and 8 letters from CANN 8.5 on, 16 letters (no
pid) before. The time is local time. Runs are ordered by the start CANN records in
``host/start_info`` (Unix time), never by name: the counter restarts in every process and local
time steps back. The run a start made is found by comparing the result path's entries before and
after the start (:func:`new_run_since`), with the pid only to break a tie.

Exports land in one of two layouts:

* new (CANN 8.0+): ``PROF_x/mindstudio_profiler_output/op_summary_<ts>.csv`` (all devices merged,
  ``Device_id`` first), with ``op_summary_slice_<k>_<ts>.csv`` pieces beyond a million rows;
* old (CANN 5-7): ``PROF_x/device_N/summary/op_summary_<dev>[_<model>]_<iter>[_<ts>].csv``, one per
  device, with no device column (the device comes from ``device_N``), sliced as
  ``op_summary_<dev>_<iter>_slice_<k>_<ts>.csv`` (also the names the current exporter writes
  per device before it merges them).

op_summary is preferred over task_time (task_time names are hashed binary names from CANN 9.0 on),
and the newest export over older ones.

Nothing is read through a symbolic link, which could lead out of the run: a symlinked run (as a
run id) or export folder (``mindstudio_profiler_output``, ``device_N``, ``device_N/summary``) is
refused with a :class:`UsageError` naming it, and a symlinked CSV is not picked. A run read
natively is checked the same way first (:func:`refuse_linked_folders`): its raw folders (``host``,
``device_N``, their ``data``) and its export folders, so a link planted in the run is refused
whichever reader reads it, and a later ``msprof.py`` export cannot write through it unnoticed.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import difflib
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final

from .._model._errors import UsageError
from .._model._json import loads as json_loads
from ._files import Bound, RunFileError, list_in_run, open_in_run, read_in_run

RUN_PATTERN: Final = re.compile(r"^PROF_(\d{6})_(\d{17})_([0-9A-Za-z]+)$")
#: The name's suffix from CANN 8.5 on: the 8-digit pid, then 8 letters (before 8.5: 16 letters).
PID_SUFFIX: Final = re.compile(r"^(\d{8})[A-Za-z]{8}$")
CSV_PATTERN: Final = re.compile(r"^(op_summary|task_time)_((?:\d+_)*)(?:slice_(\d+)_)?(\d+)\.csv$")
MERGED_DIR: Final = "mindstudio_profiler_output"
DEVICE_DIR_PATTERN: Final = re.compile(r"^device_(\d+)$")

logger = logging.getLogger("asc_aprof")


@dataclasses.dataclass(frozen=True, slots=True)
class CsvFile:
    """One exported summary CSV.

    :ivar path: the file
    :ivar kind: ``op_summary`` or ``task_time``
    :ivar device: the device from ``device_N`` (old layout), else None (the rows say)
    :ivar stamp: the export timestamp from the name (``""`` when the name has none)
    :ivar slice: the slice index, 0 for an unsliced file
    :ivar run: the run it belongs to (opened from there, no link followed below it), or None
        for a CSV given on its own (its own folder is the limit then)
    """

    path: Path
    kind: str
    device: int | None
    stamp: str
    slice: int
    run: Path | None = None

    def open(self) -> BinaryIO:
        """The file, opened by the reading rule (:mod:`asc_aprof._cann._files`): regular, not a link,
        without waiting, within the CSV bound."""
        return open_in_run(self.run or self.path.parent, self.path, Bound.CSV)


def run_start_key(name: str) -> tuple[str, int]:
    """Sort key of a run directory by its name alone: the local start time in it, then the counter."""
    match = RUN_PATTERN.match(name)
    if match is None:
        return ("", 0)
    return (match.group(2), int(match.group(1)))


def _read_json(run_dir: Path, *parts: str) -> dict[str, object] | None:
    try:
        data = json_loads(read_in_run(run_dir, run_dir.joinpath(*parts), Bound.METADATA))
    except (RunFileError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def recorded_start_us(run_dir: Path) -> int | None:
    """The start CANN recorded in ``host/start_info`` (``collectionTimeBegin``, Unix µs), if any."""
    info = _read_json(run_dir, "host", "start_info")
    if info is None:
        return None
    try:
        return int(str(info.get("collectionTimeBegin", "")))
    except ValueError:
        return None


def run_pid(run_dir: Path) -> int | None:
    """The process that made a run: the pid in its name (CANN 8.5+) or in ``host/info.json``."""
    match = RUN_PATTERN.match(run_dir.name)
    if match is not None:
        named = PID_SUFFIX.match(match.group(3))
        if named is not None:
            return int(named.group(1))
    info = _read_json(run_dir, "host", "info.json")
    if info is None:
        return None
    try:
        return int(str(info.get("pid", "")))
    except ValueError:
        return None


def _recorded_key(run: Path) -> tuple[int, tuple[str, int]]:
    started = recorded_start_us(run)
    if started is None:
        # No record: the name's local time, read as local time (good to the hour it may be off).
        name_time = run_start_key(run.name)[0]
        try:
            started = int(
                _dt.datetime.strptime(name_time[:14], "%Y%m%d%H%M%S").timestamp() * 1_000_000
            ) + 1000 * int(name_time[14:] or 0)
        except ValueError:
            started = 0
    return (started, run_start_key(run.name))


def list_runs(result_path: Path) -> list[Path]:
    """The ``PROF_*`` directories directly under *result_path*, oldest recorded start first.

    The order is CANN's recorded start (``host/start_info``, Unix time), then the name: the name's
    counter restarts in every process, and its time is local time, which steps back with summer
    time.
    """
    try:
        entries = list(os.scandir(result_path))
    except FileNotFoundError:
        return []
    runs = [Path(e.path) for e in entries if RUN_PATTERN.match(e.name) and e.is_dir(follow_symlinks=False)]
    return sorted(runs, key=_recorded_key)


def run_names(result_path: Path) -> frozenset[str]:
    """Names of the ``PROF_*`` entries under *result_path* now (before a start, for :func:`new_run_since`)."""
    try:
        names = os.listdir(result_path)
    except (FileNotFoundError, NotADirectoryError):
        return frozenset()
    return frozenset(n for n in names if n.startswith("PROF_"))


class AmbiguousRunError(UsageError):
    """Several new runs appeared during one start and none is this process's alone."""


def new_run_since(result_path: Path, before: frozenset[str], pid: int) -> Path | None:
    """The ``PROF_*`` directory a start made: the entry of *result_path* that is not in *before*.

    Neither the pid (CANN before 8.5 puts none in the name) nor the time in the name (local time,
    which steps back) decides alone. Several new entries (another process started into the same
    path at the same moment) are told apart by the pid in the name or in ``host/info.json``.

    :return: the run, or None when no new directory appeared
    :raises AmbiguousRunError: when the new entries cannot be told apart
    """
    new = sorted(n for n in run_names(result_path) - before if RUN_PATTERN.match(n))
    runs = [result_path / n for n in new if (result_path / n).is_dir() and not (result_path / n).is_symlink()]
    if len(runs) <= 1:
        return runs[0] if runs else None
    mine = [run for run in runs if run_pid(run) == pid]
    if len(mine) == 1:
        return mine[0]
    raise AmbiguousRunError(
        f"{len(runs)} new PROF_* directories appeared in {result_path} during one start "
        f"({', '.join(new)}) and {'none' if not mine else 'several'} carries this process's pid "
        f"{pid}: another process profiles into the same result path at the same moment, so this "
        "collection's run cannot be told apart. Give each process a result path of its own."
    )


def resolve_run(result_path: Path, run_id: str | os.PathLike[str]) -> Path:
    """The run directory *run_id* names, which must be a real directory inside *result_path*.

    :raises UsageError: for absolute ids, ``..``, symlinks out of the result path, or a missing run
    """
    text = os.fspath(run_id)
    if "\x00" in text:
        raise UsageError(f"run id contains a NUL byte: {text!r}")
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        raise UsageError(f"run id cannot be encoded for the file system: {text!r}") from None
    candidate = Path(text)
    if (
        candidate.is_absolute()
        and candidate.name not in ("", "..", ".")
        and (candidate.parent == result_path or candidate.parent.resolve() == result_path.resolve())
    ):
        candidate = Path(candidate.name)  # the run's own path, as list_runs() gives it
    if candidate.is_absolute() or ".." in candidate.parts or not candidate.parts:
        raise UsageError(
            f"run id must be a directory name inside {result_path} (or a run's path there), got {text!r}; "
            "to read a run elsewhere: asc_aprof.open_run(path)"
        )
    path = result_path / candidate
    root = result_path.resolve()
    if path.is_symlink() or not path.resolve().is_relative_to(root):
        raise UsageError(f"run id {text!r} leaves the result path {result_path}")
    if not path.is_dir():
        raise UsageError(_no_run_message(result_path, text))
    return path


def no_runs_message(result_path: Path) -> str:
    """Why *result_path* holds no run: missing, a run itself, or runs one level down."""
    if not result_path.is_dir():
        return f"no PROF_* run in {result_path}: it does not exist (check the result path)"
    if result_path.name.startswith("PROF_") or (result_path / "host").is_dir():
        return (
            f"{result_path} is a run itself, not a result path: give its parent "
            f"({result_path.parent}), or read it directly with asc_aprof.open_run('{result_path}')"
        )
    below = runs_one_level_down(result_path)
    if below:
        return f"no PROF_* run in {result_path}, but {below}"
    return f"no PROF_* run in {result_path}"


def runs_one_level_down(path: Path) -> str | None:
    """Where runs are when *path* holds none but its folders do, said as a fix; else None."""
    below = sorted(
        child.name for child in _subdirs(path) if any(g.name.startswith("PROF_") for g in _subdirs(child))
    )
    if not below:
        return None
    where = ", ".join(below[:3]) + (f" and {len(below) - 3} more" if len(below) > 3 else "")
    return f"runs are one level down, in {where}: give that folder"


def _subdirs(path: Path) -> list[Path]:
    try:
        with os.scandir(path) as entries:
            return [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _no_run_message(result_path: Path, text: str) -> str:
    """Why *text* names no run in *result_path*, with the runs there (the closest first)."""
    if not result_path.is_dir():
        return f"no run {text!r}: the result path {result_path} does not exist"
    names = [run.name for run in list_runs(result_path)]
    if not names:
        return f"no run {text!r} in {result_path}: it holds no PROF_* run"
    close = difflib.get_close_matches(text, names, n=3, cutoff=0.6)
    shown = close + [n for n in reversed(names) if n not in close][: max(0, 3 - len(close))]
    more = f" and {len(names) - len(shown)} more" if len(names) > len(shown) else ""
    return f"no run {text!r} in {result_path}; runs there: {', '.join(shown)}{more}"


def _csvs_in(directory: Path, device: int | None, run: Path | None = None) -> Iterator[CsvFile]:
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        match = CSV_PATTERN.match(entry.name)
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        last = match.group(4)
        yield CsvFile(
            path=Path(entry.path),
            kind=match.group(1),
            device=device,
            stamp=last if len(last) == 14 else "",
            slice=int(match.group(3) or 0),
            run=run,
        )


def _pick(files: list[CsvFile]) -> list[CsvFile]:
    """Prefer op_summary, then the newest stamp; keep all slices of it, in order."""
    for kind in ("op_summary", "task_time"):
        of_kind = [f for f in files if f.kind == kind]
        if of_kind:
            newest = max(f.stamp for f in of_kind)
            chosen = [f for f in of_kind if f.stamp == newest]
            if newest == "":
                # Unstamped names (op_summary_0_1.csv): the newest file by mtime.
                chosen = [max(chosen, key=lambda f: f.path.stat().st_mtime_ns)]
            return sorted(chosen, key=lambda f: f.slice)
    return []


def task_time_beside(chosen: list[CsvFile]) -> list[CsvFile]:
    """The task_time CSVs of the same export as the op_summary files *chosen*.

    Per directory: the task_time files with the op_summary's stamp, else the newest ones. They
    give level-0 tasks their type (op_summary says ``N/A`` there).
    """
    out: list[CsvFile] = []
    seen: set[Path] = set()
    for csv_file in chosen:
        directory = csv_file.path.parent
        if csv_file.kind != "op_summary" or directory in seen:
            continue
        seen.add(directory)
        times = [f for f in _csvs_in(directory, csv_file.device, csv_file.run) if f.kind == "task_time"]
        same = [f for f in times if f.stamp == csv_file.stamp]
        out.extend(sorted(same, key=lambda f: f.slice) if same else _pick(times))
    return out


def find_summary_csvs(run_dir: Path) -> list[CsvFile]:
    """The CSVs to parse for one run: merged files if present, else one set per device.

    Logs a warning (logger ``asc_aprof``) when only task_time is there: from CANN 9.0 its
    ``kernel_name`` is a hashed binary name, not the op name op_summary would give.

    :raises UsageError: when ``mindstudio_profiler_output``, a ``device_N`` or its ``summary``
        is a symbolic link (named in the message)
    """
    chosen = _find_summary_csvs(run_dir)
    if chosen and all(f.kind == "task_time" for f in chosen):
        logger.warning(
            "run %s has no op_summary CSV (no kernel ran with host data, or ProfileType.TASK_TIME was "
            "not collected); using task_time, whose kernel names are hashed binary names from CANN 9.0 on",
            run_dir.name,
        )
    return chosen


def _find_summary_csvs(run_dir: Path) -> list[CsvFile]:
    merged_dir = run_dir / MERGED_DIR
    merged = _pick(list(_csvs_in(merged_dir, None, run_dir))) if _export_dir(merged_dir) else []
    if merged:
        return merged
    chosen: list[CsvFile] = []
    try:
        entries = sorted(os.scandir(run_dir), key=lambda e: e.name)
    except FileNotFoundError:
        return []
    for entry in entries:
        device = device_of_directory(entry.name) if DEVICE_DIR_PATTERN.match(entry.name) else None
        if device is None or not _export_dir(Path(entry.path)):
            continue
        summary = Path(entry.path) / "summary"
        if _export_dir(summary):
            chosen.extend(_pick(list(_csvs_in(summary, device, run_dir))))
    return chosen


def _export_dir(path: Path) -> bool:
    """Whether *path* is a directory to read CSVs from (False when it is missing or no directory).

    :raises UsageError: when it is a symbolic link: exports are read only from inside the run,
        as the run itself and the CSVs are (a link may lead anywhere)
    """
    if path.is_symlink():
        raise UsageError(
            f"{path} is a symbolic link (to {os.readlink(path)}): exported CSVs are read only from "
            "directories inside the run, never through a link; replace it with the directory itself"
        )
    return path.is_dir()


def refuse_linked_folders(run_dir: Path) -> None:
    """Check a run before it is read natively: no raw or export folder in it is a symbolic link.

    :raises UsageError: naming the first link found (``mindstudio_profiler_output``, ``host``,
        ``host/data``, ``device_N``, ``device_N/data`` or ``device_N/summary``)
    """
    _export_dir(run_dir / MERGED_DIR)
    try:
        names = sorted(os.listdir(run_dir))
    except OSError:
        return  # the raw reader says what is wrong with it
    for name in names:
        if (name == "host" or DEVICE_DIR_PATTERN.match(name)) and _export_dir(run_dir / name):
            for sub in ("data", "summary"):
                _export_dir(run_dir / name / sub)


def is_run_dir(path: Path) -> bool:
    """Whether *path* is a run: named ``PROF_*``, or holding ``device_N``, ``host`` or an export
    folder (a run copied under another name). Its listing follows no link below it."""
    if RUN_PATTERN.match(path.name) and path.is_dir():
        return True
    try:
        names = list_in_run(path) or []
    except RunFileError:
        return False
    return any(DEVICE_DIR_PATTERN.match(n) for n in names) or "host" in names or MERGED_DIR in names


def device_of_directory(name: str) -> int | None:
    """The device a ``device_N`` directory (or ``Device_id`` cell) stands for.

    Assumption (unverified on hardware): CANN names directories and fills
    ``Device_id`` with the same logical id that was passed to ``aclprofCreateConfig``, also under
    ``ASCEND_RT_VISIBLE_DEVICES``. Directory names are mapped here; the parser takes ``Device_id``
    cells as the same id (identity, kept out of its hot loop). Change both together if a machine
    shows otherwise.
    """
    match = DEVICE_DIR_PATTERN.match(name)
    if match:
        return int(match.group(1))
    try:
        return int(name)
    except ValueError:
        return None
