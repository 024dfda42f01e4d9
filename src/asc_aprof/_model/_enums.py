"""C constants of ``acl/acl_prof.h``: AI Core metric groups, data-type bits and error codes."""

from __future__ import annotations

import enum
from typing import Final


class AicoreMetrics(enum.IntEnum):
    """``aclprofAicoreMetrics``: the AI Core PMU metric group (one per collection)."""

    ARITHMETIC_UTILIZATION = 0
    PIPE_UTILIZATION = 1
    MEMORY_BANDWIDTH = 2
    L0B_AND_WIDTH = 3
    RESOURCE_CONFLICT_RATIO = 4
    MEMORY_UB = 5
    L2_CACHE = 6
    PIPE_EXECUTE_UTILIZATION = 7
    MEMORY_ACCESS = 8
    NONE = 0xFF

    @classmethod
    def _missing_(cls, value: object) -> AicoreMetrics | None:
        # AicoreMetrics("PipeUtilization"): the group as msprof's --aic-metrics spells it, or a
        # member's name, any case.
        if isinstance(value, str):
            return _METRIC_NAMES.get(value.replace("_", "").replace("-", "").lower())
        return None


#: msprof's spellings of the groups (``--aic-metrics``), lower case, and the members' names.
_METRIC_NAMES: Final = {
    "arithmeticutilization": AicoreMetrics.ARITHMETIC_UTILIZATION,
    "pipeutilization": AicoreMetrics.PIPE_UTILIZATION,
    "memory": AicoreMetrics.MEMORY_BANDWIDTH,
    "memoryl0": AicoreMetrics.L0B_AND_WIDTH,
    "resourceconflictratio": AicoreMetrics.RESOURCE_CONFLICT_RATIO,
    "memoryub": AicoreMetrics.MEMORY_UB,
    "l2cache": AicoreMetrics.L2_CACHE,
    "pipelineexecuteutilization": AicoreMetrics.PIPE_EXECUTE_UTILIZATION,
    "memoryaccess": AicoreMetrics.MEMORY_ACCESS,
    **{m.name.replace("_", "").lower(): m for m in AicoreMetrics},
}
#: What a metric group may be given as, for an error.
METRIC_SPELLINGS: Final = (
    "ArithmeticUtilization, PipeUtilization, Memory, MemoryL0, ResourceConflictRatio, MemoryUB, L2Cache, "
    "PipelineExecuteUtilization, MemoryAccess (any case), an AicoreMetrics member or its name, or its number"
)


class ProfileType(enum.IntFlag):
    """``ACL_PROF_*`` bits of ``dataTypeConfig``; combine with ``|``."""

    ACL_API = 0x0001
    TASK_TIME = 0x0002
    AICORE_METRICS = 0x0004
    AICPU = 0x0008
    L2CACHE = 0x0010
    HCCL_TRACE = 0x0020
    TRAINING_TRACE = 0x0040
    MSPROFTX = 0x0080
    RUNTIME_API = 0x0100
    GE_API_L0 = 0x0200
    TASK_TIME_L0 = 0x0800
    TASK_MEMORY = 0x1000
    TASK_TIME_L2 = 0x2000
    OP_ATTR = 0x4000
    TASK_TIME_L3 = 0x8000
    GE_API_L1 = 0x01000000


DEFAULT_PROFILE_TYPES: Final = ProfileType.TASK_TIME | ProfileType.AICORE_METRICS | ProfileType.L2CACHE


#: aclprofInit refuses longer result paths (and msprof.py refuses longer -dir values).
MAX_PATH_BYTES: Final = 4096


class AclErrorInfo:
    """Symbol and one-line hint for an ``aclError`` code returned by the profiling API."""

    __slots__ = ("hint", "symbol")

    def __init__(self, symbol: str, hint: str) -> None:
        self.symbol = symbol
        self.hint = hint


ACL_ERRORS: Final[dict[int, AclErrorInfo]] = {
    100000: AclErrorInfo(
        "ACL_ERROR_INVALID_PARAM",
        "a bad argument: NULL or over-long path, length not equal to the path's byte length, "
        "NULL config, no data types, or too many devices",
    ),
    100001: AclErrorInfo("ACL_ERROR_UNINITIALIZE", "aclprofSetConfig called before aclprofInit"),
    100002: AclErrorInfo(
        "ACL_ERROR_REPEAT_INITIALIZE",
        "aclprofInit called twice without aclprofFinalize in between",
    ),
    100003: AclErrorInfo(
        "ACL_ERROR_INVALID_FILE",
        "the result path cannot be created or is not a writable directory",
    ),
    100010: AclErrorInfo(
        "ACL_ERROR_INVALID_PROFILING_CONFIG",
        "aclprofStop got a config whose data types differ from the running collection's",
    ),
    100042: AclErrorInfo(
        "ACL_ERROR_PROF_ALREADY_RUN",
        "a listed device is already being profiled, or the program runs under the msprof "
        "command line / acl.json profiling, which disables the API (run it without msprof)",
    ),
    100043: AclErrorInfo(
        "ACL_ERROR_PROF_NOT_RUN",
        "start, stop or finalize called without a successful aclprofInit",
    ),
    148046: AclErrorInfo("ACL_ERROR_PROF_REPEAT_SUBSCRIBE", "the subscribe API was called twice"),
    148047: AclErrorInfo(
        "ACL_ERROR_PROF_API_CONFLICT",
        "the Init/Start API was mixed with the model Subscribe API in one process",
    ),
    200006: AclErrorInfo(
        "ACL_ERROR_FEATURE_UNSUPPORTED",
        "profiling is unsupported here (helper host), or PROFILING_MODE=dynamic is set: unset it",
    ),
    200007: AclErrorInfo(
        "ACL_ERROR_PROF_MODULES_UNSUPPORTED",
        "dataTypeConfig holds a bit this CANN release does not support",
    ),
    500005: AclErrorInfo(
        "ACL_ERROR_PROFILING_FAILURE",
        "an internal profiler failure (manager init, uploader, stop on device): see the CANN plog",
    ),
    507021: AclErrorInfo(
        "ACL_ERROR_RT_PROFILING_ERROR", "a runtime-level profiling error: see the CANN plog"
    ),
}

#: Why aclprofCreateConfig returns NULL (it never returns a code).
CREATE_CONFIG_NULL_HINT: Final = (
    "a device id this machine does not have, a duplicate id, more than 64 devices, "
    "AI Core events given, or no data types"
)


def acl_error_info(code: int) -> AclErrorInfo:
    """Symbol and hint for *code*; unknown codes get a generic entry."""
    info = ACL_ERRORS.get(code)
    if info is None:
        return AclErrorInfo(f"ACL_ERROR_{code}", "an aclError code this library does not know")
    return info
