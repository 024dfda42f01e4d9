"""How the simulated ``libmsprofiler.so`` is compiled: once at install time, else at first use.

``setup.py`` loads this file by its path while the package is being built (``asc_aprof`` is not
importable then), so it uses the standard library only and imports nothing of the package. Both
builds run the same command: ``$CC`` (else ``cc``, ``gcc`` or ``clang``) with :data:`CFLAGS`.

The install-time build leaves ``libmsprofiler_sim.so`` beside this file (so a wheel carries it)
with ``libmsprofiler_sim.hash``, the :func:`library_hash` of the source and flags it came from.
The simulator uses that library only when the hash matches the C source beside it, so an edited
checkout never runs a stale library; otherwise (no compiler at install time, or an edited source)
it compiles the source on first use.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

HERE: Final = Path(__file__).resolve().parent
C_SOURCE: Final = HERE / "libmsprofiler_sim.c"
PREBUILT: Final = HERE / "libmsprofiler_sim.so"
PREBUILT_HASH: Final = HERE / "libmsprofiler_sim.hash"
CFLAGS: Final = ("-shared", "-fPIC", "-O2", "-pthread", "-std=c11", "-fvisibility=hidden")
#: Compilers tried when ``$CC`` is not set, in order.
COMPILERS: Final = ("cc", "gcc", "clang")
STDERR_LINES: Final = 15


class CompileFailure(Exception):
    """The library could not be compiled; the first line of the message says what to do.

    :ivar command: the compiler command (empty when no compiler was found)
    :ivar returncode: its exit status (None when it did not run)
    :ivar stderr_tail: the last lines it printed on stderr
    """

    def __init__(
        self,
        message: str,
        *,
        command: Sequence[str] = (),
        returncode: int | None = None,
        stderr_tail: str = "",
    ) -> None:
        self.message = message
        self.command = tuple(command)
        self.returncode = returncode
        self.stderr_tail = stderr_tail
        text = message
        if self.command:
            text += f"\n  command: {shlex.join(self.command)}"
        if stderr_tail:
            text += "\n  compiler stderr (last lines):\n    " + stderr_tail.replace("\n", "\n    ")
        super().__init__(text)


def library_hash() -> str:
    """Hash of what the library is built from: the C source and the flags."""
    digest = hashlib.sha256(C_SOURCE.read_bytes())
    digest.update(" ".join(CFLAGS).encode())
    return digest.hexdigest()[:16]


def find_compiler(environ: Mapping[str, str] | None = None) -> list[str]:
    """The compiler command: ``$CC`` when set, else the first of :data:`COMPILERS` on ``PATH``.

    :raises CompileFailure: ``$CC`` is not executable, or no compiler is installed
    """
    env = os.environ if environ is None else environ
    configured = env.get("CC")
    if configured:
        command = shlex.split(configured)
        if command and shutil.which(command[0], path=env.get("PATH")):
            return command
        raise CompileFailure(
            f"$CC={configured!r} is not an executable C compiler: fix $CC or unset it to use cc, gcc or clang"
        )
    for name in COMPILERS:
        found = shutil.which(name, path=env.get("PATH"))
        if found:
            return [found]
    raise CompileFailure(
        "no C compiler found to build the simulated libmsprofiler.so (looked for $CC, "
        f"{', '.join(COMPILERS)}): install gcc (e.g. `apt-get install gcc`) and retry, or install "
        "asc-aprof from a wheel built where a compiler was present (it carries the library)"
    )


def tail(text: str, lines: int = STDERR_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def compile_library(output: Path, environ: Mapping[str, str] | None = None) -> list[str]:
    """Compile :data:`C_SOURCE` into *output*; returns the command that did it.

    :raises CompileFailure: no compiler, or the compiler failed (command and stderr tail attached)
    """
    command = [*find_compiler(environ), *CFLAGS, "-o", str(output), str(C_SOURCE), "-lm"]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            errors="replace",
            check=False,
            env=None if environ is None else dict(environ),
        )
    except OSError as exc:
        raise CompileFailure(
            f"could not run the C compiler {command[0]!r} ({exc.strerror or exc}): fix $CC or install gcc",
            command=command,
        ) from exc
    if done.returncode != 0 or not output.is_file():
        stderr = tail(done.stderr)
        last = stderr.splitlines()[-1].strip() if stderr else ""
        said = f"; it said: {last}" if last else " and printed nothing on stderr"
        raise CompileFailure(
            f"compiling the simulated libmsprofiler.so failed: {command[0]} exited with status "
            f"{done.returncode}{said} (fix $CC or install gcc)",
            command=command,
            returncode=done.returncode,
            stderr_tail=stderr,
        )
    return command


def build_prebuilt(directory: Path, environ: Mapping[str, str] | None = None) -> list[Path]:
    """The install-time build: the library and its hash file into *directory* (a package's sim/).

    :raises CompileFailure: as :func:`compile_library`
    """
    directory.mkdir(parents=True, exist_ok=True)
    library = directory / PREBUILT.name
    compile_library(library, environ)
    stamp = directory / PREBUILT_HASH.name
    stamp.write_text(library_hash() + "\n", encoding="ascii")
    return [library, stamp]


def prebuilt_library(environ: Mapping[str, str] | None = None) -> Path | None:
    """The install-time library when it matches the source here (and is not turned off), else None.

    ``ASC_APROF_SIM_PREBUILT=0`` ignores it, so the run-time build can be exercised.
    """
    env = os.environ if environ is None else environ
    if env.get("ASC_APROF_SIM_PREBUILT", "") == "0" or not PREBUILT.is_file():
        return None
    try:
        recorded = PREBUILT_HASH.read_text(encoding="ascii").strip()
    except OSError:
        return None
    return PREBUILT if recorded == library_hash() else None
