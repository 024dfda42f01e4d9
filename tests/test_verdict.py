"""The bound verdict rule, the per-kernel statistics with counters, and comparing a counter."""

from __future__ import annotations

import math

import pytest

import asc_aprof
from asc_aprof import (
    VERDICT_RULE,
    InvalidArgumentError,
    KernelChange,
    ProfilingTask,
    TaskCounters,
    VerdictKind,
    bound_verdict,
    compare_tasks,
    kernel_stats,
)
from asc_aprof._model._records import make_result


def test_stats_and_verdict_helpers_are_public() -> None:
    for name in ("kernel_stats", "compare_tasks", "KernelStats", "KernelChange", "TaskCounters", "Verdict"):
        assert name in asc_aprof.stats.__all__ and getattr(asc_aprof, name).__module__ == "asc_aprof"
        assert getattr(asc_aprof.stats, name) is getattr(asc_aprof, name)
    assert {"VERDICT_RULE", "VerdictKind", "bound_verdict"} <= set(asc_aprof.stats.__all__)


# -- the rule, threshold by threshold ---------------------------------------------------------------

QUIET_910B = {  # a vector kernel with every pipe well below the thresholds
    "aiv_time(us)": 10.0,
    "aiv_total_cycles": 330000.0,
    "aiv_vec_ratio": 0.3,
    "aiv_scalar_ratio": 0.2,
    "aiv_mte2_ratio": 0.1,
    "aiv_mte3_ratio": 0.05,
    "aic_mac_ratio": 0.0,
    "aic_mte2_ratio": 0.0,
}


@pytest.mark.parametrize(
    ("column", "value", "bound"),
    [
        ("aic_mac_ratio", 0.81, "mac"),  # cube rule
        ("aic_mac_ratio", 0.8, None),
        ("aic_mte2_ratio", 0.96, "mte2"),
        ("aic_mte2_ratio", 0.95, None),  # not above 0.95 (and the cube side has no 0.7 rule)
        ("aiv_vec_ratio", 0.71, "vec"),  # vector rule
        ("aiv_vec_ratio", 0.7, None),
        ("aiv_mte2_ratio", 0.71, "mte2"),
        ("aiv_mte3_ratio", 0.71, "mte3"),
        ("aiv_scalar_ratio", 0.81, "scalar"),  # other pipes
        ("aiv_scalar_ratio", 0.8, None),
        ("aic_fixpipe_ratio", 0.9, "fixpipe"),
        ("aic_mte1_ratio", 0.85, "mte1"),
    ],
)
def test_each_threshold(column: str, value: float, bound: str | None) -> None:
    verdict = bound_verdict(QUIET_910B | {column: value}, 10.0)
    if bound is None:
        assert verdict.kind is VerdictKind.NOT_BOUND
    else:
        assert verdict.kind is VerdictKind.BOUND and verdict.pipe == bound and verdict.column == column
        assert verdict.ratio == value and column in verdict.reason and verdict.label == f"{bound}-bound"
        assert verdict.core == ("cube" if column.startswith("aic_") else "vector")


def test_vector_total_over_0_9_names_the_largest_of_the_three() -> None:
    ratios = QUIET_910B | {"aiv_vec_ratio": 0.5, "aiv_mte2_ratio": 0.3, "aiv_mte3_ratio": 0.15}
    verdict = bound_verdict(ratios, 10.0)
    assert verdict.kind is VerdictKind.BOUND and verdict.pipe == "vec"
    assert "aiv_vec_ratio + aiv_mte2_ratio + aiv_mte3_ratio = 0.95 > 0.9" in verdict.reason
    at_limit = QUIET_910B | {"aiv_vec_ratio": 0.5, "aiv_mte2_ratio": 0.3, "aiv_mte3_ratio": 0.1}
    assert bound_verdict(at_limit, 10.0).kind is VerdictKind.NOT_BOUND  # 0.9 is not above 0.9


def test_several_rules_fire_the_largest_ratio_wins_every_reason_listed() -> None:
    verdict = bound_verdict(QUIET_910B | {"aic_mac_ratio": 0.85, "aiv_mte2_ratio": 0.92}, 10.0)
    assert verdict.pipe == "mte2" and verdict.core == "vector"
    assert "aic_mac_ratio 0.85 > 0.8 (cube rule)" in verdict.reason
    assert "aiv_mte2_ratio 0.92 > 0.7 (vector rule)" in verdict.reason
    assert verdict.ratios[0] == ("aiv_mte2_ratio", 0.92)  # every ratio, largest first


def test_latency_bound_needs_more_than_20_us_and_no_ratio_above_0_8() -> None:
    assert bound_verdict(QUIET_910B, 20.5).kind is VerdictKind.LATENCY
    assert bound_verdict(QUIET_910B, 20.5).label == "latency-bound"
    assert bound_verdict(QUIET_910B, 20.0).kind is VerdictKind.NOT_BOUND
    assert bound_verdict(QUIET_910B, None).kind is VerdictKind.NOT_BOUND
    # cube mte2 at 0.9 fires no rule, but is a ratio above 0.8: not latency-bound either
    busy = bound_verdict(QUIET_910B | {"aic_mte2_ratio": 0.9}, 50.0)
    assert busy.kind is VerdictKind.NOT_BOUND and busy.pipe == "mte2" and "not latency-bound" in busy.reason


@pytest.mark.parametrize("suffix", ["_ratio", "_exe_ratio"])
def test_a_single_unprefixed_core_gets_both_rules(suffix: str) -> None:
    quiet = {f"{p}{suffix}": 0.1 for p in ("vec", "mac", "scalar", "mte1", "mte2", "mte3")}
    quiet |= {"aicore_time(us)": 5.0, "total_cycles": 6000.0, "memory_bound": 1.0}
    assert bound_verdict(quiet, 5.0).kind is VerdictKind.NOT_BOUND
    mac = bound_verdict(quiet | {f"mac{suffix}": 0.85}, 5.0)
    assert mac.kind is VerdictKind.BOUND and mac.pipe == "mac" and mac.core is None
    mte2 = bound_verdict(quiet | {f"mte2{suffix}": 0.75}, 5.0)  # the vector rule's 0.7 applies
    assert mte2.pipe == "mte2" and "(vector rule)" in mte2.reason


def test_groups_without_ratios_give_figures_not_a_verdict() -> None:
    memory = {
        "aiv_time(us)": 377.69,
        "aiv_total_cycles": 12463669.0,
        "aiv_ub_read_bw(GB/s)": 83.153,
        "aiv_main_mem_read_bw(GB/s)": 1.299,
        "aiv_vec_bank_cflt_ratio": 0.2,  # a conflict ratio is no pipe ratio
    }
    verdict = bound_verdict(memory, 380.0)
    assert verdict.kind is VerdictKind.NO_RATIOS and verdict.pipe is None and verdict.label == "no ratios"
    assert verdict.figures == (
        ("aiv_ub_read_bw(GB/s)", 83.153),
        ("aiv_main_mem_read_bw(GB/s)", 1.299),
        ("aiv_vec_bank_cflt_ratio", 0.2),
    )
    assert "PIPE_UTILIZATION" in verdict.reason


def test_no_counters() -> None:
    assert bound_verdict({"aiv_vec_ratio": None}, 3.0).kind is VerdictKind.NO_COUNTERS
    assert "N/A" in bound_verdict({"aiv_vec_ratio": None}).reason
    assert "no PMU counter column" in bound_verdict({}).reason


def test_the_rule_text_states_every_threshold() -> None:
    for number in ("0.8", "0.95", "0.7", "0.9", "20 us"):
        assert number in VERDICT_RULE


def test_verdict_dict_round_trip() -> None:
    verdict = bound_verdict(QUIET_910B | {"aiv_vec_ratio": 0.75}, 10.0)
    data = verdict.to_dict()
    assert (
        data["kind"] == "bound" and data["label"] == "vec-bound" and data["ratios"]["aiv_vec_ratio"] == 0.75
    )
    assert type(verdict).from_dict(data) == verdict


# -- kernel_stats with counters ---------------------------------------------------------------------


def _tasks() -> list[ProfilingTask]:
    return [
        ProfilingTask(0, "vec_k", "AI_VECTOR_CORE", 30.0, 0),
        ProfilingTask(1, "cpu_k", "AI_CPU", 5.0, 0),
        ProfilingTask(2, "vec_k", "AI_VECTOR_CORE", 32.0, 0),
        ProfilingTask(3, "vec_k", "AI_VECTOR_CORE", 90.0, 0),
        ProfilingTask(4, "vec_k", "AI_VECTOR_CORE", 31.0, 1),
    ]


def _counters() -> TaskCounters:
    return TaskCounters(
        {
            "aiv_vec_ratio": [0.8, None, 0.75, 0.1, 0.2],
            "aiv_mte2_ratio": [0.1, None, 0.1, None, 0.1],
        }
    )


def test_kernel_stats_medians_of_every_counter_per_device_and_kernel() -> None:
    stats = {(s.device, s.name): s for s in kernel_stats(_tasks(), counters=_counters())}
    vec0 = stats[(0, "vec_k")]
    assert vec0.count == 3 and vec0.median_us == 32.0
    assert vec0.counters == {"aiv_vec_ratio": 0.75, "aiv_mte2_ratio": 0.1}  # N/A left out of the median
    assert vec0.verdict is not None and vec0.verdict.label == "vec-bound"
    assert stats[(1, "vec_k")].counters == {"aiv_vec_ratio": 0.2, "aiv_mte2_ratio": 0.1}
    assert stats[(1, "vec_k")].verdict.kind is VerdictKind.LATENCY  # type: ignore[union-attr]
    cpu = stats[(0, "cpu_k")]
    assert cpu.counters == {"aiv_vec_ratio": None, "aiv_mte2_ratio": None}
    assert cpu.verdict is not None and cpu.verdict.kind is VerdictKind.NO_COUNTERS
    entry = vec0.to_dict()
    assert entry["counters"] == {"aiv_vec_ratio": 0.75, "aiv_mte2_ratio": 0.1}
    assert entry["verdict"]["label"] == "vec-bound" and entry["median_us"] == 32.0


def test_kernel_stats_skip_drops_the_counters_of_the_skipped_tasks() -> None:
    (vec0,) = kernel_stats(_tasks(), counters=_counters(), device=0, name="vec_k", skip=1)
    assert vec0.count == 2 and vec0.counters["aiv_vec_ratio"] == pytest.approx(0.425)


def test_kernel_stats_takes_a_result_and_its_counters() -> None:
    result = make_result(_tasks(), "PROF_1", _counters())
    assert kernel_stats(result) == kernel_stats(_tasks(), counters=_counters())
    plain = kernel_stats(make_result(_tasks(), "PROF_1"))
    assert all(s.verdict is None and s.counters == {} for s in plain)
    assert plain[0].to_dict()["counters"] is None and plain[0].to_dict()["verdict"] is None
    with pytest.raises(InvalidArgumentError, match="5 rows for 4 tasks"):
        kernel_stats(_tasks()[:4], counters=_counters())


# -- compare_tasks on a counter ---------------------------------------------------------------------


def test_compare_a_counter() -> None:
    base = make_result(_tasks(), "PROF_1", _counters())
    higher = TaskCounters({"aiv_vec_ratio": [0.9, None, 0.95, 0.85, 0.3], "aiv_mte2_ratio": [0.1] * 5})
    new = make_result(_tasks(), "PROF_2", higher)
    changes = {(c.device, c.name): c for c in compare_tasks(base, new, metric="aiv_vec_ratio")}
    vec0 = changes[(0, "vec_k")]
    assert vec0.metric == "aiv_vec_ratio" and vec0.base_median == 0.75 and vec0.new_median == 0.9
    assert vec0.difference == pytest.approx(0.15) and vec0.change_pct == 20.0 and vec0.base_count == 3
    assert (0, "cpu_k") not in changes  # every value N/A
    assert "base_median_us" not in vec0.to_dict()


def test_compare_durations_keeps_the_older_keys() -> None:
    (change, *_) = compare_tasks(_tasks(), _tasks())
    data = change.to_dict()
    assert data["metric"] == "duration_us" and data["base_median_us"] == data["base_median"]
    assert change.base_median_us == change.base_median


def test_compare_zero_base_and_non_finite_changes() -> None:
    zero = TaskCounters({"aic_mac_ratio": [0.0] * 5})
    some = TaskCounters({"aic_mac_ratio": [0.5] * 5})
    same = compare_tasks(_tasks(), _tasks(), metric="aic_mac_ratio", base_counters=zero, new_counters=zero)
    assert all(c.change_pct == 0.0 and not c.significant for c in same)
    grown = compare_tasks(_tasks(), _tasks(), metric="aic_mac_ratio", base_counters=zero, new_counters=some)
    assert all(math.isinf(c.change_pct) for c in grown)
    assert grown[0].to_dict()["change_pct"] is None  # JSON has no infinity


def test_compare_a_counter_needs_counters_that_have_it() -> None:
    with pytest.raises(InvalidArgumentError, match="needs the PMU counters of BASE"):
        compare_tasks(_tasks(), _tasks(), metric="aiv_vec_ratio")
    with pytest.raises(InvalidArgumentError, match=r"NEW has no counter 'aic_x'.*aiv_vec_ratio"):
        compare_tasks(
            _tasks(),
            _tasks(),
            metric="aic_x",
            base_counters=TaskCounters({"aic_x": [0.1] * 5}),
            new_counters=_counters(),
        )
    assert isinstance(compare_tasks(_tasks(), _tasks())[0], KernelChange)
