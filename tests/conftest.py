"""Shared fixtures: the simulated toolkit, reset between tests, and an invariant check after each.

Where the simulated toolkit cannot be built (no library built at install time and no C compiler),
every test that needs it is skipped with one reason saying so, instead of erroring.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Final

import pytest

from asc_aprof import Toolkit, sim
from asc_aprof._cann._collector import get_collector
from asc_aprof.sim import SimControl, SimulatorBuildError

from . import helpers  # noqa: F401 - marks every process this session starts (leak probes)

# pytest-xdist's workers start with COLUMNS=80 and LINES=24 in their environment, where a plain
# run has none: the CLI fits its tables to $COLUMNS in a pipe, so its tests would see 80 columns.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)

NO_SIMULATOR = (
    "the simulated CANN toolkit could not be built, so the tests that need it are skipped: {first} "
    "(pip install builds its libmsprofiler.so when a C compiler is present; see the README's "
    "'Without a C compiler')"
)


def no_simulator_reason(exc: SimulatorBuildError) -> str:
    return NO_SIMULATOR.format(first=str(exc).splitlines()[0])


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Python processes the tests start cache their bytecode under the session's temporary folder.

    The suite starts hundreds of Python processes (exports by the real and the simulated msprof.py,
    the CLI, pytest in pytest). With ``PYTHONDONTWRITEBYTECODE`` set, or sources nobody may write
    (the reference's msprof.py: 750 modules), each one compiled every module it imported again: about
    a second of CPU per real export. ``PYTHONPYCACHEPREFIX`` keeps every ``.pyc`` out of the source
    trees, which is what ``PYTHONDONTWRITEBYTECODE`` is for, so it is dropped for them. Set here, in
    the pytest-xdist controller, before it starts its workers: they and their children inherit it.
    An explicit ``PYTHONPYCACHEPREFIX`` is kept.
    """
    if os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is None:
        return
    base = factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    os.environ["PYTHONPYCACHEPREFIX"] = str(shared / "pycache")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


#: Modules that take longest (on 2 cores), started first, longest first: under pytest-xdist
#: (``--dist loadfile --no-loadscope-reorder``, pyproject.toml) a module runs whole on one worker,
#: so a long one handed out last is a tail the other worker waits through. The Ray module mostly
#: waits for its actors, so the other worker's work overlaps it from the start.
LONG_MODULES: Final = (
    "tests/test_ray_sweep.py",
    "tests/real/test_real_runs.py",  # the first to need the shared real exports
    "tests/test_parser_accel.py",
    "tests/reliability/test_parser_fuzz.py",
    "tests/real/test_sim_differential.py",
    "tests/real/test_real_counters.py",
    "tests/real/test_sim_pmu.py",
    "tests/reliability/test_export_faults.py",
    "tests/real/test_sim_clock.py",
    "tests/sim/test_msprof.py",
    "tests/look/test_docs_site.py",
    "tests/test_pytest_upstream_fixture.py",
    "tests/test_no_compiler.py",
)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long modules first (:data:`LONG_MODULES`), then the others, most tests first.

    The sort is stable and keys on the module only: a module's tests stay together, in their order.
    """
    counts: dict[str, int] = {}
    for item in items:
        counts[item.nodeid.split("::")[0]] = counts.get(item.nodeid.split("::")[0], 0) + 1

    def key(item: pytest.Item) -> tuple[int, int, str]:
        module = item.nodeid.split("::")[0]
        rank = LONG_MODULES.index(module) if module in LONG_MODULES else len(LONG_MODULES)
        return rank, -counts[module], module

    items.sort(key=key)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    try:
        return (yield)
    except SimulatorBuildError as exc:
        pytest.skip(no_simulator_reason(exc))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    try:
        return (yield)
    except SimulatorBuildError as exc:
        pytest.skip(no_simulator_reason(exc))


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
