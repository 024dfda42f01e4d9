"""Tests of the heavy optional parts (Ray, the HTML report's plotly, the columns' zero-copy
hand-off to numpy / pyarrow / polars / pandas) need packages only ``pip install -e '.[test]'``
brings. With the small ``.[test-core]`` they skip with one sentence; in CI (``CI=true``), which
installs ``.[test]``, a missing one fails instead, so no test goes silently unrun there."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def require(module: str) -> ModuleType:
    """*module* imported, or the test (module, at import time) skipped; failed in CI."""
    try:
        return importlib.import_module(module)
    except ImportError:
        reason = f"needs {module}, which pip install -e '.[test]' brings (the small '.[test-core]' does not)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI installs '.[test]', so this is a broken CI setup", pytrace=False)
        pytest.skip(reason, allow_module_level=True)
