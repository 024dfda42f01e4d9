"""sweep(): cases pinned to devices, and the devices checked once before any case runs."""

from __future__ import annotations

import operator
from collections.abc import Iterator

import anyio
import pytest

from asc_aprof import AsyncProfiler, SweepItem, Toolkit, UsageError, sim
from asc_aprof.sim import SimControl


def launch_case(case: tuple[str, int], device: int) -> None:
    sim.launch(f"{case[0]}_on_{device}", device=device)


async def collect(items: object) -> list[SweepItem[object]]:
    got: list[SweepItem[object]] = []
    async for item in items:  # type: ignore[attr-defined]
        got.append(item)
    return got


async def test_pairs_run_on_their_device_and_devices_default_to_the_pinned_ones(toolkit: Toolkit) -> None:
    cases = [("a", 2), ("b", 0), ("c", 2), ("d", 1), ("e", 2)]
    profiler = AsyncProfiler(toolkit=toolkit)
    async with profiler.sweep(cases, launch_case, placement=operator.itemgetter(1)) as items:
        got = await collect(items)
    assert sorted((i.case, i.device) for i in got) == sorted((c, c[1]) for c in cases)
    for item in got:
        assert item.error is None and item.result is not None
        case = item.case
        assert isinstance(case, tuple)
        assert [t.name for t in item.result.tasks] == [f"{case[0]}_on_{case[1]}"]


async def test_unpinned_cases_go_anywhere_pinned_ones_wait_for_their_device(toolkit: Toolkit) -> None:
    """One place only (max_pending=1): a case pulled for the wrong device must not deadlock."""

    def placement(case: int) -> int | None:
        return 1 if case % 3 == 0 else None

    ran: dict[int, int] = {}

    async def run(case: int, device: int) -> None:
        ran[case] = device
        sim.launch("k", device=device)
        await anyio.sleep(0.001 * (device + 1))

    profiler = AsyncProfiler(toolkit=toolkit)
    with anyio.fail_after(60):
        async with profiler.sweep(
            range(12), run, devices=[0, 1], placement=placement, max_pending=1
        ) as items:
            got = await collect(items)
    assert sorted(i.case for i in got) == list(range(12))  # type: ignore[type-var]
    assert all(i.error is None for i in got)
    assert all(ran[c] == 1 for c in range(0, 12, 3))
    assert set(ran.values()) <= {0, 1}


async def test_a_pinned_device_outside_devices_is_refused_up_front(toolkit: Toolkit) -> None:
    ran: list[object] = []
    profiler = AsyncProfiler(toolkit=toolkit)
    with pytest.raises(
        UsageError, match=r"case \('b', 5\) is pinned to device 5, which is not among .*\[0, 1\]"
    ):
        async with profiler.sweep(
            [("a", 0), ("b", 5)], lambda c, d: ran.append(c), devices=[0, 1], placement=operator.itemgetter(1)
        ):
            pass
    assert ran == []


async def test_a_lazy_case_pinned_elsewhere_gets_an_item_with_the_error(toolkit: Toolkit) -> None:
    def cases() -> Iterator[tuple[str, int]]:
        yield ("a", 0)
        yield ("lost", 7)
        yield ("c", 1)

    profiler = AsyncProfiler(toolkit=toolkit)
    async with profiler.sweep(
        cases(), launch_case, devices=[0, 1], placement=operator.itemgetter(1)
    ) as items:
        got = {i.case: i for i in await collect(items)}
    assert got[("a", 0)].error is None and got[("c", 1)].error is None
    lost = got[("lost", 7)]
    assert lost.device == 7 and lost.result is None
    assert isinstance(lost.error, UsageError) and "pinned to device 7" in str(lost.error)


async def test_placement_over_a_lazy_iterable_needs_devices(toolkit: Toolkit) -> None:
    profiler = AsyncProfiler(toolkit=toolkit)
    with pytest.raises(UsageError, match="needs devices="):
        async with profiler.sweep(iter([("a", 0)]), launch_case, placement=operator.itemgetter(1)):
            pass


async def test_a_bad_device_id_is_named_before_any_case_runs(toolkit: Toolkit, simctl: SimControl) -> None:
    simctl.set_device_count(4)
    ran: list[int] = []
    profiler = AsyncProfiler(toolkit=toolkit)
    with pytest.raises(UsageError) as info:
        async with profiler.sweep(range(8), lambda c, d: ran.append(d), devices=[0, 1, 9, 2]):
            pass
    message = str(info.value)
    assert "CANN refuses devices 9 of 0-1, 9, 2, so no case ran" in message
    assert "devices 9: aclprofCreateConfig returned NULL for device N" in message
    assert "Devices it accepts: 0-2" in message
    assert ran == []
    assert simctl.live_configs() == 0  # the check destroyed every config it made
    # Many refused devices: one clause per reason, devices as ranges (was a sentence per device).
    with pytest.raises(UsageError) as many:
        async with profiler.sweep(range(2), lambda c, d: None, devices=range(64)):
            pass
    assert "CANN refuses devices 4-63 of 0-63" in str(many.value)
    assert "devices 4-63: aclprofCreateConfig returned NULL for device N" in str(many.value)
    assert len(str(many.value)) < 400  # one reason, not 60
    with pytest.raises(UsageError, match="device id must be >= 0, got -1"):
        async with profiler.sweep(range(2), lambda c, d: None, devices=[0, -1]):
            pass


async def test_good_devices_run_every_case_after_the_check(toolkit: Toolkit, simctl: SimControl) -> None:
    simctl.set_device_count(2)
    profiler = AsyncProfiler(toolkit=toolkit)
    async with profiler.sweep(range(6), lambda c, d: sim.launch("k", device=d), devices=[0, 1]) as items:
        got = await collect(items)
    assert len(got) == 6 and all(i.error is None and i.result is not None for i in got)
