"""tune(): the racing rule on synthetic samplers (many seeds), end to end on the simulator, the cache."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import pytest

import asc_aprof
from asc_aprof import (
    AsyncProfiler,
    CandidateStatus,
    Profiler,
    Toolkit,
    TuneError,
    TuneStop,
    sim,
)
from asc_aprof._profilers._tune import (
    Calibration,
    Measured,
    Race,
    RaceOutcome,
    cache_key,
    default_cache_dir,
    race,
)
from asc_aprof.sim import SimControl


# -- the rule, on synthetic samplers --------------------------------------------------------------------
def fake_result(samples: Sequence[float]) -> Measured:
    return Measured(tuple(samples), Calibration((("k", "AI_CORE"),), None))


def run_race(
    steps: Race, sample: Callable[[int, int], list[float] | BaseException]
) -> tuple[RaceOutcome, list[list[int]]]:
    """Drive a race with *sample(index, reps)*; also returns each round's order of indices."""
    orders: list[list[int]] = []
    outcome: dict[int, Measured | BaseException] | None = None
    while True:
        try:
            step = steps.send(outcome)  # type: ignore[arg-type]
        except StopIteration as stop:
            return stop.value, orders
        orders.append([r.index for r in step.requests])
        outcome = {}
        for r in step.requests:
            got = sample(r.index, r.reps)
            outcome[r.index] = got if isinstance(got, BaseException) else fake_result(got)


def lognormal(medians: Sequence[float], sigma: float, seed: int) -> Callable[[int, int], list[float]]:
    rng = random.Random(seed)
    return lambda i, n: [medians[i] * math.exp(sigma * rng.gauss(0, 1)) for _ in range(n)]


#: 8 candidates, the fastest 3% ahead of the next, 3% log-normal noise (like the simulator's jitter).
MEDIANS = (12.0, 10.0, 10.3, 15.0, 11.0, 20.0, 13.0, 10.6)


def test_racing_finds_the_fastest_in_at_least_99_percent_of_200_seeds_with_under_half_the_reps() -> None:
    wins, raced, brute = 0, 0, 0
    for seed in range(200):
        outcome, _ = run_race(race(len(MEDIANS), seed=seed), lognormal(MEDIANS, 0.03, seed))
        baseline, _ = run_race(race(len(MEDIANS), seed=seed, racing=False), lognormal(MEDIANS, 0.03, seed))
        wins += outcome.best_index == 1
        raced += sum(map(len, outcome.samples))
        brute += sum(map(len, baseline.samples))
        # measuring all equally gives every candidate an interval of the same target width
        assert all(
            baseline.interval(i)[2] - baseline.interval(i)[1] <= 0.02 * baseline.interval(i)[0]
            for i in range(len(MEDIANS))
        )
        assert outcome.stop is TuneStop.CONVERGED
    assert wins >= 198, wins
    assert raced < brute / 2, (raced, brute)


def test_rounds_are_shuffled_by_the_seed_and_reproducible() -> None:
    _, first = run_race(race(8, seed=3), lognormal([10.0] * 8, 0.05, 0))
    _, again = run_race(race(8, seed=3), lognormal([10.0] * 8, 0.05, 0))
    _, other = run_race(race(8, seed=4), lognormal([10.0] * 8, 0.05, 0))
    assert first == again
    assert first != other
    # no candidate always goes first: over the rounds and seeds, the first slot moves
    starts = {run_race(race(8, seed=s), lognormal([10.0] * 8, 0.05, 0))[1][0][0] for s in range(20)}
    assert len(starts) > 3


def test_equal_candidates_end_tied_and_measured_to_the_width() -> None:
    outcome, _ = run_race(race(3, seed=0), lognormal([10.0, 10.0, 10.0], 0.03, 1))
    statuses = sorted(s.value for s in outcome.statuses)
    assert statuses.count("best") == 1
    assert "tied" in statuses
    for i in range(3):
        median, low, high = outcome.interval(i)
        if outcome.statuses[i] is not CandidateStatus.ELIMINATED:
            assert high - low <= 0.02 * median


def test_a_failing_candidate_is_reported_and_the_race_goes_on() -> None:
    good = lognormal([10.0, 12.0, 11.0], 0.02, 0)

    def sample(i: int, n: int) -> list[float] | BaseException:
        return ValueError("tile too large") if i == 0 else good(i, n)

    outcome, _ = run_race(race(3), sample)
    assert outcome.statuses[0] is CandidateStatus.FAILED
    assert outcome.errors[0] == "ValueError: tile too large"
    assert outcome.best_index == 2


def test_max_reps_stops_a_race_that_cannot_converge() -> None:
    outcome, _ = run_race(race(2, max_reps=40), lognormal([10.0, 10.0], 0.5, 0))
    assert outcome.stop is TuneStop.MAX_REPS
    assert all(len(s) <= 40 for s in outcome.samples)


# -- end to end on the simulator ------------------------------------------------------------------------
SPEEDS = (12.0, 10.0, 10.6, 15.0)


def launch_config(config: int, device: int) -> None:
    sim.launch("tile", device=device, duration_us=SPEEDS[config])


def test_tune_on_the_simulator_finds_the_fastest_and_caches(
    toolkit: Toolkit, simctl: SimControl, tmp_path: Path
) -> None:
    simctl.set_jitter(0.03, seed=7)
    profiler = Profiler(toolkit=toolkit)
    result = profiler.tune(range(4), launch_config, key=("tile", 128), cache_dir=tmp_path, seed=1)
    assert result.best == 1 and not result.cached
    assert result.candidates[1].status is CandidateStatus.BEST
    assert result.candidates[3].status is CandidateStatus.ELIMINATED
    assert result.candidates[3].count < result.candidates[1].count
    assert "best" in result.table().splitlines()[1]
    assert result.key is not None and result.key["chip"] == "910B" and result.key["cann"] == "8.5"
    again = profiler.tune(range(4), launch_config, key=("tile", 128), cache_dir=tmp_path)
    assert again.cached and again.best == 1 and again.stop is TuneStop.CACHED
    assert [c.median_us for c in again.candidates] == [c.median_us for c in result.candidates]
    # another CANN version is another key
    simctl.configure(cann="9.0")
    other = profiler.tune(range(4), launch_config, key=("tile", 128), cache_dir=tmp_path, seed=1)
    assert not other.cached and other.key is not None and other.key["cann"] == "9.0"


def test_a_device_measures_a_whole_round_in_one_window(toolkit: Toolkit, simctl: SimControl) -> None:
    simctl.set_jitter(0.03, seed=2)
    windows: list[str] = []

    def seen(event: asc_aprof.ProgressEvent) -> None:
        if event.kind == "collection_started":
            windows.append(str(event.run_id))

    result = Profiler(toolkit=toolkit, progress=seen).tune(range(4), launch_config, cache=False, seed=3)
    assert result.best == 1
    # one window per round for all of them: round 0's window also gives each candidate's kernels
    assert len(windows) == result.rounds


def test_kernels_alike_across_candidates_are_calibrated_alone_when_a_window_reads_two_ways(
    toolkit: Toolkit, simctl: SimControl
) -> None:
    """Candidate 0 launches one "tile", candidate 1 two: a window of their parts reads either way
    by position, so each is calibrated in a window of its own (after the round's, which is kept)."""
    simctl.set_jitter(0.02, seed=1)
    windows: list[str] = []

    def seen(event: asc_aprof.ProgressEvent) -> None:
        if event.kind == "collection_started":
            windows.append(str(event.run_id))

    def run(config: int, device: int) -> None:
        sim.launch("tile", device=device, duration_us=30.0, count=config + 1)

    result = Profiler(toolkit=toolkit, progress=seen).tune([0, 1], run, cache=False)
    assert result.best == 0
    assert result.candidates[0].median_us == pytest.approx(30.0, rel=0.1)
    assert result.candidates[1].median_us == pytest.approx(60.0, rel=0.1)
    assert len(windows) == result.rounds + 2


def test_a_call_whose_kernel_count_changes_inside_round_0_fails_alone(
    toolkit: Toolkit, simctl: SimControl
) -> None:
    calls = [0, 0, 0]

    def run(config: int, device: int) -> None:
        calls[config] += 1
        sim.launch("tile", device=device, duration_us=10.0 + config)
        if config == 1 and calls[config] % 3 == 0:
            sim.launch("extra", device=device, duration_us=1.0)

    result = Profiler(toolkit=toolkit).tune(range(3), run, cache=False)
    assert result.candidates[1].status is CandidateStatus.FAILED
    assert "AttributionError" in (result.candidates[1].error or "")
    assert result.best == 0 and result.candidates[2].status is not CandidateStatus.FAILED


def test_a_misbehaving_candidate_in_a_shared_window_fails_alone(toolkit: Toolkit, simctl: SimControl) -> None:
    """After round 0 (2 warm-up calls, then 2 + 10 in its window) candidate 2 launches an extra
    kernel and 4 raises: each fails with its own error, their neighbours in the window are measured."""
    simctl.set_jitter(0.03, seed=4)
    speeds = (12.0, 10.0, 10.3, 15.0, 10.6, 11.0)
    calls = [0] * len(speeds)

    def run(config: int, device: int) -> None:
        calls[config] += 1
        sim.launch("tile", device=device, duration_us=speeds[config])
        if config == 2 and calls[config] > 14:
            sim.launch("tile", device=device, duration_us=1.0)
        if config == 4 and calls[config] > 14:
            raise RuntimeError("tiling 4 ran out of UB")

    result = Profiler(toolkit=toolkit).tune(range(len(speeds)), run, cache=False, seed=0)
    by_index = result.candidates
    assert by_index[2].status is CandidateStatus.FAILED and "AttributionError" in (by_index[2].error or "")
    assert by_index[4].status is CandidateStatus.FAILED and "out of UB" in (by_index[4].error or "")
    assert all(
        c.status is not CandidateStatus.FAILED and c.count > 0 for c in by_index if c.index not in (2, 4)
    )
    assert result.best == 1


def test_a_failing_candidate_on_the_simulator_is_a_row_not_an_exception(
    toolkit: Toolkit, simctl: SimControl
) -> None:
    def run(config: int, device: int) -> None:
        if config == 0:
            raise RuntimeError("no such tiling")
        launch_config(config, device)

    result = asc_aprof.tune(range(3), run, toolkit=toolkit, cache=False)
    assert result.best == 1
    assert result.candidates[0].status is CandidateStatus.FAILED
    assert "no such tiling" in (result.candidates[0].error or "")
    with pytest.raises(TuneError, match="every candidate failed"):
        asc_aprof.tune([0], run, toolkit=toolkit, cache=False)


async def test_async_tune_on_two_devices_with_a_flush(
    toolkit: Toolkit, simctl: SimControl, tmp_path: Path
) -> None:
    simctl.set_jitter(0.02, seed=3)
    flushed: list[int] = []

    async def run(config: int, device: int) -> None:
        await anyio.lowlevel.checkpoint()
        launch_config(config, device)

    def flush(device: int) -> None:
        flushed.append(device)
        sim.launch("flush_l2", device=device, duration_us=50.0)

    profiler = AsyncProfiler(toolkit=toolkit)
    result = await profiler.tune(
        range(4), run, [0, 1], flush=flush, key="k", cache_dir=tmp_path, chip="x", cann="y"
    )
    assert result.best == 1
    assert {0, 1} <= set(flushed)
    # the flush's 50 us never count
    assert all(c.median_us < 20 for c in result.candidates)
    hit = await profiler.tune(range(4), run, [0, 1], key="k", cache_dir=tmp_path, chip="x", cann="y")
    assert hit.cached and hit.best == 1


def test_a_second_process_reuses_the_winner(toolkit: Toolkit, simctl: SimControl, tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import json, sys
        from asc_aprof import Profiler, sim
        speeds = (12.0, 10.0, 10.6, 15.0)
        calls = []
        def run(config, device):
            calls.append(config)
            sim.launch("tile", device=device, duration_us=speeds[config])
        result = Profiler(toolkit=sim.toolkit()).tune(range(4), run, key=("tile", 128))
        print(json.dumps({"best": result.best, "cached": result.cached, "calls": len(calls)}))
        """
    )
    env = {**__import__("os").environ, "ASC_APROF_TUNE_CACHE": str(tmp_path)}
    outs = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(2)
    ]
    assert outs[0]["best"] == 1 and not outs[0]["cached"] and outs[0]["calls"] > 0
    assert outs[1] == {"best": 1, "cached": True, "calls": 0}
    assert len(list(tmp_path.glob("*.json"))) == 1


def test_retune_measures_again_and_the_key_holds_every_field(
    toolkit: Toolkit, simctl: SimControl, tmp_path: Path
) -> None:
    profiler = Profiler(toolkit=toolkit)
    first = profiler.tune(range(2), launch_config, key="r", cache_dir=tmp_path, chip="c", cann="v")
    again = profiler.tune(
        range(2), launch_config, key="r", cache_dir=tmp_path, chip="c", cann="v", retune=True
    )
    assert not first.cached and not again.cached
    assert set(cache_key("r", [0, 1], "c", "v")) == {"key", "candidates", "chip", "cann", "asc_aprof"}
    assert default_cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/asc-aprof/tune")
    assert default_cache_dir({"ASC_APROF_TUNE_CACHE": "/y", "XDG_CACHE_HOME": "/x"}) == Path("/y")


# -- the chip/CANN probe (first hour) ---------------------------------------------------------------------
def test_a_cached_tune_neither_collects_nor_warns_and_its_table_says_cache(
    toolkit: Toolkit, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asc_aprof._profilers import _tune

    profiler = Profiler(toolkit=toolkit)
    first = profiler.tune(range(4), launch_config, key=("probe", 1), cache_dir=tmp_path, seed=1)
    assert not first.cached and not first.table().startswith("from the tune cache")
    windows: list[bool] = []
    real_collect = Profiler._collect

    def counting(self: Profiler, *args: object, **kwargs: object) -> object:
        windows.append(True)
        return real_collect(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Profiler, "_collect", counting)
    with caplog.at_level("WARNING", logger="asc_aprof"):
        again = profiler.tune(range(4), launch_config, key=("probe", 1), cache_dir=tmp_path)
    assert again.cached and windows == []  # the simulated library says its chip and CANN itself
    assert again.table().startswith("from the tune cache (nothing measured this call; retune=True")
    assert not [r for r in caplog.records if "recorded no kernel" in r.getMessage()]
    # A library that cannot say (CANN's own): one empty window per device and process, and no warning.
    monkeypatch.setattr(_tune, "_probed", {})
    monkeypatch.setattr(type(profiler.msprof), "simulated_platform", lambda self: None)
    with caplog.at_level("WARNING", logger="asc_aprof"):
        for _ in range(3):
            assert profiler.tune(range(4), launch_config, key=("probe", 1), cache_dir=tmp_path).cached
    assert len(windows) == 1
    assert not [r for r in caplog.records if "recorded no kernel" in r.getMessage()]
    assert profiler.results == {}  # the probe's window is not a result of the user's
