"""Shared fixtures: the simulated toolkit, reset between tests, and an invariant check after each."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from asc_aprof import Toolkit, sim
from asc_aprof._collector import get_collector
from asc_aprof.sim import SimControl

from . import helpers  # noqa: F401 - marks every process this session starts (leak probes)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def sim_root() -> Path:
    return sim.root()


@pytest.fixture
def simctl() -> Iterator[SimControl]:
    """The simulated library, reset; after the test: nothing running, no live config, idle."""
    control = sim.control()
    collector = get_collector()
    assert collector.idle(), "a previous test left the collector busy"
    control.reset()
    yield control
    # Give the collector thread a moment to finish a stop it accepted (cancellation tests).
    deadline = threading.Event()
    for _ in range(200):
        if collector.idle():
            break
        deadline.wait(0.05)
    assert collector.idle(), "the collector is still busy after the test"
    assert control.running_devices() == []
    assert control.live_configs() == 0
    assert not control.initialized()
    control.reset()


@pytest.fixture
def toolkit(simctl: SimControl) -> Toolkit:
    return sim.toolkit()


@pytest.fixture
def result_dir(tmp_path: Path) -> Path:
    path = tmp_path / "prof out"
    return path


@pytest.fixture(autouse=True)
def _no_simulate_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ASC_APROF_SIMULATE", "PROFILING_MODE"):
        monkeypatch.delenv(name, raising=False)
