"""Fixtures of the timeline, trace and report tests: the headless browser and the real-CANN runs."""

from __future__ import annotations

from ..real.conftest import real_root, real_toolkit  # noqa: F401 - fixtures
from .browser_support import browser  # noqa: F401 - a fixture
