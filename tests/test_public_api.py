"""The top level reads as a map and loads on demand: ``import asc_aprof`` stays light, every public
name (curated or kept from before) resolves, type checkers see them, submodules hold the rest."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import pytest

import asc_aprof

#: ``import asc_aprof`` may load at most this many asc_aprof modules (issue: the pytest plugin's
#: entry point imports it in every test session of every user).
MAX_MODULES = 20


def _loaded_after(code: str) -> list[str]:
    listing = "sorted(m for m in sys.modules if m.startswith('asc_aprof'))"
    script = f"import sys, json\n{code}\nprint(json.dumps({listing}))"
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True)
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


def test_import_asc_aprof_loads_few_modules() -> None:
    loaded = _loaded_after("import asc_aprof")
    assert len(loaded) <= MAX_MODULES, loaded


def test_the_pytest_plugin_loads_no_profiler_until_a_fixture_is_used() -> None:
    loaded = _loaded_after("import asc_aprof.pytest_plugin")
    assert len(loaded) <= MAX_MODULES and "asc_aprof._profilers._sync" not in loaded, loaded


@pytest.mark.parametrize("name", sorted({*asc_aprof.__all__, *asc_aprof._WHERE}))
def test_every_public_name_resolves_both_ways(name: str) -> None:
    value = getattr(asc_aprof, name)
    assert value is not None
    namespace: dict[str, object] = {}
    exec(f"from asc_aprof import {name} as got", namespace)
    assert namespace["got"] is value


def test_submodules_resolve_without_being_imported_first() -> None:
    loaded = _loaded_after("import asc_aprof\nasc_aprof.sim.toolkit\nasc_aprof.stats.kernel_stats")
    assert "asc_aprof.sim" in loaded and "asc_aprof.stats" in loaded


def test_the_curated_top_level_is_a_map() -> None:
    for name in ("Profiler", "AsyncProfiler", "open_run", "aopen_run", "bench", "tune", "AprofError"):
        assert name in asc_aprof.__all__
    for name in ("kernel_stats", "write_trace", "TaskParser"):
        assert name not in asc_aprof.__all__ and hasattr(asc_aprof, name)  # kept, not advertised
    assert {"sim", "stats", "report"} <= set(asc_aprof.__all__)
    assert asc_aprof.stats.kernel_stats is asc_aprof.kernel_stats
    assert asc_aprof.report.write_trace is asc_aprof.write_trace


def test_unknown_names_still_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = asc_aprof.nope


def test_public_classes_are_shown_and_pickled_as_top_level_names() -> None:
    error = asc_aprof.AclError("aclprofStart", 107002)
    assert type(error).__module__ == "asc_aprof"
    assert str(pickle.loads(pickle.dumps(error))) == str(error)
