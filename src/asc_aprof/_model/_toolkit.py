"""A CANN toolkit: where ``libmsprofiler.so`` and ``msprof.py`` are, in a CANN install tree.

In a root (``$ASCEND_HOME_PATH``) the library is ``lib64/libmsprofiler.so`` (or
``<arch>-linux/lib64/libmsprofiler.so``) and the export script
``tools/profiler/profiler_tool/analysis/msprof/msprof.py``. Nothing here loads the library:
importing asc_aprof never needs CANN. Finding a root is :mod:`asc_aprof._cann._discovery`'s job, which
sits above the simulator (the simulator builds a tree of this shape).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from ._errors import ToolkitNotFoundError

ROOT_VARIABLES: Final = ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")
DEFAULT_ROOTS: Final = ("/usr/local/Ascend/cann", "/usr/local/Ascend/ascend-toolkit/latest")
LIBRARY_NAME: Final = "libmsprofiler.so"
MSPROF_SCRIPT: Final = Path("tools/profiler/profiler_tool/analysis/msprof/msprof.py")
#: Set to 1 to use the simulated toolkit when no ``toolkit=`` is given (tests, demos).
SIMULATE_VARIABLE: Final = "ASC_APROF_SIMULATE"


@dataclasses.dataclass(frozen=True, slots=True)
class Toolkit:
    """Where the CANN pieces asc-aprof uses live.

    :ivar library: absolute path of ``libmsprofiler.so``
    :ivar msprof_script: absolute path of ``msprof.py``
    :ivar python: the interpreter that runs ``msprof.py`` (default: this one)
    :ivar env: extra environment variables for the export process
    """

    library: Path
    msprof_script: Path
    python: str = sys.executable
    env: Mapping[str, str] = dataclasses.field(default_factory=dict, hash=False)

    @classmethod
    def from_root(cls, root: str | os.PathLike[str], *, python: str | None = None) -> Toolkit:
        """The toolkit laid out under *root* (a directory like ``$ASCEND_HOME_PATH``).

        :raises ToolkitNotFoundError: when the library or the script is missing there
        """
        found = probe_root(Path(root))
        searched = root_candidates(Path(root))
        if found is None:
            raise ToolkitNotFoundError(not_found_message(searched), searched)
        library, script = found
        return cls(library=library, msprof_script=script, python=python or sys.executable)


def root_candidates(root: Path) -> list[str]:
    arch = f"{platform.machine()}-linux"
    return [
        str(root / "lib64" / LIBRARY_NAME),
        str(root / arch / "lib64" / LIBRARY_NAME),
        str(root / MSPROF_SCRIPT),
    ]


def probe_root(root: Path) -> tuple[Path, Path] | None:
    root = root.expanduser()
    arch = f"{platform.machine()}-linux"
    script = root / MSPROF_SCRIPT
    if not script.is_file():
        return None
    for library in (root / "lib64" / LIBRARY_NAME, root / arch / "lib64" / LIBRARY_NAME):
        if library.is_file():
            return library.resolve(), script.resolve()
    return None


def not_found_message(searched: list[str]) -> str:
    """What to do on the first line (the CLI shows only that one), then every place searched."""
    listing = "\n".join(f"  - {place}" for place in searched)
    return (
        "no CANN toolkit found: `source <CANN install>/set_env.sh` (sets ASCEND_HOME_PATH) or pass "
        "toolkit=Toolkit.from_root(<CANN root>); without an NPU, set "
        f"{SIMULATE_VARIABLE}=1 or pass toolkit=asc_aprof.sim.toolkit() for the simulated toolkit\n"
        f"A CANN root holds lib64/{LIBRARY_NAME} and {MSPROF_SCRIPT}. Searched:\n{listing}"
    )
