"""The first hour on the command line, through the installed ``asc-aprof`` entry point: the demo's
flags are checked in their own words, its runs can be kept and it says what to try next, and
``--version`` exists."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import asc_aprof

from .reference import REAL_RUNS, needs_real_runs

ENTRY_POINT = Path(sys.executable).with_name("asc-aprof")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    if not ENTRY_POINT.is_file():
        pytest.fail(f"the asc-aprof entry point is not installed beside {sys.executable}: pip install -e .")
    env = {**os.environ, "COLUMNS": "120"}
    return subprocess.run(
        [str(ENTRY_POINT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def small_demo(out: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A one-case demo whose runs are kept in *out*."""
    return cli("demo", "--devices", "1", "--cases", "1", "--repeats", "1", "--out", out, cwd=cwd)


def test_version(tmp_path: Path) -> None:
    done = cli("--version", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.strip() == f"asc-aprof {asc_aprof.__version__}"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--devices", "65"], "--devices 65: the simulated toolkit has at most 64 devices"),
        (["--devices", "-2"], "--devices -2: give at least 1"),
        (["--cases", "0"], "--cases 0: give at least 1"),
        (["--repeats", "0"], "--repeats 0: give at least 1"),
    ],
)
def test_demo_flags_are_checked_in_their_own_words(tmp_path: Path, flags: list[str], message: str) -> None:
    done = cli("demo", *flags, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == f"asc-aprof: error: {message}"
    assert done.stdout == ""


def test_demo_out_keeps_the_runs_and_says_what_to_try(tmp_path: Path) -> None:
    out = tmp_path / "made" / "demo_runs"  # a missing parent is made
    done = cli("demo", "--devices", "12", "--cases", "3", "--repeats", "2", "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "3 case(s) on 12 simulated device(s)" in done.stdout  # more devices than the default 8
    assert "A case is one profiling window of a sweep" in done.stdout
    runs = sorted(out.glob("PROF_*"))
    assert runs, done.stdout
    assert f"asc-aprof summary {out}" in done.stdout and f"asc-aprof report {out}" in done.stdout
    summary = cli("summary", str(out), cwd=tmp_path)
    assert summary.returncode == 0, summary.stderr
    assert "matmul_custom" in summary.stdout


def test_demo_without_out_says_the_runs_are_gone(tmp_path: Path) -> None:
    done = cli("demo", "--devices", "1", "--cases", "1", "--repeats", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "asc-aprof demo --out DIR" in done.stdout
    assert list(tmp_path.iterdir()) == []


def test_demo_out_refuses_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("mine")
    done = cli("demo", "--cases", "1", "--out", str(tmp_path / "f"), cwd=tmp_path)
    assert done.returncode == 1
    assert "--out" in done.stderr and "is not a folder" in done.stderr
    assert (tmp_path / "f").read_text() == "mine"


def test_summary_of_a_folder_whose_runs_are_one_level_down_says_so(tmp_path: Path) -> None:
    made = small_demo(str(tmp_path / "a" / "b"), tmp_path)
    assert made.returncode == 0, made.stderr
    done = cli("summary", str(tmp_path / "a"), cwd=tmp_path)
    assert done.returncode == 1
    assert "runs are one level down, in b: give that folder" in done.stderr


@needs_real_runs
def test_summary_of_runs_from_two_chips_gives_a_table_per_chip(tmp_path: Path) -> None:
    for name in ("910b_l1_div", "310b_addcmul"):
        source = next((REAL_RUNS / name).glob("PROF_*"))
        shutil.copytree(source, tmp_path / "runs" / source.name)
    done = cli("summary", str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    titles = [line for line in done.stdout.splitlines() if line.startswith("Kernels")]
    assert [t.split(" in ")[0] for t in titles] == ["Kernels on Ascend 310B", "Kernels on Ascend 910B"]
    tables = done.stdout.split("\n\n")
    assert "Addcmul" in tables[0] and "div_kernel" not in tables[0]
    assert "div_kernel" in tables[1] and "Addcmul" not in tables[1]


def test_demo_interrupted_prints_the_finished_cases(tmp_path: Path) -> None:
    if not ENTRY_POINT.is_file():
        pytest.fail(f"the asc-aprof entry point is not installed beside {sys.executable}: pip install -e .")
    args = [str(ENTRY_POINT), "demo", "--devices", "1", "--cases", "500", "--repeats", "20"]

    # Ctrl+C as a terminal delivers it: the child starts with SIGINT's default action, unblocked
    # (an ignored or blocked signal is inherited across exec; something earlier in a full run's
    # worker leaves SIGINT so, and the demo then rightly runs to its end).
    def default_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    proc = subprocess.Popen(
        args,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        assert proc.stderr is not None
        seen = ""
        while seen.count(" done on device 0") < 2:  # two cases finished (in either order)
            line = proc.stderr.readline()
            assert line, f"the demo ended before two cases finished: {seen}"
            seen += line
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert "asc-aprof: interrupted" in err
    finished = out.split(" of 500 case(s)", 1)[0]
    assert finished.isdigit() and 2 <= int(finished) < 500, out[:200]
    assert "add_custom" in out  # the finished cases' table


@pytest.mark.parametrize(("command", "example"), [("report", "report.html"), ("trace", "trace.json.gz")])
def test_an_output_that_is_a_folder_or_in_a_missing_one_is_said_with_the_flag(
    tmp_path: Path, command: str, example: str
) -> None:
    made = small_demo(str(tmp_path / "runs"), tmp_path)
    assert made.returncode == 0, made.stderr
    (tmp_path / "out").mkdir()
    done = cli(command, str(tmp_path / "runs"), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 1
    out = tmp_path / "out"
    assert (
        done.stderr.strip()
        == f"asc-aprof: error: -o {out}: is a folder; give a file name, e.g. -o {out / example}"
    )
    missing = tmp_path / "nope" / example
    done = cli(command, str(tmp_path / "runs"), "-o", str(missing), cwd=tmp_path)
    assert done.returncode == 1
    assert f"-o {missing}: the folder {missing.parent} does not exist" in done.stderr
    assert list((tmp_path / "out").iterdir()) == [] and not missing.parent.exists()


def test_write_report_into_a_folder_is_refused_before_writing(tmp_path: Path) -> None:
    from asc_aprof import UsageError
    from asc_aprof._outputs._replace import replacing

    with (
        pytest.raises(UsageError, match=r"is a folder: give the path of a file to write$"),
        replacing(tmp_path),
    ):
        pass
    assert list(tmp_path.iterdir()) == []
