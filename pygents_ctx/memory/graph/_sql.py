"""The graph store on a database, written once over the SQL dialects.

`SQLiteGraphStore` and `PostgresGraphStore` are this store on their own
connection: each gives a `GraphSQL`, its tables' migrations and its
operations as functions of a connection (the SQL differs: JSON arrays or
array parameters, the walk's recursive step, the locks taken), and its tables
say how a transaction and a read snapshot run. Which operations write in one
transaction, and which read several times from one snapshot, is said here once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, Generic

from pygents_ctx.memory._shared import AnyTables, Migrations, check_key
from pygents_ctx.memory.graph.base import Entity, GraphStoreBase, Relationship, Subgraph

__all__ = ["GraphSQL", "SQLGraphStore", "stored_relationships", "walked"]


def stored_relationships(rows: Iterable[Sequence[Any]]) -> list[Relationship]:
    """The relationships of `(source, target, type, properties)` rows, in key order."""
    return sorted((Relationship._stored(*row) for row in rows), key=_key)


def _key(relationship: Relationship) -> tuple[str, str, str]:
    return relationship.key


def walked(
    rows: Iterable[Sequence[Any]], relationships: list[Relationship], distances: dict[str, int]
) -> Subgraph:
    """A walk's `Subgraph`: its entities, of `(id, type, properties)` rows, nearest first."""
    entities = sorted((Entity._stored(*row) for row in rows), key=lambda e: (distances[e.id], e.id))
    return Subgraph(entities, relationships, {e.id: distances[e.id] for e in entities})


@dataclass(frozen=True, slots=True)
class GraphSQL:
    """One dialect's migrations and operations, each a function of `(graph, ..., db)`."""

    migrations: Migrations  # what builds its tables, oldest version first
    upsert_entities: Callable[..., Any]  # (graph, batch, db), in a transaction
    upsert_relationships: Callable[..., Any]  # (graph, batch, db), in a transaction
    get_entity: Callable[..., Any]  # (graph, id, db) -> Entity | None
    entities: Callable[..., Any]  # (graph, type or None, db) -> list[Entity] by id
    relationships: Callable[..., Any]  # (graph, types or None, db) -> sorted list
    touching: Callable[..., Any]  # (graph, id, types, db) -> sorted list, in a snapshot
    delete_entity: Callable[..., Any]  # (graph, id, db) -> bool
    delete_relationship: Callable[..., Any]  # (graph, key, db) -> bool
    neighbors: Callable[..., Any]  # (graph, start, depth, types, db) -> Subgraph, in a snapshot


class SQLGraphStore(GraphStoreBase, Generic[AnyTables]):
    """A `GraphStore` whose graphs are rows of a database (see the module docs)."""

    __slots__ = ("_graph", "_tables")

    _sql: ClassVar[GraphSQL]

    def __init__(self, tables: type[AnyTables], conn: object, graph: str) -> None:
        self._tables: AnyTables = tables(
            conn, type(self).__name__, self._sql.migrations, "pygents_graph_schema", "graph store"
        )
        self._graph = check_key("graph", graph)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._tables.where!r}, graph={self._graph!r})"

    @property
    def graph(self) -> str:
        """The name of the graph this store works on."""
        return self._graph

    async def _upsert_entities(self, batch: list[Entity]) -> None:
        await self._tables.transaction(partial(self._sql.upsert_entities, self._graph, batch))

    async def _upsert_relationships(self, batch: list[Relationship]) -> None:
        work = partial(self._sql.upsert_relationships, self._graph, batch)
        await self._tables.transaction(work)

    async def _get_entity(self, entity_id: str) -> Entity | None:
        found: Entity | None = await self._tables.run(
            partial(self._sql.get_entity, self._graph, entity_id)
        )
        return found

    async def _entities(self, kind: str | None) -> list[Entity]:
        found: list[Entity] = await self._tables.run(partial(self._sql.entities, self._graph, kind))
        return found

    async def _relationships(
        self, entity_id: str | None, types: list[str] | None
    ) -> list[Relationship]:
        found: list[Relationship]
        if entity_id is None:
            found = await self._tables.run(partial(self._sql.relationships, self._graph, types))
        else:
            work = partial(self._sql.touching, self._graph, entity_id, types)
            found = await self._tables.snapshot(work)
        return found

    async def _delete_entity(self, entity_id: str) -> bool:
        work = partial(self._sql.delete_entity, self._graph, entity_id)
        deleted: bool = await self._tables.run(work)
        return deleted

    async def _delete_relationship(self, key: tuple[str, str, str]) -> bool:
        work = partial(self._sql.delete_relationship, self._graph, key)
        deleted: bool = await self._tables.run(work)
        return deleted

    async def _neighbors(self, start: str, depth: int, types: list[str] | None) -> Subgraph:
        # One recursive query (see each dialect's module docs), then the reads after it.
        work = partial(self._sql.neighbors, self._graph, start, depth, types)
        found: Subgraph = await self._tables.snapshot(work)
        return found
