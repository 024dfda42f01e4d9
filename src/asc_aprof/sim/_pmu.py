"""PMU counters as the chip records them: what ``sim.launch(counters=...)`` encodes into the raw
``ffts_profile`` records the simulated library writes.

Theory of operation. On a real chip every AI Core metric group programs up to 8 hardware events
per core type (``sample.json``'s ``ai_core_profiling_events`` / ``aiv_profiling_events``); each
kernel leaves one context PMU record with its core's total cycles and the 8 event counts, and
the exporter derives the op_summary cells from them. This module knows, per chip, group and core
side, which printed column comes from which events and by which formula, and inverts it:

- a ratio is ``events / total_cycles``, so the event is the ratio times the cycles;
- a bandwidth (GB/s) is ``events * bytes * clock (Hz) / total_cycles / 2**33``;
- an L2 cache count is the event count itself, ``icache_miss_rate`` misses over requests;
- ``*_total_cycles`` is the cycle word, ``aicore_time(us)`` / ``aiv_time(us)`` is it over the
  core clock and the blocks (``cycles / MHz / blocks * ceil(blocks / cores)``, 2 decimals, and
  0 at task time level 0, where the exporter has no block count).

Every other printed column (``*_time(us)`` of a pipe, ``memory_bound``, ``cube_utilization(%)``,
``*_fops``) is derived from those, and cells the exporter prints ``N/A`` come from no event: a
launch cannot set them (:class:`~asc_aprof.UsageError`). Cells a launch does not set get
plausible values: the core busy for 60-95 % of the kernel's duration, ratios below 0.4.

The result is a compact text the C library turns into counts once it knows each kernel's
(jittered) duration: ``C;E0;...;E7``, ``C`` the cycles as ``s<share of the duration>`` or
``c<count>``, each event ``r<count per cycle>`` or ``a<count>``. Events and formulas follow the
real exporter (Ascend/msprof ``analysis/`` at 9ba1ac7be: ``msconfig/ai_core_config.py``'s
event names, ``common_func/constant.py``'s formulas, ``mscalculate/calculate_ai_core_data.py``'s
sums), and the printed columns are the ones it writes for simulated runs of each group and chip
(tests/real/test_sim_pmu.py).
"""

from __future__ import annotations

import math
import random
import zlib
from collections.abc import Mapping
from typing import Final, NamedTuple

from .._model._errors import UsageError
from .._plans._raw._pmu import BANDWIDTHS, CHIP_310B, CHIP_910B, CHIP_METRICS, EVENT_NAMES, collector_events

#: Groups each chip collects (the reader's table).
_GROUPS: Final = {"910B": CHIP_METRICS[CHIP_910B], "310B": CHIP_METRICS[CHIP_310B]}
_PLATFORM: Final = {"910B": CHIP_910B, "310B": CHIP_310B}


def events(chip: str, metric: int) -> tuple[str, str]:
    """``sample.json``'s (``ai_core_profiling_events``, ``aiv_profiling_events``) for *metric*:
    the collector's lists, as the raw reader knows them (libmsprofiler_sim.c writes the same)."""
    return collector_events(_PLATFORM[chip], metric)


#: The PMU columns the real exporter prints for simulated runs of each chip and group, in order
#: (PipeUtilization on the 910B and PipelineExecuteUtilization on the 310B as real runs print
#: them). A group missing here prints no PMU column (MemoryAccess on the 910B).
REAL_COLUMNS: Final[Mapping[str, Mapping[int, tuple[str, ...]]]] = {
    "910B": {
        0: (
            "aicore_time(us)",
            "aic_total_cycles",
            "aic_mac_fp16_ratio",
            "aic_mac_int8_ratio",
            "aic_cube_fops",
            "aiv_time(us)",
            "aiv_total_cycles",
            "aiv_vec_fp32_ratio",
            "aiv_vec_fp16_ratio",
            "aiv_vec_int32_ratio",
            "aiv_vec_misc_ratio",
            "aiv_vector_fops",
        ),
        1: (
            "aicore_time(us)",
            "aic_total_cycles",
            "aic_mac_time(us)",
            "aic_mac_ratio",
            "aic_scalar_time(us)",
            "aic_scalar_ratio",
            "aic_mte1_time(us)",
            "aic_mte1_ratio",
            "aic_mte2_time(us)",
            "aic_mte2_ratio",
            "aic_fixpipe_time(us)",
            "aic_fixpipe_ratio",
            "aic_icache_miss_rate",
            "aiv_time(us)",
            "aiv_total_cycles",
            "aiv_vec_time(us)",
            "aiv_vec_ratio",
            "aiv_scalar_time(us)",
            "aiv_scalar_ratio",
            "aiv_mte2_time(us)",
            "aiv_mte2_ratio",
            "aiv_mte3_time(us)",
            "aiv_mte3_ratio",
            "aiv_icache_miss_rate",
            "cube_utilization(%)",
        ),
        2: (
            "aicore_time(us)",
            "aic_total_cycles",
            "aic_l1_read_bw(GB/s)",
            "aic_l1_write_bw(GB/s)",
            "aic_main_mem_read_bw(GB/s)",
            "aic_main_mem_write_bw(GB/s)",
            "aiv_time(us)",
            "aiv_total_cycles",
            "aiv_ub_read_bw(GB/s)",
            "aiv_ub_write_bw(GB/s)",
            "aiv_main_mem_read_bw(GB/s)",
            "aiv_main_mem_write_bw(GB/s)",
        ),
        3: (
            "aicore_time(us)",
            "aic_total_cycles",
            "aic_l0a_read_bw(GB/s)",
            "aic_l0a_write_bw(GB/s)",
            "aic_l0b_read_bw(GB/s)",
            "aic_l0b_write_bw(GB/s)",
            "aic_l0c_read_bw_cube(GB/s)",
            "aic_l0c_write_bw_cube(GB/s)",
            "aiv_time(us)",
            "aiv_total_cycles",
            "aiv_l0c_read_bw(GB/s)",
            "aiv_l0c_write_bw(GB/s)",
        ),
        4: (
            "aicore_time(us)",
            "aic_total_cycles",
            "aiv_time(us)",
            "aiv_total_cycles",
            "aiv_vec_bankgroup_cflt_ratio",
            "aiv_vec_bank_cflt_ratio",
            "aiv_vec_resc_cflt_ratio",
        ),
        5: (
            "aicore_time(us)",
            "aic_total_cycles",
            "aic_ub_read_bw_scalar(GB/s)",
            "aic_ub_write_bw_scalar(GB/s)",
            "aiv_time(us)",
            "aiv_total_cycles",
            "aiv_ub_read_bw_vector(GB/s)",
            "aiv_ub_write_bw_vector(GB/s)",
            "aiv_ub_read_bw_scalar(GB/s)",
            "aiv_ub_write_bw_scalar(GB/s)",
        ),
        6: (
            "aicore_time(us)",
            "aic_total_cycles",
            "aic_write_cache_hit",
            "aic_write_cache_miss_allocate",
            "aic_r0_read_cache_hit",
            "aic_r0_read_cache_miss_allocate",
            "aic_r1_read_cache_hit",
            "aic_r1_read_cache_miss_allocate",
            "aiv_time(us)",
            "aiv_total_cycles",
            "aiv_write_cache_hit",
            "aiv_write_cache_miss_allocate",
            "aiv_r0_read_cache_hit",
            "aiv_r0_read_cache_miss_allocate",
            "aiv_r1_read_cache_hit",
            "aiv_r1_read_cache_miss_allocate",
        ),
    },
    "310B": {
        0: (
            "aicore_time(us)",
            "total_cycles",
            "mac_fp16_ratio",
            "mac_int8_ratio",
            "vec_fp32_ratio",
            "vec_fp16_ratio",
            "vec_int32_ratio",
            "vec_misc_ratio",
            "cube_fops",
            "vector_fops",
        ),
        1: (
            "aicore_time(us)",
            "total_cycles",
            "vec_time(us)",
            "vec_ratio",
            "mac_time(us)",
            "mac_ratio",
            "scalar_time(us)",
            "scalar_ratio",
            "mte1_time(us)",
            "mte1_ratio",
            "mte2_time(us)",
            "mte2_ratio",
            "mte3_time(us)",
            "mte3_ratio",
            "icache_miss_rate",
            "memory_bound",
            "cube_utilization(%)",
        ),
        2: (
            "aicore_time(us)",
            "total_cycles",
            "ub_read_bw(GB/s)",
            "ub_write_bw(GB/s)",
            "l1_read_bw(GB/s)",
            "l1_write_bw(GB/s)",
            "main_mem_read_bw(GB/s)",
            "main_mem_write_bw(GB/s)",
        ),
        3: (
            "aicore_time(us)",
            "total_cycles",
            "l0a_read_bw(GB/s)",
            "l0a_write_bw(GB/s)",
            "l0b_read_bw(GB/s)",
            "l0b_write_bw(GB/s)",
            "l0c_read_bw(GB/s)",
            "l0c_write_bw(GB/s)",
            "l0c_read_bw_cube(GB/s)",
            "l0c_write_bw_cube(GB/s)",
        ),
        4: (
            "aicore_time(us)",
            "total_cycles",
            "vec_bankgroup_cflt_ratio",
            "vec_bank_cflt_ratio",
            "vec_resc_cflt_ratio",
        ),
        5: (
            "aicore_time(us)",
            "total_cycles",
            "ub_read_bw_vector(GB/s)",
            "ub_write_bw_vector(GB/s)",
            "ub_read_bw_scalar(GB/s)",
            "ub_write_bw_scalar(GB/s)",
        ),
        6: (
            "aicore_time(us)",
            "total_cycles",
            "write_cache_hit",
            "write_cache_miss_allocate",
            "r0_read_cache_hit",
            "r0_read_cache_miss_allocate",
            "r1_read_cache_hit",
            "r1_read_cache_miss_allocate",
        ),
        7: (
            "aicore_time(us)",
            "total_cycles",
            "vec_exe_time(us)",
            "vec_exe_ratio",
            "mac_exe_time(us)",
            "mac_exe_ratio",
            "scalar_exe_time(us)",
            "scalar_exe_ratio",
            "mte1_exe_time(us)",
            "mte1_exe_ratio",
            "mte2_exe_time(us)",
            "mte2_exe_ratio",
            "mte3_exe_time(us)",
            "mte3_exe_ratio",
            "fixpipe_exe_time(us)",
            "fixpipe_exe_ratio",
            "memory_bound",
        ),
    },
}

#: Cells the real exporter prints N/A on the 310B-like chip whatever the counts (seen exporting
#: simulated runs; the real 310B runs are all PipelineExecuteUtilization, which has none).
NOT_APPLICABLE: Final = {
    "310B": {
        0: frozenset({"vec_fp32_ratio", "vec_fp16_ratio", "vec_int32_ratio", "vec_misc_ratio"}),
        1: frozenset({"vec_time(us)", "vec_ratio"}),
        2: frozenset({"ub_read_bw(GB/s)", "ub_write_bw(GB/s)"}),
        3: frozenset({"l0c_write_bw(GB/s)"}),
        4: frozenset({"vec_bankgroup_cflt_ratio", "vec_bank_cflt_ratio", "vec_resc_cflt_ratio"}),
    },
}

# The printed column an event's count ends up in, where it differs from the exporter's name of
# the event (which the raw reader's table gives): lanes summed, MAC parts summed, requests.
_PRINTED: Final = {
    "vec_fp16_128lane_ratio": "vec_fp16_ratio",
    "vec_fp16_64lane_ratio": "vec_fp16_ratio",
    "icache_req_ratio": "icache_req",
    "mte1_ratio_extra": "mte1_ratio",
    "mac_fp_ratio": "mac_ratio",
    "mac_int_ratio": "mac_ratio",
}
_EVENT_NAME: Final = {f"0x{code:x}": _PRINTED.get(name, name) for code, name in EVENT_NAMES.items()}
# PipelineExecuteUtilization's names: the same events, printed as *_exe_ratio (mac: fp16 + int8).
_EXE_EVENT_NAME: Final = {
    "0x49": "mac_exe_ratio",
    "0x4a": "mac_exe_ratio",
    "0x9": "scalar_exe_ratio",
    "0x302": "mte1_exe_ratio",
    "0xc": "mte2_exe_ratio",
    "0xd": "mte3_exe_ratio",
    "0x303": "fixpipe_exe_ratio",
}
#: Bytes per event of each bandwidth (the exporter's width x scale).
_BYTES: Final = {name: width * scale for name, (width, scale) in BANDWIDTHS.items()}
#: Per chip: the core clock (MHz) the exporter divides by, and the cube / vector core counts
#: (info.json of the simulated device).
CHIP_CLOCK: Final = {"910B": (1650, 20, 40), "310B": (1250, 1, 1)}
_ICACHE_REQUESTS: Final = 1_000_000
_EVENT_SLOTS: Final = 8


class Kernel(NamedTuple):
    """What the encoding depends on: the chip, the collected group and level, the kernel."""

    chip: str
    metric: int
    level1: bool
    task_type: str
    block_dim: int


def _vector(kernel: Kernel) -> bool:
    return kernel.task_type in ("AI_VECTOR_CORE", "MIX_AIV")


def _side_prefix(kernel: Kernel) -> str:
    if kernel.chip == "310B":
        return ""
    return "aiv_" if _vector(kernel) else "aic_"


def _time_column(kernel: Kernel) -> str:
    return "aiv_time(us)" if kernel.chip == "910B" and _vector(kernel) else "aicore_time(us)"


def _encoders(kernel: Kernel) -> dict[str, tuple[str, tuple[int, ...], float]]:
    """Settable column -> (kind, event slots, bytes per event) for this kernel's main core."""
    if kernel.task_type == "AI_CPU" or kernel.metric not in REAL_COLUMNS.get(kernel.chip, {}):
        return {}
    cube, vector = events(kernel.chip, kernel.metric)
    codes = (vector if kernel.chip == "910B" and _vector(kernel) else cube).split(",")
    names = {**_EVENT_NAME, **(_EXE_EVENT_NAME if kernel.metric == 7 else {})}
    prefix = _side_prefix(kernel)
    printed = set(REAL_COLUMNS[kernel.chip][kernel.metric])
    blocked = NOT_APPLICABLE.get(kernel.chip, {}).get(kernel.metric, frozenset())
    slots: dict[str, list[int]] = {}
    for slot, code in enumerate(codes):
        slots.setdefault(names.get(code, code), []).append(slot)
    out: dict[str, tuple[str, tuple[int, ...], float]] = {prefix + "total_cycles": ("cycles", (), 0.0)}
    if kernel.level1:
        out[_time_column(kernel)] = ("time", (), 0.0)
    for name, where in slots.items():
        column = prefix + name
        if column not in printed or name in blocked:
            continue
        if name == "icache_miss_rate":
            out[column] = ("miss", (slots["icache_req"][0], where[0]), 0.0)
        elif name.endswith("(GB/s)"):
            out[column] = ("bw", tuple(where), _BYTES[name])
        elif "cache" in name:
            out[column] = ("count", tuple(where), 0.0)
        else:
            out[column] = ("rate", tuple(where), 0.0)
    return out


def settable(kernel: Kernel) -> tuple[str, ...]:
    """The columns a launch of *kernel* can set, in printed order."""
    encoders = _encoders(kernel)
    return tuple(c for c in REAL_COLUMNS.get(kernel.chip, {}).get(kernel.metric, ()) if c in encoders)


def _cycles_per_us(kernel: Kernel) -> float:
    """Total cycles per us of the exporter's core time: clock x blocks / waves of blocks."""
    mhz, cubes, vectors = CHIP_CLOCK[kernel.chip]
    cores = vectors if kernel.chip == "910B" and _vector(kernel) else cubes
    blocks = max(kernel.block_dim, 1)
    return mhz * blocks / math.ceil(blocks / cores)


def encode(kernel: Kernel, name: str, counters: Mapping[str, float | None] | None) -> str:
    """The PMU record text of a launch of *kernel* (see the module docstring).

    Columns that another group of the chip prints are left for that group's collections.

    :raises UsageError: a counter this kernel's record cannot carry (derived-only, N/A, another
        core's column, a column no group of the chip prints, a time at task time level 0, or None)
    """
    encoders = _encoders(kernel)
    printed = set(REAL_COLUMNS.get(kernel.chip, {}).get(kernel.metric, ()))
    chip_columns = {c for columns in REAL_COLUMNS.get(kernel.chip, {}).values() for c in columns}
    # A column another group of this chip prints is for that group's collection (a bench with
    # several groups replays the same launches once per group): not this record's.
    given = {c: v for c, v in (counters or {}).items() if c in printed or c not in chip_columns}
    for column, value in given.items():
        if column not in encoders or value is None:
            why = "None (N/A) cannot be encoded" if column in encoders else "cannot be encoded"
            level = "" if kernel.level1 else " at task time level 0"
            raise UsageError(
                f"sim.launch(counters=...): {column!r} {why} into the PMU record of {kernel.task_type} "
                f"kernels for metric group {kernel.metric} on the {kernel.chip}-like chip{level}; settable: "
                f"{', '.join(settable(kernel)) or 'none'}"
            )
    prefix = _side_prefix(kernel)
    if prefix + "total_cycles" in given and _time_column(kernel) in given:
        raise UsageError(
            f"sim.launch(counters=...): set {prefix}total_cycles or {_time_column(kernel)}, not both "
            "(the time is the cycles over the core clock and blocks)"
        )
    rng = random.Random(zlib.crc32(name.encode("utf-8", "replace")))
    cycles = f"s{rng.uniform(0.6, 0.95)!r}"
    if (value := given.get(prefix + "total_cycles")) is not None:
        cycles = f"c{round(value)}"
    if (value := given.get(_time_column(kernel))) is not None:
        cycles = f"c{round(value * _cycles_per_us(kernel))}"
    slots = ["a0"] * _EVENT_SLOTS
    mhz = CHIP_CLOCK[kernel.chip][0]
    for column, (kind, where, size) in encoders.items():
        if kind in ("cycles", "time"):
            continue
        value = given.get(column)
        if kind == "miss":
            rate = rng.uniform(0.0, 0.03) if value is None else value
            slots[where[0]] = f"a{_ICACHE_REQUESTS}"
            slots[where[1]] = f"a{round(rate * _ICACHE_REQUESTS)}"
        elif kind == "bw":  # events per cycle that print this many GB/s
            bandwidth = rng.uniform(0.5, 40.0) if value is None else value
            slots[where[0]] = f"r{bandwidth * 2.0**33 / (size * mhz * 1e6)!r}"
        elif kind == "count":
            slots[where[0]] = f"a{round(value)}" if value is not None else f"r{rng.uniform(0.0, 0.5)!r}"
        else:
            slots[where[0]] = f"r{rng.uniform(0.02, 0.4) if value is None else value!r}"
    return ";".join([cycles, *slots])
