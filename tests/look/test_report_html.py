"""The HTML report: its statistics, its sections, that it is self-contained, CLI and plugin entries."""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asc_aprof import (
    AsyncProfiler,
    Profiler,
    ProfilingResult,
    ProfilingTask,
    Toolkit,
    UsageError,
    bound_verdict,
    read_timeline,
    sim,
    sweep_timelines,
    write_report,
)
from asc_aprof._outputs._report_html import counters_block
from asc_aprof._outputs._report_model import median_interval, thin
from asc_aprof._outputs._report_write import model_of
from asc_aprof.cli import main as cli_main

from ..extras import require
from .test_trace import four_device_sweep

require("plotly")  # the report is drawn with it

pytest_plugins = ["pytester"]


def result(
    durations: list[float], name: str = "k", device: int | None = 0, run: str = "PROF_1"
) -> ProfilingResult:
    tasks = tuple(ProfilingTask(i, name, "AI_CORE", d, device) for i, d in enumerate(durations))
    return ProfilingResult(tasks, run, dt.datetime.now(dt.timezone.utc))


def exact_coverage(n: int, k: int) -> float:
    return 1 - 2 * (sum(math.comb(n, i) for i in range(k)) / (1 << n))


@pytest.mark.parametrize("n", [1, 2, 5, 6, 7, 10, 31, 100, 2000])
def test_median_interval_uses_the_widest_binomial_rank_that_keeps_95(n: int) -> None:
    values = list(range(n))
    m = median_interval(reversed(values))
    assert m.count == n and m.median == (n - 1) / 2
    if n < 6:
        assert (
            (m.low, m.high) == (0, n - 1)
            and m.coverage == pytest.approx(1 - 2 * 0.5**n)
            and m.coverage < 0.95
        )
        return
    k = int(m.low) + 1  # values are their own ranks
    assert m.high == n - k
    assert m.coverage == pytest.approx(exact_coverage(n, k)) and m.coverage >= 0.95
    assert exact_coverage(n, k + 1) < 0.95  # the next rank in would not keep 95 %


def test_median_interval_normal_approximation_for_large_samples() -> None:
    m = median_interval(range(10_001))
    assert m.median == 5000 and 0.95 <= m.coverage < 0.96
    assert 4890 < m.low < 4910 and m.high == 10_000 - m.low  # about n/2 - 1.96 sqrt(n)/2


def test_median_interval_covers_the_true_median() -> None:
    rng = random.Random(7)
    trials, hits = 600, 0
    for _ in range(trials):
        m = median_interval(rng.expovariate(1.0) for _ in range(25))
        hits += m.low <= math.log(2) <= m.high
    expected = exact_coverage(25, 8)  # the rank median_interval picks for n = 25
    assert abs(hits / trials - expected) < 3 * math.sqrt(expected * (1 - expected) / trials)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=300), st.integers(2, 50))
def test_thin_keeps_the_extremes_and_order(values: list[float], limit: int) -> None:
    ordered = sorted(values)
    out = thin(ordered, limit)
    assert len(out) == min(len(ordered), limit) and out == sorted(out)
    assert out[0] == ordered[0] and out[-1] == ordered[-1]


def test_skip_drops_warm_up_per_run_not_of_all_runs() -> None:
    runs = [result([100.0, 10.0, 10.0, 10.0], run=f"PROF_{i}") for i in range(3)]
    (kernel,) = model_of(runs, skip=1).kernels
    assert kernel.max == 10.0 and kernel.median.count == 9
    (single,) = model_of([result([100.0])], skip=1).kernels  # not more than skip samples: all kept
    assert single.median.count == 1


def test_compare_verdicts() -> None:
    rng = random.Random(3)

    def noisy(center: float, run: str) -> ProfilingResult:
        return result([center * rng.uniform(0.99, 1.01) for _ in range(60)], run=run)

    base = [
        noisy(10.0, "PROF_b"),
        result([5.0] * 30, "same", run="PROF_b2"),
        result([8.0] * 30, "quick", run="PROF_b3"),
    ]
    new = [
        noisy(12.0, "PROF_n"),
        result([5.0] * 30, "same", run="PROF_n2"),
        result([6.0] * 30, "quick", run="PROF_n3"),
    ]
    model = model_of({"base": base, "new": new})
    assert model.compared == ("base", "new") and model.comparison is not None
    verdicts = {c.name: c.verdict for c in model.comparison}
    assert verdicts == {"k": "REGRESSION", "same": "same", "quick": "faster"}
    k = next(c for c in model.comparison if c.name == "k")
    assert k.base.low <= k.base.median <= k.base.high and 15 < k.change_pct < 25
    assert model.cases == ()  # the two inputs are the comparison, not a sweep
    assert model_of({"base": base, "new": new}, compare=False).comparison is None
    with pytest.raises(UsageError, match="exactly two inputs"):
        model_of({"a": base, "b": new, "c": base}, compare=True)


def test_nothing_to_report() -> None:
    with pytest.raises(UsageError, match="no task"):
        model_of([result([])])


def self_contained(text: str) -> None:
    """No resource is fetched: no script/link/img/iframe with a source, no CSS import or url()."""
    assert not re.search(r"<(script|img|iframe|link|source)[^>]*\s(src|href)\s*=", text, re.I)
    assert "@import" not in text and not re.search(r"url\(\s*['\"]?https?:", text)
    assert "plotly.js v" in text  # the library itself is inlined


async def test_report_of_a_sweep_has_every_section(toolkit: Toolkit, tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    items = await four_device_sweep(toolkit, root, cases=4)
    timelines = sweep_timelines(items, root)

    def verdict(counters: dict[str, float | None] | object, median_us: float) -> str | None:
        assert isinstance(counters, dict) and median_us > 0
        return f"custom rule: {len(counters)} counters, {median_us:.1f} us"

    out = write_report(timelines, tmp_path / "r.html", title="sweep <4 devices>", verdict=verdict)
    text = out.read_text(encoding="utf-8")
    self_contained(text)
    assert "<title>sweep &lt;4 devices&gt;</title>" in text
    charts = re.findall(r'data-chart="([^"]+)"', text)
    assert charts == [
        "distribution:matmul_custom",
        "distribution:add_custom",
        "counters:ratios",
        "sol:Ascend910B3",  # PipeUtilization: fractions, no intensity
        "cases:matmul_custom",
        "cases:add_custom",
        "timeline",
    ]
    assert "custom rule: " in text and "mte2-bound" not in text  # the callable replaces the default
    model = model_of(timelines)
    assert {c.case for c in model.cases} == {"0", "1", "2", "3"}
    from_items = model_of(items)  # sweep items themselves: durations and cases, no timeline
    assert {(c.case, c.device) for c in from_items.cases} == {(c.case, c.device) for c in model.cases}
    assert from_items.timeline == () and [k.median for k in from_items.kernels] == [
        k.median for k in model.kernels
    ]
    assert {r.label for r in model.timeline} == {f"device {d}" for d in range(4)}
    assert all(s >= 0 for r in model.timeline for s in r.starts_ms)
    assert sum(len(r.starts_ms) for r in model.timeline) == sum(len(t.tasks) for t in timelines)


def test_report_of_json_results_says_why_there_is_no_timeline(tmp_path: Path) -> None:
    text = write_report([result([1.0, 2.0, 3.0])], tmp_path / "r.html").read_text(encoding="utf-8")
    assert "No start times in these inputs" in text and "No counters in these inputs" in text
    assert re.findall(r'data-chart="([^"]+)"', text) == ["distribution:k"]


def test_counters_block_shows_values_and_verdict() -> None:
    block = counters_block({"aiv_vec_ratio": 0.82, "aiv_mte2_ratio": None, "x<y": 1.0}, "vector-bound")
    assert (
        "vector-bound" in block
        and "0.820" in block
        and "x&lt;y" in block
        and '<td class="num">-</td>' in block
    )
    assert "no verdict" in counters_block({"a": 1.0}, None)


def test_import_does_not_load_plotly() -> None:
    code = (
        "import sys, asc_aprof; print(any(m.split('.')[0] in ('plotly', 'playwright') for m in sys.modules))"
    )
    assert (
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        == "False"
    )


def test_missing_plotly_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "plotly", None)
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)
    # from this checkout: its own extra, by path (pip install 'asc-aprof[report]' from an index)
    with pytest.raises(UsageError, match=r"pip install -e '.*\[report\]' \(or pip install plotly\)"):
        write_report([result([1.0])], tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


async def test_cli_report_compares_two_inputs(
    toolkit: Toolkit, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profiler = AsyncProfiler(tmp_path / "runs", toolkit=toolkit, reader="msprof")  # reports read CSVs
    for scale in (1.0, 1.5):
        async with profiler.profile(cleanup=False):
            for i in range(40):
                sim.launch("add_custom", duration_us=10.0 * scale + i % 5 * 0.01)
    base_run, new_run = sorted((tmp_path / "runs").iterdir())
    base_json = tmp_path / "base.json"
    out = tmp_path / "c.html"
    assert cli_main(["summary", str(base_run), "--json"]) == 0  # statistics only: nothing to draw
    base_json.write_text(capsys.readouterr().out)
    assert cli_main(["report", f"base={base_json}", f"new={new_run}", "-o", str(out)]) == 1
    assert "keeps no samples" in capsys.readouterr().err
    assert cli_main(["summary", str(base_run), "--json", "--samples"]) == 0
    base_json.write_text(capsys.readouterr().out)
    assert cli_main(["report", f"base={base_json}", f"new={new_run}", "-o", str(out)]) == 0
    assert "with a comparison" in capsys.readouterr().out
    text = out.read_text(encoding="utf-8")
    assert '<span class="REGRESSION">REGRESSION</span>' in text and "compare:change" in text
    assert cli_main(["report", str(base_json), str(new_run), "--no-compare", "-o", str(out)]) == 0
    assert "compare:change" not in out.read_text(encoding="utf-8")
    assert cli_main(["report", str(tmp_path / "nothing"), "-o", str(out)]) == 1
    assert "no such file or directory" in capsys.readouterr().err


def test_cli_report_takes_cases_from_a_plugin_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = {
        "format": "asc-aprof.report",
        "version": 1,
        "runs": [
            r.to_dict()
            for r in (result([1.0, 1.1, 0.9], run="PROF_a"), result([2.0, 2.1, 1.9], run="PROF_b"))
        ],
        "kernels": [],
        "tests": [
            {"test": "t.py::test_k[64]", "run_id": "PROF_a"},
            {"test": "t.py::test_k[128]", "run_id": "PROF_b"},
        ],
    }
    path = tmp_path / "plugin.json"
    path.write_text(json.dumps(report))
    out = tmp_path / "r.html"
    assert cli_main(["report", str(path), "-o", str(out)]) == 0
    assert "2 cases" in capsys.readouterr().out
    assert "t.py::test_k[128]" in out.read_text(encoding="utf-8")


PLUGIN_TESTS = """
import pytest
from asc_aprof import sim

@pytest.mark.parametrize("tile", [64, 128])
def test_add(aprof, tile):
    with aprof.profile():
        for i in range(8):
            sim.launch("add_kernel", duration_us=tile / 8 + i * 0.01)
"""


def test_plugin_writes_the_html_report(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_k=PLUGIN_TESTS)
    result = pytester.runpytest_subprocess(
        "--aprof", "--aprof-simulate", "--aprof-report", "r.html", "-p", "no:asyncio"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*wrote r.html*"])
    text = (pytester.path / "r.html").read_text(encoding="utf-8")
    assert "test_k.py::test_add[64]" in text and "test_k.py::test_add[128]" in text
    assert "cases:add_kernel" in text


def test_plugin_report_without_results(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_k="def test_plain():\n    assert True\n")
    result = pytester.runpytest_subprocess(
        "--aprof", "--aprof-simulate", "--aprof-report", "r.html", "-p", "no:asyncio"
    )
    result.stdout.fnmatch_lines(["*no result to report, r.html not written*"])
    assert not (pytester.path / "r.html").exists()


def test_read_timeline_report_of_a_labelled_run(toolkit: Toolkit, tmp_path: Path) -> None:
    from asc_aprof import Profiler

    profiler = Profiler(tmp_path / "runs", toolkit=toolkit, reader="msprof")  # timelines read CSVs
    with profiler.profile(cleanup=False) as run:
        sim.launch("k", count=5)
    assert run.run_dir is not None
    model = model_of([read_timeline(run.run_dir, case="only")])
    assert model.cases == () and model.kernels[0].counters  # one case: no sweep chart; counters read


def test_cases_chart_only_for_kernels_in_several_cases() -> None:
    runs = {"a": [result([1.0, 1.2], "k1", run="PROF_a")], "b": [result([2.0], "k2", run="PROF_b")]}
    assert model_of(runs, compare=False).cases == ()  # each kernel ran in one case only
    runs["c"] = [result([3.0, 3.1], "k1", run="PROF_c")]
    assert {(c.name, c.case) for c in model_of(runs).cases} == {("k1", "a"), ("k1", "c")}


def test_report_shows_the_bound_verdict_by_default(toolkit: Toolkit, tmp_path: Path) -> None:
    """A result parsed with counters=True gets the library's verdict, label and reason, per kernel."""
    profiler = Profiler(tmp_path / "runs", toolkit=toolkit)
    with profiler.profile(counters=True) as run:
        sim.launch(
            "add_custom",
            task_type="AI_VECTOR_CORE",
            duration_us=8.6,
            count=20,
            counters={"aiv_vec_ratio": 0.2, "aiv_mte2_ratio": 0.82, "aiv_mte3_ratio": 0.1},
        )
    assert run.result is not None and run.result.counters is not None
    model = model_of([run.result])
    (kernel,) = [k for k in model.kernels if k.name == "add_custom"]
    expected = bound_verdict(kernel.counters, kernel.median.median)
    assert expected.label == "mte2-bound"
    assert kernel.verdict == f"{expected.label}: {expected.reason}"
    assert kernel.counters["aiv_mte2_ratio"] == 0.82
    text = write_report([run.result], tmp_path / "r.html").read_text(encoding="utf-8")
    assert "mte2-bound" in text and "No start times in these inputs" in text
    assert model_of([run.result], verdict=None).kernels[0].verdict is None  # None: no verdict shown


async def test_a_sweeps_kernels_are_per_case_not_pooled(toolkit: Toolkit, tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    items = await four_device_sweep(toolkit, root, cases=4)
    timelines = sweep_timelines(items, root)
    model = model_of(timelines)
    assert all(k.case is not None for k in model.kernels)
    for name in {k.name for k in model.kernels}:
        per_case = [k for k in model.kernels if k.name == name]
        # one view per (case, device): each median belongs to one case
        assert len(per_case) == len({(k.case, k.device) for k in per_case}) == len({k.case for k in per_case})
        charted = {(c.case, c.device): c.median.median for c in model.cases if c.name == name}
        assert {(k.case, k.device): k.median.median for k in per_case} == charted

    def same_reason(counters: object, median_us: float) -> str:
        return "not bound: no pipe rule fired"

    text = write_report(timelines, tmp_path / "r.html", verdict=same_reason).read_text(encoding="utf-8")
    kernels = text.split('<section id="kernels">', 1)[1].split("</section>", 1)[0]
    assert '<th class="">case</th>' in kernels and '<th class="">input</th>' not in kernels  # no label given
    assert text.count("no pipe rule fired") == 1  # said once, not once per kernel
    assert "Every verdict below: no pipe rule fired." in text
