"""Records the C accelerators build hash as the pure code's do (see src/asc_aprof/_plans/_record_new.h).

From CPython 3.14 on a tuple caches its hash, and a tuple subclass made by ``tp_alloc`` would
hash to 0 forever; there the extensions build records through ``tuple.__new__``.
``ASC_APROF_RECORDS_VIA_NEW=1`` takes that path on any version, so both paths run here.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from asc_aprof._plans._parser import TaskParser

from .reference import REPO

CSV = (
    b"Device_id,Task ID,Op Name,Task Type,Task Duration(us)\n"
    b"0,1,add,AI_CORE,1.5\n0,2,mul,AI_VECTOR_CORE,2.25\n1,3,add,AI_CORE,1.5\n"
)


def check() -> list[int]:
    """Build records with C and pure code, assert equal records with equal hashes; the modules'
    ``RECORDS_VIA_NEW``."""
    from asc_aprof._plans import _cparser
    from asc_aprof._plans._raw import _chost, _host

    from .test_raw_cdevice import records_hash_alike
    from .test_raw_chost import tree

    fast = TaskParser("f.csv", accelerated=True).feed(CSV)
    pure = TaskParser("f.csv", accelerated=False).feed(CSV)
    assert fast == pure and len(fast) == 3
    assert [hash(t) for t in fast] == [hash(t) for t in pure]
    assert len({*fast}) == 3  # distinct records, distinct set members
    c_tables = _host.host_tables(tree(), level0=False, all_export=True, accelerated=True)
    pure_tables = _host.host_tables(tree(), level0=False, all_export=True, accelerated=False)
    assert c_tables == pure_tables and c_tables.host_tasks
    for c_records, pure_records in (
        (c_tables.host_tasks, pure_tables.host_tasks),
        (c_tables.ge_tasks, pure_tables.ge_tasks),
    ):
        assert [hash(r) for r in c_records] == [hash(r) for r in pure_records]
    saved = os.environ.pop("ASC_APROF_PURE_PYTHON", None)  # it would turn the device loops off
    try:
        device = records_hash_alike()
    finally:
        if saved is not None:
            os.environ["ASC_APROF_PURE_PYTHON"] = saved
    return [_cparser.RECORDS_VIA_NEW, _chost.RECORDS_VIA_NEW, device]


def test_c_records_hash_as_pure_records() -> None:
    expected = 1 if sys.version_info >= (3, 14) else 0
    if os.environ.get("ASC_APROF_RECORDS_VIA_NEW") == "1":
        expected = 1
    assert check() == [expected] * 3


@pytest.mark.parametrize("via_new", ["0", "1"])
def test_both_ways_of_building_records_give_equal_records(via_new: str) -> None:
    code = "from tests.test_record_hash import check; print(*check())"
    env = {**os.environ, "ASC_APROF_RECORDS_VIA_NEW": via_new}
    env.pop("ASC_APROF_PURE_PYTHON", None)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    forced = via_new == "1" or sys.version_info >= (3, 14)
    assert out.stdout.split() == [str(int(forced))] * 3
