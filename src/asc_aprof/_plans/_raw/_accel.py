"""The switch of the raw reader's C loops (``_cdevice``, built from ``_cdevice.c``).

The extension is optional: where it was not built the reader runs its pure-Python code, which
is the reference either way. ``ASC_APROF_PURE_PYTHON=1`` (the same switch as the CSV parser's C
row loop) turns it off, read at every call as the host loops read it, so one setting turns off
both halves of the reader. Every caller runs the pure code where the C function
returns None, so C only ever gives what the pure code gives.
"""

from __future__ import annotations

import os
from importlib import import_module
from types import ModuleType
from typing import Final


def _load() -> ModuleType | None:
    try:
        # by name: "from . import" would read as importing the package, which imports this
        return import_module(f"{__package__}._cdevice")
    except ImportError:  # built without a compiler: the extension is optional
        return None


#: The extension, or None where it was not built.
C: Final = _load()

#: Whether the C loops may be used: built, and not switched off by a test running the pure reference
#: (``ASC_APROF_PURE_PYTHON`` is read at every call, by :func:`active`).
ACCELERATED: bool = C is not None


def active() -> ModuleType | None:
    """The extension when the C loops are used, else None."""
    return C if ACCELERATED and os.environ.get("ASC_APROF_PURE_PYTHON") != "1" else None
