"""What the viewer's pages read from a context store: a page at a time, never a whole history.

Every function takes a `Reading` (one read-only transaction) and runs plain
SQL over the stores' tables (`pygents_sessions`, `pygents_messages`,
`pygents_archive`, `pygents_usage`); messages are decoded by the stores' own
`decode`. Only the window page reads a whole live history: a strategy needs it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from pygents_ctx.cli._db import pick_session
from pygents_ctx.cli.viewer._source import Reading, as_bytes, as_text
from pygents_ctx.context.messages import Message, ToolResultBlock, ToolUseBlock
from pygents_ctx.context.stores import CheckpointInfo
from pygents_ctx.context.stores import _checkpoint_sql as checkpoint_sql
from pygents_ctx.context.stores._common import decode
from pygents_ctx.context.stores._lineage import archive_of, live_of
from pygents_ctx.context.strategies.summarize import SUMMARY_PREFIX, is_bridge, is_summary
from pygents_ctx.context.usage import Usage, UsageRecord, WindowRecord
from pygents_ctx.model.base import Pricing

__all__ = [
    "SUMMARY_HEAD",
    "Covered",
    "Entry",
    "Prices",
    "SessionRow",
    "Summaries",
    "archive_page",
    "checkpoints",
    "find_session",
    "find_tool_block",
    "is_carried",
    "live_history",
    "messages_page",
    "session_row",
    "sessions_page",
    "subagent_calls",
    "summaries",
    "usage_records",
]

# A summary message's stored JSON holds its prefix as a JSON string: these bytes.
_SUMMARY_NEEDLE: Final = orjson.dumps(SUMMARY_PREFIX)[:-1]
SUMMARY_HEAD: Final = 8  # the live messages a compaction's summary may sit among
_NO_LIMIT: Final = 2**62  # a LIMIT both SQLite and PostgreSQL read as "all"
_SESSION_COLUMNS: Final = (
    "session_id, created_at, message_count, live_tokens, input_tokens, output_tokens, preview"
)


class Prices:
    """`--pricing`: a `Pricing` per model name or glob (`gpt-4o*`), the first match wins."""

    def __init__(self, prices: Mapping[str, Pricing] | None = None) -> None:
        self.prices = dict(prices or {})

    def __bool__(self) -> bool:
        return bool(self.prices)

    def for_model(self, model: str) -> Pricing | None:
        """The prices of `model`: its own entry, else the first glob that matches it."""
        if model in self.prices:
            return self.prices[model]
        for pattern, pricing in self.prices.items():
            if fnmatch.fnmatchcase(model, pattern):
                return pricing
        return None

    def cost(self, usage_by_model: Mapping[str, Usage]) -> float | None:
        """What the usage costs, or None when a model that used tokens has no price."""
        total = 0.0
        for model, usage in usage_by_model.items():
            pricing = self.for_model(model)
            if pricing is None:
                return None
            total += pricing.cost(usage)
        return total


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One session as the sessions page lists it."""

    session_id: str
    created_at: str
    messages: int
    live_tokens: int
    input_tokens: int
    output_tokens: int
    preview: str
    runs: int = 0
    archived: int = 0
    model_calls: int = 0
    last_activity: str = ""
    usage_by_model: dict[str, Usage] = field(default_factory=dict)
    owner: str | None = None


def _columns(reading: Reading) -> str:
    """The session columns to read: the owner too, where the schema has one (NULL before)."""
    owner = "owner" if "owner" in reading.columns("pygents_sessions") else "NULL"
    return f"{_SESSION_COLUMNS}, {owner}"


def _row(row: Sequence[Any]) -> SessionRow:
    session_id, created, count, live, tokens_in, tokens_out, preview, owner = row
    return SessionRow(
        str(session_id),
        as_text(created),
        int(count),
        int(live),
        int(tokens_in),
        int(tokens_out),
        as_text(preview),
        owner=None if owner is None else str(owner),
    )


def has_owners(reading: Reading) -> bool:
    """Whether any session has an owner (the sessions page then shows them)."""
    return "owner" in reading.columns("pygents_sessions") and bool(
        reading.rows("SELECT 1 FROM pygents_sessions WHERE owner IS NOT NULL LIMIT 1", [])
    )


def _like(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _forked(reading: Reading, session_id: str) -> bool:
    """Whether the session reads rows of other sessions (a fork, schema 6 and later)."""
    return "pygents_forks" in reading.tables() and bool(
        reading.rows("SELECT 1 FROM pygents_forks WHERE session_id = ? LIMIT 1", [session_id])
    )


def fork_sources(reading: Reading, session_id: str) -> list[str]:
    """The sessions a fork reads rows of, the one it was forked from first (none: not a fork)."""
    if not _forked(reading, session_id):
        return []
    rows = reading.rows(
        "SELECT source_id FROM pygents_forks WHERE session_id = ? ORDER BY live_from DESC",
        [session_id],
    )
    return [str(source) for (source,) in rows]


def _live(reading: Reading, session_id: str) -> str:
    """What to read a session's live history from: a fork's inherited rows included."""
    return live_of() if _forked(reading, session_id) else "pygents_messages"


def _archive(reading: Reading, session_id: str) -> str:
    """What to read a session's archive from: a fork's inherited rows included."""
    return archive_of() if _forked(reading, session_id) else "pygents_archive"


def sessions_page(
    reading: Reading, search: str, offset: int, limit: int, owner: str = ""
) -> tuple[list[SessionRow], int]:
    """The sessions whose id contains `search` (any case), of `owner` when one is given,
    newest first: a page, and how many."""
    if owner and "owner" not in reading.columns("pygents_sessions"):
        return [], 0  # a file from before owners: no session has one
    clauses, params = [], []
    if search:
        clauses.append("lower(session_id) LIKE ? ESCAPE '\\'")
        params.append(_like(search))
    if owner:
        clauses.append("owner = ?")
        params.append(owner)
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    (total,) = reading.rows(f"SELECT count(*) FROM pygents_sessions {where}", params)[0]
    rows = reading.rows(
        f"SELECT {_columns(reading)} FROM pygents_sessions {where} "
        "ORDER BY created_at DESC, session_id DESC LIMIT ? OFFSET ?",
        [*params, limit, offset],
    )
    usage = "pygents_usage" in reading.tables()
    return [_with_activity(reading, _row(row), usage) for row in rows], int(total)


def _with_activity(reading: Reading, row: SessionRow, usage: bool) -> SessionRow:
    """The row with its runs, archive size, model calls, last activity and usage per model."""
    session = row.session_id
    live, archive = _live(reading, session), _archive(reading, session)
    (runs,) = reading.rows(
        f"SELECT count(*) FROM (SELECT run_id FROM {live} "
        "WHERE session_id = ? AND run_id IS NOT NULL UNION "
        f"SELECT run_id FROM {archive} WHERE session_id = ? AND run_id IS NOT NULL) AS runs",
        [session, session],
    )[0]
    (archived,) = reading.rows(f"SELECT count(*) FROM {archive} WHERE session_id = ?", [session])[0]
    by_model: dict[str, Usage] = {}
    calls, last = 0, row.created_at
    if usage:
        for model, count, tokens_in, tokens_out, cached, written, latest in reading.rows(
            "SELECT model, count(*), sum(input_tokens), sum(output_tokens), sum(cached_tokens), "
            "sum(cache_write_tokens), max(created_at) FROM pygents_usage WHERE session_id = ? "
            "GROUP BY model ORDER BY model",
            [session],
        ):
            by_model[str(model)] = Usage(int(tokens_in), int(tokens_out), int(cached), int(written))
            calls += int(count)
            last = max(last, as_text(latest))
    return SessionRow(
        row.session_id,
        row.created_at,
        row.messages,
        row.live_tokens,
        row.input_tokens,
        row.output_tokens,
        row.preview,
        int(runs),
        int(archived),
        calls,
        last,
        by_model,
        row.owner,
    )


def find_session(reading: Reading, wanted: str, where: str) -> str:
    """The id of the session `wanted` names (its id or a unique prefix), as the CLI finds it.

    Raises:
        CliError: No session, or a prefix of several (the command line's errors).
    """
    found = reading.rows(
        "SELECT session_id FROM pygents_sessions WHERE session_id = ? "
        "OR substr(session_id, 1, ?) = ? ORDER BY created_at DESC, session_id DESC",
        [wanted, len(wanted), wanted],
    )
    return pick_session(wanted, [str(session) for (session,) in found], where)


def checkpoints(reading: Reading, session_id: str, count: int) -> list[CheckpointInfo]:
    """The agents' checkpoints in the session of `count` live messages as `list_checkpoints()`
    gives them, each at its live message (none before SQLite schema 17 and PostgreSQL 14);
    neither the states nor the messages are read."""
    if "pygents_checkpoints" not in reading.tables():
        return []
    rows = [
        checkpoint_sql.Row(str(agent), int(position), as_text(created), b"", int(size))
        for agent, position, created, size in reading.rows(
            "SELECT c.agent, c.position, c.created_at, length(d.data) "
            "FROM pygents_checkpoints AS c JOIN pygents_checkpoint_data AS d "
            "ON d.digest = c.digest WHERE c.session_id = ? ORDER BY c.position, c.agent",
            [session_id],
        )
    ]
    if not rows:
        return []
    return [
        CheckpointInfo(row.agent, at, row.created_at, row.size)
        for at, row in checkpoint_sql.live(rows, _positions(reading, session_id, count))
    ]


def _positions(reading: Reading, session_id: str, count: int) -> Sequence[int]:
    """The positions of the session's `count` live messages, in order: from the first and
    the last alone when none is missing between them (no `clear_run` left a gap)."""
    live = _live(reading, session_id)
    # One aggregate a statement: SQLite answers a lone min() or max() from the index.
    (first,), (last,) = (
        reading.rows(f"SELECT {edge}(position) FROM {live} WHERE session_id = ?", [session_id])[0]
        for edge in ("min", "max")
    )
    if first is None:
        return []
    if int(last) - int(first) + 1 == count:
        return range(int(first), int(last) + 1)
    rows = reading.rows(
        f"SELECT position FROM {live} WHERE session_id = ? ORDER BY position", [session_id]
    )
    return [int(position) for (position,) in rows]


def session_row(reading: Reading, session_id: str) -> SessionRow:
    """The session's row, with its activity (the session exists: `find_session` said so)."""
    row = reading.rows(
        f"SELECT {_columns(reading)} FROM pygents_sessions WHERE session_id = ?", [session_id]
    )[0]
    return _with_activity(reading, _row(row), "pygents_usage" in reading.tables())


@dataclass(frozen=True, slots=True)
class Entry:
    """A stored message and where it is: its index in the live history (or the archive)."""

    index: int
    position: int  # the store's position (live) or row id (archive)
    run_id: str | None
    tokens: int
    message: Message


def _entries(session_id: str, offset: int, rows: list[tuple[Any, ...]]) -> list[Entry]:
    return [
        Entry(
            offset + number,
            int(position),
            run_id,
            int(tokens),
            decode(session_id, int(position), int(tokens), as_bytes(data)),
        )
        for number, (position, run_id, tokens, data) in enumerate(rows)
    ]


def messages_page(reading: Reading, session_id: str, offset: int, limit: int) -> list[Entry]:
    """The live messages `offset` to `offset + limit`, in order."""
    live = _live(reading, session_id)
    return _page(reading, session_id, live, "position", offset, limit)


def archive_page(reading: Reading, session_id: str, offset: int, limit: int) -> list[Entry]:
    """The archived messages `offset` to `offset + limit`, in the order they left."""
    archive = _archive(reading, session_id)
    return _page(reading, session_id, archive, "id", offset, limit)


def _page(
    reading: Reading, session_id: str, table: str, key: str, offset: int, limit: int
) -> list[Entry]:
    """Rows `offset` to `offset + limit` of `table` (live or archive) in the order of `key`."""
    rows = reading.rows(
        f"SELECT {key}, run_id, tokens, data FROM {table} WHERE session_id = ? "
        f"ORDER BY {key} LIMIT ? OFFSET ?",
        [session_id, limit, offset],
    )
    return _entries(session_id, offset, rows)


def live_history(reading: Reading, session_id: str) -> list[Entry]:
    """The whole live history (the window page's strategies need it)."""
    return messages_page(reading, session_id, 0, _NO_LIMIT)


@dataclass(frozen=True, slots=True)
class Covered:
    """What one summary replaced: archive indexes `first` to `last`, and the summary it folded in.

    Attributes:
        summary: The summary's place: `("archive", i)` or `("live", i)`.
        first: The first archive index it covers.
        last: The last archive index it covers (`first - 1` when none).
        folded: The archive index of the earlier summary it updated, or None.
    """

    summary: tuple[str, int]
    first: int
    last: int
    folded: int | None


@dataclass(frozen=True, slots=True)
class Summaries:
    """The summaries of a session's compactions, and the archive they account for.

    Each compaction archives the live history's old part (with the summary
    before it) and writes one summary in its place, so the archive is a run of
    compactions, each ending where the next summary's archived copy begins.
    """

    archived: int
    covers: list[Covered]

    def covering(self, archive_index: int) -> Covered | None:
        """The summary that replaced the archived message at `archive_index`, if one did."""
        for covered in self.covers:
            if covered.first <= archive_index <= covered.last:
                return covered
        return None

    def of_live(self, index: int) -> Covered | None:
        """What the live summary at `index` covers, or None if that is no summary."""
        for covered in self.covers:
            if covered.summary == ("live", index):
                return covered
        return None


def summaries(reading: Reading, session_id: str) -> Summaries:
    """Where the session's summaries are, and which archived messages each one replaced."""
    archive = _archive(reading, session_id)
    (archived,) = reading.rows(
        f"SELECT count(*) FROM {archive} WHERE session_id = ?", [session_id]
    )[0]
    archived = int(archived)
    marks: list[int] = []
    if archived:
        candidates = reading.rows(
            f"SELECT id, tokens, data FROM {archive} WHERE session_id = ? AND "
            f"{reading.contains('data')} ORDER BY id",
            [session_id, _SUMMARY_NEEDLE],
        )
        for row_id, tokens, data in candidates:
            if is_summary(decode(session_id, int(row_id), int(tokens), as_bytes(data))):
                (before,) = reading.rows(
                    f"SELECT count(*) FROM {archive} WHERE session_id = ? AND id < ?",
                    [session_id, row_id],
                )[0]
                marks.append(int(before))
    covers: list[Covered] = []
    start, folded = 0, None
    for mark in marks:
        covers.append(Covered(("archive", mark), start, mark - 1, folded))
        start, folded = mark + 1, mark
    # The live summary sits after the system messages at the head of the history.
    for entry in messages_page(reading, session_id, 0, SUMMARY_HEAD):
        if is_summary(entry.message):
            covers.append(Covered(("live", entry.index), start, archived - 1, folded))
            break
    return Summaries(archived, covers)


def is_carried(message: Message) -> bool:
    """True for archived messages a compaction copies forward or rebuilds (system, bridge)."""
    return message.role == "system" or is_bridge(message)


def find_tool_block(
    reading: Reading, session_id: str, call_id: str, *, result: bool, near: int
) -> int | None:
    """The live index of the message with call `call_id`'s result (or call), or None.

    A result comes after its call and a call before its result, so the search
    runs from position `near` forward (results) or backward (calls).
    """
    live = _live(reading, session_id)
    order, compare = ("ASC", ">=") if result else ("DESC", "<=")
    rows = reading.rows(
        f"SELECT position, tokens, data FROM {live} WHERE session_id = ? AND "
        f"position {compare} ? AND {reading.contains('data')} ORDER BY position {order} LIMIT 20",
        [session_id, near, orjson.dumps(call_id)],
    )
    wanted = ToolResultBlock if result else ToolUseBlock
    for position, tokens, data in rows:
        message = decode(session_id, int(position), int(tokens), as_bytes(data))
        for block in message.content:
            if isinstance(block, wanted) and call_id in (
                getattr(block, "tool_use_id", None),
                getattr(block, "id", None),
            ):
                (before,) = reading.rows(
                    f"SELECT count(*) FROM {live} WHERE session_id = ? AND position < ?",
                    [session_id, position],
                )[0]
                return int(before)
    return None


_LINKS: Final = ("parent_session", "call_id", "subagent_session")


def _has_links(reading: Reading) -> bool:
    """Whether usage records say which sub-agent call they came from (schema 7, PostgreSQL 5)."""
    return set(_LINKS) <= reading.columns("pygents_usage")


def usage_records(reading: Reading, session_id: str) -> list[UsageRecord]:
    """The session's usage records, one per model call, in order (none before schema 3).

    Each holds its `WindowRecord` when the database has them (SQLite schema 12,
    PostgreSQL 10) and the call recorded one.
    """
    if "pygents_usage" not in reading.tables():
        return []
    links = ", ".join(_LINKS) if _has_links(reading) else "NULL, NULL, NULL"
    window = "window_record" if "window_record" in reading.columns("pygents_usage") else "NULL"
    return [
        UsageRecord(
            Usage(int(tokens_in), int(tokens_out), int(cached), int(written)),
            run_id=run_id,
            model=str(model),
            estimated_input_tokens=None if estimated is None else int(estimated),
            created_at=as_text(created),
            parent_session=parent,
            call_id=call_id,
            subagent_session=subagent,
            window=None if sent is None else WindowRecord.from_dict(orjson.loads(as_text(sent))),
        )
        for (
            run_id,
            model,
            tokens_in,
            tokens_out,
            cached,
            written,
            estimated,
            created,
            parent,
            call_id,
            subagent,
            sent,
        ) in reading.rows(
            "SELECT run_id, model, input_tokens, output_tokens, cached_tokens, "
            f"cache_write_tokens, estimated_input_tokens, created_at, {links}, {window} "
            "FROM pygents_usage WHERE session_id = ? ORDER BY id",
            [session_id],
        )
    ]


def subagent_calls(
    reading: Reading, session_id: str, call_ids: Collection[str]
) -> dict[str, str | None]:
    """Which of `call_ids` (calls in `session_id`'s transcript) ran a sub-agent, and its transcript.

    Each maps to the session of the sub-agent's transcript, or None when it
    was not kept (`as_tool(keep="none")`). The records may be in any session
    (a sub-agent's sub-agent is counted in the first caller's): they are
    found by their `parent_session`, which is indexed.
    """
    if not call_ids or "pygents_usage" not in reading.tables() or not _has_links(reading):
        return {}
    wanted = sorted(call_ids)
    marks = ", ".join("?" * len(wanted))
    rows = reading.rows(
        "SELECT call_id, subagent_session FROM pygents_usage "
        f"WHERE parent_session = ? AND call_id IN ({marks}) ORDER BY id",
        [session_id, *wanted],
    )
    found: dict[str, str | None] = {}
    for call_id, subagent in rows:  # a call's first record is its own sub-agent's first call
        found.setdefault(str(call_id), None if subagent is None else str(subagent))
    return found
