"""`PostgresGraphStore`: knowledge graphs in PostgreSQL, walked one query a hop.

Needs the `postgres` extra (psycopg 3). The tables mirror the SQLite store's
(version in `pygents_graph_schema`); properties are `bytea` of orjson, as
the context store keeps its messages, so they hold exactly what the other
backends hold. `neighbors()` walks breadth first, one query a hop that looks
up the relationships of the entities reached last in both directions (two
index lookups); each entity is expanded once, so the walk ends where the
graph does. It runs in a repeatable-read transaction with the reads after it.
The store is `SQLGraphStore` over these operations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from pygents_ctx.context.stores.postgres import PostgresConnection
from pygents_ctx.errors import EntityNotFoundError
from pygents_ctx.memory._shared import OnPostgres, PostgresTables
from pygents_ctx.memory.graph._sql import GraphSQL, SQLGraphStore, stored_relationships, walked
from pygents_ctx.memory.graph.base import Entity, Relationship, Subgraph, Walk
from pygents_ctx.memory.graph.in_memory import missing_end

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PostgresGraphStore"]


_V1: Final = (
    """
    CREATE TABLE pygents_graph_entities (
        graph      text  NOT NULL,
        id         text  NOT NULL,
        type       text  NOT NULL,
        properties bytea NOT NULL,
        PRIMARY KEY (graph, id)
    )
    """,
    "CREATE INDEX pygents_graph_entities_by_type ON pygents_graph_entities (graph, type)",
    """
    CREATE TABLE pygents_graph_relationships (
        graph      text  NOT NULL,
        source     text  NOT NULL,
        target     text  NOT NULL,
        type       text  NOT NULL,
        properties bytea NOT NULL,
        PRIMARY KEY (graph, source, target, type),
        FOREIGN KEY (graph, source) REFERENCES pygents_graph_entities (graph, id)
            ON DELETE CASCADE,
        FOREIGN KEY (graph, target) REFERENCES pygents_graph_entities (graph, id)
            ON DELETE CASCADE
    )
    """,
    """
    CREATE INDEX pygents_graph_relationships_by_target
    ON pygents_graph_relationships (graph, target)
    """,
)
MIGRATIONS: Final = (_V1,)

# One hop of a walk: the other ends of the relationships of the entities `%(ids)s`, both
# ways; `%(types)s` is NULL (walk every type) or the array of types to walk.
_STEP: Final = """
    SELECT r.target FROM pygents_graph_relationships AS r
    WHERE r.graph = %(graph)s AND r.source = ANY (%(ids)s::text[])
      AND (%(types)s::text[] IS NULL OR r.type = ANY (%(types)s::text[]))
    UNION ALL
    SELECT r.source FROM pygents_graph_relationships AS r
    WHERE r.graph = %(graph)s AND r.target = ANY (%(ids)s::text[])
      AND (%(types)s::text[] IS NULL OR r.type = ANY (%(types)s::text[]))
"""
_TOUCHING: Final = """
    SELECT source, target, type, properties FROM pygents_graph_relationships AS r
    WHERE graph = %(graph)s AND source = ANY (%(ids)s::text[])
      AND (%(types)s::text[] IS NULL OR r.type = ANY (%(types)s::text[]))
    UNION
    SELECT source, target, type, properties FROM pygents_graph_relationships AS r
    WHERE graph = %(graph)s AND target = ANY (%(ids)s::text[])
      AND (%(types)s::text[] IS NULL OR r.type = ANY (%(types)s::text[]))
"""


async def _upsert_entities(graph: str, batch: list[Entity], conn: AsyncConnection[Any]) -> None:
    await conn.execute(
        "INSERT INTO pygents_graph_entities (graph, id, type, properties) "
        "SELECT %s, e.id, e.type, e.properties "
        "FROM unnest(%s::text[], %s::text[], %s::bytea[]) AS e (id, type, properties) "
        "ON CONFLICT (graph, id) DO UPDATE SET "
        "type = excluded.type, properties = excluded.properties",
        (graph, [e.id for e in batch], [e.type for e in batch], [e._json for e in batch]),
    )


async def _upsert_relationships(
    graph: str, batch: list[Relationship], conn: AsyncConnection[Any]
) -> None:
    ends = sorted({end for r in batch for end in (r.source, r.target)})
    # Lock the ends (FOR KEY SHARE, as the foreign keys would): none can be
    # deleted between this check and the insert.
    cursor = await conn.execute(
        "SELECT id FROM pygents_graph_entities WHERE graph = %s AND id = ANY (%s::text[]) "
        "FOR KEY SHARE",
        (graph, ends),
    )
    present = {row[0] for row in await cursor.fetchall()}
    for relationship in batch:
        for end in (relationship.source, relationship.target):
            if end not in present:
                raise missing_end(relationship, end)
    await conn.execute(
        "INSERT INTO pygents_graph_relationships (graph, source, target, type, properties) "
        "SELECT %s, r.source, r.target, r.type, r.properties "
        "FROM unnest(%s::text[], %s::text[], %s::text[], %s::bytea[]) "
        "AS r (source, target, type, properties) "
        "ON CONFLICT (graph, source, target, type) "
        "DO UPDATE SET properties = excluded.properties",
        (
            graph,
            [r.source for r in batch],
            [r.target for r in batch],
            [r.type for r in batch],
            [r._json for r in batch],
        ),
    )


async def _get_entity(graph: str, entity_id: str, conn: AsyncConnection[Any]) -> Entity | None:
    cursor = await conn.execute(
        "SELECT type, properties FROM pygents_graph_entities WHERE graph = %s AND id = %s",
        (graph, entity_id),
    )
    row = await cursor.fetchone()
    return None if row is None else Entity._stored(entity_id, row[0], row[1])


async def _entities(graph: str, kind: str | None, conn: AsyncConnection[Any]) -> list[Entity]:
    cursor = await conn.execute(
        "SELECT id, type, properties FROM pygents_graph_entities "
        "WHERE graph = %s AND (%s::text IS NULL OR type = %s::text)",
        (graph, kind, kind),
    )
    # Sorted here, by code point as the other backends sort: the server's collation may differ.
    return sorted((Entity._stored(*row) for row in await cursor.fetchall()), key=_by_id)


async def _require(graph: str, entity_id: str, conn: AsyncConnection[Any]) -> None:
    cursor = await conn.execute(
        "SELECT 1 FROM pygents_graph_entities WHERE graph = %s AND id = %s", (graph, entity_id)
    )
    if await cursor.fetchone() is None:
        raise EntityNotFoundError(f"no entity {entity_id!r} in the graph {graph!r}")


async def _touching(
    graph: str, ids: list[str] | None, types: list[str] | None, conn: AsyncConnection[Any]
) -> list[Relationship]:
    if ids is None:
        cursor = await conn.execute(
            "SELECT source, target, type, properties FROM pygents_graph_relationships "
            "WHERE graph = %s AND (%s::text[] IS NULL OR type = ANY (%s::text[]))",
            (graph, types, types),
        )
    else:
        cursor = await conn.execute(_TOUCHING, {"graph": graph, "ids": ids, "types": types})
    rows = await cursor.fetchall()
    return stored_relationships(rows)


async def _relationships(
    graph: str, types: list[str] | None, conn: AsyncConnection[Any]
) -> list[Relationship]:
    return await _touching(graph, None, types, conn)


async def _relationships_of(
    graph: str, entity_id: str, types: list[str] | None, conn: AsyncConnection[Any]
) -> list[Relationship]:
    await _require(graph, entity_id, conn)
    return await _touching(graph, [entity_id], types, conn)


async def _neighbors(
    graph: str, start: str, depth: int, types: list[str] | None, conn: AsyncConnection[Any]
) -> Subgraph:
    await _require(graph, start, conn)
    walk = Walk(start, depth)
    while walk.going:
        cursor = await conn.execute(_STEP, {"graph": graph, "ids": walk.frontier, "types": types})
        walk.step(other for (other,) in await cursor.fetchall())
    cursor = await conn.execute(
        "SELECT id, type, properties FROM pygents_graph_entities "
        "WHERE graph = %s AND id = ANY (%s::text[])",
        (graph, list(walk.distances)),
    )
    rows = await cursor.fetchall()
    inner = walk.inside()
    relationships = await _touching(graph, inner, types, conn) if inner else []
    return walked(rows, relationships, walk.distances)


async def _delete_entity(graph: str, entity_id: str, conn: AsyncConnection[Any]) -> bool:
    cursor = await conn.execute(
        "DELETE FROM pygents_graph_entities WHERE graph = %s AND id = %s", (graph, entity_id)
    )
    return cursor.rowcount > 0


async def _delete_relationship(
    graph: str, key: tuple[str, str, str], conn: AsyncConnection[Any]
) -> bool:
    cursor = await conn.execute(
        "DELETE FROM pygents_graph_relationships "
        "WHERE graph = %s AND source = %s AND target = %s AND type = %s",
        (graph, *key),
    )
    return cursor.rowcount > 0


def _by_id(entity: Entity) -> str:
    return entity.id


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


class PostgresGraphStore(SQLGraphStore[PostgresTables], OnPostgres):
    """A `GraphStore` in PostgreSQL: shared safely by workers on many machines.

    Behaves as `SQLiteGraphStore` does, method for method: many graphs in one
    database, each batch one transaction, the tables made on first use.

    Args:
        conn: An open connection, from `await connect_postgres(dsn)`.
        graph: Which graph of the database this store works on.

    Raises:
        TypeError: `conn` is not a `PostgresConnection`.
        ValueError: `graph` is empty or holds a NUL or a lone surrogate.
    """

    __slots__ = ()

    _sql = _SQL

    def __init__(self, conn: PostgresConnection, *, graph: str = "default") -> None:
        super().__init__(PostgresTables, conn, graph)
