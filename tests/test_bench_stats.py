"""The median's interval, outlier flags and the adaptive plan, checked on noise of known spread.

Coverage is measured in-process: samples are drawn like the simulator's jitter (lognormal around a
known median), and the sans-IO plan is driven with fabricated windows, so thousands of benchmarks
take seconds. A few end-to-end runs through the simulator are in test_bench.py.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from asc_aprof import ProfilingTask
from asc_aprof._plans._bench import BenchConfig, BenchResult, Measure, StopReason, WarmUp, Window, plan
from asc_aprof._plans._stats import median_interval, tukey_fences

TRUE_MEDIAN = 10.0


def lognormal(rng: random.Random, sigma: float) -> float:
    return round(TRUE_MEDIAN * math.exp(sigma * rng.gauss(0.0, 1.0)), 3)


def binom_tail(n: int, k: int) -> float:
    """P(B <= k), B ~ Binomial(n, 1/2), exactly."""
    return float(sum(math.comb(n, i) for i in range(k + 1)) / (1 << n))


@pytest.mark.parametrize("n", [1, 2, 5, 6, 7, 10, 20, 33, 100, 1000])
def test_interval_is_the_exact_order_statistic_one(n: int) -> None:
    values = [float(i) for i in range(n)]
    low, high, level = median_interval(values, 0.95)
    j = int(low) + 1  # 1-based index of the lower end
    assert high == float(n - j)  # symmetric: x_(n+1-j)
    if n >= 6:
        assert level == pytest.approx(1 - 2 * binom_tail(n, j - 1))
        assert level >= 0.95
        # the next narrower interval would fall short of 95%
        assert 1 - 2 * binom_tail(n, j) < 0.95
    else:
        assert (low, high) == (0.0, float(n - 1)) and level < 0.95


@given(st.lists(st.floats(0.001, 1e6), min_size=1, max_size=300), st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_interval_brackets_the_sample_median(values: list[float], confidence: float) -> None:
    ordered = sorted(values)
    low, high, level = median_interval(ordered, confidence)
    n = len(ordered)
    median = (ordered[(n - 1) // 2] + ordered[n // 2]) / 2
    assert low <= median <= high and 0.0 <= level < 1.0


def test_interval_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        median_interval([], 0.95)
    with pytest.raises(ValueError):
        median_interval([1.0], 1.0)


@pytest.mark.parametrize(("n", "sigma"), [(10, 0.02), (30, 0.05), (200, 0.02)])
def test_coverage_of_the_interval_on_lognormal_noise(n: int, sigma: float) -> None:
    """Over 4000 seeded experiments the interval covers the true median as often as it says."""
    experiments = 4000
    rng = random.Random(1234 + n)
    covered = 0
    level = 0.0
    for _ in range(experiments):
        samples = sorted(lognormal(rng, sigma) for _ in range(n))
        low, high, level = median_interval(samples, 0.95)
        covered += low <= TRUE_MEDIAN <= high
    rate = covered / experiments
    # binomial standard error at 4000 experiments is about 0.35%; allow 4 of them, plus rounding ties
    assert abs(rate - level) < 0.015, (rate, level)
    assert rate >= 0.94


def test_tukey_fences_flag_a_planted_outlier_only() -> None:
    rng = random.Random(7)
    values = [lognormal(rng, 0.01) for _ in range(50)] + [30.0]
    fences = tukey_fences(sorted(values))
    assert fences is not None
    flagged = [v for v in values if not fences[0] <= v <= fences[1]]
    assert flagged == [30.0]
    assert tukey_fences([1.0, 2.0, 3.0]) is None


# -- the plan, driven with fabricated windows ---------------------------------------------------------------
Draw = Callable[[], float]


def drive(
    config: BenchConfig, draw: Draw, *, seconds_per_window: float = 0.1, flush: bool = False
) -> BenchResult:
    """Perform the plan's steps with kernels whose durations come from *draw* (one kernel per call)."""
    steps = plan(config, device=0, flush=flush)
    outcome: object = None
    windows = 0
    while True:
        try:
            step = steps.send(outcome)
        except StopIteration as stop:
            result: BenchResult = stop.value
            return result
        if isinstance(step, WarmUp):
            outcome = (step.calls, 0.0)
            continue
        assert isinstance(step, Measure)
        tasks: list[ProfilingTask] = []
        for _ in range(step.reps):
            if step.flush:
                tasks.append(ProfilingTask(None, "flush", "AI_CORE", 99.0, 0))
            if step.call:
                tasks.append(ProfilingTask(None, "k", "AI_CORE", draw(), 0))
        windows += 1
        outcome = Window(tuple(tasks), f"PROF_{windows:06d}", seconds_per_window)


def test_adaptive_plan_stops_at_the_target_width_and_keeps_coverage() -> None:
    """Adaptive stopping looks at the data between windows; coverage must survive the looks."""
    config = BenchConfig(rel_width=0.02, max_reps=5000)
    rng = random.Random(99)
    experiments = 1500
    covered = 0
    for _ in range(experiments):
        result = drive(config, lambda: lognormal(rng, 0.03))
        assert result.stop is StopReason.CONVERGED
        assert result.rel_width <= 0.02
        covered += result.ci_low_us <= TRUE_MEDIAN <= result.ci_high_us
    rate = covered / experiments
    assert 0.93 <= rate <= 0.99, rate


def test_adaptive_plan_is_bounded_by_max_reps_and_max_time() -> None:
    rng = random.Random(5)
    by_count = drive(BenchConfig(rel_width=0.001, max_reps=120), lambda: lognormal(rng, 0.1))
    assert by_count.stop is StopReason.MAX_REPS and by_count.count == 120
    by_time = drive(
        BenchConfig(rel_width=0.001, max_reps=100_000, max_time=1.0),
        lambda: lognormal(rng, 0.1),
        seconds_per_window=0.3,
    )
    assert by_time.stop is StopReason.MAX_TIME
    # calibration + at most two more windows of 0.3 s fit in 1 s
    assert len(by_time.run_ids) <= 4


def test_fixed_reps_go_in_batches_and_flush_kernels_never_count() -> None:
    values = iter([float(v) for v in range(1, 1000)])
    result = drive(BenchConfig(reps=25, batch=10), lambda: next(values), flush=True)
    assert result.stop is StopReason.REPS and result.count == 25
    assert len(result.run_ids) == 2 + 3  # the call alone, the flush alone, then 10 + 10 + 5
    assert result.samples_us == tuple(float(v) for v in range(2, 27))  # 1.0 was the calibration call
    assert result.flush_kernels == ("flush",)
    assert all(k.name == "k" for k in result.kernels)


def test_zero_noise_converges_after_the_first_window() -> None:
    result = drive(BenchConfig(), lambda: 10.0)
    assert result.stop is StopReason.CONVERGED and result.count == 10
    assert (result.median_us, result.ci_low_us, result.ci_high_us, result.outliers) == (10.0, 10.0, 10.0, ())
