"""Simulated ``msprof.py`` for the asc-aprof simulated CANN toolkit (stdlib only).

Reads the PROF_* directories written by the simulated ``libmsprofiler.so`` (CANN's raw formats)
with asc-aprof's own raw reader (:func:`asc_aprof._plans._raw.read_export_rows`) and writes CSVs laid out
like real msprof output: the op_summary and task_time cells the real exporter writes for the same
raw data, PMU cells included (tests/real/test_sim_differential.py, every column). It
is copied into the toolkit tree as ``msprof.py`` and run as a script; it imports asc_aprof from
the path recorded beside it (``aprofsim_site.txt``), and only once it reads a run.

Command line, as the real msprof.py's (the export kind is argv[2])::

    msprof.py export summary  -dir <dir> [--model-id N --iteration-id N] [--iteration-count N]
                                         [--clear] [--format csv|json]
    msprof.py export timeline -dir <dir> [--model-id N --iteration-id N] [--iteration-count N]
                                         [--clear] [-reports <json>]
    msprof.py export db       -dir <dir>

Exit statuses, as the real one's: 0 on success and also when nothing was exported (host data
only, no ``info.json``, no task-time data, ``export db`` without the C++ library, ``--model-id``
with ``--iteration-id`` on single-operator data); 1 for a forbidden character in the path, an
empty path, ``--model-id`` without ``--iteration-id`` (or the reverse), or no command; 2 for a
missing path or ``-reports`` file, a directory with no subdirectory (an empty ``PROF_*``), or an
argparse error. ``import``, ``query`` and ``analyze`` are not simulated (argparse rejects them).

How ``-dir`` is walked (as the real one walks it): the subdirectories of the directory that
hold an ``info.json*`` file (``host``, ``device_N``) form one collection; every other
subdirectory is walked once more the same way, where subdirectories without ``info.json*`` are
only warned about. So ``-dir`` may be a ``PROF_*`` or its parent, not a grandparent. A directory
met on the way with no subdirectory at all ends the run with exit 2.

Log lines (``[INFO]``, ``[WARNING]``, ``[ERROR]``) go to stdout, as the real ones do (``print``
in the real analysis/common_func/common.py), the simulated faults' too; only argparse errors go
to stderr (the real tool's Python tracebacks do).

Each run is exported the way the CANN version and chip recorded in its ``device_N/info.json.N``
(``aprofsim_cann_version``, ``platform_version``) would: ``Block Dim`` / ``Mix Block Dim`` before
9.0, ``Block Num`` / ``Mix Block Num`` from 9.0; ``aic_``/``aiv_``-prefixed PMU columns on the
910B (platform 5), unprefixed ones on the 310B (platform 7). Task time level 0 (``TASK_TIME_L0``
without ``TASK_TIME``): op_summary's ``OP Type``, ``OP State``, ``Task Type`` and the tensor,
HF32 and Context ID cells are ``N/A`` and the block cells ``0`` on every row, PMU ``*_time``
cells ``0.0`` (as the exporter computes them without a block count); task_time carries the
host task types (``KERNEL_AICORE``, ``KERNEL_AIVEC``, ...)
and the kernels' binary names; no op_statistic is written. Written into
``mindstudio_profiler_output/``: ``op_summary_<ts>``, ``task_time_<ts>``, ``op_statistic_<ts>``
(level 1), ``api_statistic_<ts>`` (with ``ACL_API`` or ``RUNTIME_API``; simulated constant
per-call times) as ``.csv`` (or ``.json`` with ``--format json``: no ``Device_id`` column, and as
in the real tool only the last device's rows survive), and ``README.txt``; an older file of the
same name (a second export in the same second) is renamed to ``*.bak``. ``--clear`` is accepted
and has nothing to clear (the simulator keeps no sqlite data).

Environment:

- ``ASC_APROF_SIM_LAYOUT``: ``new`` (default, merged ``mindstudio_profiler_output``) or ``old``
  (per-device ``device_N/summary`` files, CANN 5/6 era).
- ``ASC_APROF_SIM_HEADER``: empty (default: the run's version names the block columns) or a
  CANN version whose names to use instead (``8.5``: ``Block Dim``, ``9.0``: ``Block Num``).
- ``ASC_APROF_SIM_SLICE_ROWS``: data rows per file before ``_slice_<k>_`` files (default 1000000).
- ``ASC_APROF_SIM_EXPORT_LATENCY_MS``: sleep this long before exporting.
- ``ASC_APROF_SIM_EXPORT_TIME``: Unix time taken as "now" for the file names' timestamps.
- ``ASC_APROF_SIM_EXPORT_FAULT``: ``exit:N``, ``hang``, ``signal:N``, ``nocsv``, ``truncate``,
  ``badheader``.

PMU columns after ``Context ID`` are the raw reader's (``read_export_rows(pmu=True)``): the cells
the real exporter computes from the device's ``ffts_profile`` context PMU records, which carry
what ``sim.launch(counters=...)`` set. No records (no ``AICORE_METRICS`` bit, a group the chip
cannot collect) or a group whose table never lines up (MemoryAccess on the 910B) end the row at
``Context ID``, as the real msprof.py's do. The old layout prints the same PMU cells after its
own columns.
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TextIO

if TYPE_CHECKING:
    from asc_aprof._plans._raw import Declined, DeviceRows, ExportRows, RawTask

# Exit codes of real msprof (ProfException).
EXIT_OK = 0
EXIT_INVALID_PARAM = 1
EXIT_INVALID_PATH = 2

MAX_PATH_CHARS = 4096
# Forbidden -dir characters, in the order the real tool checks them, with how it names them.
REJECTED_PATH_CHARS = {
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
    "\b": "\\b",
    "\t": "\\t",
    "\v": "\\v",
    "\x7f": "\\u007F",
    '"': '\\"',
    "'": "'",
    "%": "\\%",
    ">": "\\>",
    "<": "\\<",
    "|": "\\|",
    "&": "\\&",
    "$": "\\$",
    ";": "\\;",
    "`": "\\`",
    "\\": "\\\\",
}
# Directories the walk of -dir never enters (the real tool's list).
SKIPPED_DIRS = frozenset(
    {
        ".profiler",
        "HCCL_PROF",
        "timeline",
        "query",
        "sqlite",
        "log",
        "analyze",
        "mindstudio_profiler_log",
        "mindstudio_profiler_output",
    }
)
OUTPUT_DIR = "mindstudio_profiler_output"
STEP_EXPORT_MODEL_ID = 4294967295

ACL_API_BITS = 0x1 | 0x100  # ACL_API, RUNTIME_API: api_statistic
TASK_TIME_L1_BITS = 0x2 | 0x2000 | 0x4000 | 0x8000
TASK_TIME_L0_BIT = 0x800

CONTROL_KINDS = frozenset({"PROFILING_ENABLE", "PROFILING_DISABLE", "DEVICE_RINGBUFFER_CONTROL"})

#: Beside the script in the toolkit tree: the sys.path entry that holds the asc_aprof package.
SITE_FILE = "aprofsim_site.txt"
MODEL_ID = "4294967295"
CHUNK_ROWS = 50_000

BASE_COLUMNS = (
    "Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),"
    "Task Duration(us),Task Wait Time(us),{block},{mix},HF32 Eligible,Input Shapes,"
    "Input Data Types,Input Formats,Output Shapes,Output Data Types,Output Formats,Context ID"
)
NO_KERNEL_COLUMNS = (
    "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,"
    "Task Start Time(us),Task Duration(us),Task Wait Time(us),Context ID"
)
TASK_TIME_HEADER = (
    "Device_id,kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(us),task_stop(us)"
)
OP_STATISTIC_HEADER = (
    "Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)"
)
API_STATISTIC_HEADER = "Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance"
# Simulated host API cost per kernel launch (us): (level, API name, time).
LAUNCH_APIS = (("acl", "aclrtLaunchKernelWithHostArgs", 3.0), ("node", "launch", 5.0))
OLD_OP_HEADER = (
    "Model ID,Task ID,Stream ID,Op Name,OP Type,Task Type,Task Start Time,Task Duration(us),"
    "Task Wait Time(us),Block Dim,Input Shapes,Input Data Types,Input Formats,Output Shapes,"
    "Output Data Types,Output Formats"
)
OLD_TASK_TIME_HEADER = "kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(ns),task_stop(ns)"
# What a run without the simulator's metadata is taken for.
DEFAULT_CANN = "8.5"
CHIP_BY_PLATFORM = {"5": "910B", "7": "310B"}
# README.txt: one line per exported file kind (the simulator's own words).
README_TEXT = {
    "op_summary": "Every AI Core, AI Vector and AI CPU task with its operator, type, shapes, "
    "start, duration, wait and PMU counters.",
    "task_time": "Every task the device scheduled (kernels and control tasks) with its type, "
    "stream, id, start, duration and stop.",
    "op_statistic": "Calls, total, minimum, average and maximum time per operator type and core "
    "type, and each type's share of the device's time.",
    "api_statistic": "Time spent in host API calls per level and name (simulated constant per-call times).",
    "msprof": "The collection as a Chrome trace (one process per device, one thread per stream).",
}
README_UNKNOWN = "No description of this file."


class CliError(Exception):
    """Ends the run with an msprof exit code and an [ERROR] line."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Options(NamedTuple):
    layout: str
    header: str
    slice_rows: int
    fault: str
    latency_s: float
    export_time: float | None


class RunSettings(NamedTuple):
    """What the collecting library recorded: its CANN version and chip."""

    cann: str
    chip: str


class DeviceData(NamedTuple):
    """One device folder: its collection settings and the rows the raw reader gave."""

    device: int
    data_type: int
    settings: RunSettings
    rows: DeviceRows


class Profile(NamedTuple):
    path: Path
    devices: list[DeviceData]
    has_host: bool
    level0: bool


class Collection(NamedTuple):
    """One directory of the walk: its host and device subdirectories with ``info.json*``."""

    path: Path
    host: Path | None
    devices: list[Path]


# ---------------------------------------------------------------------------------------------
# Command line


def _log(level: str, message: str) -> None:
    """A log line on stdout, formatted like the real tool's."""
    stamp = time.strftime("%a %d %b %Y %H:%M:%S", time.localtime())
    print(f"{stamp} [{level}] [MSVP] [{os.getpid()}] msprof.py: {message}", flush=True)


def _warn(message: str) -> None:
    _log("WARNING", message)


def _dir_argument(text: str) -> str:
    return os.path.expanduser(text.lstrip("="))


def _add_export_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-dir", "--collection-dir", dest="collection_dir", required=True, type=_dir_argument)
    parser.add_argument("--iteration-id", dest="iteration_id", type=int, default=None)
    parser.add_argument("--model-id", dest="model_id", type=int, default=None)
    parser.add_argument("--iteration-count", dest="iteration_count", type=int, default=1)
    parser.add_argument("--clear", dest="clear", action="store_true", help="remove intermediate data")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="msprof.py", description="simulated msprof (asc-aprof)")
    commands = parser.add_subparsers(dest="command")
    export = commands.add_parser("export", help="export summary, timeline or db data")
    kinds = export.add_subparsers(dest="kind")
    summary = kinds.add_parser("summary", help="summary CSVs")
    _add_export_options(summary)
    summary.add_argument("--format", dest="export_format", default="csv", choices=["csv", "json"])
    timeline = kinds.add_parser("timeline", help="the trace")
    _add_export_options(timeline)
    timeline.add_argument("-reports", dest="reports", default="", type=_dir_argument)
    db = kinds.add_parser("db", help="msprof.db (needs the C++ analysis library)")
    db.add_argument("-dir", "--collection-dir", dest="collection_dir", required=True, type=_dir_argument)
    return parser


def _options() -> Options:
    env = os.environ
    layout = env.get("ASC_APROF_SIM_LAYOUT", "") or "new"
    header = env.get("ASC_APROF_SIM_HEADER", "")
    if layout not in ("new", "old"):
        raise CliError(EXIT_INVALID_PARAM, f"ASC_APROF_SIM_LAYOUT must be new or old, not {layout!r}")
    if header and _version(header) is None:
        raise CliError(
            EXIT_INVALID_PARAM, f"ASC_APROF_SIM_HEADER must be empty or a CANN version, not {header!r}"
        )
    try:
        slice_rows = int(env.get("ASC_APROF_SIM_SLICE_ROWS", "") or "1000000")
        latency_ms = float(env.get("ASC_APROF_SIM_EXPORT_LATENCY_MS", "") or "0")
        raw_time = env.get("ASC_APROF_SIM_EXPORT_TIME", "")
        export_time = float(raw_time) if raw_time else None
    except ValueError as exc:
        raise CliError(EXIT_INVALID_PARAM, f"bad simulator setting: {exc}") from None
    if slice_rows < 1 or not latency_ms >= 0 or (export_time is not None and not export_time >= 0):
        raise CliError(EXIT_INVALID_PARAM, "ASC_APROF_SIM_SLICE_ROWS must be >= 1, latency and time >= 0")
    fault = env.get("ASC_APROF_SIM_EXPORT_FAULT", "")
    return Options(layout, header, slice_rows, fault, latency_ms / 1000, export_time)


def _version(text: str) -> tuple[int, int] | None:
    match = re.fullmatch(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _check_dir(raw: str) -> Path:
    for char, shown in REJECTED_PATH_CHARS.items():
        if char in raw:
            raise CliError(EXIT_INVALID_PARAM, f"The path contains invalid character: '{shown}'.")
    if raw == "":
        raise CliError(EXIT_INVALID_PARAM, "The path is empty. Please enter a valid path.")
    if not os.path.exists(raw):
        raise CliError(
            EXIT_INVALID_PATH, f'The path "{raw}" does not exist. Please check that the path exists.'
        )
    if len(raw) > MAX_PATH_CHARS:
        raise CliError(
            EXIT_INVALID_PATH, f'Please ensure the length of input path "{raw}" less than {MAX_PATH_CHARS}'
        )
    path = Path(os.path.realpath(raw))
    if not path.is_dir():
        raise CliError(EXIT_INVALID_PATH, f'The path "{raw}" is not a directory. Please check the path.')
    if os.getuid() != 0 and not os.access(path, os.R_OK | os.W_OK | os.X_OK):
        raise CliError(
            EXIT_INVALID_PATH, f'The path "{raw}" is not readable and writable. Please check the path.'
        )
    return path


def _check_reports(raw: str) -> None:
    if not os.path.exists(raw):
        raise CliError(
            EXIT_INVALID_PATH, f'The path "{raw}" does not exist. Please check that the path exists.'
        )
    if not os.path.isfile(raw):
        raise CliError(EXIT_INVALID_PATH, f'The path "{raw}" is not a file. Please check the path.')


def _subdirs(path: Path) -> list[str]:
    """The subdirectories the walk looks at; none at all is the real tool's exit 2."""
    names = []
    for name in os.listdir(path):
        full = path / name
        if name in SKIPPED_DIRS or full.is_symlink() or not os.path.isdir(os.path.realpath(full)):
            continue
        names.append(name)
    if not names:
        raise CliError(EXIT_INVALID_PATH, f'The path "{path}" does not have PROF dir. Please check the path.')
    return names


def _has_info(path: Path) -> bool:
    return any(name.startswith("info.json") for name in os.listdir(path))


def _collections(path: Path, nested: bool = False) -> Iterator[Collection]:
    """The walk of -dir: nested collections first, then this directory's own (maybe empty)."""
    host: Path | None = None
    devices: list[Path] = []
    for name in sorted(_subdirs(path), reverse=True):
        sub = path / name
        if _has_info(sub):
            if name == "host":
                host = sub
            else:
                devices.append(sub)
        elif nested:
            _warn(f'Invalid parsing dir("{path}"), -dir must be profiling data dir such as PROF_XXX_XXX_XXX')
        else:
            yield from _collections(sub, nested=True)
    yield Collection(path, host, devices)


# ---------------------------------------------------------------------------------------------
# Reading the raw data: asc-aprof's own raw reader


def _raw_reader() -> Callable[[Path], ExportRows | Declined]:
    """:func:`asc_aprof._plans._raw.read_export_rows` with the PMU cells (``pmu=True``), imported from
    where the toolkit was built from.

    The toolkit tree records that location in ``aprofsim_site.txt`` beside this script, so the
    export runs the reader of the installed package even under another interpreter's path.
    """
    site = Path(__file__).resolve().with_name(SITE_FILE)
    if site.is_file():
        entry = site.read_text(encoding="utf-8").strip()
        if entry and entry not in sys.path:
            sys.path.insert(0, entry)
    from asc_aprof._runs._raw_files import read_export_rows

    return lambda path: read_export_rows(path, pmu=True)


def _read_json(path: Path) -> dict[str, object]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _settings(info: dict[str, object]) -> RunSettings:
    cann = info.get("aprofsim_cann_version")
    chip = CHIP_BY_PLATFORM.get(str(info.get("platform_version", "5")), "910B")
    version = cann if isinstance(cann, str) and _version(cann) is not None else DEFAULT_CANN
    return RunSettings(version, chip)


class _Meta(NamedTuple):
    device: int
    data_type: int
    settings: RunSettings


def _device_meta(collection: Collection) -> list[_Meta]:
    """The device folders of a collection with their sample.json / info.json settings."""
    found: list[_Meta] = []
    for sub in collection.devices:
        match = re.fullmatch(r"device_(\d+)", sub.name)
        if match is None:
            _warn(f"{sub}: not a device_N directory; skipped")
            continue
        device = int(match.group(1))
        info_path = sub / f"info.json.{device}"
        if not info_path.is_file():
            _warn(f"{sub}: no info.json.{device}; skipped")
            continue
        sample = _read_json(sub / "sample.json")
        data_type = sample.get("dataTypeConfig", 0)
        found.append(
            _Meta(
                device,
                data_type if isinstance(data_type, int) else 0,
                _settings(_read_json(info_path)),
            )
        )
    found.sort(key=lambda m: m.device)
    return found


def _load_profile(collection: Collection) -> Profile | None:
    """The collection read by the raw reader (None, said on stdout, where it cannot be read)."""
    metas = [m for m in _device_meta(collection) if m.data_type & (TASK_TIME_L1_BITS | TASK_TIME_L0_BIT)]
    has_host = collection.host is not None
    if not metas:
        return Profile(collection.path, [], has_host, False)
    outcome = _raw_reader()(collection.path)
    if not isinstance(outcome, tuple):
        _log("ERROR", f"{collection.path.name}: the raw data cannot be exported ({outcome})")
        return None
    rows = {device.device: device for device in outcome.devices}
    devices = [DeviceData(*meta, rows[meta.device]) for meta in metas if meta.device in rows]
    return Profile(collection.path, devices, has_host, outcome.level0)


# ---------------------------------------------------------------------------------------------
# Cell formatting


def _us(ns: int) -> str:
    """Integer ns as microseconds with exactly 3 decimals (no float rounding)."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def _csv_cell(text: str) -> str:
    if "," in text or '"' in text:
        return '"' + text.replace('"', '""') + '"'
    return text


def _num(value: float) -> str:
    return repr(round(value, 3))


class Style(NamedTuple):
    old: bool
    level1: bool
    #: op_summary's PMU headers after Context ID (the raw reader's: none without PMU records)
    pmu_header: tuple[str, ...]


def _style(device: DeviceData, level0: bool, old: bool) -> Style:
    return Style(old, not level0, device.rows.pmu_header)


# ---------------------------------------------------------------------------------------------
# Row generation


def _ns(duration: float) -> int:
    """A duration the exporter rounded to 3 decimals of us, in whole ns."""
    return round(duration * 1000)


def _op_row(raw: RawTask, wait: str, style: Style, pmu: Sequence[str]) -> str:
    """One op_summary row without its Device_id cell: the cells the real exporter writes for
    this raw data, its PMU cells (*pmu*, from the raw reader) included."""
    name = _csv_cell(raw.name)
    block = raw.block_num or 0
    start = _us(raw.start_ns)
    if style.old:
        op_type = name if style.level1 else "N/A"
        task_type = raw.csv_type
        tail = ",".join([str(block), ",".join(["N/A"] * 6), *pmu])
        ids = f"{MODEL_ID},{raw.task_id},{raw.stream_id}"
        return f"{ids},{name},{op_type},{task_type},{start},{_num(raw.duration)},{wait},{tail}"
    if style.level1:
        head = f"{name},{name},dynamic,{raw.csv_type}"
        hf32 = "NO"
    else:  # level 0: no GE info, so no type, state, shapes or block dims
        head = f"{name},N/A,N/A,N/A"
        hf32 = "N/A"
    tail = ",".join([str(block), str(raw.mix_block_num or 0), hf32, ",".join(["N/A"] * 6), "N/A", *pmu])
    return f"{MODEL_ID},{raw.task_id},{raw.stream_id},{head},{start}\t,{_num(raw.duration)},{wait},{tail}"


def _op_rows(device: DeviceData, style: Style) -> Iterator[list[str]]:
    """Chunks of one device's op_summary rows, without the Device_id cell or newline."""
    rows: list[str] = []
    previous: RawTask | None = None
    cells = device.rows.pmu_cells if style.pmu_header else ()
    for index, raw in enumerate(device.rows.op_summary):
        if previous is None:
            wait = "0"
        else:
            gap = (raw.start_ns - previous.start_ns - previous.duration_ns) / 1000.0
            wait = _num(max(gap, 0.0))
        previous = raw
        rows.append(_op_row(raw, wait, style, cells[index] if cells else ()))
        if len(rows) >= CHUNK_ROWS:
            yield rows
            rows = []
    if rows:
        yield rows


def _task_rows(device: DeviceData, old: bool) -> Iterator[list[str]]:
    """Chunks of one device's task_time rows, without the Device_id cell or newline."""
    rows: list[str] = []
    for t in device.rows.task_time:
        name = _csv_cell(t.name)
        stop = t.start_ns + _ns(t.duration)
        if old:
            dur = _ns(t.duration) / 1000
            rows.append(f'{name},{t.type},{t.stream_id},{t.task_id},"{dur!r}","{t.start_ns}","{stop}"')
        else:
            rows.append(
                f"{name},{t.type},{t.stream_id},{t.task_id},{_num(t.duration)},{_us(t.start_ns)}\t,{_us(stop)}\t"
            )
        if len(rows) >= CHUNK_ROWS:
            yield rows
            rows = []
    if rows:
        yield rows


# (op type, core type) -> [count, total ns, min ns, max ns]
OpStats = dict[tuple[str, str], list[int]]


def _count_ops(device: DeviceData, stats: OpStats) -> None:
    """op_statistic: every op_summary kernel by (operator type, core type)."""
    for raw in device.rows.op_summary:
        dur = _ns(raw.duration)
        entry = stats.setdefault((raw.name, raw.csv_type), [0, 0, -1, 0])
        entry[0] += 1
        entry[1] += dur
        entry[2] = dur if entry[2] < 0 else min(entry[2], dur)
        entry[3] = max(entry[3], dur)


def _op_statistic_rows(stats: OpStats) -> list[str]:
    """One device's op_statistic rows (without Device_id), biggest total time first."""
    device_total = sum(entry[1] for entry in stats.values()) or 1
    rows = []
    for (op_type, core), (count, total, low, high) in sorted(stats.items(), key=lambda item: -item[1][1]):
        rows.append(
            ",".join(
                (
                    _csv_cell(op_type),
                    core,
                    str(count),
                    _num(total / 1000),
                    _num(low / 1000),
                    _num(total / count / 1000),
                    _num(high / 1000),
                    _num(total * 100 / device_total),
                )
            )
        )
    return rows


def _api_statistic_rows(launches: int) -> list[str]:
    """One device's api_statistic rows (without Device_id): one launch per kernel the host saw."""
    if launches == 0:
        return []
    rows = []
    for level, api, cost in LAUNCH_APIS:
        rows.append(
            f"{level},{api},{_num(cost * launches)},{launches},{_num(cost)},{_num(cost)},{_num(cost)},0.0"
        )
    return rows


# ---------------------------------------------------------------------------------------------
# Writers


def _open_csv(path: Path, keep_old: bool = False) -> TextIO:
    # LF endings whatever the platform, no BOM, big buffer for million-row files.
    if keep_old and path.exists():
        os.replace(path, f"{path}.bak")  # a second export in the same second keeps the first
    return open(path, "w", encoding="utf-8", newline="\n", buffering=1 << 20)


class SlicedWriter:
    """Writes one merged CSV, or ``<base>_slice_<k>_<ts>.csv`` files past ``limit`` rows."""

    def __init__(self, directory: Path, base: str, stamp: str, header: str, total: int, limit: int) -> None:
        self.directory = directory
        self.base = base
        self.stamp = stamp
        self.header = header
        self.sliced = total > limit
        self.limit = limit
        self.index = -1
        self.rows_in_file = 0
        self.file: TextIO | None = None
        self.paths: list[Path] = []

    def _open_next(self) -> TextIO:
        if self.file is not None:
            self.file.close()
        self.index += 1
        name = (
            f"{self.base}_slice_{self.index}_{self.stamp}.csv"
            if self.sliced
            else f"{self.base}_{self.stamp}.csv"
        )
        path = self.directory / name
        self.paths.append(path)
        self.file = _open_csv(path, keep_old=True)
        self.file.write(self.header + "\n")
        self.rows_in_file = 0
        return self.file

    def write(self, rows: list[str], prefix: str = "") -> None:
        file = self.file if self.file is not None else self._open_next()
        start = 0
        while start < len(rows):
            if self.rows_in_file >= self.limit:
                file = self._open_next()
            take = min(len(rows) - start, self.limit - self.rows_in_file)
            part = rows[start : start + take]
            file.write(prefix + ("\n" + prefix).join(part) + "\n")
            self.rows_in_file += take
            start += take

    def close(self) -> list[Path]:
        if self.file is None:
            self._open_next()
        assert self.file is not None
        self.file.close()
        return self.paths


def _block_names(settings: RunSettings, options: Options) -> tuple[str, str]:
    version = _version(options.header or settings.cann) or (8, 5)
    return ("Block Num", "Mix Block Num") if version >= (9, 0) else ("Block Dim", "Mix Block Dim")


def _op_header(style: Style, blocks: tuple[str, str], device_column: bool) -> str:
    text = OLD_OP_HEADER if style.old else BASE_COLUMNS.format(block=blocks[0], mix=blocks[1])
    if style.pmu_header:
        text += "," + ",".join(style.pmu_header)
    return ("Device_id," + text) if device_column else text


class Summary(NamedTuple):
    """What one collection's summary export produced, per device (rows without Device_id)."""

    written: list[Path]
    op_statistic: dict[int, list[str]]
    api_statistic: dict[int, list[str]]


def _export_new(
    profile: Profile, devices: list[DeviceData], options: Options, stamp: str, out_dir: Path
) -> Summary:
    out_dir.mkdir(exist_ok=True)
    total_ops = sum(len(d.rows.op_summary) for d in devices)
    total_tasks = sum(len(d.rows.task_time) for d in devices)
    limit = options.slice_rows
    # The merged header: the first device with rows (every device has the same PMU columns).
    first = next((d for d in devices if d.rows.op_summary), devices[0])
    style0 = _style(first, profile.level0, old=False)
    blocks = _block_names(devices[0].settings, options)
    # Without op_summary rows (no kernel ran, or its kernels have no host data) the real exporter
    # writes task_time only.
    op_header = _op_header(style0, blocks, device_column=True)
    op_writer = SlicedWriter(out_dir, "op_summary", stamp, op_header, total_ops, limit) if total_ops else None
    task_writer = SlicedWriter(out_dir, "task_time", stamp, TASK_TIME_HEADER, total_tasks, limit)
    op_statistic: dict[int, list[str]] = {}
    for device in devices:
        style = _style(device, profile.level0, old=False)
        prefix = f"{device.device},"
        # Like the Python msprof path: per-device summary files first, merged, then removed.
        summary_dir = profile.path / f"device_{device.device}" / "summary"
        summary_dir.mkdir(exist_ok=True)
        with (
            _open_csv(summary_dir / f"op_summary_{device.device}_1_{stamp}.csv") as per_op,
            _open_csv(summary_dir / f"task_time_{device.device}_1_{stamp}.csv") as per_task,
        ):
            if total_ops:
                per_header = _op_header(style, blocks, device_column=False)
            else:
                per_header = NO_KERNEL_COLUMNS.partition(",")[2]
            per_op.write(per_header + "\n")
            per_task.write(TASK_TIME_HEADER.partition(",")[2] + "\n")
            if op_writer is not None:
                for op_rows in _op_rows(device, style):
                    per_op.write("\n".join(op_rows) + "\n")
                    op_writer.write(op_rows, prefix)
            for task_rows in _task_rows(device, old=False):
                per_task.write("\n".join(task_rows) + "\n")
                task_writer.write(task_rows, prefix)
        shutil.rmtree(summary_dir, ignore_errors=True)
        if style.level1 and device.rows.op_summary:
            stats: OpStats = {}
            _count_ops(device, stats)
            op_statistic[device.device] = _op_statistic_rows(stats)
    written = (op_writer.close() if op_writer is not None else []) + task_writer.close()
    return Summary(written, op_statistic, _api_rows(profile))


def _api_rows(profile: Profile) -> dict[int, list[str]]:
    """api_statistic rows of the devices whose collection asked for API data."""
    rows: dict[int, list[str]] = {}
    if not profile.has_host:
        return rows
    for device in profile.devices:
        if device.data_type & ACL_API_BITS:
            found = _api_statistic_rows(len(device.rows.op_summary))
            if found:
                rows[device.device] = found
    return rows


def _write_statistics(out_dir: Path, stamp: str, summary: Summary) -> list[Path]:
    written = []
    for base, header, per_device in (
        ("op_statistic", OP_STATISTIC_HEADER, summary.op_statistic),
        ("api_statistic", API_STATISTIC_HEADER, summary.api_statistic),
    ):
        if not per_device:
            continue
        path = out_dir / f"{base}_{stamp}.csv"
        with _open_csv(path, keep_old=True) as file:
            file.write(header + "\n")
            for device in sorted(per_device):
                file.write("".join(f"{device},{row}\n" for row in per_device[device]))
        written.append(path)
    return written


def _typed(cell: str) -> object:
    """A CSV cell as the real JSON summary holds it: numbers as numbers, the rest as text."""
    if cell != cell.strip():
        return cell  # start times keep their trailing TAB, so they stay text
    try:
        return int(cell)
    except ValueError:
        pass
    try:
        value = float(cell)
    except ValueError:
        return cell
    return value if value == value and value not in (float("inf"), float("-inf")) else cell


def _csv_to_json(csv_paths: list[Path], json_path: Path) -> None:
    """The JSON form of merged CSVs: the last device's rows only, without Device_id (real tool)."""
    header: list[str] = []
    rows: list[list[str]] = []
    for path in csv_paths:
        with open(path, encoding="utf-8", newline="") as file:
            reader = csv.reader(file)
            header = next(reader, [])
            rows.extend(reader)
    last = max(
        (row[0] for row in rows), key=lambda d: (d != "host", int(d) if d.isdigit() else -1), default=None
    )
    records = [
        dict(zip(header[1:], (_typed(c) for c in row[1:]), strict=False)) for row in rows if row[0] == last
    ]
    with _open_csv(json_path) as file:
        json.dump(records, file, ensure_ascii=False)


def _export_json(out_dir: Path, stamp: str, csv_paths: list[Path]) -> list[Path]:
    """Turn this export's CSVs (in a work directory) into ``<name>_<ts>.json`` files."""
    groups: dict[str, list[Path]] = {}
    for path in csv_paths:
        groups.setdefault(_kind_of(path.name), []).append(path)
    written = []
    for base, paths in sorted(groups.items()):
        json_path = out_dir / f"{base}_{stamp}.json"
        _csv_to_json(paths, json_path)
        written.append(json_path)
    return written


def _kind_of(file_name: str) -> str:
    """``op_summary`` from ``op_summary_slice_0_20260101000000.csv`` (the real tool's rule)."""
    match = re.search(r"(_\d)?(_slice_\d+)?_\d+", file_name)
    return file_name[: match.start()] if match and match.start() > 0 else "invalid"


def _write_readme(out_dir: Path) -> Path:
    """README.txt listing every summary and timeline file kind in the output directory."""
    timeline: set[str] = set()
    summary: set[str] = set()
    for name in os.listdir(out_dir):
        if name.endswith(".csv"):
            summary.add(_kind_of(name))
        elif name.endswith(".json"):
            timeline.add(_kind_of(name))
    text = ""
    for title, kinds, suffix in (("Timeline", timeline, ".json"), ("Summary", summary, ".csv")):
        text += f"{title} file description:\n"
        for index, kind in enumerate(sorted(kinds), 1):
            text += f"{index}.{kind}{suffix}:{README_TEXT.get(kind, README_UNKNOWN)}\n"
        text += "\n"
    path = out_dir / "README.txt"
    with _open_csv(path) as file:
        file.write(text)
    return path


def _export_old(profile: Profile, devices: list[DeviceData], stamp: str) -> list[Path]:
    written: list[Path] = []
    for device in devices:
        style = _style(device, profile.level0, old=True)
        summary_dir = profile.path / f"device_{device.device}" / "summary"
        summary_dir.mkdir(exist_ok=True)
        op_path = summary_dir / f"op_summary_{device.device}_1_{stamp}.csv"
        task_path = summary_dir / f"task_time_{device.device}_1_{stamp}.csv"
        with _open_csv(op_path) as op_file, _open_csv(task_path) as task_file:
            op_file.write(_op_header(style, ("Block Dim", "Mix Block Dim"), device_column=False) + "\n")
            task_file.write(OLD_TASK_TIME_HEADER + "\n")
            for op_rows in _op_rows(device, style):
                op_file.write("\n".join(op_rows) + "\n")
            for task_rows in _task_rows(device, old=True):
                task_file.write("\n".join(task_rows) + "\n")
        written += [op_path, task_path]
    return written


def _export_timeline(profile: Profile, devices: list[DeviceData], stamp: str) -> list[Path]:
    out_dir = profile.path / OUTPUT_DIR
    out_dir.mkdir(exist_ok=True)
    path = out_dir / f"msprof_{stamp}.json"
    with _open_csv(path) as out:
        out.write("[")
        first = True
        for device in devices:
            pid = 1000 + device.device
            meta = {
                "name": "process_name",
                "pid": pid,
                "tid": 0,
                "ph": "M",
                "args": {"name": f"Ascend Hardware {device.device}"},
            }
            out.write(("" if first else ",\n") + json.dumps(meta))
            first = False
            for t in device.rows.task_time:
                name = t.type if t.type in CONTROL_KINDS else t.name
                args = f'{{"Task Type": "{t.type}", "Stream Id": {t.stream_id}, "Task Id": {t.task_id}}}'
                out.write(
                    f',\n{{"name": {json.dumps(name)}, "pid": {pid}, "tid": {t.stream_id}, '
                    f'"ts": "{_us(t.start_ns)}", "dur": {t.duration!r}, "ph": "X", "args": {args}}}'
                )
        out.write("]\n")
    return [path]


# ---------------------------------------------------------------------------------------------
# Faults


def _apply_early_fault(fault: str) -> None:
    """Faults that replace the export entirely."""
    if fault.startswith("exit:"):
        code = _int_arg(fault)
        _log("ERROR", f"simulated export failure (ASC_APROF_SIM_EXPORT_FAULT={fault})")
        raise SystemExit(code)
    if fault == "hang":
        # A helper in our process group, so callers can prove they kill the whole group.
        helper = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(3600)"])
        _log("INFO", f"simulated hang; helper pid {helper.pid}")
        while True:
            time.sleep(3600)
    if fault.startswith("signal:"):
        number = _int_arg(fault)
        sys.stdout.flush()
        os.kill(os.getpid(), number)
        time.sleep(1)  # a handled or ignored signal falls through to a plain failure
        raise SystemExit(EXIT_INVALID_PARAM)
    if fault == "nocsv":
        _warn("simulated: no data exported (ASC_APROF_SIM_EXPORT_FAULT=nocsv)")
        raise SystemExit(EXIT_OK)


def _int_arg(fault: str) -> int:
    try:
        return int(fault.partition(":")[2])
    except ValueError:
        raise CliError(EXIT_INVALID_PARAM, f"bad ASC_APROF_SIM_EXPORT_FAULT {fault!r}") from None


def _truncate_mid_row(path: Path) -> None:
    """Cut the file in the middle of its last data row, like an export killed mid-write."""
    size = path.stat().st_size
    with open(path, "rb+") as file:
        tail_start = max(0, size - 65536)
        file.seek(tail_start)
        tail = file.read()
        body = tail.rstrip(b"\n")
        row_start = body.rfind(b"\n") + 1
        if tail_start == 0 and row_start == 0:
            return  # header only: nothing to cut
        file.truncate(tail_start + row_start + max(1, (len(body) - row_start) // 2))


def _write_bad_headers(paths: list[Path]) -> None:
    for path in paths:
        path.write_text("alpha,beta,gamma\n1,2,3\n4,5,6\n", encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# Main


def _stamp(options: Options) -> str:
    now = time.time() if options.export_time is None else options.export_time
    return time.strftime("%Y%m%d%H%M%S", time.localtime(now))


def _export_collection(collection: Collection, args: argparse.Namespace, options: Options) -> list[Path]:
    kind = str(args.kind)
    if collection.host is None and not collection.devices:
        _warn(f'Can not find any host or device path in dir("{args.collection_dir}"). ')
        return []
    if kind == "db":
        _warn("Does not support exporting the msprof.db! (no msprof_analysis.so beside msprof.py)")
        return []
    if args.model_id is not None and args.iteration_id is not None:
        # Every simulated run is single-operator data (Model ID 4294967295, no step trace).
        if args.model_id == STEP_EXPORT_MODEL_ID:
            _log("ERROR", "Step export needs step trace data, which this single-operator run has not.")
        else:
            _log("ERROR", "Please do not set 'model-id' and 'iteration-id' in single op mode.")
        return []
    if args.iteration_count > 1:
        _warn(
            f'Param of "iteration-count" is {args.iteration_count}, but it is unnecessary in all export mode.'
        )
    profile = _load_profile(collection)
    if profile is None:
        return []
    devices = profile.devices
    api_rows = _api_rows(profile)
    if not devices and not (api_rows and kind == "summary"):
        _warn(
            f"{collection.path.name}: no task-time data collected "
            "(ACL_PROF_TASK_TIME not set); nothing exported."
        )
        return []
    stamp = _stamp(options)
    _log("INFO", f"Start exporting {kind} data in {collection.path}.")
    out_dir = profile.path / OUTPUT_DIR
    if kind == "timeline":
        written = _export_timeline(profile, devices, stamp)
    elif options.layout == "old":
        return _export_old(profile, devices, stamp)
    else:
        as_json = getattr(args, "export_format", "csv") == "json"
        # JSON is made from CSVs written aside, so no CSV of an earlier export is touched.
        work_dir = out_dir / ".aprofsim_json" if as_json else out_dir
        out_dir.mkdir(exist_ok=True)
        if devices:
            summary = _export_new(profile, devices, options, stamp, work_dir)
        else:
            work_dir.mkdir(exist_ok=True)
            summary = Summary([], {}, api_rows)
        written = summary.written + _write_statistics(work_dir, stamp, summary)
        if as_json:
            written = _export_json(out_dir, stamp, written)
            shutil.rmtree(work_dir, ignore_errors=True)
    written.append(_write_readme(out_dir))
    return written


def _export(root: Path, args: argparse.Namespace, options: Options) -> int:
    gc.disable()  # millions of short-lived strings: collection passes only cost time here
    written: list[Path] = []
    for collection in _collections(root):
        written += _export_collection(collection, args, options)
    csvs = [p for p in written if p.suffix == ".csv" and p.name != "README.txt"]
    if options.fault == "truncate":
        for path in csvs:
            _truncate_mid_row(path)
    elif options.fault == "badheader":
        _write_bad_headers(csvs)
    for path in written:
        _log("INFO", f"Exported {path}")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    os.umask(0o027)  # msprof forces dirs 0750 / files 0640
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None or not hasattr(args, "collection_dir"):
        parser.print_help(sys.stdout)
        return EXIT_INVALID_PARAM
    try:
        options = _options()
        root = _check_dir(args.collection_dir)
        if (getattr(args, "model_id", None) is None) != (getattr(args, "iteration_id", None) is None):
            raise CliError(
                EXIT_INVALID_PARAM,
                "Please set 'model-id' and 'iteration-id' simultaneously "
                "(recommend using 'query' to obtain proper 'model-id' and 'iteration-id' values).",
            )
        if options.fault not in (
            "",
            "hang",
            "nocsv",
            "truncate",
            "badheader",
        ) and not options.fault.startswith(("exit:", "signal:")):
            raise CliError(EXIT_INVALID_PARAM, f"unknown ASC_APROF_SIM_EXPORT_FAULT {options.fault!r}")
        if getattr(args, "reports", ""):
            _check_reports(args.reports)
        if options.latency_s > 0:
            time.sleep(options.latency_s)
        _apply_early_fault(options.fault)
        return _export(root, args, options)
    except CliError as exc:
        _log("ERROR", str(exc))
        return exc.code


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
