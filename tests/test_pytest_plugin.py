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


def test_plugin_is_off_without_flag(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_k=TEST_FILE)
    result = pytester.runpytest_subprocess("-rs", "-p", "no:asyncio")
    result.assert_outcomes(passed=1, skipped=3)
    result.stdout.fnmatch_lines(["*profiling is off: run pytest with --aprof*"])
    assert "kernel medians" not in result.stdout.str()


def test_plugin_skips_without_toolkit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCEND_HOME_PATH", str(pytester.path / "no-cann"))
    monkeypatch.delenv("ASCEND_TOOLKIT_HOME", raising=False)
    pytester.makepyfile(test_k=TEST_FILE)
    result = pytester.runpytest_subprocess("--aprof", "-rs", "-p", "no:asyncio")
    result.assert_outcomes(passed=1, skipped=3)
    result.stdout.fnmatch_lines(["*no CANN toolkit*--aprof-simulate*"])


def test_skip_option_applies(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_k=TEST_FILE)
    result = pytester.runpytest_subprocess(
        "--aprof", "--aprof-simulate", "--aprof-skip", "0", "-k", "test_add", "-p", "no:asyncio"
    )
    result.assert_outcomes(passed=1, deselected=3)
    result.stdout.fnmatch_lines(["*test_add*add_kernel*11.500*4*"])
