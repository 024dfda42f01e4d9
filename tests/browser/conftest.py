"""The browser fixture (headless Chromium), shared with the real-run browser tests."""

from __future__ import annotations

from ..browser_support import browser  # noqa: F401 - a fixture
