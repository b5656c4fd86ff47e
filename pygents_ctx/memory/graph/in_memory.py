"""`InMemoryGraphStore`: a knowledge graph in dicts, for tests and short-lived agents."""

from __future__ import annotations

from collections.abc import Iterable

from pygents_ctx.errors import EntityNotFoundError
from pygents_ctx.memory._shared import check_key
from pygents_ctx.memory.graph.base import (
    Entity,
    Relationship,
    Subgraph,
    check_depth,
    check_entities,
    check_relationships,
    check_types,
)

__all__ = ["InMemoryGraphStore"]

_Key = tuple[str, str, str]  # (source, target, type)


class InMemoryGraphStore:
    """A `GraphStore` in the process: entities and relationships in dicts.

    Each entity keeps the set of relationships touching it, so `neighbors()`
    visits only what it walks. Entities and relationships are kept as the
    JSON of their properties, as the database stores keep them: what you get
    back is a fresh copy, never an object someone else can change.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx.memory import Entity, Relationship
        >>> async def main():
        ...     graph = InMemoryGraphStore()
        ...     await graph.upsert_entities([Entity("ada", "person"), Entity("engine", "machine")])
        ...     await graph.upsert_relationships([Relationship("ada", "engine", "wrote_about")])
        ...     return (await graph.neighbors("engine")).entity_ids()
        >>> asyncio.run(main())
        ['engine', 'ada']
    """

    __slots__ = ("_adjacent", "_entities", "_relationships")

    def __init__(self) -> None:
        self._entities: dict[str, tuple[str, bytes]] = {}  # id -> (type, properties JSON)
        self._relationships: dict[_Key, bytes] = {}
        # id -> the keys of the relationships touching it (a dict as an ordered set)
        self._adjacent: dict[str, dict[_Key, None]] = {}

    def __repr__(self) -> str:
        return (
            f"<InMemoryGraphStore {len(self._entities)} entities, "
            f"{len(self._relationships)} relationships>"
        )

    async def upsert_entities(self, entities: Iterable[Entity]) -> None:
        """Store `entities`, replacing the type and properties of ids already stored.

        Raises:
            TypeError: Something in `entities` is not an `Entity`.
            ValueError: An id appears twice in the batch.
        """
        for entity in check_entities(entities):
            self._entities[entity.id] = (entity.type, entity._json)
            self._adjacent.setdefault(entity.id, {})

    async def upsert_relationships(self, relationships: Iterable[Relationship]) -> None:
        """Store `relationships`, replacing the properties of triples already stored.

        Raises:
            TypeError: Something in `relationships` is not a `Relationship`.
            ValueError: A `(source, target, type)` appears twice in the batch.
            EntityNotFoundError: An end is not in the graph (nothing is stored).
        """
        batch = check_relationships(relationships)
        for relationship in batch:
            for end in (relationship.source, relationship.target):
                if end not in self._entities:
                    raise missing_end(relationship, end)
        for relationship in batch:
            key = relationship.key
            self._relationships[key] = relationship._json
            self._adjacent[relationship.source][key] = None
            self._adjacent[relationship.target][key] = None

    async def get_entity(self, entity_id: str) -> Entity | None:
        """The entity stored under `entity_id`, or None."""
        check_key("entity_id", entity_id)
        found = self._entities.get(entity_id)
        return None if found is None else self._entity(entity_id, *found)

    async def entities(self, *, type: str | None = None) -> list[Entity]:
        """Every entity (of `type`, when given), sorted by id."""
        if type is not None:
            check_key("type", type)
        return [
            self._entity(entity_id, kind, data)
            for entity_id, (kind, data) in sorted(self._entities.items())
            if type is None or kind == type
        ]

    async def relationships(
        self, entity_id: str | None = None, *, types: Iterable[str] | None = None
    ) -> list[Relationship]:
        """Every relationship (touching `entity_id`, of `types`), sorted by key.

        Raises:
            EntityNotFoundError: `entity_id` is not in the graph.
        """
        walked = check_types(types, "types")
        keys: Iterable[_Key] = (
            self._relationships if entity_id is None else self._touching(entity_id)
        )
        allowed = None if walked is None else set(walked)
        return [
            self._relationship(key) for key in sorted(keys) if allowed is None or key[2] in allowed
        ]

    async def delete_entity(self, entity_id: str) -> bool:
        """Remove an entity and every relationship touching it; whether it was there."""
        check_key("entity_id", entity_id)
        if entity_id not in self._entities:
            return False
        for key in self._adjacent.pop(entity_id):
            del self._relationships[key]
            other = key[1] if key[0] == entity_id else key[0]
            del self._adjacent[other][key]
        del self._entities[entity_id]
        return True

    async def delete_relationship(self, source: str, target: str, type: str) -> bool:
        """Remove one relationship; whether it was there."""
        key = (check_key("source", source), check_key("target", target), check_key("type", type))
        if self._relationships.pop(key, None) is None:
            return False
        del self._adjacent[source][key]
        del self._adjacent[target][key]
        return True

    async def neighbors(
        self,
        entity_id: str,
        depth: int = 1,
        relationship_types: Iterable[str] | None = None,
    ) -> Subgraph:
        """The subgraph within `depth` hops of `entity_id`, walked breadth first both ways.

        Raises:
            EntityNotFoundError: `entity_id` is not in the graph.
            ValueError: `depth` is negative.
        """
        hops = check_depth(depth)
        walked = check_types(relationship_types)
        self._touching(entity_id)  # checks that it exists
        allowed = None if walked is None else frozenset(walked)
        distances, keys = breadth_first(self._adjacent, entity_id, hops, allowed)
        entities = [self._entity(node, *self._entities[node]) for node in distances]
        entities[1:] = sorted(entities[1:], key=lambda e: (distances[e.id], e.id))
        return Subgraph(entities, [self._relationship(key) for key in sorted(keys)], distances)

    def _touching(self, entity_id: str) -> dict[_Key, None]:
        check_key("entity_id", entity_id)
        found = self._adjacent.get(entity_id)
        if found is None:
            raise EntityNotFoundError(f"no entity {entity_id!r} in the graph")
        return found

    def _entity(self, entity_id: str, kind: str, data: bytes) -> Entity:
        return Entity._stored(entity_id, kind, data)

    def _relationship(self, key: _Key) -> Relationship:
        return Relationship._stored(*key, self._relationships[key])


def breadth_first(
    adjacent: dict[str, dict[_Key, None]],
    start: str,
    depth: int,
    allowed: frozenset[str] | None,
) -> tuple[dict[str, int], set[_Key]]:
    """Walk `depth` hops from `start` over relationships of the `allowed` types, both ways.

    Returns:
        Each entity reached with its distance (the start first, then in the
        order reached), and the keys of the relationships with an end closer
        than `depth`.
    """
    distances = {start: 0}
    walked: set[_Key] = set()
    frontier = [start]
    for hop in range(1, depth + 1):
        reached = []
        for node in frontier:
            for key in adjacent[node]:
                if allowed is not None and key[2] not in allowed:
                    continue
                walked.add(key)
                other = key[1] if key[0] == node else key[0]
                if other not in distances:
                    distances[other] = hop
                    reached.append(other)
        frontier = reached
    return distances, walked


def missing_end(relationship: Relationship, end: str) -> EntityNotFoundError:
    """The error for a relationship whose end `end` is not in the graph."""
    return EntityNotFoundError(
        f"relationship {relationship.key} names entity {end!r}, which is not in the graph; "
        "add it with upsert_entities() first (nothing was stored)"
    )
