"""Every aclprof function the library calls x every code it can return, through both APIs.

Each case injects one failure into the simulated ``libmsprofiler.so`` (the call returns the code
and does nothing else, as a failing CANN call would leave its state), then checks:

* the caller gets a typed :class:`AclError` with code, symbol, function and a hint;
* afterwards nothing is left: no running device, no live config, CANN not initialised, the
  collector idle;
* the next ``profile()`` in the same process succeeds and returns every launched task.

``aclprofCreateConfig`` never returns a code: any injected code makes it return NULL, which the
library reports as 100000 with the causes CANN documents.
"""

from __future__ import annotations

import anyio
import pytest

from asc_aprof import AclError, AsyncProfiler, Profiler, Toolkit, sim
from asc_aprof.sim import SimControl

from ._support import ACL_CODES, CALLED_FUNCTIONS, assert_nothing_left

pytestmark = pytest.mark.anyio

#: Functions whose failure surfaces before the body runs (the collection never started).
BEFORE_BODY = {"aclprofInit", "aclprofCreateConfig", "aclprofStart"}

CASES: list[tuple[str, int | None]] = [
    (function, code)
    for function in CALLED_FUNCTIONS
    if function != "aclprofCreateConfig"
    for code in ACL_CODES
] + [("aclprofCreateConfig", None)]
IDS = [f"{function}-{code if code is not None else 'NULL'}" for function, code in CASES]


def inject(simctl: SimControl, function: str, code: int | None) -> None:
    simctl.inject(function, code if code is not None else 500005)


def check_error(error: AclError, function: str, code: int | None) -> None:
    expected = 100000 if code is None else code
    assert error.function == function
    assert error.code == expected
    assert error.symbol == ACL_CODES[expected]
    assert error.hint and error.hint.strip()
    if code is None:
        assert "NULL" in str(error) and "duplicate" in error.hint
    text = str(error)
    assert function in text and str(expected) in text and ACL_CODES[expected] in text


def check_recovered_sync(toolkit: Toolkit) -> None:
    with Profiler(toolkit=toolkit).profile(device_id=1) as run:
        sim.launch("after", device=1, count=3)
    assert run.result is not None
    assert [(t.name, t.device) for t in run.result.tasks] == [("after", 1)] * 3


async def check_recovered_async(toolkit: Toolkit) -> None:
    async with AsyncProfiler(toolkit=toolkit).profile(device_id=1) as run:
        sim.launch("after", device=1, count=3)
    assert run.result is not None
    assert [(t.name, t.device) for t in run.result.tasks] == [("after", 1)] * 3


@pytest.mark.parametrize(("function", "code"), CASES, ids=IDS)
def test_sync_profile_acl_fault(
    toolkit: Toolkit, simctl: SimControl, function: str, code: int | None
) -> None:
    inject(simctl, function, code)
    profiler = Profiler(toolkit=toolkit)
    body_ran = False
    with pytest.raises(AclError) as info, profiler.profile(device_id=0):
        body_ran = True
        sim.launch("k", count=2)
    check_error(info.value, function, code)
    assert body_ran is (function not in BEFORE_BODY)
    assert profiler.results == {}
    assert_nothing_left(simctl)
    check_recovered_sync(toolkit)
    assert_nothing_left(simctl)


@pytest.mark.parametrize(("function", "code"), CASES, ids=IDS)
def test_sync_start_stop_acl_fault(
    toolkit: Toolkit, simctl: SimControl, function: str, code: int | None
) -> None:
    """The manual API: start() raises for start-side faults, stop() for stop-side ones."""
    inject(simctl, function, code)
    profiler = Profiler(toolkit=toolkit)
    if function in BEFORE_BODY:
        with pytest.raises(AclError) as info:
            profiler.start(device_id=0)
    else:
        profiler.start(device_id=0)
        sim.launch("k", count=2)
        with pytest.raises(AclError) as info:
            profiler.stop()
    check_error(info.value, function, code)
    assert_nothing_left(simctl)
    check_recovered_sync(toolkit)
    assert_nothing_left(simctl)


@pytest.mark.parametrize(("function", "code"), CASES, ids=IDS)
async def test_async_profile_acl_fault(
    toolkit: Toolkit, simctl: SimControl, function: str, code: int | None
) -> None:
    inject(simctl, function, code)
    profiler = AsyncProfiler(toolkit=toolkit)
    body_ran = False
    with pytest.raises(AclError) as info:
        async with profiler.profile(device_id=0):
            body_ran = True
            sim.launch("k", count=2)
    check_error(info.value, function, code)
    assert body_ran is (function not in BEFORE_BODY)
    assert profiler.results == {}
    assert_nothing_left(simctl)
    await check_recovered_async(toolkit)
    assert_nothing_left(simctl)


def test_sync_under_msprof_command_line_is_explained(toolkit: Toolkit, simctl: SimControl) -> None:
    simctl.set_cmd_mode(True)
    profiler = Profiler(toolkit=toolkit)
    with pytest.raises(AclError) as info, profiler.profile():
        pytest.fail("the body must not run when the first start fails")
    error = info.value
    assert (error.function, error.code, error.symbol) == (
        "aclprofStart",
        100042,
        "ACL_ERROR_PROF_ALREADY_RUN",
    )
    assert "msprof command line" in str(error) and "without msprof" in str(error)
    assert_nothing_left(simctl)
    simctl.set_cmd_mode(False)
    check_recovered_sync(toolkit)


async def test_async_under_msprof_command_line_is_explained(toolkit: Toolkit, simctl: SimControl) -> None:
    simctl.set_cmd_mode(True)
    profiler = AsyncProfiler(toolkit=toolkit)
    with pytest.raises(AclError) as info:
        async with profiler.profile():
            pytest.fail("the body must not run when the first start fails")
    error = info.value
    assert (error.function, error.code, error.symbol) == (
        "aclprofStart",
        100042,
        "ACL_ERROR_PROF_ALREADY_RUN",
    )
    assert "msprof command line" in str(error) and "without msprof" in str(error)
    assert_nothing_left(simctl)
    simctl.set_cmd_mode(False)
    await check_recovered_async(toolkit)


def test_set_config_faults_do_not_matter(toolkit: Toolkit, simctl: SimControl) -> None:
    """The library never calls aclprofSetConfig, so a failure armed there never reaches a caller."""
    for code in ACL_CODES:
        simctl.inject("aclprofSetConfig", code)
        check_recovered_sync(toolkit)
    assert_nothing_left(simctl)


async def test_fault_in_a_shared_window_reaches_every_caller_and_nothing_is_left(
    toolkit: Toolkit, simctl: SimControl
) -> None:
    """A start failure in a window of four devices: all four callers get the same typed error."""
    simctl.set_latency(init=0.1)  # the four callers gather in one window during init
    simctl.inject("aclprofStart", 500005)
    profiler = AsyncProfiler(toolkit=toolkit)
    errors: dict[int, BaseException] = {}

    async def one(device: int) -> None:
        try:
            async with profiler.profile(device_id=device):
                pytest.fail("the body must not run")
        except AclError as exc:
            errors[device] = exc

    async with anyio.create_task_group() as tg:
        for device in range(4):
            tg.start_soon(one, device)
    assert sorted(errors) == [0, 1, 2, 3]
    for error in errors.values():
        assert isinstance(error, AclError)
        check_error(error, "aclprofStart", 500005)
    assert_nothing_left(simctl)
    await check_recovered_async(toolkit)
