"""Shared pieces of the simulator tests: raw CANN prototypes over ctypes, collect / export helpers.

The library is driven through raw ctypes (not asc_aprof's binding) so these tests pin the
simulator itself. The real runs and the real msprof.py, the judges of what the simulator writes,
are read from the shared reference folder beside the checkout (``ASC_APROF_REFERENCE`` overrides
where it is); tests that need them skip when it is absent.
"""

from __future__ import annotations

import csv
import ctypes
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from asc_aprof import sim
from asc_aprof._cann._binding import _declare as declare_prototypes

TASK_TIME = 0x2
AICORE_METRICS = 0x4
L2CACHE = 0x10
MSPROFTX = 0x80
TASK_TIME_L0 = 0x800
PROF_AICPU_MODEL = 0x4000000000000000  # internal: aclprofCreateConfig ORs it in
DEFAULT_TYPES = TASK_TIME | AICORE_METRICS | L2CACHE
PIPE_UTILIZATION = 1

PROF_NAME = re.compile(r"^PROF_(\d{6})_(\d{17})_(\d{8})([A-R]{8})$")
PIPE_HEADER_85 = (
    "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),"
    "Task Duration(us),Task Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,"
    "Input Data Types,Input Formats,Output Shapes,Output Data Types,Output Formats,Context ID,"
    "aicore_time(us),aic_total_cycles,aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),"
    "aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,"
    "aic_fixpipe_time(us),aic_fixpipe_ratio,aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,"
    "aiv_vec_time(us),aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),"
    "aiv_mte2_ratio,aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate,cube_utilization(%)"
)
TASK_TIME_HEADER = (
    "Device_id,kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(us),task_stop(us)"
)
SIM_ENV = (
    "ASC_APROF_SIM_LAYOUT",
    "ASC_APROF_SIM_HEADER",
    "ASC_APROF_SIM_SLICE_ROWS",
    "ASC_APROF_SIM_EXPORT_FAULT",
    "ASC_APROF_SIM_EXPORT_LATENCY_MS",
    "PROFILING_MODE",
)


class Acl:
    """The CANN prototypes over ctypes, exactly as a binding would declare them."""

    def __init__(self, library: Path) -> None:
        lib = ctypes.CDLL(str(library))
        declare_prototypes(lib)  # the binding's own declarations, on a handle of the test's own
        c_int, c_size_t = ctypes.c_int, ctypes.c_size_t
        lib.aclprofSetConfig.argtypes = [c_int, ctypes.c_char_p, c_size_t]
        lib.aclprofSetConfig.restype = c_int
        self.lib = lib

    def init(self, path: str | os.PathLike[str]) -> int:
        raw = os.fsencode(path)
        return int(self.lib.aclprofInit(raw, len(raw)))

    def create(
        self,
        devices: Sequence[int] | None,
        types: int = DEFAULT_TYPES,
        metric: int = PIPE_UTILIZATION,
        *,
        count: int | None = None,
        events: int | None = None,
    ) -> int | None:
        array = None if devices is None else (ctypes.c_uint32 * max(len(devices), 1))(*devices)
        n = count if count is not None else len(devices or ())
        value = self.lib.aclprofCreateConfig(array, n, metric, events, types)
        return int(value) if value else None

    def config(
        self, devices: Sequence[int], types: int = DEFAULT_TYPES, metric: int = PIPE_UTILIZATION
    ) -> int:
        cfg = self.create(devices, types, metric)
        assert cfg is not None
        return cfg

    def start(self, cfg: int | None) -> int:
        return int(self.lib.aclprofStart(cfg))

    def stop(self, cfg: int | None) -> int:
        return int(self.lib.aclprofStop(cfg))

    def destroy(self, cfg: int | None) -> int:
        return int(self.lib.aclprofDestroyConfig(cfg))

    def finalize(self) -> int:
        return int(self.lib.aclprofFinalize())


def prof_dirs(base: Path) -> list[Path]:
    return sorted(base.glob("PROF_*"))


def collect(
    acl: Acl,
    base: Path,
    devices: Sequence[int] = (0,),
    types: int = DEFAULT_TYPES,
    *,
    metric: int = PIPE_UTILIZATION,
    name: str = "Addcmul",
    **launch: object,
) -> Path:
    """One complete init → start → launch → stop → finalize run; returns its PROF dir."""
    assert acl.init(base) == 0
    cfg = acl.config(devices, types, metric)
    assert acl.start(cfg) == 0
    for device in devices:
        assert sim.launch(name, device=device, **launch) > 0  # type: ignore[arg-type]
    return finish(acl, cfg, base)


def finish(acl: Acl, cfg: int | None, base: Path) -> Path:
    """Stop the collection of *cfg*, destroy it and finalize; the one PROF dir under *base*."""
    assert acl.stop(cfg) == 0
    assert acl.destroy(cfg) == 0
    assert acl.finalize() == 0
    (prof,) = prof_dirs(base)
    return prof


def export(
    target: Path, kind: str = "summary", env: dict[str, str] | None = None, *extra: str
) -> subprocess.CompletedProcess[str]:
    script = sim.root() / "tools/profiler/profiler_tool/analysis/msprof/msprof.py"
    return subprocess.run(
        [sys.executable, str(script), "export", kind, "-dir", str(target), *extra],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def outputs(prof: Path, pattern: str) -> list[Path]:
    return sorted((prof / "mindstudio_profiler_output").glob(pattern))


def read_rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as file:
        return list(csv.DictReader(file))


def header(path: Path) -> str:
    with open(path, encoding="utf-8", newline="") as file:
        return file.readline().rstrip("\n")


# ---------------------------------------------------------------------------------------------
# The real runs and the real msprof.py

REFERENCE = Path(
    os.environ.get("ASC_APROF_REFERENCE") or Path(__file__).resolve().parents[3] / "shared" / "reference"
)
REAL_RUNS = REFERENCE / "real_runs"
REAL_MSPROF = REFERENCE / "real_msprof" / "analysis" / "msprof" / "msprof.py"
needs_real_runs = pytest.mark.skipif(
    not REAL_RUNS.is_dir(), reason=f"the real runs are not at {REAL_RUNS} (set ASC_APROF_REFERENCE)"
)
needs_real_msprof = pytest.mark.skipif(
    not (REAL_MSPROF.is_file() and REAL_RUNS.is_dir()),
    reason=f"the real msprof.py and runs are not under {REFERENCE} (set ASC_APROF_REFERENCE)",
)


def real_expected(run: str, kind: str) -> Path:
    """The CSV of *kind* the collecting host exported for the real run *run*."""
    (path,) = sorted((REAL_RUNS / run / "expected").glob(f"{kind}_*.csv"))
    return path


def real_prof(run: str) -> Path:
    """The raw ``PROF_*`` directory of the real run *run* (read-only: copy it before exporting)."""
    (path,) = sorted((REAL_RUNS / run).glob("PROF_*"))
    return path


def copy_real_prof(run: str, into: Path) -> Path:
    """A writable copy of a real run's ``PROF_*`` directory under *into*."""
    source = real_prof(run)
    target = into / source.name
    shutil.copytree(source, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    return target


def real_msprof(*argv: str) -> subprocess.CompletedProcess[str]:
    """The real msprof.py (its pure-Python path) with *argv*."""
    return subprocess.run(
        [sys.executable, str(REAL_MSPROF), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def sim_msprof(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The simulated msprof.py with *argv*."""
    script = sim.root() / "tools/profiler/profiler_tool/analysis/msprof/msprof.py"
    return subprocess.run(
        [sys.executable, str(script), *argv],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
