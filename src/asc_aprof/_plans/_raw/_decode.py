"""Decoders of CANN's raw profiling files: bytes in, plain records out (sans-IO).

Every layout here is little-endian and was checked against the real exporter's parsers and
against real runs (see ``docs/raw_reader.md``). A decoder never guesses: a record it cannot
place (a bad magic number, an unknown level, a torn file) raises :class:`DeclinedError`.
"""

from __future__ import annotations

import array
import configparser
import dataclasses
import mmap
import re
import struct
import sys
from collections.abc import Iterable, Iterator, Mapping
from itertools import repeat
from typing import Any, Final, NamedTuple, Protocol, TypeAlias, runtime_checkable

from ..._model._json import loads as json_loads
from ._types import DeclinedError, DeclineReason

#: Magic of every host record (``aging.*`` / ``unaging.*`` compact and additional files).
HOST_MAGIC: Final = 0x5A5A
#: Magic of every ``stars_soc`` record (its second 16-bit word).
STARS_MAGIC: Final = 0x6BD3

#: Host record levels (``LevelDataType``) and the names the exporter gives them.
LEVELS: Final = {
    30000: "pytorch_tx",
    25000: "pta",
    20500: "msproftx",
    20000: "acl",
    15000: "model",
    10000: "node",
    6000: "aicpu",
    5500: "communication",
    5000: "runtime",
}

#: ``GeTaskType``: node_basic_info's task type numbers.
GE_TASK_TYPES: Final = {
    0: "AI_CORE",
    1: "AI_CPU",
    2: "AI_VECTOR_CORE",
    3: "WRITE_BACK",
    4: "MIX_AIC",
    5: "MIX_AIV",
    6: "FFTS_PLUS",
    7: "DSA_SQE",
    8: "DVPP",
    9: "HCCL",
    10: "FUSION",
    11: "INVALID",
}

#: SQE types of STARS chips (910B, 310B): the ``stars_soc`` task-log's bits 10-15.
SQE_TYPES: Final = (
    "AI_CORE",
    "AI_CPU",
    "AIV_SQE",
    "PLACE_HOLDER_SQE",
    "EVENT_RECORD_SQE",
    "EVENT_WAIT_SQE",
    "NOTIFY_RECORD_SQE",
    "NOTIFY_WAIT_SQE",
    "WRITE_VALUE_SQE",
    "VQ6_SQE",
    "TOF_SQE",
    "SDMA_SQE",
    "VPC_SQE",
    "JPEGE_SQE",
    "JPEGD_SQE",
    "DSA_SQE",
    "ROCCE_SQE",
    "PCIE_DMA_SQE",
    "HOST_CPU_SQE",
    "CDQM_SQE",
    "C_CORE_SQE",
)

#: ACL API groups (bits 16+ of an ACL api_event type); the exporter drops every API record of a
#: run when one falls outside them.
ACL_API_GROUPS: Final = frozenset({1, 2, 3, 4, 5, 6, 7, 9, 10, 11})

STARS_SIZE: Final = 64
HOST_COMPACT_SIZE: Final = 64  # task_track, node_basic_info
API_EVENT_SIZE: Final = 40
ADDITIONAL_SIZE: Final = 256  # tensor_info, context_id_info
TS_TRACK_SIZE: Final = 40

_STARS: Final = struct.Struct(
    "<HHHHQHHHH40x"
)  # task log and FFTS+ subtask log share it  # header, magic, stream, task, counter, acc pair, reserved
_HOST_HEADER: Final = struct.Struct("<HHIIIQ232x")  # magic, level, type, thread, data length, timestamp
_API_EVENT: Final = struct.Struct("<HHIIIQQQ")
_CONTEXT: Final = struct.Struct("<HHIIIQQI55I")
_TASK_TRACK: Final = struct.Struct("<HHIIIQHHHHQQ16x")
_NODE_BASIC: Final = struct.Struct("<HHIIIQQIQII12x")
_TS_TRACK: Final = struct.Struct("<BBHLQHHHH16x")
# A host record's fields as its record keeps them (magic and data length skipped).
_API_FIELDS: Final = struct.Struct("<2xHII4xQQQ")
_TRACK_FIELDS: Final = struct.Struct("<2xHII4xQHHHHQQ16x")
_BASIC_FIELDS: Final = struct.Struct("<2xHII4xQQIQII12x")


#: A raw file's contents: bytes, or, for a big file of binary records, an anonymous memory map
#: (``_driver._files``; freeing a map lets the GIL go, freeing as big a bytes object does not).
#: Every decoder reads either through a memoryview, and the C loops read both in place.
RawData: TypeAlias = "bytes | mmap.mmap"


@runtime_checkable
class PieceSource(Protocol):
    """Files a decode can read a piece at a time (the driver's; a plain mapping cannot)."""

    def pieces(self, rel: str, multiple: int) -> Iterator[RawData] | None:
        """The file *rel* in pieces of a few MiB, each a whole number of *multiple*-byte records,
        read in turn; None where the file's length is not a whole number of them (nothing read).
        A piece is good until the next one is asked for."""
        ...


#: Joined slices of at least this many bytes go into a memory map (see :func:`joined`).
MAPPED_MIN: Final = 1 << 20
#: Bytes copied per step into a map (a bytecode each: other threads run between steps).
_COPY_STEP: Final = 1 << 20


def mapped(size: int) -> mmap.mmap:
    """A new anonymous memory map of *size* bytes (zeros), private to this process."""
    if sys.platform == "win32":
        return mmap.mmap(-1, size)
    return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)


def records(data: RawData, size: int) -> Iterator[memoryview]:
    """The *size*-byte records of a file (or of several slices joined in order).

    As the exporter does, a length that is not a multiple of *size* loses its *leading* bytes:
    the oldest part of an aging file was overwritten, so its first record is the torn one.
    """
    view = memoryview(data)[len(data) % size :]
    for offset in range(0, len(view), size):
        yield view[offset : offset + size]


def joined(slices: Iterable[RawData]) -> RawData:
    """The slices of a file in order, as one: the slice itself where there is one; else bytes, or
    a memory map (filled in steps) from :data:`MAPPED_MIN` bytes on."""
    parts = list(slices)
    if len(parts) == 1:
        return parts[0]
    size = sum(len(part) for part in parts)
    if size < MAPPED_MIN:
        return b"".join(parts)
    out = mapped(size)
    at = 0
    for part in parts:
        view = memoryview(part)
        for begin in range(0, len(view), _COPY_STEP):
            piece = view[begin : begin + _COPY_STEP]
            out[at : at + len(piece)] = piece
            at += len(piece)
        view.release()
    return out


# -- device: stars_soc task log ---------------------------------------------------------------


class StarsRecord(NamedTuple):
    """One ``stars_soc`` 64-byte record (task log: function 0 = start, 1 = end)."""

    function: int
    sqe_type: int
    stream_id: int
    task_id: int
    counter: int


def _unpacked(data: RawData, layout: struct.Struct, size: int) -> Iterator[tuple[Any, ...]]:
    """Every record of *data* unpacked (leading bytes of a torn file dropped, see :func:`records`)."""
    assert layout.size == size
    return layout.iter_unpack(memoryview(data)[len(data) % size :])


#: ``tuple.__new__(Record, fields)``: a named tuple built from its fields without a Python frame.
_new: Final = tuple.__new__


def _host_view(data: RawData, size: int) -> memoryview | None:
    """The whole host records of *data* (a torn head dropped, see :func:`records`) when every
    one has the host magic and a known level; else None: the record-by-record loop then says
    which is declined (also on a big-endian host, where the words are not read in place)."""
    view = memoryview(data)[len(data) % size :]
    if not _NATIVE_LITTLE:
        return None
    words = view.cast("H")
    magics = words[0 :: size // 2].tolist()
    if magics.count(HOST_MAGIC) != len(magics) or not LEVELS.keys() >= set(words[1 :: size // 2].tolist()):
        return None
    return view


class SubtaskRecord(NamedTuple):
    """An FFTS+ subtask log record (``stars_soc`` function 34 = start, 35 = end)."""

    function: int
    sqe_type: int
    stream_id: int
    task_id: int
    counter: int
    subtask_type: int
    subtask_id: int
    ffts_type: int
    thread_id: int


FUNCTION_SUBTASK_START: Final = 34
FUNCTION_SUBTASK_END: Final = 35


def stars_records(data: RawData) -> tuple[list[StarsRecord], list[SubtaskRecord]]:
    """The task log (functions 0 and 1) and the FFTS+ subtask log (34 and 35) of ``stars_soc``."""
    tasks: list[StarsRecord] = []
    subtasks: list[SubtaskRecord] = []
    append = tasks.append
    for header, magic, stream, task, counter, w5, w6, w7, w8 in _unpacked(data, _STARS, STARS_SIZE):
        if magic != STARS_MAGIC:
            # The exporter skips such chunks with an error; a torn log is not something to guess on.
            raise DeclinedError(DeclineReason.MALFORMED, f"stars_soc record with magic {magic:#06x}")
        function = header & 63
        if function in (FUNCTION_SUBTASK_START, FUNCTION_SUBTASK_END):
            subtasks.append(
                SubtaskRecord(function, header >> 10, stream, task, counter, w5 & 255, w6, w7 >> 13, w8)
            )
        else:
            append(StarsRecord(function, header >> 10, stream, task, counter))
    return tasks, subtasks


class StarsColumns(NamedTuple):
    """The task-log records of ``stars_soc`` as columns (the fast form of :func:`stars_records`)."""

    headers: list[int]  # function in bits 0-5, SQE type in bits 10-15 (bits 6-9 cleared)
    streams: list[int]
    tasks: list[int]
    counters: list[int]


_OTHER_BITS: Final = 0x3C0  # header bits 6-9: neither the function nor the SQE type
_NATIVE_LITTLE: Final = sys.byteorder == "little" and array.array("Q").itemsize == 8
_WORDS16: Final = STARS_SIZE // 2
_WORDS64: Final = STARS_SIZE // 8


def stars_columns(data: RawData) -> tuple[StarsColumns, list[SubtaskRecord]]:
    """:func:`stars_records` as columns: the same task-log records in the same order, and the
    same FFTS+ subtask records. The words are read straight out of the file (no record objects);
    a file with anything unusual (a bad magic, subtask records, a big-endian host) takes
    :func:`stars_records`, so the records and errors are that function's."""
    view = memoryview(data)[len(data) % STARS_SIZE :]
    if _NATIVE_LITTLE:
        words = view.cast("H")
        headers = words[0::_WORDS16].tolist()
        magics = words[1::_WORDS16].tolist()
        kinds = set(headers)
        if magics.count(STARS_MAGIC) == len(magics) and not any(
            h & 63 in (FUNCTION_SUBTASK_START, FUNCTION_SUBTASK_END) for h in kinds
        ):
            if any(h & _OTHER_BITS for h in kinds):
                headers = [h & ~_OTHER_BITS for h in headers]
            columns = StarsColumns(
                headers,
                words[2::_WORDS16].tolist(),
                words[3::_WORDS16].tolist(),
                view.cast("Q")[1::_WORDS64].tolist(),
            )
            return columns, []
    tasks, subtasks = stars_records(data)
    headers = [r.function | r.sqe_type << 10 for r in tasks]
    return (
        StarsColumns(
            headers, [r.stream_id for r in tasks], [r.task_id for r in tasks], [r.counter for r in tasks]
        ),
        subtasks,
    )


class ContextRecord(NamedTuple):
    """A ``context_id_info`` record: the context ids of one node launch."""

    level: int
    thread_id: int
    timestamp: int
    context_ids: str  # comma-joined, as the exporter keeps them


def context_records(data: RawData) -> list[ContextRecord]:
    out: list[ContextRecord] = []
    for fields in _unpacked(data, _CONTEXT, ADDITIONAL_SIZE):
        magic, level, _stype, thread, _len, ts, _node, count = fields[:8]
        if magic != HOST_MAGIC or level not in LEVELS:
            raise _bad_host(magic, level, "context_id_info")
        if count > 55:
            raise DeclinedError(
                DeclineReason.MALFORMED, f"context_id_info record with {count} ids (at most 55 fit)"
            )
        out.append(ContextRecord(level, thread, ts, ",".join(str(i) for i in fields[8 : 8 + count])))
    return out


# -- device: ts_track -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class FlipRecord:
    """A task-id flip (``ts_track`` tag 14); ``flip_num`` 65535 marks a stream's destruction."""

    stream_id: int
    counter: int
    task_id: int
    flip_num: int


TS_TAG_FLIP: Final = 14


def ts_track_flips(data: RawData) -> list[FlipRecord]:
    out: list[FlipRecord] = []
    for _b0, tag, _h, _l, counter, stream, flip_num, _x, task in _unpacked(data, _TS_TRACK, TS_TRACK_SIZE):
        if tag != TS_TAG_FLIP:
            raise DeclinedError(
                DeclineReason.UNKNOWN_RECORD,
                f"ts_track record with tag {tag} (only task flips, tag 14, are known)",
            )
        out.append(FlipRecord(stream, counter, task, flip_num))
    return out


# -- host compact / api records ---------------------------------------------------------------


class ApiRecord(NamedTuple):
    """An ``api_event`` record: an API call (``start``..``end``) of one thread."""

    level: int
    struct_type: int
    thread_id: int
    start: int
    end: int
    item_id: int


_ALL_ONES: Final = (1 << 64) - 1


def _bad_host(magic: int, level: int, what: str) -> DeclinedError:
    # The exporter raises on such a record and loses the whole file.
    return DeclinedError(DeclineReason.MALFORMED, f"{what} record with magic {magic:#06x}, level {level}")


def api_records(data: RawData) -> list[ApiRecord]:
    view = _host_view(data, API_EVENT_SIZE)
    if view is not None:
        words = view.cast("Q")  # five per record: start, end in the third and fourth
        if _ALL_ONES not in words[3::5].tolist() and 0 not in words[2::5].tolist():
            return list(map(_new, repeat(ApiRecord), _API_FIELDS.iter_unpack(view)))
    return _api_records(data)


def api_starts(data: RawData) -> bool:
    """Whether *data* has an API record :func:`api_records` keeps (one whose start is not 0)."""
    view = memoryview(data)[len(data) % API_EVENT_SIZE :].cast("Q")
    return any(view[2::5].tolist())


def _api_records(data: RawData) -> list[ApiRecord]:
    """:func:`api_records` record by record: the reference, and where a record is declined."""
    out: list[ApiRecord] = []
    append = out.append
    for magic, level, stype, thread, _len, start, end, item in _unpacked(data, _API_EVENT, API_EVENT_SIZE):
        if magic != HOST_MAGIC or level not in LEVELS:
            raise _bad_host(magic, level, "api_event")
        if end == _ALL_ONES:
            # A paired begin/end event, which the exporter matches by request id: not modelled.
            raise DeclinedError(
                DeclineReason.UNKNOWN_RECORD, "api_event holds event records (end = all ones)"
            )
        if start == 0:
            continue  # dropped by the exporter as invalid
        append(ApiRecord(level, stype, thread, start, end, item))
    return out


class TaskTrackRecord(NamedTuple):
    """A ``task_track`` record: the runtime handing one task to a device."""

    level: int
    struct_type: int
    thread_id: int
    timestamp: int
    dev_type: int
    device_id: int
    stream_id: int
    task_id: int
    batch_id: int
    task_type: int
    kernel_hash: int


def task_track_records(data: RawData) -> list[TaskTrackRecord]:
    view = _host_view(data, HOST_COMPACT_SIZE)
    if view is None:
        return _task_track_records(data)
    return [
        _new(
            TaskTrackRecord,
            (level, stype, thread, ts, (dev >> 12) & 0xF, dev & 0xFFF, stream, task, batch, ttype, kernel),
        )
        for level, stype, thread, ts, dev, stream, task, batch, ttype, kernel in _TRACK_FIELDS.iter_unpack(
            view
        )
    ]


def _task_track_records(data: RawData) -> list[TaskTrackRecord]:
    """:func:`task_track_records` record by record: the reference, and where one is declined."""
    out: list[TaskTrackRecord] = []
    append = out.append
    for fields in _unpacked(data, _TASK_TRACK, HOST_COMPACT_SIZE):
        magic, level, stype, thread, _len, ts, dev, stream, task, batch, ttype, kernel = fields
        if magic != HOST_MAGIC or level not in LEVELS:
            raise _bad_host(magic, level, "task_track")
        append(
            TaskTrackRecord(
                level, stype, thread, ts, (dev >> 12) & 0xF, dev & 0xFFF, stream, task, batch, ttype, kernel
            )
        )
    return out


class NodeBasicRecord(NamedTuple):
    """A ``node_basic_info`` record: what GE knows of one node launch."""

    level: int
    struct_type: int
    thread_id: int
    timestamp: int
    node_hash: int
    task_type: int
    op_type_hash: int
    block_word: int
    op_flag: int

    @property
    def block_num(self) -> int:
        return self.block_word & 0xFFFF

    @property
    def mix_block_num(self) -> int:
        return (self.block_word & 0xFFFF) * (self.block_word >> 16)


def node_basic_records(data: RawData) -> list[NodeBasicRecord]:
    view = _host_view(data, HOST_COMPACT_SIZE)
    if view is None:
        return _node_basic_records(data)
    return list(map(_new, repeat(NodeBasicRecord), _BASIC_FIELDS.iter_unpack(view)))


def _node_basic_records(data: RawData) -> list[NodeBasicRecord]:
    """:func:`node_basic_records` record by record: the reference, and where one is declined."""
    out: list[NodeBasicRecord] = []
    for fields in _unpacked(data, _NODE_BASIC, HOST_COMPACT_SIZE):
        magic, level, stype, thread, _len, ts, node, ttype, optype, block, flag = fields
        if magic != HOST_MAGIC or level not in LEVELS:
            raise _bad_host(magic, level, "node_basic_info")
        out.append(NodeBasicRecord(level, stype, thread, ts, node, ttype, optype, block, flag))
    return out


class HeaderRecord(NamedTuple):
    """The common header of an additional record (``tensor_info``): where it attaches."""

    level: int
    struct_type: int
    thread_id: int
    timestamp: int


def header_records(data: RawData, what: str) -> list[HeaderRecord]:
    """The headers of 256-byte additional records (``tensor_info``)."""
    out: list[HeaderRecord] = []
    for magic, level, stype, thread, _len, ts in _unpacked(data, _HOST_HEADER, ADDITIONAL_SIZE):
        if magic != HOST_MAGIC or level not in LEVELS:
            raise _bad_host(magic, level, what)
        out.append(HeaderRecord(level, stype, thread, ts))
    return out


# -- text files -------------------------------------------------------------------------------


def _text(data: RawData, what: str) -> str:
    try:
        return (data if isinstance(data, bytes) else bytes(data)).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DeclinedError(DeclineReason.MALFORMED, f"{what} is not UTF-8 ({exc})") from None


def _lines(data: RawData, what: str) -> list[str]:
    """Lines as Python's text mode reads them (universal newlines: ``\\r\\n``, ``\\r``, ``\\n``)."""
    return _text(data, what).replace("\r\n", "\n").replace("\r", "\n").split("\n")


def hash_dic(data: RawData, into: dict[str, str]) -> None:
    """``hash:name`` lines (``unaging.additional.hash_dic``) into *into* (later lines win)."""
    for line in _lines(data, "hash_dic"):
        if ":" not in line:
            continue
        key, value = line.strip().split(":", 1)
        if key.isdigit():
            into[key] = value


def type_info_dic(data: RawData, into: dict[str, dict[str, str]]) -> None:
    """``level_type:name`` lines into ``{level name: {type: name}}``."""
    for line in _lines(data, "type_info_dic"):
        if ":" not in line or "_" not in line:
            continue
        key, value = line.strip().split(":", 1)
        parts = key.split("_")
        if len(parts) != 2:
            # The exporter fails on such a line and loses every type name of the run.
            raise DeclinedError(DeclineReason.MALFORMED, f"type_info_dic line {line.strip()!r}")
        level, number = parts
        if number.isdigit() and level.isdigit():
            if not level.isdecimal():  # "²": the exporter's int() fails on it too
                raise DeclinedError(DeclineReason.MALFORMED, f"type_info_dic line {line.strip()!r}")
            if int(level) not in LEVELS:
                continue
            into.setdefault(LEVELS[int(level)], {})[number] = value


def json_object(data: RawData, what: str) -> dict[str, object]:
    """The JSON object on the first line of *data* (as the exporter reads info/sample/start_info)."""
    first = _text(data, what).split("\n", 1)[0]
    try:
        value = json_loads(first)
    except ValueError as exc:
        raise DeclinedError(DeclineReason.MALFORMED, f"{what} is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise DeclinedError(DeclineReason.MALFORMED, f"{what} is not a JSON object")
    return value


def key_values(data: RawData, what: str) -> dict[str, str]:
    """``key: value`` lines of ``dev_start.log.N``."""
    out: dict[str, str] = {}
    for line in _lines(data, what):
        parts = line.strip().split(":")
        if len(parts) == 2:
            out[parts[0]] = parts[1]
    return out


#: ``host_start.log.N`` as CANN writes it: one section of lowercase ``key: number`` lines.
_PLAIN_INI: Final = re.compile(r"\[([A-Za-z0-9_]+)\]\n((?:[a-z_]+: ?-?[0-9.]+\n)*)")
_PLAIN_INI_LINE: Final = re.compile(r"([a-z_]+): ?(-?[0-9.]+)\n")


def ini_first_section(data: RawData, what: str) -> Mapping[str, str]:
    """The first section of ``host_start.log.N`` (an INI file: ``[DeviceN]``)."""
    text = _text(data, what)
    plain = _PLAIN_INI.fullmatch(text if text.endswith("\n") else text + "\n")
    if plain is not None:
        # What ConfigParser gives for such a file, without building one (a third of a
        # small run's read); anything else (a duplicate key, comments, more sections) goes to it.
        found = dict(_PLAIN_INI_LINE.findall(plain.group(2)))
        if len(found) == plain.group(2).count("\n"):
            return found
    parser = configparser.ConfigParser()
    try:
        parser.read_string(text)
        sections = parser.sections()
        if not sections:
            raise DeclinedError(DeclineReason.MALFORMED, f"{what} has no section")
        return dict(parser.items(sections[0]))  # (interpolates: a stray % raises here)
    except configparser.Error as exc:
        raise DeclinedError(DeclineReason.MALFORMED, f"{what}: {exc}") from None
