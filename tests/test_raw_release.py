"""What keeps an event loop running while the raw reader decodes in another thread: the switch
interval pinned low while any decode runs (and restored after the last)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from asc_aprof._raw import RawResult, _driver, _run, read_run
from asc_aprof._raw._driver import SWITCH_INTERVAL, _SwitchPin

from .reference import REAL_RUNS, real_run_names


def interval_is(seconds: float) -> bool:
    """Whether the switch interval is *seconds* (it is kept in whole microseconds)."""
    return abs(sys.getswitchinterval() - seconds) < 1e-9


@pytest.fixture
def interval() -> Iterator[None]:
    saved = sys.getswitchinterval()
    sys.setswitchinterval(0.01)
    try:
        yield
    finally:
        sys.setswitchinterval(saved)


# -- the switch interval ------------------------------------------------------------------------


def test_the_switch_pin_lowers_the_interval_and_restores_it(interval: None) -> None:
    pin = _SwitchPin()
    with pin():
        assert interval_is(SWITCH_INTERVAL)
        with pin():
            assert interval_is(SWITCH_INTERVAL)
        assert interval_is(SWITCH_INTERVAL)  # the outer decode still runs
    assert interval_is(0.01)
    with pytest.raises(KeyError), pin():
        raise KeyError("boom")
    assert interval_is(0.01)


def test_the_switch_pin_keeps_a_lower_interval_and_one_set_meanwhile(interval: None) -> None:
    pin = _SwitchPin()
    sys.setswitchinterval(0.0001)
    with pin():
        assert interval_is(0.0001)
    assert interval_is(0.0001)
    sys.setswitchinterval(0.01)
    with pin():
        sys.setswitchinterval(0.002)  # someone else's choice, made while a decode ran
    assert interval_is(0.002)


def test_overlapping_decodes_in_threads_restore_the_interval_after_the_last(interval: None) -> None:
    pin = _SwitchPin()
    inside = threading.Barrier(3)  # both decodes and this thread
    leave = threading.Event()
    seen: list[float] = []

    def decode(wait: bool) -> None:
        with pin():
            inside.wait(timeout=30)
            if wait:
                leave.wait(timeout=30)
                seen.append(sys.getswitchinterval())

    first = threading.Thread(target=decode, args=(False,))
    second = threading.Thread(target=decode, args=(True,))
    try:
        first.start()
        second.start()
        inside.wait(timeout=30)
        first.join(timeout=30)
        assert interval_is(SWITCH_INTERVAL)  # the second decode still runs
        leave.set()
        second.join(timeout=30)
        assert seen == [pytest.approx(SWITCH_INTERVAL)]
        assert interval_is(0.01)
    finally:
        leave.set()


@pytest.mark.skipif(not real_run_names(), reason="no real runs beside the repository")
def test_concurrent_read_runs_pin_the_interval_and_restore_it(
    interval: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    (run_dir,) = (REAL_RUNS / real_run_names()[0]).glob("PROF_*")
    inside = threading.Barrier(2)
    seen: list[float] = []
    decode = _run.decode_run

    def decode_run(*args: Any, **kwargs: Any) -> RawResult:
        inside.wait(timeout=30)  # both decodes run at once here
        seen.append(sys.getswitchinterval())
        return decode(*args, **kwargs)

    monkeypatch.setattr(_driver, "decode_run", decode_run)
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(read_run(run_dir))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert seen == [pytest.approx(SWITCH_INTERVAL)] * 2
    assert len(results) == 2 and all(isinstance(r, RawResult) for r in results)
    assert results[0] == results[1]
    assert interval_is(0.01)
