"""Why a real export failed reaches the user: CANN's real msprof.py, made to fail on a copied run.

The real msprof.py prints its ``[ERROR]``, ``[WARNING]`` and ``[INFO]`` lines to stdout (``print``
in analysis/common_func/common.py), not stderr. Each case breaks a copy of a real run, exports it
through ``Profiler.export()`` / ``AsyncProfiler.export()`` with the real script, and checks the
``ExportError`` shows the lines msprof.py printed when run by hand on the same broken run, first.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from asc_aprof import AsyncProfiler, ExportError, Profiler, Toolkit
from asc_aprof._cann._export import ERROR_LINES, WARNING_LINES

from ..reference import needs_real_runs
from .conftest import copy_run

pytestmark = needs_real_runs

RUN = "910b_l1_div"
#: What varies between two runs of the same failure: the time stamp and the process id.
_STAMP = re.compile(r"^\w{3} \d\d \w{3} \d{4} \d\d:\d\d:\d\d \[(ERROR|WARNING)\] \[MSVP\] \[\d+\] ")


def empty_the_run(run_dir: Path) -> None:
    """No subdirectory left: msprof.py exits 2 ("does not have PROF dir")."""
    for child in run_dir.iterdir():
        shutil.rmtree(child)


def drop_info_json(run_dir: Path) -> None:
    """No ``info.json*`` anywhere: msprof.py warns it found no host or device data, exits 0."""
    for info in run_dir.glob("*/info.json*"):
        info.unlink()


#: (how the run is broken, the exit status, a diagnostic the real msprof.py prints for it)
CASES = [
    (empty_the_run, 2, "[ERROR]", "does not have PROF dir. Please check the path."),
    (drop_info_json, 0, "[WARNING]", "Can not find any host or device path in dir("),
]
IDS = ["empty-prof-dir", "no-info-json"]


def broken_run(tmp_path: Path, breaks: Callable[[Path], None]) -> tuple[Path, str]:
    result_path, run_id = copy_run(RUN, tmp_path)
    breaks(result_path / run_id)
    return result_path, run_id


def printed_by_hand(toolkit: Toolkit, run_dir: Path) -> tuple[int, list[str], str]:
    """msprof.py run directly: its exit status, its diagnostics without stamp and pid, its stderr."""
    done = subprocess.run(
        [toolkit.python, str(toolkit.msprof_script), "export", "summary", "-dir", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = [_STAMP.sub(r"[\1] ", line) for line in done.stdout.splitlines() if _STAMP.match(line)]
    return done.returncode, lines, done.stderr


def check_error(
    error: ExportError, toolkit: Toolkit, run_dir: Path, status: int, marker: str, text: str
) -> None:
    returncode, by_hand, stderr = printed_by_hand(toolkit, run_dir)
    # The premise: the real tool says why on stdout only.
    assert returncode == status and stderr == ""
    assert any(line.startswith(marker) and text in line for line in by_hand), by_hand
    assert error.returncode == status
    message = str(error)
    lines = error.diagnostics.split("\n")
    shown = [_STAMP.sub(r"[\1] ", line) for line in lines]
    # msprof.py's workers print in any order, each its own copy: compare distinct messages.
    assert len(set(shown)) == len(shown) and set(shown) <= set(by_hand)
    for kind, limit in (("[ERROR]", ERROR_LINES), ("[WARNING]", WARNING_LINES)):
        printed = {line for line in by_hand if line.startswith(kind)}
        assert len([line for line in shown if line.startswith(kind)]) == min(len(printed), limit)
    [reason] = [line for line in lines if text in line]
    assert f"{marker} [MSVP]" in reason and str(run_dir) in reason
    # The diagnostics come right after the command, before any other output.
    heading = message.index("msprof.py errors and warnings")
    assert message.index("  command: ") < heading < message.index(reason)
    assert all(line in message for line in lines)
    assert "other output" not in message or message.index(reason) < message.index("other output")


@pytest.mark.parametrize(("breaks", "status", "marker", "text"), CASES, ids=IDS)
def test_a_failed_real_export_says_why(
    real_toolkit: Toolkit,
    tmp_path: Path,
    breaks: Callable[[Path], None],
    status: int,
    marker: str,
    text: str,
) -> None:
    result_path, run_id = broken_run(tmp_path, breaks)
    with pytest.raises(ExportError) as info:
        Profiler(result_path, toolkit=real_toolkit, export_timeout=300).export(run_id, timeline=False)
    check_error(info.value, real_toolkit, result_path / run_id, status, marker, text)


@pytest.mark.anyio
@pytest.mark.parametrize(("breaks", "status", "marker", "text"), CASES, ids=IDS)
async def test_a_failed_real_async_export_says_why(
    real_toolkit: Toolkit,
    tmp_path: Path,
    breaks: Callable[[Path], None],
    status: int,
    marker: str,
    text: str,
) -> None:
    result_path, run_id = broken_run(tmp_path, breaks)
    with pytest.raises(ExportError) as info:
        await AsyncProfiler(result_path, toolkit=real_toolkit, export_timeout=300).export(
            run_id, timeline=False
        )
    check_error(info.value, real_toolkit, result_path / run_id, status, marker, text)
