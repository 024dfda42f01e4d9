"""The history store, its gate and trend page: on SQLite, and on PostgreSQL where a server is given.

PostgreSQL runs where ``ASC_APROF_TEST_POSTGRES`` holds a URL (``.ci/run`` starts Debian's server
and sets it); elsewhere those cases skip with one sentence, except with ``CI=true``, where they fail.
Each PostgreSQL case gets a schema of its own, dropped afterwards.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from asc_aprof import Profiler, ProfileType, history, sim
from asc_aprof._outputs import _history_store
from asc_aprof._plans._gate import GatePoint, GateVerdict, judge
from asc_aprof.cli import main as cli_main
from asc_aprof.history import Environment, HistoryError, HistoryRecord, HistoryStore, KernelEntry
from asc_aprof.sim import SimControl

pytest_plugins = ["pytester"]

POSTGRES_ENV = "ASC_APROF_TEST_POSTGRES"
REPO = Path(__file__).resolve().parents[1]


def _postgres_url() -> str:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        reason = f"the PostgreSQL cases need a server: set {POSTGRES_ENV} to its URL (.ci/run starts one)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason + " (CI sets it, so this is a broken CI setup)")
        pytest.skip(reason)
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store's location: a SQLite file, or a PostgreSQL schema of its own."""
    if request.param == "sqlite":
        yield str(tmp_path / "history.sqlite3")
        return
    url = _postgres_url()
    import psycopg

    schema = f"aprof_{secrets.token_hex(6)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    joiner = "&" if "?" in url else "?"
    try:
        yield f"{url}{joiner}options={quote(f'-csearch_path={schema}')}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def entry(
    median: float, *, spread: float = 0.2, mhz: float | None = None, kernel: str = "add_custom"
) -> KernelEntry:
    return KernelEntry(
        chip="Ascend 910B", task_type="AI_CORE", kernel=kernel, count=50, median_us=median,
        ci_low_us=median - spread, ci_high_us=median + spread, p10_us=median - 2 * spread,
        p90_us=median + 2 * spread, counters={"aic_mac_ratio": 0.5}, aic_mhz=mhz,
    )  # fmt: skip


def record(*entries: KernelEntry, label: str | None = None) -> HistoryRecord:
    env = Environment(_dt.datetime.now(_dt.timezone.utc), "host-a", "0.test", "8.0.RC1", None)
    return HistoryRecord("test", env, tuple(entries), label=label)


# -- the gate's rule, pure ---------------------------------------------------------------------------
def points(*medians: float, mhz: float | None = None) -> list[GatePoint]:
    return [GatePoint(n, m, m - 0.2, m + 0.2, mhz) for n, m in enumerate(medians, start=1)]


def test_unchanged_passes_and_a_50_percent_slowdown_fails() -> None:
    assert judge("k", points(10, 10.1, 9.9, 10, 10.05, 10)).verdict is GateVerdict.PASS
    slow = judge("k", points(10, 10.1, 9.9, 10, 10.05, 15))
    assert slow.verdict is GateVerdict.REGRESSION and slow.verdict.fails
    assert slow.change == pytest.approx(0.5)
    assert "k: regression" in slow.message() and "+50.0%" in slow.message()


def test_noise_is_not_a_regression() -> None:
    # 8% slower but inside the highest interval of the window: within noise
    base = [GatePoint(1, 10, 9, 11), GatePoint(2, 10, 9.5, 10.9)]
    assert judge("k", [*base, GatePoint(3, 10.8, 10.5, 11.2)]).verdict is GateVerdict.PASS
    # beyond every interval but under the practical threshold
    assert judge("k", points(10, 10, 10.45)).verdict is GateVerdict.PASS
    assert judge("k", points(10, 10, 10.45), min_change=0.01).verdict is GateVerdict.REGRESSION


def test_only_the_window_is_the_baseline() -> None:
    old_slow = points(20, 20, 10, 10, 10, 10, 10, 10)
    assert judge("k", old_slow, window=5).baseline_median_us == 10
    assert len(judge("k", old_slow, window=3).baseline) == 3


def test_a_slowdown_explained_by_the_clock_is_ambiguous_not_a_regression() -> None:
    base = [GatePoint(n, 10, 9.8, 10.2, 1650.0) for n in range(1, 6)]
    # the clock dropped to 1100 MHz: 15 us at 1100 MHz is the same number of cycles as 10 at 1650
    dip = judge("k", [*base, GatePoint(6, 15, 14.8, 15.2, 1100.0)])
    assert dip.verdict is GateVerdict.AMBIGUOUS_CLOCK and not dip.verdict.fails
    assert dip.cycles_change == pytest.approx(0.0)
    # the same slowdown at the same clock is a regression
    assert judge("k", [*base, GatePoint(6, 15, 14.8, 15.2, 1650.0)]).verdict is GateVerdict.REGRESSION
    # a clock unknown on one side: judged in time
    assert judge("k", [*base, GatePoint(6, 15, 14.8, 15.2, None)]).verdict is GateVerdict.REGRESSION


def test_a_single_record_has_no_baseline() -> None:
    only = judge("k", points(10))
    assert only.verdict is GateVerdict.NO_BASELINE and not only.verdict.fails


# -- the store ------------------------------------------------------------------------------------
def test_records_round_trip(db: str) -> None:
    with HistoryStore(db) as store:
        assert store.schema_version == _history_store.SCHEMA_VERSION
        first = store.add(record(entry(10.0, mhz=1650.0), entry(3.0, kernel="mul"), label="nightly"))
        second = store.add(record(entry(11.0)))
        assert second > first
        stored = store.kernels()
    assert [(s.record_id, s.entry.kernel) for s in stored] == [
        (first, "add_custom"),
        (first, "mul"),
        (second, "add_custom"),
    ]
    assert stored[0].entry == entry(10.0, mhz=1650.0)
    assert stored[0].label == "nightly" and stored[0].environment.cann_version == "8.0.RC1"
    with HistoryStore(db) as store:
        assert [s.entry.median_us for s in store.kernels("add_custom")] == [10.0, 11.0]
        assert [s.entry.kernel for s in store.kernels("Ascend 910B / AI_CORE / mul")] == ["mul"]


def test_five_records_then_unchanged_pass_and_a_slower_one_fails(db: str) -> None:
    with HistoryStore(db) as store:
        for median in (10.0, 10.1, 9.9, 10.0, 10.05):
            store.add(record(entry(median), entry(3.0, kernel="mul")))
        store.add(record(entry(10.0), entry(3.0, kernel="mul")))
    assert all(o.verdict is GateVerdict.PASS for o in history.gate(db))
    with HistoryStore(db) as store:
        store.add(record(entry(15.0), entry(3.0, kernel="mul")))
    outcomes = {o.kernel: o for o in history.gate(db)}
    assert outcomes["Ascend 910B / AI_CORE / add_custom"].verdict is GateVerdict.REGRESSION
    assert outcomes["Ascend 910B / AI_CORE / mul"].verdict is GateVerdict.PASS


def test_a_newer_schema_is_refused_and_an_older_one_migrated(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE aprof_schema (version INTEGER NOT NULL)")
    conn.execute("INSERT INTO aprof_schema VALUES (1)")
    for statement in _history_store.MIGRATIONS[0]:
        conn.execute(statement.format(**_history_store._SQLITE_TYPES))
    conn.commit()
    conn.close()
    with HistoryStore(path) as store:  # version 1: brought to the current one
        assert store.schema_version == _history_store.SCHEMA_VERSION
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'kernels_by_key'").fetchone()
    conn.execute("UPDATE aprof_schema SET version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(HistoryError, match="schema version 99, written by a newer asc-aprof"):
        HistoryStore(path)


def test_a_store_behind_a_link_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real.sqlite3"
    HistoryStore(real).close()
    link = tmp_path / "link.sqlite3"
    link.symlink_to(real)
    with pytest.raises(HistoryError, match="symbolic link"):
        HistoryStore(link)
    with pytest.raises(HistoryError, match="does not exist"):
        HistoryStore(tmp_path / "missing" / "h.sqlite3")


def test_the_default_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ASC_APROF_HISTORY", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert history.default_location() == str(tmp_path / "data" / "asc-aprof" / "history.sqlite3")
    with HistoryStore() as store:  # its folder is made
        assert Path(store.location).is_file()
    monkeypatch.setenv("ASC_APROF_HISTORY", str(tmp_path / "env.sqlite3"))
    assert history.default_location() == str(tmp_path / "env.sqlite3")


_WRITER = textwrap.dedent(
    """
    import datetime, sys
    from asc_aprof.history import Environment, HistoryRecord, HistoryStore, KernelEntry
    db, who, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    env = Environment(datetime.datetime.now(datetime.timezone.utc), who, "0.test")
    for n in range(count):
        kernels = tuple(
            KernelEntry("Ascend 910B", "AI_CORE", f"k{k}", 10, 1.0 + n, 0.9 + n, 1.1 + n, 0.8, 1.2)
            for k in range(20)
        )
        with HistoryStore(db) as store:
            store.add(HistoryRecord(f"{who}-{n}", env, kernels))
    """
)


def _python(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, *args], env=env, text=True, stderr=subprocess.PIPE)


def test_four_processes_recording_at_once_all_land(db: str) -> None:
    HistoryStore(db).close()  # the schema first: the writers race on records, not on creation
    writers = [_python("-c", _WRITER, db, f"w{n}", "5") for n in range(4)]
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
    with HistoryStore(db) as store:
        assert store.record_count() == 20
        stored = store.kernels()
    assert len(stored) == 20 * 20
    per_record: dict[int, int] = {}
    for item in stored:
        per_record[item.record_id] = per_record.get(item.record_id, 0) + 1
    assert set(per_record.values()) == {20}  # no record lost a kernel


_KILLED = textwrap.dedent(
    """
    import datetime, pathlib, sys, time
    from asc_aprof._outputs import _history_store
    from asc_aprof.history import Environment, HistoryRecord, HistoryStore, KernelEntry
    db, ready = sys.argv[1], pathlib.Path(sys.argv[2])
    add_kernel = _history_store.HistoryStore._add_kernel
    def slow(self, cursor, record_id, entry):
        add_kernel(self, cursor, record_id, entry)
        if entry.kernel == "k3":  # half-way through the record: wait to be killed
            ready.write_text("in the transaction")
            time.sleep(60)
    _history_store.HistoryStore._add_kernel = slow
    env = Environment(datetime.datetime.now(datetime.timezone.utc), "victim", "0.test")
    kernels = tuple(
        KernelEntry("Ascend 910B", "AI_CORE", f"k{k}", 10, 1.0, 0.9, 1.1, 0.8, 1.2) for k in range(8)
    )
    with HistoryStore(db) as store:
        store.add(HistoryRecord("victim", env, kernels))
    """
)


def test_a_record_killed_mid_write_leaves_the_store_consistent(db: str, tmp_path: Path) -> None:
    with HistoryStore(db) as store:
        store.add(record(entry(10.0)))
    ready = tmp_path / "ready"
    victim = _python("-c", _KILLED, db, str(ready))
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert victim.poll() is None, victim.communicate()[1]
            assert time.monotonic() < deadline, "the writer never reached its transaction"
            time.sleep(0.05)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
    finally:
        if victim.poll() is None:
            victim.kill()
        victim.communicate()
    with HistoryStore(db) as store:
        assert store.record_count() == 1  # the killed record is not there, not even in part
        assert [s.entry.kernel for s in store.kernels()] == ["add_custom"]
        store.add(record(entry(10.5)))  # and the store takes the next one
        assert store.record_count() == 2
    if not db.startswith("postgresql"):
        conn = sqlite3.connect(db)
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        conn.close()


# -- from runs, on the command line -----------------------------------------------------------------
def simulated_run(root: Path, duration_us: float, *, count: int = 30) -> Path:
    profiler = Profiler(root, toolkit=sim.toolkit())
    with profiler.profile(cleanup=False) as run:
        sim.launch("add_custom", count=count, duration_us=duration_us)
        sim.launch("mul_custom", count=count, duration_us=3.0)
    assert run.run_id is not None
    return root / run.run_id


def test_a_run_slower_only_by_a_clock_dip_is_ambiguous_not_a_regression(
    db: str, tmp_path: Path, simctl: SimControl
) -> None:
    for n in range(5):
        history.record_runs([simulated_run(tmp_path / f"base{n}", 10.0)], db=db)
    # the same kernels; add_custom's launches run in a dip of the AI Core clock to 800 MHz. No PMU
    # collection: the raw reader declines a level-1 run's counters under a changed clock (the
    # CSVs it would fall back to carry no clock)
    profiler = Profiler(tmp_path / "dip", toolkit=sim.toolkit())
    with profiler.profile(cleanup=False, profile_types=ProfileType.TASK_TIME | ProfileType.L2CACHE) as run:
        time.sleep(0.002)
        start = time.time_ns()
        simctl.set_clock_dip(800, start_ns=start, end_ns=start + 600 * 10**9)
        sim.launch("add_custom", count=30, duration_us=10.0)
        time.sleep(0.002)
        simctl.set_clock_dip(800, start_ns=start, end_ns=time.time_ns())  # (what the run records)
        time.sleep(0.002)
        sim.launch("mul_custom", count=30, duration_us=3.0)
    assert run.run_id is not None
    made = history.runs_record([tmp_path / "dip" / run.run_id])
    add = next(k for k in made.kernels if k.kernel == "add_custom")
    assert (add.median_us, add.aic_mhz) == (20.625, 800.0)  # 10 us x 1650 / 800: the same cycles
    history.record_runs([tmp_path / "dip" / run.run_id], db=db)
    outcomes = {o.kernel: o for o in history.gate(db)}
    dipped = outcomes["Ascend 910B / AI_CORE / add_custom"]
    assert dipped.verdict is GateVerdict.AMBIGUOUS_CLOCK and not dipped.verdict.fails
    assert dipped.cycles_change == pytest.approx(0.0, abs=1e-3)
    assert outcomes["Ascend 910B / AI_CORE / mul_custom"].verdict is GateVerdict.PASS


def test_record_show_and_gate_on_the_command_line(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for n in range(5):
        run = simulated_run(tmp_path / f"base{n}", 10.0)
        assert cli_main(["history", "record", str(run), "--db", db, "--label", f"base{n}"]) == 0
    assert "recorded 2 kernel(s) as record" in capsys.readouterr().out
    assert cli_main(["history", "record", str(simulated_run(tmp_path / "same", 10.0)), "--db", db]) == 0
    capsys.readouterr()
    assert cli_main(["history", "gate", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "add_custom: pass" in out and "mul_custom: pass" in out
    assert cli_main(["history", "record", str(simulated_run(tmp_path / "slow", 15.0)), "--db", db]) == 0
    capsys.readouterr()
    assert cli_main(["history", "gate", "--db", db]) == 1
    captured = capsys.readouterr()
    assert "add_custom: regression" in captured.out and "+50.0%" in captured.out
    assert "gate failed: 1 kernel(s)" in captured.err and "add_custom" in captured.err
    assert cli_main(["history", "gate", "--db", db, "--kernel", "mul_custom"]) == 0
    capsys.readouterr()
    assert cli_main(["history", "show", "--db", db, "--kernel", "add_custom"]) == 0
    table = capsys.readouterr().out
    assert "Ascend 910B / AI_CORE / add_custom" in table and "base4" in table and "15.000" in table
    assert cli_main(["history", "show", "--db", db, "--json"]) == 0
    rows = __import__("json").loads(capsys.readouterr().out)
    assert len(rows) == 7 * 2 and rows[0]["label"] == "base0" and rows[-1]["median_us"] == 3.0
    assert cli_main(["history", "gate", "--db", db, "--kernel", "nope"]) == 1
    assert "no record of kernel 'nope'" in capsys.readouterr().err


def test_record_from_python_with_the_environment(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    run = simulated_run(tmp_path / "r", 10.0)
    made = history.runs_record([run], label="py")
    add = next(k for k in made.kernels if k.kernel == "add_custom")
    assert (add.count, add.median_us, add.ci_low_us, add.ci_high_us) == (30, 10.0, 10.0, 10.0)
    assert add.chip == "Ascend 910B" and add.task_type == "AI_CORE"
    env = made.environment
    assert env.recorded_at.tzinfo is not None and env.host and env.aprof_version
    git = history.git_state(REPO)
    if (REPO / ".git").exists():
        assert git is not None and len(git.commit) == 40
    assert history.git_state(tmp_path) is None  # not a checkout
    record_id = history.record_runs([run], db=db, label="py")
    with HistoryStore(db) as store:
        assert {s.record_id for s in store.kernels()} == {record_id}


def test_bench_results_are_recorded(tmp_path: Path) -> None:
    from asc_aprof import Profiler

    profiler = Profiler(tmp_path / "runs", toolkit=sim.toolkit())
    result = profiler.bench(lambda: sim.launch("add_custom", duration_us=7.0), reps=8)
    db = tmp_path / "h.sqlite3"
    history.record_bench(result, name="add", db=db, chip="Ascend 910B")
    with HistoryStore(db) as store:
        (stored,) = store.kernels()
    assert stored.entry.key == "Ascend 910B / CALL / add"
    assert stored.entry.count == result.count and stored.entry.median_us == pytest.approx(result.median_us)


async def test_a_sweeps_results_are_recorded(tmp_path: Path) -> None:
    from asc_aprof import AsyncProfiler

    profiler = AsyncProfiler(tmp_path / "runs", toolkit=sim.toolkit())

    async def case(n: int, device: int) -> None:
        sim.launch(f"tile_{n}", device=device, count=4, duration_us=float(n))

    results = []
    async with profiler.sweep(range(1, 4), case, devices=[0, 1]) as items:
        async for item in items:
            assert item.result is not None
            results.append(item.result)
    db = tmp_path / "h.sqlite3"
    history.record_results(results, db=db, label="sweep", chip="Ascend 910B")
    with HistoryStore(db) as store:
        stored = store.kernels()
    assert sorted((s.entry.kernel, s.entry.median_us, s.entry.count) for s in stored) == [
        ("tile_1", 1.0, 4), ("tile_2", 2.0, 4), ("tile_3", 3.0, 4)
    ]  # fmt: skip
    assert {s.entry.chip for s in stored} == {"Ascend 910B"} and stored[0].label == "sweep"


def test_trend_page_marks_regressions(tmp_path: Path) -> None:
    pytest.importorskip("plotly")
    db = tmp_path / "h.sqlite3"
    with HistoryStore(db) as store:
        for median in (10.0, 10.0, 10.1, 15.0):
            store.add(record(entry(median), entry(3.0, kernel="mul")))
        stored = store.kernels()
    page = history.write_trend(stored, tmp_path / "trend.html", window=5, min_change=0.05, title="t")
    text = page.read_text(encoding="utf-8")
    assert text.count('class="aprof-chart"') == 2
    assert "Ascend 910B / AI_CORE / add_custom: regression" in text
    assert "mul: regression" not in text


def test_the_pytest_plugin_records_the_session(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(
        """
        from asc_aprof import sim

        def test_kernel(aprof):
            with aprof.profile():
                sim.launch("add_custom", count=5, duration_us=4.0)
        """
    )
    db = tmp_path / "plugin.sqlite3"
    result = pytester.runpytest_subprocess(
        "-p", "no:xdist", "--aprof", "--aprof-simulate", f"--aprof-history={db}"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["recorded 1 kernel(s) as history record 1 in *plugin.sqlite3"])
    with HistoryStore(db) as store:
        (stored,) = store.kernels()
    assert stored.label == "pytest" and stored.entry.kernel == "add_custom" and stored.entry.count == 5


def test_records_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry(1.0).median_us = 2.0  # type: ignore[misc]
