"""The asc-aprof command line: exit codes, JSON shape, error lines."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from asc_aprof import Profiler, Toolkit, UsageError, aread_columns, read_columns, read_timeline, sim
from asc_aprof._cann._export import run_export
from asc_aprof._cann._layout import find_summary_csvs
from asc_aprof._outputs._cli_inputs import load_timelines, parse_labelled
from asc_aprof._outputs._json_report import load_run_columns
from asc_aprof.cli import main
from asc_aprof.sim import SimControl


def make_runs(result_dir: Path, toolkit: Toolkit, scale: float = 1.0, runs: int = 1) -> list[str]:
    profiler = Profiler(result_dir, toolkit=toolkit)
    ids = []
    for _ in range(runs):
        with profiler.profile(device_id=0, cleanup=False) as run:
            for i in range(30):
                sim.launch("matmul", duration_us=(40.0 + i % 5) * scale)
                sim.launch("add", duration_us=8.0 + (i % 3) * 0.1, task_type="AI_VECTOR_CORE")
        assert run.run_id is not None
        ids.append(run.run_id)
    return ids


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_summary_table_and_json(
    toolkit: Toolkit, result_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (run_id,) = make_runs(result_dir, toolkit)
    code, out, _ = run_cli(capsys, "summary", str(result_dir))
    assert code == 0
    assert "matmul" in out and "add" in out and "median" in out
    assert out.index("matmul") < out.index("add")  # sorted by total time
    code, out, _ = run_cli(capsys, "summary", str(result_dir / run_id), "--json", "--skip", "2")
    assert code == 0
    data = json.loads(out)
    assert data["format"] == "asc-aprof.report" and data["version"] == 3
    assert [r["run_id"] for r in data["runs"]] == [run_id]
    kernels = {k["name"]: k for k in data["kernels"]}
    assert set(kernels["matmul"]) == {
        "device",
        "name",
        "type",
        "count",
        "median_us",
        "p10_us",
        "p90_us",
        "min_us",
        "max_us",
        "mean_us",
        "total_us",
        "counters",
        "verdict",
        "aic_mhz",  # the simulated 910B run carries the AI Core clock (lpmInfoConv), read natively
    }
    assert kernels["matmul"]["aic_mhz"] == data["runs"][0]["aic_mhz"]["median"]
    assert kernels["matmul"]["counters"] is None and kernels["matmul"]["verdict"] is None  # no --metrics
    assert kernels["matmul"]["count"] == 28 and kernels["matmul"]["median_us"] == 42.0
    code, out, _ = run_cli(capsys, "summary", str(result_dir), "--name", "add", "--json")
    assert [k["name"] for k in json.loads(out)["kernels"]] == ["add"]
    code, out, _ = run_cli(capsys, "summary", str(result_dir), "--device", "5", "--json")
    assert json.loads(out)["kernels"] == []


def test_summary_exports_first_when_needed(
    simctl: SimControl, result_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profiler = Profiler(result_dir, toolkit=sim.toolkit())
    profiler.start()
    sim.launch("k", count=3)
    profiler.stop()  # collected, never exported
    code, out, err = run_cli(capsys, "summary", str(result_dir), "--simulate", "--json")
    assert code == 0, err
    assert json.loads(out)["kernels"][0]["count"] == 3


def test_summary_without_toolkit_is_one_clear_line(
    simctl: SimControl, result_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    profiler = Profiler(result_dir, toolkit=sim.toolkit())
    profiler.start()
    profiler.stop()
    monkeypatch.setenv("ASCEND_HOME_PATH", str(result_dir / "no-cann"))
    monkeypatch.delenv("ASCEND_TOOLKIT_HOME", raising=False)
    code, out, err = run_cli(capsys, "summary", str(result_dir), "--reader", "msprof")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("asc-aprof: error: run PROF_")
    assert "msprof.py export: no CANN toolkit found" in err  # each source's reason, in one line
    assert "--simulate" in err and "toolkit=" not in err and "Traceback" not in err


def _no_cann(result_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCEND_HOME_PATH", str(result_dir / "no-cann"))
    monkeypatch.delenv("ASCEND_TOOLKIT_HOME", raising=False)


def test_summary_reads_a_run_natively_without_a_toolkit(
    simctl: SimControl, result_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (run_id,) = make_runs(result_dir, sim.toolkit())
    run = result_dir / run_id
    _no_cann(result_dir, monkeypatch)
    for reader in ("auto", "raw"):
        code, out, err = run_cli(
            capsys, "summary", str(result_dir), "--reader", reader, "--json", "--samples"
        )
        assert code == 0, err
        assert not find_summary_csvs(run)  # read natively: nothing exported, no toolkit looked for
        native = json.loads(out)
    native_columns = load_run_columns(run)
    # the same run exported by msprof.py and read from its CSVs gives the same columns and report
    code, out, err = run_cli(
        capsys, "summary", str(result_dir), "--reader", "msprof", "--simulate", "--json", "--samples"
    )
    assert code == 0, err
    assert find_summary_csvs(run)
    exported = json.loads(out)
    # natively, each kernel has its AI Core clock (the simulated 910B's lpmInfoConv); CSVs have none
    assert all(k.pop("aic_mhz") == 1650.0 for k in native["kernels"])
    assert native["kernels"] == exported["kernels"] and {k["name"] for k in native["kernels"]} == {
        "matmul",
        "add",
    }
    assert all(
        g.pop("aic_mhz") == [1650.0] * len(g["duration_us"]) for r in native["runs"] for g in r["samples"]
    )
    assert [r["samples"] for r in native["runs"]] == [r["samples"] for r in exported["runs"]]
    assert native_columns == load_run_columns(run) == [read_columns(run)]


async def test_read_columns_of_a_run_not_exported(simctl: SimControl, result_dir: Path) -> None:
    (run_id,) = make_runs(result_dir, sim.toolkit())
    run = result_dir / run_id
    native, native_async = read_columns(run), await aread_columns(run)
    assert not find_summary_csvs(run) and native.run_id == run_id and len(native) == 60
    counted = read_columns(run, counters=True)  # the PMU records are read natively too
    assert not find_summary_csvs(run) and counted.counters is not None and len(counted.counters) == 60
    (run / "device_0" / "data").rename(run / "device_0" / "gone")
    with pytest.raises(UsageError, match="raw data: missing_file: device_0/data has no stars_soc"):
        await aread_columns(run)
    (run / "device_0" / "gone").rename(run / "device_0" / "data")
    run_export(sim.toolkit(), run)
    assert native == native_async == read_columns(run) == await aread_columns(run)
    exported = read_columns(run, counters=True).counters
    assert exported is not None and exported.to_dict() == counted.counters.to_dict()


def test_metrics_are_read_natively_without_a_toolkit(
    simctl: SimControl, result_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (run_id,) = make_runs(result_dir, sim.toolkit())
    _no_cann(result_dir, monkeypatch)
    # the simulated run's PMU records (PipeUtilization) are read natively: no export, no toolkit
    code, out, err = run_cli(capsys, "summary", str(result_dir), "--metrics")
    assert code == 0, err
    assert "matmul" in out and not find_summary_csvs(result_dir / run_id)
    code, raw, err = run_cli(capsys, "summary", str(result_dir), "--metrics", "--reader", "raw")
    assert code == 0 and raw == out, err
    # the (simulated) export's CSVs give the same table
    code, exported, err = run_cli(
        capsys, "summary", str(result_dir), "--metrics", "--reader", "msprof", "--simulate"
    )
    assert code == 0, err
    assert find_summary_csvs(result_dir / run_id) and exported == out


def test_trace_without_counters_reads_natively_and_matches_the_export(
    simctl: SimControl,
    result_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (run_id,) = make_runs(result_dir, sim.toolkit())
    run = result_dir / run_id
    _no_cann(result_dir, monkeypatch)
    code, _, err = run_cli(capsys, "trace", str(result_dir), "-o", str(tmp_path / "t.json"))
    assert code == 0, err  # counters too are read natively (PMU records)
    assert not find_summary_csvs(run)
    code, _, err = run_cli(capsys, "trace", str(result_dir), "--no-counters", "-o", str(tmp_path / "t.json"))
    assert code == 0, err
    assert not find_summary_csvs(run)
    native = load_timelines(parse_labelled(f"x={result_dir}"), toolkit=sim.toolkit, counters=False)
    exported = load_timelines(
        parse_labelled(f"x={result_dir}"), toolkit=sim.toolkit, counters=False, reader="msprof"
    )
    assert find_summary_csvs(run)
    assert native == exported == [read_timeline(run, case="x", counters=False)]
    assert all(t.start_ns is not None and t.stream is not None for t in native[0].tasks)


def test_errors_are_one_line_without_traceback(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run_cli(capsys, "summary", str(tmp_path / "missing"))
    assert (
        code == 1
        and out == ""
        and err.strip() == f"asc-aprof: error: {tmp_path / 'missing'}: no such file or directory"
    )
    code, _, err = run_cli(capsys, "compare", str(tmp_path), str(tmp_path))
    assert code == 1 and "no PROF_* run" in err


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "asc_aprof.cli", "--debug", "summary", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0 and "Traceback" in proc.stderr


def test_export_reports_a_failed_run_and_exports_the_others(
    toolkit: Toolkit, result_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (good,) = make_runs(result_dir, toolkit)
    empty = result_dir / "PROF_000077_20300101000000000_00000001AAAAAAAA"
    # A device dir without info.json: msprof.py exports nothing and exits 0. (A PROF_* dir with no
    # subdirectory at all makes the real msprof.py, and the simulated one, exit 2.)
    (empty / "device_0" / "data").mkdir(parents=True)
    csvs = list((result_dir / good).rglob("op_summary_*.csv"))
    for csv_file in csvs:
        csv_file.unlink()
    code, out, err = run_cli(capsys, "export", str(result_dir), "--simulate", "--jobs", "2")
    assert code == 1
    assert "exported 1 of 2 run(s)" in out
    assert empty.name in err and "wrote no op_summary" in err
    assert list((result_dir / good).rglob("op_summary_*.csv"))
    (result_dir / good / "x" / "y").mkdir(parents=True)  # stray, not empty: msprof.py skips it
    shutil.rmtree(empty)
    code, out, err = run_cli(capsys, "export", str(result_dir / good), "--simulate", "--timeline")
    assert code == 0 and "exported 1 of 1" in out


def test_compare_detects_a_50_percent_regression(
    simctl: SimControl, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    toolkit = sim.toolkit()
    make_runs(tmp_path / "base", toolkit)
    make_runs(tmp_path / "same", toolkit)
    code, out, _ = run_cli(capsys, "summary", str(tmp_path / "base"), "--json")
    (tmp_path / "stats.json").write_text(out)  # a summary report: statistics, no sample
    code, _, err = run_cli(capsys, "compare", str(tmp_path / "stats.json"), str(tmp_path / "base"))
    assert code == 1 and "keeps no samples" in err and "--json --samples" in err
    code, out, _ = run_cli(capsys, "summary", str(tmp_path / "base"), "--json", "--samples")
    (tmp_path / "base.json").write_text(out)
    code, out, err = run_cli(
        capsys, "compare", str(tmp_path / "base.json"), str(tmp_path / "same"), "--fail-on-regression"
    )
    assert code == 0, err
    assert "same" in out
    make_runs(tmp_path / "slow", toolkit, scale=1.5)
    code, out, err = run_cli(
        capsys,
        "compare",
        str(tmp_path / "base.json"),
        str(tmp_path / "slow"),
        "--fail-on-regression",
        "--json",
    )
    assert code == 1
    data = json.loads(out)
    matmul = next(k for k in data["kernels"] if k["name"] == "matmul")
    assert matmul["significant"] and 45 < matmul["change_pct"] < 55
    assert data["regressions"] == ["matmul"]
    assert "matmul" in err and "significantly slower" in err


def test_demo_runs(simctl: SimControl, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "demo", "--devices", "2", "--cases", "3", "--repeats", "4")
    assert code == 0
    lines = [line for line in out.splitlines() if "matmul_custom" in line]
    assert len(lines) == 3  # one row per case


@pytest.mark.parametrize("command", ["demo", "summary", "export", "compare"])
def test_help_has_an_example(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    assert "example" in capsys.readouterr().out


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "asc-aprof"
    proc = subprocess.run([str(script), "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and "demo" in proc.stdout
