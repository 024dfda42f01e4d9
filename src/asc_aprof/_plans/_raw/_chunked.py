"""Big containers taken apart and made in small steps.

Dropping the last reference to a container of 500,000 records (a list going out of scope, a
dict deleted) frees every record in one operation, tens of milliseconds in which the interpreter
cannot switch threads: an event loop waiting for the GIL (:func:`read_run_async` decodes in a
worker thread) waits that long; ``tuple(a_list)`` of as many items is one such operation too.
:func:`empty` takes containers apart a few items at a time instead, and :func:`to_tuple` makes a
tuple of a list in steps, letting other threads run in between (in C: ``_cdevice.empty`` and
``tuple_of``, which let the GIL go every few items; in Python: each slice is one bytecode, and the
interpreter switches threads between bytecodes). Only for containers no other thread holds (the
decode's own). :func:`clear_items` frees a tuple's items a slice at a time where the caller is
its only holder (in C only; elsewhere the caller takes it apart otherwise).
"""

from __future__ import annotations

from itertools import chain
from typing import Any, Final, TypeVar

from ._accel import active as _accelerated

#: Items freed per step by the pure code (a few hundred records: well under a millisecond).
SLICE: Final = 256

T = TypeVar("T")


def empty(*containers: list[Any] | dict[Any, Any] | None) -> None:
    """Empties each list or dict (None: skipped) a few items at a time."""
    c = _accelerated()
    for container in containers:
        if container is None:
            continue
        if c is not None:
            c.empty(container)
        elif isinstance(container, list):
            while container:
                del container[-SLICE:]
        else:
            pop = container.popitem
            while container:
                pop()


def to_tuple(items: list[T]) -> tuple[T, ...]:
    """``tuple(items)``, made in steps, and *items* emptied (in C the tuple is also left out of
    the cyclic garbage collector where none of its items can be in a cycle: records)."""
    if (c := _accelerated()) is not None:
        made: tuple[T, ...] = c.tuple_of(items)
        return made
    # (every slice is taken by a bytecode of the generator: the interpreter can switch between)
    made = tuple(chain.from_iterable(items[at : at + SLICE] for at in range(0, len(items), SLICE)))
    empty(items)
    return made


def clear_items(box: list[tuple[Any, ...]], start: int, stop: int) -> bool:
    """Frees items *start*:*stop* of the tuple ``box[0]`` (each replaced by None) where *box* is
    its only holder: True; False, nothing changed, where it has another holder or the C
    accelerator is off (a tuple cannot change in Python)."""
    if (c := _accelerated()) is None:
        return False
    done: bool = c.clear_items(box, start, stop)
    return done
