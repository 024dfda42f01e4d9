"""The history store: per-kernel figures of many runs over time, in SQLite or PostgreSQL.

Theory of operation. A *record* is what one ``history record`` (or :meth:`HistoryStore.add`) stores:
the environment it was made in (time, host, CANN and asc-aprof versions, the git commit, branch and
dirty flag of the working directory) and one :class:`KernelEntry` per (chip, task type, kernel).
Each record goes in as **one transaction**: a reader sees all of a record or none of it, and a
writer killed mid-record leaves the store as it was (SQLite rolls the journal back when next
opened; PostgreSQL aborts the transaction with the connection).

Several writers at once (CI jobs recording into one store) are expected. SQLite runs in WAL mode
with a busy timeout, and each record takes the write lock at its start (``BEGIN IMMEDIATE``), so a
writer waits for another's record instead of failing half-way; PostgreSQL serialises only the
schema migration (a transaction-scoped advisory lock). The schema carries its version
(``aprof_schema``); :data:`MIGRATIONS` brings an older store forward when it is opened, and a store
written by a newer asc-aprof is refused rather than guessed at.

The store file is never opened through a symbolic link (nor are its ``-wal`` / ``-shm`` companions).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import json
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from .._model._errors import AprofError

#: Environment variable naming the store (a path or a ``postgresql://`` URL).
HISTORY_ENV: Final = "ASC_APROF_HISTORY"
#: How long a writer waits for another's record before giving up (seconds).
BUSY_TIMEOUT: Final = 60.0

#: The schema, one entry per version: statements in the SQLite dialect, with ``{id}`` (the key
#: column), ``{float}`` and ``{bigint}`` for what the two databases spell differently.
MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    (  # 1: records and their kernels
        "CREATE TABLE records ("
        " id {id}, recorded_at TEXT NOT NULL, label TEXT, source TEXT NOT NULL,"
        " cann_version TEXT, aprof_version TEXT NOT NULL, host TEXT NOT NULL,"
        " git_commit TEXT, git_branch TEXT, git_dirty INTEGER)",
        "CREATE TABLE kernels ("
        " record_id {bigint} NOT NULL REFERENCES records (id), chip TEXT NOT NULL,"
        " task_type TEXT NOT NULL, kernel TEXT NOT NULL, count INTEGER NOT NULL,"
        " median_us {float} NOT NULL, ci_low_us {float} NOT NULL, ci_high_us {float} NOT NULL,"
        " p10_us {float} NOT NULL, p90_us {float} NOT NULL, aic_mhz {float}, counters TEXT NOT NULL)",
    ),
    (  # 2: the gate and `show --kernel` look kernels up by their key
        "CREATE INDEX kernels_by_key ON kernels (chip, task_type, kernel, record_id)",
    ),
)
SCHEMA_VERSION: Final = len(MIGRATIONS)

_SQLITE_TYPES: Final = {"id": "INTEGER PRIMARY KEY AUTOINCREMENT", "float": "REAL", "bigint": "INTEGER"}
_POSTGRES_TYPES: Final = {"id": "BIGSERIAL PRIMARY KEY", "float": "DOUBLE PRECISION", "bigint": "BIGINT"}
#: any constant: the advisory lock's key that serialises migrations on PostgreSQL
_MIGRATION_LOCK: Final = 0x61707266


class HistoryError(AprofError):
    """The history store cannot be opened or used (the message names it and the fix)."""


@dataclasses.dataclass(frozen=True, slots=True)
class GitState:
    """The git checkout a record was made in."""

    commit: str
    branch: str | None  # None: a detached HEAD
    dirty: bool


@dataclasses.dataclass(frozen=True, slots=True)
class Environment:
    """Where and when a record was made."""

    recorded_at: _dt.datetime  # aware, UTC
    host: str
    aprof_version: str
    cann_version: str | None = None
    git: GitState | None = None  # None: not made in a git checkout


@dataclasses.dataclass(frozen=True, slots=True)
class KernelEntry:
    """One kernel's figures in one record (times in µs).

    :ivar chip: e.g. ``Ascend 910B`` (``unknown chip`` where the run does not say)
    :ivar task_type: the task type the kernel ran as (``AI_CORE``, ``AI_VECTOR_CORE``, ...)
    :ivar ci_low_us: low end of the median's 95% distribution-free interval
    :ivar counters: PMU counter medians (empty when none were read)
    :ivar aic_mhz: the AI Core clock its tasks ran at (median, MHz), None where unknown
    """

    chip: str
    task_type: str
    kernel: str
    count: int
    median_us: float
    ci_low_us: float
    ci_high_us: float
    p10_us: float
    p90_us: float
    counters: Mapping[str, float | None] = dataclasses.field(default_factory=dict)
    aic_mhz: float | None = None

    @property
    def key(self) -> str:
        """``chip / task type / kernel``: how the store, ``show`` and ``gate`` name a kernel."""
        return f"{self.chip} / {self.task_type} / {self.kernel}"


@dataclasses.dataclass(frozen=True, slots=True)
class HistoryRecord:
    """What one ``history record`` stores: its *source* (the runs or report it came from)."""

    source: str
    environment: Environment
    kernels: tuple[KernelEntry, ...]
    label: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class StoredKernel:
    """A kernel entry as read back, with its record's id and environment."""

    record_id: int
    label: str | None
    source: str
    environment: Environment
    entry: KernelEntry

    def to_dict(self) -> dict[str, Any]:
        env = self.environment
        return {
            "record_id": self.record_id,
            "recorded_at": env.recorded_at.isoformat(),
            "label": self.label,
            "source": self.source,
            "host": env.host,
            "aprof_version": env.aprof_version,
            "cann_version": env.cann_version,
            "git_commit": env.git.commit if env.git else None,
            "git_branch": env.git.branch if env.git else None,
            "git_dirty": env.git.dirty if env.git else None,
            "kernel": self.entry.key,
            **{f.name: getattr(self.entry, f.name) for f in dataclasses.fields(self.entry)},
            "counters": dict(self.entry.counters),
        }


def default_location() -> str:
    """``ASC_APROF_HISTORY``, else ``$XDG_DATA_HOME/asc-aprof/history.sqlite3`` (XDG_DATA_HOME
    defaulting to ``~/.local/share``)."""
    given = os.environ.get(HISTORY_ENV)
    if given:
        return given
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(base) / "asc-aprof" / "history.sqlite3")


def is_postgres(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://"))


def _check_not_linked(path: Path) -> None:
    for candidate in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
        if candidate.is_symlink():
            raise HistoryError(
                f"{candidate}: the history store is a symbolic link, which asc-aprof never writes "
                "through; give the real file's path (--db, or ASC_APROF_HISTORY)"
            )


class HistoryStore:
    """A history store (SQLite file or PostgreSQL URL), opened and brought to the current schema.

    ``HistoryStore(None)`` opens :func:`default_location` (its folder made where missing). Use as a
    context manager, or call :meth:`close`.
    """

    def __init__(
        self, location: str | os.PathLike[str] | None = None, *, timeout: float = BUSY_TIMEOUT
    ) -> None:
        given = location is not None
        self.location = str(location) if location is not None else default_location()
        self._postgres = is_postgres(self.location)
        self._conn: Any  # sqlite3.Connection or psycopg.Connection: one per store, one thread at a time
        if self._postgres:
            self._conn = _connect_postgres(self.location)
        else:
            path = Path(self.location).expanduser()
            _check_not_linked(path)
            if not path.parent.is_dir():
                if given and os.environ.get(HISTORY_ENV) != self.location:
                    raise HistoryError(
                        f"{path}: its folder {path.parent} does not exist; create it, or give another --db"
                    )
                path.parent.mkdir(parents=True, exist_ok=True)
            if path.is_dir():
                raise HistoryError(f"{path}: is a folder; give a file path for the history store (--db)")
            self.location = str(path)
            try:
                conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")
                conn.execute("PRAGMA foreign_keys=ON")
            except sqlite3.DatabaseError as exc:
                raise HistoryError(f"{path}: not a history store ({exc}); give another --db") from None
            self._conn = conn
        try:
            self._migrate()
        except BaseException:
            self.close()
            raise

    # -- lifetime
    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"HistoryStore({self.location!r})"

    # -- SQL in either dialect
    def _sql(self, statement: str) -> str:
        types = _POSTGRES_TYPES if self._postgres else _SQLITE_TYPES
        statement = statement.format(**types)
        return statement.replace("?", "%s") if self._postgres else statement

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Any]:
        """One write transaction, holding the write lock from its start; rolled back on error."""
        conn = self._conn
        if conn is None:
            raise HistoryError(f"{self.location}: the history store is closed")
        if self._postgres:
            with conn.transaction():
                yield conn.cursor()
            return
        cursor = conn.cursor()
        try:
            cursor.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise HistoryError(
                f"{self.location}: could not take the store's write lock ({exc}); another writer held it "
                f"for over {BUSY_TIMEOUT:.0f} s"
            ) from None
        try:
            yield cursor
        except BaseException:
            cursor.execute("ROLLBACK")
            raise
        cursor.execute("COMMIT")

    def _version(self, cursor: Any) -> int:
        cursor.execute(self._sql("CREATE TABLE IF NOT EXISTS aprof_schema (version INTEGER NOT NULL)"))
        cursor.execute("SELECT version FROM aprof_schema")
        row = cursor.fetchone()
        return int(row[0]) if row is not None else 0

    def _migrate(self) -> None:
        with self._transaction() as cursor:
            if self._postgres:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            version = self._version(cursor)
            if version > SCHEMA_VERSION:
                raise HistoryError(
                    f"{self.location}: the store has schema version {version}, written by a newer "
                    f"asc-aprof (this one knows up to {SCHEMA_VERSION}); upgrade asc-aprof to use it"
                )
            for statements in MIGRATIONS[version:]:
                for statement in statements:
                    cursor.execute(self._sql(statement))
            if version == 0:
                cursor.execute(self._sql("INSERT INTO aprof_schema (version) VALUES (?)"), (SCHEMA_VERSION,))
            elif version < SCHEMA_VERSION:
                cursor.execute(self._sql("UPDATE aprof_schema SET version = ?"), (SCHEMA_VERSION,))

    @property
    def schema_version(self) -> int:
        cursor = self._conn.cursor()
        cursor.execute("SELECT version FROM aprof_schema")
        row = cursor.fetchone()
        return int(row[0]) if row is not None else 0

    # -- writing and reading
    def add(self, record: HistoryRecord) -> int:
        """Store *record* in one transaction; its id (ids grow with time of storing)."""
        if not record.kernels:
            raise HistoryError(
                f"{record.source}: no kernel to record (nothing but control tasks, or no task)"
            )
        env = record.environment
        git = env.git
        with self._transaction() as cursor:
            cursor.execute(
                self._sql(
                    "INSERT INTO records (recorded_at, label, source, cann_version, aprof_version, host,"
                    " git_commit, git_branch, git_dirty) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
                ),
                (
                    env.recorded_at.astimezone(_dt.timezone.utc).isoformat(),
                    record.label,
                    record.source,
                    env.cann_version,
                    env.aprof_version,
                    env.host,
                    git.commit if git else None,
                    git.branch if git else None,
                    None if git is None else int(git.dirty),
                ),
            )
            record_id = int(cursor.fetchone()[0])
            for entry in record.kernels:
                self._add_kernel(cursor, record_id, entry)
        return record_id

    def _add_kernel(self, cursor: Any, record_id: int, entry: KernelEntry) -> None:
        cursor.execute(
            self._sql(
                "INSERT INTO kernels (record_id, chip, task_type, kernel, count, median_us, ci_low_us,"
                " ci_high_us, p10_us, p90_us, aic_mhz, counters) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ),
            (
                record_id,
                entry.chip,
                entry.task_type,
                entry.kernel,
                entry.count,
                entry.median_us,
                entry.ci_low_us,
                entry.ci_high_us,
                entry.p10_us,
                entry.p90_us,
                entry.aic_mhz,
                json.dumps(dict(entry.counters), sort_keys=True, allow_nan=False),
            ),
        )

    def kernels(self, kernel: str | None = None) -> list[StoredKernel]:
        """Every stored kernel entry, oldest record first; *kernel*: only those whose name (or
        ``chip / type / name`` key) is *kernel*."""
        cursor = self._conn.cursor()
        cursor.execute(
            "SELECT r.id, r.recorded_at, r.label, r.source, r.cann_version, r.aprof_version, r.host,"
            " r.git_commit, r.git_branch, r.git_dirty, k.chip, k.task_type, k.kernel, k.count,"
            " k.median_us, k.ci_low_us, k.ci_high_us, k.p10_us, k.p90_us, k.aic_mhz, k.counters"
            " FROM kernels k JOIN records r ON r.id = k.record_id"
            " ORDER BY r.id, k.chip, k.task_type, k.kernel"
        )
        out = [_stored(row) for row in cursor.fetchall()]
        if kernel is not None:
            out = [s for s in out if kernel in (s.entry.kernel, s.entry.key)]
        return out

    def record_count(self) -> int:
        cursor = self._conn.cursor()
        cursor.execute("SELECT COUNT(*) FROM records")
        return int(cursor.fetchone()[0])


def _stored(row: Sequence[Any]) -> StoredKernel:
    (rid, at, label, source, cann, aprof, host, commit, branch, dirty) = row[:10]
    (chip, task_type, kernel, count, median, low, high, p10, p90, mhz, counters) = row[10:]
    git = GitState(str(commit), branch, bool(dirty)) if commit is not None else None
    env = Environment(_dt.datetime.fromisoformat(at), host, aprof, cann, git)
    entry = KernelEntry(
        chip, task_type, kernel, int(count), float(median), float(low), float(high), float(p10), float(p90),
        json.loads(counters), None if mhz is None else float(mhz),
    )  # fmt: skip
    return StoredKernel(int(rid), label, source, env, entry)


def _connect_postgres(url: str) -> Any:
    try:
        import psycopg  # (an extra, loaded only for a URL)
    except ImportError:
        raise HistoryError(
            "a postgresql:// store needs the PostgreSQL driver: pip install 'asc-aprof[history-postgres]'"
        ) from None
    try:
        return psycopg.connect(url, autocommit=True)  # transactions only where asked for
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise HistoryError(f"cannot connect to the history store {_redacted(url)}: {first}") from None


def _redacted(url: str) -> str:
    """*url* without its password."""
    scheme, sep, rest = url.partition("://")
    creds, at, host = rest.rpartition("@")
    if not at or ":" not in creds:
        return url
    return f"{scheme}{sep}{creds.split(':', 1)[0]}:***@{host}"
