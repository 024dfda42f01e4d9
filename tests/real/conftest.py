"""Fixtures of the real-CANN conformance tests: a CANN-shaped root whose msprof.py is the real one.

Every run under ``real_runs/`` is copied once per session and exported by ``Profiler.export()``
(two at a time: the machine has two cores); tests read those exports. Tests that need a run
nobody exported yet copy their own.
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from asc_aprof import Profiler, Toolkit, sim
from asc_aprof._model._toolkit import LIBRARY_NAME, MSPROF_SCRIPT

from ..reference import REAL_MSPROF, REAL_RUNS, SKIP_REASON, real_run_names


@pytest.fixture(scope="session")
def real_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``$ASCEND_HOME_PATH``-like tree: the real msprof.py at CANN's path.

    No real ``libmsprofiler.so`` exists without an NPU; the simulated one stands in for the
    library, which exporting never loads.
    """
    if not REAL_MSPROF.is_file():
        pytest.skip(SKIP_REASON)
    root = tmp_path_factory.mktemp("cann")
    (root / "lib64").mkdir()
    (root / "lib64" / LIBRARY_NAME).symlink_to(sim.toolkit().library)
    analysis = root / MSPROF_SCRIPT.parents[1]
    analysis.parent.mkdir(parents=True)
    analysis.symlink_to(REAL_MSPROF.parents[1], target_is_directory=True)
    return root


@pytest.fixture(scope="session")
def real_toolkit(real_root: Path) -> Toolkit:
    toolkit = Toolkit.from_root(real_root)
    assert toolkit.msprof_script == REAL_MSPROF.resolve()
    return toolkit


def copy_run(name: str, into: Path) -> tuple[Path, str]:
    """Copy real run *name* into *into*/<name>/; return (result path, run id)."""
    source = next((REAL_RUNS / name).glob("PROF_*"))
    result_path = into / name
    shutil.copytree(source, result_path / source.name, symlinks=True)
    return result_path, source.name


@pytest.fixture(scope="session")
def exported(
    real_toolkit: Toolkit, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, tuple[Path, str]]]:
    """Every real run, copied and exported once by ``Profiler.export()`` with the real msprof.py.

    Once per test session, pytest-xdist workers included, into the session's shared temporary
    folder: each run has a lock file, and a worker exports (two at a time) the runs no other worker
    has taken, then waits for the others' (and exports any whose worker died half-way). So workers
    that need the exports at the same time share the work instead of one waiting for the other.
    """
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    into = shared / "real_exports"
    into.mkdir(exist_ok=True)
    names = real_run_names()

    def export(name: str, wait: bool) -> bool:
        """Export *name* unless another worker holds it (False) or has exported it already."""
        done = into / f"{name}.exported"
        with (into / f"{name}.lock").open("w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            if not done.exists():
                shutil.rmtree(into / name, ignore_errors=True)  # (a worker that died half-way)
                result_path, run_id = copy_run(name, into)
                Profiler(result_path, toolkit=real_toolkit, export_timeout=300).export(run_id, timeline=False)
                done.touch()
        return True

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        taken = list(pool.map(lambda name: export(name, wait=False), names))
        others = [name for name, ok in zip(names, taken, strict=True) if not ok]
        for future in [pool.submit(export, name, True) for name in others]:
            future.result()
    runs = {}
    for name in names:
        result_path = into / name
        (run,) = result_path.glob("PROF_*")
        runs[name] = (result_path, run.name)
    yield runs
