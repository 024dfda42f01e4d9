"""Finding the run a start made: before/after the start, never by pid or name time alone."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from asc_aprof import Profiler, Toolkit, UsageError, sim
from asc_aprof._cann._layout import (
    AmbiguousRunError,
    list_runs,
    new_run_since,
    run_names,
    run_pid,
    run_start_key,
)
from asc_aprof.sim import SimControl


def fake_run(root: Path, name: str, *, pid: int | None = None, began_us: int | None = None) -> Path:
    """A PROF_* directory as another process would have left it."""
    run = root / name
    (run / "host").mkdir(parents=True)
    if pid is not None:
        (run / "host" / "info.json").write_text(json.dumps({"pid": pid}))
    if began_us is not None:
        (run / "host" / "start_info").write_text(json.dumps({"collectionTimeBegin": str(began_us)}))
    return run


def test_the_new_entry_is_the_run_whatever_its_name(tmp_path: Path) -> None:
    fake_run(tmp_path, "PROF_000007_20991231235959999_00000001AAAAAAAA")  # later name time
    before = run_names(tmp_path)
    made = fake_run(tmp_path, "PROF_000001_20240418055151588_MHHFRHDLONLGNBIA")  # 16 letters, no pid
    assert new_run_since(tmp_path, before, os.getpid()) == made
    assert new_run_since(tmp_path, run_names(tmp_path), os.getpid()) is None


def test_a_tie_is_broken_by_the_pid_in_the_name_or_in_info_json(tmp_path: Path) -> None:
    before = run_names(tmp_path)
    fake_run(tmp_path, "PROF_000001_20240418055151588_00000002ABCDEFGH")
    mine = fake_run(tmp_path, f"PROF_000001_20240418055151589_{os.getpid():08d}ABCDEFGH")
    assert new_run_since(tmp_path, before, os.getpid()) == mine

    other = tmp_path / "second"
    other.mkdir()
    before = run_names(other)
    fake_run(other, "PROF_000001_20240418055151588_MHHFRHDLONLGNBIA", pid=2)
    mine = fake_run(other, "PROF_000002_20240418055151588_QQHFRHDLONLGNBIA", pid=os.getpid())
    assert run_pid(mine) == os.getpid()
    assert new_run_since(other, before, os.getpid()) == mine


def test_an_unresolvable_tie_is_refused_not_guessed(tmp_path: Path) -> None:
    before = run_names(tmp_path)
    fake_run(tmp_path, "PROF_000001_20240418055151588_MHHFRHDLONLGNBIA")
    fake_run(tmp_path, "PROF_000002_20240418055151588_QQHFRHDLONLGNBIA")
    with pytest.raises(AmbiguousRunError, match="2 new PROF_\\* directories") as info:
        new_run_since(tmp_path, before, os.getpid())
    assert isinstance(info.value, UsageError) and isinstance(info.value, RuntimeError)


def test_runs_are_ordered_by_the_recorded_start_not_the_name(tmp_path: Path) -> None:
    # The clock stepped back an hour between the two: the later run has the earlier name time.
    late = fake_run(tmp_path, "PROF_000002_20260716114543725_00000001AAAAAAAA", began_us=2_000_000)
    early = fake_run(tmp_path, "PROF_000001_20260716124543725_00000001AAAAAAAA", began_us=1_000_000)
    assert list_runs(tmp_path) == [early, late]


def test_profile_finds_its_run_among_other_processes_later_named_runs(
    toolkit: Toolkit, simctl: SimControl, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    # Older runs of an earlier process that had this pid (pids are reused), whose names carry a
    # later time (the clock stepped back since): neither the pid nor the name time tells them apart.
    foreign = {
        fake_run(out, f"PROF_00000{n}_20991231235959{n:03d}_{os.getpid():08d}AAAAAAAA", pid=os.getpid()).name
        for n in (1, 2, 3)
    }
    profiler = Profiler(out, toolkit=toolkit)
    with profiler.profile(device_id=0) as run:
        sim.launch("mine", device=0, duration_us=4.0)
    assert run.result is not None
    assert [t.name for t in run.result.tasks if t.name == "mine"] == ["mine"]
    assert run.run_id is not None and run.run_id not in foreign
    # store_last_result() prefers this profiler's own run over the later-named foreign ones
    assert profiler.store_last_result().run_id == run.run_id


def test_profile_on_cann_8_0_run_names_without_a_pid(
    toolkit: Toolkit, simctl: SimControl, tmp_path: Path
) -> None:
    simctl.configure(cann="8.0")
    profiler = Profiler(tmp_path / "out", toolkit=toolkit)
    with profiler.profile(device_id=0) as run:
        sim.launch("old_cann", device=0, duration_us=3.0)
    assert run.run_id is not None and run_pid(tmp_path / "out" / run.run_id) == os.getpid()
    assert run_pid_from_name(run.run_id) is None  # 16 letters, no pid
    assert run.result is not None and [t.name for t in run.result.tasks] == ["old_cann"]


def run_pid_from_name(name: str) -> int | None:
    from asc_aprof._cann._layout import PID_SUFFIX, RUN_PATTERN

    match = RUN_PATTERN.match(name)
    assert match is not None
    named = PID_SUFFIX.match(match.group(3))
    return int(named.group(1)) if named else None


@pytest.mark.parametrize("cann", ["8.0", "9.0"])
def test_profile_after_the_clock_steps_back_an_hour(
    cann: str, toolkit: Toolkit, simctl: SimControl, tmp_path: Path
) -> None:
    simctl.configure(cann=cann)
    out = tmp_path / "out"
    out.mkdir()
    for pid in (11, 12):  # other processes' older runs, named before the step back
        simctl.write_foreign_run(out, pid=pid, kernel=f"foreign_{pid}")
    profiler = Profiler(out, toolkit=toolkit)
    with profiler.profile(device_id=0, cleanup=False) as first:
        sim.launch("before", device=0, duration_us=2.0)
    simctl.set_clock_offset(-3600.0)
    with profiler.profile(device_id=0, cleanup=False) as second:
        sim.launch("after", device=0, duration_us=2.0)
    assert first.result is not None and second.result is not None
    assert [t.name for t in first.result.tasks] == ["before"]
    assert [t.name for t in second.result.tasks] == ["after"]
    assert second.run_id is not None and first.run_id is not None
    # its name's time says it is an hour older ...
    assert run_start_key(second.run_id)[0] < run_start_key(first.run_id)[0]
    assert profiler.store_last_result().run_id == second.run_id  # ... but it is the newest


def test_a_foreign_run_made_at_the_same_start_is_told_apart_by_pid(
    toolkit: Toolkit, simctl: SimControl, tmp_path: Path
) -> None:
    simctl.configure(cann="8.0")  # no pid in the names: only host/info.json tells
    simctl.foreign_run_on_next_start(pid=os.getpid() + 1, kernel="theirs")
    profiler = Profiler(tmp_path / "out", toolkit=toolkit)
    with profiler.profile(device_id=0) as run:
        sim.launch("ours", device=0, duration_us=2.0)
    assert run.result is not None and [t.name for t in run.result.tasks] == ["ours"]


def test_two_new_runs_of_this_pid_are_refused(toolkit: Toolkit, simctl: SimControl, tmp_path: Path) -> None:
    simctl.configure(cann="8.0")
    simctl.foreign_run_on_next_start(pid=os.getpid(), kernel="twin")
    profiler = Profiler(tmp_path / "out", toolkit=toolkit)
    with pytest.raises(AmbiguousRunError, match="cannot be told apart"), profiler.profile(device_id=0):
        sim.launch("ours", device=0, duration_us=2.0)
