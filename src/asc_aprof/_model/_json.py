"""Reading JSON from files the library does not control (run metadata, reports, caches)."""

from __future__ import annotations

import json
from typing import Any


def loads(text: str | bytes) -> Any:
    """:func:`json.loads`, where nesting too deep for the interpreter is a ``ValueError`` like any
    other text that is not JSON (``json`` raises ``RecursionError`` there, which every caller's
    ``except ValueError`` would let through: ``[[[[…`` 100,000 deep is 200 KB)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
