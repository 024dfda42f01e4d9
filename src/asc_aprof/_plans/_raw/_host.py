"""The host side of a run: which kernel each runtime task belongs to (sans-IO).

The exporter files every host record of a thread into one time-ordered queue (API calls with a
start and an end; ``node_basic_info`` / ``tensor_info`` / ``task_track`` records with one
timestamp), builds a call tree from it (an API call contains what starts inside it; a record
belongs to the last call of its level that contains it, else it hangs in the tree on its own),
and walks the tree: every ``task_track`` record becomes a *host task* (stream, task, batch and
context ids, runtime type, kernel name), and a kernel's record also a *GE task* (op name, GE
task type, block dims) taken from the enclosing node launch. This module does that walk for the
levels real runs use (ACL calls, node launches and runtime tasks) and declines anything else.

Speed: the optional C extension ``_chost`` (built at install where a compiler is there) runs the
same loops: :meth:`HostRecords.take` checks a whole api_event / task_track / node_basic_info
file in C for what its decoder would decline and, where nothing, keeps the bytes, which
``_chost.host_tables`` reads in place (no record objects). Everything that depends on a table
(names, types, skipped calls) is asked of the lookups :func:`_c_lookups` gives, once per
distinct key, and every decline is raised by :func:`_fail` from the one message table the pure
loops use, so tables and errors are the pure loops'. :func:`_host_tables_py` is the reference
and the fallback: no extension, ``ASC_APROF_PURE_PYTHON=1`` (the switch the CSV parser's C row
loop reads too), or records the decoders would not make (C returns None for them).

Memory: where only op_summary's rows are read at task time level 1, :class:`LeanWalk` makes the
GE tasks instead (``_chost``'s lean walk): it is fed the host files a slice at a time, each let go
of once fed, keeps only the API calls (24 bytes each, sorted per thread as intervals) and places
every other record among them by binary search; its GE tasks come packed per device
(:class:`PackedGe`, 12 bytes a task), their records made only where read. It declines
(:class:`WholeDecodeNeeded`) wherever it would not give the queue walk's tables and errors.
"""

from __future__ import annotations

import dataclasses
import operator
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import itemgetter
from types import SimpleNamespace
from typing import Any, Final, NamedTuple, NoReturn, overload

from ._decode import (
    ACL_API_GROUPS,
    API_EVENT_SIZE,
    GE_TASK_TYPES,
    HOST_COMPACT_SIZE,
    LEVELS,
    ApiRecord,
    ContextRecord,
    HeaderRecord,
    NodeBasicRecord,
    RawData,
    TaskTrackRecord,
    api_records,
    api_starts,
    node_basic_records,
    task_track_records,
)
from ._types import DeclinedError, DeclineReason, WholeDecodeNeeded


def _load_accelerator() -> tuple[Callable[..., Any], Callable[[RawData, int, bool], bool]] | None:
    try:
        from ._chost import host_tables, in_place
    except ImportError:  # built without a compiler: the extension is optional
        return None
    return host_tables, in_place


_C: Final = _load_accelerator()
_C_HOST_TABLES: Final = _C[0] if _C is not None else None


def _load_lean() -> SimpleNamespace | None:
    try:
        from ._chost import ge_items, lean_feed, lean_finish, lean_new, lean_tensors, lean_walk
    except ImportError:
        return None
    return SimpleNamespace(
        ge_items=ge_items,
        lean_feed=lean_feed,
        lean_finish=lean_finish,
        lean_new=lean_new,
        lean_tensors=lean_tensors,
        lean_walk=lean_walk,
    )


_LEAN: Final = _load_lean()


def accelerated_default() -> bool:
    """Whether :func:`host_tables` uses the C loops by default (``_chost`` is built and
    ``ASC_APROF_PURE_PYTHON`` is not ``1``)."""
    return _C_HOST_TABLES is not None and os.environ.get("ASC_APROF_PURE_PYTHON") != "1"


ROOT, ACL, MODEL, NODE, HCCL, TASK = 0, 1, 2, 3, 4, 5
#: ``tuple.__new__(Record, fields)``: a named tuple built without a Python frame (hot loops).
_new: Final[Any] = tuple.__new__
LEVEL_OF: Final = {"acl": ACL, "model": MODEL, "node": NODE, "communication": HCCL, "runtime": TASK}

NA: Final = "N/A"
INVALID_CONTEXT: Final = 4294967295
#: Runtime task types whose context ids come from the node (others get the invalid id).
CONTEXT_WHITE_LIST: Final = frozenset(
    {"KERNEL_AICORE", "KERNEL_AIVEC", "FFTS_PLUS", "KERNEL_MIX_AIC", "KERNEL_MIX_AIV"}
)
MIX_TASK_TYPES: Final = frozenset({"KERNEL_MIX_AIC", "KERNEL_MIX_AIV"})
FLIP_TASK: Final = "FLIP_TASK"
MAINTENANCE: Final = "MAINTENANCE"


class HostTask(NamedTuple):
    """A runtime task as the host saw it (one per context id)."""

    device_id: int
    stream_id: int
    task_id: int
    context_id: int
    batch_id: int
    task_type: str
    kernel_name: str
    timestamp: int


class GeTask(NamedTuple):
    """What op_summary says about a kernel task: its op name, GE type and block dims."""

    device_id: int
    stream_id: int
    task_id: int
    context_id: int
    batch_id: int
    op_name: str
    task_type: str
    block_num: int
    mix_block_num: int


@dataclasses.dataclass(frozen=True, slots=True)
class HostTables:
    """A run's host tasks and GE tasks. Lists, not tuples: the decode that made them empties
    them in steps when it is done with them (a tuple can only be freed at once: see ._free)."""

    host_tasks: list[HostTask]
    ge_tasks: list[GeTask]
    #: False: no host task was made (``host_tables(..., host_tasks=False)``), their ids checked only
    with_host_tasks: bool = True


class PackedGe(Sequence[GeTask]):
    """One device's GE tasks as the lean walk packs them (12 bytes a task: its stream and task
    ids, and a template holding its op name, GE type and block dims); a record is made when
    read. Context and batch ids are the invalid context and 0, as for every level-1 GE task."""

    __slots__ = ("_capsule", "_device", "_size", "_templates")

    #: Records made per C call while iterating.
    _STEP: Final = 4096

    def __init__(self, capsule: object, size: int, templates: list[GeTask], device: int) -> None:
        self._capsule = capsule
        self._size = size
        self._templates = templates  # (shared by every device of the walk)
        self._device = device

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> GeTask: ...
    @overload
    def __getitem__(self, index: slice) -> list[GeTask]: ...
    def __getitem__(self, index: int | slice) -> GeTask | list[GeTask]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._size)
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            return self._items(start, max(start, stop))
        i = operator.index(index)
        if i < 0:
            i += self._size
        if not 0 <= i < self._size:
            raise IndexError("PackedGe index out of range")
        return self._items(i, i + 1)[0]

    def __iter__(self) -> Iterator[GeTask]:
        for start in range(0, self._size, self._STEP):
            yield from self._items(start, min(start + self._STEP, self._size))

    def _items(self, start: int, stop: int) -> list[GeTask]:
        assert _LEAN is not None  # (made by it)
        made: list[GeTask] = _LEAN.ge_items(self._capsule, self._templates, self._device, start, stop)
        return made

    def unknown_type(self) -> bool:
        """Whether a task's GE type may be ``N/A`` (any template's of the walk)."""
        return any(t.task_type == NA for t in self._templates)

    def packed(self) -> tuple[object, list[GeTask]]:
        """What ``_cdevice.packed_device`` reads: the capsule and the templates."""
        return self._capsule, self._templates


def lean_walk_ready() -> bool:
    """Whether :class:`LeanWalk` can run (the C loops are built and in use)."""
    return _LEAN is not None and accelerated_default()


class LeanWalk:
    """The lean walk of ``_chost`` (its theory there), fed in this order: :meth:`feed` every
    api_event slice, :meth:`walk`, every node_basic_info slice, :meth:`tensors`, every
    task_track slice, then :meth:`finish`. Each raises :class:`WholeDecodeNeeded` where the walk
    declines the run, and whatever a lookup raises (a decline among them)."""

    #: feed()'s kinds: the file name part, the C kind and the record size
    KINDS: Final = {
        "api_event": (0, API_EVENT_SIZE),
        "node_basic_info": (1, HOST_COMPACT_SIZE),
        "task_track": (2, HOST_COMPACT_SIZE),
    }

    def __init__(self, records: HostRecords, *, all_export: bool) -> None:
        assert _LEAN is not None
        self._c = _LEAN
        self._walk = _LEAN.lean_new(_c_lookups(records), all_export)
        self.fed = dict.fromkeys(self.KINDS, 0)  # records fed, per kind

    def feed(self, kind: str, data: RawData) -> None:
        code, size = self.KINDS[kind]
        if not self._c.lean_feed(self._walk, code, data):
            raise WholeDecodeNeeded(f"the lean host walk declines a {kind} slice")
        self.fed[kind] += len(data) // size

    def walk(self) -> None:
        if not self._c.lean_walk(self._walk):
            raise WholeDecodeNeeded("the lean host walk declines the API calls")

    def tensors(self, records: list[HeaderRecord]) -> None:
        if not self._c.lean_tensors(self._walk, records):
            raise WholeDecodeNeeded("the lean host walk declines a tensor_info record")

    def finish(self) -> dict[int, PackedGe]:
        """Each device's GE tasks (a device with none is not there)."""
        found = self._c.lean_finish(self._walk)
        self._walk = None
        if found is None:
            raise WholeDecodeNeeded("the lean host walk declines the runtime tasks")
        packs, templates = found
        return {
            device: PackedGe(capsule, size, templates, device) for device, (capsule, size) in packs.items()
        }


# -- the event tree ---------------------------------------------------------------------------

#: Deepest nesting the exporter follows while building a tree (it recurses with a limit).
_DEPTH_LIMIT: Final = 20
# Queue entries: (timestamp, level, seq, bound, kind, payload). Sorting the tuples orders them
# by time, then level, then the order they were added in: the exporter's stable sort.
_API, _BASIC, _TENSOR, _TRACK, _CONTEXT = 0, 1, 2, 3, 4
_SKIPPED, _OTHER_LEVEL = -1, -2  # api_event calls the queue leaves out, or declines

# What the host side declines, by code: the pure loops raise ``_declined(code, value)``, the C
# loops (``_chost``) the same error through ``_fail``, so reasons and messages cannot drift apart.
_OTHER_API_LEVEL, _NESTED_NODE, _TOO_DEEP, _DPU, _BATCHED, _WRAPPED = range(6)
_CONTEXTS_AT_LEVEL1, _NO_BASIC_AT_LEVEL1, _HCCL_NODE, _OUTSIDE_NODE = range(6, 10)
_MESSAGES: Final = (
    "api_event call at level {0!r} (only ACL and node are known)",
    "a node launch inside another (HCCL AI CPU launch)",
    "host calls nested deeper than the exporter follows",
    "DPU task_track records",
    "task_track batch ids other than 0",
    "task ids of stream {0} wrapped around (batch ids after a flip are not verified)",
    "node {0!r} with context ids (MIX/FFTS+) at task time level 1",
    "node launch {0!r} has no node_basic_info at task time level 1",
    "HCCL node {0!r}",
    "kernel {0!r} launched outside a node launch at task time level 1",
)


def _declined(what: int, value: Any = None) -> DeclinedError:
    if what == _OTHER_API_LEVEL:
        return DeclinedError(DeclineReason.UNKNOWN_RECORD, _MESSAGES[what].format(LEVELS[value]))
    return DeclinedError(DeclineReason.UNSUPPORTED, _MESSAGES[what].format(value))


def _fail(what: int, value: Any = None) -> NoReturn:
    raise _declined(what, value)


class _Node:
    """A node launch (level-10000 API call) and the node records that attached to it."""

    __slots__ = ("basic", "bound", "contexts", "name", "others", "start")

    def __init__(self, name: str, start: int, bound: int) -> None:
        self.name = name
        self.start = start
        self.bound = bound
        self.basic: _NodeBasic | None = None  # the last node_basic_info record that attached
        self.contexts: list[str] = []  # the context ids of each context_id_info record
        self.others = False  # whether a tensor_info or context_id_info record attached


class _NodeBasic(NamedTuple):
    task_type: str
    block_num: int
    mix_block_num: int


class _Track(NamedTuple):
    thread_id: int
    device_id: int
    stream_id: int
    task_id: int
    batch_id: int
    task_type: str
    kernel_name: str
    timestamp: int


_Entry = tuple[int, int, int, int, int, object]


def _chain(entries: list[_Entry]) -> list[tuple[_Track, _Node | None]]:
    """One thread's tree, built and walked in one pass: each task record and its node launch.

    The exporter builds a tree recursively (a call contains what starts inside it until
    something ends after it; an ACL call nested in another call is dropped; a record joins the
    last call of its level that contains it, else hangs in the tree on its own) and then walks
    it, taking for each runtime record the node launch on the walk's path. The open calls of the
    recursion are a stack, so the node on the path is the node on the stack when the record is
    met; the node's own records are read after the pass, as the walk reads them after the build.
    """
    entries.sort()
    root_bound = max((e[3] for e in entries), default=-1) + 1
    # The open calls, innermost last: their levels, bounds, and the node launch open at each.
    levels: list[int] = [ROOT]
    bounds: list[int] = [root_bound]
    nodes: list[Any] = [None]
    last_node: _Node | None = None
    out: list[tuple[_Track, _Node | None]] = []
    append = out.append
    payload: Any
    for timestamp, level, _seq, bound, kind, payload in entries:
        if kind != _API:
            while bound > bounds[-1]:
                del levels[-1], bounds[-1], nodes[-1]
            if kind == _TRACK:
                # No runtime-level API call exists (declined), so a runtime record always hangs
                # in the tree on its own, below the innermost open call.
                append((payload, nodes[-1]))
            elif last_node is not None and last_node.start <= timestamp <= last_node.bound:
                if kind == _BASIC:
                    last_node.basic = payload
                else:
                    last_node.others = True
                    if kind == _CONTEXT:
                        last_node.contexts.append(payload)
            # else: a node record outside every node launch hangs alone; it changes nothing here
            continue
        while True:
            parent_level = levels[-1]
            if bound > bounds[-1] or (level < parent_level and level != ACL):
                del levels[-1], bounds[-1], nodes[-1]
                continue
            break
        if level == ACL and parent_level != ROOT:
            continue  # nested ACL calls take no part in the tree
        if level == NODE and parent_level == NODE:
            raise _declined(_NESTED_NODE)
        if len(levels) > _DEPTH_LIMIT:
            raise _declined(_TOO_DEEP)
        if level == NODE:
            last_node = payload
            nodes.append(payload)
        else:
            nodes.append(nodes[-1])
        levels.append(level)
        bounds.append(bound)
    return out


class _Tables:
    """The exporter's TaskGear: host tasks and GE tasks from runtime records and their nodes."""

    def __init__(self, level0: bool) -> None:
        self.level0 = level0
        self.host_tasks: list[HostTask] = []
        self.ge_tasks: list[GeTask] = []

    def add(self, track: _Track, node: _Node | None) -> None:
        self._host_task(track, node)
        if track.task_type.startswith("KERNEL") or track.task_type in ("STARS_COMMON", "FFTS_PLUS"):
            self._kernel(track, node)

    def add_all(self, pairs: Iterable[tuple[_Track, _Node | None]]) -> None:
        """:meth:`add` of every pair, with the common case inlined: a task type without context
        ids (one host task, the invalid context) and, at level 1, a node launch with its
        node_basic_info (one GE task); anything else takes :meth:`add`'s path."""
        host_append = self.host_tasks.append
        ge_append = self.ge_tasks.append
        level0 = self.level0
        kernel_types: dict[str, bool] = {}
        for track, node in pairs:
            _thread, device, stream, task, batch, ttype, kernel_name, timestamp = track
            if ttype in CONTEXT_WHITE_LIST and (
                ttype in MIX_TASK_TYPES or (node is not None and node.contexts)
            ):
                self.add(track, node)
                continue
            host_append(
                _new(HostTask, (device, stream, task, INVALID_CONTEXT, batch, ttype, kernel_name, timestamp))
            )
            is_kernel = kernel_types.get(ttype)
            if is_kernel is None:
                is_kernel = kernel_types[ttype] = ttype.startswith("KERNEL") or ttype in (
                    "STARS_COMMON",
                    "FFTS_PLUS",
                )
            if not is_kernel:
                continue
            basic = node.basic if node is not None else None
            if (
                level0
                or basic is None
                or node.contexts  # type: ignore[union-attr]
                or not node.name  # type: ignore[union-attr]
                or node.name.startswith("Lccl")  # type: ignore[union-attr]
                or basic.task_type in ("FFTS_PLUS", "COMMUNICATION", "HCCL")
            ):
                self._kernel(track, node)
                continue
            ge_append(
                _new(
                    GeTask,
                    (
                        device,
                        stream,
                        task,
                        INVALID_CONTEXT,
                        batch,
                        node.name,  # type: ignore[union-attr]
                        basic.task_type,
                        basic.block_num,
                        basic.mix_block_num,
                    ),
                )
            )

    def _host_task(self, track: _Track, node: _Node | None) -> None:
        if track.task_type in CONTEXT_WHITE_LIST and (
            track.task_type in MIX_TASK_TYPES or (node is not None and node.contexts)
        ):
            # The node's context ids (one comma-joined string per record), then the defaults;
            # duplicates dropped, then the joined string split again.
            ids = [*(node.contexts if node is not None else []), str(INVALID_CONTEXT)]
            if track.task_type in MIX_TASK_TYPES:
                ids.append("0")
            joined = ",".join(dict.fromkeys(ids))
        else:
            joined = str(INVALID_CONTEXT)
        for context in joined.split(","):
            self.host_tasks.append(
                HostTask(
                    track.device_id,
                    track.stream_id,
                    track.task_id,
                    int(context),
                    track.batch_id,
                    track.task_type,
                    track.kernel_name,
                    track.timestamp,
                )
            )

    def _kernel(self, track: _Track, node: _Node | None) -> None:
        item = node.name if node is not None else ""
        if not item:
            self._kernel_without_node(track)
            return
        if item.startswith("Lccl"):
            return
        if self.level0:
            self._ge(track, item, NA, 0, 0)
            return
        if node is not None and node.contexts:
            raise _declined(_CONTEXTS_AT_LEVEL1, item)
        basic = node.basic if node is not None else None
        if basic is None:
            if node is not None and node.others:
                # A node with tensor records only takes the exporter's level-0 path at level 1.
                raise _declined(_NO_BASIC_AT_LEVEL1, item)
            return  # the exporter writes no GE row for it ("can't find node desc")
        if basic.task_type == "FFTS_PLUS":
            return
        if basic.task_type in ("COMMUNICATION", "HCCL"):
            raise _declined(_HCCL_NODE, item)
        self._ge(track, item, basic.task_type, basic.block_num, basic.mix_block_num)

    def _kernel_without_node(self, track: _Track) -> None:
        if track.kernel_name == NA:
            return
        if not self.level0:
            raise _declined(_OUTSIDE_NODE, track.kernel_name)
        self._ge(track, track.kernel_name, NA, 0, 0)

    def _ge(self, track: _Track, name: str, ttype: str, block: int, mix: int) -> None:
        self.ge_tasks.append(
            GeTask(
                track.device_id,
                track.stream_id,
                track.task_id,
                INVALID_CONTEXT,
                track.batch_id,
                name,
                ttype,
                block,
                mix,
            )
        )


# -- building the queues ------------------------------------------------------------------------


class HostRecords:
    """The decoded host files of a run, ready for :func:`host_tables`.

    :meth:`take` of an api_event, task_track or node_basic_info file decodes it, or, where the
    C loops will read it and its decoder would decline nothing, keeps its bytes for them to read
    in place (``in_place``; :meth:`decode_in_place` turns them into records for the pure loops).
    """

    def __init__(self, hashes: dict[str, str], types: dict[str, dict[str, str]]) -> None:
        self.hashes = hashes
        self.types = types
        self.apis: list[ApiRecord] = []
        self.node_basics: list[NodeBasicRecord] = []
        self.tensors: list[HeaderRecord] = []
        self.contexts: list[ContextRecord] = []
        self.tracks: list[TaskTrackRecord] = []
        self.in_place: dict[str, RawData] = {}  # "apis", "tracks", "node_basics": raw file bytes

    def take(self, kind: str, data: RawData) -> None:
        """The records of *kind* (``apis``, ``tracks`` or ``node_basics``) from their file's bytes;
        raises what their decoder raises."""
        decode, size = _IN_PLACE[kind]
        if _C is not None and accelerated_default() and _C[1](data, size, kind == "apis"):
            self.in_place[kind] = data
        else:
            setattr(self, kind, decode(data))

    def has(self, kind: str) -> bool:
        """Whether there is a record of *kind* (without decoding one)."""
        data = self.in_place.get(kind)
        if data is None:
            return bool(getattr(self, kind))
        return api_starts(data) if kind == "apis" else len(data) >= HOST_COMPACT_SIZE

    def decode_in_place(self) -> None:
        for kind, data in self.in_place.items():
            setattr(self, kind, _IN_PLACE[kind][0](data))
        self.in_place.clear()

    def type_name(self, level: int, number: int) -> str:
        return self.types.get(LEVELS[level], {}).get(str(number), str(number))

    def name(self, value: int) -> str:
        return self.hashes.get(str(value), str(value))


#: Per kind of records :meth:`HostRecords.take` may keep in place: its decoder and record size.
_IN_PLACE: Final[dict[str, tuple[Callable[[RawData], list[Any]], int]]] = {
    "apis": (api_records, API_EVENT_SIZE),
    "tracks": (task_track_records, HOST_COMPACT_SIZE),
    "node_basics": (node_basic_records, HOST_COMPACT_SIZE),
}


def _api_struct_type(records: HostRecords, api_level: int, struct_type: int) -> str:
    level = LEVELS[api_level]
    if level not in records.types:
        return str(struct_type)
    if level == "acl":
        group = struct_type >> 16
        if group not in ACL_API_GROUPS:
            # The exporter fails on it and then loses every API record of the run.
            raise DeclinedError(DeclineReason.UNKNOWN_RECORD, f"ACL API group {group} in api_event")
        return f"acl-{group}"
    return records.type_name(api_level, struct_type)


def _api_level(records: HostRecords, api_level: int, struct_type: int) -> int:
    """The queue level of an api_event call of this level and type: ACL or NODE, or _SKIPPED
    (StreamSyncTaskFinish) or _OTHER_LEVEL (declined once such a call is not skipped)."""
    if _api_struct_type(records, api_level, struct_type) == "StreamSyncTaskFinish":
        return _SKIPPED
    found = LEVEL_OF.get(LEVELS[api_level])
    return found if found in (ACL, NODE) else _OTHER_LEVEL


def _node_basic(ge_type: int, block: int) -> _NodeBasic:
    """A node_basic_info record's payload: GE task type and block dims (of its block word)."""
    return _NodeBasic(
        GE_TASK_TYPES.get(ge_type, str(ge_type)), block & 0xFFFF, (block & 0xFFFF) * (block >> 16)
    )


def _tracks(records: HostRecords, all_export: bool) -> list[_Track]:
    """Runtime tasks in the order the exporter stores them, flips applied (batch ids)."""
    kept: list[_Track] = []
    append = kept.append
    flips: list[TaskTrackRecord] = []
    names: dict[int, str] = {}
    hashes = records.hashes
    kernel_names: dict[int, str] = {}
    batched = False  # whether a kept record has a batch id other than 0
    runtime = 5000  # the runtime level: task_track records of any other level are declined
    for rec in records.tracks:
        level, _stype, thread, timestamp, dev_type, device, stream, task, batch, ttype_id, kernel = rec
        if level != runtime:
            _require_level(level, "runtime", "task_track")
        ttype = names.get(ttype_id)
        if ttype is None:
            ttype = names[ttype_id] = records.type_name(level, ttype_id)
        if ttype == FLIP_TASK:
            flips.append(rec)
        elif ttype != MAINTENANCE:
            if dev_type != 0:
                raise _declined(_DPU)
            name = kernel_names.get(kernel)
            if name is None:
                name = kernel_names[kernel] = hashes.get(str(kernel), NA)
            batched = batched or batch != 0
            # Batch id 0: what is accepted has no task-id wrap (declined below).
            append(_new(_Track, (thread, device, stream, task, 0, ttype, name, timestamp)))
    if not all_export:
        if batched:
            raise _declined(_BATCHED)
        return kept
    # The exporter groups tasks by (device, stream), sorts each group by time and counts task
    # id flips into batch ids; a task after a flip of its stream gets batch id 1 or more.
    groups: dict[tuple[int, int], list[_Track]] = {}
    for track in kept:
        key = (track[1], track[2])
        group = groups.get(key)
        if group is None:
            groups[key] = [track]
        else:
            group.append(track)
    first_flip: dict[tuple[int, int], int] = {}
    for flip in flips:
        key = (flip.device_id, flip.stream_id)
        first_flip[key] = min(first_flip.get(key, flip.timestamp), flip.timestamp)
    ordered: list[_Track] = []
    by_time = itemgetter(7)
    for key, group in groups.items():
        group.sort(key=by_time)
        limit = first_flip.get(key)
        if limit is not None and group[-1].timestamp >= limit:
            raise _declined(_WRAPPED, key[1])
        ordered.extend(group)
    return ordered


def host_tables(
    records: HostRecords,
    *,
    level0: bool,
    all_export: bool,
    accelerated: bool | None = None,
    host_tasks: bool = True,
) -> HostTables:
    """The host tasks and GE tasks of a run (every device).

    *accelerated*: whether to use the C loops (None: :func:`accelerated_default`); they give the
    pure loops' tables and errors, and leave records the decoders would not make to them.
    *host_tasks*: ``False`` lets the C loops make no host task (``HostTables.with_host_tasks``):
    only the GE tasks, where nothing but op_summary's rows is read; they still check that no
    two host tasks have the same ids (else the pure loops make every one, and the caller
    declines the run as it would).
    """
    if accelerated is None:
        accelerated = accelerated_default()
    if accelerated:
        if _C_HOST_TABLES is None:
            raise RuntimeError(
                "asc_aprof._plans._raw._chost is not built: only the pure-Python host loops are available"
            )
        # The files read in place are handed over in a list the C loops empty once they have
        # read every record: their memory goes before the tables are made.
        in_place = records.in_place
        taken = [kind for kind in _IN_PLACE_KINDS if kind in in_place]
        let_go = [in_place.pop(kind) if kind in taken else getattr(records, kind) for kind in _IN_PLACE_KINDS]
        lookups = _c_lookups(records)
        found = _C_HOST_TABLES(
            None, None, records.tensors, None, level0, all_export, lookups, not host_tasks, let_go
        )
        if found is not None:
            return HostTables(found[0], found[1], host_tasks)
        if taken and not let_go:
            # let go of, then two host tasks with the same ids (or ids beyond the packed check's
            # ranges): the pure loops need the files again
            raise WholeDecodeNeeded("the host files were let go of before the C loops' last check")
        if let_go:  # (not read yet: back where they were)
            in_place.update((kind, let_go[_IN_PLACE_KINDS.index(kind)]) for kind in taken)
    return _host_tables_py(records, level0=level0, all_export=all_export)


#: The host files the C loops may read in place (HostRecords.in_place keys; its attribute names).
_IN_PLACE_KINDS: Final = ("apis", "node_basics", "tracks")


def _host_tables_py(records: HostRecords, *, level0: bool, all_export: bool) -> HostTables:
    """:func:`host_tables` in Python: the reference of the C loops, and their fallback."""
    records.decode_in_place()
    threads: dict[int, list[_Entry]] = {}
    seq = 0
    # Queue order as the exporter adds them: API calls, then node_basic_info, tensor_info and
    # task_track records (ties in time and level keep this order).
    # Per (level, struct type): the entry level, or _SKIPPED (StreamSyncTaskFinish) or
    # _OTHER_LEVEL (declined once such a call is not skipped).
    api_levels: dict[tuple[int, int], int] = {}
    node_names: dict[int, str] = {}
    for api in records.apis:
        api_level, stype, thread, start, end, item = api
        level = api_levels.get((api_level, stype))
        if level is None:
            level = api_levels[api_level, stype] = _api_level(records, api_level, stype)
        if level == _SKIPPED or start <= 0 or start == end:
            continue
        if level == _OTHER_LEVEL:
            raise _declined(_OTHER_API_LEVEL, api_level)
        if level == NODE:
            name = node_names.get(item)
            if name is None:
                name = node_names[item] = records.name(item)
            node: _Node | None = _Node(name, start, end)
        else:
            node = None
        entries = threads.get(thread)
        if entries is None:
            entries = threads[thread] = []
        entries.append((start, level, seq, end, _API, node))
        seq += 1
    basics: dict[tuple[int, int], _NodeBasic] = {}  # one payload per (GE type, block word)
    for basic in records.node_basics:
        basic_level, _stype, thread, timestamp, _node_hash, ge_type, _op_type, block, _flag = basic
        if basic_level != 10000:
            _require_level(basic_level, "node", "node_basic_info")
        payload = basics.get((ge_type, block))
        if payload is None:
            payload = basics[ge_type, block] = _node_basic(ge_type, block)
        entries = threads.get(thread)
        if entries is None:
            entries = threads[thread] = []
        entries.append((timestamp, NODE, seq, timestamp, _BASIC, payload))
        seq += 1
    for tensor in records.tensors:
        _require_level(tensor.level, "node", "tensor_info")
        threads.setdefault(tensor.thread_id, []).append(
            (tensor.timestamp, NODE, seq, tensor.timestamp, _TENSOR, None)
        )
        seq += 1
    for track in _tracks(records, all_export):
        thread, timestamp = track[0], track[7]
        entries = threads.get(thread)
        if entries is None:
            entries = threads[thread] = []
        entries.append((timestamp, TASK, seq, timestamp, _TRACK, track))
        seq += 1
    tables = _Tables(level0)
    for entries in threads.values():
        tables.add_all(_chain(entries))
    return HostTables(tables.host_tasks, tables.ge_tasks)


# -- the C loops' lookups -----------------------------------------------------------------------

_REQUIRED: Final = (("node", "node_basic_info"), ("node", "tensor_info"), ("runtime", "task_track"))


def _c_lookups(records: HostRecords) -> tuple[object, ...]:
    """What ``_chost.host_tables`` asks Python, once per distinct key: the same lookups and the
    same tests of their results as the pure loops make (see ``_chost.c`` for the order)."""

    def api_level(level: int, struct_type: int) -> int:
        return _api_level(records, level, struct_type)

    def node_name(item: int) -> tuple[str, int]:
        name = records.name(item)
        return name, (not name) | name.startswith("Lccl") << 1

    def basic(ge_type: int, block: int) -> tuple[_NodeBasic, int]:
        payload = _node_basic(ge_type, block)
        ttype = payload.task_type
        return payload, 1 if ttype == "FFTS_PLUS" else 2 if ttype in ("COMMUNICATION", "HCCL") else 0

    def track_type(level: int, number: int) -> tuple[str, int]:
        ttype = records.type_name(level, number)
        kernel = ttype.startswith("KERNEL") or ttype in ("STARS_COMMON", "FFTS_PLUS")
        return ttype, (
            (ttype == FLIP_TASK)
            | (ttype == MAINTENANCE) << 1
            | (ttype in CONTEXT_WHITE_LIST) << 2
            | (ttype in MIX_TASK_TYPES) << 3
            | kernel << 4
        )

    def kernel_name(kernel: int) -> tuple[str, bool]:
        name = records.hashes.get(str(kernel), NA)
        return name, name == NA

    def require(kind: int, level: int) -> None:
        _require_level(level, *_REQUIRED[kind])

    return (
        api_level,
        node_name,
        basic,
        track_type,
        kernel_name,
        require,
        _fail,
        NA,
        INVALID_CONTEXT,
        HostTask,
        GeTask,
    )


def _require_level(level: int, name: str, what: str) -> None:
    if LEVELS[level] != name:
        raise DeclinedError(DeclineReason.UNKNOWN_RECORD, f"{what} record at level {LEVELS[level]!r}")


def host_tasks_of(tables: HostTables, device: int) -> Sequence[HostTask]:
    return [t for t in tables.host_tasks if t.device_id == device]
