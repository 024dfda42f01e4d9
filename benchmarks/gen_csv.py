"""Realistic msprof CSVs for benchmarks: new layout (46 columns with PMU), old layout, task_time.

The new layout has what makes real op_summary files awkward: quoted shape cells with embedded
commas and doubled quotes (the cell text is ``"8,2048;1"``, quotes included), a trailing TAB
after the start time, and 25 PMU columns after the ones a task needs. ``*_lines`` yield rows
without newlines; :func:`write_csv` streams them to disk in batches, so a million-row file never
sits in memory as one string.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path

NEW_OP_SUMMARY_HEADER = (
    "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),"
    "Task Duration(us),Task Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,"
    "Input Data Types,Input Formats,Output Shapes,Output Data Types,Output Formats,Context ID,"
    "aicore_time(us),aic_total_cycles,aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),"
    "aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,"
    "aic_fixpipe_time(us),aic_fixpipe_ratio,aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,"
    "aiv_vec_time(us),aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),"
    "aiv_mte2_ratio,aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate,cube_utilization(%)"
)
OLD_OP_SUMMARY_HEADER = (
    "Model ID,Task ID,Stream ID,Op Name,OP Type,Task Type,Task Start Time,Task Duration(us),"
    "Task Wait Time(us),Block Dim"
)
TASK_TIME_HEADER = (
    "Device_id,kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(us),task_stop(us)"
)
KERNELS = (("matmul_custom", "MIX_AIC"), ("add_custom", "AI_VECTOR_CORE"), ("softmax_custom", "AI_CORE"))

#: The columns a task is built from, per layout (what polars is asked to read).
NEW_TASK_COLUMNS = ("Device_id", "Task ID", "Op Name", "Task Type", "Task Duration(us)")
OLD_TASK_COLUMNS = ("Task ID", "Op Name", "Task Type", "Task Duration(us)")
TASK_TIME_TASK_COLUMNS = ("Device_id", "task_id", "kernel_name", "kernel_type", "task_time(us)")


def new_op_summary_lines(rows: int, devices: int = 1, seed: int = 1) -> Iterator[str]:
    rng = random.Random(seed)
    start_ns = 1_713_390_712_311_991_828
    yield NEW_OP_SUMMARY_HEADER
    pmu = ",".join(["1.234", "78923", "0.5", "0.1"] * 6 + ["12.5"])
    for i in range(rows):
        name, ttype = KERNELS[i % 3]
        dur = rng.uniform(5.0, 90.0)
        start_ns += int(dur * 1000) + 1500
        us, frac = start_ns // 1000, start_ns % 1000
        yield (
            f"{i % devices},4294967295,{i % 65536},2,{name},{name},dynamic,{ttype},{us}.{frac:03d}\t,"
            f'{dur:.3f},0,8,0,NO,"""8,2048;8,2048;8,2048;1""",FLOAT16;FLOAT16;FLOAT16;FLOAT16,'
            f'ND;ND;ND;ND,"""8,2048""",FLOAT16,ND,N/A,{pmu}'
        )


def old_op_summary_lines(rows: int, seed: int = 1) -> Iterator[str]:
    rng = random.Random(seed)
    yield OLD_OP_SUMMARY_HEADER
    for i in range(rows):
        name, ttype = KERNELS[i % 3]
        dur = rng.uniform(5, 90)
        yield f"4294967295,{i % 65536},47,{name},{name},{ttype},1043640017380.831,{dur:.2f},0,8"


def task_time_lines(rows: int, seed: int = 1) -> Iterator[str]:
    """task_time rows, with the PROFILING_ENABLE / PROFILING_DISABLE control rows around them."""
    rng = random.Random(seed)
    yield TASK_TIME_HEADER
    yield "0,N/A,PROFILING_ENABLE,0,1,0.020,1.000\t,1.020\t"
    for i in range(rows):
        name, _ = KERNELS[i % 3]
        yield f"0,{name},KERNEL_AICORE,1,{i % 65536},{rng.uniform(5, 90):.3f},2.000\t,20.000\t"
    yield "0,N/A,PROFILING_DISABLE,0,2,0.041,30.000\t,30.041\t"


def _join(lines: Iterable[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode()


def new_op_summary(rows: int, devices: int = 1, seed: int = 1) -> bytes:
    return _join(new_op_summary_lines(rows, devices, seed))


def old_op_summary(rows: int, seed: int = 1) -> bytes:
    return _join(old_op_summary_lines(rows, seed))


def task_time(rows: int, seed: int = 1) -> bytes:
    return _join(task_time_lines(rows, seed))


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def write_csv(path: Path, lines: Iterable[str], batch: int = 50_000) -> Path:
    """Stream *lines* to *path* (newline-terminated), *batch* lines at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    iterator = iter(lines)
    with open(path, "wb") as stream:
        while chunk := list(islice(iterator, batch)):
            stream.write(_join(chunk))
    return path
