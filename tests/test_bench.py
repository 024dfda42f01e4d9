"""bench() and do_bench() end to end on the simulator: attribution, flush, warm-up, devices, sweep."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import asc_aprof
from asc_aprof import (
    AsyncProfiler,
    AttributionError,
    BenchConfig,
    BenchResult,
    Profiler,
    ProfilingTask,
    StopReason,
    Toolkit,
    sim,
)
from asc_aprof._model._warmup import is_warming_up, warming_up
from asc_aprof._plans._bench import attribute
from asc_aprof.sim import SimControl


def two_kernels(device: int = 0) -> None:
    sim.launch("matmul", device=device, duration_us=20.0)
    sim.launch("add", device=device, duration_us=5.0, task_type="AI_VECTOR_CORE")


# -- attribution, as a pure function ------------------------------------------------------------------------
def tasks_of(*names: str, duration: float = 1.0) -> list[ProfilingTask]:
    return [ProfilingTask(i, n, "AI_CORE", duration, 0) for i, n in enumerate(names)]


CALL = (("a", "AI_CORE"), ("b", "AI_CORE"))


def split(tasks: Sequence[ProfilingTask], reps: int, *, flush: bool = False) -> list[list[str]]:
    calls, _ = attribute(
        tasks,
        reps,
        device=0,
        run_id="PROF_x",
        types={"AI_CORE"},
        call=CALL,
        kernels=2,
        flush=flush,
        flush_sig=None,
    )
    return [[t.name for t in c] for c in calls]


def test_attribution_splits_by_position_and_drops_the_flush_even_under_the_calls_name() -> None:
    assert split(tasks_of("a", "b", "a", "b"), 2) == [["a", "b"], ["a", "b"]]
    # the flush launches a kernel named like the call's first one: position tells them apart
    assert split(tasks_of("a", "a", "b", "a", "a", "b"), 2, flush=True) == [["a", "b"], ["a", "b"]]


@pytest.mark.parametrize(
    ("names", "reps", "flush", "says"),
    [
        ((), 3, False, "3 call(s) launched no kernel"),
        (("a", "b", "a"), 2, False, "3 kernels for 2 repetitions"),
        (
            ("a", "b", "b", "a", "b", "b"),
            2,
            False,
            "3 kernel(s) per repetition where each call launched 2 [a, b]",
        ),
        (
            ("a", "b", "b", "a"),
            2,
            False,
            "repetition 1 has 'b' (AI_CORE) at position 0 where the call launched 'a'",
        ),
        (
            ("f", "a", "b", "g", "a", "b"),
            2,
            True,
            "repetition 1 has 'g' (AI_CORE) at position 0 where the flush",
        ),
    ],
)
def test_attribution_refuses_what_does_not_fit(
    names: tuple[str, ...], reps: int, flush: bool, says: str
) -> None:
    with pytest.raises(AttributionError, match="cannot attribute kernels to calls") as info:
        split(tasks_of(*names), reps, flush=flush)
    assert says in str(info.value)
    assert "device 0, run PROF_x" in str(info.value)


def test_attribution_names_uncounted_tasks() -> None:
    cpu = [ProfilingTask(1, "x", "AI_CPU", 1.0, 0), ProfilingTask(2, "y", "N/A", 1.0, 0)]
    with pytest.raises(AttributionError, match="1 of type AI_CPU, 1 of type N/A"):
        split(cpu, 1)


@settings(max_examples=300, deadline=None)
@given(
    call=st.lists(st.sampled_from("abc"), min_size=1, max_size=4),
    flush=st.lists(st.sampled_from("abx"), max_size=3),
    reps=st.integers(1, 12),
    data=st.data(),
)
def test_attribution_never_returns_a_wrong_call(
    call: list[str], flush: list[str], reps: int, data: st.DataObject
) -> None:
    """Calibrated signatures: a window is attributed exactly, and any dropped or extra kernel raises."""
    call_sig = tuple((n, "AI_CORE") for n in call)
    flush_sig = tuple((n, "AI_CORE") for n in flush)
    tasks: list[ProfilingTask] = []
    truth: list[list[float]] = []
    for rep in range(reps):
        tasks += [ProfilingTask(None, n, "AI_CORE", 1000.0 + rep, 0) for n in flush]
        durations = [float(rep * 10 + i) for i in range(len(call))]
        tasks += [ProfilingTask(None, n, "AI_CORE", d, 0) for n, d in zip(call, durations, strict=True)]
        truth.append(durations)

    def run(window: list[ProfilingTask]) -> list[list[float]]:
        calls, _ = attribute(
            window,
            reps,
            device=0,
            run_id="PROF_x",
            types={"AI_CORE"},
            call=call_sig,
            kernels=len(call_sig),
            flush=True,
            flush_sig=flush_sig,
        )
        return [[t.duration for t in c] for c in calls]

    assert run(tasks) == truth
    corrupted = list(tasks)
    if data.draw(st.booleans(), label="drop"):
        del corrupted[data.draw(st.integers(0, len(corrupted) - 1), label="at")]
    else:
        where = data.draw(st.integers(0, len(corrupted)), label="at")
        corrupted.insert(where, ProfilingTask(None, data.draw(st.sampled_from("abx")), "AI_CORE", 7.0, 0))
    with pytest.raises(AttributionError):
        run(corrupted)


# -- sync, end to end -------------------------------------------------------------------------------------
def test_fixed_reps_median_is_the_sum_of_the_calls_kernels(toolkit: Toolkit) -> None:
    result = Profiler(toolkit=toolkit).bench(two_kernels, 0, reps=30)
    assert isinstance(result, BenchResult)
    assert result.stop is StopReason.REPS and result.count == 30
    assert result.median_us == 25.0 and (result.ci_low_us, result.ci_high_us) == (25.0, 25.0)
    assert [(k.name, k.type, k.per_call, k.median_us) for k in result.kernels] == [
        ("matmul", "AI_CORE", 1, 20.0),
        ("add", "AI_VECTOR_CORE", 1, 5.0),
    ]
    assert len(result.run_ids) == 2  # calibration, then one window of 30
    assert result.warmup_calls == 2 and result.outliers == ()


def test_flush_kernels_never_count_even_when_named_like_the_calls(toolkit: Toolkit) -> None:
    def flush() -> None:
        sim.launch("matmul", duration_us=500.0)  # the same name as the call's first kernel
        sim.launch("l2_wipe", duration_us=80.0)

    result = Profiler(toolkit=toolkit).bench(two_kernels, 0, flush=flush, reps=12, batch=5)
    assert result.median_us == 25.0 and result.max_us == 25.0
    assert result.flush_kernels == ("matmul", "l2_wipe")
    assert len(result.run_ids) == 2 + 3  # the call alone, the flush alone, then 5 + 5 + 2


def test_a_flush_that_changes_what_it_launches_is_caught(toolkit: Toolkit) -> None:
    flushes = 0

    def flush() -> None:
        nonlocal flushes
        flushes += 1
        # warm-up (2) and the flush's calibration launch one kernel; later flushes none
        if flushes <= 3:
            sim.launch("matmul", duration_us=500.0)

    with pytest.raises(AttributionError, match=r"each call launched 2 .* and the flush 1 \[matmul\]"):
        Profiler(toolkit=toolkit).bench(two_kernels, 0, flush=flush, reps=4)


def test_a_flush_launching_nothing_on_the_device_is_fine(toolkit: Toolkit) -> None:
    result = Profiler(toolkit=toolkit).bench(two_kernels, 0, flush=lambda: sim.launch("x", device=3), reps=6)
    assert result.median_us == 25.0 and result.flush_kernels == ()


def test_a_call_that_launches_nothing_fails_with_the_reason(toolkit: Toolkit) -> None:
    profiler = Profiler(toolkit=toolkit)
    with pytest.raises(AttributionError, match="1 call\\(s\\) launched no kernel that counts on this device"):
        profiler.bench(lambda: sim.launch("elsewhere", device=1), 0)


def test_a_call_whose_kernel_count_changes_fails(toolkit: Toolkit) -> None:
    calls = 0

    def unsteady() -> None:
        nonlocal calls
        calls += 1
        sim.launch("k", count=1 if calls <= 3 else 2)  # warm-up (2), calibration (1), then 2 each

    with pytest.raises(AttributionError, match="2 kernel\\(s\\) per repetition where each call launched 1"):
        Profiler(toolkit=toolkit).bench(unsteady, 0, reps=4)


def test_kernels_given_skips_the_calibration(toolkit: Toolkit) -> None:
    result = Profiler(toolkit=toolkit).bench(two_kernels, 0, reps=8, kernels=2, warmup=0)
    assert len(result.run_ids) == 1 and result.median_us == 25.0 and result.warmup_calls == 0
    with pytest.raises(AttributionError, match="where each call launched 3"):
        Profiler(toolkit=toolkit).bench(two_kernels, 0, reps=8, kernels=3)


def test_warm_up_by_count_and_by_time_runs_outside_any_collection(
    toolkit: Toolkit, simctl: SimControl
) -> None:
    recorded: list[int] = []

    def fn() -> None:
        recorded.append(sim.launch("k", duration_us=3.0))

    result = Profiler(toolkit=toolkit).bench(fn, 0, warmup=4, warmup_time=0.05, reps=3)
    assert result.warmup_calls >= 4
    # warm-up launches were recorded nowhere (0); the calibration and the 3 repetitions were
    assert recorded[: result.warmup_calls] == [0] * result.warmup_calls
    assert recorded[result.warmup_calls :] == [1] * 4


def test_adaptive_reps_converge_on_jitter(toolkit: Toolkit, simctl: SimControl) -> None:
    simctl.set_jitter(0.03, seed=11)
    result = Profiler(toolkit=toolkit).bench(lambda: sim.launch("k", duration_us=10.0), 0, rel_width=0.02)
    assert result.stop is StopReason.CONVERGED and result.rel_width <= 0.02
    assert result.ci_low_us <= result.median_us <= result.ci_high_us
    assert result.count >= 10 and len(result.samples_us) == result.count
    assert result.ci_level >= 0.95


def test_outliers_are_flagged_not_dropped(toolkit: Toolkit, simctl: SimControl) -> None:
    simctl.set_jitter(0.01, seed=3, outlier_rate=0.05, outlier_factor=4.0)
    result = Profiler(toolkit=toolkit).bench(lambda: sim.launch("k", duration_us=10.0), 0, reps=200)
    slow = {i for i, v in enumerate(result.samples_us) if v > 20.0}  # the 4x launches
    assert slow and slow <= set(result.outliers)  # every one flagged (Tukey may add a tail sample)
    assert len(result.outliers) <= len(slow) + 3
    assert result.count == 200 and result.max_us > 20.0  # still in the samples
    assert result.median_us == pytest.approx(10.0, rel=0.01)  # the median shrugs them off


def test_end_to_end_coverage_on_seeded_jitter(toolkit: Toolkit, simctl: SimControl) -> None:
    """A few full benchmarks through the simulator: the interval covers the launched median."""
    profiler = Profiler(toolkit=toolkit)
    covered = 0
    runs = 12
    for seed in range(runs):
        simctl.set_jitter(0.05, seed=seed)
        result = profiler.bench(lambda: sim.launch("k", duration_us=10.0), 0, reps=40, warmup=0)
        covered += result.ci_low_us <= 10.0 <= result.ci_high_us
    # 95% coverage: 12 of 12 is likely, fewer than 10 is a 2% event (seeded: deterministic here)
    assert covered >= 10


def test_several_devices_at_once_from_threads(toolkit: Toolkit) -> None:
    profiler = Profiler(toolkit=toolkit)
    results: dict[int, BenchResult] = {}

    def one(device: int) -> None:
        results[device] = profiler.bench(
            lambda: sim.launch(f"k{device}", device=device, duration_us=5.0 + device), device, reps=20
        )

    threads = [threading.Thread(target=one, args=(d,)) for d in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {d: (r.median_us, r.kernels[0].name, r.count) for d, r in results.items()} == {
        0: (5.0, "k0", 20),
        1: (6.0, "k1", 20),
        2: (7.0, "k2", 20),
    }


def test_do_bench_returns_milliseconds_like_triton(toolkit: Toolkit) -> None:
    profiler = Profiler(toolkit=toolkit)

    class Tensor:
        grad: object = "stale"

    x = Tensor()
    grads_seen: list[object] = []

    def fn() -> None:
        grads_seen.append(x.grad)
        two_kernels()

    mean = profiler.do_bench(fn, warmup=1, rep=0.5, grad_to_none=[x])
    assert mean == pytest.approx(0.025)  # 25 µs
    assert grads_seen[-1] is None
    q = profiler.do_bench(two_kernels, warmup=0, rep=0.5, quantiles=[0.5, 0.2, 0.8])
    assert q == pytest.approx([0.025, 0.025, 0.025])
    samples = profiler.do_bench(two_kernels, warmup=0, rep=0.5, return_mode="all")
    assert isinstance(samples, list) and len(samples) == 20  # 0.5 ms / 25 µs
    with pytest.raises(asc_aprof.UsageError, match="return_mode"):
        profiler.do_bench(two_kernels, return_mode="average")


def test_module_level_bench_and_do_bench(toolkit: Toolkit) -> None:
    result = asc_aprof.bench(two_kernels, 0, toolkit=toolkit, reps=5)
    assert result.median_us == 25.0
    assert asc_aprof.do_bench(two_kernels, warmup=0, rep=0.25, return_mode="min", toolkit=toolkit) == 0.025


def test_bad_options_are_refused_before_anything_runs(toolkit: Toolkit) -> None:
    calls: list[int] = []
    for options, says in [
        ({"reps": 0}, "reps must be None or >= 1"),
        ({"rel_width": 0}, "rel_width must be > 0"),
        ({"max_reps": 3}, "max_reps must be >= min_reps"),
        ({"confidence": 1.0}, "confidence must be in"),
    ]:
        with pytest.raises(asc_aprof.UsageError, match=says):
            Profiler(toolkit=toolkit).bench(lambda: calls.append(1), 0, **options)  # type: ignore[arg-type]
    assert calls == []


# -- async, on asyncio and trio -----------------------------------------------------------------------------
async def test_async_bench_with_coroutine_and_plain_functions(toolkit: Toolkit) -> None:
    profiler = AsyncProfiler(toolkit=toolkit)

    async def fn() -> None:
        two_kernels(1)
        await anyio.lowlevel.checkpoint()

    async def flush() -> None:
        sim.launch("wipe", device=1, duration_us=100.0)

    awaited = await profiler.bench(fn, 1, flush=flush, reps=10)
    threaded = await profiler.bench(lambda: two_kernels(1), 1, reps=10)
    assert (awaited.median_us, awaited.flush_kernels, awaited.device) == (25.0, ("wipe",), 1)
    assert threaded.median_us == 25.0 and threaded.count == 10
    assert await profiler.do_bench(lambda: two_kernels(1), warmup=0, rep=0.25, device_id=1) == pytest.approx(
        0.025
    )


async def test_async_benches_of_several_devices_at_once(toolkit: Toolkit) -> None:
    profiler = AsyncProfiler(toolkit=toolkit)
    results: dict[int, BenchResult] = {}

    async def one(device: int) -> None:
        async def fn() -> None:
            sim.launch("k", device=device, duration_us=2.0 * (device + 1))

        results[device] = await profiler.bench(fn, device, reps=15)

    async with anyio.create_task_group() as tg:
        for device in range(4):
            tg.start_soon(one, device)
    # each device got exactly its own kernels, whichever windows the benchmarks shared
    assert {d: (r.median_us, r.count) for d, r in results.items()} == {
        0: (2.0, 15),
        1: (4.0, 15),
        2: (6.0, 15),
        3: (8.0, 15),
    }


async def test_async_attribution_error_leaves_nothing_running(toolkit: Toolkit, simctl: SimControl) -> None:
    async def nothing() -> None:
        await anyio.lowlevel.checkpoint()

    with pytest.raises(AttributionError, match="launched no kernel"):
        await AsyncProfiler(toolkit=toolkit).bench(nothing, 0)
    assert simctl.running_devices() == []


async def test_cancelled_bench_stops_its_collection(toolkit: Toolkit, simctl: SimControl) -> None:
    profiler = AsyncProfiler(toolkit=toolkit)
    entered = anyio.Event()

    async def slow() -> None:
        if sim.launch("k"):  # recorded: a collection window is running
            entered.set()
        await anyio.sleep(0.05)

    with anyio.move_on_after(5) as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: profiler.bench(slow, 0, reps=1000, batch=1000))
            await entered.wait()
            assert simctl.running_devices() == [0]
            tg.cancel_scope.cancel()
    assert not scope.cancelled_caught
    assert simctl.running_devices() == []


async def test_bench_inside_a_sweep(toolkit: Toolkit) -> None:
    profiler = AsyncProfiler(toolkit=toolkit)
    flushed: list[int] = []

    def run(case: int, device: int) -> None:
        sim.launch(f"tile{case}", device=device, duration_us=10.0 + case)

    def flush(device: int) -> None:
        flushed.append(device)
        sim.launch("wipe", device=device, duration_us=50.0)

    got = {}
    async with profiler.sweep(
        range(6), run, devices=[0, 1, 2], bench=BenchConfig(reps=8), flush=flush
    ) as items:
        async for item in items:
            assert item.error is None and item.result is None and item.bench is not None
            got[item.case] = (
                item.bench.median_us,
                item.bench.device == item.device,
                item.bench.flush_kernels,
            )
    assert got == {case: (10.0 + case, True, ("wipe",)) for case in range(6)}
    assert set(flushed) <= {0, 1, 2} and len(flushed) >= 6 * 8


# -- warm-up calls beside another device's window (first hour) ---------------------------------------
def test_bench_marks_its_warm_up_calls_and_only_them(toolkit: Toolkit) -> None:
    seen: list[bool] = []

    def kernel() -> None:
        seen.append(is_warming_up())
        sim.launch("k")

    Profiler(toolkit=toolkit).bench(kernel, warmup=3, reps=4, min_reps=4, max_reps=4)
    assert seen[:3] == [True, True, True]
    assert seen[3:] and not any(seen[3:])  # the measured calls are not warm-ups
    assert not is_warming_up()


async def test_async_bench_marks_its_warm_up_calls(toolkit: Toolkit) -> None:
    seen: list[bool] = []

    def kernel() -> None:
        seen.append(is_warming_up())
        sim.launch("k")

    await AsyncProfiler(toolkit=toolkit).bench(kernel, warmup=2, reps=3, min_reps=3, max_reps=3)
    assert seen[:2] == [True, True] and seen[2:] and not any(seen[2:])


def test_a_warm_up_launch_beside_another_devices_window_is_not_warned(
    toolkit: Toolkit, simctl: SimControl, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asc_aprof import sim as sim_module

    simctl.set_device_count(2)
    monkeypatch.setattr(sim_module, "_warned_unprofiled", False)
    with caplog.at_level("WARNING", logger="asc_aprof"), Profiler(toolkit=toolkit).profile(0):
        with warming_up():
            sim.launch("warm", device=1)  # another device's bench warming up: expected
        assert not [r for r in caplog.records if "is not being profiled" in r.getMessage()]
        sim.launch("stray", device=1)  # not a warm-up: a wrong device id, said
    assert [r for r in caplog.records if "is not being profiled" in r.getMessage()]
