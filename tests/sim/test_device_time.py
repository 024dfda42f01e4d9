"""Simulated device time: launches occupy their device (busy-until clock per device), opt-in."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from asc_aprof import Profiler, sim
from asc_aprof.sim import SimControl


class FakeClock:
    """A device clock that only moves when told: records every wait the simulator asks for."""

    def __init__(self) -> None:
        self.now = 100.0
        self.waits: list[tuple[str, float]] = []
        self.lock = threading.Lock()

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.waits.append((threading.current_thread().name, seconds))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeClock]:
    control = sim.control()
    fake = FakeClock()
    monkeypatch.setattr(control, "_now", fake.monotonic)
    monkeypatch.setattr(control, "_sleep", fake.sleep)
    yield fake


def test_off_by_default_and_after_reset(clock: FakeClock) -> None:
    control = sim.control()
    assert not control.device_time
    sim.launch("k", duration_us=500.0, count=4)
    assert clock.waits == []
    control.set_device_time(True)
    assert control.device_time
    control.reset()
    assert not control.device_time
    sim.launch("k", duration_us=500.0)
    assert clock.waits == []


def test_launches_on_one_device_serialise_and_devices_run_concurrently(clock: FakeClock) -> None:
    control = sim.control()
    control.set_device_time(True)
    sim.launch("a", device=0, duration_us=250.0, count=4)  # 1 ms: device 0 busy until +1 ms
    sim.launch("b", device=0, duration_us=500.0)  # queued behind it: returns at +1.5 ms
    sim.launch("c", device=1, duration_us=200.0)  # another device: its own clock
    waits = [seconds for _, seconds in clock.waits]
    assert waits == pytest.approx([1e-3, 1.5e-3, 2e-4])
    clock.now += 1.0  # both devices idle again: the next launch waits only for itself
    sim.launch("d", device=0, duration_us=100.0)
    assert clock.waits[-1][1] == pytest.approx(1e-4)


def test_threads_launching_on_one_device_queue_behind_each_other(clock: FakeClock) -> None:
    sim.control().set_device_time(True)
    threads = [
        threading.Thread(target=sim.launch, args=("k",), kwargs={"duration_us": 100.0}, name=f"t{i}")
        for i in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # whatever the order, the four launches end 0.1, 0.2, 0.3 and 0.4 ms from now
    assert sorted(seconds for _, seconds in clock.waits) == pytest.approx([1e-4, 2e-4, 3e-4, 4e-4])


def test_recorded_durations_stay_the_modelled_ones(simctl: SimControl) -> None:
    simctl.set_device_time(True)
    profiler = Profiler(toolkit=sim.toolkit())
    with profiler.profile(0):
        sim.launch("tile", duration_us=300.0, count=3)
    assert profiler.last_result is not None
    tiles = [t for t in profiler.last_result.tasks if t.name == "tile"]
    assert [t.duration for t in tiles] == pytest.approx([300.0] * 3)


def test_a_real_launch_returns_after_the_device_ran_it(simctl: SimControl) -> None:
    """With the real clock and sleep, the launch returns only once the device is past the kernel."""
    simctl.set_device_time(True)
    sim.launch("k", duration_us=2000.0)
    busy = simctl._busy_until[0]
    assert simctl._now() >= busy  # returned only once the device's clock had passed the kernel's end
