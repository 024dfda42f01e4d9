"""Fixtures of the simulator tests: the raw library, and a fresh simulator around every test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from asc_aprof import sim

from ._support import SIM_ENV, Acl


@pytest.fixture(scope="session")
def acl() -> Acl:
    return Acl(sim.root() / "lib64" / "libmsprofiler.so")


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in SIM_ENV:
        monkeypatch.delenv(name, raising=False)
    sim.control().reset()
    yield
    sim.control().reset()
