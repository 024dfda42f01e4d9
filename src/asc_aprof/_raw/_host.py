"""The host side of a run: which kernel each runtime task belongs to (sans-IO).

The exporter files every host record of a thread into one time-ordered queue (API calls with a
start and an end; ``node_basic_info`` / ``tensor_info`` / ``task_track`` records with one
timestamp), builds a call tree from it (an API call contains what starts inside it; a record
belongs to the last call of its level that contains it, else it hangs in the tree on its own),
and walks the tree: every ``task_track`` record becomes a *host task* (stream, task, batch and
context ids, runtime type, kernel name), and a kernel's record also a *GE task* (op name, GE
task type, block dims) taken from the enclosing node launch. This module does that walk for the
levels real runs use (ACL calls, node launches and runtime tasks) and declines anything else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Final

from . import _decode as d
from ._types import DeclinedError, DeclineReason

ROOT, ACL, MODEL, NODE, HCCL, TASK = 0, 1, 2, 3, 4, 5
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


@dataclasses.dataclass(frozen=True, slots=True)
class HostTask:
    """A runtime task as the host saw it (one per context id)."""

    device_id: int
    stream_id: int
    task_id: int
    context_id: int
    batch_id: int
    task_type: str
    kernel_name: str
    timestamp: int


@dataclasses.dataclass(frozen=True, slots=True)
class GeTask:
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
    host_tasks: tuple[HostTask, ...]
    ge_tasks: tuple[GeTask, ...]


# -- the event tree ---------------------------------------------------------------------------


class _Event:
    __slots__ = ("api", "bound", "children", "level", "records", "seq", "timestamp")

    def __init__(self, level: int, timestamp: int, bound: int, api: _Api | None, seq: int) -> None:
        self.level = level
        self.timestamp = timestamp
        self.bound = bound
        self.api = api  # None for a record's own event or an empty node
        self.records: list[object] = []
        self.children: list[_Event] = []
        self.seq = seq

    @property
    def additional(self) -> bool:
        return self.timestamp == self.bound


@dataclasses.dataclass(frozen=True, slots=True)
class _Api:
    level: int
    item_id: str  # the op name (hash resolved) of a node launch


@dataclasses.dataclass(frozen=True, slots=True)
class _NodeBasic:
    task_type: str
    block_num: int
    mix_block_num: int


@dataclasses.dataclass(frozen=True, slots=True)
class _Tensor:
    pass


@dataclasses.dataclass(frozen=True, slots=True)
class _Track:
    thread_id: int
    device_id: int
    stream_id: int
    task_id: int
    batch_id: int
    task_type: str
    kernel_name: str
    timestamp: int


_INVALID: Final = _Event(-1, -1, -1, None, -1)
#: Deepest recursion the exporter allows while building or walking a tree.
_DEPTH_LIMIT: Final = 20


class _Chain:
    """One thread's queue, tree and walk (the exporter's analysis chain)."""

    def __init__(self, events: list[_Event], level0: bool) -> None:
        # Python's sort is stable: equal (timestamp, level) keep the order records were added in.
        self.queue = sorted(events, key=lambda e: (e.timestamp, e.level))
        self.index = 0
        self.level0 = level0
        self.last: dict[int, _Event] = {}
        self.host_tasks: list[HostTask] = []
        self.ge_tasks: list[GeTask] = []
        self._seq = -2

    def run(self) -> None:
        bound = max((e.bound for e in self.queue), default=-1)
        root = _Event(ROOT, 0, bound + 1, None, -1)
        self._build(root, 0)
        if self.index != len(self.queue):
            raise DeclinedError(DeclineReason.UNSUPPORTED, "host records outside every call tree")
        stack: dict[int, _Event] = {}
        self._walk(root, stack, 0)

    def _empty(self, level: int) -> _Event:
        self._seq -= 1
        return _Event(level, -1, -1, None, self._seq)

    def _build(self, parent: _Event, depth: int) -> None:
        if depth > _DEPTH_LIMIT:
            raise DeclinedError(DeclineReason.UNSUPPORTED, "host calls nested deeper than the exporter follows")
        depth += 1
        queue = self.queue
        while self.index < len(queue):
            event = queue[self.index]
            if event.bound > parent.bound:
                return
            if event.level == ACL and parent.level != ROOT:
                self.index += 1  # nested ACL calls take no part in the tree
                continue
            if not event.additional and event.level < parent.level:
                return
            self.index += 1
            if event.additional:
                last = self.last.get(event.level, _INVALID)
                if last.timestamp <= event.timestamp <= last.bound:
                    last.records.extend(event.records)
                else:
                    empty = self._empty(event.level)
                    empty.records.extend(event.records)
                    parent.children.append(empty)
                continue
            self.last[event.level] = event
            self._build(event, depth)
            if event.level == NODE and parent.level == NODE:
                raise DeclinedError(DeclineReason.UNSUPPORTED, "a node launch inside another (HCCL AI CPU launch)")
            parent.children.append(event)

    def _walk(self, event: _Event, stack: dict[int, _Event], depth: int) -> None:
        if depth > _DEPTH_LIMIT:
            raise DeclinedError(DeclineReason.UNSUPPORTED, "host calls nested deeper than the exporter follows")
        if event.level == TASK:
            self._task(event, stack)
        stack[event.level] = event
        for child in event.children:
            self._walk(child, stack, depth + 1)
        stack[event.level] = _INVALID

    # -- the task level (the exporter's TaskGear) -------------------------------------------------
    def _task(self, event: _Event, stack: dict[int, _Event]) -> None:
        node = stack.get(NODE, _INVALID)
        for record in event.records:
            if not isinstance(record, _Track):
                continue
            self._host_task(record, node)
            if record.task_type.startswith("KERNEL") or record.task_type in ("STARS_COMMON", "FFTS_PLUS"):
                self._kernel(record, node)

    def _host_task(self, track: _Track, node: _Event) -> None:
        if track.task_type in CONTEXT_WHITE_LIST:
            ids = [str(INVALID_CONTEXT), *(["0"] if track.task_type in MIX_TASK_TYPES else [])]
            contexts = list(dict.fromkeys(ids))
        else:
            contexts = [str(INVALID_CONTEXT)]
        for context in contexts:
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

    def _kernel(self, track: _Track, node: _Event) -> None:
        item = node.api.item_id if node.api is not None else ""
        if not item:
            self._kernel_without_node(track)
            return
        if item.startswith("Lccl"):
            return
        if self.level0:
            self._ge(track, item, NA, 0, 0, INVALID_CONTEXT)
            return
        basics = [r for r in node.records if isinstance(r, _NodeBasic)]
        if not basics:
            if node.records:
                # A node with tensor records only takes the exporter's level-0 path at level 1.
                raise DeclinedError(
                    DeclineReason.UNSUPPORTED, f"node launch {item!r} has no node_basic_info at task time level 1"
                )
            return  # the exporter writes no GE row for it ("can't find node desc")
        basic = basics[-1]  # one description per node launch: the last record wins
        if basic.task_type == "FFTS_PLUS":
            return
        if basic.task_type in ("COMMUNICATION", "HCCL"):
            raise DeclinedError(DeclineReason.UNSUPPORTED, f"HCCL node {item!r}")
        self._ge(track, item, basic.task_type, basic.block_num, basic.mix_block_num, INVALID_CONTEXT)

    def _kernel_without_node(self, track: _Track) -> None:
        if track.kernel_name == NA:
            return
        if not self.level0:
            raise DeclinedError(
                DeclineReason.UNSUPPORTED,
                f"kernel {track.kernel_name!r} launched outside a node launch at task time level 1",
            )
        self._ge(track, track.kernel_name, NA, 0, 0, INVALID_CONTEXT)

    def _ge(self, track: _Track, name: str, ttype: str, block: int, mix: int, context: int) -> None:
        self.ge_tasks.append(
            GeTask(track.device_id, track.stream_id, track.task_id, context, track.batch_id, name, ttype, block, mix)
        )


# -- building the queues ------------------------------------------------------------------------


class HostRecords:
    """The decoded host files of a run, ready for :func:`host_tables`."""

    def __init__(self, hashes: dict[str, str], types: dict[str, dict[str, str]]) -> None:
        self.hashes = hashes
        self.types = types
        self.apis: list[d.ApiRecord] = []
        self.node_basics: list[d.NodeBasicRecord] = []
        self.tensors: list[d.HeaderRecord] = []
        self.tracks: list[d.TaskTrackRecord] = []

    def type_name(self, level: int, number: int) -> str:
        return self.types.get(d.LEVELS[level], {}).get(str(number), str(number))

    def name(self, value: int) -> str:
        return self.hashes.get(str(value), str(value))


def _api_struct_type(records: HostRecords, api: d.ApiRecord) -> str:
    level = d.LEVELS[api.level]
    if level not in records.types:
        return str(api.struct_type)
    if level == "acl":
        group = api.struct_type >> 16
        if group not in d.ACL_API_GROUPS:
            # The exporter fails on it and then loses every API record of the run.
            raise DeclinedError(DeclineReason.UNKNOWN_RECORD, f"ACL API group {group} in api_event")
        return f"acl-{group}"
    return records.type_name(api.level, api.struct_type)


def _tracks(records: HostRecords, all_export: bool) -> list[_Track]:
    """Runtime tasks in the order the exporter stores them, flips applied (batch ids)."""
    kept: list[d.TaskTrackRecord] = []
    flips: list[d.TaskTrackRecord] = []
    for rec in records.tracks:
        _require_level(rec.level, "runtime", "task_track")
        ttype = records.type_name(rec.level, rec.task_type)
        if ttype == FLIP_TASK:
            flips.append(rec)
        elif ttype != MAINTENANCE:
            if rec.dev_type != 0:
                raise DeclinedError(DeclineReason.UNSUPPORTED, "DPU task_track records")
            kept.append(rec)
    if all_export:
        # The exporter groups tasks by (device, stream), sorts each group by time and counts task
        # id flips into batch ids; a task after a flip of its stream gets batch id 1 or more.
        groups: dict[tuple[int, int], list[d.TaskTrackRecord]] = {}
        for rec in kept:
            groups.setdefault((rec.device_id, rec.stream_id), []).append(rec)
        first_flip: dict[tuple[int, int], int] = {}
        for flip in flips:
            key = (flip.device_id, flip.stream_id)
            first_flip[key] = min(first_flip.get(key, flip.timestamp), flip.timestamp)
        ordered: list[d.TaskTrackRecord] = []
        for key, group in groups.items():
            group.sort(key=lambda r: r.timestamp)
            limit = first_flip.get(key)
            if limit is not None and group[-1].timestamp >= limit:
                raise DeclinedError(
                    DeclineReason.UNSUPPORTED,
                    f"task ids of stream {key[1]} wrapped around (batch ids after a flip are not verified)",
                )
            ordered.extend(group)
        batch_of = 0
        kept = ordered
    else:
        if any(rec.batch_id for rec in kept):
            raise DeclinedError(DeclineReason.UNSUPPORTED, "task_track batch ids other than 0")
        batch_of = 0
    return [
        _Track(
            rec.thread_id,
            rec.device_id,
            rec.stream_id,
            rec.task_id,
            batch_of,
            records.type_name(rec.level, rec.task_type),
            records.hashes.get(str(rec.kernel_hash), NA),
            rec.timestamp,
        )
        for rec in kept
    ]


def host_tables(records: HostRecords, *, level0: bool, all_export: bool) -> HostTables:
    """The host tasks and GE tasks of a run (every device)."""
    threads: dict[int, list[_Event]] = {}
    seq = 0

    def add(thread: int, event: _Event) -> None:
        threads.setdefault(thread, []).append(event)

    # Queue order as the exporter adds them: API calls, then node_basic_info, tensor_info and
    # task_track records (ties in time and level keep this order).
    for api in records.apis:
        struct_type = _api_struct_type(records, api)
        if struct_type == "StreamSyncTaskFinish" or api.start <= 0 or api.start == api.end:
            continue
        level_name = d.LEVELS[api.level]
        level = LEVEL_OF.get(level_name)
        if level not in (ACL, NODE):
            raise DeclinedError(
                DeclineReason.UNKNOWN_RECORD, f"api_event call at level {level_name!r} (only ACL and node are known)"
            )
        add(api.thread_id, _Event(level, api.start, api.end, _Api(level, records.name(api.item_id)), seq))
        seq += 1
    for basic in records.node_basics:
        _require_level(basic.level, "node", "node_basic_info")
        ttype = d.GE_TASK_TYPES.get(basic.task_type, str(basic.task_type))
        event = _Event(NODE, basic.timestamp, basic.timestamp, None, seq)
        event.records.append(_NodeBasic(ttype, basic.block_num, basic.mix_block_num))
        add(basic.thread_id, event)
        seq += 1
    for tensor in records.tensors:
        _require_level(tensor.level, "node", "tensor_info")
        event = _Event(NODE, tensor.timestamp, tensor.timestamp, None, seq)
        event.records.append(_Tensor())
        add(tensor.thread_id, event)
        seq += 1
    for track in _tracks(records, all_export):
        event = _Event(TASK, track.timestamp, track.timestamp, None, seq)
        event.records.append(track)
        add(track.thread_id, event)
        seq += 1
    host_tasks: list[HostTask] = []
    ge_tasks: list[GeTask] = []
    for events in threads.values():
        chain = _Chain(events, level0)
        chain.run()
        host_tasks.extend(chain.host_tasks)
        ge_tasks.extend(chain.ge_tasks)
    return HostTables(tuple(host_tasks), tuple(ge_tasks))


def _require_level(level: int, name: str, what: str) -> None:
    if d.LEVELS[level] != name:
        raise DeclinedError(DeclineReason.UNKNOWN_RECORD, f"{what} record at level {d.LEVELS[level]!r}")


def host_tasks_of(tables: HostTables, device: int) -> Sequence[HostTask]:
    return [t for t in tables.host_tasks if t.device_id == device]
