"""The ctypes binding (``MsprofInterface``) on the simulated library: prototypes, codes, path rules."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import pytest

from asc_aprof import AclError, AicoreMetrics, MsprofInterface, ProfileType, Toolkit, UsageError
from asc_aprof.sim import SimControl


def test_binding_declares_every_prototype(toolkit: Toolkit) -> None:
    iface = MsprofInterface(toolkit)
    lib = iface._lib
    assert lib.aclprofCreateConfig.restype is ctypes.c_void_p
    assert lib.aclprofInit.argtypes == [ctypes.c_char_p, ctypes.c_size_t]
    for name in ("aclprofInit", "aclprofFinalize", "aclprofDestroyConfig", "aclprofStart", "aclprofStop"):
        assert getattr(lib, name).restype is ctypes.c_int


def test_binding_full_cycle_and_error_codes(toolkit: Toolkit, simctl: SimControl, tmp_path: Path) -> None:
    iface = MsprofInterface(toolkit)
    path = tmp_path / "résultats avec espaces"
    with pytest.raises(AclError) as info:
        iface.start(iface.create_config([0], AicoreMetrics.NONE, ProfileType.TASK_TIME))
    assert info.value.code == 100043
    simctl.reset()
    iface.init(path)  # non-ASCII: the byte length is passed
    with pytest.raises(AclError) as info:
        iface.init(path)
    assert info.value.symbol == "ACL_ERROR_REPEAT_INITIALIZE"
    config = iface.create_config(range(8), AicoreMetrics.PIPE_UTILIZATION, ProfileType.TASK_TIME)
    iface.start(config)
    assert simctl.running_devices() == list(range(8))
    other = iface.create_config([3], AicoreMetrics.PIPE_UTILIZATION, ProfileType.TASK_TIME)
    with pytest.raises(AclError) as info:
        iface.start(other)
    assert info.value.code == 100042
    different = iface.create_config(
        range(8), AicoreMetrics.PIPE_UTILIZATION, ProfileType.TASK_TIME | ProfileType.L2CACHE
    )
    with pytest.raises(AclError) as info:
        iface.stop(different)
    assert info.value.code == 100010
    iface.stop(config)
    for c in (config, other, different):
        iface.destroy_config(c)
    assert simctl.invalid_destroys() == 0  # each config destroyed once (twice is a double free on CANN)
    iface.finalize()
    with pytest.raises(AclError) as info:
        iface.finalize()
    assert info.value.code == 100043
    assert any(p.name.startswith("PROF_") for p in path.iterdir())


def test_binding_null_config_and_bad_bits(toolkit: Toolkit, simctl: SimControl, tmp_path: Path) -> None:
    iface = MsprofInterface(toolkit)
    for devices in ([0, 0], [99], []):
        with pytest.raises(AclError) as info:
            iface.create_config(devices, AicoreMetrics.PIPE_UTILIZATION, ProfileType.TASK_TIME)
        assert (info.value.code, info.value.function) == (100000, "aclprofCreateConfig")
        assert "duplicate" in info.value.hint
    iface.init(tmp_path)
    config = iface.create_config([0], AicoreMetrics.PIPE_UTILIZATION, 1 << 40)
    with pytest.raises(AclError) as info:
        iface.start(config)
    assert info.value.code == 200007
    iface.destroy_config(config)
    iface.finalize()


def test_binding_path_rules(toolkit: Toolkit, simctl: SimControl, tmp_path: Path) -> None:
    iface = MsprofInterface(toolkit)
    with pytest.raises(UsageError, match="4096"):
        iface.init(tmp_path / ("x" * 5000))
    a_file = tmp_path / "file"
    a_file.write_text("")
    with pytest.raises(AclError) as info:
        iface.init(a_file)
    assert info.value.code == 100003
    os.environ["PROFILING_MODE"] = "dynamic"
    try:
        with pytest.raises(AclError) as info:
            iface.init(tmp_path)
        assert info.value.code == 200006
    finally:
        del os.environ["PROFILING_MODE"]
