"""`InMemoryGraphStore`: a knowledge graph in dicts, for tests and short-lived agents."""

from __future__ import annotations

from collections.abc import Iterable

from pygents_ctx.errors import EntityNotFoundError
from pygents_ctx.memory.graph.base import Entity, GraphStoreBase, Relationship, Subgraph, Walk

__all__ = ["InMemoryGraphStore"]

_Key = tuple[str, str, str]  # (source, target, type)


class InMemoryGraphStore(GraphStoreBase):
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

    __slots__ = ("_adjacent", "_links", "_nodes")

    def __init__(self) -> None:
        self._nodes: dict[str, tuple[str, bytes]] = {}  # id -> (type, properties JSON)
        self._links: dict[_Key, bytes] = {}
        # id -> the keys of the relationships touching it (a dict as an ordered set)
        self._adjacent: dict[str, dict[_Key, None]] = {}

    def __repr__(self) -> str:
        return f"<InMemoryGraphStore {len(self._nodes)} entities, {len(self._links)} relationships>"

    async def _upsert_entities(self, batch: list[Entity]) -> None:
        for entity in batch:
            self._nodes[entity.id] = (entity.type, entity._json)
            self._adjacent.setdefault(entity.id, {})

    async def _upsert_relationships(self, batch: list[Relationship]) -> None:
        for relationship in batch:
            for end in (relationship.source, relationship.target):
                if end not in self._nodes:
                    raise missing_end(relationship, end)
        for relationship in batch:
            key = relationship.key
            self._links[key] = relationship._json
            self._adjacent[relationship.source][key] = None
            self._adjacent[relationship.target][key] = None

    async def _get_entity(self, entity_id: str) -> Entity | None:
        found = self._nodes.get(entity_id)
        return None if found is None else Entity._stored(entity_id, *found)

    async def _entities(self, kind: str | None) -> list[Entity]:
        return [
            Entity._stored(entity_id, stored_kind, data)
            for entity_id, (stored_kind, data) in sorted(self._nodes.items())
            if kind is None or stored_kind == kind
        ]

    async def _relationships(
        self, entity_id: str | None, types: list[str] | None
    ) -> list[Relationship]:
        keys: Iterable[_Key] = self._links if entity_id is None else self._touching(entity_id)
        allowed = None if types is None else set(types)
        return [
            self._relationship(key) for key in sorted(keys) if allowed is None or key[2] in allowed
        ]

    async def _delete_entity(self, entity_id: str) -> bool:
        if entity_id not in self._nodes:
            return False
        for key in self._adjacent.pop(entity_id):
            del self._links[key]
            other = key[1] if key[0] == entity_id else key[0]
            del self._adjacent[other][key]
        del self._nodes[entity_id]
        return True

    async def _delete_relationship(self, key: _Key) -> bool:
        if self._links.pop(key, None) is None:
            return False
        del self._adjacent[key[0]][key]
        del self._adjacent[key[1]][key]
        return True

    async def _neighbors(self, start: str, depth: int, types: list[str] | None) -> Subgraph:
        self._touching(start)  # checks that it exists
        allowed = None if types is None else frozenset(types)
        distances, keys = breadth_first(self._adjacent, start, depth, allowed)
        entities = [Entity._stored(node, *self._nodes[node]) for node in distances]
        entities[1:] = sorted(entities[1:], key=lambda e: (distances[e.id], e.id))
        return Subgraph(entities, [self._relationship(key) for key in sorted(keys)], distances)

    def _touching(self, entity_id: str) -> dict[_Key, None]:
        found = self._adjacent.get(entity_id)
        if found is None:
            raise EntityNotFoundError(f"no entity {entity_id!r} in the graph")
        return found

    def _relationship(self, key: _Key) -> Relationship:
        return Relationship._stored(*key, self._links[key])


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
    walk = Walk(start, depth)
    walked: set[_Key] = set()
    while walk.going:
        others = []
        for node in walk.frontier:
            for key in adjacent[node]:
                if allowed is None or key[2] in allowed:
                    walked.add(key)
                    others.append(key[1] if key[0] == node else key[0])
        walk.step(others)
    return walk.distances, walked


def missing_end(relationship: Relationship, end: str) -> EntityNotFoundError:
    """The error for a relationship whose end `end` is not in the graph."""
    return EntityNotFoundError(
        f"relationship {relationship.key} names entity {end!r}, which is not in the graph; "
        "add it with upsert_entities() first (nothing was stored)"
    )
