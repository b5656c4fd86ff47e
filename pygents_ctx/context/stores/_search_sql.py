"""The SQL of `search`, for the SQLite and PostgreSQL stores.

SQLite: an FTS5 table, `pygents_search`, indexes each row of
`pygents_message_data` (live or archived: the data never moves, so compaction
costs the index nothing). It is an external-content table over the view
`pygents_search_source`, which reads a message's searchable text out of its
JSON in SQL (the same parts as `search.indexed_text`). Since version 16 it is
kept lazily: an append writes nothing to it (FTS5 writes a segment per
transaction, which cost each append several times its own write). The one-row
`pygents_search_state` holds `indexed_through`: every data row with an id up to
it is indexed, none above it. A search first catches up (`catch_up_sqlite`: the
rows above it indexed in one transaction, the mark moved to the newest id);
triggers keep the rows at or below it in step with updates and deletes, and
index at once a row inserted at or below it (an id reused after the newest row
was deleted, or given by other SQL). So whoever writes, the stores, the command
line's import, SQL of your own, the next search finds it.

PostgreSQL: each row of `pygents_messages` and `pygents_archive` carries
`search`, a `tsvector` of the message's words (`search.words`, computed by the
store as it writes, so the two backends split text alike), and `message_id`, a
number from one sequence that moves with the message into the archive. GIN
indexes serve the queries. A row written by other SQL without `search` is not
found.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any, Final

import orjson

from pygents_ctx.context.stores._common import decode
from pygents_ctx.context.stores._lineage import Segment, postgres_segments, sqlite_segments
from pygents_ctx.context.stores.search import (
    INDEXED_CHARACTERS,
    HistoryHit,
    bounded,
    indexed_text,
    query_words,
    words,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from pygents_ctx.context.messages import Message

__all__ = [
    "INDEXED_CHARACTERS",
    "POSTGRES_INDEX",
    "POSTGRES_MESSAGE_IDS",
    "SQLITE_INDEX",
    "SQLITE_LAZY_INDEX",
    "SQLITE_OFFLOADED_WORDS",
    "behind_sqlite",
    "catch_up_sqlite",
    "indexed_words",
    "live_ids_postgres",
    "live_ids_sqlite",
    "messages_postgres",
    "messages_sqlite",
    "search_postgres",
    "search_sqlite",
]

# The searchable text of a message's JSON (`{data}`) as version 8 read it: the string
# leaves of its content named `text` (text blocks, also inside tool results), `content`
# (a tool result's string) and `name` (a tool call's), and every string in a tool
# call's input. Data that is not JSON (written by other SQL) has none, and is still written.
_SOURCE_TEXT_V8: Final = """(
    SELECT group_concat(part.value, char(10))
    FROM json_tree(
        CASE WHEN json_valid(CAST({data} AS TEXT)) THEN CAST({data} AS TEXT) ELSE '{{}}' END,
        '$.content'
    ) AS part
    WHERE part.type = 'text'
      AND (part.key IN ('text', 'content', 'name') OR instr(part.fullkey, '].input') > 0)
)"""

# Since version 14 (`search.indexed_text`): also the `words` an offloaded result's stub
# keeps of its whole text. The rows written before hold none: their index stays valid.
_SOURCE_TEXT: Final = """(
    SELECT group_concat(part.value, char(10))
    FROM json_tree(
        CASE WHEN json_valid(CAST({data} AS TEXT)) THEN CAST({data} AS TEXT) ELSE '{{}}' END,
        '$.content'
    ) AS part
    WHERE part.type = 'text'
      AND (
        part.key IN ('text', 'content', 'name') OR instr(part.fullkey, '].input') > 0
        OR (part.key = 'words' AND substr(part.path, -10) = '.offloaded')
      )
)"""


def _view(source: str) -> str:
    """The view of each message's searchable text (the index's external content)."""
    return f"""
        CREATE VIEW pygents_search_source (id, text) AS
        SELECT id, {source.format(data="data")} FROM pygents_message_data
        """


def _triggers(source: str) -> tuple[str, ...]:
    """The triggers that keep the index in step with `pygents_message_data`."""
    return (
        f"""
        CREATE TRIGGER pygents_message_data_indexed AFTER INSERT ON pygents_message_data BEGIN
            INSERT INTO pygents_search (rowid, text)
            VALUES (NEW.id, {source.format(data="NEW.data")});
        END
        """,
        f"""
        CREATE TRIGGER pygents_message_data_unindexed AFTER DELETE ON pygents_message_data BEGIN
            INSERT INTO pygents_search (pygents_search, rowid, text)
            VALUES ('delete', OLD.id, {source.format(data="OLD.data")});
        END
        """,
        f"""
        CREATE TRIGGER pygents_message_data_reindexed AFTER UPDATE OF data ON pygents_message_data
        BEGIN
            INSERT INTO pygents_search (pygents_search, rowid, text)
            VALUES ('delete', OLD.id, {source.format(data="OLD.data")});
            INSERT INTO pygents_search (rowid, text)
            VALUES (NEW.id, {source.format(data="NEW.data")});
        END
        """,
    )


SQLITE_INDEX: Final = (
    _view(_SOURCE_TEXT_V8),
    """
    CREATE VIRTUAL TABLE pygents_search USING fts5 (
        text, content = 'pygents_search_source', content_rowid = 'id', tokenize = 'unicode61'
    )
    """,
    *_triggers(_SOURCE_TEXT_V8),
    # Finding a hit's row from its data: without these, a scan of the session.
    "CREATE INDEX pygents_live_rows_by_data ON pygents_live_rows (data_id)",
    "CREATE INDEX pygents_archive_rows_by_data ON pygents_archive_rows (data_id)",
    # The messages written before this version.
    "INSERT INTO pygents_search (rowid, text) SELECT id, text FROM pygents_search_source",
)

# Version 16: the rows indexed are those with ids up to `indexed_through`. The
# triggers touch only those (an FTS5 'delete' of a row it never indexed would
# corrupt it); a row inserted above the mark waits for the next search.
_INDEXED: Final = "(SELECT indexed_through FROM pygents_search_state WHERE id = 1)"
_LAZY_TRIGGERS: Final = (
    f"""
    CREATE TRIGGER pygents_message_data_indexed AFTER INSERT ON pygents_message_data
    WHEN NEW.id <= {_INDEXED}
    BEGIN
        INSERT INTO pygents_search (rowid, text)
        VALUES (NEW.id, {_SOURCE_TEXT.format(data="NEW.data")});
    END
    """,
    f"""
    CREATE TRIGGER pygents_message_data_unindexed AFTER DELETE ON pygents_message_data
    WHEN OLD.id <= {_INDEXED}
    BEGIN
        INSERT INTO pygents_search (pygents_search, rowid, text)
        VALUES ('delete', OLD.id, {_SOURCE_TEXT.format(data="OLD.data")});
    END
    """,
    f"""
    CREATE TRIGGER pygents_message_data_reindexed AFTER UPDATE OF data ON pygents_message_data
    WHEN OLD.id <= {_INDEXED}
    BEGIN
        INSERT INTO pygents_search (pygents_search, rowid, text)
        VALUES ('delete', OLD.id, {_SOURCE_TEXT.format(data="OLD.data")});
        INSERT INTO pygents_search (rowid, text)
        VALUES (NEW.id, {_SOURCE_TEXT.format(data="NEW.data")});
    END
    """,
)

SQLITE_LAZY_INDEX: Final = (
    """
    CREATE TABLE pygents_search_state (
        id              INTEGER PRIMARY KEY CHECK (id = 1),
        indexed_through INTEGER NOT NULL
    )
    """,
    # Every row there is now was indexed by the eager triggers.
    "INSERT INTO pygents_search_state (id, indexed_through) "
    "SELECT 1, coalesce(max(id), 0) FROM pygents_message_data",
    "DROP TRIGGER pygents_message_data_indexed",
    "DROP TRIGGER pygents_message_data_unindexed",
    "DROP TRIGGER pygents_message_data_reindexed",
    *_LAZY_TRIGGERS,
)

_BEHIND: Final = f"SELECT max(id) > {_INDEXED} FROM pygents_message_data"


def behind_sqlite(db: sqlite3.Connection) -> bool:
    """Whether rows were written that the index does not hold yet."""
    return bool(db.execute(_BEHIND).fetchone()[0])


def catch_up_sqlite(db: sqlite3.Connection) -> None:
    """Index the data rows above `indexed_through` and move it to the newest id.

    Run it in a write transaction (`BEGIN IMMEDIATE`), so that no row is
    written between the two statements.
    """
    db.execute(
        "INSERT INTO pygents_search (rowid, text) "
        f"SELECT id, text FROM pygents_search_source WHERE id > {_INDEXED}"
    )
    db.execute(
        "UPDATE pygents_search_state "
        "SET indexed_through = (SELECT max(id) FROM pygents_message_data) "
        "WHERE id = 1 AND (SELECT max(id) FROM pygents_message_data) > indexed_through"
    )


SQLITE_OFFLOADED_WORDS: Final = (
    # Version 14: the words offloaded results keep are indexed too. No row written
    # before holds any, so what the index holds of them is still what the new view reads.
    "DROP TRIGGER pygents_message_data_indexed",
    "DROP TRIGGER pygents_message_data_unindexed",
    "DROP TRIGGER pygents_message_data_reindexed",
    "DROP VIEW pygents_search_source",
    _view(_SOURCE_TEXT),
    *_triggers(_SOURCE_TEXT),
)

# The best `limit` matches of the session (not among `:seen`, a JSON array of ids),
# and where each one is. FTS5 ranks by BM25 (smaller is better); the data id
# breaks ties, newest first. `{scope}` says which data is the session's.
# Where each of the `hits` (a CTE of data ids and ranks) is in the session, with its data.
_SQLITE_LOCATE: Final = """
    SELECT hits.rank, hits.id, 0, r.position, r.run_id, r.tokens, d.data
    FROM hits
    JOIN pygents_live_rows AS r ON r.data_id = hits.id
    JOIN pygents_message_data AS d ON d.id = hits.id
    UNION ALL
    SELECT hits.rank, hits.id, 1, r.id, r.run_id, r.tokens, d.data
    FROM hits
    JOIN pygents_archive_rows AS r ON r.data_id = hits.id
    JOIN pygents_message_data AS d ON d.id = hits.id
"""

_SQLITE_SEARCH: Final = (
    """
    WITH hits AS (
        SELECT d.id AS id, bm25(pygents_search) AS rank
        FROM pygents_search AS s JOIN pygents_message_data AS d ON d.id = s.rowid
        WHERE pygents_search MATCH :query AND {scope}
          AND s.rowid NOT IN (SELECT value FROM json_each(:seen))
        ORDER BY rank, s.rowid DESC
        LIMIT :limit
    )
"""
    + _SQLITE_LOCATE
    + "ORDER BY 1, 2 DESC"
)

# The session's messages by data id: `{which}` is above `:after`, or among `:ids` (a JSON
# array); each a search of the primary key.
_SQLITE_MESSAGES: Final = (
    """
    WITH hits AS (
        SELECT d.id AS id, 0.0 AS rank
        FROM pygents_message_data AS d
        WHERE {scope} AND {which}
        ORDER BY d.id
        LIMIT :limit
    )
"""
    + _SQLITE_LOCATE
    + "ORDER BY 2"
)


def search_sqlite(
    session_id: str, query: str, limit: int, db: sqlite3.Connection
) -> list[HistoryHit]:
    """Messages with every word first (FTS5 `AND`), then, if too few, with any (`OR`).

    Each word is quoted, so no character of the query is FTS5 syntax. Run it
    in a read transaction, so that both reads see one moment of the session,
    after `catch_up_sqlite`.
    """
    terms = [f'"{word}"' for word in query_words(query)]
    segments = sqlite_segments(db, session_id)
    # A session's own data is all its own; a fork also reads ranges of other sessions' rows.
    scope = _OWN if len(segments) == 1 else _INHERITED
    sql = _SQLITE_SEARCH.format(scope=scope)
    hits: list[HistoryHit] = []
    for joiner in (" AND ", " OR ")[: 1 if len(terms) == 1 else 2]:
        if not terms or len(hits) == limit:
            break
        rows = db.execute(
            sql,
            {
                "query": joiner.join(terms),
                "session": session_id,
                "segments": orjson.dumps(segments).decode(),
                "limit": limit - len(hits),
                "seen": orjson.dumps([hit.id for hit in hits]).decode(),
            },
        ).fetchall()
        hits += [_hit(session_id, *row) for row in rows]
    return hits


_OWN: Final = "d.session_id = :session"
_SEGMENTS: Final = """(
    SELECT json_extract(value, '$[0]') AS source, json_extract(value, '$[1]') AS low,
           json_extract(value, '$[2]') AS high, json_extract(value, '$[3]') AS top
    FROM json_each(:segments)
)"""
_INHERITED: Final = f"""(
    d.session_id IN (SELECT json_extract(value, '$[0]') FROM json_each(:segments))
    AND (
        EXISTS (
            SELECT 1 FROM pygents_live_rows AS r JOIN {_SEGMENTS} AS seg
                ON r.session_id = seg.source AND r.position >= seg.low AND r.position < seg.high
            WHERE r.data_id = d.id
        )
        OR EXISTS (
            SELECT 1 FROM pygents_archive_rows AS r JOIN {_SEGMENTS} AS seg
                ON r.session_id = seg.source AND r.id <= seg.top
            WHERE r.data_id = d.id
        )
    )
)"""


def messages_sqlite(
    session_id: str, after: int, ids: list[int] | None, limit: int, db: sqlite3.Connection
) -> list[HistoryHit]:
    """The session's messages with a data id above `after` (and in `ids`, if given), by
    id: `ContextStore.messages_after` and `messages_with_ids`. Run it in a read transaction."""
    segments = sqlite_segments(db, session_id)
    scope = _OWN if len(segments) == 1 else _INHERITED
    which = "d.id > :after" if ids is None else "d.id IN (SELECT value FROM json_each(:ids))"
    rows = db.execute(
        _SQLITE_MESSAGES.format(scope=scope, which=which),
        {
            "session": session_id,
            "segments": orjson.dumps(segments).decode(),
            "after": after,
            "ids": None if ids is None else orjson.dumps(ids).decode(),
            "limit": limit,
        },
    ).fetchall()
    return [_hit(session_id, *row) for row in rows]


def live_ids_sqlite(session_id: str, count: int, db: sqlite3.Connection) -> list[int] | None:
    """The data ids of the session's oldest `count` live messages; None for a fork that
    still reads another session's rows (compacting it copies them under new ids)."""
    if len(sqlite_segments(db, session_id)) > 1:
        return None
    rows = db.execute(
        "SELECT data_id FROM pygents_live_rows WHERE session_id = ? ORDER BY position LIMIT ?",
        (session_id, count),
    )
    return [row[0] for row in rows]


def _hit(
    session_id: str,
    rank: float,
    message_id: int,
    archived: int,
    position: int,
    run_id: str | None,
    tokens: int,
    data: bytes,
) -> HistoryHit:
    return HistoryHit(
        message=decode(session_id, position, tokens, data),
        archived=bool(archived),
        position=position,
        id=message_id,
        score=-rank,
        run_id=run_id,
    )


# -- PostgreSQL -------------------------------------------------------------------


def indexed_words(message: Message) -> str:
    """The words of `message` PostgreSQL indexes (`indexed_text`: its offloaded results'
    kept words too), joined by spaces: the first `INDEXED_CHARACTERS` characters of them
    (a `tsvector` holds at most 1 MB)."""
    return bounded(" ".join(words(indexed_text(message))))


async def _backfill(conn: AsyncConnection[Any]) -> None:
    """Index the messages written before the search columns existed."""
    for table, key in (("pygents_messages", "ctid"), ("pygents_archive", "ctid")):
        cursor = await conn.execute(f"SELECT {key}::text, data FROM {table}", binary=True)
        rows = await cursor.fetchall()
        updates = [(indexed_words(decode("", 0, 0, data)), ctid) for ctid, data in rows]
        if updates:
            async with conn.cursor() as writer:
                await writer.executemany(
                    f"UPDATE {table} SET search = to_tsvector('simple', %s) WHERE {key} = %s::tid",
                    updates,
                )


POSTGRES_INDEX: Final[tuple[Any, ...]] = (
    "CREATE SEQUENCE pygents_message_ids",
    "ALTER TABLE pygents_messages "
    "ADD COLUMN message_id bigint NOT NULL DEFAULT nextval('pygents_message_ids'), "
    "ADD COLUMN search tsvector",
    "ALTER TABLE pygents_archive "
    "ADD COLUMN message_id bigint NOT NULL DEFAULT nextval('pygents_message_ids'), "
    "ADD COLUMN search tsvector",
    _backfill,
    # A short pending list (256 kB, not 4 MB): every search scans it whole until a
    # write or a vacuum flushes it into the index.
    "CREATE INDEX pygents_messages_search ON pygents_messages USING gin (search) "
    "WITH (gin_pending_list_limit = 256)",
    "CREATE INDEX pygents_archive_search ON pygents_archive USING gin (search) "
    "WITH (gin_pending_list_limit = 256)",
)

# The session's rows are those of its segments (`_lineage`): its own, and for a fork
# the ranges it reads of other sessions'. Ranked on the keys alone; the data of the
# `limit` best only is read. `ts_rank`'s
# normalization 1 divides by 1 + the log of the message's length: as BM25, a short
# message that holds the words beats a long one that mentions them in passing.
_POSTGRES_SEARCH: Final = """
    WITH q AS (SELECT to_tsquery('simple', %(query)s) AS q),
    seg AS (
        SELECT * FROM unnest(%(sources)s::text[], %(lows)s::bigint[], %(highs)s::bigint[],
                             %(tops)s::bigint[]) AS seg (source, low, high, top)
    ),
    hits AS (
        SELECT * FROM (
            SELECT ts_rank(m.search, q.q, 1) AS score, m.message_id, false AS archived,
                   m.session_id AS source, m.position AS key
            FROM pygents_messages AS m JOIN seg ON m.session_id = seg.source
                AND m.position >= seg.low AND m.position < seg.high, q
            WHERE m.search @@ q.q AND m.message_id <> ALL (%(seen)s::bigint[])
            UNION ALL
            SELECT ts_rank(a.search, q.q, 1), a.message_id, true, a.session_id, a.id
            FROM pygents_archive AS a JOIN seg ON a.session_id = seg.source
                AND a.id <= seg.top, q
            WHERE a.search @@ q.q AND a.message_id <> ALL (%(seen)s::bigint[])
        ) AS found
        ORDER BY score DESC, message_id DESC
        LIMIT %(limit)s
    )
    SELECT hits.score, hits.message_id, hits.archived, hits.key, m.run_id, m.tokens, m.data
    FROM hits JOIN pygents_messages AS m
        ON NOT hits.archived AND m.session_id = hits.source AND m.position = hits.key
    UNION ALL
    SELECT hits.score, hits.message_id, hits.archived, hits.key, a.run_id, a.tokens, a.data
    FROM hits JOIN pygents_archive AS a ON hits.archived AND a.id = hits.key
    ORDER BY 1 DESC, 2 DESC
"""


async def search_postgres(
    session_id: str, query: str, limit: int, conn: AsyncConnection[Any]
) -> list[HistoryHit]:
    """Messages with every word first (`&`), then, if too few, with any (`|`).

    The words are letters and digits only (`words`): nothing in them is
    tsquery syntax. Both reads are in one repeatable-read transaction.
    """
    terms = query_words(query)
    if not terms:
        return []
    hits: list[HistoryHit] = []
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        segments = await postgres_segments(conn, session_id)
        sources, lows, highs, tops = (list(column) for column in zip(*segments, strict=True))
        for joiner in (" & ", " | ")[: 1 if len(terms) == 1 else 2]:
            cursor = await conn.execute(
                _POSTGRES_SEARCH,
                {
                    "query": joiner.join(terms),
                    "sources": sources,
                    "lows": lows,
                    "highs": highs,
                    "tops": tops,
                    "limit": limit - len(hits),
                    "seen": [hit.id for hit in hits],
                },
                binary=True,
            )
            hits += [
                HistoryHit(
                    message=decode(session_id, key, tokens, data),
                    archived=archived,
                    position=key,
                    id=message_id,
                    score=float(score),
                    run_id=run_id,
                )
                for score, message_id, archived, key, run_id, tokens, data in (
                    await cursor.fetchall()
                )
            ]
            if len(hits) == limit:
                break
    return hits


# The session's messages by `message_id`: `{which}` is above `after`, or among `ids`. Each
# segment's live rows and archive rows are read in id order from their `(session_id,
# message_id)` index (version 14), at most `limit` rows of each.
_POSTGRES_MESSAGES: Final = """
    WITH seg AS (
        SELECT * FROM unnest(%(sources)s::text[], %(lows)s::bigint[], %(highs)s::bigint[],
                             %(tops)s::bigint[]) AS seg (source, low, high, top)
    ),
    hits AS (
        SELECT * FROM (
            SELECT found.* FROM seg, LATERAL (
                SELECT m.message_id, false AS archived, m.session_id AS source, m.position AS key
                FROM pygents_messages AS m
                WHERE m.session_id = seg.source AND m.position >= seg.low
                  AND m.position < seg.high AND m.{which}
                ORDER BY m.message_id LIMIT %(limit)s
            ) AS found
            UNION ALL
            SELECT found.* FROM seg, LATERAL (
                SELECT a.message_id, true, a.session_id, a.id
                FROM pygents_archive AS a
                WHERE a.session_id = seg.source AND a.id <= seg.top AND a.{which}
                ORDER BY a.message_id LIMIT %(limit)s
            ) AS found
        ) AS found
        ORDER BY message_id
        LIMIT %(limit)s
    )
    SELECT hits.message_id, hits.archived, hits.key, m.run_id, m.tokens, m.data
    FROM hits JOIN pygents_messages AS m
        ON NOT hits.archived AND m.session_id = hits.source AND m.position = hits.key
    UNION ALL
    SELECT hits.message_id, hits.archived, hits.key, a.run_id, a.tokens, a.data
    FROM hits JOIN pygents_archive AS a ON hits.archived AND a.id = hits.key
    ORDER BY 1
"""

POSTGRES_MESSAGE_IDS: Final = (
    # Version 14: a session's messages found by id (`messages_after`, `messages_with_ids`).
    "CREATE INDEX pygents_messages_by_message_id ON pygents_messages (session_id, message_id)",
    "CREATE INDEX pygents_archive_by_message_id ON pygents_archive (session_id, message_id)",
)


async def messages_postgres(
    session_id: str, after: int, ids: list[int] | None, limit: int, conn: AsyncConnection[Any]
) -> list[HistoryHit]:
    """`messages_sqlite` on PostgreSQL, by `message_id`, in one repeatable-read transaction."""
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        segments = await postgres_segments(conn, session_id)
        sources, lows, highs, tops = (list(column) for column in zip(*segments, strict=True))
        which = "message_id > %(after)s" if ids is None else "message_id = ANY (%(ids)s)"
        cursor = await conn.execute(
            _POSTGRES_MESSAGES.replace("{which}", which),
            {
                "sources": sources,
                "lows": lows,
                "highs": highs,
                "tops": tops,
                "after": after,
                "ids": ids,
                "limit": limit,
            },
            binary=True,
        )
        return [
            HistoryHit(
                message=decode(session_id, key, tokens, data),
                archived=archived,
                position=key,
                id=message_id,
                score=0.0,
                run_id=run_id,
            )
            for message_id, archived, key, run_id, tokens, data in await cursor.fetchall()
        ]


async def live_ids_postgres(
    session_id: str, count: int, conn: AsyncConnection[Any]
) -> list[int] | None:
    """The `message_id`s of the session's oldest `count` live messages, a fork's inherited
    ones included (a fork that copies them keeps their ids)."""
    ids: list[int] = []
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        segments: list[Segment] = await postgres_segments(conn, session_id)
        for source, low, high, _ in segments:
            if len(ids) == count:
                break
            cursor = await conn.execute(
                "SELECT message_id FROM pygents_messages WHERE session_id = %s "
                "AND position >= %s AND position < %s ORDER BY position LIMIT %s",
                (source, low, high, count - len(ids)),
            )
            ids += [row[0] for row in await cursor.fetchall()]
    return ids
