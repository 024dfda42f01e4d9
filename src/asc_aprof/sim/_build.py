"""Building the simulated toolkit tree: compile the C library once per source version.

The tree lives in ``${ASC_APROF_SIM_CACHE:-${XDG_CACHE_HOME:-~/.cache}/asc-aprof}/sim-<hash>/``
where the hash covers the C source and ``msprof_sim.py``, and is laid out like a CANN install:
``lib64/libmsprofiler.so``, ``tools/profiler/profiler_tool/analysis/msprof/msprof.py`` and
``set_env.sh``. It is built in a temporary sibling directory and renamed into place, so two
processes building at once both end up with one complete tree.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Final

from .._errors import AprofError
from .._toolkit import LIBRARY_NAME, MSPROF_SCRIPT

C_SOURCE: Final = Path(__file__).with_name("libmsprofiler_sim.c")
MSPROF_SOURCE: Final = Path(__file__).with_name("msprof_sim.py")
CACHE_VARIABLE: Final = "ASC_APROF_SIM_CACHE"
CFLAGS: Final = ("-shared", "-fPIC", "-O2", "-pthread", "-std=c11", "-fvisibility=hidden")

_lock = threading.Lock()


class SimulatorBuildError(AprofError, RuntimeError):
    """The simulated toolkit could not be built (usually: no C compiler)."""


def cache_base() -> Path:
    """The directory that holds ``sim-<hash>`` trees."""
    override = os.environ.get(CACHE_VARIABLE)
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "asc-aprof"


def source_hash() -> str:
    digest = hashlib.sha256()
    for path in (C_SOURCE, MSPROF_SOURCE):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    digest.update(" ".join(CFLAGS).encode())
    return digest.hexdigest()[:16]


def _compiler() -> list[str]:
    configured = os.environ.get("CC")
    if configured:
        command = shlex.split(configured)
        if command and shutil.which(command[0]):
            return command
        raise SimulatorBuildError(f"$CC={configured!r} is not an executable compiler; install gcc or fix $CC")
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return [found]
    raise SimulatorBuildError(
        "the simulated CANN toolkit needs a C compiler to build libmsprofiler.so and none was found "
        "(looked for $CC, cc, gcc, clang): install gcc, e.g. `apt-get install gcc`"
    )


def _complete(root: Path) -> bool:
    return all(
        (root / part).is_file() for part in (Path("lib64") / LIBRARY_NAME, MSPROF_SCRIPT, Path("set_env.sh"))
    )


def _set_env_text(root: Path) -> str:
    quoted = shlex.quote(str(root))
    return (
        "# Simulated CANN toolkit built by asc-aprof (asc_aprof.sim); no NPU involved.\n"
        f"export ASCEND_HOME_PATH={quoted}\n"
        f"export ASCEND_TOOLKIT_HOME={quoted}\n"
        f"export LD_LIBRARY_PATH={quoted}/lib64${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}\n"
    )


def _build_into(tree: Path, final: Path) -> None:
    library = tree / "lib64" / LIBRARY_NAME
    library.parent.mkdir(parents=True)
    command = [*_compiler(), *CFLAGS, "-o", str(library), str(C_SOURCE), "-lm"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise SimulatorBuildError(f"could not run the C compiler {command[0]!r}: {exc}; install gcc") from exc
    if done.returncode != 0:
        raise SimulatorBuildError(
            f"compiling the simulated libmsprofiler.so failed (exit {done.returncode}):\n"
            f"  {' '.join(command)}\n{done.stderr.strip()}"
        )
    script = tree / MSPROF_SCRIPT
    script.parent.mkdir(parents=True)
    shutil.copyfile(MSPROF_SOURCE, script)
    (tree / "set_env.sh").write_text(_set_env_text(final), encoding="utf-8")


def ensure_built() -> Path:
    """The toolkit root, compiled first if this source version has no tree yet.

    :raises SimulatorBuildError: no compiler, or the compile failed
    """
    final = cache_base() / f"sim-{source_hash()}"
    if _complete(final):
        return final
    with _lock:
        if _complete(final):
            return final
        final.parent.mkdir(parents=True, exist_ok=True)
        tree = Path(tempfile.mkdtemp(prefix=".building-", dir=final.parent))
        try:
            _build_into(tree, final)
            try:
                os.rename(tree, final)
            except OSError:
                # Another process won the race (or left a broken tree behind).
                if not _complete(final):
                    shutil.rmtree(final, ignore_errors=True)
                    os.rename(tree, final)
        finally:
            shutil.rmtree(tree, ignore_errors=True)
    return final
