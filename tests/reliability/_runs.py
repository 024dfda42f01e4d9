"""Copies of the real runs to break on purpose (issue 27's tests and the fuzzer share them)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

from ..reference import REAL_RUNS

Edit = Callable[[str], str]


def copy_real_run(name: str, into: Path) -> Path:
    """A copy of real run *name* (its raw data only: no export) under *into*."""
    (source,) = (REAL_RUNS / name).glob("PROF_*")
    run = into / source.name
    shutil.copytree(source, run, ignore=shutil.ignore_patterns("mindstudio_profiler_output", "summary"))
    return run


def edit_file(path: Path, edit: Edit) -> None:
    text = path.read_text()
    changed = edit(text)
    assert changed != text, f"the edit changed nothing in {path}"
    path.write_text(changed)


def sub(pattern: str, replacement: str) -> Edit:
    return lambda text: re.sub(pattern, replacement, text, count=1)


#: Metadata values no clock can come from, by the file they go into (below device_0/ or host/).
ODD_METADATA: dict[str, tuple[str, Edit]] = {
    "cntvct nan": ("device_0/dev_start.log.0", sub(r"cntvct: \d+", "cntvct: nan")),
    "cntvct 1e400": ("device_0/dev_start.log.0", sub(r"cntvct: \d+", "cntvct: 1e400")),
    "clockMonotonicRaw 1e30": ("device_0/start_info.0", sub(r'Raw":"\d+"', 'Raw":"1e30"')),
    "clockMonotonicRaw nan": ("device_0/start_info.0", sub(r'Raw":"\d+"', 'Raw":"nan"')),
    "collectionTimeBegin inf": (
        "device_0/start_info.0",
        sub(r'"collectionTimeBegin":"\d+"', '"collectionTimeBegin":"inf"'),
    ),
    "CPU Frequency 4.9e-324": (
        "device_0/info.json.0",
        sub(r'"Frequency":"[\d.]+"', '"Frequency":"4.9e-324"'),
    ),
    "hwts_frequency nan": ("device_0/info.json.0", sub(r'hwts_frequency":"[\d.]+"', 'hwts_frequency":"nan"')),
    "aic_frequency inf": ("device_0/info.json.0", sub(r'"aic_frequency":"[\d.]+"', '"aic_frequency":"inf"')),
    "ai_core_num inf": ("device_0/info.json.0", sub(r'"ai_core_num":\d+', '"ai_core_num":"inf"')),
    "ai_core_num nan": ("device_0/info.json.0", sub(r'"ai_core_num":\d+', '"ai_core_num":"nan"')),
    "% in an INI value": ("device_0/host_start.log.0", sub(r"cntvct_diff: (\d+)", r"cntvct_diff: %(\1)s")),
    "cntvct_diff of 400 digits": ("device_0/host_start.log.0", sub(r"diff: \d+", "diff: " + "9" * 400)),
    "a superscript level in type_info_dic": (
        "host/data/unaging.additional.type_info_dic.slice_0",
        sub(r"^5000_", "\u00b2_"),
    ),
}
