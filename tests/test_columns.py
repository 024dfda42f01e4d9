"""The columnar path (``asc_aprof._plans._columns``): filled by C and by the pure reference alike, and
statistics from it identical to the task path's.

The contracts: a columnar parser gives, for every input and split, the same columns (bytes for
bytes), the same tables, ``skipped``, ``data_rows`` and errors whether the C row loop or the
pure one runs, and the tasks it stands for are exactly the task parser's; grouping and order
statistics in C equal the pure references (``sorted()``, the sign of zero included); and
``kernel_stats`` / ``run_kernel_stats`` / ``compare_tasks`` / ``compare_runs`` on columns equal
the same functions on tasks, field for field.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from asc_aprof import (
    ParseError,
    ProfilingTask,
    TaskColumns,
    TaskCounters,
    TaskParser,
    compare_runs,
    compare_tasks,
    kernel_stats,
    run_kernel_stats,
)
from asc_aprof._plans import _columns, _parser
from asc_aprof._plans._columns import NO_ID, ColumnBuilder
from asc_aprof._plans._parser import DEFAULT_MAX_LINE_LENGTH

from .extras import require
from .reliability.test_parser_fuzz import Doc, docs, fuzz_settings, splits
from .test_parser import NEW_HEADER, new_row
from .test_parser_accel import counter_docs, tricky_docs

needs_c = pytest.mark.skipif(
    _parser._parse_rows is None or _columns._C is None,
    reason="asc_aprof._plans._cparser is not built (no C compiler at install time): pure Python only",
)


# -- the parser's columnar mode ------------------------------------------------------------------
@dataclass(frozen=True)
class Columnar:
    columns: tuple[bytes, ...]
    tables: tuple[tuple[object, ...], ...]
    counters: TaskCounters | None
    rows: int
    skipped: tuple[tuple[str, int], ...]
    error: tuple[str, int | None] | None


def run_columnar(
    data: bytes,
    cuts: Sequence[int],
    *,
    accelerated: bool,
    device: int | None = None,
    max_line_length: int = DEFAULT_MAX_LINE_LENGTH,
    counters: bool = False,
) -> tuple[Columnar, TaskColumns | None]:
    parser = TaskParser(
        "col.csv",
        device=device,
        max_line_length=max_line_length,
        accelerated=accelerated,
        counters=counters,
        columnar=True,
    )
    assert parser.tables is not None
    builder = ColumnBuilder(counters, parser.tables)
    error = None
    try:
        previous = 0
        for cut in [*cuts, len(data)]:
            assert parser.feed(data[previous:cut]) == []
            builder.add(parser.take_columns())
            previous = cut
        assert parser.close() == []
        builder.add(parser.take_columns())
    except ParseError as exc:
        error = (str(exc), exc.line)
    built = builder.build()
    outcome = Columnar(
        tuple(bytes(c) for c in built._cols) if error is None else (),
        built._tables if error is None else (),
        built.counters if error is None else None,
        parser.data_rows,
        tuple(parser.skipped.items()),
        error,
    )
    return outcome, (built if error is None else None)


def exact(tasks: Sequence[ProfilingTask]) -> list[tuple[tuple[str, str], ...]]:
    return [tuple((type(v).__name__, repr(v)) for v in dataclasses.astuple(task)) for task in tasks]


def same_columns(
    data: bytes,
    cuts: Sequence[int] = (),
    *,
    device: int | None = None,
    max_line_length: int = DEFAULT_MAX_LINE_LENGTH,
    counters: bool = False,
) -> Columnar:
    """The columnar parser, C and pure, whole and split: one outcome, and the task parser's tasks."""
    modes = (False, True) if _parser._parse_rows is not None else (False,)
    results = [
        run_columnar(
            data, split, accelerated=acc, device=device, max_line_length=max_line_length, counters=counters
        )
        for split in ([[], cuts] if cuts else [[]])
        for acc in modes
    ]
    outcomes = [o for o, _ in results]
    assert outcomes[1:] == outcomes[:-1]
    outcome, built = results[0]
    reference = TaskParser(
        "col.csv", device=device, max_line_length=max_line_length, accelerated=False, counters=counters
    )
    own_refusal = outcome.error is not None and "64-bit id column" in outcome.error[0]
    try:
        tasks = reference.feed(data) + reference.close()
    except ParseError as exc:
        if own_refusal:  # an id outside int64 stops the columns at its row, before or at the error
            refused_at = outcome.error[1] if outcome.error is not None else None
            assert refused_at is not None and exc.line is not None and exc.line >= refused_at
        else:
            assert outcome.error == (str(exc), exc.line)
        return outcome
    if built is None:  # the one refusal of its own: an id outside int64
        assert own_refusal
        return outcome
    assert exact(built.tasks()) == exact(tasks)
    if counters:
        assert built.counters == reference.take_counters()
    assert outcome.rows == reference.data_rows and outcome.skipped == tuple(reference.skipped.items())
    return outcome


@fuzz_settings(600)
@given(data=st.data(), doc=docs())
def test_valid_documents_same_columns(data: st.DataObject, doc: Doc) -> None:
    outcome = same_columns(doc.data, data.draw(splits(len(doc.data))), device=doc.device)
    assert outcome.error is None


@fuzz_settings(600)
@given(data=st.data(), doc=tricky_docs())
def test_tricky_documents_same_columns(data: st.DataObject, doc: tuple[bytes, int | None, int]) -> None:
    raw, device, limit = doc
    same_columns(raw, data.draw(splits(len(raw))), device=device, max_line_length=limit)


@fuzz_settings(400)
@given(data=st.data(), doc=counter_docs())
def test_counter_documents_same_columns(data: st.DataObject, doc: tuple[bytes, int | None]) -> None:
    raw, device = doc
    same_columns(raw, data.draw(splits(len(raw))), device=device, counters=True)


def test_codes_follow_first_appearance_and_none_is_coded() -> None:
    rows = [
        new_row("1", "7", "b", "AI_CORE", "2.0"),
        new_row("host", "N/A", "a", "MIX_AIC", "1.0"),
        new_row("1", "8", "b", "AI_CORE", "3.0"),
    ]
    outcome = same_columns(("\n".join([NEW_HEADER, *rows]) + "\n").encode())
    assert outcome.tables == ((1, None), ("b", "a"), ("AI_CORE", "MIX_AIC"))
    assert struct.unpack("3q", outcome.columns[1]) == (7, NO_ID, 8)
    assert struct.unpack("3i", outcome.columns[2]) == (0, 1, 0)


@pytest.mark.parametrize("task_id", ["9223372036854775807", "-9223372036854775807"])
def test_ids_at_the_int64_edges_are_kept(task_id: str) -> None:
    outcome = same_columns(f"{NEW_HEADER}\n{new_row('0', task_id, 'k', 'AI_CORE', '1.0')}\n".encode())
    assert struct.unpack("q", outcome.columns[1]) == (int(task_id),)


@pytest.mark.parametrize("task_id", ["9223372036854775808", "-9223372036854775808", "1" * 30])
def test_ids_outside_int64_are_refused_with_the_line(task_id: str) -> None:
    rows = [new_row("0", "1", "k", "AI_CORE", "1.0"), new_row("0", task_id, "k", "AI_CORE", "1.0")]
    data = "\n".join([NEW_HEADER, *rows]) + "\n"
    outcome = same_columns(data.encode())
    assert outcome.error is not None and outcome.error[1] == 3 and "64-bit" in outcome.error[0]


def test_columnar_parser_refuses_keep() -> None:
    with pytest.raises(RuntimeError, match="keep"):
        TaskParser(keep=[("Stream ID",)], accelerated=False, columnar=True)
    with pytest.raises(RuntimeError, match="columnar"):
        TaskParser().take_columns()


# -- grouping and order statistics: C against the references ---------------------------------------
finite = st.floats(allow_nan=False, allow_infinity=False)
zeros_and_ties = st.sampled_from([0.0, -0.0, 1.5, -1.5, 2.0, 5e-324, -5e-324])


@needs_c
@fuzz_settings(500)
@given(values=st.lists(st.one_of(finite, zeros_and_ties), min_size=1, max_size=300), data=st.data())
def test_order_stats_equal_sorted_bit_for_bit(values: list[float], data: st.DataObject) -> None:
    raw = struct.pack(f"{len(values)}d", *values)
    ranks = sorted(set(data.draw(st.lists(st.integers(0, len(values) - 1), min_size=1, max_size=8))))
    ordered = sorted(values)
    want = [struct.pack("d", ordered[r]) for r in ranks]
    for accelerated in (True, False):
        got = _columns.order_stats(raw, ranks, accelerated=accelerated)
        assert [struct.pack("d", v) for v in got] == want


@needs_c
def test_order_stats_of_a_large_column_with_many_ties() -> None:
    rng = random.Random(5)
    values = [rng.choice([0.0, -0.0, 1.0, rng.random()]) for _ in range(20_000)]
    raw = struct.pack(f"{len(values)}d", *values)
    ranks = _columns.quantile_ranks(len(values), (0.0, 0.1, 0.5, 0.9, 1.0))
    ordered = sorted(values)
    got = _columns.order_stats(raw, ranks, accelerated=True)
    assert [struct.pack("d", v) for v in got] == [struct.pack("d", ordered[r]) for r in ranks]


@needs_c
@fuzz_settings(300)
@given(
    keys=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4)), max_size=200),
    skip=st.integers(0, 4),
)
def test_group_rows_and_take_equal_the_references(keys: list[tuple[int, int]], skip: int) -> None:
    devices = struct.pack(f"{len(keys)}i", *(k[0] for k in keys))
    names = struct.pack(f"{len(keys)}i", *(k[1] for k in keys))
    fast = _columns._C[0](devices, names, 4, 5, skip)  # type: ignore[index]
    assert fast == _columns._group_rows_py(devices, names, 4, 5, skip)
    values = struct.pack(f"{len(keys)}d", *(math.nan if i % 3 == 0 else i * 0.5 for i in range(len(keys))))
    _, order, starts = fast
    for start, stop in itertools.pairwise(starts):
        for drop in (False, True):
            assert _columns._C[1](values, order, start, stop, drop) == _columns._take_py(  # type: ignore[index]
                values, order, start, stop, drop
            )


@needs_c
def test_c_helpers_refuse_bad_arguments() -> None:
    c = _columns._C
    assert c is not None
    with pytest.raises(ValueError, match="out of range"):
        c[0](struct.pack("i", 3), struct.pack("i", 0), 1, 1, 0)
    with pytest.raises(ValueError, match="lengths"):
        c[0](b"\0" * 4, b"", 1, 1, 0)
    with pytest.raises(ValueError, match="ascend"):
        c[2](struct.pack("2d", 1.0, 2.0), (1, 0))
    with pytest.raises(IndexError):
        c[1](struct.pack("d", 1.0), struct.pack("i", 5), 0, 1, False)


# -- statistics: columns against tasks -----------------------------------------------------------
def make_tasks(rng: random.Random, n: int) -> list[ProfilingTask]:
    kernels = [("k_a", "AI_CORE"), ("k_b", "MIX_AIC"), ("k_c", "AI_VECTOR_CORE"), ("k_a", "MIX_AIV")]
    out = []
    for i in range(n):
        name, ttype = rng.choice(kernels)
        duration = rng.choice([0.0, -0.0, 1.25, rng.uniform(0.5, 90.0), round(rng.uniform(1, 9), 3)])
        out.append(ProfilingTask(rng.choice([None, i]), name, ttype, duration, rng.choice([0, 1, None])))
    return out


def make_counters(rng: random.Random, n: int, columns: Sequence[str]) -> TaskCounters:
    return TaskCounters(
        {c: [rng.choice([None, 0.0, -0.0, rng.random()]) for _ in range(n)] for c in columns}, length=n
    )


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("accelerated", [True, False])
def test_stats_from_columns_equal_stats_from_tasks(
    seed: int, accelerated: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if accelerated and _columns._C is None:
        pytest.skip("asc_aprof._plans._cparser is not built")
    monkeypatch.setenv("ASC_APROF_PURE_PYTHON", "0" if accelerated else "1")
    rng = random.Random(seed)
    tasks = make_tasks(rng, rng.choice([1, 7, 300, 2500]))
    counters = make_counters(rng, len(tasks), ["aiv_vec_ratio", "aiv_scalar_ratio", "aiv_time(us)"])
    columns = TaskColumns(tasks, counters)
    assert columns.tasks() == tasks
    for kwargs in ({}, {"skip": 2}, {"device": 1}, {"name": "k_a"}, {"device": None, "skip": 400}):
        assert kernel_stats(columns, **kwargs) == kernel_stats(tasks, counters=counters, **kwargs)
        assert kernel_stats(TaskColumns(tasks), **kwargs) == kernel_stats(tasks, **kwargs)


@pytest.mark.parametrize("seed", range(6))
def test_run_stats_and_comparisons_from_columns_equal_the_task_path(seed: int) -> None:
    rng = random.Random(seed)
    import datetime as dt

    from asc_aprof import ProfilingResult

    now = dt.datetime.now(dt.timezone.utc)
    runs = []
    for r in range(3):
        tasks = make_tasks(rng, rng.choice([5, 200, 900]))
        cols = ["aiv_vec_ratio", "aiv_mte2_ratio"] if r != 1 else ["aiv_mte2_ratio", "x"]
        counters = make_counters(rng, len(tasks), cols) if r != 2 else None
        runs.append(ProfilingResult(tuple(tasks), f"PROF_{r}", now, counters))
    columns = [TaskColumns.from_result(r) for r in runs]
    for skip in (0, 1, 3):
        assert run_kernel_stats(columns, skip=skip) == run_kernel_stats(runs, skip=skip)
        assert compare_runs(columns[:2], columns[1:], skip=skip, resamples=50) == compare_runs(
            runs[:2], runs[1:], skip=skip, resamples=50
        )
    mixed: list[TaskColumns | ProfilingResult] = [
        columns[0],
        runs[1],
    ]  # columns and results together: all read as columns
    assert run_kernel_stats(mixed) == run_kernel_stats(runs[:2])
    for metric in ("duration_us", "aiv_mte2_ratio"):
        assert compare_tasks(columns[0], columns[1], metric=metric, resamples=50) == compare_tasks(
            runs[0], runs[1], metric=metric, resamples=50
        )


def test_counter_metric_without_counters_is_refused_the_same_way() -> None:
    tasks = make_tasks(random.Random(1), 20)
    from asc_aprof import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="needs the PMU counters of BASE"):
        compare_tasks(TaskColumns(tasks), TaskColumns(tasks), metric="aiv_vec_ratio")


# -- the record ----------------------------------------------------------------------------------
def test_task_columns_is_immutable_and_hands_out_read_only_views() -> None:
    tasks = make_tasks(random.Random(2), 50)
    columns = TaskColumns(tasks)
    assert not hasattr(columns, "__dict__")  # slotted
    with pytest.raises(AttributeError):
        columns.run_id = "x"
    view = columns.durations()
    assert view.readonly and view.format == "d" and list(view) == [t.duration for t in tasks]
    with pytest.raises(TypeError):
        view[0] = 1.0
    assert [columns.names[c] for c in columns.name_codes()] == [t.name for t in tasks]
    assert columns.task(-1) == tasks[-1] and len(columns) == 50
    assert {k: v.format for k, v in columns.buffers().items()} == _columns.BUFFER_FORMATS
    import pickle

    assert pickle.loads(pickle.dumps(columns)) == columns
    assert columns != TaskColumns(tasks[:-1])


def test_equality_ignores_how_values_were_coded() -> None:
    a = ProfilingTask(1, "a", "AI_CORE", 1.0, 0)
    b = ProfilingTask(2, "b", "AI_CORE", 2.0, 0)
    builder = ColumnBuilder()
    builder.tables.names.code("b")  # "b" gets code 0 here, 1 in the other
    builder.add_tasks([a, b])
    assert builder.build() == TaskColumns([a, b])


def test_numpy_wraps_the_columns_without_a_copy() -> None:
    np = require("numpy")
    columns = TaskColumns(make_tasks(random.Random(3), 100))
    durations = np.frombuffer(columns.durations(), dtype=np.float64)
    assert durations.tolist() == list(columns.durations())
    base = columns._cols[0]
    assert durations.__array_interface__["data"][0] == np.frombuffer(base, dtype=np.uint8).ctypes.data


def test_pyarrow_polars_and_pandas_take_the_columns_zero_copy() -> None:
    pa = require("pyarrow")
    pl = require("polars")
    pd = require("pandas")
    np = require("numpy")
    tasks = make_tasks(random.Random(4), 500)
    columns = TaskColumns(tasks)
    buffers = columns.buffers()
    duration = pa.Array.from_buffers(pa.float64(), len(columns), [None, pa.py_buffer(buffers["duration_us"])])
    name = pa.DictionaryArray.from_arrays(
        pa.Array.from_buffers(pa.int32(), len(columns), [None, pa.py_buffer(buffers["name"])]),
        pa.array(columns.names),
    )
    assert duration.buffers()[1].address == np.frombuffer(buffers["duration_us"], dtype=np.uint8).ctypes.data
    table = pa.table({"duration_us": duration, "name": name})
    frame = pl.from_arrow(table)
    medians = dict(frame.group_by("name").agg(pl.col("duration_us").median()).iter_rows())
    stats = {s.name: s for s in kernel_stats(columns)}
    by_name: dict[str, list[float]] = {}
    for t in tasks:
        by_name.setdefault(t.name, []).append(t.duration)
    assert medians == {k: float(np.median(v)) for k, v in by_name.items()}
    assert set(medians) == set(stats)
    cat = pd.Categorical.from_codes(
        np.frombuffer(buffers["name"], dtype=np.int32), categories=list(columns.names)
    )
    assert list(cat) == [t.name for t in tasks]


# -- real files ----------------------------------------------------------------------------------
def test_generated_file_read_as_columns_equals_the_task_read(tmp_path: Path) -> None:
    from asc_aprof._cann._layout import find_summary_csvs
    from asc_aprof._runs._csv import RunTasks, iter_file_batches, read_file_columns
    from benchmarks.gen_csv import new_op_summary_lines, write_csv

    run = tmp_path / "PROF_000001_20260101000000000_00000001AAAAAAAA"
    write_csv(
        run / "mindstudio_profiler_output" / "op_summary_20260101000000.csv", new_op_summary_lines(30_000, 2)
    )
    files = find_summary_csvs(run)
    gathered = RunTasks(True)
    for batch in iter_file_batches(files, counters=True):
        gathered.add(batch)
    counters = gathered.counters()
    columns = read_file_columns(files, counters=True, run_id=run.name)
    assert columns.tasks() == gathered.tasks and columns.counters == counters
    assert kernel_stats(columns) == kernel_stats(gathered.tasks, counters=counters)
    assert kernel_stats(columns, skip=3) == kernel_stats(gathered.tasks, counters=counters, skip=3)


@needs_c
@fuzz_settings(500)
@given(
    values=st.lists(
        st.one_of(finite, zeros_and_ties, st.sampled_from([1e308, -1e308, 1e-16, 1.0, 1e16, math.inf])),
        max_size=200,
    )
)
def test_exact_sum_equals_math_fsum(values: list[float]) -> None:
    raw = struct.pack(f"{len(values)}d", *values)
    try:
        want: float | type[Exception] = math.fsum(values)
    except OverflowError:
        want = OverflowError
    for accelerated in (True, False):
        if want is OverflowError:
            with pytest.raises(OverflowError):
                _columns.exact_sum(raw, accelerated=accelerated)
        else:
            got = _columns.exact_sum(raw, accelerated=accelerated)
            assert struct.pack("d", got) == struct.pack("d", want) or (got != got and want != want)
