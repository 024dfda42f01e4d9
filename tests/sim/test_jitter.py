"""The simulator's run-to-run noise: seeded, lognormal around the launched duration, off by default."""

from __future__ import annotations

import math
import statistics

import pytest

from asc_aprof import Profiler, sim


def durations(name: str = "k", **launch: object) -> list[float]:
    with Profiler(toolkit=sim.toolkit()).profile(0) as run:
        sim.launch(name, **launch)  # type: ignore[arg-type]
    assert run.result is not None
    return [t.duration for t in run.result.tasks]


def test_off_by_default_and_after_reset() -> None:
    assert set(durations(duration_us=7.5, count=50)) == {7.5}
    sim.control().set_jitter(0.1, seed=1)
    sim.control().reset()
    assert set(durations(duration_us=7.5, count=50)) == {7.5}


def test_lognormal_with_the_launched_median_and_sigma() -> None:
    sim.control().set_jitter(0.05, seed=42)
    values = durations(duration_us=20.0, count=4000)
    logs = [math.log(v / 20.0) for v in values]
    assert statistics.median(values) == pytest.approx(20.0, rel=0.005)
    assert statistics.stdev(logs) == pytest.approx(0.05, rel=0.05)
    assert abs(statistics.fmean(logs)) < 0.003


def test_seeded_and_reproducible_and_per_launch_override() -> None:
    control = sim.control()
    control.set_jitter(0.03, seed=7)
    first = durations(duration_us=10.0, count=20)
    control.set_jitter(0.03, seed=7)
    again = durations(duration_us=10.0, count=20)
    control.set_jitter(0.03, seed=8)
    other = durations(duration_us=10.0, count=20)
    assert first == again and first != other
    assert set(durations(duration_us=10.0, count=20, jitter=0.0)) == {10.0}  # exact for this launch
    control.set_jitter(0.0)
    assert len(set(durations(duration_us=10.0, count=20, jitter=0.2))) > 1  # noisy for this launch only


def test_outliers_at_the_given_rate_and_factor() -> None:
    sim.control().set_jitter(0.0, seed=3, outlier_rate=0.1, outlier_factor=5.0)
    values = durations(duration_us=10.0, count=2000)
    assert set(values) == {10.0, 50.0}
    assert values.count(50.0) / len(values) == pytest.approx(0.1, abs=0.02)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"sigma": -0.1},
        {"sigma": 10.0},
        {"sigma": 0.1, "outlier_rate": 1.5},
        {"sigma": 0.1, "outlier_factor": 0.5},
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, float]) -> None:
    sigma = kwargs.pop("sigma")
    with pytest.raises(ValueError, match="set_jitter"):
        sim.control().set_jitter(sigma, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="seed"):
        sim.control().set_jitter(0.1, seed=-1)
    with pytest.raises(ValueError, match="jitter must be"):
        sim.launch("k", jitter=-1.0)
