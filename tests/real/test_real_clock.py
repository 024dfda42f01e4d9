"""The AI Core clock of every task against the real exporter's ``freq.db``, and in every output.

For every real run, the clock rows the raw reader builds from ``lpmInfoConv`` / ``lpmFreqConv``
equal table ``FreqParse`` of the real ``msprof.py``'s ``device_N/sqlite/freq.db`` (sorted by
counter, as the exporter reads it), and each task's ``aic_mhz`` is the clock of the last row at or
before its start counter, as the exporter looks a clock up; NaN where the run has no clock data.
"""

from __future__ import annotations

import json
import math
import sqlite3
import statistics
from pathlib import Path

import pytest

from asc_aprof._outputs._report_write import model_of
from asc_aprof._outputs._trace import CLOCK_TRACK, pid_of, trace_lines
from asc_aprof._plans._raw import RawResult
from asc_aprof._runs._raw_files import read_run
from asc_aprof.cli import main
from asc_aprof.report import read_timeline

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


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None or math.isnan(a) or math.isnan(b):
        return (a is None or math.isnan(a)) and (b is None or math.isnan(b))
    return a == pytest.approx(b, rel=1e-12)


@pytest.mark.parametrize("name", RUNS)
def test_timeline_trace_report_and_summary_carry_the_exporters_clock(
    name: str, exported: dict[str, tuple[Path, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    """Timeline tasks, the trace's clock track, the report's kernels and ``summary --json`` give
    the clock ``freq.db`` gives (each task's at its start; per kernel the median)."""
    result_path, run_id = exported[name]
    run = result_path / run_id
    raw = read_run(run)
    assert isinstance(raw, RawResult), raw
    rows = {d: freq_db(run, d) for d in {t.device for t in raw.tasks}}
    want = []
    for task in raw.tasks:
        table = raw.clocks.get(task.device)
        rated = table.rated_mhz if table is not None else math.nan
        want.append(exporter_clock(rows[task.device], rated, task.start_cycles))

    timeline = read_timeline(run)
    assert [t.task for t in timeline.tasks] == [t.task() for t in raw.tasks]
    assert all(_same(t.aic_mhz, w) for t, w in zip(timeline.tasks, want, strict=True))

    # the trace: every task's args, and per device the clock at each task start where it changes
    trace = json.loads("".join(trace_lines([timeline])))
    tasks = [e for e in trace["traceEvents"] if e["ph"] == "X" and e.get("cat") != "run"]
    assert len(tasks) == len(want)
    track = [
        (e["pid"], e["ts"], e["args"]["value"]) for e in trace["traceEvents"] if e.get("name") == CLOCK_TRACK
    ]
    expected_track = []
    by_pid: dict[int, list[tuple[int, float]]] = {}
    for timed, mhz in zip(timeline.tasks, want, strict=True):
        if not math.isnan(mhz) and timed.start_ns is not None:
            by_pid.setdefault(pid_of(timed.task.device), []).append((timed.start_ns, mhz))
    origin = min(t.start_ns for t in timeline.tasks if t.start_ns is not None)
    for pid, starts in sorted(by_pid.items()):
        last = None
        for start, mhz in sorted(starts, key=lambda p: p[0]):
            if mhz != last:
                expected_track.append((pid, (start - origin) / 1000, mhz))
                last = mhz
    assert sorted(track) == sorted(expected_track)
    known = [e["args"].get("aic_mhz") for e in tasks]
    assert sorted(k for k in known if k is not None) == sorted(w for w in want if not math.isnan(w))

    # per kernel: the median of its tasks' clocks (report and summary --json)
    medians: dict[tuple[int | None, str], float | None] = {}
    for device, kernel in {(t.device, t.name) for t in raw.tasks}:
        clocks = [w for t, w in zip(raw.tasks, want, strict=True) if (t.device, t.name) == (device, kernel)]
        finite = [c for c in clocks if not math.isnan(c)]
        medians[(device, kernel)] = statistics.median(finite) if finite else None
    model = model_of([timeline], verdict=None)
    assert model.kernels
    for view in model.kernels:
        assert _same(view.aic_mhz, medians[(view.device, view.name)]), view
    assert main(["summary", str(run), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for entry in data["kernels"]:
        assert _same(entry.get("aic_mhz"), medians[(entry["device"], entry["name"])]), entry
    (run_entry,) = data["runs"]
    finite = sorted(w for w in want if not math.isnan(w))
    if finite:
        assert run_entry["aic_mhz"] == {
            "median": statistics.median(finite),
            "min": finite[0],
            "max": finite[-1],
            "tasks": len(finite),
        }
    else:
        assert "aic_mhz" not in run_entry
