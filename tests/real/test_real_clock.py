"""The AI Core clock of every task against the real exporter's ``freq.db``.

For every real run, the clock rows the raw reader builds from ``lpmInfoConv`` / ``lpmFreqConv``
equal table ``FreqParse`` of the real ``msprof.py``'s ``device_N/sqlite/freq.db`` (sorted by
counter, as the exporter reads it), and each task's ``aic_mhz`` is the clock of the last row at or
before its start counter, as the exporter looks a clock up; NaN where the run has no clock data.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest

from asc_aprof._plans._raw import RawResult
from asc_aprof._runs._raw_files import read_run

from ..reference import needs_real_runs, real_run_names

pytestmark = needs_real_runs

RUNS = real_run_names()


def freq_db(run: Path, device: int) -> list[tuple[int, float]]:
    """FreqParse of the export, as the exporter reads it back (sorted by counter, stable)."""
    db = run / f"device_{device}" / "sqlite" / "freq.db"
    if not db.is_file():
        return []
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        try:
            rows = conn.execute("SELECT syscnt, freq FROM FreqParse").fetchall()
        except sqlite3.OperationalError:  # no such table
            return []
    return sorted(((int(c), float(f)) for c, f in rows), key=lambda r: r[0])


def exporter_clock(rows: list[tuple[int, float]], rated: float, counter: int) -> float:
    """The exporter's lookup (ffts_pmu_calculator._get_current_freq): the last row at or before."""
    if not rows or any(f == 0 for _, f in rows):
        return math.nan
    found = rated
    for syscnt, freq in rows:
        if counter < syscnt:
            break
        found = freq
    return found


@pytest.mark.parametrize("name", RUNS)
def test_aic_mhz_equals_the_real_exporters_freq_db(name: str, exported: dict[str, tuple[Path, str]]) -> None:
    result_path, run_id = exported[name]
    run = result_path / run_id
    outcome = read_run(run)
    assert isinstance(outcome, RawResult), outcome
    devices = sorted({t.device for t in outcome.tasks})
    clocks = outcome.aic_mhz()
    assert len(clocks) == len(outcome.tasks)
    for device in devices:
        rows = freq_db(run, device)
        table = outcome.clocks.get(device)
        # The rows as a set: on a 910B both of the exporter's parsers write a lpmFreqConv file's
        # rows, concurrently, and one insert can lose SQLite's lock: the same rows once or twice.
        assert sorted(set(table.rows) if table is not None else []) == sorted(set(rows))
        for task, mhz in zip(outcome.tasks, clocks, strict=True):
            if task.device != device:
                continue
            rated = table.rated_mhz if table is not None else math.nan
            want = exporter_clock(rows, rated, task.start_cycles)
            assert (math.isnan(mhz) and math.isnan(want)) or mhz == want, (task, mhz, want)
    if name.startswith("910b"):
        # Every real 910B run carries lpmInfoConv or lpmFreqConv: no task without its clock.
        assert clocks and not any(math.isnan(m) for m in clocks)
    else:
        assert all(math.isnan(m) for m in clocks)


def test_some_real_run_changes_clock_during_the_collection(exported: dict[str, tuple[Path, str]]) -> None:
    """The real PyPTO runs drop to 800 MHz and come back while collecting (lpmInfoConv)."""
    changing = []
    for name, (result_path, run_id) in exported.items():
        rows = freq_db(result_path / run_id, 0)
        if len({f for _, f in rows}) > 1:
            changing.append(name)
    if not changing:
        pytest.skip("no real run here changes its clock")
    assert all("pypto" in n for n in changing)
