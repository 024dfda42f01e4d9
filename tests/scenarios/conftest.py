"""The ``driver`` fixture: every scenario here runs once per driver (sync, asyncio, trio)."""

from __future__ import annotations

import pytest

from .drivers import DRIVERS, Driver


@pytest.fixture(params=DRIVERS)
def driver(request: pytest.FixtureRequest) -> Driver:
    return Driver(str(request.param))
