"""Build hooks: the optional C accelerators (the CSV row loop, the raw reader's host and device
loops) and the simulated libmsprofiler.so; metadata is in pyproject.toml.

Both are optional: where they cannot be compiled (no compiler, no Python headers), the install
still succeeds, asc_aprof parses in pure Python, and the simulated toolkit compiles its library
on first use instead (which then needs a compiler). The simulated library is built by the same
command as that run-time fallback (``src/asc_aprof/sim/_buildspec.py``, loaded here by path
because the package cannot be imported while it is being built).
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
SIM_PACKAGE = Path("asc_aprof") / "sim"
#: Included by the raw reader's C loops (release points, file contents: see the headers).
RAW_HEADERS = (
    "src/asc_aprof/_plans/_raw/_release.h",
    "src/asc_aprof/_plans/_raw/_rawdata.h",
    "src/asc_aprof/_plans/_raw/_gepack.h",
)


def _buildspec() -> ModuleType:
    path = HERE / "src" / SIM_PACKAGE / "_buildspec.py"
    spec = importlib.util.spec_from_file_location("_asc_aprof_sim_buildspec", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildExtWithSimulator(build_ext):
    """``build_ext`` plus the simulated libmsprofiler.so, placed in the package's sim/ directory."""

    def run(self) -> None:
        super().run()
        self._sim_outputs: list[str] = []
        spec = _buildspec()
        target = Path(self.build_lib) / SIM_PACKAGE
        try:
            built = spec.build_prebuilt(target)
        except spec.CompileFailure as exc:
            print(
                "warning: asc-aprof: the simulated libmsprofiler.so was not built, so the simulated "
                f"toolkit will compile it on first use (that needs a C compiler): {exc}",
                file=sys.stderr,
            )
            return
        if self.inplace:  # editable install: the package is the source tree
            source = HERE / "src" / SIM_PACKAGE
            for path in built:
                shutil.copyfile(path, source / path.name)
            built = [source / path.name for path in built]
        self._sim_outputs = [str(path) for path in built]

    def get_outputs(self) -> list[str]:
        return [*super().get_outputs(), *getattr(self, "_sim_outputs", [])]


def _accelerator(
    name: str, source: str, extra_compile_args: list[str] | None = None, depends: tuple[str, ...] = ()
) -> Extension:
    """An optional C accelerator: abi3 for CPython 3.10 and later, skipped where it cannot build."""
    return Extension(
        name,
        [source],
        depends=["src/asc_aprof/_plans/_record_new.h", *depends],
        optional=True,
        define_macros=[("Py_LIMITED_API", "0x030A0000")],
        extra_compile_args=extra_compile_args or [],
        py_limited_api=True,
    )


setup(
    ext_modules=[
        _accelerator("asc_aprof._plans._cparser", "src/asc_aprof/_plans/_cparser.c"),
        _accelerator(
            "asc_aprof._plans._raw._chost", "src/asc_aprof/_plans/_raw/_chost.c", depends=RAW_HEADERS
        ),
        _accelerator(
            "asc_aprof._plans._raw._cdevice",
            "src/asc_aprof/_plans/_raw/_cdevice.c",
            # Python rounds after every float operation: no fused multiply-adds.
            [] if sys.platform == "win32" else ["-ffp-contract=off"],
            depends=RAW_HEADERS,
        ),
    ],
    cmdclass={"build_ext": BuildExtWithSimulator},
)
