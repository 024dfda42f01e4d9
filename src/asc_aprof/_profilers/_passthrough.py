"""Pass-through profilers: the same calls as :class:`Profiler` / :class:`AsyncProfiler`, collecting nothing.

What the pytest fixtures hand a test when profiling is off (no ``--aprof``), so kernel tests
still run and pass or fail on their own asserts, as upstream's fixture does with its stub:

* ``profile()`` runs the body and yields a :class:`~asc_aprof.ProfileRun` whose ``result`` stays
  None; ``start()`` / ``stop()`` do nothing; ``last_result`` stays None;
* ``bench()`` and ``do_bench()`` run ``flush()`` then ``fn()`` once and return None;
* ``sweep()`` (async) runs each case once, in order; its items carry ``result=None``;
* ``export()``, ``store_result()``, ``store_last_result()`` and ``iter_tasks()`` raise
  :class:`~asc_aprof.UsageError`: there is no run to read;
* ``enabled`` is False (True on the plugin's real profilers), for tests that want to branch.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Final, TypeVar

from .._model._errors import UsageError
from .._model._records import ProfilingResult
from ._async import SweepItem
from ._base import current_pyasc_device
from ._protocol import ProfileRun

CaseT = TypeVar("CaseT")

_OFF: Final = "profiling is off (pytest ran without --aprof or --profile), so there is no run to read"


def _device(device_id: int | None) -> int:
    return current_pyasc_device() if device_id is None else int(device_id)


class PassThroughProfiler:
    """Stands in for :class:`~asc_aprof.Profiler` when profiling is off (see the module docstring)."""

    enabled: Final = False

    def __init__(self) -> None:
        self.last_result: ProfilingResult | None = None
        self.results: dict[str, ProfilingResult] = {}  # stays empty: nothing is collected

    @contextlib.contextmanager
    def profile(self, device_id: int | None = None, *args: Any, **kwargs: Any) -> Iterator[ProfileRun]:
        """Run the body; nothing is collected (the handle's ``result`` stays None)."""
        yield ProfileRun(_device(device_id))

    def start(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to start."""

    def stop(self) -> None:
        """Nothing to stop."""

    def bench(
        self,
        fn: Callable[[], object],
        device_id: int | None = None,
        *,
        flush: Callable[[], object] | None = None,
        **options: Any,
    ) -> None:
        """Run ``flush()`` and ``fn()`` once; nothing is measured (returns None)."""
        if flush is not None:
            flush()
        fn()

    def do_bench(self, fn: Callable[[], object], *args: Any, **kwargs: Any) -> None:
        """Run ``fn()`` once; nothing is measured (returns None)."""
        flush = kwargs.get("flush")
        if flush is not None:
            flush()
        fn()

    def export(self, *args: Any, **kwargs: Any) -> Path:
        raise UsageError(_OFF)

    def store_result(self, run_id: str, *, counters: bool = False) -> ProfilingResult:
        raise UsageError(_OFF)

    def store_last_result(self, *, counters: bool = False) -> ProfilingResult:
        raise UsageError(_OFF)

    def cleanup(self) -> list[Path]:
        return []


async def _maybe_await(fn: Callable[[], Awaitable[object]] | Callable[[], object]) -> None:
    outcome = fn()
    if inspect.isawaitable(outcome):
        await outcome


class PassThroughAsyncProfiler:
    """Stands in for :class:`~asc_aprof.AsyncProfiler` when profiling is off (see the module docstring)."""

    enabled: Final = False

    def __init__(self) -> None:
        self.last_result: ProfilingResult | None = None
        self.results: dict[str, ProfilingResult] = {}  # stays empty: nothing is collected

    @contextlib.asynccontextmanager
    async def profile(
        self, device_id: int | None = None, *args: Any, **kwargs: Any
    ) -> AsyncIterator[ProfileRun]:
        """Run the body; nothing is collected. Cancelled: the body's cancellation propagates."""
        yield ProfileRun(_device(device_id))

    async def start(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to start (cancellation: nothing happens)."""

    async def stop(self) -> None:
        """Nothing to stop (cancellation: nothing happens)."""

    async def bench(
        self,
        fn: Callable[[], Awaitable[object]] | Callable[[], object],
        device_id: int | None = None,
        *,
        flush: Callable[[], Awaitable[object]] | Callable[[], object] | None = None,
        **options: Any,
    ) -> None:
        """Run ``flush()`` and ``fn()`` once, in this task (awaited when async); returns None.

        Cancelled: the cancellation propagates from whichever of them was running.
        """
        if flush is not None:
            await _maybe_await(flush)
        await _maybe_await(fn)

    async def do_bench(
        self, fn: Callable[[], Awaitable[object]] | Callable[[], object], *args: Any, **kwargs: Any
    ) -> None:
        """Run ``fn()`` once; returns None. Cancelled: as :meth:`bench`."""
        await self.bench(fn, flush=kwargs.get("flush"))

    async def export(self, *args: Any, **kwargs: Any) -> Path:
        """Raises :class:`~asc_aprof.UsageError` (nothing to cancel)."""
        raise UsageError(_OFF)

    async def store_result(self, run_id: str, *, counters: bool = False) -> ProfilingResult:
        """Raises :class:`~asc_aprof.UsageError` (nothing to cancel)."""
        raise UsageError(_OFF)

    async def store_last_result(self, *, counters: bool = False) -> ProfilingResult:
        """Raises :class:`~asc_aprof.UsageError` (nothing to cancel)."""
        raise UsageError(_OFF)

    async def cleanup(self) -> list[Path]:
        """Nothing to remove (nothing to cancel)."""
        return []

    @contextlib.asynccontextmanager
    async def sweep(
        self,
        cases: Iterable[CaseT],
        run: Callable[[CaseT, int], Awaitable[Any]] | Callable[[CaseT, int], Any],
        devices: Iterable[int] | None = None,
        *,
        placement: Callable[[CaseT], int | None] | None = None,
        flush: Callable[[int], Any] | None = None,
        **options: Any,
    ) -> AsyncIterator[AsyncIterator[SweepItem[CaseT]]]:
        """Run each case once, in order, in this task (round robin over *devices*, or as placed).

        Items carry ``result=None``; a case that raises gets an item with its ``error``.
        Cancelled: the case running is cancelled and no further case runs.
        """
        device_list = [0] if devices is None else [int(d) for d in devices] or [0]

        async def items() -> AsyncGenerator[SweepItem[CaseT], None]:
            for index, case in enumerate(cases):
                pinned = None if placement is None else placement(case)
                device = device_list[index % len(device_list)] if pinned is None else int(pinned)
                try:
                    if flush is not None:
                        await _maybe_await(functools.partial(flush, device))
                    await _maybe_await(functools.partial(run, case, device))
                except Exception as exc:
                    yield SweepItem(case, device, None, exc)
                else:
                    yield SweepItem(case, device, None)

        stream = items()
        try:
            yield stream
        finally:
            await stream.aclose()
