"""``compare`` in cycle space: a change in time that the AI Core clock explains is not a regression.

Reports with samples carry each task's clock (``aic_mhz``); a kernel slower in time but not in
cycles (duration x clock) is ``AMBIGUOUS: the clock changed`` and ``--fail-on-regression`` passes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asc_aprof import ProfilingTask, TaskColumns
from asc_aprof._outputs._json_report import load_json_columns, report
from asc_aprof._plans._stats import compare_runs, run_kernel_stats
from asc_aprof.cli import AMBIGUOUS_CLOCK, main

N = 40


def columns(run_id: str, us: float, mhz: float | None) -> TaskColumns:
    durations = [round(us * (1 + (i % 7) * 0.002), 3) for i in range(N)]
    cols = TaskColumns(
        [ProfilingTask(i, "add", "AI_VECTOR_CORE", d, 0) for i, d in enumerate(durations)], run_id=run_id
    )
    return cols if mhz is None else cols.with_aic_mhz([mhz] * N)


def write(path: Path, cols: TaskColumns) -> Path:
    path.write_text(json.dumps(report([cols], run_kernel_stats([cols]), samples=True)))
    return path


def test_samples_keep_their_clock_through_a_report(tmp_path: Path) -> None:
    cols = columns("PROF_a", 10.0, 1650.0)
    loaded = load_json_columns(write(tmp_path / "a.json", cols))
    assert loaded.runs is not None
    assert list(loaded.runs[0].aic_mhz()) == [1650.0] * N
    (kernel,) = json.loads((tmp_path / "a.json").read_text())["kernels"]
    assert kernel["aic_mhz"] == 1650.0


def test_a_slowdown_the_clock_explains_is_ambiguous(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = write(tmp_path / "base.json", columns("PROF_b", 10.0, 1650.0))
    new = write(tmp_path / "new.json", columns("PROF_n", 10.0 * 1650 / 800, 800.0))  # same cycles
    (change,) = compare_runs([columns("PROF_b", 10.0, 1650.0)], [columns("PROF_n", 20.625, 800.0)])
    assert change.significant and change.change_pct > 100
    assert change.cycles_change_pct is not None and abs(change.cycles_change_pct) < 1
    assert change.base_aic_mhz == 1650.0 and change.new_aic_mhz == 800.0
    assert change.clock_explains(5.0)
    assert main(["compare", str(base), str(new), "--fail-on-regression"]) == 0
    out = capsys.readouterr().out
    assert AMBIGUOUS_CLOCK in out and "REGRESSION" not in out
    assert main(["compare", str(base), str(new), "--fail-on-regression", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["regressions"] == [] and data["ambiguous"] == ["add"]


def test_a_slowdown_in_cycles_still_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write(tmp_path / "base.json", columns("PROF_b", 10.0, 1650.0))
    # slower, and the clock did not change: a regression in cycles too
    new = write(tmp_path / "new.json", columns("PROF_n", 12.0, 1650.0))
    assert main(["compare", str(base), str(new), "--fail-on-regression"]) == 1
    assert "REGRESSION" in capsys.readouterr().out
    # slower at a lower clock, but more than the clock explains: still a regression
    new = write(tmp_path / "new2.json", columns("PROF_n", 30.0, 800.0))
    assert main(["compare", str(base), str(new), "--fail-on-regression", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["regressions"] == ["add"] and data["ambiguous"] == []


def test_without_clocks_compare_judges_time_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write(tmp_path / "base.json", columns("PROF_b", 10.0, None))
    new = write(tmp_path / "new.json", columns("PROF_n", 20.625, 800.0))  # one side without a clock
    assert main(["compare", str(base), str(new), "--fail-on-regression", "--json"]) == 1
    (kernel,) = json.loads(capsys.readouterr().out)["kernels"]
    assert kernel["cycles_change_pct"] is None and kernel["base_aic_mhz"] is None
