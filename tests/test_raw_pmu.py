"""The PMU decoder and formulas of the raw reader (``asc_aprof._plans._raw._pmu``) on synthetic records.

The real exporter's output on real runs is checked in tests/real/test_raw_counters.py; here each
step is pinned on its own: record layout, per-event formulas, table columns per metric group,
time columns, SQLite rounding, and the join's queue rules.
"""

from __future__ import annotations

import math
import sqlite3
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from asc_aprof._plans._raw import DeclinedError, DeclineReason
from asc_aprof._plans._raw._pmu import (
    CHIP_310B,
    CHIP_910B,
    CHIP_METRICS,
    GROUP_EVENTS,
    GROUP_OF_METRIC,
    INVALID_CONTEXT,
    METRIC_GROUPS,
    VERIFIED_GROUPS,
    JoinedRow,
    PmuLayout,
    PmuRecord,
    Rounder,
    block_numbers,
    collector_events,
    group_metrics,
    join_rows,
    pmu_cells,
    pmu_off,
    pmu_records,
    side_values,
    total_time,
    verified_collection,
)

PMU = struct.Struct("<4HQ4HQ12Q")

INFO_910B = {"DeviceInfo": [{"aic_frequency": "1650", "ai_core_num": 20, "aiv_num": 40}]}
INFO_310B = {"DeviceInfo": [{"aic_frequency": "1250", "ai_core_num": 1, "aiv_num": 1}]}
SAMPLE_910B = {
    "ai_core_metrics": "PipeUtilizationExct",
    "aiv_metrics": "PipeUtilization",
    "ai_core_profiling_events": "0x416,0x417,0x9,0x302,0xc,0x303,0x54,0x55",
    "aiv_profiling_events": "0x8,0xa,0x9,0xb,0xc,0xd,0x54,0x55",
    "ai_core_profiling_mode": "task-based",
    "aiv_profiling_mode": "task-based",
}
SAMPLE_310B = {
    "ai_core_metrics": "PipelineExecuteUtilization",
    "aiv_metrics": "PipelineExecuteUtilization",
    "ai_core_profiling_events": "0x12c,0x49,0x4a,0x9,0x302,0xc,0xd,0x303",
    "aiv_profiling_events": "0x12c,0x49,0x4a,0x9,0x302,0xc,0xd,0x303",
}
#: The PMU headers of the real 910B exports (tests/real shows them equal on every run).
HEADER_910B = [
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
]
HEADER_310B = [
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
]


def record_bytes(
    *,
    function: int = 40,
    stream: int = 3,
    task: int = 7,
    subtask_type: int = 0,
    overflow: bool = False,
    subtask_id: int = 0,
    ffts_type: int = 1,
    total: int = 1000,
    events: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8),
    start: int = 100,
    end: int = 200,
) -> bytes:
    word5 = subtask_type | (1 << 10 if overflow else 0)
    return PMU.pack(
        function,
        0x6BD3,
        stream,
        task,
        0,
        word5,
        subtask_id,
        ffts_type << 13,
        0,
        0,
        total,
        (1 << 64) - 1,
        *events,
        start,
        end,
    )


def same(stream: int, task: int) -> tuple[int, int]:
    return stream, task


def aiv_record(total: int, events: tuple[int, ...], *, stream: int = 3, task: int = 7) -> PmuRecord:
    (record,) = pmu_records(record_bytes(total=total, events=events, stream=stream, task=task), same).context
    return record


# -- decoding ---------------------------------------------------------------------------------------


def test_context_records_decode_and_blocks_overflows_are_set_apart() -> None:
    data = (
        b"\xff" * 5  # a torn leading part, dropped as the exporter drops it
        + record_bytes()
        + record_bytes(function=41, ffts_type=4, subtask_type=6, subtask_id=2)
        + record_bytes(overflow=True, task=8)
        + record_bytes(ffts_type=4, subtask_type=6, subtask_id=2, task=9)
    )
    records = pmu_records(data, same)
    first, mix = records.context
    assert first == PmuRecord(3, 7, 0, INVALID_CONTEXT, 1, 1000, (1, 2, 3, 4, 5, 6, 7, 8), 100, 200)
    assert not first.is_aic and not first.is_mix_aic
    assert mix.context_id == 2 and mix.is_aic and mix.is_mix_aic  # FFTS+ records keep their context id
    assert records.block_keys == {(3, 7, 2)}


def test_the_exporters_subtask_mask_drops_bits_3_to_5() -> None:
    # It masks with the decimal literal 11111111 (0xA98AC7): type 8 (SDMA) reads as 0.
    (sdma,) = pmu_records(record_bytes(subtask_type=8, ffts_type=4), same).context
    (mix_aiv,) = pmu_records(record_bytes(subtask_type=7, ffts_type=4), same).context
    assert sdma.subtask_type == 0 and mix_aiv.subtask_type == 7 and mix_aiv.is_mix_aiv


def test_other_functions_are_declined() -> None:
    with pytest.raises(DeclinedError) as info:
        pmu_records(record_bytes(function=7), same)
    assert info.value.declined.reason is DeclineReason.UNKNOWN_RECORD and "function 7" in str(info.value)


# -- formulas ---------------------------------------------------------------------------------------


def test_pipe_groups_put_a_time_before_each_ratio() -> None:
    assert group_metrics("PipeUtilization") == [
        "vec_time", "vec_ratio", "mac_time", "mac_ratio", "scalar_time", "scalar_ratio", "mte1_time",
        "mte1_ratio", "mte2_time", "mte2_ratio", "mte3_time", "mte3_ratio", "icache_miss_rate",
    ]  # fmt: skip
    execute = group_metrics("PipelineExecuteUtilization")
    assert execute is not None and execute[-2:] == ["fixpipe_exe_time", "fixpipe_exe_ratio"]
    arithmetic = group_metrics("ArithmeticUtilization")
    assert arithmetic is not None and arithmetic[-2:] == ["cube_fops", "vector_fops"]
    assert group_metrics("Memory") == list(METRIC_GROUPS["Memory"])
    assert group_metrics("NoSuchGroup") is None


def test_side_values_follow_the_exporters_formulas() -> None:
    names = [
        "mac_fp_ratio",
        "mac_int_ratio",
        "scalar_ratio",
        "ub_read_bw(GB/s)",
        "icache_req_ratio",
        "icache_miss_rate",
    ]
    values = side_values(names, 2000, [100, 300, 500, 10, 40, 10], 1.65e9, CHIP_910B)
    assert values["mac_ratio_extra"] == [100 / 2000 + 300 / 2000]  # the two MAC ratios summed
    assert "mac_fp_ratio" not in values and values["scalar_ratio"] == [0.25]
    assert values["ub_read_bw(GB/s)"] == [10 * 256.0 * 4.0 / (2000 / 1.65e9) / 8589934592.0]
    assert values["icache_miss_rate"] == [(10 / 2000) / (40 / 2000)]  # misses over requests
    assert side_values(names, 0, [1, 2, 3, 4, 5, 6], 1.65e9, CHIP_910B)["scalar_ratio"] == [3]  # raw counts


def test_total_time_rounds_to_two_decimals_and_is_zero_without_blocks() -> None:
    # 910b_l1_div's first task: 12463669 cycles at 1650 MHz over 20 blocks on 40 vector cores
    assert total_time(12463669, 1650000000, 20, 40) == 377.69
    assert total_time(12463669, 1650000000, 60, 40) == round(12463669 * 1e6 / 1.65e9 / 60 * 2, 2)
    assert total_time(12463669, 1650000000, 0, 40) == 0  # task time level 0: no block number


def test_rounder_is_sqlite_and_keeps_integral_cycles_integers() -> None:
    rounder = Rounder()
    try:
        values = [2.0005, 1.2345, 7.0, 0.1 + 0.2]
        got = rounder.round(values, ["a_ratio", "b_time", "total_cycles", "c_ratio"])
    finally:
        rounder.close()
    conn = sqlite3.connect(":memory:")
    expected = [conn.execute("select round(?, 3)", (v,)).fetchone()[0] for v in values]
    assert got[0] == expected[0] and got[1] == expected[1] and got[3] == expected[3]
    assert got[2] == 7 and isinstance(got[2], int)


# -- layouts ----------------------------------------------------------------------------------------


def test_910b_header_and_cells_of_an_ai_vector_task() -> None:
    layout = PmuLayout.of(CHIP_910B, SAMPLE_910B, INFO_910B)
    assert layout.verified and list(layout.header) == HEADER_910B
    events = (5000, 0, 9600, 0, 2000, 770, 40, 4)  # vec, mac, scalar, mte1, mte2, mte3, icache req / miss
    cells = pmu_cells(
        CHIP_910B, SAMPLE_910B, INFO_910B, aiv_record(10000, events), block_num=20, duration_ns=5e3
    )
    assert cells["aiv_total_cycles"] == 10000 and cells["aiv_vec_ratio"] == 0.5
    assert cells["aiv_time(us)"] == round(10000 * 1e6 / 1.65e9 / 20, 2)
    assert cells["aiv_vec_time(us)"] == round(cells["aiv_time(us)"] * 0.5, 3)
    assert cells["aiv_icache_miss_rate"] == 0.1
    assert cells["aicore_time(us)"] == 0.0 and cells["aic_total_cycles"] == 0  # the unused AI Cube side
    assert cells["cube_utilization(%)"] == 0


def test_310b_header_memory_bound_and_cube_side() -> None:
    layout = PmuLayout.of(CHIP_310B, SAMPLE_310B, INFO_310B)
    assert layout.verified and list(layout.header) == HEADER_310B
    events = (
        1000,
        0,
        0,
        4000,
        30,
        5000,
        1200,
        10,
    )  # vec_exe, mac fp16 / int8, scalar, mte1, mte2, mte3, fixpipe
    cells = pmu_cells(CHIP_310B, SAMPLE_310B, INFO_310B, aiv_record(10000, events), block_num=1)
    assert cells["vec_exe_ratio"] == 0.1 and cells["mte2_exe_ratio"] == 0.5
    assert cells["memory_bound"] == 5.0  # mte2 over the larger of vec and mac
    assert cells["aicore_time(us)"] == round(10000 * 1e6 / 1.25e9, 2)


def samples() -> list[tuple[str, str]]:
    return [(chip, group) for chip in (CHIP_910B, CHIP_310B) for group in METRIC_GROUPS]


#: Groups the exporter's own tables cannot hold (values and columns never line up).
MISALIGNED = {
    (CHIP_910B, "PipelineExecuteUtilization"),
    (CHIP_910B, "MemoryAccess"),
    (CHIP_310B, "MemoryAccess"),
}


@pytest.mark.parametrize(("chip", "group"), samples())
@pytest.mark.parametrize("ffts_type", [0, 1])  # an AI Cube or an AI Vector record
def test_every_group_computes_or_declines_by_name(chip: str, group: str, ffts_type: int) -> None:
    # 910B collects PipeUtilization's AI Cube side as PipeUtilizationExct (real runs show it).
    aic = "PipeUtilizationExct" if (chip, group) == (CHIP_910B, "PipeUtilization") else group
    sample = {
        "ai_core_metrics": aic,
        "aiv_metrics": group,
        "ai_core_profiling_events": ",".join(hex(e) for e in GROUP_EVENTS.get(aic, ())),
        "aiv_profiling_events": ",".join(hex(e) for e in GROUP_EVENTS.get(group, ())),
    }
    info = INFO_910B if chip == CHIP_910B else INFO_310B
    (record,) = pmu_records(
        record_bytes(ffts_type=ffts_type, total=4096, events=(512, 256, 128, 64, 32, 16, 8, 4)), same
    ).context
    if (chip, group) in MISALIGNED:
        with pytest.raises(DeclinedError) as info_:
            pmu_cells(chip, sample, info, record, block_num=8)
        assert info_.value.declined.reason is DeclineReason.UNSUPPORTED and repr(group) in str(info_.value)
        return
    cells = pmu_cells(chip, sample, info, record, block_num=8, duration_ns=3000.0)
    assert next(iter(cells)) == "aicore_time(us)" and len(cells) > 2
    assert all(v == "N/A" or (not isinstance(v, str) and math.isfinite(v)) for v in cells.values())
    cycles = cells[
        "aic_total_cycles"
        if chip == CHIP_910B and ffts_type == 0
        else "aiv_total_cycles"
        if chip == CHIP_910B
        else "total_cycles"
    ]
    assert cycles == 4096
    assert PmuLayout.of(chip, sample, info).verified == ((chip, aic, group) in VERIFIED_GROUPS)


def test_sample_based_and_custom_collections_are_declined() -> None:
    for change in ({"ai_core_profiling_mode": "sample-based"}, {"ai_core_metrics": "Custom:0x8"}):
        with pytest.raises(DeclinedError) as info:
            PmuLayout.of(CHIP_910B, {**SAMPLE_910B, **change}, INFO_910B)
        assert info.value.declined.reason is DeclineReason.UNSUPPORTED


@given(
    total=st.integers(1, 2**40),
    events=st.tuples(*[st.integers(0, 2**40)] * 8),
    blocks=st.integers(0, 64),
)
def test_ratios_and_times_stay_consistent(total: int, events: tuple[int, ...], blocks: int) -> None:
    cells = pmu_cells(CHIP_910B, SAMPLE_910B, INFO_910B, aiv_record(total, events), block_num=blocks)
    names = ("vec", "mac", "scalar", "mte1", "mte2", "mte3")
    time = cells["aiv_time(us)"]
    assert isinstance(time, float)
    for name, count in zip(names, events[:6], strict=True):
        column = f"aiv_{name}_ratio"
        if column in cells:
            ratio = cells[column]
            assert isinstance(ratio, float) and abs(ratio - count / total) <= 0.0005 + 1e-9 * abs(ratio)
            timed = cells[f"aiv_{name}_time(us)"]
            assert isinstance(timed, float) and abs(timed - time * count / total) <= 0.0005 + 1e-9 * abs(
                timed
            )
    if blocks == 0:
        assert time == 0.0  # no block number: no time, whatever the cycles


# -- the join ---------------------------------------------------------------------------------------


def joined_row(
    task: int, *, kept: bool = True, ge_type: str = "AI_VECTOR_CORE", context: int = INVALID_CONTEXT
) -> JoinedRow:
    return JoinedRow(3, task, 0, context, ge_type, 5000.0, kept)


def test_join_queues_hardware_rows_and_the_start_filter() -> None:
    layout = PmuLayout.of(CHIP_910B, SAMPLE_910B, INFO_910B)
    data = b"".join(record_bytes(task=t, total=1000 * (t + 1)) for t in (1, 2, 3))
    records = pmu_records(data, same)
    rows = [joined_row(1, kept=False), joined_row(2, ge_type="AI_CPU"), joined_row(3), joined_row(4)]
    cells = join_rows(layout, records, {}, rows, batch_ids=True, where="device_0")
    assert len(cells) == 3  # the filtered row takes its record but prints nothing
    cycles = layout.header.index("aiv_total_cycles")
    assert cells[0][cycles] == "N/A"  # AI CPU rows never take PMU values
    assert cells[1][cycles] == 4000 and set(cells[2]) == {"N/A"}  # task 4 has no record


def test_join_declines_repeated_keys_and_joined_mix_blocks() -> None:
    layout = PmuLayout.of(CHIP_910B, SAMPLE_910B, INFO_910B)
    twice = pmu_records(record_bytes() + record_bytes(), same)
    with pytest.raises(DeclinedError) as info:
        join_rows(layout, twice, {}, [joined_row(7)], batch_ids=True, where="device_0")
    assert info.value.declined.reason is DeclineReason.AMBIGUOUS
    mix = record_bytes(ffts_type=4, subtask_type=6, subtask_id=0)
    block = record_bytes(function=41, ffts_type=4, subtask_type=6, subtask_id=0)
    records = pmu_records(mix + block, same)
    assert join_rows(layout, records, {}, [joined_row(7)], batch_ids=True, where="d")[0][0] == "N/A"
    with pytest.raises(DeclinedError, match="MIX kernel"):
        join_rows(layout, records, {}, [joined_row(7, context=0)], batch_ids=True, where="d")


def test_block_numbers_come_from_kernel_ge_tasks_only() -> None:
    ge = [
        (3, 7, INVALID_CONTEXT, "AI_VECTOR_CORE", 20, 0),
        (3, 8, INVALID_CONTEXT, "AI_CPU", 1, 0),
        (3, 9, 0, "MIX_AIC", 4, 8),
    ]
    assert block_numbers(ge, "d") == {(3, 7, INVALID_CONTEXT): (20, 0), (3, 9, 0): (4, 8)}
    with pytest.raises(DeclinedError, match="several block numbers"):
        block_numbers([*ge, (3, 7, INVALID_CONTEXT, "AI_VECTOR_CORE", 10, 0)], "d")


def _collected(chip: str, metric: int, **change: str) -> dict[str, object]:
    cube, vector = collector_events(chip, metric)
    group = GROUP_OF_METRIC[metric]
    sample: dict[str, object] = {
        "ai_core_profiling_mode": "task-based",
        "aiv_profiling_mode": "task-based",
        "ai_core_metrics": "PipeUtilizationExct" if (chip, metric) == (CHIP_910B, 1) else group,
        "aiv_metrics": group,
        "ai_core_profiling_events": cube,
        "aiv_profiling_events": vector,
    }
    return {**sample, **change}


@pytest.mark.parametrize("chip", [CHIP_910B, CHIP_310B])
def test_generated_groups_are_verified_only_with_the_collectors_events(chip: str) -> None:
    for metric in CHIP_METRICS[chip]:
        assert verified_collection(chip, _collected(chip, metric)), metric
        cube, _ = collector_events(chip, metric)
        sample = _collected(chip, metric)
        if (chip, sample["ai_core_metrics"], sample["aiv_metrics"]) not in VERIFIED_GROUPS:
            # groups real runs show are accepted by name (as those runs named them)
            reordered = ",".join(reversed(cube.split(",")))
            assert not verified_collection(chip, {**sample, "ai_core_profiling_events": reordered})
        assert not verified_collection(chip, _collected(chip, metric, aiv_profiling_mode="sample-based"))
    lacking = ({0, 1, 2, 3, 4, 5, 6, 7, 8} - set(CHIP_METRICS[chip])).pop()
    assert not verified_collection(chip, _collected(chip, lacking))
    other = CHIP_310B if chip == CHIP_910B else CHIP_910B
    assert not verified_collection(other, _collected(chip, 5))  # the chips' MemoryUB lists differ


def test_pmu_off_needs_both_core_types_off() -> None:
    assert pmu_off({"ai_core_profiling": "off", "aiv_profiling": "off"})
    assert not pmu_off({"ai_core_profiling": "on", "aiv_profiling": "off"})
    assert not pmu_off({})
