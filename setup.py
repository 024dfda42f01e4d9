"""Build hook for the optional C accelerator; the project metadata lives in pyproject.toml.

``optional=True``: where the extension cannot be compiled (no compiler, no Python headers), the
install still succeeds and asc_aprof parses in pure Python.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "asc_aprof._cparser",
            ["src/asc_aprof/_cparser.c"],
            optional=True,
            define_macros=[("Py_LIMITED_API", "0x030A0000")],
            py_limited_api=True,
        )
    ]
)
