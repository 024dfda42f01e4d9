"""``asc-aprof summary --metrics`` and ``compare --metric``: the counters on the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asc_aprof import AicoreMetrics, Profiler, Toolkit, sim
from asc_aprof._outputs._json_report import load_results
from asc_aprof.cli import TABLE_WIDTH, main
from asc_aprof.sim import SimControl

LONG_NAME = "aclnnMatmul_BatchMatMulNd_BatchMatMulV2_with_a_very_long_suffix"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def make_run(
    result_dir: Path, toolkit: Toolkit, vec: float, metric: AicoreMetrics = AicoreMetrics.PIPE_UTILIZATION
) -> str:
    profiler = Profiler(result_dir, toolkit=toolkit, reader="msprof")  # exported: the CLI reads CSVs
    # the ratios are PipeUtilization's: another group's PMU record cannot carry them
    pipe = metric is AicoreMetrics.PIPE_UTILIZATION
    with profiler.profile(cleanup=False, metrics=metric) as run:
        for i in range(20):
            sim.launch(
                "vec_k",
                task_type="AI_VECTOR_CORE",
                duration_us=30.0 + i % 3,
                counters={"aiv_vec_ratio": vec} if pipe else None,
            )
            sim.launch(
                LONG_NAME,
                task_type="AI_CORE",
                duration_us=12.0,
                counters={"aic_mac_ratio": 0.9} if pipe else None,
            )
            sim.launch("slow_k", task_type="AI_VECTOR_CORE", duration_us=60.0)
        sim.launch("cpu_k", task_type="AI_CPU", duration_us=3.0)
    assert run.run_id is not None
    return run.run_id


def test_summary_metrics_table_fits_80_columns_with_verdicts_and_rule(
    toolkit: Toolkit, result_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_run(result_dir, toolkit, vec=0.82)
    code, out, err = run_cli(capsys, "summary", str(result_dir), "--metrics")
    assert code == 0, err
    lines = out.splitlines()
    assert all(len(line) <= TABLE_WIDTH for line in lines[1:]), out  # the title names the run
    rows = {line.split()[1]: line for line in lines if line[:5].strip() in ("0", "-")}
    assert "vec-bound" in rows["vec_k"] and "vec .82" in rows["vec_k"]
    assert "latency-bound" in rows["slow_k"]  # 60 µs, no pipe above 0.8
    assert "no counters" in rows["cpu_k"]
    assert any("mac-bound" in line and "mac .90" in line and "…" in line for line in lines)  # name cut
    assert "verdict rule:" not in out and "--explain" in out and "--json" in out  # one line, not five
    code, out, err = run_cli(capsys, "summary", str(result_dir), "--metrics", "--explain")
    assert code == 0, err
    assert "verdict rule:" in out and "0.95" in out and "--json" in out


def test_summary_metrics_json_carries_counters_and_verdicts(
    toolkit: Toolkit, result_dir: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run_id = make_run(result_dir, toolkit, vec=0.82)
    code, out, err = run_cli(capsys, "summary", str(result_dir / run_id), "--metrics", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["version"] == 3 and data["runs"][0]["samples"] is None  # statistics only
    assert len(data["runs"][0]["counters"]) == 25 and data["runs"][0]["tasks"] > 0
    code, out_samples, err = run_cli(
        capsys, "summary", str(result_dir / run_id), "--metrics", "--json", "--samples"
    )
    assert code == 0, err
    kept = json.loads(out_samples)["runs"][0]
    assert sum(len(g["duration_us"]) for g in kept["samples"]) == kept["tasks"]
    for group in kept["samples"]:
        assert len(group["counters"]) == 25
        assert all(len(v) == len(group["duration_us"]) for v in group["counters"].values())
    kernels = {k["name"]: k for k in data["kernels"]}
    assert kernels["vec_k"]["counters"]["aiv_vec_ratio"] == 0.82 and len(kernels["vec_k"]["counters"]) == 25
    assert kernels["vec_k"]["verdict"]["label"] == "vec-bound"
    assert "aiv_vec_ratio 0.82 > 0.7" in kernels["vec_k"]["verdict"]["reason"]
    assert kernels["cpu_k"]["verdict"]["kind"] == "no counters"
    # the report is read back, counters and all
    report = tmp_path / "report.json"
    report.write_text(out)
    code, again, _ = run_cli(capsys, "summary", str(report), "--metrics", "--json")
    assert code == 0 and json.loads(again) == data
    report.write_text(out_samples)  # with samples: the statistics are computed again, the same
    code, again, _ = run_cli(capsys, "summary", str(report), "--metrics", "--json")
    assert code == 0 and json.loads(again)["kernels"] == data["kernels"]


def test_reports_of_version_1_are_still_read(
    toolkit: Toolkit, result_dir: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    make_run(result_dir, toolkit, vec=0.5)
    _, out, _ = run_cli(capsys, "summary", str(result_dir), "--json")
    data = json.loads(out)
    data["version"] = 1  # version 1: the runs as results, each task an object
    data["runs"] = [r.to_dict() for r in load_results(result_dir)]
    for run in data["runs"]:
        run["version"] = 1
        del run["counters"]
    old = tmp_path / "v1.json"
    old.write_text(json.dumps(data))
    code, v1_out, err = run_cli(capsys, "summary", str(old), "--json")
    assert code == 0, err
    assert {k["name"] for k in json.loads(v1_out)["kernels"]} == {"vec_k", LONG_NAME, "slow_k", "cpu_k"}
    code, out, err = run_cli(capsys, "summary", str(old), "--metrics")
    assert code == 1 and out == "" and err.count("\n") == 1
    assert "has no PMU counters" in err and "summary --metrics --json" in err
    data["version"] = 2  # version 2: the same, counters allowed
    old.write_text(json.dumps(data))
    code, out, err = run_cli(capsys, "summary", str(old), "--json")
    assert code == 0, err
    assert json.loads(out)["kernels"] == json.loads(v1_out)["kernels"]
    data["version"] = 4
    old.write_text(json.dumps(data))
    code, _, err = run_cli(capsys, "summary", str(old))
    assert code == 1 and "unsupported report version 4 (this reads 1, 2, 3)" in err


def test_groups_without_ratios_show_their_figures(
    toolkit: Toolkit, result_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_run(result_dir, toolkit, vec=0.5, metric=AicoreMetrics.MEMORY_BANDWIDTH)
    code, out, err = run_cli(capsys, "summary", str(result_dir), "--metrics")
    assert code == 0, err
    row = next(line for line in out.splitlines() if " vec_k " in line)
    assert "no ratios" in row and row.endswith(" GB/s")  # e.g. "l2_read 37.54 GB/s": the largest first
    assert "verdict rule:" not in out  # no verdict to explain


def test_compare_a_counter(simctl: SimControl, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toolkit = sim.toolkit()
    make_run(tmp_path / "base", toolkit, vec=0.4)
    make_run(tmp_path / "new", toolkit, vec=0.6)
    code, out, err = run_cli(
        capsys, "compare", str(tmp_path / "base"), str(tmp_path / "new"), "--metric", "aiv_vec_ratio"
    )
    assert code == 0, err
    assert "Median aiv_vec_ratio NEW vs BASE" in out
    row = next(line for line in out.splitlines() if " vec_k " in line)
    assert "0.4" in row and "0.6" in row and "+50.00%" in row
    code, out, err = run_cli(
        capsys,
        "compare",
        str(tmp_path / "base"),
        str(tmp_path / "new"),
        "--metric",
        "aiv_vec_ratio",
        "--json",
        "--fail-on-regression",
    )
    assert code == 1
    data = json.loads(out)
    assert data["version"] == 2 and data["metric"] == "aiv_vec_ratio"
    vec = next(k for k in data["kernels"] if k["name"] == "vec_k")
    assert (vec["base_median"], vec["new_median"], vec["change_pct"]) == (0.4, 0.6, 50.0)
    assert "vec_k" in data["regressions"] and "higher in aiv_vec_ratio" in err
    code, out, err = run_cli(
        capsys, "compare", str(tmp_path / "base"), str(tmp_path / "new"), "--metric", "nope"
    )
    assert code == 1 and out == "" and err.count("\n") == 1
    assert "BASE has no counter 'nope'" in err and "aiv_vec_ratio" in err
