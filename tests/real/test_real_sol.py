"""Speed of light on real runs, checked by hand: the fractions asc-aprof gives equal what the
exporter's CSV (``expected/``) and the run's ``info.json`` imply, by the formulas of
docs/speed_of_light.md, computed here independently with numpy."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy
import pytest

from asc_aprof import VerdictKind, kernel_stats, open_run

from ..reference import REAL_RUNS, needs_real_runs
from .conftest import copy_run

pytestmark = needs_real_runs


def expected_rows(name: str) -> list[dict[str, str]]:
    (path,) = sorted((REAL_RUNS / name / "expected").glob("op_summary*.csv"))
    with open(path, newline="", encoding="utf-8") as stream:
        return [row for row in csv.DictReader(stream) if row["Task Duration(us)"].strip() != "N/A"]


def median(rows: list[dict[str, str]], column: str) -> float:
    return float(numpy.median([float(r[column]) for r in rows]))


def test_910b_l1_div_speed_of_light_by_hand(tmp_path: Path) -> None:
    """div_kernel on a 910B: info.json says 20 AI Cores, 40 vector cores at 1650 MHz. The vector
    side's cycles over (40 cores x 1650 MHz x the median duration) is how busy the 40 vector
    cores were on average (~0.49: 20 blocks on 40 cores); each pipe's fraction of the chip is its
    ratio times that. The largest, scalar (~0.48), is below 0.6: no roof limits the kernel, and
    the pipe rule's verdict (scalar-bound) stands, its reason followed by the fractions."""
    result_path, run_id = copy_run("910b_l1_div", tmp_path)
    run = open_run(result_path / run_id)
    facts = run.info.chip_facts()
    assert facts is not None and facts.from_run
    assert (facts.cube_cores, facts.vector_cores, facts.mhz) == (20, 40, 1650.0)
    (stats,) = kernel_stats(run.result(counters=True), chip=facts)
    rows = expected_rows("910b_l1_div")
    duration = stats.median_us  # the CSV's median, rounded to the ns (the last digit: round's)
    assert duration == pytest.approx(median(rows, "Task Duration(us)"), abs=1e-3)
    busy = median(rows, "aiv_total_cycles") / (40 * 1650e6 * duration * 1e-6)
    assert 0.45 < busy < 0.55
    expected = {
        pipe: median(rows, f"aiv_{ratio}_ratio") * busy
        for pipe, ratio in (("vector", "vec"), ("scalar", "scalar"), ("mte2", "mte2"), ("mte3", "mte3"))
    }
    for pipe, fraction in expected.items():
        assert stats.speed_of_light[pipe] == pytest.approx(fraction, rel=1e-9), pipe
    assert max(stats.speed_of_light, key=lambda k: stats.speed_of_light[k]) == "scalar"
    verdict = stats.verdict
    assert verdict is not None and verdict.kind is VerdictKind.BOUND and verdict.label == "scalar-bound"
    assert "of the chip's peak: scalar at 48%" in verdict.reason


@pytest.mark.parametrize("name", ["310b_addcmul", "310b_03fastgelugrad_IANQQB", "310b_09spence_IIAKMC"])
def test_310b_speed_of_light_by_hand(name: str, tmp_path: Path) -> None:
    """A 310B (one AI Core at 1250 MHz, PipelineExecuteUtilization): each pipe's fraction is
    its ``*_exe_ratio`` times total_cycles / (1250 MHz x the median duration)."""
    result_path, run_id = copy_run(name, tmp_path)
    run = open_run(result_path / run_id)
    facts = run.info.chip_facts()
    assert facts is not None and (facts.cube_cores, facts.mhz) == (1, 1250.0)
    rows = expected_rows(name)
    by_kernel: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_kernel.setdefault(row["Op Name"], []).append(row)
    stats = {s.name: s for s in kernel_stats(run.result(counters=True), chip=facts)}
    assert set(stats) == set(by_kernel)
    for kernel, mine in by_kernel.items():
        duration = stats[kernel].median_us
        assert duration == pytest.approx(median(mine, "Task Duration(us)"), abs=1e-3)
        busy = median(mine, "total_cycles") / (1250e6 * duration * 1e-6)
        for pipe, ratio in (("vector", "vec"), ("cube", "mac"), ("mte2", "mte2"), ("scalar", "scalar")):
            expected = median(mine, f"{ratio}_exe_ratio") * busy
            assert stats[kernel].speed_of_light[pipe] == pytest.approx(expected, rel=1e-9), (kernel, pipe)
