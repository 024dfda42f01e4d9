"""Statistics that respect runs: --skip drops each run's (device, kernel) leading samples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asc_aprof import Profiler, ProfilingTask, Toolkit, sim
from asc_aprof._plans._stats import compare_runs, run_kernel_stats
from asc_aprof.cli import main


def task(name: str, duration: float, device: int = 0) -> ProfilingTask:
    return ProfilingTask(None, name, "AI_CORE", duration, device)


def cold_run(device: int = 0, steady: float = 10.0) -> list[ProfilingTask]:
    """A run that starts with one 100 µs warm-up launch, then steady ones."""
    return [task("k", 100.0, device)] + [task("k", steady, device) for _ in range(3)]


def test_skip_applies_to_each_run_not_to_the_merged_samples() -> None:
    runs = [cold_run(), cold_run(), cold_run()]
    (stats,) = run_kernel_stats(runs, skip=1)
    assert (stats.count, stats.max_us, stats.mean_us, stats.median_us) == (9, 10.0, 10.0, 10.0)
    # merged first, the skip would drop one warm-up and keep two: the numbers the issue saw
    (merged,) = run_kernel_stats([[t for r in runs for t in r]], skip=1)
    assert (merged.max_us, merged.mean_us) == (100.0, 26.364)  # (2 * 100 + 9 * 10) / 11


def test_skip_is_per_device_and_kernel_within_a_run() -> None:
    run = cold_run(0) + cold_run(1, steady=20.0) + [task("other", 5.0), task("other", 6.0)]
    by_key = {(s.device, s.name): s for s in run_kernel_stats([run, run], skip=1)}
    assert by_key[(0, "k")].max_us == 10.0 and by_key[(0, "k")].count == 6
    assert by_key[(1, "k")].max_us == 20.0 and by_key[(1, "k")].count == 6
    assert by_key[(0, "other")].count == 2 and by_key[(0, "other")].min_us == 6.0


def test_compare_skips_per_run() -> None:
    base = [cold_run(steady=10.0) for _ in range(3)]
    new = [cold_run(steady=10.0) for _ in range(3)]
    (change,) = compare_runs(base, new, skip=1)
    assert (change.base_median_us, change.new_median_us, change.base_count) == (10.0, 10.0, 9)
    assert not change.significant


def make_cold_runs(result_dir: Path, toolkit: Toolkit, steady: float, runs: int = 3) -> None:
    profiler = Profiler(result_dir, toolkit=toolkit)
    for _ in range(runs):
        with profiler.profile(device_id=0, cleanup=False):
            sim.launch("k", duration_us=100.0)
            sim.launch("k", duration_us=steady, count=5)


def test_cli_summary_skip_is_per_run(
    toolkit: Toolkit, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_cold_runs(tmp_path / "runs", toolkit, 10.0)
    assert main(["summary", str(tmp_path / "runs"), "--skip", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["runs"]) == 3
    (k,) = data["kernels"]
    assert (k["count"], k["max_us"], k["mean_us"], k["median_us"]) == (15, 10.0, 10.0, 10.0)


def test_cli_compare_skip_is_per_run(
    toolkit: Toolkit, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_cold_runs(tmp_path / "base", toolkit, 10.0)
    make_cold_runs(tmp_path / "new", toolkit, 10.0)
    assert main(["compare", str(tmp_path / "base"), str(tmp_path / "new"), "--skip", "1", "--json"]) == 0
    (k,) = json.loads(capsys.readouterr().out)["kernels"]
    assert (k["base_median_us"], k["new_median_us"], k["base_count"], k["new_count"]) == (10.0, 10.0, 15, 15)
