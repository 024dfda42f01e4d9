"""Whether this task or thread is warming a kernel up outside any collection (bench, tune).

Warm-up calls run while other devices' windows may be collecting; a simulated launch on a device
that is not profiled then is expected, not a mistake worth a warning (:func:`asc_aprof.sim.launch`
asks :func:`is_warming_up`). A context variable: it follows a task into the worker threads
anyio starts for it, and never leaks into another task or thread.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Final

_warming_up: Final = contextvars.ContextVar("asc_aprof_warming_up", default=False)


@contextlib.contextmanager
def warming_up() -> Iterator[None]:
    """Mark the calls made inside the block as warm-up calls."""
    token = _warming_up.set(True)
    try:
        yield
    finally:
        _warming_up.reset(token)


def is_warming_up() -> bool:
    """True inside :func:`warming_up` in this task or thread."""
    return _warming_up.get()
