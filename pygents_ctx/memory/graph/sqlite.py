"""`SQLiteGraphStore`: knowledge graphs in a SQLite file, walked one query a hop.

Tables (made on first use; their version is in `pygents_graph_schema`):

- `pygents_graph_entities`: `(graph, id)` -> `type`, `properties` (orjson bytes).
- `pygents_graph_relationships`: `(graph, source, target, type)` -> `properties`,
  with foreign keys to both ends that cascade on delete, and an index by
  target so that walking a relationship backwards is a lookup too.

`neighbors()` walks breadth first, one query a hop: the other ends of the
relationships of the entities reached last (two index lookups), of which
those not reached before are the next hop's. Each entity is expanded once,
so the walk ends where the graph does, whatever `depth`. The entities and the
relationships walked are then read in the same read transaction. The store
is `SQLGraphStore` over these operations.
"""

from __future__ import annotations

import sqlite3
from typing import Final

import orjson

from pygents_ctx.context.stores._worker import SQLiteConnection
from pygents_ctx.errors import EntityNotFoundError
from pygents_ctx.memory._shared import OnSQLite, SQLiteTables
from pygents_ctx.memory.graph._sql import GraphSQL, SQLGraphStore, stored_relationships, walked
from pygents_ctx.memory.graph.base import Entity, Relationship, Subgraph, Walk
from pygents_ctx.memory.graph.in_memory import missing_end

__all__ = ["SQLiteGraphStore"]

Db = sqlite3.Connection

_V1: Final = (
    """
    CREATE TABLE pygents_graph_entities (
        graph      TEXT NOT NULL,
        id         TEXT NOT NULL,
        type       TEXT NOT NULL,
        properties BLOB NOT NULL,
        PRIMARY KEY (graph, id)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX pygents_graph_entities_by_type ON pygents_graph_entities (graph, type)",
    """
    CREATE TABLE pygents_graph_relationships (
        graph      TEXT NOT NULL,
        source     TEXT NOT NULL,
        target     TEXT NOT NULL,
        type       TEXT NOT NULL,
        properties BLOB NOT NULL,
        PRIMARY KEY (graph, source, target, type),
        FOREIGN KEY (graph, source) REFERENCES pygents_graph_entities (graph, id)
            ON DELETE CASCADE,
        FOREIGN KEY (graph, target) REFERENCES pygents_graph_entities (graph, id)
            ON DELETE CASCADE
    ) WITHOUT ROWID
    """,
    """
    CREATE INDEX pygents_graph_relationships_by_target
    ON pygents_graph_relationships (graph, target)
    """,
)
MIGRATIONS: Final = (_V1,)

# One hop of a walk: the other ends of the relationships of the entities `:ids` (a JSON
# array), both ways; `{types}` is empty or a filter on `:types`, a JSON array of types.
# Without INDEXED BY, SQLite's planner scans the whole graph for the second half rather
# than look the targets up in their index (a hundred times slower on 100,000 of them).
_STEP: Final = """
    SELECT r.target FROM pygents_graph_relationships AS r
    WHERE r.graph = :graph AND r.source IN (SELECT value FROM json_each(:ids)) {types}
    UNION ALL
    SELECT r.source FROM pygents_graph_relationships AS r
        INDEXED BY pygents_graph_relationships_by_target
    WHERE r.graph = :graph AND r.target IN (SELECT value FROM json_each(:ids)) {types}
"""
_TYPE_FILTER: Final = "AND r.type IN (SELECT value FROM json_each(:types))"

_ENTITIES_IN: Final = """
    SELECT id, type, properties FROM pygents_graph_entities
    WHERE graph = :graph AND id IN (SELECT value FROM json_each(:ids))
"""
# The relationships with an end among `:ids` (the entities closer than `depth`), looked
# up by both ends as `_STEP` does.
_TOUCHING: Final = """
    SELECT source, target, type, properties FROM pygents_graph_relationships AS r
    WHERE graph = :graph AND source IN (SELECT value FROM json_each(:ids)) {types}
    UNION
    SELECT source, target, type, properties FROM pygents_graph_relationships AS r
        INDEXED BY pygents_graph_relationships_by_target
    WHERE graph = :graph AND target IN (SELECT value FROM json_each(:ids)) {types}
"""


def _upsert_entities(graph: str, batch: list[Entity], db: Db) -> None:
    db.executemany(
        "INSERT INTO pygents_graph_entities (graph, id, type, properties) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (graph, id) DO UPDATE SET "
        "type = excluded.type, properties = excluded.properties",
        [(graph, e.id, e.type, e._json) for e in batch],
    )


def _upsert_relationships(graph: str, batch: list[Relationship], db: Db) -> None:
    ends = sorted({end for r in batch for end in (r.source, r.target)})
    present = {
        row[0]
        for row in db.execute(
            "SELECT id FROM pygents_graph_entities "
            "WHERE graph = ? AND id IN (SELECT value FROM json_each(?))",
            (graph, orjson.dumps(ends)),
        )
    }
    for relationship in batch:
        for end in (relationship.source, relationship.target):
            if end not in present:
                raise missing_end(relationship, end)
    db.executemany(
        "INSERT INTO pygents_graph_relationships (graph, source, target, type, properties) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (graph, source, target, type) "
        "DO UPDATE SET properties = excluded.properties",
        [(graph, r.source, r.target, r.type, r._json) for r in batch],
    )


def _get_entity(graph: str, entity_id: str, db: Db) -> Entity | None:
    row = db.execute(
        "SELECT type, properties FROM pygents_graph_entities WHERE graph = ? AND id = ?",
        (graph, entity_id),
    ).fetchone()
    return None if row is None else Entity._stored(entity_id, row[0], row[1])


def _entities(graph: str, kind: str | None, db: Db) -> list[Entity]:
    if kind is None:
        rows = db.execute(
            "SELECT id, type, properties FROM pygents_graph_entities WHERE graph = ? ORDER BY id",
            (graph,),
        )
    else:
        rows = db.execute(
            "SELECT id, type, properties FROM pygents_graph_entities "
            "WHERE graph = ? AND type = ? ORDER BY id",
            (graph, kind),
        )
    return [Entity._stored(*row) for row in rows]


def _require(graph: str, entity_id: str, db: Db) -> None:
    found = db.execute(
        "SELECT 1 FROM pygents_graph_entities WHERE graph = ? AND id = ?", (graph, entity_id)
    ).fetchone()
    if found is None:
        raise EntityNotFoundError(f"no entity {entity_id!r} in the graph {graph!r}")


def _relationships(graph: str, types: list[str] | None, db: Db) -> list[Relationship]:
    select = "SELECT source, target, type, properties FROM pygents_graph_relationships"
    if types is None:
        rows = db.execute(f"{select} WHERE graph = ?", (graph,)).fetchall()
    else:
        rows = db.execute(
            f"{select} WHERE graph = ? AND type IN (SELECT value FROM json_each(?))",
            (graph, orjson.dumps(types)),
        ).fetchall()
    return stored_relationships(rows)


def _relationships_of(
    graph: str, entity_id: str, types: list[str] | None, db: Db
) -> list[Relationship]:
    _require(graph, entity_id, db)
    rows = _touching(graph, [entity_id], types, db)
    return stored_relationships(rows)


def _touching(
    graph: str, ids: list[str], types: list[str] | None, db: Db
) -> list[tuple[str, str, str, bytes]]:
    sql = _TOUCHING.format(types="" if types is None else _TYPE_FILTER)
    params = {"graph": graph, "ids": orjson.dumps(ids), "types": orjson.dumps(types)}
    rows: list[tuple[str, str, str, bytes]] = db.execute(sql, params).fetchall()
    return rows


def _neighbors(graph: str, start: str, depth: int, types: list[str] | None, db: Db) -> Subgraph:
    _require(graph, start, db)
    step = _STEP.format(types="" if types is None else _TYPE_FILTER)
    params = {"graph": graph, "types": orjson.dumps(types)}
    walk = Walk(start, depth)
    while walk.going:
        others = db.execute(step, {**params, "ids": orjson.dumps(walk.frontier)}).fetchall()
        walk.step(other for (other,) in others)
    ids = {"graph": graph, "ids": orjson.dumps(list(walk.distances))}
    rows = db.execute(_ENTITIES_IN, ids).fetchall()
    inner = walk.inside()
    touching = _touching(graph, inner, types, db) if inner else []
    return walked(rows, stored_relationships(touching), walk.distances)


def _delete_entity(graph: str, entity_id: str, db: Db) -> bool:
    cursor = db.execute(
        "DELETE FROM pygents_graph_entities WHERE graph = ? AND id = ?", (graph, entity_id)
    )
    return cursor.rowcount > 0


def _delete_relationship(graph: str, key: tuple[str, str, str], db: Db) -> bool:
    cursor = db.execute(
        "DELETE FROM pygents_graph_relationships "
        "WHERE graph = ? AND source = ? AND target = ? AND type = ?",
        (graph, *key),
    )
    return cursor.rowcount > 0


_SQL: Final = GraphSQL(
    MIGRATIONS,
    _upsert_entities,
    _upsert_relationships,
    _get_entity,
    _entities,
    _relationships,
    _relationships_of,
    _delete_entity,
    _delete_relationship,
    _neighbors,
)


class SQLiteGraphStore(SQLGraphStore[SQLiteTables], OnSQLite):
    """A `GraphStore` in a SQLite database: survives restarts, shared safely by processes.

    Many graphs live in one database, each under its own name; several stores
    (and the context stores) can share one connection. The tables are made
    the first time the store is used.

    Args:
        conn: An open connection, from `await connect(path)`.
        graph: Which graph of the database this store works on.

    Raises:
        TypeError: `conn` is not a `SQLiteConnection`.
        ValueError: `graph` is empty.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import connect
        >>> from pygents_ctx.memory import Entity, Relationship
        >>> async def main():
        ...     async with connect(":memory:") as conn:
        ...         graph = SQLiteGraphStore(conn, graph="papers")
        ...         await graph.upsert_entities([Entity("a", "paper"), Entity("b", "paper")])
        ...         await graph.upsert_relationships([Relationship("a", "b", "cites")])
        ...         found = await graph.neighbors("b", depth=2)
        ...         return found.entity_ids(), found.distances
        >>> asyncio.run(main())
        (['b', 'a'], {'b': 0, 'a': 1})
    """

    __slots__ = ()

    _sql = _SQL

    def __init__(self, conn: SQLiteConnection, *, graph: str = "default") -> None:
        super().__init__(SQLiteTables, conn, graph)
