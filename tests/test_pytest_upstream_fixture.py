"""The pytest plugin as a drop-in for pyasc's conftest profiler code (its options, its ``profiler``
and ``runs`` fixtures, its "Profiling results" table), driven through pytester in subprocesses.

The test files are written in pyasc's style (``python/test/asc2``): the conftest keeps what is not
profiling (``--backend``, ``--device`` and their fixtures) and has lost ``--profile``, ``--runs``,
``StubProfiler``, the ``profiler`` and ``runs`` fixtures and the table, which the plugin provides.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

# pyasc's asc2 conftest with its profiler code deleted: what is left is the runtime's own.
KEPT_CONFTEST = """
import enum
import pytest

class Backend(enum.Enum):
    Model = "Model"
    NPU = "NPU"

def pytest_addoption(parser):
    parser.addoption("--backend", type=Backend, default=Backend.Model, help="Runtime backend")
    parser.addoption("--device", type=int, default=0, help="Device ID")

@pytest.fixture
def backend(request):
    return request.config.getoption("--backend")

@pytest.fixture
def device_id(request):
    return request.config.getoption("--device")
"""

# A pyasc test, unchanged: it launches its kernel `runs` times inside `profiler.profile()`.
PYASC_TESTS = """
import pytest
from asc_aprof import sim

@pytest.mark.parametrize("size", [1024, 4096])
def test_add(profiler, runs, device_id, size):
    launched = 0
    with profiler.profile():
        for i in range(runs):
            # the first launch is the slow warm-up that skip=1 drops
            sim.launch("add_kernel", device=device_id, duration_us=(10.0 if i == 0 else 4.0) * size / 1024)
            launched += 1
    assert launched == runs
"""


def _section(lines: list[str], title: str) -> list[str]:
    """The lines of the terminal section *title*, up to the next section or the last line."""
    start = next(i for i, line in enumerate(lines) if f" {title} " in line and line.startswith("="))
    out = []
    for line in lines[start + 1 :]:
        if line.startswith("=") or line.startswith("-" * 10):
            break
        out.append(line)
    return out


def test_pyasc_tests_run_profiled_with_the_table(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(KEPT_CONFTEST)
    pytester.makepyfile(test_k=PYASC_TESTS)
    result = pytester.runpytest_subprocess(
        "--profile", "--runs", "4", "--backend", "NPU", "--aprof-simulate", "-p", "no:asyncio"
    )
    result.assert_outcomes(passed=2)
    assert _section(result.stdout.lines, "Profiling results") == [
        # pyasc's row: task_time_median(last_result.tasks, skip=1) and a Greek mu, as its conftest
        "test_k.py::test_add[1024]: 4.0 \u03bcs",
        "test_k.py::test_add[4096]: 16.0 \u03bcs",
    ]
    # --profile alone does not add asc-aprof's own table
    assert "asc-aprof kernel medians" not in result.stdout.str()


def test_pyasc_tests_run_unprofiled_without_profile(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(KEPT_CONFTEST)
    pytester.makepyfile(test_k=PYASC_TESTS)
    result = pytester.runpytest_subprocess("--runs", "3", "-p", "no:asyncio")
    result.assert_outcomes(passed=2)  # the stub profiler: the body ran its 3 launches
    assert "Profiling results" not in result.stdout.str()


def test_other_backend_gets_the_stub_as_upstream(pytester: pytest.Pytester) -> None:
    # pyasc profiles on the NPU backend only: --profile on the Model backend runs unprofiled
    pytester.makeconftest(KEPT_CONFTEST)
    pytester.makepyfile(test_k=PYASC_TESTS)
    result = pytester.runpytest_subprocess("--profile", "--runs", "2", "--aprof-simulate", "-p", "no:asyncio")
    result.assert_outcomes(passed=2)
    assert "Profiling results" not in result.stdout.str()


def test_aprof_is_the_other_spelling_and_adds_its_own_table(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(KEPT_CONFTEST)
    pytester.makepyfile(test_k=PYASC_TESTS)
    result = pytester.runpytest_subprocess(
        "--aprof", "--runs", "4", "--backend", "NPU", "--aprof-simulate", "-k", "1024", "-p", "no:asyncio"
    )
    result.assert_outcomes(passed=1, deselected=1)
    assert _section(result.stdout.lines, "Profiling results") == ["test_k.py::test_add[1024]: 4.0 \u03bcs"]
    result.stdout.fnmatch_lines(["*asc-aprof kernel medians*", "*test_add?1024?*add_kernel*4.000*4*"])


def test_profile_path_keeps_one_raw_folder_per_test(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(KEPT_CONFTEST)
    pytester.makepyfile(test_k=PYASC_TESTS)
    result = pytester.runpytest_subprocess(
        "--profile", "--profile-path", "raw", "--backend", "NPU", "--aprof-simulate", "-p", "no:asyncio"
    )
    result.assert_outcomes(passed=2)
    folders = sorted(p.name for p in (pytester.path / "raw").iterdir())
    # the node id as pyasc's conftest makes it a folder name: ":" and "/" become "_"
    assert folders == ["test_k.py__test_add[1024]", "test_k.py__test_add[4096]"]
    for folder in folders:
        runs = [p.name for p in (pytester.path / "raw" / folder).iterdir()]
        assert len(runs) == 1 and runs[0].startswith("PROF_")  # the raw run is kept there


def test_device_and_runs_options_without_any_conftest(pytester: pytest.Pytester) -> None:
    # a suite whose conftest kept nothing: --device is the plugin's, so the profiler profiles it
    pytester.makepyfile(
        test_d="""
        from asc_aprof import sim

        def test_dev(profiler, runs, device_id):
            assert (runs, device_id) == (3, 1)
            with profiler.profile():
                sim.launch("dev_kernel", device=device_id, duration_us=3.0, count=runs)

        def test_no_block(profiler):
            pass
        """
    )
    result = pytester.runpytest_subprocess(
        "--profile", "--device", "1", "--runs", "3", "--aprof-simulate", "-p", "no:asyncio"
    )
    # a test that stored no result is a row saying so, not a teardown error as upstream
    result.assert_outcomes(passed=2)
    assert _section(result.stdout.lines, "Profiling results") == [
        "test_d.py::test_dev: 3.0 \u03bcs",
        "test_d.py::test_no_block: no median (the test stored no result: no profile() block ended)",
    ]


def test_a_conftest_keeping_its_own_profiler_code_keeps_it(pytester: pytest.Pytester) -> None:
    # the project kept pyasc's conftest whole: its --profile option, profiler fixture and table
    pytester.makeconftest(
        """
        import pytest

        class StubProfiler:
            def profile(self, *args, **kwargs):
                return self
            def __enter__(self):
                pass
            def __exit__(self, *args):
                pass

        def pytest_addoption(parser):
            parser.addoption("--profile", action="store_true", help="Enable NPU profiling")

        def pytest_configure(config):
            config.profiling_results = []

        def pytest_terminal_summary(terminalreporter, config):
            if not config.profiling_results:
                return
            terminalreporter.write_sep("=", "Profiling results")
            for entry in config.profiling_results:
                terminalreporter.write_line(f"{entry['test']}: {entry['duration']} own")

        @pytest.fixture
        def profiler(request):
            yield StubProfiler()
            if request.config.getoption("--profile"):
                request.config.profiling_results.append({"test": request.node.nodeid, "duration": 1.5})
        """
    )
    pytester.makepyfile(
        test_own="""
        def test_own(profiler, runs):
            assert type(profiler).__name__ == "StubProfiler" and runs == 2
            with profiler.profile():
                pass

        def test_aprof_stays_off(aprof):
            # --profile is the project's here, not asc-aprof's spelling of --aprof
            assert not aprof.enabled
        """
    )
    result = pytester.runpytest_subprocess("--profile", "--runs", "2", "-p", "no:asyncio")
    result.assert_outcomes(passed=2)
    assert result.stdout.str().count("Profiling results") == 1
    assert _section(result.stdout.lines, "Profiling results") == ["test_own.py::test_own: 1.5 own"]
    # and the help lists the project's --profile once, the plugin's other upstream options too
    helped = pytester.runpytest_subprocess("--help")
    assert helped.ret == 0
    out = helped.stdout.str()
    assert out.count("--profile ") == 1 and "Enable NPU profiling" in out
    assert "--profile-path" in out and "--runs" in out
