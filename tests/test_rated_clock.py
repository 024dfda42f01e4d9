"""One fact, one reader: the AI Core clock a run's ``info.json`` records (``aic_frequency``).

``RunInfo.core_mhz`` (the speed-of-light figures' clock) and the raw reader's rated clock
(``RawResult.clocks[device].rated_mhz``, the clock before a device's first clock row; issue 30)
both come from :func:`rated_aic_mhz`; so do the raw reader's PMU times. A value no clock can be
(``inf``, ``0``, text) is no clock for either: RunInfo has None, the raw reader declines.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from asc_aprof import Profiler, Toolkit, sim
from asc_aprof._model._chips import rated_aic_mhz
from asc_aprof._plans._raw import Declined, DeclineReason, RawResult
from asc_aprof._runs._info import read_info
from asc_aprof._runs._raw_files import read_run

from .reference import needs_real_runs
from .reliability._runs import copy_real_run


@pytest.mark.parametrize(
    ("value", "mhz"),
    [("1650", 1650.0), (1250, 1250.0), ("1800.5", 1800.5), ("inf", None), ("nan", None), ("0", None),
     (-5, None), ("abc", None), ("", None), (None, None), (True, None)],
)  # fmt: skip
def test_rated_aic_mhz_is_a_positive_finite_number_or_none(value: object, mhz: float | None) -> None:
    assert rated_aic_mhz({"aic_frequency": value}) == mhz
    assert rated_aic_mhz({}) is None


def device_info(run: Path) -> Path:
    (path,) = sorted((run / "device_0").glob("info.json*[0-9]"))
    return path


def check_one_fact(run: Path) -> float:
    """RunInfo's clock equals the raw reader's rated clock (where the device has a clock table)
    and the function's reading of the device's info.json; returns it."""
    info = read_info(run)
    outcome = read_run(run)
    assert isinstance(outcome, RawResult), outcome
    text = device_info(run).read_text()
    found = re.search(r'"aic_frequency":\s*"?([^",}]+)', text)
    assert found is not None and info.core_mhz == float(found.group(1))
    for table in outcome.clocks.values():
        assert table.rated_mhz == info.core_mhz
    assert info.core_mhz is not None
    return info.core_mhz


def test_a_simulated_910b_run_has_one_clock(toolkit: Toolkit, tmp_path: Path) -> None:
    profiler = Profiler(tmp_path, toolkit=toolkit)
    with profiler.profile() as run:
        sim.launch("k", task_type="AI_VECTOR_CORE", duration_us=5.0, count=3)
    assert run.result is not None
    (prof,) = tmp_path.glob("PROF_*")
    outcome = read_run(prof)
    assert isinstance(outcome, RawResult) and outcome.clocks  # the simulated 910B writes its clock
    assert check_one_fact(prof) == 1650.0


@pytest.mark.parametrize("value", ["inf", "0", "fast"])
def test_a_value_no_clock_can_be_is_none_for_both(toolkit: Toolkit, tmp_path: Path, value: str) -> None:
    with Profiler(tmp_path, toolkit=toolkit).profile() as run:
        sim.launch("k", task_type="AI_VECTOR_CORE", duration_us=5.0)
    assert run.result is not None
    (prof,) = tmp_path.glob("PROF_*")
    path = device_info(prof)
    path.write_text(re.sub(r'"aic_frequency":\s*"?[^",}]+"?', f'"aic_frequency":"{value}"', path.read_text()))
    assert read_info(prof).core_mhz is None and read_info(prof).chip_facts() is not None
    outcome = read_run(prof)
    assert isinstance(outcome, Declined) and outcome.reason is DeclineReason.MALFORMED
    assert "aic_frequency is not a positive number" in str(outcome)


@needs_real_runs
@pytest.mark.parametrize(("name", "mhz"), [("910b_l1_div", 1650.0), ("310b_addcmul", 1250.0)])
def test_real_runs_have_one_clock(tmp_path: Path, name: str, mhz: float) -> None:
    run = copy_real_run(name, tmp_path)
    assert check_one_fact(run) == mhz
    outcome = read_run(run)
    assert isinstance(outcome, RawResult)
    # the 310B writes no clock file: the rated clock is RunInfo's alone there
    assert bool(outcome.clocks) == name.startswith("910b") and not any(
        math.isnan(t.rated_mhz) for t in outcome.clocks.values()
    )
