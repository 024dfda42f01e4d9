"""Ctrl+C during a sync ``profile()``: in the body, and while the export runs.

A real Ctrl+C is a SIGINT to the process, handled in the main thread; here a helper thread sends
SIGINT to the main thread with ``signal.pthread_kill`` (``_thread.interrupt_main()`` only sets
the flag, so it would not interrupt the main thread's blocking wait on the export). When the
``KeyboardInterrupt`` reaches the test, the collection must already be stopped and finalized, and
the export's whole process group gone (checked at once, not after a grace period, for the
process the library started).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from asc_aprof import Profiler, Toolkit, sim
from asc_aprof.sim import SimControl

from ..helpers import HANG_MARKER, live_processes_with, wait_gone
from ._support import assert_nothing_left, child_pids, fd_targets, wait_until


def test_keyboard_interrupt_in_the_body_stops_the_collection(toolkit: Toolkit, simctl: SimControl) -> None:
    profiler = Profiler(toolkit=toolkit)
    seen: dict[str, object] = {}
    interrupt = KeyboardInterrupt()
    try:
        with profiler.profile(device_id=2):
            sim.launch("k", device=2)
            assert simctl.running_devices() == [2]
            raise interrupt
    except KeyboardInterrupt as caught:
        # Checked before anything else runs: the state the exception propagated with.
        seen["same"] = caught is interrupt
        seen["running"] = simctl.running_devices()
        seen["configs"] = simctl.live_configs()
        seen["initialized"] = simctl.initialized()
    assert seen == {"same": True, "running": [], "configs": 0, "initialized": False}
    assert profiler.last_result is None
    assert_nothing_left(simctl)
    with profiler.profile(device_id=2) as run:
        sim.launch("after", device=2)
    assert run.result is not None and [t.name for t in run.result.tasks] == ["after"]


def test_keyboard_interrupt_in_the_body_of_a_shared_window(toolkit: Toolkit, simctl: SimControl) -> None:
    """One thread's Ctrl+C-like KeyboardInterrupt leaves the window; the other caller is unharmed."""
    simctl.set_latency(init=0.1)
    profiler = Profiler(toolkit=toolkit)
    barrier = threading.Barrier(2)
    outcome: dict[str, object] = {}

    def other() -> None:
        barrier.wait()
        with profiler.profile(device_id=1) as run:
            sim.launch("fine", device=1, count=2)
            threading.Event().wait(0.2)
        outcome["other"] = None if run.result is None else [t.name for t in run.result.tasks]

    thread = threading.Thread(target=other)
    thread.start()
    barrier.wait()
    with pytest.raises(KeyboardInterrupt), profiler.profile(device_id=0):
        sim.launch("doomed")
        raise KeyboardInterrupt
    thread.join(10)
    assert outcome == {"other": ["fine", "fine"]}
    assert_nothing_left(simctl)


@pytest.fixture
def default_sigint() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt, as in an interactive Python (CI may start us ignoring it)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class SigintWhenExporting:
    """Sends SIGINT to the main thread once an export of *marker* runs (for *delay* seconds)."""

    def __init__(self, marker: str, delay: float = 0.2) -> None:
        self.marker = marker
        self.delay = delay
        self.sent = threading.Event()
        self.stop = threading.Event()
        self.main = threading.main_thread().ident
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        if not wait_until(lambda: bool(live_processes_with(self.marker)) or self.stop.is_set(), 10.0):
            return
        if self.stop.wait(self.delay):
            return
        assert self.main is not None
        self.sent.set()
        signal.pthread_kill(self.main, signal.SIGINT)

    def __enter__(self) -> SigintWhenExporting:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


@pytest.mark.parametrize(
    "toolkit_kwargs",
    [{"export_latency": 30.0}, {"export_fault": "hang"}],
    ids=["slow-export", "hung-export-with-helper"],
)
def test_keyboard_interrupt_during_the_export_kills_its_process_group(
    simctl: SimControl, tmp_path: Path, toolkit_kwargs: dict[str, object], default_sigint: None
) -> None:
    assert threading.current_thread() is threading.main_thread()
    result_path = tmp_path / "runs"
    toolkit = sim.toolkit(**toolkit_kwargs)  # type: ignore[arg-type]
    profiler = Profiler(result_path, toolkit=toolkit, export_timeout=60)
    seen: dict[str, object] = {}
    run_dir: Path | None = None
    fds_before = fd_targets()
    with SigintWhenExporting(str(result_path)) as sender:
        try:
            with profiler.profile(device_id=0) as run:
                run_dir = run.run_dir
                sim.launch("k", count=3)
        except KeyboardInterrupt:
            seen["exports"] = live_processes_with(str(result_path))
            seen["children"] = child_pids()
            seen["running"] = simctl.running_devices()
            seen["initialized"] = simctl.initialized()
            # while the exception (and the frames it holds) is alive: the export's pipe is closed
            seen["new fds"] = {fd: t for fd, t in fd_targets().items() if fds_before.get(fd) != t}
    assert sender.sent.is_set(), "the export never ran"
    assert seen == {"exports": [], "children": [], "running": [], "initialized": False, "new fds": {}}
    # the hang fault's helper (a grandchild in the killed group) is reaped by init shortly after
    assert wait_gone(HANG_MARKER, timeout=2.0) == []
    assert_nothing_left(simctl)
    # the raw data is kept, and the export can be retried
    assert run_dir is not None and run_dir.is_dir()
    retry = Profiler(result_path, toolkit=sim.toolkit())
    retry.export(run_dir.name)
    assert [t.name for t in retry.store_result(run_dir.name).tasks] == ["k"] * 3
    # and the next profile() works
    with retry.profile(device_id=0) as again:
        pass
    assert again.run_id is not None and again.run_id != run_dir.name
