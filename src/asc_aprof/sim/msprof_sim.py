"""Simulated ``msprof.py`` for the asc-aprof simulated CANN toolkit (stdlib only).

Reads the PROF_* directories written by the simulated ``libmsprofiler.so`` and exports CSVs laid
out like real msprof output. It is copied into the toolkit tree as ``msprof.py`` and run as a
script, so it must not import asc_aprof.

Command lines (as real msprof.py; the export kind is argv[2])::

    msprof.py export summary  -dir <PROF_dir|parent> [--clear]
    msprof.py export timeline -dir <PROF_dir|parent> [--clear]

Environment:

- ``ASC_APROF_SIM_LAYOUT``: ``new`` (default, merged ``mindstudio_profiler_output``) or ``old``
  (per-device ``device_N/summary`` files, CANN 5/6 era).
- ``ASC_APROF_SIM_HEADER``: ``8.5`` (default, ``Block Dim``) or ``9.0`` (``Block Num``).
- ``ASC_APROF_SIM_SLICE_ROWS``: data rows per file before ``_slice_<k>_`` files (default 1000000).
- ``ASC_APROF_SIM_EXPORT_LATENCY_MS``: sleep this long before exporting.
- ``ASC_APROF_SIM_EXPORT_FAULT``: ``exit:N``, ``hang``, ``signal:N``, ``nocsv``, ``truncate``,
  ``badheader``.

Choices where real msprof varies: with ``TASK_TIME_L0`` only, op_summary is still written in the
level0 style (type, state, tensor and Context ID columns ``N/A``; Block columns ``0``). PMU
columns are written for ArithmeticUtilization, PipeUtilization and Memory; other metrics, NONE
or no ``AICORE_METRICS`` bit end the row at ``Context ID``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple, TextIO

# Exit codes of real msprof (ProfException).
EXIT_OK = 0
EXIT_INVALID_PARAM = 1
EXIT_INVALID_PATH = 2

MAX_PATH_CHARS = 4096
REJECTED_PATH_CHARS = frozenset("\n\f\r\b\t\v\x7f\"'%><|&$;`\\")

TASK_TIME_L1_BITS = 0x2 | 0x2000 | 0x4000 | 0x8000
TASK_TIME_L0_BIT = 0x800
AICORE_METRICS_BIT = 0x4

TASKS_FILE = "aprofsim_tasks.data"
NAMES_FILE = "aprofsim_names.data"
CONTROL_KINDS = frozenset({"PROFILING_ENABLE", "PROFILING_DISABLE", "DEVICE_RINGBUFFER_CONTROL"})
CONTROL_SUFFIXES = ("PROFILING_ENABLE", "PROFILING_DISABLE", "DEVICE_RINGBUFFER_CONTROL")
# Host task type when the GE type is unknown (level0), and the device SQE name without host data.
HOST_KERNEL_TYPES = {
    "AI_CORE": "KERNEL_AICORE",
    "AI_VECTOR_CORE": "KERNEL_AIVEC",
    "MIX_AIC": "KERNEL_MIX_AIC",
    "MIX_AIV": "KERNEL_MIX_AIV",
    "AI_CPU": "KERNEL_AICPU",
}
SQE_TYPES = {
    "AI_CORE": "AI_CORE",
    "AI_VECTOR_CORE": "AIV_SQE",
    "MIX_AIC": "AI_CORE",
    "MIX_AIV": "AIV_SQE",
    "AI_CPU": "AI_CPU",
}

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
PMU_COLUMNS = {
    0: "aicore_time(us),aic_total_cycles,aic_mac_fp16_ratio,aic_mac_int8_ratio,aic_cube_fops,"
    "aic_vector_fops,aiv_time(us),aiv_total_cycles,aiv_vec_fp32_ratio,aiv_vec_fp16_ratio,"
    "aiv_vec_int32_ratio,aiv_vec_misc_ratio,aiv_cube_fops,aiv_vector_fops",
    1: "aicore_time(us),aic_total_cycles,aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),"
    "aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,"
    "aic_fixpipe_time(us),aic_fixpipe_ratio,aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,"
    "aiv_vec_time(us),aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),"
    "aiv_mte2_ratio,aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate,cube_utilization(%)",
    2: "aicore_time(us),aic_total_cycles,aic_l1_read_bw(GB/s),aic_l1_write_bw(GB/s),"
    "aic_main_mem_read_bw(GB/s),aic_main_mem_write_bw(GB/s),aic_l2_read_bw(GB/s),"
    "aic_l2_write_bw(GB/s),aiv_time(us),aiv_total_cycles,aiv_ub_read_bw(GB/s),"
    "aiv_ub_write_bw(GB/s),aiv_main_mem_read_bw(GB/s),aiv_main_mem_write_bw(GB/s),"
    "aiv_l2_read_bw(GB/s),aiv_l2_write_bw(GB/s)",
}
TASK_TIME_HEADER = (
    "Device_id,kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(us),task_stop(us)"
)
OLD_OP_HEADER = (
    "Model ID,Task ID,Stream ID,Op Name,OP Type,Task Type,Task Start Time,Task Duration(us),"
    "Task Wait Time(us),Block Dim,Input Shapes,Input Data Types,Input Formats,Output Shapes,"
    "Output Data Types,Output Formats"
)
OLD_PMU_COLUMNS = (
    "aicore_time(us),total_cycles,vec_time(us),vec_ratio,mac_time(us),mac_ratio,scalar_time(us),"
    "scalar_ratio,mte1_time(us),mte1_ratio,mte2_time(us),mte2_ratio,mte3_time(us),mte3_ratio,"
    "icache_miss_rate,memory_bound"
)
OLD_TASK_TIME_HEADER = "kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(ns),task_stop(ns)"
# Simulated clock of the AI cores (cycles per microsecond).
CORE_MHZ = 1800


class CliError(Exception):
    """Ends the run with an msprof exit code and a message on stderr."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Options(NamedTuple):
    layout: str
    header: str
    slice_rows: int
    fault: str
    latency_s: float


class NameRun(NamedTuple):
    """Host data: ``count`` kernels from ``first`` on one device share a name."""

    first: int
    end: int
    kind: str
    name: str
    tensors: tuple[str, ...]


class DeviceData(NamedTuple):
    device: int
    data_type: int
    metric: int
    lines: list[str]
    kernels: int


class Profile(NamedTuple):
    path: Path
    devices: list[DeviceData]
    names: dict[int, list[NameRun]]
    has_host: bool


# ---------------------------------------------------------------------------------------------
# Command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="msprof.py", description="simulated msprof (asc-aprof)")
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="export summary or timeline data")
    kinds = export.add_subparsers(dest="kind", required=True)
    for kind in ("summary", "timeline"):
        sub = kinds.add_parser(kind)
        sub.add_argument("-dir", "--collection-dir", dest="collection_dir", required=True)
        sub.add_argument("--clear", action="store_true", help="remove intermediate data")
    return parser


def _options() -> Options:
    env = os.environ
    layout = env.get("ASC_APROF_SIM_LAYOUT", "") or "new"
    header = env.get("ASC_APROF_SIM_HEADER", "") or "8.5"
    if layout not in ("new", "old"):
        raise CliError(EXIT_INVALID_PARAM, f"ASC_APROF_SIM_LAYOUT must be new or old, not {layout!r}")
    if header not in ("8.5", "9.0"):
        raise CliError(EXIT_INVALID_PARAM, f"ASC_APROF_SIM_HEADER must be 8.5 or 9.0, not {header!r}")
    try:
        slice_rows = int(env.get("ASC_APROF_SIM_SLICE_ROWS", "") or "1000000")
        latency_ms = float(env.get("ASC_APROF_SIM_EXPORT_LATENCY_MS", "") or "0")
    except ValueError as exc:
        raise CliError(EXIT_INVALID_PARAM, f"bad simulator setting: {exc}") from None
    if slice_rows < 1 or not latency_ms >= 0:
        raise CliError(EXIT_INVALID_PARAM, "ASC_APROF_SIM_SLICE_ROWS must be >= 1, latency >= 0")
    return Options(layout, header, slice_rows, env.get("ASC_APROF_SIM_EXPORT_FAULT", ""), latency_ms / 1000)


def _check_dir(raw: str) -> Path:
    bad = sorted({ch for ch in raw if ch in REJECTED_PATH_CHARS})
    if bad:
        raise CliError(
            EXIT_INVALID_PARAM,
            f"[ERROR] The path {raw!r} contains invalid characters {bad!r}; please check the -dir argument.",
        )
    if len(raw) > MAX_PATH_CHARS:
        raise CliError(EXIT_INVALID_PATH, f"[ERROR] The path is longer than {MAX_PATH_CHARS} characters.")
    path = Path(os.path.abspath(raw))
    if not path.is_dir():
        raise CliError(
            EXIT_INVALID_PATH, f"[ERROR] The path {str(path)!r} does not exist or is not a directory."
        )
    if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
        raise CliError(EXIT_INVALID_PATH, f"[ERROR] The path {str(path)!r} is not readable and writable.")
    return path


def _prof_dirs(root: Path) -> list[Path]:
    """One PROF dir, or every PROF_* below a parent (real msprof re-parses them all)."""
    if root.name.startswith("PROF_"):
        return [root]
    found: list[Path] = []
    for current, dirs, _files in os.walk(root):
        keep = []
        for name in sorted(dirs):
            if name.startswith("PROF_"):
                found.append(Path(current) / name)
            elif name != "mindstudio_profiler_output":
                keep.append(name)
        dirs[:] = keep
    return sorted(found)


# ---------------------------------------------------------------------------------------------
# Reading the simulator's raw data


def _read_json(path: Path) -> dict[str, object]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _load_profile(prof: Path) -> Profile:
    devices: list[DeviceData] = []
    for sub in prof.iterdir():
        if not sub.name.startswith("device_") or not sub.name[7:].isdigit():
            continue
        device = int(sub.name[7:])
        if not (sub / f"info.json.{device}").is_file():
            continue  # only sub-dirs with info.json* are valid, as in msprof
        tasks = sub / "data" / TASKS_FILE
        if not tasks.is_file():
            _warn(f"{sub}: no task data (collection still running?); skipped")
            continue
        sample = _read_json(sub / "sample.json")
        data_type = sample.get("dataTypeConfig", 0)
        metric = sample.get("aicoreMetrics", 0xFF)
        lines = [line for line in tasks.read_text(encoding="utf-8").splitlines() if line and line[0] != "#"]
        controls = sum(1 for line in lines if line.endswith(CONTROL_SUFFIXES))
        devices.append(
            DeviceData(
                device,
                data_type if isinstance(data_type, int) else 0,
                metric if isinstance(metric, int) else 0xFF,
                lines,
                len(lines) - controls,
            )
        )
    devices.sort(key=lambda d: d.device)
    has_host = (prof / "host" / "info.json").is_file()
    names: dict[int, list[NameRun]] = {}
    names_file = prof / "host" / "data" / NAMES_FILE
    if has_host and names_file.is_file():
        for line in names_file.read_text(encoding="utf-8").splitlines():
            if not line or line[0] == "#":
                continue
            fields = line.split("\t")
            if len(fields) < 6:
                continue
            first, count = int(fields[2]), int(fields[3])
            tensors = tuple(fields[6:12]) + ("",) * (6 - len(fields[6:12]))
            names.setdefault(int(fields[0]), []).append(
                NameRun(first, first + count, fields[4], fields[5], tensors)
            )
        for runs in names.values():
            runs.sort()
    return Profile(prof, devices, names, has_host)


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


def _shape_cell(text: str, triple: bool) -> str:
    if not text:
        return "N/A"
    # msprof's C++ writer quotes and escapes shapes, leaving literal quotes in the value.
    return f'"""{text}"""' if triple else f'"{text}"'


def _tensor_cells(tensors: tuple[str, ...], triple: bool) -> str:
    in_shapes, in_types, in_formats, out_shapes, out_types, out_formats = tensors
    return ",".join(
        (
            _shape_cell(in_shapes, triple),
            _csv_cell(in_types) or "N/A",
            _csv_cell(in_formats) or "N/A",
            _shape_cell(out_shapes, triple),
            _csv_cell(out_types) or "N/A",
            _csv_cell(out_formats) or "N/A",
        )
    )


def _pmu_values(
    metric: int, kind: str, dur_ns: int, block: int, seed: str, level0: bool, old: bool
) -> list[str]:
    """Plausible PMU numbers, stable for one kernel name, scaled by the task duration."""
    if metric not in PMU_COLUMNS or (old and metric != 1):
        return []
    width = OLD_PMU_COLUMNS.count(",") + 1 if old else PMU_COLUMNS[metric].count(",") + 1
    if kind == "AI_CPU":
        return ["N/A"] * width
    rng = random.Random(zlib.crc32(seed.encode("utf-8", "replace")))
    dur_us = dur_ns / 1000
    cube = kind in ("AI_CORE", "MIX_AIC", "MIX_AIV")
    vector = kind in ("AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV")
    blocks = max(block, 1)

    def timed() -> tuple[float, int]:
        busy = dur_us * rng.uniform(0.6, 0.95)
        return busy, int(busy * CORE_MHZ * blocks)

    def t(value: float) -> str:  # level0 captures report every *_time as 0.0 (real #6)
        return "0.0" if level0 else _num(value)

    if old:  # one un-prefixed core, CANN 5/6 PipeUtilization
        busy, cycles = timed()
        ratios = [
            rng.uniform(lo, hi)
            for lo, hi in ((0.05, 0.6), (0.0, 0.5), (0.02, 0.4), (0.0, 0.3), (0.1, 0.6), (0.02, 0.3))
        ]
        out = [t(busy), str(cycles)]
        for ratio in ratios:
            out += [t(busy * ratio), _num(ratio)]
        return [*out, _num(rng.uniform(0, 0.03)), _num(rng.uniform(1, 20))]

    def side(enabled: bool, spec: tuple[tuple[float, float], ...], with_times: bool) -> list[str]:
        if not enabled:
            return ["0.0", "0"] + ["0.0"] * (len(spec) * (2 if with_times else 1))
        busy, cycles = timed()
        out = [t(busy), str(cycles)]
        for lo, hi in spec:
            value = rng.uniform(lo, hi)
            out += [t(busy * value), _num(value)] if with_times else [_num(value)]
        return out

    if metric == 1:
        aic = side(cube, ((0.2, 0.8), (0.02, 0.3), (0.05, 0.4), (0.1, 0.6), (0.02, 0.2)), True)
        aic.append(_num(rng.uniform(0, 0.03)) if cube else "0.0")
        aiv = side(vector, ((0.05, 0.6), (0.02, 0.5), (0.1, 0.6), (0.02, 0.3)), True)
        aiv.append(_num(rng.uniform(0, 0.03)) if vector else "0.0")
        mac_ratio = float(aic[3]) if cube else 0.0
        return aic + aiv + [f"{mac_ratio * 100 * min(1.0, blocks / 24):.3f}"]
    if metric == 2:
        bw = ((0.5, 40.0),) * 6
        return side(cube, bw, False) + side(vector, bw, False)
    aic = side(cube, ((0.0, 0.9), (0.0, 0.2), (1e6, 1e9), (1e5, 1e8)), False)
    aiv = side(vector, ((0.0, 0.5), (0.0, 0.6), (0.0, 0.1), (0.0, 0.2), (0.0, 1.0), (1e5, 1e8)), False)
    return aic + aiv


# ---------------------------------------------------------------------------------------------
# Row generation


class Style(NamedTuple):
    old: bool
    level1: bool
    pmu_metric: int  # -1: no PMU columns


def _style(device: DeviceData, old: bool) -> Style:
    pmu = device.metric if device.data_type & AICORE_METRICS_BIT and device.metric in PMU_COLUMNS else -1
    return Style(old, bool(device.data_type & TASK_TIME_L1_BITS), pmu)


def _op_parts(run: NameRun | None, kind: str, dur_ns: int, block: int, style: Style) -> tuple[str, str]:
    """The cells before the start time and after the wait time of one op_summary row."""
    name = _csv_cell(run.name) if run is not None else "N/A"
    mix = kind in ("MIX_AIC", "MIX_AIV")
    context = "0" if mix else "N/A"
    seed = run.name if run is not None else kind
    pmu = _pmu_values(style.pmu_metric, kind, dur_ns, block, seed, not style.level1, style.old)
    if style.old:
        tensors = (
            _tensor_cells(run.tensors, False) if run is not None and style.level1 else ",".join(["N/A"] * 6)
        )
        op_type = name if style.level1 else "N/A"
        head = f"{name},{op_type},{kind if style.level1 or run is None else 'N/A'}"
        tail = ",".join([str(block), tensors, *pmu])
        return head, tail
    if run is not None and style.level1:
        head = f"{name},{name},dynamic,{kind}"
        tail = ",".join(
            [str(block), str(block * 2 if mix else 0), "NO", _tensor_cells(run.tensors, True), context, *pmu]
        )
    elif run is not None:  # level0: names only, no GE info
        head = f"{name},N/A,N/A,N/A"
        tail = ",".join(["0", "0", "N/A", ",".join(["N/A"] * 6), "N/A", *pmu])
    else:  # no host data for this kernel (8.5 overlap): the device still knows its type
        head = f"N/A,N/A,N/A,{kind}"
        tail = ",".join(
            [str(block), str(block * 2 if mix else 0), "N/A", ",".join(["N/A"] * 6), context, *pmu]
        )
    return head, tail


def _kernel_type(run: NameRun | None, kind: str, style: Style) -> str:
    if run is None:
        return SQE_TYPES.get(kind, kind)
    return kind if style.level1 else HOST_KERNEL_TYPES.get(kind, kind)


def _device_rows(
    device: DeviceData, runs: list[NameRun], style: Style
) -> Iterator[tuple[list[str], list[str]]]:
    """Chunks of (op_summary rows, task_time rows), without the Device_id cell or newline.

    The hot loop of a million-row export: everything that is the same for a run of identical
    kernels is formatted once and cached; per row only the ids and times are formatted.
    """
    op_rows: list[str] = []
    task_rows: list[str] = []
    cache: dict[tuple[int, str, str, str], tuple[str, str, str, str, int]] = {}
    waits: dict[int, str] = {}
    no_run = (-1, -1)
    run_index = 0
    run_first, run_end = (runs[0].first, runs[0].end) if runs else no_run
    prev_end = -1
    old = style.old
    for line in device.lines:
        tid_s, stream, start_s, dur_s, block_s, kind = line.split(" ")
        if kind in CONTROL_KINDS:
            start, dur = int(start_s), int(dur_s)
            if old:
                task_rows.append(f'N/A,{kind},{stream},{tid_s},"{dur / 1000!r}","{start_s}","{start + dur}"')
            else:
                task_rows.append(
                    f"N/A,{kind},{stream},{tid_s},{_us(dur)},{_us(start)}\t,{_us(start + dur)}\t"
                )
            continue
        tid = int(tid_s)
        while run_end >= 0 and tid >= run_end:  # host runs and task ids both ascend
            run_index += 1
            run_first, run_end = (
                (runs[run_index].first, runs[run_index].end) if run_index < len(runs) else no_run
            )
        key = (run_index if tid >= run_first >= 0 else -1, kind, dur_s, block_s)
        parts = cache.get(key)
        if parts is None:
            named = runs[run_index] if key[0] >= 0 else None
            dur = int(dur_s)
            head, tail = _op_parts(named, kind, dur, int(block_s), style)
            kname = _csv_cell(named.name) if named is not None else "N/A"
            parts = (head, tail, f"{kname},{_kernel_type(named, kind, style)}", _us(dur), dur)
            cache[key] = parts
        head, tail, task_head, dur_us, dur = parts
        start = int(start_s)
        stop = start + dur
        if prev_end < 0:
            wait = "0"
        else:
            gap = start - prev_end
            cached = waits.get(gap)
            wait = cached if cached is not None else waits.setdefault(gap, _us(max(gap, 0)) + "000")
        prev_end = stop
        start_us = f"{start_s[:-3]}.{start_s[-3:]}"
        if old:
            op_rows.append(f"{MODEL_ID},{tid_s},{stream},{head},{start_us},{dur_us},{wait},{tail}")
            task_rows.append(f'{task_head},{stream},{tid_s},"{dur / 1000!r}","{start_s}","{stop}"')
        else:
            stop_s = str(stop)
            op_rows.append(f"{MODEL_ID},{tid_s},{stream},{head},{start_us}\t,{dur_us},{wait},{tail}")
            task_rows.append(
                f"{task_head},{stream},{tid_s},{dur_us},{start_us}\t,{stop_s[:-3]}.{stop_s[-3:]}\t"
            )
        if len(task_rows) >= CHUNK_ROWS:
            yield op_rows, task_rows
            op_rows, task_rows = [], []
    if op_rows or task_rows:
        yield op_rows, task_rows


def _placeholder_rows(device: DeviceData) -> list[str]:
    """A run without kernels: op_summary lists the control tasks as PLACE_HOLDER_SQE (real #3)."""
    rows = []
    for line in device.lines:
        tid_s, stream, start_s, dur_s, _block, _kind = line.split(" ")
        rows.append(
            f"-1,{tid_s},{stream},N/A,N/A,N/A,PLACE_HOLDER_SQE,{_us(int(start_s))}\t,{_us(int(dur_s))},0,N/A"
        )
    return rows


# ---------------------------------------------------------------------------------------------
# Writers


def _open_csv(path: Path) -> TextIO:
    # LF endings whatever the platform, no BOM, big buffer for million-row files.
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
        self.file = _open_csv(path)
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


def _op_header(style: Style, header_version: str, device_column: bool) -> str:
    block, mix = ("Block Num", "Mix Block Num") if header_version == "9.0" else ("Block Dim", "Mix Block Dim")
    if style.old:
        text = OLD_OP_HEADER + ("," + OLD_PMU_COLUMNS if style.pmu_metric == 1 else "")
    else:
        text = BASE_COLUMNS.format(block=block, mix=mix)
        if style.pmu_metric in PMU_COLUMNS:
            text += "," + PMU_COLUMNS[style.pmu_metric]
    return ("Device_id," + text) if device_column else text


def _export_new(profile: Profile, devices: list[DeviceData], options: Options, stamp: str) -> list[Path]:
    out_dir = profile.path / "mindstudio_profiler_output"
    out_dir.mkdir(exist_ok=True)
    total_kernels = sum(d.kernels for d in devices)
    total_tasks = sum(len(d.lines) for d in devices)
    limit = options.slice_rows
    style0 = _style(devices[0], old=False)
    op_header = _op_header(style0, options.header, device_column=True) if total_kernels else NO_KERNEL_COLUMNS
    op_writer = SlicedWriter(out_dir, "op_summary", stamp, op_header, total_kernels or total_tasks, limit)
    task_writer = SlicedWriter(out_dir, "task_time", stamp, TASK_TIME_HEADER, total_tasks, limit)
    for device in devices:
        style = _style(device, old=False)
        prefix = f"{device.device},"
        # Like the Python msprof path: per-device summary files first, merged, then removed.
        summary_dir = profile.path / f"device_{device.device}" / "summary"
        summary_dir.mkdir(exist_ok=True)
        with (
            _open_csv(summary_dir / f"op_summary_{device.device}_1_{stamp}.csv") as per_op,
            _open_csv(summary_dir / f"task_time_{device.device}_1_{stamp}.csv") as per_task,
        ):
            if total_kernels:
                per_header = _op_header(style, options.header, device_column=False)
            else:
                per_header = NO_KERNEL_COLUMNS.partition(",")[2]
            per_op.write(per_header + "\n")
            per_task.write(TASK_TIME_HEADER.partition(",")[2] + "\n")
            if not total_kernels:
                rows = _placeholder_rows(device)
                op_writer.write(rows, prefix)
                per_op.write("".join(row + "\n" for row in rows))
            for op_rows, task_rows in _device_rows(device, profile.names.get(device.device, []), style):
                if op_rows:
                    per_op.write("\n".join(op_rows) + "\n")
                    op_writer.write(op_rows, prefix)
                if task_rows:
                    per_task.write("\n".join(task_rows) + "\n")
                    task_writer.write(task_rows, prefix)
        shutil.rmtree(summary_dir, ignore_errors=True)
    return op_writer.close() + task_writer.close()


def _export_old(profile: Profile, devices: list[DeviceData], stamp: str) -> list[Path]:
    written: list[Path] = []
    for device in devices:
        style = _style(device, old=True)
        summary_dir = profile.path / f"device_{device.device}" / "summary"
        summary_dir.mkdir(exist_ok=True)
        op_path = summary_dir / f"op_summary_{device.device}_1_{stamp}.csv"
        task_path = summary_dir / f"task_time_{device.device}_1_{stamp}.csv"
        with _open_csv(op_path) as op_file, _open_csv(task_path) as task_file:
            op_file.write(_op_header(style, "8.5", device_column=False) + "\n")
            task_file.write(OLD_TASK_TIME_HEADER + "\n")
            for op_rows, task_rows in _device_rows(device, profile.names.get(device.device, []), style):
                if op_rows:
                    op_file.write("\n".join(op_rows) + "\n")
                if task_rows:
                    task_file.write("\n".join(task_rows) + "\n")
        written += [op_path, task_path]
    return written


def _export_timeline(profile: Profile, devices: list[DeviceData], stamp: str) -> list[Path]:
    out_dir = profile.path / "mindstudio_profiler_output"
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
            runs = profile.names.get(device.device, [])
            run_index = 0
            run = runs[0] if runs else None
            for line in device.lines:
                tid_s, stream, start_s, dur_s, _block, kind = line.split(" ")
                tid = int(tid_s)
                name = kind
                if kind not in CONTROL_KINDS:
                    while run is not None and tid >= run.end:
                        run_index += 1
                        run = runs[run_index] if run_index < len(runs) else None
                    name = run.name if run is not None and tid >= run.first else "N/A"
                ts = f"{start_s[:-3]}.{start_s[-3:]}"
                args = f'{{"Task Type": "{kind}", "Stream Id": {stream}, "Task Id": {tid}}}'
                out.write(
                    f',\n{{"name": {json.dumps(name)}, "pid": {pid}, "tid": {stream}, "ts": "{ts}", '
                    f'"dur": {int(dur_s) / 1000!r}, "ph": "X", "args": {args}}}'
                )
        out.write("]\n")
    return [path]


# ---------------------------------------------------------------------------------------------
# Faults


def _warn(message: str) -> None:
    print(f"[WARNING] {message}", file=sys.stderr, flush=True)


def _apply_early_fault(fault: str) -> None:
    """Faults that replace the export entirely."""
    if fault.startswith("exit:"):
        code = _int_arg(fault)
        print(
            f"[ERROR] simulated export failure (ASC_APROF_SIM_EXPORT_FAULT={fault})",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(code)
    if fault == "hang":
        # A helper in our process group, so callers can prove they kill the whole group.
        helper = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(3600)"])
        print(f"[INFO] simulated hang; helper pid {helper.pid}", file=sys.stderr, flush=True)
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


def _export(root: Path, kind: str, options: Options) -> int:
    gc.disable()  # millions of short-lived strings: collection passes only cost time here
    prof_dirs = _prof_dirs(root)
    if not prof_dirs:
        _warn(f"Can not find any host or device path in {root}; nothing exported.")
        return EXIT_OK
    written: list[Path] = []
    for prof in prof_dirs:
        profile = _load_profile(prof)
        devices = [d for d in profile.devices if d.data_type & (TASK_TIME_L1_BITS | TASK_TIME_L0_BIT)]
        if not devices:
            _warn(f"{prof.name}: no task-time data collected (ACL_PROF_TASK_TIME not set); nothing exported.")
            continue
        stamp = time.strftime("%Y%m%d%H%M%S")
        print(f"[INFO] Start exporting {kind} data in {prof}.", flush=True)
        if kind == "timeline":
            written += _export_timeline(profile, devices, stamp)
        elif options.layout == "old":
            written += _export_old(profile, devices, stamp)
        else:
            written += _export_new(profile, devices, options, stamp)
    if options.fault == "truncate":
        for path in written:
            if path.suffix == ".csv":
                _truncate_mid_row(path)
    elif options.fault == "badheader":
        _write_bad_headers([p for p in written if p.suffix == ".csv"])
    for path in written:
        print(f"[INFO] Exported {path}", flush=True)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    os.umask(0o027)  # msprof forces dirs 0750 / files 0640
    args = _parser().parse_args(argv)
    try:
        options = _options()
        root = _check_dir(args.collection_dir)
        if options.fault not in (
            "",
            "hang",
            "nocsv",
            "truncate",
            "badheader",
        ) and not options.fault.startswith(("exit:", "signal:")):
            raise CliError(EXIT_INVALID_PARAM, f"unknown ASC_APROF_SIM_EXPORT_FAULT {options.fault!r}")
        if options.latency_s > 0:
            time.sleep(options.latency_s)
        _apply_early_fault(options.fault)
        return _export(root, str(args.kind), options)
    except CliError as exc:
        print(str(exc), file=sys.stderr, flush=True)
        return exc.code


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
