"""Feeding CSV files to the sans-IO parser: a blocking loop and an async chunked loop.

A file that gives no task -- a header and no data row, or only rows the parser skips (``N/A``
durations, ``PROFILING_ENABLE`` / ``PROFILING_DISABLE``) -- is not an error (a device may have run
nothing), but it is said: a warning on the ``asc_aprof`` logger names the file and what it held.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Iterator, Sequence
from pathlib import Path
from typing import Final

import anyio
import anyio.lowlevel

from ._errors import UsageError
from ._layout import CsvFile, find_summary_csvs
from ._parser import TaskParser
from ._records import ProfilingTask

logger = logging.getLogger("asc_aprof")

SYNC_CHUNK: Final = 1 << 20
#: Parsed on the event loop between checkpoints: small enough to stay around a millisecond.
ASYNC_CHUNK: Final = 32 << 10


def summary_csvs_or_error(run_dir: Path) -> list[CsvFile]:
    files = find_summary_csvs(run_dir)
    if not files:
        raise UsageError(
            f"run {run_dir.name} has no exported op_summary/task_time CSV in {run_dir}; call export() first"
        )
    return files


def report_no_tasks(parser: TaskParser) -> None:
    """Warn (logger ``asc_aprof``) when a file just parsed gave no task, naming it."""
    if parser.tasks_out:
        return
    if not parser.data_rows:
        held = "a header and no data row"
    else:
        reasons = ", ".join(f"{reason}: {count}" for reason, count in parser.skipped.items())
        held = f"all {parser.data_rows} data rows skipped ({reasons})"
    logger.warning("%s holds no task: %s", parser.source, held)


def iter_file_tasks(files: Sequence[CsvFile]) -> Iterator[list[ProfilingTask]]:
    """Batches of tasks from *files*, read in 1 MiB chunks."""
    for csv_file in files:
        parser = TaskParser(str(csv_file.path), device=csv_file.device)
        with open(csv_file.path, "rb") as stream:
            while chunk := stream.read(SYNC_CHUNK):
                batch = parser.feed(chunk)
                if batch:
                    yield batch
        tail = parser.close()
        report_no_tasks(parser)
        if tail:
            yield tail


async def aiter_file_tasks(files: Sequence[CsvFile]) -> AsyncGenerator[list[ProfilingTask], None]:
    """Batches of tasks from *files*, read with anyio's file API.

    Reads 1 MiB per worker-thread round trip and parses it in 32 KiB slices with a checkpoint
    between them, so the loop never stalls for long; the consumer's pace sets the reading pace
    (at most one read chunk is held).
    """
    for csv_file in files:
        parser = TaskParser(str(csv_file.path), device=csv_file.device)
        async with await anyio.open_file(csv_file.path, "rb") as stream:
            while chunk := await stream.read(SYNC_CHUNK):
                view = memoryview(chunk)
                for start in range(0, len(chunk), ASYNC_CHUNK):
                    batch = parser.feed(bytes(view[start : start + ASYNC_CHUNK]))
                    if batch:
                        yield batch
                    await anyio.lowlevel.checkpoint()
        tail = parser.close()
        report_no_tasks(parser)
        if tail:
            yield tail


def split_by_device(batches: Iterator[list[ProfilingTask]]) -> dict[int | None, list[ProfilingTask]]:
    out: dict[int | None, list[ProfilingTask]] = {}
    for batch in batches:
        for task in batch:
            bucket = out.get(task.device)
            if bucket is None:
                bucket = out[task.device] = []
            bucket.append(task)
    return out
