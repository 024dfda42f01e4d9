"""A simulated CANN toolkit: ``libmsprofiler.so`` and ``msprof.py`` without an NPU.

Opt-in only: nothing here is used unless you pass ``toolkit=asc_aprof.sim.toolkit()``, set
``ASC_APROF_SIMULATE=1``, or point ``ASCEND_HOME_PATH`` at :func:`root`. Importing this module
compiles nothing; the first :func:`root` / :func:`toolkit` / :func:`control` call builds the
tree with the system C compiler into ``${XDG_CACHE_HOME:-~/.cache}/asc-aprof/sim-<hash>/``
(``ASC_APROF_SIM_CACHE`` overrides the base directory).

What the library models (CANN 8.5 code paths, see ``libmsprofiler_sim.c``):

- the aclprof* prototypes and their error codes: path rules of ``aclprofInit`` (100000, 100002,
  100003, 200006 under ``PROFILING_MODE=dynamic``), NULL from ``aclprofCreateConfig`` on bad
  devices / metrics / events, 100043 without init, 100042 for a running device or "cmd mode",
  200007 for unsupported ``dataTypeConfig`` bits, 100010 when stop's data types differ;
- ``PROF_<counter>_<local ms time>_<pid><8 letters A-R>`` dirs with ``host/`` and ``device_N/``,
  metadata files, dirs 0750 and files 0640; a synchronous stop that leaves the dir complete;
- overlapping starts. **8.5**: accepted; the first active collection owns ``host/`` and the next
  gets none, and the first stop cuts the host stream, so later kernels lose their names
  (op_summary ``N/A``). **9.x**: a second start returns 0 and does nothing (100010 if its data
  types differ), and any stop stops every running device;
- kernels launched with :func:`launch` (recorded only on profiled devices), modelled call
  latencies, and injected failures (:meth:`SimControl.inject`).

``msprof.py`` (``msprof_sim.py``) exports the real CSV shapes: the merged
``mindstudio_profiler_output`` layout (``new``) or per-device ``device_N/summary`` files
(``old``), ``Block Dim`` (8.5) or ``Block Num`` (9.0) headers, ``_slice_`` files, and export
failures (exit codes, hangs with a child process, signals, no CSV, truncated or foreign CSVs).
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from .._toolkit import LIBRARY_NAME, MSPROF_SCRIPT, Toolkit
from ._build import SimulatorBuildError, ensure_built

__all__ = ["SimControl", "SimulatorBuildError", "control", "launch", "root", "toolkit"]

LAYOUTS: Final = ("new", "old")
HEADERS: Final = ("8.5", "9.0")
TASK_TYPES: Final = ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "AI_CPU")
FUNCTIONS: Final = (
    "aclprofInit",
    "aclprofFinalize",
    "aclprofCreateConfig",
    "aclprofDestroyConfig",
    "aclprofStart",
    "aclprofStop",
    "aclprofSetConfig",
)
MAX_DEVICES: Final = 64

_control: SimControl | None = None
_control_lock = threading.Lock()


def root() -> Path:
    """The simulated toolkit root (a ``$ASCEND_HOME_PATH``-like tree), built on first use.

    :raises SimulatorBuildError: no C compiler, or the compile failed
    """
    return ensure_built().resolve()


def toolkit(
    *,
    layout: str = "new",
    header: str = "8.5",
    export_latency: float = 0.0,
    export_fault: str | None = None,
    python: str | None = None,
) -> Toolkit:
    """A :class:`Toolkit` for the simulator, with export behaviour set through its ``env``.

    :param layout: ``"new"`` (merged ``mindstudio_profiler_output``) or ``"old"`` (per device)
    :param header: ``"8.5"`` (``Block Dim``) or ``"9.0"`` (``Block Num``)
    :param export_latency: seconds ``msprof.py`` sleeps before exporting
    :param export_fault: ``exit:N``, ``hang``, ``signal:N``, ``nocsv``, ``truncate`` or ``badheader``
    :param python: interpreter for ``msprof.py`` (default: this one)
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")
    if header not in HEADERS:
        raise ValueError(f"header must be one of {HEADERS}, not {header!r}")
    if not export_latency >= 0:
        raise ValueError("export_latency must be >= 0 seconds")
    base = root()
    return Toolkit(
        library=base / "lib64" / LIBRARY_NAME,
        msprof_script=base / MSPROF_SCRIPT,
        python=python or sys.executable,
        # Every knob is set, so a stray variable in the caller's environment cannot leak in.
        env={
            "ASC_APROF_SIM_LAYOUT": layout,
            "ASC_APROF_SIM_HEADER": header,
            "ASC_APROF_SIM_EXPORT_LATENCY_MS": repr(export_latency * 1000),
            "ASC_APROF_SIM_EXPORT_FAULT": export_fault or "",
        },
    )


class SimControl:
    """Knobs and probes of the simulated library, sharing state with the binding.

    ``ctypes.CDLL`` of the same path returns the same ``dlopen`` handle, so these calls act on the
    very library the profiler loaded.
    """

    def __init__(self, library: Path) -> None:
        self.library = library
        lib = ctypes.CDLL(str(library))
        self._lib = lib
        c_int, c_char_p, c_uint32 = ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32
        signatures: dict[str, tuple[list[type], type | None]] = {
            "aprofsim_set_cann": ([c_int], c_int),
            "aprofsim_set_latency_us": ([c_char_p, ctypes.c_longlong], c_int),
            "aprofsim_inject": ([c_char_p, c_int, c_int], c_int),
            "aprofsim_clear_faults": ([], None),
            "aprofsim_set_device_count": ([c_int], c_int),
            "aprofsim_set_cmd_mode": ([c_int], None),
            "aprofsim_running_device_count": ([], c_int),
            "aprofsim_is_running": ([c_int], c_int),
            "aprofsim_live_config_count": ([], c_int),
            "aprofsim_is_initialized": ([], c_int),
            "aprofsim_reset": ([], None),
            "aprofsim_launch": ([c_uint32, c_char_p, c_char_p, ctypes.c_double, c_uint32, c_uint32], c_int),
            "aprofsim_launch_ex": (
                [c_uint32, c_char_p, c_char_p, ctypes.c_double, c_uint32, c_uint32, c_char_p],
                c_int,
            ),
        }
        for name, (argtypes, restype) in signatures.items():
            function = getattr(lib, name)
            function.argtypes = argtypes
            function.restype = restype

    def set_cann(self, version: str) -> None:
        """Choose the overlap behaviour: ``"8.5"`` (default) or ``"9.x"``."""
        majors = {"8.5": 8, "9.x": 9}
        if version not in majors:
            raise ValueError(f"version must be '8.5' or '9.x', not {version!r}")
        self._lib.aprofsim_set_cann(majors[version])

    def set_latency(
        self, *, init: float = 0.0, start: float = 0.0, stop: float = 0.0, finalize: float = 0.0
    ) -> None:
        """How long (seconds) each call blocks, holding the library's lock like CANN does."""
        for which, seconds in (("init", init), ("start", start), ("stop", stop), ("finalize", finalize)):
            if not seconds >= 0:
                raise ValueError(f"{which} latency must be >= 0 seconds")
            self._lib.aprofsim_set_latency_us(which.encode(), round(seconds * 1e6))

    def inject(self, function: str, code: int, times: int = 1) -> None:
        """Make the next *times* calls of *function* return *code* (CreateConfig: NULL), doing nothing."""
        if function not in FUNCTIONS:
            raise ValueError(f"function must be one of {FUNCTIONS}, not {function!r}")
        self._lib.aprofsim_inject(function.encode(), code, times)

    def clear_faults(self) -> None:
        self._lib.aprofsim_clear_faults()

    def set_device_count(self, count: int) -> None:
        """How many devices the simulated machine has (1..64, default 8)."""
        if self._lib.aprofsim_set_device_count(count) != 0:
            raise ValueError(f"device count must be 1..{MAX_DEVICES}, not {count}")

    def set_cmd_mode(self, flag: bool) -> None:
        """Pretend the process runs under the msprof CLI: aclprofStart returns 100042."""
        self._lib.aprofsim_set_cmd_mode(1 if flag else 0)

    def running_devices(self) -> list[int]:
        return [device for device in range(MAX_DEVICES) if self._lib.aprofsim_is_running(device)]

    def live_configs(self) -> int:
        """Configs created and not yet destroyed."""
        return int(self._lib.aprofsim_live_config_count())

    def initialized(self) -> bool:
        return bool(self._lib.aprofsim_is_initialized())

    def reset(self) -> None:
        """Finalize whatever runs, free every config, clear faults, latencies and modes (tests)."""
        self._lib.aprofsim_reset()

    def launch(
        self,
        name: str,
        *,
        device: int = 0,
        task_type: str = "AI_CORE",
        duration_us: float = 10.0,
        block_dim: int = 1,
        count: int = 1,
        input_shapes: Sequence[Sequence[int]] | None = None,
        output_shapes: Sequence[Sequence[int]] | None = None,
        dtype: str = "FLOAT16",
        data_format: str = "FORMAT_ND",
    ) -> int:
        """See :func:`launch`."""
        if task_type not in TASK_TYPES:
            raise ValueError(f"task_type must be one of {TASK_TYPES}, not {task_type!r}")
        tensors = _tensor_info(input_shapes, output_shapes, dtype, data_format)
        recorded = int(
            self._lib.aprofsim_launch_ex(
                device,
                name.encode(),
                task_type.encode(),
                duration_us,
                block_dim,
                count,
                tensors.encode() if tensors is not None else None,
            )
        )
        if recorded < 0:
            raise ValueError(
                f"aprofsim_launch rejected its arguments ({recorded}): name must be non-empty without "
                "control characters, duration in (0, 1e9] us, device below the device count"
            )
        return recorded


def _tensor_info(
    input_shapes: Sequence[Sequence[int]] | None,
    output_shapes: Sequence[Sequence[int]] | None,
    dtype: str,
    data_format: str,
) -> str | None:
    """The six TAB-separated tensor fields the host record carries (op_summary shape columns)."""
    if input_shapes is None and output_shapes is None:
        return None
    fields: list[str] = []
    for shapes in (input_shapes, output_shapes):
        if not shapes:
            fields += ["", "", ""]
            continue
        fields.append(";".join(",".join(str(dim) for dim in shape) for shape in shapes))
        fields.append(";".join([dtype] * len(shapes)))
        fields.append(";".join([data_format] * len(shapes)))
    return "\t".join(fields)


def control() -> SimControl:
    """The process-wide :class:`SimControl` (loads the simulated library, building it first)."""
    global _control
    with _control_lock:
        if _control is None:
            _control = SimControl(root() / "lib64" / LIBRARY_NAME)
        return _control


def launch(
    name: str,
    *,
    device: int = 0,
    task_type: str = "AI_CORE",
    duration_us: float = 10.0,
    block_dim: int = 1,
    count: int = 1,
    input_shapes: Sequence[Sequence[int]] | None = None,
    output_shapes: Sequence[Sequence[int]] | None = None,
    dtype: str = "FLOAT16",
    data_format: str = "FORMAT_ND",
) -> int:
    """Run *count* back-to-back simulated kernels on *device*.

    They are recorded only while the device is being profiled; the return value says how many
    were (0 otherwise). Shapes, when given, fill op_summary's tensor columns.

    :raises ValueError: bad name, task type, duration or device
    """
    return control().launch(
        name,
        device=device,
        task_type=task_type,
        duration_us=duration_us,
        block_dim=block_dim,
        count=count,
        input_shapes=input_shapes,
        output_shapes=output_shapes,
        dtype=dtype,
        data_format=data_format,
    )
