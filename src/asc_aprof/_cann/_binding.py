"""ctypes binding of the aclprof C API in ``libmsprofiler.so``.

Every function gets ``argtypes`` and ``restype`` once, at load time, so a pointer is never
truncated to an int and a bad argument fails in Python rather than in C. A non-zero ``aclError``
becomes :class:`AclError` (code, symbol, function, hint); a NULL from ``aclprofCreateConfig``
becomes ``AclError(100000)`` with the causes CANN documents.

The binding itself is not thread-affine or locked: CANN's profiling state is process-wide, and the
collector (:mod:`asc_aprof._cann._collector`) is what serialises calls on one thread. Use
:class:`MsprofInterface` directly only for a custom configuration, and never while a
:class:`Profiler` in the same process is collecting.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final, NewType

from .._model._enums import MAX_PATH_BYTES, AicoreMetrics, ProfileType
from .._model._errors import AclError, InvalidArgumentError, UsageError, create_config_null_error
from .._model._metric_group import metric_group
from .._model._toolkit import Toolkit
from ._discovery import discover_toolkit

#: An opaque ``aclprofConfig *`` (never NULL once returned by :meth:`MsprofInterface.create_config`).
ProfilerConfig = NewType("ProfilerConfig", int)

MAX_DEVICES: Final = 64

#: What ``profile_types`` / ``create_config(types)`` accept: a flag, an int, or an iterable of them.
ProfileTypes = ProfileType | int | Iterable[ProfileType | int]


def combine_profile_types(value: ProfileTypes) -> int:
    """The ``dataTypeConfig`` mask of *value*: a ``ProfileType``, an int, or an iterable of them OR-ed.

    Upstream's ``create_config`` takes a list of ``ProfileType``; asc-aprof takes that too.

    :raises InvalidArgumentError: for anything else, naming the value
    """
    if isinstance(value, int):
        return int(value)
    mask = 0
    try:
        items = iter(value)
    except TypeError:
        raise InvalidArgumentError(
            f"profile_types must be a ProfileType, an int or an iterable of them, got {value!r}"
        ) from None
    for item in items:
        if not isinstance(item, int):
            raise InvalidArgumentError(
                f"profile_types must hold ProfileType or int values, got {item!r} in {value!r}"
            )
        mask |= int(item)
    return mask


_libraries: dict[str, ctypes.CDLL] = {}
_load_lock = threading.Lock()


def load_library(path: str | os.PathLike[str]) -> ctypes.CDLL:
    """Load ``libmsprofiler.so`` by absolute path (once per path) and declare its prototypes."""
    key = str(Path(path))
    with _load_lock:
        lib = _libraries.get(key)
        if lib is None:
            lib = ctypes.CDLL(key)
            _declare(lib)
            _libraries[key] = lib
        return lib


def _declare(lib: ctypes.CDLL) -> None:
    c_int, c_void_p = ctypes.c_int, ctypes.c_void_p
    lib.aclprofInit.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.aclprofInit.restype = c_int
    lib.aclprofFinalize.argtypes = []
    lib.aclprofFinalize.restype = c_int
    lib.aclprofCreateConfig.argtypes = [
        ctypes.POINTER(ctypes.c_uint32),
        ctypes.c_uint32,
        c_int,
        c_void_p,
        ctypes.c_uint64,
    ]
    lib.aclprofCreateConfig.restype = c_void_p
    for name in ("aclprofDestroyConfig", "aclprofStart", "aclprofStop"):
        fn = getattr(lib, name)
        fn.argtypes = [c_void_p]
        fn.restype = c_int


def encode_path(path: str | os.PathLike[str]) -> bytes:
    """The absolute result path as bytes, checked against CANN's 4096-byte limit.

    :raises UsageError: for an empty or over-long path, or one with a NUL byte
    """
    raw = os.fsencode(os.path.abspath(os.fspath(path)))
    if b"\x00" in raw:
        raise UsageError(f"result path contains a NUL byte: {path!r}")
    if not raw or len(raw) > MAX_PATH_BYTES:
        raise UsageError(
            f"result path is {len(raw)} bytes once encoded; CANN accepts 1..{MAX_PATH_BYTES}: {path!r}"
        )
    return raw


class MsprofInterface:
    """Thin wrapper of the ``aclprof*`` functions (spec: ``asc.lib.profiling.MsprofInterface``).

    :param toolkit: where ``libmsprofiler.so`` lives; discovered when omitted
    :raises ToolkitNotFoundError: when no toolkit is given and none is found
    """

    def __init__(self, toolkit: Toolkit | None = None) -> None:
        self.toolkit = toolkit if toolkit is not None else discover_toolkit()
        self._lib = load_library(self.toolkit.library)

    @property
    def lib(self) -> ctypes.CDLL:
        """The loaded ``libmsprofiler.so`` (upstream's attribute), its aclprof prototypes declared."""
        return self._lib

    def call(self, fn_name: str, *args: Any, ret_type: Any = None) -> Any:
        """Call the library's function *fn_name* with *args* (upstream's way to any aclprof function).

        Without *ret_type* the function returns an ``aclError``: non-zero raises :class:`AclError`
        (a ``RuntimeError``, as upstream raises) and the call returns 0; with *ret_type* (a ctypes
        type) its value is returned unchecked. The call goes through a fresh function pointer
        with no declared argument types, as upstream's ``CDLL`` has none, so setting *ret_type*
        never changes the prototypes the collector relies on.

        :raises AttributeError: when the library has no such function
        """
        fn = self._lib[fn_name]
        if ret_type is not None:
            fn.restype = ret_type
        result = fn(*args)
        if ret_type is None:
            self._check(fn_name, result)
        return result

    def simulated_platform(self) -> tuple[str, str] | None:
        """(chip, CANN version) the simulated toolkit's library behaves as, asked without a
        collection; None for CANN's own library (which cannot say without one)."""
        try:
            get_chip, get_cann = self._lib["aprofsim_get_chip"], self._lib["aprofsim_get_cann"]
        except AttributeError:
            return None
        get_chip.restype, get_cann.restype = ctypes.c_char_p, ctypes.c_int  # (fresh pointers)
        chip, code = get_chip(), int(get_cann())
        return (chip or b"").decode(errors="replace"), f"{code // 10}.{code % 10}"

    @staticmethod
    def _check(function: str, code: int) -> None:
        if code != 0:
            raise AclError(function, code)

    def init(self, result_path: str | os.PathLike[str]) -> None:
        """``aclprofInit``: the length passed is the byte length of the encoded path."""
        raw = encode_path(result_path)
        self._check("aclprofInit", self._lib.aclprofInit(raw, len(raw)))

    def create_config(
        self,
        device_ids: Iterable[int],
        metric: AicoreMetrics | int | str = AicoreMetrics.PIPE_UTILIZATION,
        types: ProfileTypes | None = ProfileType.TASK_TIME,
    ) -> ProfilerConfig:
        """``aclprofCreateConfig`` for any number of devices (no AI Core events).

        :param types: a ``ProfileType``, an int, or an iterable of them (OR-ed, as upstream takes);
            None is no data type at all, as upstream's None is (CANN refuses it)

        :raises AclError: code 100000 when CANN returns NULL
        """
        ids = [int(d) for d in device_ids]
        if any(d < 0 or d >= 2**32 for d in ids):
            raise UsageError(f"device ids must be non-negative 32-bit integers: {ids}")
        array = (ctypes.c_uint32 * max(len(ids), 1))(*ids)
        mask = 0 if types is None else combine_profile_types(types)
        handle = self._lib.aclprofCreateConfig(array, len(ids), metric_group(metric), None, mask)
        if not handle:
            raise create_config_null_error(ids)
        return ProfilerConfig(handle)

    def start(self, config: ProfilerConfig) -> None:
        """``aclprofStart``."""
        self._check("aclprofStart", self._lib.aclprofStart(config))

    def stop(self, config: ProfilerConfig) -> None:
        """``aclprofStop`` (with the same config as the start)."""
        self._check("aclprofStop", self._lib.aclprofStop(config))

    def destroy_config(self, config: ProfilerConfig) -> None:
        """``aclprofDestroyConfig`` (once per config)."""
        self._check("aclprofDestroyConfig", self._lib.aclprofDestroyConfig(config))

    def finalize(self) -> None:
        """``aclprofFinalize``."""
        self._check("aclprofFinalize", self._lib.aclprofFinalize())
