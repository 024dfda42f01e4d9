"""What the command line prints: tables that fit 80 columns, errors that list what there is, progress.

Tables are checked through rich (a ``Console(width=80)`` capture, as on a terminal) and as plain
text (``$COLUMNS`` in a pipe): no line is wider than the terminal, and every number shown is whole.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from asc_aprof import Profiler, ProfilingTask, Toolkit, cli, sim
from asc_aprof._plans._stats import compare_tasks, kernel_stats
from asc_aprof.cli import main
from asc_aprof.sim import SimControl

from .test_cli import make_runs, run_cli

LONG_KERNEL = "aclnnMatmul_BatchMatMulNd_BatchMatMulV2"


def rich_console(width: int) -> Console:
    return Console(width=width, file=io.StringIO(), force_terminal=True, color_system=None)


def printed(console: Console) -> list[str]:
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue().splitlines()


def summary_rows(simctl: SimControl, tmp_path: Path) -> list[list[str]]:
    profiler = Profiler(tmp_path / "runs", toolkit=sim.toolkit())
    with profiler.profile(device_id=3) as run:
        for i in range(40):
            sim.launch("matmul_custom", device=3, task_type="MIX_AIC", duration_us=42000.0 + 77.7 * (i % 9))
            sim.launch("add_custom", device=3, task_type="AI_VECTOR_CORE", duration_us=8.5 + 0.01 * i)
            sim.launch(LONG_KERNEL, device=3, task_type="AI_CORE", duration_us=123456.789)
    assert run.result is not None
    return cli.stats_rows(kernel_stats(run.result.tasks))


def assert_fits_and_whole(lines: list[str], width: int, cells: list[str]) -> None:
    assert lines and all(len(line) <= width for line in lines), "\n".join(lines)
    text = "\n".join(lines)
    assert "…" not in text
    tokens = set(text.split())
    for cell in cells:  # every number shown is shown whole
        assert cell in tokens, f"{cell!r} was cut:\n{text}"


def shown_numbers(lines: list[str], rows: list[list[str]]) -> list[str]:
    """The numeric cells of summary *rows* in the columns the table shows."""
    header = next(line for line in lines if line.startswith("device"))
    names = [c.name for c in cli.STATS_COLUMNS]
    shown = [names.index(name) for name in header.split()]
    return [row[i] for row in rows for i in shown if re.fullmatch(r"[\d.%]+", row[i])]


def test_summary_fits_80_columns_in_rich_with_numbers_whole(simctl: SimControl, tmp_path: Path) -> None:
    rows = summary_rows(simctl, tmp_path)
    console = rich_console(80)
    cli.print_table("Kernels in PROF_x (times in µs)", cli.STATS_COLUMNS, rows, console=console)
    lines = printed(console)
    numbers = shown_numbers(lines, rows)
    assert "123456.789" in numbers and "median" in lines[1]
    assert_fits_and_whole(lines, 80, numbers)
    note = " ".join(lines[-2:])  # wrapped to the width like any prose
    assert note == "(p10, p90, min, max, mean hidden to fit 80 columns: widen the terminal to see them)"
    # the long kernel name folds onto a second line instead of pushing numbers out
    (first,) = [line for line in lines if "aclnnMatmul" in line]
    follow = lines[lines.index(first) + 1].strip()
    assert (first.split()[1] + follow) == LONG_KERNEL


def test_compare_interval_is_never_wrapped_at_80_columns() -> None:
    base = [ProfilingTask(i, "matmul_custom", "MIX_AIC", 42.0 + (i % 7) * 0.3, 0) for i in range(60)]
    new = [ProfilingTask(i, "matmul_custom", "MIX_AIC", 63.0 + (i % 7) * 0.3, 0) for i in range(60)]
    base += [ProfilingTask(i, LONG_KERNEL, "AI_CORE", 8.5 + (i % 5) * 0.1, 1) for i in range(60)]
    new += [ProfilingTask(i, LONG_KERNEL, "AI_CORE", 8.5 + (i % 5) * 0.1, 1) for i in range(60)]
    rows = [cli._change_row(c, c.significant) for c in compare_tasks(base, new)]
    intervals = [row[-1] for row in rows]
    assert all(re.fullmatch(r"\[[+-]\d+\.\d\d%, [+-]\d+\.\d\d%\]", i) for i in intervals)
    console = rich_console(80)
    cli.print_table("Median change", cli.COMPARE_COLUMNS, rows, console=console)
    lines = printed(console)
    assert all(len(line) <= 80 for line in lines)
    for interval in intervals:  # on one line, whole
        assert any(interval in line for line in lines), "\n".join(lines)
    assert any("REGRESSION" in line and "+50.00%" in line for line in lines)


def test_demo_fits_80_columns_as_plain_text(
    simctl: SimControl, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(capsys, "demo", "--devices", "2", "--cases", "2", "--repeats", "3")
    assert code == 0
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), out
    header = next(line for line in lines if line.startswith("case"))
    assert header.split() == ["case", "device", "kernel", "type", "count", "median", "p10", "p90"]
    assert "hidden" not in out  # the demo's table fits 80 columns whole


def test_summary_in_a_narrow_pipe_hides_columns_then_stacks(
    toolkit: Toolkit, result_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    make_runs(result_dir, toolkit)
    code, wide, _ = run_cli(capsys, "summary", str(result_dir))  # no $COLUMNS in a pipe: everything
    assert code == 0 and "hidden" not in wide and "  share" in wide.splitlines()[1]
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(capsys, "summary", str(result_dir))
    lines = out.splitlines()
    assert code == 0 and all(len(line) <= 80 for line in lines)
    assert lines[1].split() == ["device", "kernel", "type", "count", "median", "p10", "p90", "mean", "share"]
    assert "(min, max hidden to fit 80 columns: widen the terminal to see them)" in lines
    footer = out.split("\ncollection: ", 1)[1]  # what the run says of its collection, wrapped
    assert "Ascend 910B (simulated)" in footer and all(len(line) <= 80 for line in footer.splitlines())
    monkeypatch.setenv("COLUMNS", "24")
    code, out, _ = run_cli(capsys, "summary", str(result_dir))
    lines = out.splitlines()
    title = [line for line in lines if line.startswith(("Kernels", "PROF_", "(times"))]
    assert code == 0 and title == ["Kernels in", lines[1], "(times in µs)"]  # the run id stays whole
    assert all(len(line) <= 24 for line in lines if line not in title), out
    assert "device 0  kernel matmul" in lines  # one block per row, every value in it
    wide_rows = [line.split() for line in wide.splitlines()[3:]]
    for value in (cell for row in wide_rows for cell in row[2:]):
        assert value in out.split(), f"{value} missing from the stacked layout:\n{out}"


def test_stacked_layout_never_splits_a_pair() -> None:
    columns = [cli.Column("kernel", key=True), cli.Column("median"), cli.Column("interval")]
    lines = cli.stacked_lines(columns, [["k", "123456.789", "[+47.56%, +52.36%]"]], 24)
    assert lines == ["kernel k", "  median 123456.789", "  interval [+47.56%, +52.36%]"]


# -- errors that list what there is ----------------------------------------------------------------
def test_summary_no_match_lists_what_there_is(
    toolkit: Toolkit, result_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_runs(result_dir, toolkit)  # device 0: matmul and add, 30 each
    code, out, err = run_cli(capsys, "summary", str(result_dir), "--name", "ad")
    assert code == 1 and out == ""
    assert err == (
        "asc-aprof: error: no kernel named 'ad' (did you mean --name add?); the kernels there are: "
        "add, matmul\n"
    )
    code, _, err = run_cli(capsys, "summary", str(result_dir), "--device", "5")
    assert err == "asc-aprof: error: no task on --device 5; the run(s) have tasks on device(s) 0\n"
    code, _, err = run_cli(capsys, "summary", str(result_dir), "--device", "0", "--name", "mat")
    assert "no kernel named 'mat' on device 0 (did you mean --name matmul?)" in err
    code, _, err = run_cli(capsys, "summary", str(result_dir), "--skip", "30")
    assert err == (
        "asc-aprof: error: --skip 30 drops every sample: the kernels have at most 30 sample(s) each "
        "(a kernel with no more samples than --skip is left out)\n"
    )


def test_summary_of_an_empty_collection_says_no_kernel_ran(
    toolkit: Toolkit, result_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Profiler(result_dir, toolkit=toolkit).profile() as run:
        pass
    note = (
        "note: no kernel was recorded; these are CANN control tasks (name N/A), which the export lists "
        "when nothing ran on the device while it was profiled"
    )
    # read natively (the real exporter writes only task_time for this raw data), as profile() read it
    code, out, _ = run_cli(capsys, "summary", str(result_dir))
    assert code == 0 and run.result is not None and run.result.tasks
    assert all(f"  {t.type}  " in out for t in run.result.tasks)
    assert out.splitlines()[-1] == note
    # exported by the simulated msprof.py, which writes task_time only too: the same tasks
    code, out, _ = run_cli(capsys, "summary", str(result_dir), "--reader", "msprof", "--simulate")
    assert code == 0
    assert all(f"  {t.type}  " in out for t in run.result.tasks)
    assert out.splitlines()[-1] == note


def test_the_regression_line_names_the_devices(simctl: SimControl, tmp_path: Path) -> None:
    toolkit = sim.toolkit()
    for path, scale in (("base", 1.0), ("new", 1.5)):
        profiler = Profiler(tmp_path / path, toolkit=toolkit)
        with profiler.profile(device_id=0):
            for i in range(30):
                sim.launch("matmul_custom", device=0, duration_us=(40.0 + i % 5) * scale)
        with profiler.profile(device_id=1):
            for i in range(30):
                sim.launch("matmul_custom", device=1, duration_us=(40.0 + i % 5) * scale)
    capture = io.StringIO()
    with contextlib.redirect_stderr(capture), contextlib.redirect_stdout(io.StringIO()):
        code = main(["compare", str(tmp_path / "base"), str(tmp_path / "new"), "--fail-on-regression"])
    assert code == 1
    assert capture.getvalue() == (
        "asc-aprof: 2 kernel(s) significantly slower by more than 5%: matmul_custom on device 0, "
        "matmul_custom on device 1\n"
    )


# -- progress and the timeline -------------------------------------------------------------------------
def test_demo_progress_reports_cases_done(simctl: SimControl, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "demo", "--devices", "2", "--cases", "4", "--repeats", "2")
    assert code == 0
    lines = err.splitlines()
    assert len(lines) == 4
    cases = []
    for n, line in enumerate(lines, 1):
        match = re.fullmatch(rf"\[{n}/4\] case (\d) done on device ([01])", line)
        assert match is not None, line
        cases.append(int(match.group(1)))
    assert sorted(cases) == [0, 1, 2, 3]  # each case once, reported when it is done


def test_export_timeline_says_where_the_json_is_and_what_opens_it(
    toolkit: Toolkit, result_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (run_id,) = make_runs(result_dir, toolkit)
    code, out, err = run_cli(capsys, "export", str(result_dir), "--simulate", "--timeline")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "exported 1 of 1 run(s)"
    trace = Path(lines[1].removeprefix("timeline: "))
    assert lines[1].startswith("timeline: ") and trace.is_file()
    assert trace.parent == result_dir / run_id / "mindstudio_profiler_output"
    assert re.fullmatch(r"msprof_\d{14}\.json", trace.name)
    assert isinstance(json.loads(trace.read_text()), list)  # a Chrome trace: a JSON event list
    assert lines[2] == "(open a timeline in https://ui.perfetto.dev or chrome://tracing)"
    assert err == f"[1/1] {run_id} exported in " + err.split(" exported in ")[1]


def test_export_help_says_where_the_timeline_goes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "msprof_<time>.json" in text and "ui.perfetto.dev" in text and "chrome://tracing" in text
