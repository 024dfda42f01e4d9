"""Building the simulated toolkit tree: the library built at install time, or compiled once.

The tree lives in ``${ASC_APROF_SIM_CACHE:-${XDG_CACHE_HOME:-~/.cache}/asc-aprof}/sim-<hash>/``
where the hash covers the C source, the flags, ``msprof_sim.py`` and where this package is, and is
laid out like a CANN install: ``lib64/libmsprofiler.so``,
``tools/profiler/profiler_tool/analysis/msprof/msprof.py`` (with ``aprofsim_site.txt`` beside it:
the ``sys.path`` entry of this package, whose raw reader the script runs) and ``set_env.sh``.
The library is the one ``pip install`` compiled into the package when it matches the source
(see :mod:`asc_aprof.sim._buildspec`), so first use compiles nothing; without it the source is
compiled here, which needs a C compiler. The tree is built in a temporary sibling directory and
renamed into place, so two processes building at once both end up with one complete tree. A tree
is used only when it, its folders and files are the user's own and writable by no one else.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import stat
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from .._model._errors import AprofError
from .._model._toolkit import LIBRARY_NAME, MSPROF_SCRIPT
from ._buildspec import C_SOURCE, CFLAGS, CompileFailure, compile_library, prebuilt_library

MSPROF_SOURCE: Final = Path(__file__).with_name("msprof_sim.py")
#: The sys.path entry holding this asc_aprof package: ``msprof.py`` imports the raw reader from it.
PACKAGE_SITE: Final = Path(__file__).resolve().parents[2]
SITE_FILE: Final = "aprofsim_site.txt"
CACHE_VARIABLE: Final = "ASC_APROF_SIM_CACHE"

_lock = threading.Lock()


class SimulatorBuildError(AprofError, RuntimeError):
    """The simulated toolkit could not be built (usually: no C compiler, and no library built at install).

    The first line of the message says what to do.

    :ivar command: the compiler command that failed (empty when none was found)
    :ivar returncode: its exit status (None when it did not run)
    :ivar stderr_tail: the last lines the compiler printed on stderr
    """

    def __init__(
        self,
        message: str,
        *,
        command: Sequence[str] = (),
        returncode: int | None = None,
        stderr_tail: str = "",
    ) -> None:
        self.command = tuple(command)
        self.returncode = returncode
        self.stderr_tail = stderr_tail
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (self.args[0], self.command, self.returncode, self.stderr_tail))


def _rebuild(
    message: str, command: tuple[str, ...], returncode: int | None, stderr_tail: str
) -> SimulatorBuildError:
    return SimulatorBuildError(message, command=command, returncode=returncode, stderr_tail=stderr_tail)


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
    digest.update(os.fsencode(PACKAGE_SITE))
    return digest.hexdigest()[:16]


#: The files of a tree; every one, and every folder down to it, must be trusted (see :func:`_untrusted`).
_PARTS: Final = (
    Path("lib64") / LIBRARY_NAME,
    MSPROF_SCRIPT,
    MSPROF_SCRIPT.with_name(SITE_FILE),
    Path("set_env.sh"),
)


def _complete(root: Path) -> bool:
    return all((root / part).is_file() for part in _PARTS)


def _untrusted(root: Path) -> str | None:
    """Why the tree at *root* must not be used, or None. ctypes loads its library and exports
    run its ``msprof.py``: on a shared cache another user could plant either, so the tree, every
    folder below it and every file must be this user's, no link, and writable by no one else."""
    me = os.getuid()
    paths = {root}
    for part in _PARTS:
        paths.update(root / parent for parent in part.parents)
        paths.add(root / part)
    for path in sorted(paths):
        found = path.lstat()
        if stat.S_ISLNK(found.st_mode):
            return f"{path} is a symbolic link"
        if found.st_uid != me:
            return f"{path} belongs to user {found.st_uid}, not to you ({me})"
        if found.st_mode & 0o022:
            return f"{path} is writable by others (mode {stat.S_IMODE(found.st_mode):o})"
    return None


def _usable(root: Path) -> bool:
    """Whether the tree at *root* is complete and trusted. A tree of this user's that is not
    trusted is removed (to be built again); another user's one is refused."""
    if not _complete(root):
        return False
    why = _untrusted(root)
    if why is None:
        return True
    if root.lstat().st_uid == os.getuid() and not root.is_symlink():
        shutil.rmtree(root, ignore_errors=True)
        return False
    raise SimulatorBuildError(
        f"the simulated toolkit in {root} is not trusted ({why}): remove it, or set "
        f"{CACHE_VARIABLE} to a directory of your own",
        command=(),
        returncode=None,
        stderr_tail="",
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
    prebuilt = prebuilt_library()
    if prebuilt is not None:
        shutil.copyfile(prebuilt, library)
        os.chmod(library, 0o755)
    else:
        try:
            compile_library(library)
        except CompileFailure as exc:
            raise SimulatorBuildError(
                str(exc), command=exc.command, returncode=exc.returncode, stderr_tail=exc.stderr_tail
            ) from None
    script = tree / MSPROF_SCRIPT
    script.parent.mkdir(parents=True)
    shutil.copyfile(MSPROF_SOURCE, script)
    (script.parent / SITE_FILE).write_text(f"{PACKAGE_SITE}\n", encoding="utf-8")
    (tree / "set_env.sh").write_text(_set_env_text(final), encoding="utf-8")
    # Writable by no one else whatever the umask (a group-writable tree is not trusted).
    os.chmod(tree, 0o755)
    for part in _PARTS:
        for parent in part.parents:
            if parent != Path("."):
                os.chmod(tree / parent, 0o755)
        os.chmod(tree / part, 0o755 if part.parent.name == "lib64" else 0o644)


def ensure_built() -> Path:
    """The toolkit root, laid out first if this source version has no tree yet.

    :raises SimulatorBuildError: no library built at install time, and no compiler or the
        compile failed
    """
    final = cache_base() / f"sim-{source_hash()}"
    if _usable(final):
        return final
    with _lock:
        if _usable(final):
            return final
        final.parent.mkdir(parents=True, exist_ok=True)
        tree = Path(tempfile.mkdtemp(prefix=".building-", dir=final.parent))
        try:
            _build_into(tree, final)
            try:
                os.rename(tree, final)
            except OSError:
                # Another process won the race (or left a broken tree behind).
                if not _usable(final):
                    shutil.rmtree(final, ignore_errors=True)
                    os.rename(tree, final)
        finally:
            shutil.rmtree(tree, ignore_errors=True)
    return final
