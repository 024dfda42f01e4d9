"""Finding a CANN toolkit the way CANN's own scripts would, or the simulated one when asked.

Discovery order: ``ASCEND_HOME_PATH``, ``ASCEND_TOOLKIT_HOME`` (absolute paths only: a relative one
is refused), then the default install roots ``/usr/local/Ascend/cann`` and
``/usr/local/Ascend/ascend-toolkit/latest``. The simulated toolkit
(:mod:`asc_aprof.sim`) is never picked unless ``ASC_APROF_SIMULATE=1`` asks for it (imported only
then) or its root is in ``ASCEND_HOME_PATH``. This module sits above both: the toolkit record
(:mod:`asc_aprof._model._toolkit`) below it, the simulator beside it, so nothing imports in a circle.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .._model._errors import ToolkitNotFoundError
from .._model._toolkit import (
    DEFAULT_ROOTS,
    ROOT_VARIABLES,
    SIMULATE_VARIABLE,
    Toolkit,
    not_found_message,
    probe_root,
    root_candidates,
)


def discover_toolkit(environ: Mapping[str, str] | None = None) -> Toolkit:
    """Find the toolkit the way CANN's own scripts would.

    :raises ToolkitNotFoundError: listing every place searched
    """
    env = os.environ if environ is None else environ
    if env.get(SIMULATE_VARIABLE, "") not in ("", "0"):
        from .. import sim

        return sim.toolkit()
    searched: list[str] = []
    roots: list[Path] = []
    for variable in ROOT_VARIABLES:
        value = env.get(variable)
        if value and not os.path.isabs(value):
            # Relative, the working directory would choose the library ctypes loads.
            raise ToolkitNotFoundError(
                f"${variable} is {value!r}, a relative path: set it to the absolute path of the CANN root "
                "(`source <CANN install>/set_env.sh` does)",
                [f"${variable}={value} (relative: not searched)"],
            )
        if value:
            roots.append(Path(value))
        else:
            searched.append(f"${variable} (not set)")
    roots.extend(Path(p) for p in DEFAULT_ROOTS)
    for root in roots:
        found = probe_root(root)
        if found is not None:
            return Toolkit(library=found[0], msprof_script=found[1])
        searched.extend(root_candidates(root))
    raise ToolkitNotFoundError(not_found_message(searched), searched)
