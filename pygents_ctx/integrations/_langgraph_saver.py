"""`ContextStoreSaver`, the LangGraph checkpointer (imported on first use; needs langgraph)."""

from __future__ import annotations

import asyncio
import secrets
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, Final, NamedTuple, TypeVar
from weakref import WeakValueDictionary

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from pygents_ctx._checks import storable_text, whole_number
from pygents_ctx.context.stores import PostgresConnection, SQLiteConnection
from pygents_ctx.integrations._langgraph_sql import (
    MESSAGES,
    PostgresDatabase,
    SQLiteDatabase,
    Steps,
    garbage,
)

__all__ = ["ContextStoreSaver"]

T = TypeVar("T")
# The messages of the lists remembered (the latest of each thread, namespace and channel
# written or read), at most: the least recently used lists are forgotten first, but the
# last one is kept whatever its length.
_CACHED_MESSAGES: Final = 20_000
_STRATEGIES: Final = ("keep_latest", "delete")
_LOAD_ATTEMPTS: Final = 3  # reads of a checkpoint whose lists another writer is deleting


class _Range(NamedTuple):
    segment: int
    start: int
    stop: int


class _Cached(NamedTuple):
    messages: tuple[Any, ...]
    ranges: tuple[_Range, ...]


def _is_message_list(value: object) -> bool:
    return (
        type(value) is list and bool(value) and all(isinstance(item, BaseMessage) for item in value)
    )


# The fix an error about a field of a config's "configurable" dict gives.
_IN_CONFIG: Final = {
    field: f'pass {{"configurable": {{"{field}": "..."}}}} with a string'
    for field in ("thread_id", "checkpoint_ns", "checkpoint_id")
}


def _text(field: str, value: object) -> str:
    return storable_text(value, field, empty=True, fix=_IN_CONFIG.get(field, ""))


def _configurable(config: object) -> Mapping[str, Any]:
    configurable = config.get("configurable") if isinstance(config, Mapping) else None
    if not isinstance(configurable, Mapping):
        raise TypeError(
            'a checkpointer config must be {"configurable": {"thread_id": ...}}, '
            f"not {config!r}"
        )
    return configurable


def _target(config: object) -> tuple[str, str, str | None]:
    """The thread id, namespace and checkpoint id (or None) that `config` names."""
    configurable = _configurable(config)
    if "thread_id" not in configurable:
        raise TypeError('the config names no thread: pass {"configurable": {"thread_id": "..."}}')
    thread_id = _text("thread_id", configurable["thread_id"])
    namespace = _text("checkpoint_ns", configurable.get("checkpoint_ns", ""))
    checkpoint_id = configurable.get("checkpoint_id")
    if checkpoint_id is not None:
        checkpoint_id = _text("checkpoint_id", checkpoint_id)
    return thread_id, namespace, checkpoint_id


def _ids(ids: object, method: str, field: str = "thread_id") -> list[str]:
    if isinstance(ids, str) or not isinstance(ids, Sequence):
        raise TypeError(f"{method} needs a list of {field.replace('_', ' ')}s, not {ids!r}")
    return [_text(field, value) for value in ids]


def _config(thread_id: str, namespace: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": namespace,
            "checkpoint_id": checkpoint_id,
        }
    }


def _cut(ranges: Sequence[_Range], count: int) -> list[_Range]:
    """The ranges that hold the first `count` messages of those `ranges` hold."""
    kept: list[_Range] = []
    for piece in ranges:
        if count <= 0:
            break
        size = min(piece.stop - piece.start, count)
        kept.append(_Range(piece.segment, piece.start, piece.start + size))
        count -= size
    return kept


def _slice(ranges: Sequence[_Range], index: int) -> _Range:
    """Where the `index`th message of the list that `ranges` make up is stored."""
    for piece in ranges:
        size = piece.stop - piece.start
        if index < size:
            return _Range(piece.segment, piece.start + index, piece.start + index + 1)
        index -= size
    raise IndexError(index)


def _joined(ranges: Sequence[_Range]) -> list[_Range]:
    """`ranges` with each run of neighbours in one segment made one range."""
    joined: list[_Range] = []
    for piece in ranges:
        if joined and joined[-1].segment == piece.segment and joined[-1].stop == piece.start:
            joined[-1] = _Range(piece.segment, joined[-1].start, piece.stop)
        else:
            joined.append(piece)
    return joined


def _same(new: Any, old: Any) -> bool:
    """Whether `new` is the stored message `old`: the same object, or one equal with its id.

    A subgraph hands its parent copies of the messages it added.
    """
    return new is old or (new.id is not None and new.id == old.id and new == old)


def _shared_prefix(new: Sequence[Any], old: Sequence[Any]) -> int:
    """How many leading messages of `new` are those `old` starts with."""
    count = 0
    for mine, theirs in zip(new, old, strict=False):
        if mine is not theirs and not _same(mine, theirs):  # the first test is the usual one
            break
        count += 1
    return count


_CHECKPOINT_ROW: Final = """
    SELECT checkpoint_id, parent_id, checkpoint_type, checkpoint, metadata_type, metadata
    FROM pygents_lg_checkpoints
"""
_VALUES: Final = """
    SELECT b.channel, b.type, b.data FROM pygents_lg_versions v
    JOIN pygents_lg_blobs b ON b.thread_id = v.thread_id AND b.checkpoint_ns = v.checkpoint_ns
        AND b.channel = v.channel AND b.version = v.version
    WHERE v.thread_id = ? AND v.checkpoint_ns = ? AND v.checkpoint_id = ?
"""
# CROSS JOIN makes SQLite read the checkpoint's versions first (then each list's ranges
# and messages in the order wanted, with no sort); PostgreSQL plans it as an inner join.
_RANGES: Final = """
    SELECT v.channel, r.segment, r.start, r.stop FROM pygents_lg_versions v
    CROSS JOIN pygents_lg_ranges r
    WHERE v.thread_id = ? AND v.checkpoint_ns = ? AND v.checkpoint_id = ?
        AND r.thread_id = v.thread_id AND r.checkpoint_ns = v.checkpoint_ns
        AND r.channel = v.channel AND r.version = v.version
    ORDER BY v.channel, r.seq
"""
_MESSAGES: Final = """
    SELECT v.channel, m.type, m.data FROM pygents_lg_versions v
    CROSS JOIN pygents_lg_ranges r CROSS JOIN pygents_lg_messages m
    WHERE v.thread_id = ? AND v.checkpoint_ns = ? AND v.checkpoint_id = ?
        AND r.thread_id = v.thread_id AND r.checkpoint_ns = v.checkpoint_ns
        AND r.channel = v.channel AND r.version = v.version
        AND m.thread_id = r.thread_id AND m.segment = r.segment
        AND m.position >= r.start AND m.position < r.stop
    ORDER BY v.channel, r.seq, m.position
"""
_WRITES: Final = """
    SELECT task_id, channel, type, data, task_path, idx FROM pygents_lg_writes
    WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?
"""
_PUT_CHECKPOINT: Final = """
    INSERT INTO pygents_lg_checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_id,
        run_id, checkpoint_type, checkpoint, metadata_type, metadata)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
        parent_id = excluded.parent_id, run_id = excluded.run_id,
        checkpoint_type = excluded.checkpoint_type, checkpoint = excluded.checkpoint,
        metadata_type = excluded.metadata_type, metadata = excluded.metadata
"""
_DROP_VERSIONS: Final = """
    DELETE FROM pygents_lg_versions WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?
"""
_PUT_VERSION: Final = """
    INSERT INTO pygents_lg_versions (thread_id, checkpoint_ns, checkpoint_id, channel, version)
    VALUES (?, ?, ?, ?, ?)
"""
_DROP_BLOB: Final = """
    DELETE FROM pygents_lg_blobs
    WHERE thread_id = ? AND checkpoint_ns = ? AND channel = ? AND version = ?
"""
_PUT_BLOB: Final = """
    INSERT INTO pygents_lg_blobs (thread_id, checkpoint_ns, channel, version, type, data)
    VALUES (?, ?, ?, ?, ?, ?)
"""
_PUT_SEGMENT: Final = "INSERT INTO pygents_lg_segments (thread_id, segment) VALUES (?, ?)"
_PUT_MESSAGE: Final = """
    INSERT INTO pygents_lg_messages (thread_id, segment, position, type, data)
    VALUES (?, ?, ?, ?, ?)
"""
_PUT_RANGE: Final = """
    INSERT INTO pygents_lg_ranges (thread_id, checkpoint_ns, channel, version, seq, segment,
        start, stop)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
"""
_KEEP_WRITE: Final = """
    INSERT INTO pygents_lg_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx,
        channel, type, data, task_path)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING
"""
_REPLACE_WRITE: Final = """
    INSERT INTO pygents_lg_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx,
        channel, type, data, task_path)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
        channel = excluded.channel, type = excluded.type, data = excluded.data,
        task_path = excluded.task_path
"""
# Keeps the newest `keep` checkpoints of each namespace of a thread, and the writes
# of those and of newer ones (checkpoint ids sort by time: LangGraph's are uuid6).
_OLDEST_KEPT: Final = """COALESCE((
        SELECT c.checkpoint_id FROM pygents_lg_checkpoints c
        WHERE c.thread_id = {table}.thread_id AND c.checkpoint_ns = {table}.checkpoint_ns
        ORDER BY c.checkpoint_id DESC LIMIT 1 OFFSET ?
    ), '')"""
_PRUNE: Final = (
    "DELETE FROM pygents_lg_writes WHERE thread_id = ? AND checkpoint_id < "
    + _OLDEST_KEPT.format(table="pygents_lg_writes"),
    "DELETE FROM pygents_lg_checkpoints WHERE thread_id = ? AND checkpoint_id < "
    + _OLDEST_KEPT.format(table="pygents_lg_checkpoints"),
)
_DELETE_THREAD: Final = (
    "DELETE FROM pygents_lg_writes WHERE thread_id = ?",
    "DELETE FROM pygents_lg_checkpoints WHERE thread_id = ?",
)


def _pruning(thread_id: str, keep: int) -> Steps:
    """The statements that keep `thread_id`'s newest `keep` checkpoints per namespace."""
    steps: Steps = [(sql, [(thread_id, keep - 1)]) for sql in _PRUNE]
    return steps + [(sql, [params]) for sql, params in garbage(thread_id)]


def _deleting(thread_id: str) -> Steps:
    """The statements that delete every checkpoint of `thread_id`, and what they hold."""
    steps: Steps = [(sql, [(thread_id,)]) for sql in _DELETE_THREAD]
    return steps + [(sql, [params]) for sql, params in garbage(thread_id)]


_COPIES: Final = (
    """
    INSERT INTO pygents_lg_checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_id,
        run_id, checkpoint_type, checkpoint, metadata_type, metadata)
    SELECT ?, checkpoint_ns, checkpoint_id, parent_id, run_id, checkpoint_type, checkpoint,
        metadata_type, metadata
    FROM pygents_lg_checkpoints WHERE thread_id = ?
    """,
    """
    INSERT INTO pygents_lg_versions (thread_id, checkpoint_ns, checkpoint_id, channel, version)
    SELECT ?, checkpoint_ns, checkpoint_id, channel, version
    FROM pygents_lg_versions WHERE thread_id = ?
    """,
    """
    INSERT INTO pygents_lg_blobs (thread_id, checkpoint_ns, channel, version, type, data)
    SELECT ?, checkpoint_ns, channel, version, type, data
    FROM pygents_lg_blobs WHERE thread_id = ?
    """,
    "INSERT INTO pygents_lg_segments (thread_id, segment) "
    "SELECT ?, segment FROM pygents_lg_segments WHERE thread_id = ?",
    """
    INSERT INTO pygents_lg_messages (thread_id, segment, position, type, data)
    SELECT ?, segment, position, type, data FROM pygents_lg_messages WHERE thread_id = ?
    """,
    """
    INSERT INTO pygents_lg_ranges (thread_id, checkpoint_ns, channel, version, seq, segment,
        start, stop)
    SELECT ?, checkpoint_ns, channel, version, seq, segment, start, stop
    FROM pygents_lg_ranges WHERE thread_id = ?
    """,
    """
    INSERT INTO pygents_lg_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx,
        channel, type, data, task_path)
    SELECT ?, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, data, task_path
    FROM pygents_lg_writes WHERE thread_id = ?
    """,
)


class ContextStoreSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer in a pygents_ctx SQLite or PostgreSQL database.

    Pass it as `graph.compile(checkpointer=ContextStoreSaver(conn))`, `conn`
    from `await connect(path)` or `await connect_postgres(dsn)`: the same
    connection (and file or database) as the context stores. Its tables are
    created on first use.

    A channel whose value is a list of LangChain messages (the `messages` of a
    `MessagesState`) is stored a message at a time, each message once: a
    checkpoint that adds two messages to a list of 2,000 writes those two and
    a row saying which stored messages make up the list, also when the list
    is a subgraph's (in a namespace of its own) or comes back from one. A
    message object already stored is taken as unchanged (LangGraph's
    reducers replace messages rather than editing them in place), and so is
    an equal one with the same id. The saver remembers the
    latest list of each thread it wrote or read, up to 20,000 messages in all
    (the least recently used forgotten first): a list it remembers is neither
    written nor decoded again. Other channel values, the
    checkpoints and their metadata go through the serializer, `serde`
    (LangGraph's `JsonPlusSerializer` unless you pass another).

    With `keep=N`, each `put` deletes the thread's checkpoints older than its
    newest `N` in that namespace, and the values and messages only they held,
    in the same transaction: a long thread's storage stays the size of its
    latest state. `prune()` does the same on demand.

    The async methods (`ainvoke`, `astream`) run on the event loop the saver
    was made on. The sync ones (`invoke`, `stream`) work from other threads
    while that loop runs (`await asyncio.to_thread(graph.invoke, ...)`); from
    the loop's own thread they raise, as they would block the loop they wait on.

    Args:
        conn: A `SQLiteConnection` or `PostgresConnection`.
        keep: Checkpoints to keep per thread and namespace on each put, or
            None (the default) to keep them all.
        serde: The serializer of checkpoints, metadata and values.

    Raises:
        TypeError: `conn` is not one of our connections, or `keep` is not an int.
        ValueError: `keep` is below 1.
        RuntimeError: No event loop is running (make the saver inside `async def`).
    """

    def __init__(
        self,
        conn: SQLiteConnection | PostgresConnection,
        *,
        keep: int | None = None,
        serde: SerializerProtocol | None = None,
    ) -> None:
        if isinstance(conn, SQLiteConnection):
            self._db: SQLiteDatabase | PostgresDatabase = SQLiteDatabase(conn)
        elif isinstance(conn, PostgresConnection):
            self._db = PostgresDatabase(conn)
        else:
            raise TypeError(
                "ContextStoreSaver needs the connection from `await connect(path)` or "
                f"`await connect_postgres(dsn)`, not {type(conn).__name__}"
            )
        if keep is not None:
            whole_number(keep, "keep", least=1, fix="1 keeps the latest checkpoint, None all")
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "make ContextStoreSaver inside a running event loop (in `async def`), "
                "the loop its connection was opened on"
            ) from None
        super().__init__(serde=serde)
        self.conn = conn
        self.keep = keep
        self._ready = False
        self._setting_up = asyncio.Lock()
        self._lists: OrderedDict[tuple[str, str, str], _Cached] = OrderedDict()
        self._cached = 0  # the messages in self._lists
        # A thread's lists are planned, written and remembered one call at a
        # time: LangGraph puts a subgraph's checkpoints beside its parent's, and
        # two puts planned on the same remembered list would both store the
        # messages new to it.
        self._threads: WeakValueDictionary[str, asyncio.Lock] = WeakValueDictionary()

    def __repr__(self) -> str:
        return f"ContextStoreSaver({self.conn!r}, keep={self.keep!r})"

    async def setup(self) -> None:
        """Create the saver's tables, or bring them up to date. Run by the first call."""
        async with self._setting_up:
            if not self._ready:
                await self._db.setup()
                self._ready = True

    def get_next_version(self, current: str | None, channel: None) -> str:
        """The version after `current`: a counter, then a random part.

        The random part keeps two branches from one checkpoint from giving
        different values the same version.
        """
        count = 0 if current is None else int(str(current).split(".")[0])
        return f"{count + 1:032}.{secrets.randbelow(10**16):016}"

    # -- reading ---------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names, or the thread's latest; None when there is none.

        Raises:
            TypeError: The thread id, namespace or checkpoint id is not a str.
        """
        thread_id, namespace, checkpoint_id = _target(config)
        await self.setup()
        while True:
            if checkpoint_id is None:
                (rows,) = await self._db.read(
                    [
                        (
                            _CHECKPOINT_ROW + "WHERE thread_id = ? AND checkpoint_ns = ? "
                            "ORDER BY checkpoint_id DESC LIMIT 1",
                            (thread_id, namespace),
                        )
                    ]
                )
                if not rows:
                    return None
                wanted = str(rows[0][0])
            else:
                wanted = checkpoint_id
            found = await self._load(thread_id, namespace, wanted)
            if found is not None or checkpoint_id is not None:
                return found
            # The latest checkpoint was pruned between the two reads: look again.

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """The checkpoints matching, newest first.

        Args:
            config: Names the thread (and namespace) to list, or None for all threads.
            filter: Metadata keys and the values they must equal.
            before: Only checkpoints older than the one this names.
            limit: At most this many.

        Raises:
            TypeError: An id is not a str, `filter` is not a dict, or `limit`
                is not an int.
        """
        where, params = [], []
        if config is not None:
            configurable = _configurable(config)
            if "thread_id" in configurable:
                where.append("thread_id = ?")
                params.append(_text("thread_id", configurable["thread_id"]))
            if configurable.get("checkpoint_ns") is not None:
                where.append("checkpoint_ns = ?")
                params.append(_text("checkpoint_ns", configurable["checkpoint_ns"]))
            if configurable.get("checkpoint_id") is not None:
                where.append("checkpoint_id = ?")
                params.append(_text("checkpoint_id", configurable["checkpoint_id"]))
        if before is not None:
            before_id = _configurable(before).get("checkpoint_id")
            if before_id is not None:
                where.append("checkpoint_id < ?")
                params.append(_text("checkpoint_id", before_id))
        if filter is not None and not isinstance(filter, dict):
            raise TypeError(f"filter must be a dict of metadata values, not {filter!r}")
        if limit is not None:
            whole_number(limit, "limit", least=None, fix="None for all")
        await self.setup()
        sql = "SELECT thread_id, checkpoint_ns, checkpoint_id, metadata_type, metadata FROM "
        sql += "pygents_lg_checkpoints"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY checkpoint_id DESC, thread_id, checkpoint_ns"
        if limit is not None and not filter:
            sql += f" LIMIT {max(limit, 0)}"
        (rows,) = await self._db.read([(sql, tuple(params))])
        left = limit
        for thread_id, namespace, checkpoint_id, metadata_type, metadata in rows:
            if left is not None and left <= 0:
                return
            if filter:
                values = self.serde.loads_typed((metadata_type, bytes(metadata)))
                if any(values.get(key) != value for key, value in filter.items()):
                    continue
            found = await self._load(thread_id, namespace, checkpoint_id)
            if found is None:  # deleted since the listing
                continue
            if left is not None:
                left -= 1
            yield found

    async def _load(
        self, thread_id: str, namespace: str, checkpoint_id: str, attempt: int = 1
    ) -> CheckpointTuple | None:
        key = (thread_id, namespace, checkpoint_id)
        rows, values, ranges, writes = await self._db.read(
            [
                (
                    _CHECKPOINT_ROW + "WHERE thread_id = ? AND checkpoint_ns = ? "
                    "AND checkpoint_id = ?",
                    key,
                ),
                (_VALUES, key),
                (_RANGES, key),
                (_WRITES, key),
            ]
        )
        if not rows:
            return None
        pieces: dict[str, list[_Range]] = {}
        for channel, segment, start, stop in ranges:
            pieces.setdefault(channel, []).append(_Range(segment, start, stop))
        lists = await self._message_lists(key, values, pieces)
        if lists is None:  # pruned between the two reads
            if attempt == _LOAD_ATTEMPTS:
                raise RuntimeError(
                    f"the messages of checkpoint {checkpoint_id!r} of thread {thread_id!r} "
                    "kept changing while being read; try again"
                )
            return await self._load(thread_id, namespace, checkpoint_id, attempt + 1)
        _, parent_id, checkpoint_type, data, metadata_type, metadata = rows[0]
        checkpoint: Checkpoint = self.serde.loads_typed((checkpoint_type, bytes(data)))
        channel_values: dict[str, Any] = {}
        for channel, value_type, value in values:
            if value_type == MESSAGES:
                channel_values[channel] = lists[channel]
            elif value_type != "empty":
                channel_values[channel] = self.serde.loads_typed((value_type, bytes(value)))
        ordered = sorted(writes, key=lambda row: writes_sort_key(row[4], row[0], row[5]))
        pending: list[PendingWrite] = [
            (task_id, channel, self.serde.loads_typed((value_type, bytes(value))))
            for task_id, channel, value_type, value, _, _ in ordered
        ]
        return CheckpointTuple(
            config=_config(thread_id, namespace, checkpoint_id),
            checkpoint={**checkpoint, "channel_values": channel_values},
            metadata=self.serde.loads_typed((metadata_type, bytes(metadata))),
            parent_config=(None if parent_id is None else _config(thread_id, namespace, parent_id)),
            pending_writes=pending,
        )

    async def _message_lists(
        self,
        key: tuple[str, str, str],
        values: Sequence[tuple[Any, ...]],
        pieces: Mapping[str, Sequence[_Range]],
    ) -> dict[str, list[Any]] | None:
        """The message lists of a checkpoint, by channel; None if they were deleted meanwhile.

        A list this saver wrote or read last for its channel, made of the same
        stored messages, is not read again: its messages are taken as they are.
        """
        async with self._thread(key[0]):
            return await self._read_message_lists(key, values, pieces)

    async def _read_message_lists(
        self,
        key: tuple[str, str, str],
        values: Sequence[tuple[Any, ...]],
        pieces: Mapping[str, Sequence[_Range]],
    ) -> dict[str, list[Any]] | None:
        thread_id, namespace, _ = key
        lists: dict[str, list[Any]] = {}
        unknown: set[str] = set()
        for channel, value_type, _ in values:
            if value_type != MESSAGES:
                continue
            cached = self._lists.get((thread_id, namespace, channel))
            if cached is not None and cached.ranges == tuple(pieces.get(channel, ())):
                self._lists.move_to_end((thread_id, namespace, channel))
                lists[channel] = list(cached.messages)
            else:
                lists[channel] = []
                unknown.add(channel)
        if unknown:
            (messages,) = await self._db.read([(_MESSAGES, key)])
            for channel, message_type, message in messages:
                if channel in unknown:
                    lists[channel].append(self.serde.loads_typed((message_type, bytes(message))))
        for channel in unknown:
            ranges = pieces.get(channel, ())
            if len(lists[channel]) != sum(piece.stop - piece.start for piece in ranges):
                return None
            self._remember((thread_id, namespace, channel), lists[channel], ranges)
        return lists

    def _thread(self, thread_id: str) -> asyncio.Lock:
        """The lock of the thread's remembered lists (gone when no call holds it)."""
        lock = self._threads.get(thread_id)
        if lock is None:
            lock = self._threads[thread_id] = asyncio.Lock()
        return lock

    def _remember(
        self, key: tuple[str, str, str], messages: Sequence[Any], ranges: Sequence[_Range]
    ) -> None:
        forgotten = self._lists.pop(key, None)
        if forgotten is not None:
            self._cached -= len(forgotten.messages)
        self._lists[key] = _Cached(tuple(messages), tuple(ranges))
        self._cached += len(messages)
        while self._cached > _CACHED_MESSAGES and len(self._lists) > 1:
            _, oldest = self._lists.popitem(last=False)
            self._cached -= len(oldest.messages)

    # -- writing ---------------------------------------------------------------

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store `checkpoint` with its metadata and the channel values in `new_versions`.

        One transaction; with `keep`, the thread's older checkpoints are pruned
        in it too. Returns the config naming the stored checkpoint.

        Raises:
            TypeError: The thread id or namespace is not a str, or `checkpoint`
                is not a checkpoint (a dict with a str `id`).
        """
        thread_id, namespace, parent_id = _target(config)
        if not isinstance(checkpoint, Mapping) or not isinstance(checkpoint.get("id"), str):
            raise TypeError(
                f"put needs a LangGraph Checkpoint (a dict with an 'id'), not {checkpoint!r}"
            )
        checkpoint_id = checkpoint["id"]
        await self.setup()
        stored: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = stored.pop("channel_values", None) or {}
        checkpoint_type, data = self.serde.dumps_typed(stored)
        kept_metadata = get_checkpoint_metadata(config, metadata)
        metadata_type, metadata_data = self.serde.dumps_typed(kept_metadata)
        run_id = kept_metadata.get("run_id")
        head: Steps = [
            (
                _PUT_CHECKPOINT,
                [
                    (
                        thread_id,
                        namespace,
                        checkpoint_id,
                        parent_id,
                        run_id if isinstance(run_id, str) else None,
                        checkpoint_type,
                        data,
                        metadata_type,
                        metadata_data,
                    )
                ],
            ),
            (_DROP_VERSIONS, [(thread_id, namespace, checkpoint_id)]),
            (
                _PUT_VERSION,
                [
                    (thread_id, namespace, checkpoint_id, channel, str(version))
                    for channel, version in checkpoint.get("channel_versions", {}).items()
                ],
            ),
        ]
        plain: list[tuple[Any, ...]] = []
        lists: dict[str, tuple[str, list[Any]]] = {}
        for channel, version in new_versions.items():
            if channel in values and _is_message_list(values[channel]):
                lists[channel] = (str(version), values[channel])
            elif channel in values:
                plain.append((channel, str(version), *self.serde.dumps_typed(values[channel])))
            else:
                plain.append((channel, str(version), "empty", b""))
        blobs = [(thread_id, namespace, *row) for row in plain]
        blobs += [
            (thread_id, namespace, channel, version, MESSAGES, b"")
            for channel, (version, _) in lists.items()
        ]
        head.append((_DROP_BLOB, [row[:4] for row in blobs]))
        head.append((_PUT_BLOB, blobs))
        tail = [] if self.keep is None else _pruning(thread_id, self.keep)
        async with self._thread(thread_id):
            await self._write(thread_id, namespace, head, lists, tail)
        return _config(thread_id, namespace, checkpoint_id)

    async def _write(
        self,
        thread_id: str,
        namespace: str,
        head: Steps,
        lists: Mapping[str, tuple[str, list[Any]]],
        tail: Steps,
    ) -> None:
        """Write a checkpoint's `head` steps, its message lists and `tail`, in one transaction."""
        # First leaning on the lists remembered, extending their last segment; if
        # another writer extended it first (or pruned it), with the new messages in
        # a segment of their own; then, if a remembered segment is gone, afresh.
        for attempt in ("extend", "new segment", "afresh"):
            planned = {
                channel: self._plan(thread_id, namespace, channel, messages, attempt)
                for channel, (_, messages) in lists.items()
            }
            steps = head + self._list_steps(thread_id, namespace, lists, planned) + tail
            try:
                await self._db.write(steps)
            except self._db.integrity_errors:
                if attempt == "afresh" or not lists:
                    raise
                continue
            break
        for channel, (_, messages) in lists.items():
            self._remember((thread_id, namespace, channel), messages, planned[channel][0])

    def _plan(
        self, thread_id: str, namespace: str, channel: str, messages: list[Any], attempt: str
    ) -> tuple[list[_Range], int | None, int, list[Any]]:
        """How to store `messages`, given the lists of this thread last written or read.

        Returns the list's ranges, the segment of the messages to write (None
        when they go on at the end of a stored segment), the position of the
        first of them, and the messages to write. Messages of the remembered
        list are not written again, wherever they are in the new one.
        """
        cached = None if attempt == "afresh" else self._remembered(thread_id, namespace, channel)
        segment = secrets.randbits(62)
        if cached is None:
            return [_Range(segment, 0, len(messages))], segment, 0, messages
        shared = _shared_prefix(messages, cached.messages)
        if shared == len(cached.messages) and cached.ranges and attempt == "extend":
            # Appended (the usual turn): the new ones go on at the end of the last segment.
            extended = list(cached.ranges)
            rest = messages[shared:]
            last = extended[-1]
            extended[-1] = _Range(last.segment, last.start, last.stop + len(rest))
            return extended, None, last.stop, rest
        by_object = {id(message): index for index, message in enumerate(cached.messages)}
        by_id = {message.id: index for index, message in enumerate(cached.messages)}
        ranges = _cut(cached.ranges, shared)
        written: list[Any] = []
        for message in messages[shared:]:
            index = by_object.get(id(message), by_id.get(message.id))
            if index is not None and _same(message, cached.messages[index]):
                ranges.append(_slice(cached.ranges, index))
            else:
                ranges.append(_Range(segment, len(written), len(written) + 1))
                written.append(message)
        return _joined(ranges), segment if written else None, 0, written

    def _remembered(self, thread_id: str, namespace: str, channel: str) -> _Cached | None:
        """The list of this channel remembered for the namespace, or the thread's latest.

        Of the two, the one the most recent write or read used: a subgraph runs
        in a namespace of its own on each call, with the parent's messages, and
        the parent then goes on with the messages the subgraph added.
        """
        for (thread, _, name), cached in reversed(self._lists.items()):
            if thread == thread_id and name == channel:
                return cached
        return None

    def _list_steps(
        self,
        thread_id: str,
        namespace: str,
        lists: Mapping[str, tuple[str, list[Any]]],
        planned: Mapping[str, tuple[list[_Range], int | None, int, list[Any]]],
    ) -> Steps:
        segments, messages, ranges = [], [], []
        for channel, (version, _) in lists.items():
            pieces, new_segment, first, written = planned[channel]
            if new_segment is not None:
                segments.append((thread_id, new_segment))
            target = pieces[-1].segment if new_segment is None else new_segment
            for offset, message in enumerate(written):
                messages.append(
                    (thread_id, target, first + offset, *self.serde.dumps_typed(message))
                )
            ranges += [
                (thread_id, namespace, channel, version, seq, *piece)
                for seq, piece in enumerate(pieces)
            ]
        return [(_PUT_SEGMENT, segments), (_PUT_MESSAGE, messages), (_PUT_RANGE, ranges)]

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's `writes` for the checkpoint `config` names, in one transaction.

        A write already stored at its index is kept (a retried task writes the
        same); the special writes (errors, interrupts) replace theirs. LangGraph
        may store writes before their checkpoint (it puts both in the background).

        Raises:
            TypeError: An id is not a str, or `config` names no checkpoint.
        """
        thread_id, namespace, checkpoint_id = _target(config)
        if checkpoint_id is None:
            raise TypeError(
                "put_writes needs the checkpoint the writes belong to: "
                'config={"configurable": {"thread_id": ..., "checkpoint_id": ...}}'
            )
        _text("task_id", task_id)
        _text("task_path", task_path)
        await self.setup()
        kept: list[tuple[object, ...]] = []
        replaced: list[tuple[object, ...]] = []
        for index, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, index)
            row = (
                thread_id,
                namespace,
                checkpoint_id,
                task_id,
                idx,
                channel,
                *self.serde.dumps_typed(value),
                task_path,
            )
            (replaced if idx < 0 else kept).append(row)
        await self._db.write([(_KEEP_WRITE, kept), (_REPLACE_WRITE, replaced)])

    # -- deleting and copying --------------------------------------------------

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete the thread's checkpoints, writes, values and messages, in one transaction."""
        _text("thread_id", thread_id)
        await self.setup()
        await self._db.write(_deleting(thread_id))
        self._forget(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) whose metadata's `run_id` is in `run_ids`."""
        runs = _ids(run_ids, "delete_for_runs", "run_id")
        if not runs:
            return
        await self.setup()
        marks = ", ".join("?" * len(runs))
        (threads,) = await self._db.read(
            [
                (
                    "SELECT DISTINCT thread_id FROM pygents_lg_checkpoints "
                    f"WHERE run_id IN ({marks})",
                    tuple(runs),
                )
            ]
        )
        steps: Steps = [
            (
                "DELETE FROM pygents_lg_writes WHERE EXISTS (SELECT 1 FROM pygents_lg_checkpoints c"
                " WHERE c.thread_id = pygents_lg_writes.thread_id"
                " AND c.checkpoint_ns = pygents_lg_writes.checkpoint_ns"
                " AND c.checkpoint_id = pygents_lg_writes.checkpoint_id"
                f" AND c.run_id IN ({marks}))",
                [tuple(runs)],
            ),
            (f"DELETE FROM pygents_lg_checkpoints WHERE run_id IN ({marks})", [tuple(runs)]),
        ]
        for (thread_id,) in threads:
            steps += [(sql, [params]) for sql, params in garbage(thread_id)]
        await self._db.write(steps)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint of one thread, with its writes, to a new thread.

        Raises:
            ValueError: The source thread has no checkpoints, or the target
                thread has some (nothing is copied).
        """
        source = _text("source_thread_id", source_thread_id)
        target = _text("target_thread_id", target_thread_id)
        await self.setup()
        count = "SELECT count(*) FROM pygents_lg_checkpoints WHERE thread_id = ?"
        (mine,), (theirs,) = await self._db.read([(count, (source,)), (count, (target,))])
        if not mine[0]:
            raise ValueError(f"thread {source!r} has no checkpoints to copy")
        if theirs[0]:
            raise ValueError(
                f"thread {target!r} already has checkpoints: copy to a new thread id, "
                "or delete_thread it first"
            )
        await self._db.write([(sql, [(target, source)]) for sql in _COPIES])

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Delete old checkpoints of `thread_ids`, in one transaction.

        `"keep_latest"` keeps the newest `keep` checkpoints (1 without `keep`)
        of each namespace, with their writes; `"delete"` removes them all.
        Values and messages no kept checkpoint holds go with them.

        Raises:
            ValueError: `strategy` is not one of those two.
        """
        threads = _ids(thread_ids, "prune")
        if strategy not in _STRATEGIES:
            raise ValueError(f"strategy must be 'keep_latest' or 'delete', not {strategy!r}")
        if not threads:
            return
        await self.setup()
        steps: Steps = []
        for thread_id in threads:
            if strategy == "delete":
                steps += _deleting(thread_id)
            else:
                steps += _pruning(thread_id, self.keep or 1)
        await self._db.write(steps)
        for thread_id in threads:
            self._forget(thread_id)

    def _forget(self, thread_id: str) -> None:
        for key in [key for key in self._lists if key[0] == thread_id]:
            self._cached -= len(self._lists.pop(key).messages)

    # -- the sync API, run on the saver's event loop ---------------------------

    def _wait(self, coroutine: Any) -> Any:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            coroutine.close()
            raise RuntimeError(
                "ContextStoreSaver's sync methods wait for its event loop, and were called "
                "on it: use the async API (ainvoke, astream), or run the sync one in "
                "another thread (await asyncio.to_thread(graph.invoke, ...))"
            )
        if not self._loop.is_running():
            coroutine.close()
            raise RuntimeError(
                "ContextStoreSaver's event loop is not running, and its sync methods run "
                "there: call them while the loop that made the saver runs"
            )
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """`aget_tuple`, from another thread than the saver's event loop."""
        found: CheckpointTuple | None = self._wait(self.aget_tuple(config))
        return found

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """`alist`, from another thread than the saver's event loop."""

        async def collect() -> list[CheckpointTuple]:
            listed = self.alist(config, filter=filter, before=before, limit=limit)
            return [found async for found in listed]

        found: list[CheckpointTuple] = self._wait(collect())
        return iter(found)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """`aput`, from another thread than the saver's event loop."""
        stored: RunnableConfig = self._wait(self.aput(config, checkpoint, metadata, new_versions))
        return stored

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """`aput_writes`, from another thread than the saver's event loop."""
        self._wait(self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """`adelete_thread`, from another thread than the saver's event loop."""
        self._wait(self.adelete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """`adelete_for_runs`, from another thread than the saver's event loop."""
        self._wait(self.adelete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """`acopy_thread`, from another thread than the saver's event loop."""
        self._wait(self.acopy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`aprune`, from another thread than the saver's event loop."""
        self._wait(self.aprune(thread_ids, strategy=strategy))
