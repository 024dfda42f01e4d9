"""op_summary's PMU columns from the raw ``ffts_profile`` records, as the real exporter computes them.

Theory of operation
-------------------
A device's ``ffts_profile.data.N.slice_*`` holds 128-byte records: *context PMU* records
(function 40), one per task (or FFTS+ context), with the cycles the task ran summed over its
blocks, the 8 event counters the collection chose (``sample.json``'s ``ai_core_profiling_events``
/ ``aiv_profiling_events``, in that order) and start / end counters; and *block PMU* records
(function 41), per block of a MIX kernel's slave cores.

The real exporter (Ascend/msprof ``analysis/`` at 9ba1ac7be: ``ffts_pmu_calculator.py``,
``calculate_ai_core_data.py``, ``ai_core_op_report.py``) turns each context record into one row
of a SQLite "metric summary" table and joins those rows to op_summary's rows. This module
re-implements that chain in memory, in these steps (each a function or table below):

1. **event names**: each event number maps to a metric name (``EVENT_NAMES``; unknown numbers
   keep their hex text);
2. **per-event values** (:func:`side_values`): ``ratio = 1.0 * count / total_cycles``, bandwidths
   ``count * width * scale / (total_cycles / aic_Hz) / 2**33`` (``BANDWIDTHS``), other names the
   raw count; no total cycles: raw counts. Then the derived ones (``mac_ratio_extra`` = the two
   MAC ratios, ``icache_miss_rate`` = misses over requests, fops, ...), and for the pipe groups a
   ``*_time`` per ratio: ``total_time * ratio``;
3. **the table** (:class:`PmuLayout`): the columns a metric group writes (``METRIC_GROUPS``,
   each ratio preceded by its time for the pipe groups), ``aic_`` / ``aiv_`` prefixed on 910B
   (two sides: the AI Cube side from ``ai_core_metrics``, the vector side from
   ``aiv_metrics``), unprefixed on 310B (one side, from ``ai_core_profiling_events`` for every
   task). The exporter inserts values *by position*: a group whose values do not line up with
   its columns is declined. ``total_time = total_cycles * 1e6 / aic_Hz / block_num *
   ceil(block_num / cores)`` rounded to 2 decimals, 0 without a block number (task time level 0);
4. **the join** (:func:`join_rows`): op_summary's rows (before the collection-start filter) take
   the metric rows of their (batch, task, stream, context) key in order; rows without one, and
   AI CPU / DSA / DVPP rows, print ``N/A``;
5. **printing** (:meth:`PmuLayout.cells`): SQLite's ``round(x, 3)`` on every column without
   "cycles" in its name (done by SQLite itself, so ties round as the exporter's do), columns
   some chips lack dropped or ``N/A``, ``memory_bound`` (310B-style groups) and
   ``cube_utilization(%)`` (910B) appended, names with units (``aicore_time(us)``).

Verified on real runs (tests/real): 910B ``PipeUtilizationExct`` + ``PipeUtilization`` at task time
levels 0 and 1, AI Core and AI Vector kernels; 310B ``PipelineExecuteUtilization``
(:data:`VERIFIED_GROUPS`). Verified by the real exporter on generated data, no real run of the
group (:data:`GENERATED_GROUPS`): every other group each chip collects, with the event lists
CANN's collector programs for it (:func:`collector_events`), AI Core, AI Vector and MIX kernels
without block records, levels 0 and 1, one and two devices; 910B MemoryAccess, whose table never
lines up (no PMU column); and runs whose sample.json has PMU collection off (:func:`pmu_off`).
Anything else (other event lists, sample-based or custom events, block records joined to a MIX
row) is computed here from the exporter's code ("parser only") and the raw reader declines it.
"""

from __future__ import annotations

import dataclasses
import math
import sqlite3
import struct
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final, NamedTuple

from ..._model._chips import rated_aic_mhz
from ..._model._counters import TaskCounters
from ._chunked import empty
from ._decode import RawData
from ._types import ClockTable, DeclinedError, DeclineReason

NA: Final = "N/A"
INVALID_CONTEXT: Final = 4294967295
PMU_SIZE: Final = 128
FUNCTION_CONTEXT_PMU: Final = 40
FUNCTION_BLOCK_PMU: Final = 41
FFTS_PLUS: Final = 4
EVENTS_PER_RECORD: Final = 8

_PMU: Final = struct.Struct("<4HQ4HQ12Q")

#: Chips (``platform_version``): 910B writes two sides (AI Cube, vector), 310B one.
CHIP_910B: Final = "5"
CHIP_310B: Final = "7"

#: (chip, ai_core_metrics, aiv_metrics) whose export real runs confirmed cell by cell.
VERIFIED_GROUPS: Final = frozenset(
    {
        (CHIP_910B, "PipeUtilizationExct", "PipeUtilization"),
        (CHIP_310B, "PipelineExecuteUtilization", "PipelineExecuteUtilization"),
    }
)


def verified_collection(chip: str, sample: Mapping[str, object]) -> bool:
    """Whether the real exporter's PMU export of this collection was verified: a group real runs
    show (:data:`VERIFIED_GROUPS`), or task-based with one of :data:`GENERATED_GROUPS`' group and
    event lists."""
    modes = ("ai_core_profiling_mode", "aiv_profiling_mode")
    if any(_setting(sample, mode) == "sample-based" for mode in modes):
        return False
    aic, aiv = _setting(sample, "ai_core_metrics"), _setting(sample, "aiv_metrics")
    if (chip, aic, aiv) in VERIFIED_GROUPS:
        return True
    if any(_setting(sample, mode) != "task-based" for mode in modes):
        return False
    try:
        cube = _codes(_setting(sample, "ai_core_profiling_events").replace(" ", ""))
        vector = _codes(_setting(sample, "aiv_profiling_events").replace(" ", ""))
    except ValueError:
        return False
    return (chip, aic, aiv, cube, vector) in GENERATED_GROUPS


def pmu_off(sample: Mapping[str, object]) -> bool:
    """``sample.json`` says neither core type collected PMU data (``ai_core_profiling`` and
    ``aiv_profiling`` ``off``): the exporter then writes op_summary without PMU columns (verified
    by the real exporter on generated data: no AICORE_METRICS bit, a group the chip lacks)."""
    return all(_setting(sample, key) == "off" for key in ("ai_core_profiling", "aiv_profiling"))


class NoPmuColumns(DeclinedError):
    """Declined, where the exporter's code writes op_summary without PMU columns: it skips
    sample-based collections, and its table insert fails for groups it does not know or whose
    values do not line up with the columns (parser only: no real run shows it)."""


class PmuRecord(NamedTuple):
    """A context PMU record (function 40) with its ids unpacked as the exporter unpacks them.

    :ivar subtask_type: the 16-bit field masked with the exporter's literal ``11111111`` (a decimal
        number: bits 3-5 are dropped, so only types 0-7 come through unchanged)
    :ivar context_id: the subtask id for FFTS+ records (``ffts_type`` 4), else the invalid id
    :ivar events: the 8 event counters, in ``sample.json``'s event order
    """

    stream_id: int
    task_id: int
    subtask_type: int
    context_id: int
    ffts_type: int
    total_cycles: int
    events: tuple[int, ...]
    start: int
    end: int

    @property
    def is_aic(self) -> bool:
        """The exporter counts the record on the AI Cube side (else the vector side)."""
        plus = self.ffts_type == FFTS_PLUS
        return (plus and self.subtask_type in (0, 6)) or self.ffts_type in (0, 5)

    @property
    def is_mix_aic(self) -> bool:
        return (self.ffts_type == FFTS_PLUS and self.subtask_type == 6) or self.ffts_type == 5

    @property
    def is_mix_aiv(self) -> bool:
        return self.ffts_type == FFTS_PLUS and self.subtask_type == 7


class PmuRecords(NamedTuple):
    """A device's context records (overflowed ones dropped, as the exporter drops them) and the
    (stream, task, context) keys that have block records."""

    context: list[PmuRecord]
    block_keys: frozenset[tuple[int, int, int]]


def pmu_records(data: RawData, unpack: Callable[[int, int], tuple[int, int]]) -> PmuRecords:
    """Decode ``ffts_profile`` bytes; *unpack* maps raw (stream, task) fields to ids.

    :raises DeclinedError: a record of another function (the exporter skips it with an error)
    """
    context: list[PmuRecord] = []
    blocks: set[tuple[int, int, int]] = set()
    view = memoryview(data)[len(data) % PMU_SIZE :]
    for fields in _PMU.iter_unpack(view):
        function = fields[0] & 63
        stream, task = unpack(fields[2], fields[3])
        ffts_type = fields[7] >> 13
        context_id = fields[6] if ffts_type == FFTS_PLUS else INVALID_CONTEXT
        if function == FUNCTION_BLOCK_PMU:
            blocks.add((stream, task, fields[6]))
            continue
        if function != FUNCTION_CONTEXT_PMU:
            raise DeclinedError(DeclineReason.UNKNOWN_RECORD, f"ffts_profile record of function {function}")
        if (fields[5] >> 10) & 1:
            continue  # overflowed counters: the exporter drops the record
        context.append(
            PmuRecord(
                stream,
                task,
                fields[5] & 11111111,
                context_id,
                ffts_type,
                fields[10],
                tuple(fields[12:20]),
                fields[20],
                fields[21],
            )
        )
    return PmuRecords(context, frozenset(blocks))


# -- names and formulas -------------------------------------------------------------------------

#: Event number -> metric name (the exporter's ai_core ``event2metric`` table).
EVENT_NAMES: Final = {
    0x8: "vec_ratio",
    0xA: "mac_ratio",
    0x9: "scalar_ratio",
    0xB: "mte1_ratio",
    0xC: "mte2_ratio",
    0xD: "mte3_ratio",
    0xF: "l2_read_bw(GB/s)",
    0x10: "l2_write_bw(GB/s)",
    0x12: "main_mem_read_bw(GB/s)",
    0x13: "main_mem_write_bw(GB/s)",
    0x15: "ub_read_bw(GB/s)",
    0x16: "ub_write_bw(GB/s)",
    0x1B: "l0a_read_bw(GB/s)",
    0x1C: "l0a_write_bw(GB/s)",
    0x21: "l0b_read_bw(GB/s)",
    0x22: "l0b_write_bw(GB/s)",
    0x27: "l0c_read_bw(GB/s)",
    0x28: "l0c_read_bw_cube(GB/s)",
    0x29: "l0c_write_bw(GB/s)",
    0x2A: "l0c_write_bw_cube(GB/s)",
    0x31: "l1_read_bw(GB/s)",
    0x32: "l1_write_bw(GB/s)",
    0x37: "ub_read_bw_scalar(GB/s)",
    0x38: "ub_write_bw_scalar(GB/s)",
    0x3A: "scalar_ld_ratio",
    0x3B: "scalar_st_ratio",
    0x3D: "ub_read_bw_mte(GB/s)",
    0x3E: "ub_write_bw_mte(GB/s)",
    0x43: "ub_read_bw_vector(GB/s)",
    0x44: "ub_write_bw_vector(GB/s)",
    0x49: "mac_fp16_ratio",
    0x4A: "mac_int8_ratio",
    0x4B: "vec_fp32_ratio",
    0x4C: "vec_fp16_128lane_ratio",
    0x4D: "vec_fp16_64lane_ratio",
    0x4E: "vec_int32_ratio",
    0x4F: "vec_misc_ratio",
    0x54: "icache_req_ratio",
    0x55: "icache_miss_rate",
    0x57: "scalar_waitflag_ratio",
    0x58: "cube_waitflag_ratio",
    0x59: "vector_waitflag_ratio",
    0x5A: "mte1_waitflag_ratio",
    0x5B: "mte2_waitflag_ratio",
    0x5C: "mte3_waitflag_ratio",
    0x64: "vec_bankgroup_cflt_ratio",
    0x65: "vec_bank_cflt_ratio",
    0x66: "vec_resc_cflt_ratio",
    0x6B: "mte1_iq_full_ratio",
    0x6C: "mte2_iq_full_ratio",
    0x6D: "mte3_iq_full_ratio",
    0x6E: "cube_iq_full_ratio",
    0x6F: "vec_iq_full_ratio",
    0x12C: "vec_exe_ratio",
    0x17F: "ub_read_bw_vector(GB/s)",
    0x180: "ub_read_bw_vector(GB/s)",
    0x191: "ub_write_bw_vector(GB/s)",
    0x1A5: "ub_read_bw_mte(GB/s)",
    0x1A6: "ub_write_bw_mte(GB/s)",
    0x302: "mte1_ratio_extra",
    0x303: "fixpipe_ratio",
    0x416: "mac_fp_ratio",
    0x417: "mac_int_ratio",
    0x500: "write_cache_hit",
    0x502: "write_cache_miss_allocate",
    0x504: "r0_read_cache_hit",
    0x506: "r0_read_cache_miss_allocate",
    0x508: "r1_read_cache_hit",
    0x50A: "r1_read_cache_miss_allocate",
}

#: Names computed as ``1.0 * count / total_cycles`` (when the total is not 0).
RATIOS: Final = frozenset(
    {
        "mac_fp16_ratio", "mac_int8_ratio", "vec_fp32_ratio", "vec_fp16_128lane_ratio",
        "vec_fp16_64lane_ratio", "vec_fp16_ratio", "vec_int32_ratio", "vec_misc_ratio", "vec_ratio",
        "vec_exe_ratio", "mac_ratio", "mac_ratio_extra", "mac_exe_ratio", "mac_fp_ratio",
        "mac_int_ratio", "scalar_ratio", "scalar_exe_ratio", "fixpipe_ratio", "fixpipe_exe_ratio",
        "mte1_ratio", "mte1_exe_ratio", "mte1_ratio_extra", "mte2_ratio", "mte2_exe_ratio",
        "mte3_ratio", "mte3_exe_ratio", "mte_preload_ratio", "icache_miss_rate", "icache_req_ratio",
        "scalar_waitflag_ratio", "cube_waitflag_ratio", "vector_waitflag_ratio",
        "mte1_waitflag_ratio", "mte2_waitflag_ratio", "mte3_waitflag_ratio", "scalar_ld_ratio",
        "scalar_st_ratio", "vec_bankgroup_cflt_ratio", "vec_bank_cflt_ratio",
        "vec_resc_cflt_ratio", "mte1_iq_full_ratio", "mte2_iq_full_ratio", "mte3_iq_full_ratio",
        "cube_iq_full_ratio", "vec_iq_full_ratio", "acess_stack_ratio",
        "control_flow_prediction_ratio", "control_flow_mis_prediction_rate",
        "stu_pmu_wctl_ub_cflt",
    }
)  # fmt: skip

#: Bandwidth names: (bytes per request, scale) in ``count * w * s / (cycles / Hz) / 2**33``.
BANDWIDTHS: Final = {
    "ub_read_bw(GB/s)": (256.0, 4.0),
    "ub_write_bw(GB/s)": (256.0, 4.0),
    "l1_read_bw(GB/s)": (256.0, 16.0),
    "l1_write_bw(GB/s)": (256.0, 8.0),
    "l2_read_bw(GB/s)": (256.0, 8.0),
    "l2_write_bw(GB/s)": (256.0, 8.0),
    "main_mem_read_bw(GB/s)": (8.0, 8.0),
    "main_mem_write_bw(GB/s)": (8.0, 8.0),
    "l0a_read_bw(GB/s)": (256.0, 16.0),
    "l0a_write_bw(GB/s)": (256.0, 16.0),
    "l0b_read_bw(GB/s)": (256.0, 8.0),
    "l0b_write_bw(GB/s)": (256.0, 8.0),
    "l0c_read_bw(GB/s)": (256.0, 8.0),
    "l0c_write_bw(GB/s)": (256.0, 8.0),
    "l0c_read_bw_cube(GB/s)": (256.0, 8.0),
    "l0c_write_bw_cube(GB/s)": (256.0, 8.0),
    "ub_read_bw_mte(GB/s)": (128.0, 1.0),
    "ub_write_bw_mte(GB/s)": (128.0, 1.0),
    "ub_read_bw_mte2(GB/s)": (128.0, 1.0),
    "ub_write_bw_mte2(GB/s)": (128.0, 1.0),
    "ub_read_bw_vector(GB/s)": (128.0, 2.0),
    "ub_write_bw_vector(GB/s)": (128.0, 2.0),
    "ub_read_bw_scalar(GB/s)": (128.0, 1.0),
    "ub_write_bw_scalar(GB/s)": (128.0, 1.0),
    "fixp2ub_write_bw(GB/s)": (256.0, 8.0),
}

PIPE_UTILIZATION: Final = "PipeUtilization"
PIPE_UTILIZATION_EXCT: Final = "PipeUtilizationExct"
PIPELINE_EXECUTE: Final = "PipelineExecuteUtilization"
ARITHMETIC: Final = "ArithmeticUtilization"

#: Metric group -> the metrics its table has (910B and 310B share the exporter's default list).
METRIC_GROUPS: Final = {
    PIPE_UTILIZATION_EXCT: (
        "mac_ratio_extra", "scalar_ratio", "mte1_ratio_extra", "mte2_ratio", "fixpipe_ratio",
        "icache_miss_rate",
    ),
    PIPELINE_EXECUTE: (
        "vec_exe_ratio", "mac_exe_ratio", "scalar_exe_ratio", "mte1_exe_ratio", "mte2_exe_ratio",
        "mte3_exe_ratio", "fixpipe_exe_ratio",
    ),
    ARITHMETIC: (
        "mac_fp16_ratio", "mac_int8_ratio", "vec_fp32_ratio", "vec_fp16_ratio", "vec_int32_ratio",
        "vec_misc_ratio",
    ),
    PIPE_UTILIZATION: (
        "vec_ratio", "mac_ratio", "scalar_ratio", "mte1_ratio", "mte2_ratio", "mte3_ratio",
        "icache_miss_rate",
    ),
    "Memory": (
        "ub_read_bw(GB/s)", "ub_write_bw(GB/s)", "l1_read_bw(GB/s)", "l1_write_bw(GB/s)",
        "l2_read_bw(GB/s)", "l2_write_bw(GB/s)", "main_mem_read_bw(GB/s)", "main_mem_write_bw(GB/s)",
    ),
    "MemoryL0": (
        "l0a_read_bw(GB/s)", "l0a_write_bw(GB/s)", "l0b_read_bw(GB/s)", "l0b_write_bw(GB/s)",
        "l0c_read_bw(GB/s)", "l0c_write_bw(GB/s)", "l0c_read_bw_cube(GB/s)",
        "l0c_write_bw_cube(GB/s)",
    ),
    "ResourceConflictRatio": ("vec_bankgroup_cflt_ratio", "vec_bank_cflt_ratio", "vec_resc_cflt_ratio"),
    "MemoryUB": (
        "ub_read_bw_mte(GB/s)", "ub_write_bw_mte(GB/s)", "ub_read_bw_vector(GB/s)",
        "ub_write_bw_vector(GB/s)", "ub_read_bw_scalar(GB/s)", "ub_write_bw_scalar(GB/s)",
    ),
    "L2Cache": (
        "write_cache_hit", "write_cache_miss_allocate", "r0_read_cache_hit",
        "r0_read_cache_miss_allocate", "r1_read_cache_hit", "r1_read_cache_miss_allocate",
    ),
    "MemoryAccess": (
        "read_main_memory_datas(KB)", "write_main_memory_datas(KB)", "gm_to_l1_datas(KB)",
        "l0c_to_l1_datas(KB)", "l0c_to_gm_datas(KB)", "gm_to_ub_datas(KB)", "ub_to_gm_datas(KB)",
    ),
}  # fmt: skip

#: Events per metric group. The first three are what real runs collected; for the others the
#: collector's choice is not known here: these are the events whose names fill the group's table
#: in the exporter (its ``event2metric`` names), for writing test data. MemoryAccess has none: its
#: names are no event's, so the exporter's table for it never lines up.
GROUP_EVENTS: Final = {
    PIPE_UTILIZATION_EXCT: (0x416, 0x417, 0x9, 0x302, 0xC, 0x303, 0x54, 0x55),
    PIPE_UTILIZATION: (0x8, 0xA, 0x9, 0xB, 0xC, 0xD, 0x54, 0x55),
    PIPELINE_EXECUTE: (0x12C, 0x49, 0x4A, 0x9, 0x302, 0xC, 0xD, 0x303),
    ARITHMETIC: (0x49, 0x4A, 0x4B, 0x4C, 0x4D, 0x4E, 0x4F),
    "Memory": (0x15, 0x16, 0x31, 0x32, 0xF, 0x10, 0x12, 0x13),
    "MemoryL0": (0x1B, 0x1C, 0x21, 0x22, 0x27, 0x29, 0x28, 0x2A),
    "ResourceConflictRatio": (0x64, 0x65, 0x66),
    "MemoryUB": (0x3D, 0x3E, 0x43, 0x44, 0x37, 0x38),
    "L2Cache": (0x500, 0x502, 0x504, 0x506, 0x508, 0x50A),
}

#: ``AicoreMetrics`` number -> the group name ``sample.json`` gives (``ai_core_metrics``; on the
#: 910B the AI Cube side of PipeUtilization is ``PipeUtilizationExct``, as real runs show).
GROUP_OF_METRIC: Final = {
    0: ARITHMETIC, 1: PIPE_UTILIZATION, 2: "Memory", 3: "MemoryL0", 4: "ResourceConflictRatio",
    5: "MemoryUB", 6: "L2Cache", 7: PIPELINE_EXECUTE, 8: "MemoryAccess",
}  # fmt: skip
#: Metric groups each chip collects (910B: no PipelineExecuteUtilization; 310B: no MemoryAccess).
CHIP_METRICS: Final = {CHIP_910B: (0, 1, 2, 3, 4, 5, 6, 8), CHIP_310B: (0, 1, 2, 3, 4, 5, 6, 7)}
_DEFAULT_EVENTS: Final = (
    "0x49,0x4a,0x4b,0x4c,0x4d,0x4e,0x4f",
    "0x8,0xa,0x9,0xb,0xc,0xd,0x54,0x55",
    "0x15,0x16,0x31,0x32,0xf,0x10,0x12,0x13",
    "0x1b,0x1c,0x21,0x22,0x27,0x28,0x29,0x2a",
    "0x64,0x65,0x66",
    "0x10,0x13,0x37,0x38,0x3d,0x3e,0x43,0x44",
    "0x500,0x502,0x504,0x506,0x508,0x50a",
    "0x12c,0x49,0x4a,0x9,0x302,0xc,0xd,0x303",
    "0x32,0x3d,0x3e,0x206,0x20c,0x50c,0x50d,0x50e",
)


def collector_events(chip: str, metric: int) -> tuple[str, str]:
    """``sample.json``'s (``ai_core_profiling_events``, ``aiv_profiling_events``) as CANN's
    collector programs *metric* on *chip*: its platform tables' default list per group, the 310B's
    own MemoryUB list, and on the 910B PipeUtilizationExct's events on the AI Cube side of
    PipeUtilization (real runs' sample.json shows the two pipe lists)."""
    default = _DEFAULT_EVENTS[metric]
    if chip == CHIP_910B and metric == 1:
        return "0x416,0x417,0x9,0x302,0xc,0x303,0x54,0x55", default
    if chip == CHIP_310B and metric == 5:
        memory_ub = "0x37,0x38,0x1a5,0x1a6,0x17f,0x180,0x191"
        return memory_ub, memory_ub
    return default, default


def _collection(chip: str, metric: int) -> tuple[str, str, str, tuple[int, ...], tuple[int, ...]]:
    group = GROUP_OF_METRIC[metric]
    aic = PIPE_UTILIZATION_EXCT if chip == CHIP_910B and metric == 1 else group
    cube, vector = collector_events(chip, metric)
    return chip, aic, group, _codes(cube), _codes(vector)


def _codes(events: str) -> tuple[int, ...]:
    return tuple(int(text, 16) for text in events.split(",")) if events else ()


#: Collections verified by the real exporter on generated data, not on a real run: (chip, AI Core
#: group, AI Vector group, AI Core events, AI Vector events) of every group each chip collects,
#: with the collector's event lists (other lists are not verified). The exporter printed, cell by
#: cell, what this module computes for simulated records of them (tests/real/test_sim_pmu.py).
GENERATED_GROUPS: Final = frozenset(
    _collection(chip, metric) for chip, metrics in CHIP_METRICS.items() for metric in metrics
)

#: Groups that get a ``*_time`` per ratio (``total_time * ratio``).
PIPE_TIME_GROUPS: Final = frozenset(
    {PIPE_UTILIZATION, PIPE_UTILIZATION_EXCT, PIPELINE_EXECUTE, "ScalarRatio"}
)
#: Groups whose table lists each ratio after its time.
_INTERLEAVED: Final = frozenset({*PIPE_TIME_GROUPS, "PipeStallCycle"})
#: Ratios that get a time.
TIMED_RATIOS: Final = frozenset(
    {
        "mac_exe_ratio", "vec_exe_ratio", "vec_ratio", "mte2_ratio", "scalar_exe_ratio",
        "mac_ratio_extra", "mte1_ratio_extra", "mte1_exe_ratio", "fixpipe_exe_ratio",
        "mte2_exe_ratio", "mte3_exe_ratio", "scalar_ratio", "fixpipe_ratio", "mte1_ratio",
        "mte3_ratio", "mac_ratio",
    }
)  # fmt: skip
#: PipelineExecuteUtilization's AI Cube values are taken under these names (its table's own
#: names differ: ``mac_exe_time`` holds ``mac_time``, by position).
_PIPE_EXECUTE_VALUES: Final = (
    "vec_exe_time", "vec_exe_ratio", "mac_time", "mac_ratio_extra", "scalar_time", "scalar_ratio",
    "mte1_time", "mte1_ratio_extra", "mte2_time", "mte2_ratio", "mte3_time", "mte3_ratio",
    "fixpipe_time", "fixpipe_ratio",
)  # fmt: skip
#: Columns never shown on 910B (a side without such a unit).
_UNSHOWN_910B: Final = frozenset(
    {
        "aic_vec_ratio", "aic_vec_time", "aiv_mac_ratio", "aiv_mac_time", "aiv_mte1_ratio",
        "aic_ub_read_bw", "aiv_mte1_time", "aic_ub_write_bw", "aiv_l1_read_bw", "aiv_l1_write_bw",
        "aic_l0c_read_bw", "aic_l0c_write_bw", "aiv_l0a_read_bw", "aiv_l0a_write_bw",
        "aiv_l0b_read_bw", "aiv_l0b_write_bw", "aiv_l0c_read_bw_cube", "aiv_l0c_write_bw_cube",
        "aic_ub_read_bw_mte", "aic_ub_write_bw_mte", "aic_ub_read_bw_vector",
        "aic_ub_write_bw_vector", "aiv_mac_fp16_ratio", "aiv_mac_int8_ratio", "aic_vec_fp32_ratio",
        "aic_vec_fp16_ratio", "aic_vec_int32_ratio", "aic_vec_misc_ratio",
        "aic_vec_fp16_128lane_ratio", "aic_vec_fp16_64lane_ratio", "aic_vec_bankgroup_cflt_ratio",
        "aic_vec_bank_cflt_ratio", "aic_vec_resc_cflt_ratio", "aic_vector_fops", "aiv_cube_fops",
        "aiv_fixpipe_ratio", "aiv_fixpipe_time",
    }
)  # fmt: skip
#: Columns 310B prints as N/A (no such unit on that chip).
_NA_310B: Final = frozenset(
    {
        "vec_ratio", "vec_time", "ub_read_bw", "ub_read_bw(GB/s)", "ub_write_bw", "ub_write_bw(GB/s)",
        "l0c_write_bw", "l0c_write_bw(GB/s)", "l2_write_bw", "l2_write_bw(GB/s)", "vec_fp32_ratio",
        "vec_fp16_ratio", "vec_int32_ratio", "vec_misc_ratio", "vec_bankgroup_cflt_ratio",
        "vec_bank_cflt_ratio", "vec_resc_cflt_ratio",
    }
)  # fmt: skip
_REDUNDANT: Final = ("icache_req_ratio", "vec_fp16_128lane_ratio", "vec_fp16_64lane_ratio")
_UNUSED_TOGETHER: Final = (
    ("ub_read_bw_mte(GB/s)", "ub_write_bw_mte(GB/s)", "l2_write_bw(GB/s)", "main_mem_write_bw(GB/s)"),
    ("ub_read_bw_mte(GB/s)", "ub_write_bw_mte(GB/s)"),
    ("l2_read_bw(GB/s)", "l2_write_bw(GB/s)"),
)
#: GE types whose rows never take PMU values (their queue is left as it is).
_HARDWARE_TYPES: Final = frozenset({"AI_CPU", "DSA", "DVPP"})
#: GE types whose block numbers the exporter uses for the time columns.
BLOCK_TYPES: Final = frozenset({"AI_CORE", "AI_VECTOR_CORE", "COMMUNICATION", "MIX_AIC", "MIX_AIV"})
_MIX_TYPES: Final = frozenset({"MIX_AIC", "MIX_AIV"})


def _removed(names: Iterable[str]) -> set[str]:
    """What the exporter leaves out of a table (and of the values) among *names*."""
    present = set(names)
    out = set(_REDUNDANT)
    for together in _UNUSED_TOGETHER:
        if present >= set(together):
            out.update(together)
    return out


def event_names(events: str) -> list[str]:
    """``sample.json``'s comma-separated event numbers as metric names (unknown: the text)."""
    if not events:
        return []
    out = []
    for text in events.split(","):
        try:
            out.append(EVENT_NAMES.get(int(text, 16), "") or text)
        except ValueError:
            raise DeclinedError(DeclineReason.MALFORMED, f"sample.json PMU event {text!r}") from None
    return out


def group_metrics(group: str) -> list[str] | None:
    """The metric names of *group*'s table after ``total_time`` / ``total_cycles`` (None: a group
    the exporter does not know, whose table it leaves empty)."""
    names = METRIC_GROUPS.get(group)
    if names is None:
        return None
    out: list[str] = []
    if group in _INTERLEAVED:
        for name in names[:-1]:
            if name.endswith("ratio_extra"):
                out.append(name[: -len("ratio_extra")] + "time")
            elif name.endswith("ratio"):
                out.append(name[: -len("ratio")] + "time")
            out.append(name)
        if group == PIPELINE_EXECUTE:
            out.append(names[-1][: -len("ratio")] + "time")
        out.append(names[-1])
    else:
        out = list(names)
    if group == ARITHMETIC:
        if {"mac_fp16_ratio", "mac_int8_ratio"} <= set(out):
            out.append("cube_fops")
        if {"vec_fp16_ratio", "vec_fp32_ratio", "vec_int32_ratio", "vec_misc_ratio"} <= set(out):
            out.append("vector_fops")
    return out


def side_values(
    names: Sequence[str], total_cycles: int, events: Sequence[int], aic_hz: float, chip: str
) -> dict[str, list[float]]:
    """The exporter's per-event values of one side, then its derived metrics (dict order kept:
    the table takes values by position)."""
    values: dict[str, list[float]] = {}
    # Names beyond the 8 counters get no value, counters beyond the names are ignored.
    for name, count in zip(names, events, strict=False):
        value: float
        if total_cycles and name in BANDWIDTHS:
            width, scale = BANDWIDTHS[name]
            value = 1.0 * count * width * scale / (total_cycles / aic_hz) / 8589934592.0 if aic_hz else 0
        elif total_cycles and name in RATIOS:
            value = 1.0 * count / total_cycles
        else:
            value = count
        values.setdefault(name, []).append(value)
    listed = set(names)

    def last(name: str) -> float:
        return values[name][-1]

    if chip == CHIP_310B and "ub_read_bw_vector(GB/s)" in listed:
        values["ub_read_bw_vector(GB/s)"] = [sum(values["ub_read_bw_vector(GB/s)"])]
    if {"vec_fp16_128lane_ratio", "vec_fp16_64lane_ratio"} <= listed:
        values.setdefault("vec_fp16_ratio", []).append(
            last("vec_fp16_128lane_ratio") + last("vec_fp16_64lane_ratio")
        )
    if {"mac_fp16_ratio", "mac_int8_ratio"} <= listed:
        fops = (
            last("mac_fp16_ratio") * total_cycles * 16 * 16 * 16 * 2
            + last("mac_int8_ratio") * total_cycles * 16 * 16 * 32 * 2
        )
        values.setdefault("cube_fops", []).append(fops)
    if {"mac_fp16_ratio", "mac_int8_ratio", "fixpipe_ratio"} <= listed:
        mac = last("mac_fp16_ratio") + last("mac_int8_ratio")
        for gone in ("cube_fops", "mac_fp16_ratio", "mac_int8_ratio"):
            del values[gone]
        values.setdefault("mac_ratio_extra", []).append(mac)
    if {"mac_fp_ratio", "mac_int_ratio"} <= listed:
        mac = last("mac_fp_ratio") + last("mac_int_ratio")
        del values["mac_fp_ratio"], values["mac_int_ratio"]
        values.setdefault("mac_ratio_extra", []).append(mac)
    iq = (
        "mte1_iq_full_ratio",
        "mte2_iq_full_ratio",
        "mte3_iq_full_ratio",
        "cube_iq_full_ratio",
        "vec_iq_full_ratio",
    )
    if set(iq) <= listed:
        total = last(iq[0]) + last(iq[1]) + last(iq[2]) + last(iq[3]) + last(iq[4])
        values.setdefault("iq_full_ratio", []).append(total)
    if {"icache_miss_rate", "icache_req_ratio"} <= listed and last("icache_req_ratio") != 0:
        rate = last("icache_miss_rate") / last("icache_req_ratio")
        values["icache_miss_rate"][-1] = rate
    memory = ("main_mem_read_bw(GB/s)", "main_mem_write_bw(GB/s)", "mte2_ratio", "mte3_ratio")
    if set(memory) <= listed and last("mte2_ratio") != 0 and last("mte3_ratio") != 0:
        read = last(memory[0]) / last("mte2_ratio")
        del values["mte2_ratio"]
        values[memory[0]][-1] = read
        write = last(memory[1]) / last("mte3_ratio")
        del values["mte3_ratio"]
        values[memory[1]][-1] = write
    flow = ("control_flow_prediction_ratio", "control_flow_mis_prediction_rate")
    if set(flow) <= listed and last(flow[0]) != 0:
        values[flow[1]][-1] = last(flow[1]) / last(flow[0])
    lanes = (
        "vec_fp16_128lane_ratio",
        "vec_fp16_64lane_ratio",
        "vec_fp32_ratio",
        "vec_int32_ratio",
        "vec_misc_ratio",
    )
    if set(lanes) <= listed:
        fops = (
            last(lanes[0]) * total_cycles * 128
            + last(lanes[1]) * total_cycles * 64
            + last(lanes[2]) * total_cycles * 64.0
            + last(lanes[3]) * total_cycles * 64.0
            + last(lanes[4]) * total_cycles * 32.0
        )
        values.setdefault("vector_fops", []).append(fops)
    return values


def with_pipe_times(values: dict[str, list[float]], total_time: float, group: str) -> dict[str, list[float]]:
    """A ``*_time`` after every timed ratio (pipe groups only; *group* is ``ai_core_metrics``
    for both sides, as the exporter passes it)."""
    if group not in PIPE_TIME_GROUPS:
        return values
    out: dict[str, list[float]] = {}
    for name, value in values.items():
        out[name] = value
        timed = _TIME_OF.get(name)
        if timed is not None:
            out[timed] = [total_time * value[0]]
    return out


#: Each timed ratio's time column (``vec_ratio`` -> ``vec_time``, ``mac_ratio_extra`` -> ``mac_time``).
_TIME_OF: Final = {
    name: name[: -len("ratio")] + "time" if name.endswith("ratio") else name[: -len("ratio_extra")] + "time"
    for name in TIMED_RATIOS
    if name.endswith(("ratio", "ratio_extra"))
}


def total_time(total_cycles: int, hz: int, block_num: int, cores: int) -> float:
    """``total_time`` in µs, rounded to 2 decimals (0 without a block number, cores or clock)."""
    if not (block_num and cores and hz):
        return 0
    return round(total_cycles * 1000 * 1000.0 / hz / block_num * ((block_num + cores - 1) // cores), 2)


def _picked(values: dict[str, list[float]], names: Sequence[str]) -> list[float]:
    """The values the table takes, in its names' order (left-out names dropped)."""
    chosen = {name: values[name] for name in names if name in values}
    for name in _removed(chosen):
        chosen.pop(name, None)
    return [v for value in chosen.values() for v in value]


# -- a device's table ---------------------------------------------------------------------------


def _setting(sample: Mapping[str, object], key: str) -> str:
    value = sample.get(key)
    return value if isinstance(value, str) else ""


def _number(info: Mapping[str, object], key: str, what: str) -> float:
    device = info.get("DeviceInfo")
    entry = device[0] if isinstance(device, list) and device and isinstance(device[0], dict) else {}
    try:
        value = float(str(entry.get(key, "")))
    except ValueError:
        raise DeclinedError(DeclineReason.MALFORMED, f"{what}: info.json {key} is not a number") from None
    if not math.isfinite(value):  # (int() of it raises; a clock of inf Hz divides to nan)
        raise DeclinedError(DeclineReason.MALFORMED, f"{what}: info.json {key} is not a finite number")
    return value


Value = float | int | str


@dataclasses.dataclass(frozen=True, slots=True)
class PmuLayout:
    """How one device's PMU records become op_summary cells (from its sample.json and info.json).

    :ivar chip: ``platform_version`` (``"5"`` 910B, ``"7"`` 310B)
    :ivar sides: per side, (prefix, column names, value names, event names)
    :ivar columns: the table columns shown, in order (no prefix change, ``_extra`` kept)
    :ivar header: the printed op_summary headers of the PMU cells, in order
    """

    chip: str
    aic_metrics: str
    aiv_metrics: str
    sides: tuple[tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]], ...]
    aic_hz: float
    ai_core_num: int
    aiv_num: int
    aic_mhz: float
    shown: tuple[int, ...]  # indexes into the table row of the shown columns
    columns: tuple[str, ...]
    header: tuple[str, ...]
    memory_bound: tuple[int, int, int] | None  # (vec, mac, mte2) indexes into shown columns
    cube: tuple[int, int] | None  # (mac ratio, total cycles) indexes into shown columns
    na_columns: frozenset[int]
    #: the collection was verified by the real exporter (:func:`verified_collection`)
    verified: bool = False
    #: the device's clock rows: each record's total time is at the clock in effect at its end
    clocks: ClockTable = dataclasses.field(default_factory=ClockTable, compare=False)
    #: the zero side of a 910B row, by (side, type of its total time: 0 or 0.0)
    _zero: dict[tuple[int, type], list[float]] = dataclasses.field(default_factory=dict, compare=False)

    @classmethod
    def of(
        cls, chip: str, sample: Mapping[str, object], info: Mapping[str, object], where: str = ""
    ) -> PmuLayout:
        """The layout for *chip* and a device's ``sample.json`` / ``info.json``.

        :raises DeclinedError: a collection whose PMU export the exporter would not write this way
            (sample-based, custom events, an unknown group, values not lining up with columns)
        """
        if chip not in (CHIP_910B, CHIP_310B):
            raise DeclinedError(DeclineReason.UNKNOWN_PLATFORM, f"{where}PMU counters of platform {chip!r}")
        for mode in ("ai_core_profiling_mode", "aiv_profiling_mode"):
            if _setting(sample, mode) == "sample-based":
                raise NoPmuColumns(DeclineReason.UNSUPPORTED, f"{where}sample-based PMU ({mode})")
        aic_metrics = _setting(sample, "ai_core_metrics")
        aiv_metrics = _setting(sample, "aiv_metrics")
        for metrics in (aic_metrics, aiv_metrics):
            if metrics.startswith("Custom"):
                raise DeclinedError(DeclineReason.UNSUPPORTED, f"{where}custom PMU events ({metrics})")
        device = info.get("DeviceInfo")
        entry = device[0] if isinstance(device, list) and device and isinstance(device[0], dict) else {}
        mhz = rated_aic_mhz(entry)  # (the one reader of it: RunInfo.core_mhz is the same)
        if mhz is None:
            value = entry.get("aic_frequency")
            raise DeclinedError(
                DeclineReason.MALFORMED, f"{where}info.json aic_frequency is not a positive number: {value!r}"
            )
        aic_hz = mhz * 1000000.0
        cores = int(_number(info, "ai_core_num", where))
        vectors = int(_number(info, "aiv_num", where))
        aic_events = event_names(_setting(sample, "ai_core_profiling_events"))
        sides: list[tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = []
        wanted: tuple[tuple[str, str, list[str]], ...]
        if chip == CHIP_910B:
            wanted = (
                ("aic", aic_metrics, aic_events),
                ("aiv", aiv_metrics, event_names(_setting(sample, "aiv_profiling_events"))),
            )
        else:
            wanted = (("", aic_metrics, aic_events),)
        for prefix, metrics, events in wanted:
            names = group_metrics(metrics)
            if names is None:
                raise NoPmuColumns(DeclineReason.UNSUPPORTED, f"{where}PMU metric group {metrics!r}")
            value_names = list(names)
            if prefix in ("aic", "") and aic_metrics == PIPELINE_EXECUTE:
                value_names = list(_PIPE_EXECUTE_VALUES)
            gone = _removed(["total_time(ms)", "total_cycles", *names])
            table = [n for n in ["total_time(ms)", "total_cycles", *names] if n not in gone]
            columns = tuple(
                (f"{prefix}_" if prefix else "") + n.replace("(ms)", "").replace("(GB/s)", "") for n in table
            )
            sides.append((prefix, columns, tuple(value_names), tuple(events)))
        layout = cls._shown(
            chip, aic_metrics, aiv_metrics, tuple(sides), aic_hz, cores, vectors, aic_hz / 1e6
        )
        layout._check(where)
        return dataclasses.replace(layout, verified=verified_collection(chip, sample))

    @classmethod
    def _shown(
        cls,
        chip: str,
        aic_metrics: str,
        aiv_metrics: str,
        sides: tuple[tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]], ...],
        aic_hz: float,
        cores: int,
        vectors: int,
        aic_mhz: float,
    ) -> PmuLayout:
        table = [c for _, columns, _, _ in sides for c in columns]
        hidden = _UNSHOWN_910B if chip == CHIP_910B else frozenset()
        shown = tuple(i for i, c in enumerate(table) if c not in hidden)
        columns = tuple(table[i] for i in shown)
        names = [c.replace("_extra", "") for c in columns]
        memory_bound = None
        for trio in (
            ("vec_ratio", "mac_ratio", "mte2_ratio"),
            ("vec_exe_ratio", "mac_exe_ratio", "mte2_exe_ratio"),
        ):
            if all(n in names for n in trio):
                memory_bound = (names.index(trio[0]), names.index(trio[1]), names.index(trio[2]))
                break
        cube = None
        mac = next((n for n in ("mac_ratio", "aic_mac_ratio") if n in names), None)
        cycles = next((n for n in ("total_cycles", "aic_total_cycles") if n in names), None)
        if mac is not None and cycles is not None:
            cube = (names.index(mac), names.index(cycles))
        header = list(names)
        if memory_bound is not None:
            header.append("memory_bound")
        if cube is not None:
            header.append("cube_utilization(%)")
        na = frozenset(i for i, n in enumerate(header) if chip == CHIP_310B and n in _NA_310B)
        return cls(
            chip,
            aic_metrics,
            aiv_metrics,
            sides,
            aic_hz,
            cores,
            vectors,
            aic_mhz,
            shown,
            columns,
            tuple(_with_units(header)),
            memory_bound,
            cube,
            na,
        )

    def _check(self, where: str) -> None:
        """The values each side computes line up with its columns (else the exporter's insert
        fails or shifts values between columns)."""
        zero = [0] * EVENTS_PER_RECORD
        for prefix, columns, value_names, events in self.sides:
            values = _picked(
                with_pipe_times(side_values(events, 1, zero, self.aic_hz, self.chip), 1.0, self.aic_metrics),
                value_names,
            )
            if len(values) != len(columns) - 2:
                label = prefix or "ai core"
                raise NoPmuColumns(
                    DeclineReason.UNSUPPORTED,
                    f"{where}PMU group {self.aic_metrics!r}/{self.aiv_metrics!r}: {len(values)} {label} "
                    f"values for {len(columns) - 2} columns (the exporter's insert would not line up)",
                )

    # -- rows --------------------------------------------------------------------------------
    def _side(
        self, index: int, cycles: int, events: Sequence[int], time: float, record: PmuRecord
    ) -> list[float]:
        _, columns, value_names, names = self.sides[index]
        values = _picked(
            with_pipe_times(
                side_values(names, cycles, events, self.aic_hz, self.chip), time, self.aic_metrics
            ),
            value_names,
        )
        if len(values) != len(columns) - 2:
            raise _misaligned(record)
        return [time, cycles, *values]

    def record_hz(self, record: PmuRecord) -> int:
        """The AI Core clock (Hz) the exporter times *record* at: the clock row in effect at the
        record's end (``FftsPmuCalculator._get_current_freq``), info.json's before the first row
        or without usable rows (none, or one at 0 MHz). Counts and bandwidths keep info.json's."""
        if self.clocks.usable:
            return int(self.clocks.mhz_at(record.end) * 1000000)
        return int(self.aic_hz)

    def table_row(self, record: PmuRecord, block_num: int, mix_block_num: int) -> list[float]:
        """The metric-summary row the exporter inserts for *record* (the table's columns)."""
        hz = self.record_hz(record)
        if self.chip == CHIP_910B:
            # The side the record is not for gets zero counts (the same values for every record).
            own = 0 if record.is_aic else 1
            block = mix_block_num if (record.is_mix_aiv if own == 0 else record.is_mix_aic) else block_num
            cores = self.ai_core_num if own == 0 else self.aiv_num
            time = total_time(record.total_cycles, hz, block, cores)
            mine = self._side(own, record.total_cycles, record.events, time, record)
            other_block = (
                mix_block_num if (record.is_mix_aic if own == 0 else record.is_mix_aiv) else block_num
            )
            zero_time = total_time(0, hz, other_block, self.aiv_num if own == 0 else self.ai_core_num)
            key = (1 - own, type(zero_time))
            other = self._zero.get(key)
            if other is None:
                other = self._zero[key] = self._side(1 - own, 0, [0] * EVENTS_PER_RECORD, zero_time, record)
            return [*mine, *other] if own == 0 else [*other, *mine]
        block = mix_block_num if record.is_mix_aiv else block_num
        time = total_time(record.total_cycles, hz, block, self.ai_core_num)
        return self._side(0, record.total_cycles, record.events, time, record)

    def cells(self, row: Sequence[float] | None, duration_ns: float, rounder: Rounder) -> list[Value]:
        """The printed op_summary cells (as values: float, int or ``N/A``) of a metric row joined
        to an op_summary row of *duration_ns* (None: no metric row, every cell ``N/A``)."""
        return self.cells_of([(row, duration_ns)], rounder)[0]

    def cells_of(
        self, rows: Sequence[tuple[Sequence[float] | None, float]], rounder: Rounder
    ) -> list[list[Value]]:
        """:meth:`cells` of many (metric row, duration) pairs, rounded in few SQLite calls."""
        found = [[row[i] for i in self.shown] for row, _ in rows if row is not None]
        rounded_rows = rounder.round_many(found, self.columns)
        empty(found)  # (big lists are freed in steps: see ._chunked)
        rounded = iter(rounded_rows)
        out: list[list[Value]] = []
        for row, duration_ns in rows:
            if row is None:
                out.append([NA] * len(self.header))
            else:
                out.append(self._derived(next(rounded), duration_ns))
        empty(rounded_rows)
        return out

    def _derived(self, values: list[Value], duration_ns: float) -> list[Value]:
        if self.memory_bound is not None:
            vec, mac, mte2 = (values[i] for i in self.memory_bound)
            assert not isinstance(vec, str) and not isinstance(mac, str) and not isinstance(mte2, str)
            top = max(vec, mac)
            values.append(round(float(mte2 / top), 3) if not _is_zero(top) else 0)
        if self.cube is not None:
            ratio, cycles = values[self.cube[0]], values[self.cube[1]]
            assert not isinstance(ratio, str) and not isinstance(cycles, str)
            if _is_zero(min(ratio, cycles, duration_ns)):
                values.append(0)
            else:
                usage = cycles / (self.aic_mhz * self.ai_core_num * duration_ns) * 1000.0
                values.append(round(usage * 100, 3))
        for i in self.na_columns:
            values[i] = NA
        return values


class MisalignedRow(NoPmuColumns):
    """One record's values do not line up with the table (the exporter's insert would fail for
    this run only: not verified on any run)."""


def _misaligned(record: PmuRecord) -> DeclinedError:
    # Some derived metrics replace others only for some values (main memory bandwidths).
    return MisalignedRow(
        DeclineReason.UNSUPPORTED,
        f"PMU values of stream {record.stream_id} task {record.task_id} do not line up with the "
        "table's columns",
    )


def _is_zero(value: float) -> bool:
    if isinstance(value, int):
        return value == 0
    return abs(value) < 1e-17


def _with_units(names: Iterable[str]) -> Iterable[str]:
    for name in names:
        if name in ("total_time", "aic_total_time"):
            name = "aicore_time"
        if name == "aiv_total_time":
            name = "aiv_time"
        if "time" in name:
            name += "(us)"
        if "bw" in name and "(GB/s)" not in name:
            name += "(GB/s)"
        yield name


_INT64: Final = 1 << 63


class Rounder:
    """SQLite's ``round(x, 3)``, computed by SQLite (the exporter rounds in its SQL), and the
    NUMERIC column affinity for the columns it does not round (integral reals become integers)."""

    def __init__(self) -> None:
        self._conn = sqlite3.connect(":memory:")
        self._queries: dict[int, str] = {}

    def close(self) -> None:
        self._conn.close()

    def round(self, values: Sequence[float], columns: Sequence[str]) -> list[Value]:
        return self.round_many([values], columns)[0]

    def round_many(self, rows: Sequence[Sequence[float]], columns: Sequence[str]) -> list[list[Value]]:
        """Every row rounded: one ``SELECT ... FROM (VALUES ...)`` per chunk of rows."""
        picked = [i for i, c in enumerate(columns) if "cycles" not in c]
        kept = [i for i, c in enumerate(columns) if "cycles" in c]
        out: list[list[Value]] = [list(row) for row in rows]
        for target in out:
            for i in kept:
                target[i] = _numeric(target[i])  # type: ignore[arg-type]
        if not picked or not rows:
            return out
        chunk = max(1, min(500, 30000 // len(picked)))
        for begin in range(0, len(rows), chunk):
            part = rows[begin : begin + chunk]
            query = self._queries.get(len(part))
            if query is None:
                one = "(" + ",".join("?" * len(picked)) + ")"
                rounded = ",".join(f"round(column{i + 1}, 3)" for i in range(len(picked)))
                query = self._queries[len(part)] = (
                    f"SELECT {rounded} FROM (VALUES {','.join([one] * len(part))})"
                )
            params = [row[i] for row in part for i in picked]
            for target, values in zip(
                out[begin : begin + chunk], self._conn.execute(query, params), strict=True
            ):
                for i, value in zip(picked, values, strict=True):
                    target[i] = value
        return out


def _numeric(value: float) -> Value:
    if isinstance(value, float) and value.is_integer() and -_INT64 <= value < _INT64:
        return int(value)
    return value


def pmu_cells(
    chip: str,
    sample: Mapping[str, object],
    info: Mapping[str, object],
    record: PmuRecord,
    *,
    block_num: int = 0,
    mix_block_num: int = 0,
    duration_ns: float = 0.0,
) -> dict[str, Value]:
    """One task's op_summary PMU cells (printed header -> value) as the real exporter computes
    them from its context *record*, for a device of *chip* with this ``sample.json`` /
    ``info.json`` (any metric group the exporter maps, verified or not: see ``PmuLayout.verified``).

    :raises DeclinedError: a collection the exporter would not export this way
    """
    layout = PmuLayout.of(chip, sample, info)
    rounder = Rounder()
    try:
        cells = layout.cells(layout.table_row(record, block_num, mix_block_num), duration_ns, rounder)
    finally:
        rounder.close()
    return dict(zip(layout.header, cells, strict=True))


# -- the join -----------------------------------------------------------------------------------


class JoinedRow(NamedTuple):
    """An op_summary row before the collection-start filter (the join's order)."""

    stream_id: int
    task_id: int
    batch_id: int
    context_id: int
    ge_type: str
    duration_ns: float
    kept: bool


def block_numbers(
    ge: Iterable[tuple[int, int, int, str, int, int]], where: str
) -> dict[tuple[int, int, int], tuple[int, int]]:
    """(stream, task, context) -> (block_num, mix_block_num) from GE tasks ``(stream, task,
    context, type, block, mix)`` of the types the exporter uses (MIX types give the mix number).

    :raises DeclinedError: one key with several block numbers (the exporter takes them in turn)
    """
    out: dict[tuple[int, int, int], tuple[int, int]] = {}
    for stream, task, context, ttype, block, mix in ge:
        if ttype not in BLOCK_TYPES:
            continue
        value = (block, mix if ttype in _MIX_TYPES else 0)
        key = (stream, task, context)
        if out.setdefault(key, value) != value:
            raise DeclinedError(
                DeclineReason.UNSUPPORTED,
                f"{where}: stream {stream} task {task} has several block numbers (PMU time columns)",
            )
    return out


def join_rows(
    layout: PmuLayout,
    records: PmuRecords,
    blocks: Mapping[tuple[int, int, int], tuple[int, int]],
    joined: Sequence[JoinedRow],
    *,
    batch_ids: bool,
    where: str,
) -> list[list[Value]]:
    """The PMU cells of every kept op_summary row, in order.

    *batch_ids*: the exporter matches on batch ids too (910B from driver 0x072211; the accepted
    runs have batch id 0 on every task), else on (task, stream, context) only.

    :raises DeclinedError: a joined MIX kernel with block records, or repeated keys
    """
    queues: dict[tuple[int, int, int, int], deque[tuple[PmuRecord, list[float]]]] = {}
    # 310B's table has no context ids: every record stands for the whole task.
    contexts = layout.chip == CHIP_910B
    for record in records.context:
        key = (
            0 if batch_ids else -1,
            record.stream_id,
            record.task_id,
            record.context_id if contexts else INVALID_CONTEXT,
        )
        if key in queues:
            # Their order in the exporter's table follows its batch-id pass: not modelled.
            raise DeclinedError(
                DeclineReason.AMBIGUOUS,
                f"{where}: two PMU records of stream {record.stream_id} task {record.task_id}",
            )
        block, mix = blocks.get((record.stream_id, record.task_id, record.context_id), (0, 0))
        queues[key] = deque([(record, layout.table_row(record, block, mix))])
    kept: list[tuple[list[float] | None, float]] = []
    for row in joined:
        key = (row.batch_id if batch_ids else -1, row.stream_id, row.task_id, row.context_id)
        queue = queues.get(key)
        found: list[float] | None = None
        if queue and row.ge_type not in _HARDWARE_TYPES:
            record, found = queue.popleft()
            if (
                record.ffts_type == FFTS_PLUS
                and (record.stream_id, record.task_id, record.context_id) in records.block_keys
            ):
                raise DeclinedError(
                    DeclineReason.UNSUPPORTED,
                    f"{where}: PMU counters of a MIX kernel with block records (stream {row.stream_id} "
                    f"task {row.task_id}; parser only)",
                )
        if row.kept:
            kept.append((found, row.duration_ns))
    empty(queues)
    rounder = Rounder()
    try:
        return layout.cells_of(kept, rounder)
    finally:
        rounder.close()
        empty(kept)


# -- a device's cells and a run's counters --------------------------------------------------------


#: A device's PMU part of op_summary: the printed headers and each kept row's cells.
PmuTable = tuple[tuple[str, ...], list[list[Value]]]


def device_cells(
    folder: str,
    ffts: RawData | None,
    sample: Callable[[], Mapping[str, object]],
    info: Mapping[str, object],
    unpack: Callable[[int, int], tuple[int, int]],
    *,
    rows: int,
    joined: Callable[[], list[JoinedRow]],
    ge: Callable[[], Iterable[tuple[int, int, int, str, int, int]]],
    flips: Iterable[tuple[int, int]],
    all_export: bool,
    verified_only: bool,
    clocks: ClockTable | None = None,
) -> PmuTable:
    """One device's PMU cells for its *rows* op_summary rows (no context record: no column).

    *ffts*: the ``ffts_profile`` bytes (None: no such file); *sample* / *joined* / *ge*: called
    when needed (``sample.json``, the join before the start filter as a new list, which is
    emptied after use, GE tasks as ``(stream, task, context, type, block, mix)``); *flips*:
    ``(stream, counter)`` of the task-id flips.
    *verified_only*: decline collections not verified (on real runs or on generated data, see
    :func:`verified_collection`; the raw reader), else compute every group the exporter maps and
    give no column where its code writes none (a CSV writer).

    *clocks*: the device's clock rows (:class:`ClockTable`; each record's total time at the
    clock of its end).

    :raises DeclinedError: what is not modelled (with *verified_only*: not verified)
    """
    no_cells: PmuTable = ((), [[] for _ in range(rows)])
    if ffts is None:
        if verified_only and rows and not pmu_off(sample()):
            # PMU collection on but no records: not seen (real runs with it have records).
            raise DeclinedError(
                DeclineReason.UNSUPPORTED,
                f"{folder} has no ffts_profile file although sample.json has PMU collection on: "
                "op_summary without PMU counters of such a run is not verified",
            )
        return no_cells
    records = pmu_records(ffts, unpack)
    if not records.context:
        return no_cells
    chip = str(info.get("platform_version", ""))
    try:
        layout = PmuLayout.of(chip, sample(), info, f"{folder}: ")
    except NoPmuColumns:
        if verified_only and not verified_collection(chip, sample()):
            raise
        # What the exporter does: verified for a group whose table never lines up (MemoryAccess
        # on the 910B), from its code for the others (a CSV writer's export).
        return no_cells
    if clocks is not None:
        layout = dataclasses.replace(layout, clocks=clocks)
    if verified_only and not layout.verified:
        raise DeclinedError(
            DeclineReason.UNSUPPORTED,
            f"{folder}: PMU metric group {layout.aic_metrics!r} (AI Core) / {layout.aiv_metrics!r} "
            "(AI Vector) with these events is not verified (not on real runs, not on generated data)",
        )
    if all_export:
        first: dict[int, int] = {}
        for stream, counter in flips:
            first[stream] = min(first.get(stream, counter), counter)
        for record in records.context:
            limit = first.get(record.stream_id)
            if limit is not None and record.end >= limit:
                raise DeclinedError(
                    DeclineReason.UNSUPPORTED,
                    f"{folder}: PMU records after a task-id flip of stream {record.stream_id}",
                )
    joined_rows = joined()
    blocks = block_numbers(ge(), folder)
    try:
        cells = join_rows(layout, records, blocks, joined_rows, batch_ids=all_export, where=folder)
    except NoPmuColumns:
        if verified_only:
            raise
        return no_cells
    finally:
        # the decode's own lists (see *joined*), freed in steps
        empty(joined_rows, blocks, records.context)
    return layout.header, cells


def run_counters(tables: Sequence[PmuTable]) -> TaskCounters:
    """The devices' cells (in the merged CSV's order) as the CSV path reads them (``N/A``: None).

    :raises DeclinedError: devices with different PMU columns (the merge was not modelled)
    """
    headers = {header for header, _ in tables}
    if len(headers) > 1:
        raise DeclinedError(DeclineReason.UNSUPPORTED, "devices with different PMU columns")
    header = headers.pop() if headers else ()
    length = sum(len(cells) for _, cells in tables)
    if header and any(len(row) != len(header) for _, cells in tables for row in cells):
        raise ValueError("PMU rows of different lengths")
    columns: dict[str, list[float | None]] = {name: [] for name in header}
    if length:
        # Column by column in loops (not zip(*rows): one call over every row at once).
        for index, column in enumerate(columns.values()):
            column.extend(
                None if isinstance(value, str) else value
                for _, cells in tables
                for row in cells
                for value in (row[index],)
            )
    counters = TaskCounters(columns, length=length)
    empty(*columns.values())  # (freed in steps: see ._chunked)
    return counters
