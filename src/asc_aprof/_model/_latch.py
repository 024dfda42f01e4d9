"""A one-shot signal from the collector thread, waited on by threads and by tasks without threads.

Theory of operation
-------------------
The collector thread sets a :class:`Latch` when a collection started, stopped, or a shared result
changed. A thread waits on it by blocking (a ``threading.Event``). A task waits without a thread of
its own: it registers a waker, a callable that asks its event loop (asyncio's
``call_soon_threadsafe`` or trio's ``TrioToken.run_sync_soon``, found through
``anyio.lowlevel.current_token()``) to set an ``anyio.Event``, and awaits that event. Setting the
latch calls each waker once; no call blocks the setting thread, and a loop that has already
finished is skipped. So however many tasks wait, the process has no more threads than before.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

import anyio
import anyio.lowlevel


def _call_soon() -> Callable[[Callable[[], object]], object]:
    """A non-blocking "run this on my event loop" for the current loop (asyncio or trio)."""
    native = anyio.lowlevel.current_token().native_token
    soon = getattr(native, "call_soon_threadsafe", None)  # asyncio's loop
    if soon is None:
        soon = getattr(native, "run_sync_soon")  # noqa: B009 - trio's TrioToken (typed as object)
    return soon  # type: ignore[no-any-return]


class Latch:
    """Set once, from any thread; waited on with :meth:`wait` (threads) or :meth:`wait_async` (tasks)."""

    __slots__ = ("_event", "_lock", "_wakers")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._event = threading.Event()  # set under _lock, read without it (Event is thread-safe)
        self._wakers: list[Callable[[], None]] = []  # guarded by _lock

    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            wakers, self._wakers = self._wakers, []
        for wake in wakers:
            wake()

    def wait(self, timeout: float | None = None) -> bool:
        """Block this thread until set; False when *timeout* passed first."""
        return self._event.wait(timeout)

    async def wait_async(self, timeout: float | None = None) -> bool:
        """Wait in this task until set; False when *timeout* passed first.

        Cancelled: the waker is withdrawn; the latch is unchanged.
        """
        if self._event.is_set():
            await anyio.lowlevel.checkpoint()
            return True
        event = anyio.Event()
        soon = _call_soon()

        def wake() -> None:
            # The loop may have finished (its run ended while this waited): nothing to wake.
            with contextlib.suppress(RuntimeError):
                soon(event.set)

        with self._lock:
            registered = not self._event.is_set()
            if registered:
                self._wakers.append(wake)
        if not registered:
            await anyio.lowlevel.checkpoint()
            return True
        try:
            with anyio.move_on_after(timeout):
                await event.wait()
        finally:
            with self._lock, contextlib.suppress(ValueError):
                self._wakers.remove(wake)
        return self._event.is_set()
