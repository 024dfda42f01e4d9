"""Without a C compiler: the library built at install time, the run-time build's errors, the skips.

``pip install`` compiles the simulated ``libmsprofiler.so`` into the package (so a wheel carries it
and first use compiles nothing); the run-time build is the fallback, and its failures say which
command failed and what the compiler printed. ``ASC_APROF_SIM_PREBUILT=0`` forces that fallback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import asc_aprof
from asc_aprof import sim
from asc_aprof.cli import main
from asc_aprof.sim import _build, _buildspec

from .conftest import NO_SIMULATOR

REPO = Path(__file__).resolve().parents[1]
SRC = Path(asc_aprof.__file__).resolve().parents[1]


@pytest.fixture
def runtime_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache and the prebuilt library ignored: the next sim.root() compiles."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("ASC_APROF_SIM_CACHE", str(cache))
    monkeypatch.setenv("ASC_APROF_SIM_PREBUILT", "0")
    return cache


def test_a_failing_compiler_shows_the_command_and_its_stderr_tail(
    runtime_build: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiler = tmp_path / "badcc"
    noise = "".join(f"echo 'note: line {i}' >&2\n" for i in range(30))
    compiler.write_text(f"#!/bin/sh\n{noise}echo 'libmsprofiler_sim.c:7:1: error: it broke' >&2\nexit 4\n")
    compiler.chmod(0o755)
    monkeypatch.setenv("CC", str(compiler))
    with pytest.raises(sim.SimulatorBuildError) as info:
        sim.root()
    err = info.value
    first, *rest = str(err).splitlines()
    assert first == (
        f"compiling the simulated libmsprofiler.so failed: {compiler} exited with status 4; it said: "
        "libmsprofiler_sim.c:7:1: error: it broke (fix $CC or install gcc)"
    )
    assert rest[0].startswith(f"  command: {compiler} -shared -fPIC -O2")
    assert rest[0].endswith(f"{_buildspec.C_SOURCE} -lm")  # the source, then the libraries
    assert rest[1] == "  compiler stderr (last lines):"
    assert rest[-1] == "    libmsprofiler_sim.c:7:1: error: it broke"
    assert len(rest) == 2 + _buildspec.STDERR_LINES  # a tail, not all 31 lines
    assert err.command[0] == str(compiler) and err.returncode == 4
    assert err.stderr_tail.splitlines()[-1] == "libmsprofiler_sim.c:7:1: error: it broke"
    assert [p.name for p in runtime_build.iterdir()] == []  # no half-built tree left behind


def test_cc_false_is_not_cut_off_after_the_colon(
    runtime_build: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CC", "/bin/false")
    with pytest.raises(sim.SimulatorBuildError) as info:
        sim.root()
    assert str(info.value).splitlines()[0] == (
        "compiling the simulated libmsprofiler.so failed: /bin/false exited with status 1 and printed "
        "nothing on stderr (fix $CC or install gcc)"
    )
    # the CLI prints that line and the command (the compiler printed nothing, so no stderr lines)
    assert main(["demo", "--cases", "1"]) == 1
    _, err = capsys.readouterr()
    lines = err.splitlines()
    assert lines[0] == f"asc-aprof: error: {str(info.value).splitlines()[0]}"
    assert lines[1].startswith("asc-aprof:   command: /bin/false -shared -fPIC")
    assert len(lines) == 2 and "Traceback" not in err


def test_the_run_time_build_still_works_as_the_fallback(runtime_build: Path) -> None:
    root = sim.root()
    assert root.parent == runtime_build
    library = root / "lib64" / "libmsprofiler.so"
    assert library.is_file() and os.access(library, os.X_OK)


def test_first_use_compiles_nothing_with_the_library_built_at_install(tmp_path: Path) -> None:
    prebuilt = _buildspec.prebuilt_library()
    if prebuilt is None:
        pytest.skip("this install carries no simulated library (no C compiler when it was installed)")
    cache = tmp_path / "cache"
    env = {**os.environ, "CC": "/bin/false", "PATH": str(tmp_path), "ASC_APROF_SIM_CACHE": str(cache)}
    env.pop("ASC_APROF_SIM_PREBUILT", None)
    code = "from asc_aprof import sim; print(sim.root()); sim.control().reset()"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    root = Path(done.stdout.strip())
    assert root == cache / f"sim-{_build.source_hash()}"
    assert (root / "lib64" / "libmsprofiler.so").read_bytes() == prebuilt.read_bytes()


def test_the_prebuilt_library_is_used_only_for_its_own_source(tmp_path: Path) -> None:
    assert _buildspec.prebuilt_library({"ASC_APROF_SIM_PREBUILT": "0"}) is None
    if _buildspec.PREBUILT.is_file():
        assert _buildspec.PREBUILT_HASH.read_text().strip() == _buildspec.library_hash()


def test_tests_that_need_the_simulator_skip_with_one_reason(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "CC": "/bin/false",
        "ASC_APROF_SIM_PREBUILT": "0",
        "ASC_APROF_SIM_CACHE": str(tmp_path / "cache"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "tests/test_overlap.py"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    reasons = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    expected = NO_SIMULATOR.format(
        first="compiling the simulated libmsprofiler.so failed: /bin/false exited with status 1 and "
        "printed nothing on stderr (fix $CC or install gcc)"
    )
    assert len(reasons) == 1 and reasons[0].endswith(expected), reasons
    assert "2 skipped" in done.stdout and "error" not in done.stdout


def test_a_wheel_carries_the_simulated_library(tmp_path: Path) -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here, so the wheel is built without the library")
    source = tmp_path / "source"
    source.mkdir()
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.hash", "*.egg-info")
    shutil.copytree(SRC, source / "src", ignore=ignore)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = (tmp_path / "dist").glob("asc_aprof-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert {"asc_aprof/sim/libmsprofiler_sim.so", "asc_aprof/sim/libmsprofiler_sim.hash"} <= names
        recorded = archive.read("asc_aprof/sim/libmsprofiler_sim.hash").decode().strip()
    assert recorded == _buildspec.library_hash()
