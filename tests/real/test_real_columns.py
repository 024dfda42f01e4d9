"""The columnar path on real CANN data: every real run, exported by the real msprof.py, read into
columns (sync and async, C and pure) holds exactly the tasks and counters ``store_result`` gives,
and its statistics and comparisons equal the task path's to the last digit; a version-3 report
with samples, read back, gives them again.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from asc_aprof import (
    Profiler,
    TaskColumns,
    Toolkit,
    aread_columns,
    compare_runs,
    compare_tasks,
    kernel_stats,
    read_columns,
    run_kernel_stats,
)
from asc_aprof._outputs._json_report import load_json_columns, report

from ..reference import needs_real_runs, real_run_names

pytestmark = needs_real_runs

RUNS = real_run_names()


@pytest.mark.parametrize("name", RUNS)
@pytest.mark.parametrize("pure", [False, True])
def test_columns_of_a_real_run_equal_its_result_and_stats(
    name: str,
    pure: bool,
    exported: dict[str, tuple[Path, str]],
    real_toolkit: Toolkit,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ASC_APROF_PURE_PYTHON", "1" if pure else "0")
    if pure:  # the parser's default is read at import: choose it per parser instead
        monkeypatch.setattr("asc_aprof._plans._parser.ACCELERATED", False)
    result_path, run_id = exported[name]
    result = Profiler(result_path, toolkit=real_toolkit, reader="msprof").store_result(run_id, counters=True)
    columns = read_columns(result_path / run_id, counters=True)
    assert columns.tasks() == list(result.tasks) and columns.counters == result.counters
    assert columns.run_id == run_id
    for skip in (0, 1):
        assert kernel_stats(columns, skip=skip) == kernel_stats(result, skip=skip)
        assert run_kernel_stats([columns, columns], skip=skip) == run_kernel_stats(
            [result, result], skip=skip
        )
    assert compare_tasks(columns, columns, resamples=100) == compare_tasks(result, result, resamples=100)


@pytest.mark.parametrize("name", RUNS)
def test_async_columns_equal_the_sync_ones(
    name: str, exported: dict[str, tuple[Path, str]], anyio_backend: str
) -> None:
    result_path, run_id = exported[name]
    sync = read_columns(result_path / run_id, counters=True)
    got = anyio.run(lambda: aread_columns(result_path / run_id, counters=True), backend=anyio_backend)
    assert got == sync


def test_a_report_with_samples_gives_back_the_same_statistics(
    exported: dict[str, tuple[Path, str]], tmp_path: Path
) -> None:
    runs = [read_columns(path / run_id, counters=True) for path, run_id in exported.values()]
    stats = run_kernel_stats(runs)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report(runs, stats, samples=True)), encoding="utf-8")
    loaded = load_json_columns(path)
    assert loaded.runs is not None and loaded.kernels == tuple(stats)
    assert run_kernel_stats(loaded.runs) == stats
    assert run_kernel_stats(loaded.runs, skip=1) == run_kernel_stats(runs, skip=1)
    back = list(loaded.runs)
    assert compare_runs(back, back[::-1], resamples=100) == compare_runs(runs, runs[::-1], resamples=100)
    common = set.intersection(*(set(r.counters.columns) for r in runs if r.counters is not None))
    for metric in sorted(common)[:2]:
        assert compare_runs(back, back[::-1], metric=metric, resamples=50) == compare_runs(
            runs, runs[::-1], metric=metric, resamples=50
        )
    assert all(isinstance(r, TaskColumns) for r in back)
