"""The pytest plugin (--aprof), driven through pytester in subprocesses."""

from __future__ import annotations

import json

import pytest

pytest_plugins = ["pytester"]

TEST_FILE = """
import anyio
import pytest
from asc_aprof import sim

def test_add(aprof):
    with aprof.profile():
        for d in (10.0, 12.0, 11.0, 50.0):
            sim.launch("add_kernel", duration_us=d)

@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_async_mul(aprof_async, anyio_backend):
    async with aprof_async.profile(device_id=1):
        sim.launch("mul_kernel", device=1, duration_us=7.0, count=3)

def test_plain():
    assert sum([1, 2]) == 3
"""

# Kernel tests that must run (and fail on their own asserts) without --aprof.
UNPROFILED_FILE = """
from asc_aprof import sim

def test_body_runs_and_its_assert_counts(aprof):
    ran = []
    with aprof.profile() as run:
        ran.append(sim.launch("k", duration_us=5.0))
    assert ran == [0]  # launched while nothing was profiling: recorded nowhere
    assert run.result is None and aprof.last_result is None and not aprof.enabled

def test_bench_runs_the_call_once(aprof):
    calls = []
    assert aprof.bench(lambda: calls.append(1), flush=lambda: calls.append(0)) is None
    assert calls == [0, 1]

def test_failing_assert_still_fails(aprof):
    with aprof.profile():
        pass
    assert 1 == 2

async def test_async_without_any_marker(aprof_async):
    async with aprof_async.profile(device_id=2) as run:
        pass
    assert run.device == 2 and run.result is None
    async def fn():
        pass
    assert await aprof_async.bench(fn) is None
"""

MANY_FILE = """
from asc_aprof import sim

def test_two_calls_two_kernels(aprof):
    with aprof.profile():
        sim.launch("first", duration_us=3.0, count=3)
        sim.launch("second", duration_us=4.0, count=2)
    with aprof.profile():
        sim.launch("third", duration_us=9.0)
        sim.launch("ai_cpu_op", task_type="AI_CPU", duration_us=2.0)

def test_only_ai_cpu(aprof):
    with aprof.profile():
        sim.launch("cpu_only", task_type="AI_CPU", duration_us=2.0, count=2)

def test_bench(aprof):
    def fn():
        sim.launch("a", duration_us=6.0)
        sim.launch("b", duration_us=2.0)
    result = aprof.bench(fn, reps=12)
    assert result.median_us == 8.0 and result.count == 12

async def test_async_bench_unmarked(aprof_async):
    result = await aprof_async.bench(lambda: sim.launch("c", device=1, duration_us=3.0), 1, reps=5)
    assert result.median_us == 3.0
"""


def test_plugin_records_medians_and_writes_json(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_k=TEST_FILE)
    result = pytester.runpytest_subprocess(
        "--aprof", "--aprof-simulate", "--aprof-json", "out.json", "-p", "no:asyncio"
    )
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*asc-aprof kernel medians*",
            "*test_k.py::test_add*add_kernel*12.000*4*",
            "*test_async_mul*mul_kernel*7.000*3*",
        ]
    )
    data = json.loads((pytester.path / "out.json").read_text())
    assert data["format"] == "asc-aprof.report"
    tests = {t["test"].split("::")[-1]: t for t in data["tests"]}
    assert tests["test_add"]["median_us"] == 12.0  # skip=1 drops the 10.0
    assert tests["test_add"]["count"] == 4
    assert len(data["runs"]) == 3 and {k["name"] for k in data["kernels"]} == {"add_kernel", "mul_kernel"}


def test_without_flag_fixtures_pass_through_and_tests_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_k=TEST_FILE, test_u=UNPROFILED_FILE)
    # -p no:asyncio: the project's own setting; the unmarked async test must still run (anyio).
    result = pytester.runpytest_subprocess("-rA", "-p", "no:asyncio")
    # test_k: 4 pass unprofiled; test_u: 3 pass, 1 fails on its own assert, the async one runs
    # on every anyio backend installed (asyncio and trio here)
    result.assert_outcomes(passed=4 + 2 + 2, failed=1)
    result.stdout.fnmatch_lines(["*FAILED*test_failing_assert_still_fails*assert 1 == 2*"])
    out = result.stdout.str()
    assert "kernel medians" not in out and "skipped" not in out
    assert "test_async_without_any_marker[asyncio]" in out and "test_async_without_any_marker[trio]" in out


def test_plugin_skips_without_toolkit_in_one_sentence(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASCEND_HOME_PATH", str(pytester.path / "no-cann"))
    monkeypatch.delenv("ASCEND_TOOLKIT_HOME", raising=False)
    pytester.makepyfile(test_k=TEST_FILE)
    result = pytester.runpytest_subprocess("--aprof", "-rs", "-p", "no:asyncio")
    result.assert_outcomes(passed=1, skipped=3)
    reasons = [line for line in result.stdout.lines if line.startswith("SKIPPED")]
    assert reasons  # -rs groups equal reasons: [1] test_add, [2] the two async ones
    for line in reasons:
        reason = line.split(": ", 1)[1]
        # one sentence: one full stop at most (at the end), no line break, says what to do
        assert reason.count(". ") == 0 and "\n" not in reason
        assert reason.startswith("no CANN toolkit was found") and reason.endswith(
            "pass --aprof-simulate to run it on the simulated toolkit instead"
        )


def test_skip_option_applies(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_k=TEST_FILE)
    result = pytester.runpytest_subprocess(
        "--aprof", "--aprof-simulate", "--aprof-skip", "0", "-k", "test_add", "-p", "no:asyncio"
    )
    result.assert_outcomes(passed=1, deselected=3)
    result.stdout.fnmatch_lines(["*test_add*add_kernel*11.500*4*"])


def test_every_kernel_of_every_call_is_recorded_and_empty_medians_explained(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_m=MANY_FILE)
    result = pytester.runpytest_subprocess(
        "--aprof", "--aprof-simulate", "--aprof-json", "out.json", "-p", "no:asyncio"
    )
    result.assert_outcomes(passed=5)
    data = json.loads((pytester.path / "out.json").read_text())
    rows = [
        (r["test"].split("::")[-1], r["call"], r["kernel"], r["median_us"], r["count"]) for r in data["tests"]
    ]
    two = [r for r in rows if r[0] == "test_two_calls_two_kernels"]
    # both calls, every AI Core kernel of each; the AI_CPU op has no median of its own here
    assert two == [
        ("test_two_calls_two_kernels", 0, "first", 3.0, 3),
        ("test_two_calls_two_kernels", 0, "second", 4.0, 2),
        ("test_two_calls_two_kernels", 1, "third", 9.0, 1),
    ]
    notes = {(r["test"].split("::")[-1], r["kernel"]): r["note"] for r in data["tests"]}
    assert notes[("test_two_calls_two_kernels", "third")] == "skip 1 not applied: only 1 sample(s)"
    assert notes[("test_only_ai_cpu", None)] == "no AI Core task among 2 tasks (2 AI_CPU)"
    bench = [r for r in data["tests"] if r["test"].endswith("test_bench")]
    assert [(r["kind"], r["kernel"].strip(), r["median_us"]) for r in bench] == [
        ("bench", "a + b", 8.0),
        ("bench-kernel", "a", 6.0),
        ("bench-kernel", "b", 2.0),
    ]
    assert bench[0]["bench"]["count"] == 12 and bench[0]["bench"]["stop"] == "reps"
    unmarked = [r for r in data["tests"] if "test_async_bench_unmarked" in r["test"]]
    assert len(unmarked) == 2 and all(r["median_us"] == 3.0 for r in unmarked)  # asyncio and trio
    result.stdout.fnmatch_lines(
        [
            "*test_only_ai_cpu*-*-*0*no AI Core task among 2 tasks (2 AI_CPU)*",
            "*test_bench*a + b*8.000*12*CI*stop: reps*",
        ]
    )
