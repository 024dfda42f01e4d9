"""One scenario, three ways: the sync ``Profiler`` in threads, ``AsyncProfiler`` on asyncio and on trio.

A scenario is an ``async def test_...(driver, ...)`` decorated with :func:`scenario`. It uses the
profiler's async API (``async with p.profile()``, ``await p.start()``, ...) on the object
``driver.profiler(...)`` returns, and waits or runs callers side by side only through the driver
(:meth:`Driver.sleep`, :meth:`Driver.gather`), so it is written once:

* ``sync``: ``driver.profiler()`` wraps a :class:`~asc_aprof.Profiler` whose coroutine methods call
  the blocking ones directly, and the scenario coroutine is run *without an event loop*: it never
  suspends, so one ``send`` runs it to the end in the test's thread (a scenario that awaits
  anything else fails loudly). Concurrent callers are threads, ``sleep`` is ``time.sleep``. So
  the blocking facade is exercised exactly as a user's threads would use it (the nesting check
  sees the thread's context, body exceptions go through ``with`` unchanged).
* ``asyncio`` / ``trio``: ``driver.profiler()`` is an :class:`~asc_aprof.AsyncProfiler`, the
  scenario runs under ``anyio.run`` with that backend, concurrent callers are tasks.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

import anyio

from asc_aprof import AicoreMetrics, AsyncProfiler, Profiler, ProfileRun, ProfilingResult
from asc_aprof._cann._binding import ProfileTypes
from asc_aprof._cann._collector import Window

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup

T = TypeVar("T")

DRIVERS: Final = ("sync", "asyncio", "trio")


class ScenarioProfiler(Protocol):
    """The profiler API scenarios use: :class:`AsyncProfiler`'s (the sync one is adapted to it)."""

    _windows: list[Window]
    results: dict[str, ProfilingResult]

    @property
    def last_result(self) -> ProfilingResult: ...

    @property
    def result_path(self) -> Path: ...

    def profile(
        self,
        device_id: int | None = None,
        cleanup: bool = True,
        metrics: AicoreMetrics | int = AicoreMetrics.PIPE_UTILIZATION,
        profile_types: ProfileTypes | None = None,
        *,
        counters: bool = False,
    ) -> AbstractAsyncContextManager[ProfileRun]: ...

    async def start(
        self,
        device_id: int | None = None,
        metrics: AicoreMetrics | int = AicoreMetrics.PIPE_UTILIZATION,
        profile_types: ProfileTypes | None = None,
    ) -> None: ...

    async def stop(self) -> ProfileRun | None: ...

    async def export(self, run_id: str | None = None, *, timeline: bool = False) -> Path: ...

    async def store_result(self, run_id: str, *, counters: bool = False) -> ProfilingResult: ...

    async def store_last_result(self, *, counters: bool = False) -> ProfilingResult: ...

    async def cleanup(self) -> list[Path]: ...


class BlockingProfiler(Profiler):
    """A :class:`Profiler` with the async API's shape, every method blocking (never suspending)."""

    @contextlib.asynccontextmanager
    async def profile(  # type: ignore[override]
        self,
        device_id: int | None = None,
        cleanup: bool = True,
        metrics: AicoreMetrics | int = AicoreMetrics.PIPE_UTILIZATION,
        profile_types: ProfileTypes | None = None,
        *,
        counters: bool = False,
    ) -> AsyncIterator[ProfileRun]:
        with super().profile(device_id, cleanup, metrics, profile_types, counters=counters) as run:
            yield run

    async def start(  # type: ignore[override]
        self,
        device_id: int | None = None,
        metrics: AicoreMetrics | int = AicoreMetrics.PIPE_UTILIZATION,
        profile_types: ProfileTypes | None = None,
    ) -> None:
        super().start(device_id, metrics, profile_types)

    async def stop(self) -> ProfileRun | None:  # type: ignore[override]
        return super().stop()  # None without start(), as upstream's (AsyncProfiler raises)

    async def export(self, run_id: str | None = None, *, timeline: bool = False) -> Path:  # type: ignore[override]
        return super().export(run_id, timeline=timeline)

    async def store_result(self, run_id: str, *, counters: bool = False) -> ProfilingResult:  # type: ignore[override]
        return super().store_result(run_id, counters=counters)

    async def store_last_result(self, *, counters: bool = False) -> ProfilingResult:  # type: ignore[override]
        return super().store_last_result(counters=counters)

    async def cleanup(self) -> list[Path]:  # type: ignore[override]
        return super().cleanup()


def run_without_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends to its end, in this thread, with no event loop."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError(
        "a scenario suspended under the sync driver: wait with driver.sleep() and run callers "
        "side by side with driver.gather(), never with anyio directly"
    )


class Driver:
    """How a scenario's profiler calls are performed (see the module docstring)."""

    def __init__(self, name: str) -> None:
        if name not in DRIVERS:
            raise ValueError(f"driver must be one of {DRIVERS}, not {name!r}")
        self.name = name

    def __repr__(self) -> str:
        return f"Driver({self.name!r})"

    @property
    def is_async(self) -> bool:
        return self.name != "sync"

    def profiler(self, result_path: str | os.PathLike[str] | None = None, **kwargs: Any) -> ScenarioProfiler:
        """A fresh profiler of this driver's kind (same parameters as :class:`Profiler`)."""
        if self.is_async:
            return AsyncProfiler(result_path, **kwargs)
        return BlockingProfiler(result_path, **kwargs)

    async def sleep(self, seconds: float) -> None:
        if self.is_async:
            await anyio.sleep(seconds)
        else:
            time.sleep(seconds)  # noqa: ASYNC251 - the sync driver runs no event loop

    async def gather(self, *callers: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run *callers* side by side (threads, or tasks) until all have returned.

        :raises ExceptionGroup: with what the callers raised
        """
        if self.is_async:
            async with anyio.create_task_group() as tg:
                for caller in callers:
                    tg.start_soon(caller)
            return
        errors: list[BaseException] = []

        def thread_main(caller: Callable[[], Coroutine[Any, Any, None]]) -> None:
            try:
                run_without_loop(caller())
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=thread_main, args=(caller,)) for caller in callers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise BaseExceptionGroup("callers failed", errors)

    def run(self, scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
        if self.is_async:
            anyio.run(scenario, backend=self.name)
        else:
            run_without_loop(scenario())


def scenario(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Make ``async def test_x(driver, **fixtures)`` a test run by the ``driver`` fixture's driver.

    pytest sees the scenario's own parameters (the wrapper keeps its signature) but a plain
    function, so neither pytest nor anyio's plugin runs it as a coroutine.
    """

    @functools.wraps(test)
    def run(driver: Driver, **fixtures: Any) -> None:
        driver.run(lambda: test(driver, **fixtures))

    return run
