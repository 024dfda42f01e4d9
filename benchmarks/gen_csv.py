"""Realistic msprof CSVs for benchmarks: new layout (46 columns with PMU), old layout, task_time."""

from __future__ import annotations

import random
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


def new_op_summary(rows: int, devices: int = 1, seed: int = 1) -> bytes:
    rng = random.Random(seed)
    start_ns = 1_713_390_712_311_991_828
    out = [NEW_OP_SUMMARY_HEADER]
    pmu = ",".join(["1.234", "78923", "0.5", "0.1"] * 6 + ["12.5"])
    for i in range(rows):
        name, ttype = KERNELS[i % 3]
        dur = rng.uniform(5.0, 90.0)
        start_ns += int(dur * 1000) + 1500
        us, frac = divmod(start_ns // 1000, 1), start_ns % 1000
        out.append(
            f"{i % devices},4294967295,{i % 65536},2,{name},{name},dynamic,{ttype},{us[0]}.{frac:03d}\t,"
            f'{dur:.3f},0,8,0,NO,"""8,2048;8,2048;8,2048;1""",FLOAT16;FLOAT16;FLOAT16;FLOAT16,'
            f'ND;ND;ND;ND,"""8,2048""",FLOAT16,ND,N/A,{pmu}'
        )
    return ("\n".join(out) + "\n").encode()


def old_op_summary(rows: int, seed: int = 1) -> bytes:
    rng = random.Random(seed)
    out = [OLD_OP_SUMMARY_HEADER]
    for i in range(rows):
        name, ttype = KERNELS[i % 3]
        out.append(
            f"4294967295,{i % 65536},47,{name},{name},{ttype},1043640017380.831,{rng.uniform(5, 90):.2f},0,8"
        )
    return ("\n".join(out) + "\n").encode()


def task_time(rows: int, seed: int = 1) -> bytes:
    rng = random.Random(seed)
    out = [TASK_TIME_HEADER, "0,N/A,PROFILING_ENABLE,0,1,0.020,1.000\t,1.020\t"]
    for i in range(rows):
        name, _ = KERNELS[i % 3]
        out.append(f"0,{name},KERNEL_AICORE,1,{i % 65536},{rng.uniform(5, 90):.3f},2.000\t,20.000\t")
    out.append("0,N/A,PROFILING_DISABLE,0,2,0.041,30.000\t,30.041\t")
    return ("\n".join(out) + "\n").encode()


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
