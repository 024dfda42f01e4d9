"""A simulated CANN toolkit: ``libmsprofiler.so`` and ``msprof.py`` without an NPU.

Opt-in only: nothing here is used unless you pass ``toolkit=asc_aprof.sim.toolkit()``, set
``ASC_APROF_SIMULATE=1``, or point ``ASCEND_HOME_PATH`` at :func:`root`. Importing this module
compiles nothing; the first :func:`root` / :func:`toolkit` / :func:`control` call builds the
tree with the system C compiler into ``${XDG_CACHE_HOME:-~/.cache}/asc-aprof/sim-<hash>/``
(``ASC_APROF_SIM_CACHE`` overrides the base directory).

One setting drives both halves. :meth:`SimControl.configure` chooses the CANN version
(:data:`CANN_VERSIONS`, default ``"8.5"``) and the chip (:data:`CHIPS`, default ``"910B"``) of the
process-wide simulated library; the library writes them into every run's metadata
(``aprofsim_cann_version``, ``aprofsim_chip`` and the real ``platform_version`` and ``pid`` in
``host/info.json`` and ``device_N/info.json.N``), and ``msprof.py`` exports each run the way that
version and chip would. What the library models (see ``libmsprofiler_sim.c``):

- the aclprof* prototypes and their error codes: path rules of ``aclprofInit`` (100000, 100002,
  100003, 200006 under ``PROFILING_MODE=dynamic``), NULL from ``aclprofCreateConfig`` on bad
  devices or events (never for the metric), 100043 without init (before 9.1), 100042 for a
  running device or "cmd mode", 200007 for unsupported ``dataTypeConfig`` bits, 100010 when
  stop's data types differ; ``aclprofDestroyConfig`` fails only on NULL (a pointer that is no
  live config is counted by :meth:`SimControl.invalid_destroys`: a double free on CANN);
- by version: run names without a pid before 8.5 (``PROF_<counter>_<local ms time>_<16 letters
  A-R>``) and ``..._<8-digit pid><8 letters>`` from 8.5; from 9.1 ``aclprofStart`` initialises by
  itself (path from ``aclprofSetConfig(16, ...)`` or the working directory) and stop / finalize
  without init return 0; on 9.2 an invalid or chip-unsupported metric fails the start with
  100000 when the AICORE_METRICS bit is set (earlier versions collect no PMU data instead);
- ``host/`` and ``device_N/`` dirs with metadata files, dirs 0750 and files 0640; a synchronous
  stop that leaves the dir complete;
- overlapping starts. **Before 9.0**: accepted; the first active collection owns ``host/`` and the
  next gets none, and the first stop cuts the host stream, so later kernels lose their names
  (op_summary ``N/A``). **9.x**: a second start returns 0 and does nothing (100010 if its data
  types differ), and any stop stops every running device;
- kernels launched with :func:`launch` (recorded only on profiled devices; the PMU counters a
  launch sets, encoded into the raw context PMU records CANN's exporter reads,
  :data:`COUNTER_COLUMNS`),
  with run-to-run noise of known spread (:meth:`SimControl.set_jitter`, seeded; off by default),
  modelled call latencies, simulated device time (:meth:`SimControl.set_device_time`: off by
  default), injected failures (:meth:`SimControl.inject`), a wall-clock offset
  (:meth:`SimControl.set_clock_offset`: a clock stepping back) and runs of other processes in the
  same result path (:meth:`SimControl.write_foreign_run`,
  :meth:`SimControl.foreign_run_on_next_start`).

``msprof.py`` (``msprof_sim.py``) follows the real command line and exit statuses and exports the
real CSV shapes: the merged ``mindstudio_profiler_output`` layout (``new``: op_summary, task_time,
op_statistic, api_statistic, README.txt) or per-device ``device_N/summary`` files (``old``),
``Block Dim`` (before 9.0) or ``Block Num`` headers, the chip's PMU columns, task time level 0
(types only in task_time), ``_slice_`` files, and export failures (exit codes, hangs with a child
process, signals, no CSV, truncated or foreign CSVs).
"""

from __future__ import annotations

import ctypes
import errno
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from .._model._toolkit import LIBRARY_NAME, MSPROF_SCRIPT, Toolkit
from .._model._warmup import is_warming_up
from . import _pmu
from ._build import SimulatorBuildError, ensure_built

__all__ = [
    "CANN_VERSIONS",
    "CHIPS",
    "COUNTER_COLUMNS",
    "DEFAULT_CANN",
    "DEFAULT_CHIP",
    "SimControl",
    "SimulatorBuildError",
    "control",
    "launch",
    "root",
    "toolkit",
]

LAYOUTS: Final = ("new", "old")
#: CANN versions the simulated library can behave as (what changes: see the module docstring).
CANN_VERSIONS: Final = ("8.0", "8.1", "8.2", "8.3", "8.5", "9.0", "9.1", "9.2")
#: Chips: ``"910B"`` (A2, platform 5, ``aic_``/``aiv_`` PMU columns), ``"310B"`` (platform 7).
CHIPS: Final = ("910B", "310B")
DEFAULT_CANN: Final = "8.5"
DEFAULT_CHIP: Final = "910B"
#: Values of ``toolkit(header=...)``: force ``Block Dim`` (before 9.0) or ``Block Num`` headers.
HEADERS: Final = CANN_VERSIONS
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
#: The PMU columns each chip's op_summary has for each ``AicoreMetrics`` group the simulator
#: collects, as the real exporter prints them for the simulated raw records (and the simulated
#: ``msprof.py``, which prints the raw reader's cells, with it); a group missing from a chip
#: writes none.
COUNTER_COLUMNS: Final = _pmu.REAL_COLUMNS
_COUNTER_NAMES: Final = frozenset(
    c for table in COUNTER_COLUMNS.values() for columns in table.values() for c in columns
)

#: Says (once per process, at WARNING) when a launch went to a device other than the profiled ones.
logger = logging.getLogger("asc_aprof.sim")
_warned_unprofiled = False  # guarded by _control_lock


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
    header: str | None = None,
    export_latency: float = 0.0,
    export_fault: str | None = None,
    export_time: float | None = None,
    python: str | None = None,
) -> Toolkit:
    """A :class:`Toolkit` for the simulator, with export behaviour set through its ``env``.

    The CANN version and chip are not set here: they are the library's
    (:meth:`SimControl.configure`), recorded in each run, and the export follows the run.

    :param layout: ``"new"`` (merged ``mindstudio_profiler_output``) or ``"old"`` (per device)
    :param header: None (default) names the block columns as the run's CANN version does; a
        version string forces that version's names (``"8.5"``: ``Block Dim``, ``"9.0"``:
        ``Block Num``), like exporting with another CANN install
    :param export_latency: seconds ``msprof.py`` sleeps before exporting
    :param export_fault: ``exit:N``, ``hang``, ``signal:N``, ``nocsv``, ``truncate`` or ``badheader``
    :param export_time: Unix time the export takes as "now" for its file names (default: the
        clock), so tests can make two exports share a second or step back
    :param python: interpreter for ``msprof.py`` (default: this one)
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")
    if header is not None and header not in HEADERS:
        raise ValueError(f"header must be None or one of {HEADERS}, not {header!r}")
    if not export_latency >= 0:
        raise ValueError("export_latency must be >= 0 seconds")
    if export_time is not None and not export_time >= 0:
        raise ValueError("export_time must be a Unix time >= 0")
    base = root()
    return Toolkit(
        library=base / "lib64" / LIBRARY_NAME,
        msprof_script=base / MSPROF_SCRIPT,
        python=python or sys.executable,
        # Every knob is set, so a stray variable in the caller's environment cannot leak in.
        env={
            "ASC_APROF_SIM_LAYOUT": layout,
            "ASC_APROF_SIM_HEADER": header or "",
            "ASC_APROF_SIM_EXPORT_LATENCY_MS": repr(export_latency * 1000),
            "ASC_APROF_SIM_EXPORT_FAULT": export_fault or "",
            "ASC_APROF_SIM_EXPORT_TIME": "" if export_time is None else repr(float(export_time)),
        },
    )


class SimControl:
    """Knobs and probes of the simulated library, sharing state with the binding.

    ``ctypes.CDLL`` of the same path returns the same ``dlopen`` handle, so these calls act on the
    very library the profiler loaded.
    """

    def __init__(self, library: Path) -> None:
        self.library = library
        self._clock_lock = threading.Lock()
        self._device_time = False  # guarded by _clock_lock
        self._busy_until: dict[int, float] = {}  # guarded by _clock_lock: device -> monotonic end
        self._now = time.monotonic  # the device clock's source and its wait (tests replace them)
        self._sleep = time.sleep
        lib = ctypes.CDLL(str(library))
        self._lib = lib
        c_int, c_char_p, c_uint32 = ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32
        signatures: dict[str, tuple[list[type], type | None]] = {
            "aprofsim_set_cann": ([c_int], c_int),
            "aprofsim_get_cann": ([], c_int),
            "aprofsim_set_chip": ([c_char_p], c_int),
            "aprofsim_get_chip": ([], c_char_p),
            "aprofsim_set_clock_offset_ns": ([ctypes.c_longlong], None),
            "aprofsim_set_clock_dip": ([ctypes.c_ulonglong, ctypes.c_ulonglong, c_uint32], c_int),
            "aprofsim_invalid_destroy_count": ([], c_int),
            "aprofsim_write_foreign_run": (
                [c_char_p, c_int, c_char_p, c_uint32, c_char_p, c_uint32, c_char_p, ctypes.c_size_t],
                c_int,
            ),
            "aprofsim_foreign_run_on_next_start": ([c_int, c_char_p, c_uint32, c_char_p, c_uint32], c_int),
            "aprofsim_set_latency_us": ([c_char_p, ctypes.c_longlong], c_int),
            "aprofsim_inject": ([c_char_p, c_int, c_int], c_int),
            "aprofsim_clear_faults": ([], None),
            "aprofsim_set_device_count": ([c_int], c_int),
            "aprofsim_set_cmd_mode": ([c_int], None),
            "aprofsim_running_device_count": ([], c_int),
            "aprofsim_is_running": ([c_int], c_int),
            "aprofsim_device_pmu": ([c_int], c_int),
            "aprofsim_live_config_count": ([], c_int),
            "aprofsim_is_initialized": ([], c_int),
            "aprofsim_reset": ([], None),
            "aprofsim_launch": ([c_uint32, c_char_p, c_char_p, ctypes.c_double, c_uint32, c_uint32], c_int),
            "aprofsim_launch_ex": (
                [c_uint32, c_char_p, c_char_p, ctypes.c_double, c_uint32, c_uint32, c_char_p, c_char_p],
                c_int,
            ),
            "aprofsim_launch_noisy": (
                [
                    c_uint32,
                    c_char_p,
                    c_char_p,
                    ctypes.c_double,
                    c_uint32,
                    c_uint32,
                    c_char_p,
                    c_char_p,
                    ctypes.c_double,
                ],
                c_int,
            ),
            "aprofsim_set_jitter": (
                [ctypes.c_double, ctypes.c_double, ctypes.c_double, ctypes.c_uint64],
                c_int,
            ),
        }
        for name, (argtypes, restype) in signatures.items():
            function = getattr(lib, name)
            function.argtypes = argtypes
            function.restype = restype

    def configure(self, *, cann: str | None = None, chip: str | None = None) -> None:
        """Set the CANN version and / or the chip the library behaves as (None: unchanged).

        Both are process-wide, apply from the next call, are recorded in every run made after
        it (so its export follows), and go back to ``"8.5"`` / ``"910B"`` on :meth:`reset`.

        :param cann: one of :data:`CANN_VERSIONS`
        :param chip: one of :data:`CHIPS`
        :raises ValueError: an unknown version or chip
        """
        if cann is not None and cann not in CANN_VERSIONS:
            raise ValueError(f"cann must be one of {CANN_VERSIONS}, not {cann!r}")
        if chip is not None and chip not in CHIPS:
            raise ValueError(f"chip must be one of {CHIPS}, not {chip!r}")
        if cann is not None:
            major, minor = cann.split(".")
            self._lib.aprofsim_set_cann(int(major) * 10 + int(minor))
        if chip is not None:
            self._lib.aprofsim_set_chip(chip.encode())

    @property
    def cann(self) -> str:
        """The CANN version the library behaves as."""
        code = int(self._lib.aprofsim_get_cann())
        return f"{code // 10}.{code % 10}"

    @property
    def chip(self) -> str:
        """The chip the library behaves as."""
        return bytes(self._lib.aprofsim_get_chip()).decode()

    def set_cann(self, version: str) -> None:
        """Shorthand for ``configure(cann=version)``; ``"9.x"`` means ``"9.0"``."""
        self.configure(cann="9.0" if version == "9.x" else version)

    def set_clock_offset(self, seconds: float) -> None:
        """Shift the simulated wall clock by *seconds* (negative: the clock stepped back).

        It moves the local time in new run names and the times in ``start_info`` / ``end_info``.
        Kernel start times follow it only forwards: a simulated device clock never runs
        backwards (it continues from the device's last task until :meth:`reset`), so only run
        names and metadata show the step back. :meth:`reset` sets the offset back to 0.
        """
        if not abs(seconds) < 1e9:
            raise ValueError(f"clock offset must be a finite number of seconds below 1e9, not {seconds!r}")
        self._lib.aprofsim_set_clock_offset_ns(round(seconds * 1e9))

    def write_foreign_run(
        self,
        result_path: str | os.PathLike[str],
        *,
        pid: int,
        name: str | None = None,
        device: int = 0,
        kernel: str = "foreign_kernel",
        count: int = 1,
    ) -> Path:
        """Write a complete run into *result_path* as another process (*pid*) would, now.

        The run has ``host/`` and ``device_<device>/`` with metadata carrying *pid* and the
        current CANN version and chip, and *count* AI Core kernels named *kernel*, so it exports
        like any other. Its name is *name*, or one made the way this CANN version makes names
        (counter 000001: a process of its own; the pid in it from 8.5).

        :returns: the new run directory
        :raises ValueError: bad pid, name, kernel, device or count
        :raises OSError: the directory exists or cannot be written
        """
        buffer = ctypes.create_string_buffer(4096)
        code = int(
            self._lib.aprofsim_write_foreign_run(
                os.fsencode(result_path),
                pid,
                name.encode() if name is not None else None,
                device,
                kernel.encode(),
                count,
                buffer,
                len(buffer),
            )
        )
        if code == -errno.EINVAL:
            raise ValueError(
                "write_foreign_run: pid must be 0..99999999, name a plain directory name, kernel "
                f"non-empty without control characters, device < 64, count <= 1e6 (got pid={pid}, "
                f"name={name!r}, kernel={kernel!r}, device={device}, count={count})"
            )
        if code < 0:
            raise OSError(-code, os.strerror(-code), os.fspath(result_path))
        return Path(os.fsdecode(result_path)) / buffer.value.decode()

    def foreign_run_on_next_start(
        self,
        *,
        pid: int,
        name: str | None = None,
        device: int = 0,
        kernel: str = "foreign_kernel",
        count: int = 1,
    ) -> None:
        """Make the next effective ``aclprofStart`` also write a foreign run into its result path.

        Models another process starting into the same result path at the same moment: when
        the start returns, its own run and one like :meth:`write_foreign_run` writes both exist.
        One shot; :meth:`reset` disarms it.

        :raises ValueError: bad pid, name, kernel, device or count
        """
        code = int(
            self._lib.aprofsim_foreign_run_on_next_start(
                pid, name.encode() if name is not None else None, device, kernel.encode(), count
            )
        )
        if code != 0:
            raise ValueError(
                f"foreign_run_on_next_start: bad arguments (pid={pid}, name={name!r}, kernel={kernel!r}, "
                f"device={device}, count={count})"
            )

    def invalid_destroys(self) -> int:
        """``aclprofDestroyConfig`` calls with a pointer that is no live config since :meth:`reset`.

        They return 0, as on CANN, where they would be a double free.
        """
        return int(self._lib.aprofsim_invalid_destroy_count())

    def set_latency(
        self, *, init: float = 0.0, start: float = 0.0, stop: float = 0.0, finalize: float = 0.0
    ) -> None:
        """How long (seconds) each call blocks, holding the library's lock like CANN does."""
        for which, seconds in (("init", init), ("start", start), ("stop", stop), ("finalize", finalize)):
            if not seconds >= 0:
                raise ValueError(f"{which} latency must be >= 0 seconds")
            self._lib.aprofsim_set_latency_us(which.encode(), round(seconds * 1e6))

    def set_clock_dip(self, mhz: int | None, *, start_ns: int = 0, end_ns: int = 0) -> None:
        """A dip of the AI Core clock to *mhz* (910B-like chip) from *start_ns* to *end_ns*, in the
        simulator's wall clock (``time.time_ns()`` plus :meth:`set_clock_offset`'s offset, the
        clock of the kernels' start times); ``None`` clears it (so does :meth:`reset`).

        Every run it overlaps carries it in its clock records (``lpmInfoConv`` from CANN 9.0,
        ``lpmFreqConv`` before): a change to *mhz* at the dip's start (or the collection's) and
        back to the rated 1650 MHz at its end, as the real exporter's ``freq.db`` then shows; so
        each kernel that starts inside it has ``aic_mhz`` *mhz*. An AI Core kernel (not AI CPU)
        launched while the dip is set and starting inside it runs slower: its duration is the
        launched one x rated clock / *mhz* (its cycles, duration x clock, unchanged; so are its
        simulated PMU cycles). Set the dip before the launches it should slow (an open end, then
        narrowed once they are launched, keeps them inside it). On the 310B, whose runs record no
        clock, a dip changes nothing.

        :raises ValueError: *mhz* outside 1..65535, or *end_ns* not after *start_ns*
        """
        if mhz is None:
            self._lib.aprofsim_set_clock_dip(0, 0, 0)
            return
        if not 0 < mhz < 65536 or not 0 <= start_ns < end_ns < 1 << 64:
            raise ValueError(
                f"set_clock_dip: mhz must be in 1..65535 and 0 <= start_ns < end_ns, got {mhz!r}, "
                f"{start_ns!r}, {end_ns!r}"
            )
        self._lib.aprofsim_set_clock_dip(start_ns, end_ns, mhz)

    def set_jitter(
        self,
        sigma: float,
        *,
        seed: int = 0,
        outlier_rate: float = 0.0,
        outlier_factor: float = 3.0,
    ) -> None:
        """Run-to-run noise of every later launch: each kernel takes ``duration_us * exp(sigma * Z)``.

        Z is standard normal, drawn from a generator of the noise's own seeded with *seed*, so
        the same launches after the same ``set_jitter`` get the same durations. The noise is
        lognormal: the median duration stays exactly ``duration_us`` and the log durations have
        standard deviation *sigma* (``sigma=0.02``: about 2% relative spread). With probability
        *outlier_rate* a kernel also takes *outlier_factor* times as long (a preempted launch).
        Durations are recorded in whole nanoseconds. ``set_jitter(0)`` and :meth:`reset` turn
        the noise off.

        :raises ValueError: sigma outside [0, 10), outlier_rate outside [0, 1], outlier_factor
            outside [1, 1e6], or a seed outside 0..2**64-1
        """
        if not 0 <= seed < 1 << 64:
            raise ValueError(f"seed must be in 0..2**64-1, not {seed!r}")
        if self._lib.aprofsim_set_jitter(float(sigma), float(outlier_rate), float(outlier_factor), seed) != 0:
            raise ValueError(
                "set_jitter: sigma must be in [0, 10), outlier_rate in [0, 1] and outlier_factor in "
                f"[1, 1e6] (got sigma={sigma!r}, outlier_rate={outlier_rate!r}, "
                f"outlier_factor={outlier_factor!r})"
            )

    def set_device_time(self, enabled: bool) -> None:
        """Make every later :func:`launch` occupy its device for the kernels' modelled time.

        Off (the default, and after :meth:`reset`), a launch returns at once: simulated kernels
        take no wall time, so a benchmark's wall time is the library's own work. On, it models an
        NPU running the kernels: each device has a busy-until clock, a launch of *count* kernels
        of *duration_us* starts when the device is free (launches on one device serialise,
        different devices run concurrently, whether or not the device is being profiled) and
        returns after ``count * duration_us`` of device time, waiting in a sleep (no CPU, the GIL
        released). The recorded durations stay the modelled ones; the occupancy uses the nominal
        *duration_us* (jitter changes the recorded durations, not the wait).
        """
        with self._clock_lock:
            self._device_time = bool(enabled)
            self._busy_until.clear()

    @property
    def device_time(self) -> bool:
        """Whether launches occupy their device (:meth:`set_device_time`)."""
        with self._clock_lock:
            return self._device_time

    def _occupy(self, device: int, seconds: float) -> None:
        """Run *seconds* of device time on *device* after what it already runs; return when done."""
        with self._clock_lock:
            if not self._device_time or seconds <= 0:
                return
            now = self._now()
            end = max(now, self._busy_until.get(device, now)) + seconds
            self._busy_until[device] = end
        delay = end - self._now()
        if delay > 0:
            self._sleep(delay)

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
        """Finalize whatever runs, free every config, clear faults, latencies and modes (tests).

        The settings go back to their defaults: CANN 8.5, chip 910B, clock offset 0, no foreign
        run armed, no pending ``aclprofSetConfig`` path, no device time.
        """
        self._lib.aprofsim_reset()
        self.set_device_time(False)

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
        binary_name: str | None = None,
        jitter: float | None = None,
        counters: Mapping[str, float | None] | None = None,
    ) -> int:
        """See :func:`launch`."""
        if task_type not in TASK_TYPES:
            raise ValueError(f"task_type must be one of {TASK_TYPES}, not {task_type!r}")
        if jitter is not None and not 0 <= jitter < 10:
            raise ValueError(f"jitter must be None or in [0, 10), not {jitter!r}")
        _check_counters(counters)
        pmu = self._lib.aprofsim_device_pmu(device)
        record = None
        if pmu >= 0:  # the device records PMU data: encode the counters into its events
            kernel = _pmu.Kernel(self.chip, pmu & 0xFF, bool(pmu & 0x100), task_type, block_dim)
            record = _pmu.encode(kernel, name, counters)
        tensors = _tensor_info(input_shapes, output_shapes, dtype, data_format, record)
        recorded = int(
            self._lib.aprofsim_launch_noisy(
                device,
                name.encode(),
                task_type.encode(),
                duration_us,
                block_dim,
                count,
                tensors.encode() if tensors is not None else None,
                binary_name.encode() if binary_name is not None else None,
                -1.0 if jitter is None else float(jitter),
            )
        )
        if recorded < 0:
            raise ValueError(
                f"aprofsim_launch rejected its arguments ({recorded}): name and binary_name must be "
                "non-empty without control characters, duration in (0, 1e9] us, device below the "
                "device count"
            )
        self._occupy(device, count * duration_us / 1e6)
        running = self.running_devices() if recorded == 0 and count > 0 else []
        # Launching while nothing is profiled is just running a kernel (warm-up, a correctness
        # test): silent. Launching on another device than the ones profiled may be a wrong device
        # id, or another device's warm-up while these collect: said once, on the logger.
        if running and not is_warming_up():
            _log_unprofiled(
                f"sim.launch({name!r}, device={device}): device {device} is not being profiled "
                f"(profiled now: {', '.join(map(str, running))}), so its {count} kernel(s) were not "
                f"recorded; launch inside profile(device_id={device}) or between start({device}) and stop()"
            )
        return recorded


def _log_unprofiled(message: str) -> None:
    global _warned_unprofiled
    with _control_lock:
        first, _warned_unprofiled = not _warned_unprofiled, True
    if first:
        logger.warning("%s (said once per process)", message)
    else:
        logger.debug("%s", message)


def _check_counters(counters: Mapping[str, float | None] | None) -> None:
    """*counters* name PMU columns some chip prints and hold finite numbers (or None)."""
    for name, value in (counters or {}).items():
        if name not in _COUNTER_NAMES:
            raise ValueError(
                f"counters: {name!r} is not a PMU column of any AicoreMetrics group (see "
                "asc_aprof.sim.COUNTER_COLUMNS for each chip's names)"
            )
        if value is not None and not (isinstance(value, int | float) and math.isfinite(value)):
            raise ValueError(f"counters: {name!r} must be a finite number or None, not {value!r}")


def _tensor_info(
    input_shapes: Sequence[Sequence[int]] | None,
    output_shapes: Sequence[Sequence[int]] | None,
    dtype: str,
    data_format: str,
    record: str | None = None,
) -> str | None:
    """The TAB-separated fields the host record carries: six tensor fields (op_summary shape
    columns), an empty one, then the PMU record the counters encode into (when PMU data is
    collected)."""
    if record is not None:
        head = _tensor_info(input_shapes, output_shapes, dtype, data_format) or "\t" * 5
        return f"{head}\t\t{record}"
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
    binary_name: str | None = None,
    jitter: float | None = None,
    counters: Mapping[str, float | None] | None = None,
) -> int:
    """Run *count* back-to-back simulated kernels on *device*.

    They are recorded only while the device is being profiled; the return value says how many
    were. Launched on a device that is not being profiled, they are not recorded (as a real
    kernel outside a collection leaves no trace): 0 is returned, and while another device is
    being profiled the ``asc_aprof.sim`` logger says so once per process (a wrong device id, or
    another device's warm-up); launching with nothing profiled, e.g. a warm-up, is silent.
    Shapes are accepted but not written into the raw data yet (no ``tensor_info`` records), so
    op_summary's tensor columns say ``N/A``, as the real exporter prints them for that data.
    *binary_name* is the name task time level 0 shows in task_time's ``kernel_name`` (real aclnn
    ops show a hashed binary name there, Ascend C kernels their own name; default: *name*).
    *jitter* is the sigma of these kernels' run-to-run noise (see :meth:`SimControl.set_jitter`;
    None: the process setting, 0: exact durations).

    With device time on (:meth:`SimControl.set_device_time`), the call returns after the device
    has run the kernels (``count * duration_us``, after the device's earlier launches), as a
    synchronous launch on an NPU would; off (the default), at once. It waits in ``time.sleep``:
    from a coroutine, run it in a worker thread (``anyio.to_thread.run_sync``).

    *counters* sets PMU cells of these kernels' op_summary rows by column name (real CANN names),
    e.g. ``{"aiv_vec_ratio": 0.82}``. When the device collects PMU data, they are encoded into
    the kernels' raw context PMU records (``ffts_profile``: a ratio becomes
    ``round(ratio * total_cycles)`` events, the cycles coming from the duration, block dim and the
    core clock the exporter uses), which CANN's real ``msprof.py`` turns back into the cells
    (:data:`COUNTER_COLUMNS`; a bandwidth to the step one event count makes). Only what the
    kernel's main core records can be set: its ratios, bandwidths, L2 cache counts,
    ``icache_miss_rate``, and its total cycles or (at task time level 1) the core time they give.
    Cells it does not set get plausible values consistent with the duration (the core busy for
    60-95 % of it, ratios below 0.4). Columns of several groups may be given at once: each
    collection encodes those its group prints (a bench with ``metrics="all"`` replays the same
    launches once per group), and the others wait for their group's collection. The simulated
    ``msprof.py`` prints the cells the raw reader computes from the same records, so both
    exporters print the same cells. Without PMU
    collection the counters are ignored (op_summary has no PMU column). They travel with the
    kernels' host record, so a kernel without host data (overlapping collections before 9.0)
    gets the default record instead (its core busy 80 % of the duration, no events).

    :raises ValueError: bad name, task type, duration, device or counters (a name no chip prints)
    :raises UsageError: a counter the kernel's PMU record cannot carry while the device collects
        PMU data (a derived cell, another core's column, a column no group of the chip prints, a
        cell the exporter prints ``N/A``, a time at task time level 0, ``None``, or both the
        cycles and the time); the message names the settable columns
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
        binary_name=binary_name,
        jitter=jitter,
        counters=counters,
    )
