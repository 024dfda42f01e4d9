"""bench() and the AI Core clock (DECISIONS 25): each sample's clock is recorded; samples taken below
the rated clock (info.json ``aic_frequency``) are flagged, or dropped on request.

The simulator's clock dip (``sim.control().set_clock_dip``) slows the kernels launched into it
(duration x rated / dip clock) and writes the change into the run's clock data, which the raw
reader gives each task; the clock travels through the window's shared result to bench.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import pytest

import asc_aprof
from asc_aprof import AsyncProfiler, BenchResult, ClockCheck, Profiler, ThrottledError, Toolkit, sim
from asc_aprof._model._clock import TaskClocks
from asc_aprof.sim import SimControl

RATED = 1650.0  # the simulated 910B's info.json aic_frequency
DIP = 800
#: one call: 20 us of AI Core and 5 us of AI Vector at the rated clock
CALL_US = 25.0
#: the same call in a dip: each kernel's ns x 1650 / 800, rounded to whole ns (41250 + 10313)
SLOW_US = 51.563


def one_call() -> None:
    sim.launch("matmul", duration_us=20.0)
    sim.launch("add", duration_us=5.0, task_type="AI_VECTOR_CORE")


def dipping(control: SimControl, dipped: set[int]) -> Callable[[], None]:
    """The call; its calls numbered in *dipped* (from 0, the calibration's) run in a clock dip.

    The dip is set with an open end before the launch (so it slows the kernels) and narrowed to
    end after them (so the run's clock data holds it); the sleeps keep the device's other
    kernels outside it.
    """
    count = [0]

    def call() -> None:
        number = count[0]
        count[0] += 1
        if number not in dipped:
            one_call()
            return
        time.sleep(0.002)
        start = time.time_ns()
        control.set_clock_dip(DIP, start_ns=start, end_ns=start + 60 * 10**9)
        one_call()
        time.sleep(0.002)
        control.set_clock_dip(DIP, start_ns=start, end_ns=time.time_ns())
        time.sleep(0.002)

    return call


#: bench(reps=10, batch=5, warmup=0): two windows of 5 after the calibration call (number 0);
#: samples 2 and 7 are calls 3 and 8, one dip in each window
DIPPED = {3, 8}


def check_flagged(result: BenchResult) -> None:
    clock = result.clock
    assert clock.rated_mhz == RATED
    assert clock.sample_mhz == tuple(float(DIP) if i in (2, 7) else RATED for i in range(10))
    assert clock.throttled == (2, 7) and clock.dropped == 0 and clock.dropped_us == ()
    # slower in time, equal in cycles
    assert result.samples_us == tuple(SLOW_US if i in (2, 7) else CALL_US for i in range(10))
    cycles = [round(us * mhz) for us, mhz in zip(result.samples_us, clock.sample_mhz, strict=True)]
    assert cycles == [round(CALL_US * RATED)] * 10
    assert clock.reason.startswith("2 of 10 samples ran below the rated AI Core clock, 1650 MHz")
    assert "down to 800 MHz: flagged, still counted" in clock.reason
    assert result.to_dict()["clock"]["throttled"] == [2, 7]


def check_dropped(result: BenchResult) -> None:
    clock = result.clock
    assert clock.throttled == (2, 7) and clock.dropped == 2 and clock.dropped_us == (SLOW_US, SLOW_US)
    assert len(clock.sample_mhz) == 10
    assert result.samples_us == (CALL_US,) * 8 and result.median_us == CALL_US
    assert {k.max_us for k in result.kernels} == {20.0, 5.0}  # the breakdown leaves them out too
    assert clock.reason.endswith("down to 800 MHz: dropped from the statistics")
    assert "dropped=2" in repr(result)


def test_samples_in_a_clock_dip_are_flagged_by_default(toolkit: Toolkit, simctl: SimControl) -> None:
    check_flagged(Profiler(toolkit=toolkit).bench(dipping(simctl, DIPPED), warmup=0, reps=10, batch=5))


def test_drop_throttled_leaves_them_out(toolkit: Toolkit, simctl: SimControl) -> None:
    check_dropped(
        Profiler(toolkit=toolkit).bench(
            dipping(simctl, DIPPED), drop_throttled=True, warmup=0, reps=10, batch=5
        )
    )


@pytest.mark.anyio
async def test_async_bench_flags_and_drops(toolkit: Toolkit, simctl: SimControl) -> None:
    profiler = AsyncProfiler(toolkit=toolkit)
    check_flagged(await profiler.bench(dipping(simctl, DIPPED), warmup=0, reps=10, batch=5))
    check_dropped(
        await profiler.bench(dipping(simctl, DIPPED), drop_throttled=True, warmup=0, reps=10, batch=5)
    )


def whole_dip(control: SimControl) -> None:
    now = time.time_ns()
    control.set_clock_dip(DIP, start_ns=now - 10**9, end_ns=now + 600 * 10**9)


def test_every_sample_throttled(toolkit: Toolkit, simctl: SimControl) -> None:
    whole_dip(simctl)
    profiler = Profiler(toolkit=toolkit)
    flagged = profiler.bench(one_call, reps=4, warmup=0)
    assert flagged.clock.throttled == (0, 1, 2, 3) and flagged.median_us == SLOW_US
    with pytest.raises(ThrottledError, match=r"no sample left on device 0: 4 of 4 samples ran below") as err:
        profiler.bench(one_call, reps=4, warmup=0, drop_throttled=True)
    assert "drop_throttled=False" in str(err.value) and isinstance(err.value, asc_aprof.AprofError)
    with pytest.raises(ThrottledError):
        profiler.do_bench(one_call, warmup=0, rep=0.1, drop_throttled=True)
    with pytest.raises(ThrottledError):
        asc_aprof.do_bench(one_call, warmup=0, rep=0.1, toolkit=toolkit, drop_throttled=True)


@pytest.mark.anyio
async def test_async_every_sample_throttled(toolkit: Toolkit, simctl: SimControl) -> None:
    whole_dip(simctl)
    profiler = AsyncProfiler(toolkit=toolkit)
    with pytest.raises(ThrottledError):
        await profiler.bench(one_call, reps=3, warmup=0, drop_throttled=True)
    with pytest.raises(ThrottledError):
        await profiler.do_bench(one_call, warmup=0, rep=0.1, drop_throttled=True)


def test_without_clock_data_nothing_is_flagged(toolkit: Toolkit, simctl: SimControl) -> None:
    whole_dip(simctl)
    # read from the exported CSVs: they carry no clock
    result = Profiler(toolkit=toolkit, reader="msprof").bench(one_call, reps=3, warmup=0, drop_throttled=True)
    assert not result.clock.known and result.clock.throttled == ()
    assert all(math.isnan(m) for m in result.clock.sample_mhz) and len(result.clock.sample_mhz) == 3
    assert result.clock.reason.startswith("AI Core clock unknown")
    assert result.to_dict()["clock"]["rated_mhz"] is None


def test_at_the_rated_clock() -> None:
    check = ClockCheck(RATED, (RATED, RATED), (), ())
    assert check.known and check.reason.startswith("every sample ran at the rated AI Core clock, 1650 MHz")
    with pytest.raises(ValueError, match="rated_mhz"):
        TaskClocks((), 0.0)
