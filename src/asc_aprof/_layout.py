"""Where runs and exported CSVs live on disk (every CANN layout), without parsing them.

A *run* is one ``PROF_<counter>_<YYYYMMDDhhmmssmmm>_<pid+letters>`` directory made by one
``aclprofStart``. Runs are ordered by the start time in their name, never by name: the counter
restarts in every process, so ``max(os.listdir())`` picks the wrong run once two processes share a
result path.

Exports land in one of two layouts:

* new (CANN 8.0+): ``PROF_x/mindstudio_profiler_output/op_summary_<ts>.csv`` (all devices merged,
  ``Device_id`` first), with ``op_summary_slice_<k>_<ts>.csv`` pieces beyond a million rows;
* old (CANN 5-7): ``PROF_x/device_N/summary/op_summary_<dev>[_<model>]_<iter>[_<ts>].csv``, one per
  device, with no device column (the device comes from ``device_N``).

op_summary is preferred over task_time (task_time names are hashed binary names from CANN 9.0 on),
and the newest export over older ones.

Nothing is read through a symbolic link, which could lead out of the run: a symlinked run (as a
run id) or export folder (``mindstudio_profiler_output``, ``device_N``, ``device_N/summary``) is
refused with a :class:`UsageError` naming it, and a symlinked CSV is not picked.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from ._errors import UsageError

RUN_PATTERN: Final = re.compile(r"^PROF_(\d{6})_(\d{17})_([0-9A-Za-z]+)$")
CSV_PATTERN: Final = re.compile(r"^(op_summary|task_time)_(?:slice_(\d+)_)?(\d+(?:_\d+)*)\.csv$")
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
    """

    path: Path
    kind: str
    device: int | None
    stamp: str
    slice: int


def run_start_key(name: str) -> tuple[str, int]:
    """Sort key of a run directory: start time from its name, then its counter."""
    match = RUN_PATTERN.match(name)
    if match is None:
        return ("", 0)
    return (match.group(2), int(match.group(1)))


def list_runs(result_path: Path) -> list[Path]:
    """The ``PROF_*`` directories directly under *result_path*, oldest start first."""
    try:
        entries = list(os.scandir(result_path))
    except FileNotFoundError:
        return []
    runs = [Path(e.path) for e in entries if RUN_PATTERN.match(e.name) and e.is_dir(follow_symlinks=False)]
    return sorted(runs, key=lambda p: run_start_key(p.name))


def newest_run_of_process(result_path: Path, pid: int) -> Path | None:
    """The newest ``PROF_*`` directory this process made in *result_path*, by start time and counter.

    CANN puts the pid (8 digits) in every run name, so one cheap scan finds the run a start just
    made without listing the directory before the start.
    """
    tag = f"{pid:08d}"
    best: tuple[str, int] | None = None
    found: Path | None = None
    try:
        entries = os.scandir(result_path)
    except FileNotFoundError:
        return None
    with entries:
        for entry in entries:
            if not entry.name.startswith("PROF_"):
                continue
            match = RUN_PATTERN.match(entry.name)
            if match is None or not match.group(3).startswith(tag) or not entry.is_dir(follow_symlinks=False):
                continue
            key = (match.group(2), int(match.group(1)))
            if best is None or key > best:
                best, found = key, Path(entry.path)
    return found


def resolve_run(result_path: Path, run_id: str | os.PathLike[str]) -> Path:
    """The run directory *run_id* names, which must be a real directory inside *result_path*.

    :raises UsageError: for absolute ids, ``..``, symlinks out of the result path, or a missing run
    """
    text = os.fspath(run_id)
    candidate = Path(text)
    if candidate.is_absolute() or ".." in candidate.parts or not candidate.parts:
        raise UsageError(f"run id must be a directory name inside {result_path}, got {text!r}")
    path = result_path / candidate
    root = result_path.resolve()
    if path.is_symlink() or not path.resolve().is_relative_to(root):
        raise UsageError(f"run id {text!r} leaves the result path {result_path}")
    if not path.is_dir():
        raise UsageError(f"no run {text!r} in {result_path}")
    return path


def _csvs_in(directory: Path, device: int | None) -> Iterator[CsvFile]:
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        match = CSV_PATTERN.match(entry.name)
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        numbers = match.group(3).split("_")
        stamp = numbers[-1] if len(numbers[-1]) == 14 else ""
        yield CsvFile(
            path=Path(entry.path),
            kind=match.group(1),
            device=device,
            stamp=stamp,
            slice=int(match.group(2) or 0),
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
            "run %s has no op_summary CSV; using task_time, whose kernel names are hashed binary "
            "names from CANN 9.0 on (collect with ProfileType.TASK_TIME for op_summary)",
            run_dir.name,
        )
    return chosen


def _find_summary_csvs(run_dir: Path) -> list[CsvFile]:
    merged_dir = run_dir / MERGED_DIR
    merged = _pick(list(_csvs_in(merged_dir, None))) if _export_dir(merged_dir) else []
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
            chosen.extend(_pick(list(_csvs_in(summary, device))))
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


def device_of_directory(name: str) -> int | None:
    """The device a ``device_N`` directory (or ``Device_id`` cell) stands for.

    Assumption (DECISIONS 6, unverified on hardware): CANN names directories and fills
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
