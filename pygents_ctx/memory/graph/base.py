"""The graph store contract: entities, relationships between them, and neighbourhoods.

A knowledge graph holds *entities* (an id, a type such as `"person"`, and
JSON properties) and *relationships* (a typed, directed link from a source
entity to a target entity, with JSON properties of its own). A relationship is
known by `(source, target, type)`: storing the same triple again replaces its
properties.

`neighbors(entity, depth)` walks relationships in either direction, breadth
first, and returns the `Subgraph` within `depth` hops. Cycles are ordinary in
a knowledge graph (A knows B knows C knows A) and are walked safely: each
entity appears once, at its shortest distance. The one cycle refused is a
relationship from an entity to itself, which says nothing a property could not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Protocol, TypeVar, runtime_checkable

from pygents_ctx._checks import each_once, instances, whole_number
from pygents_ctx._resources import injectable
from pygents_ctx.memory._shared import check_key, decode_properties, encode_properties

__all__ = ["Entity", "GraphStore", "Relationship", "Subgraph"]

_Read = TypeVar("_Read", "Entity", "Relationship")


def _keep_properties(made: _Read, owner: str) -> None:
    """Give `made` its own copy of its properties, as the stores give them back, and their JSON.

    Raises:
        TypeError: The properties are not a mapping of str to JSON values.
    """
    properties, encoded = encode_properties(made.properties, owner)
    object.__setattr__(made, "properties", properties)
    object.__setattr__(made, "_json", encoded)


def _read_back(cls: type[_Read], data: bytes, **fields: str) -> _Read:
    """A `cls` read back from a store: its key `fields`, and the properties JSON `data` holds.

    Nothing is checked again, and the JSON is kept as it is, not encoded
    again: all of it was checked when written.
    """
    made = object.__new__(cls)
    for name, value in fields.items():
        object.__setattr__(made, name, value)
    object.__setattr__(made, "properties", decode_properties(data))
    object.__setattr__(made, "_json", data)
    return made


@dataclass(frozen=True, slots=True)
class Entity:
    """A node of the graph.

    Args:
        id: What the entity is known by in its graph (a non-empty str).
        type: What kind of thing it is, e.g. `"person"` or `"paper"`.
        properties: JSON-compatible facts about it (str keys). The entity keeps
            its own copy, as the stores give it back (a tuple becomes a list).

    Raises:
        TypeError: A field has the wrong type, or a property value is not JSON.
        ValueError: `id` or `type` is empty, or holds a NUL or a lone surrogate.

    Examples:
        >>> Entity("ada", "person", {"born": 1815}).properties
        {'born': 1815}
    """

    id: str
    type: str
    properties: Mapping[str, Any] = field(default_factory=dict)
    _json: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_key("Entity id", self.id)
        check_key(f"Entity {self.id!r} type", self.type)
        _keep_properties(self, f"Entity {self.id!r} properties")

    def __hash__(self) -> int:
        return hash((Entity, self.id, self.type))

    @classmethod
    def _stored(cls, entity_id: str, kind: str, data: bytes) -> Entity:
        """An entity as a store read it back: checked when it was written."""
        return _read_back(cls, data, id=entity_id, type=kind)


@dataclass(frozen=True, slots=True)
class Relationship:
    """A typed link from `source` to `target`, walked both ways by `neighbors`.

    Args:
        source: The id of the entity it goes from.
        target: The id of the entity it goes to (not `source`).
        type: What the link means, e.g. `"cites"`.
        properties: JSON-compatible facts about the link.

    Raises:
        TypeError: A field has the wrong type, or a property value is not JSON.
        ValueError: A field is empty or holds a NUL or a lone surrogate, or
            `source` is `target` (a self-loop).

    Examples:
        >>> Relationship("ada", "babbage", "worked_with").key
        ('ada', 'babbage', 'worked_with')
    """

    source: str
    target: str
    type: str
    properties: Mapping[str, Any] = field(default_factory=dict)
    _json: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_key("Relationship source", self.source)
        check_key("Relationship target", self.target)
        check_key("Relationship type", self.type)
        if self.source == self.target:
            raise ValueError(
                f"Relationship {self.type!r} goes from entity {self.source!r} to itself; "
                "a graph store refuses self-loops: keep such a fact as a property of the entity"
            )
        _keep_properties(self, f"Relationship {self.key} properties")

    @property
    def key(self) -> tuple[str, str, str]:
        """`(source, target, type)`: what the relationship is known by."""
        return self.source, self.target, self.type

    def __hash__(self) -> int:
        return hash((Relationship, self.source, self.target, self.type))

    @classmethod
    def _stored(cls, source: str, target: str, kind: str, data: bytes) -> Relationship:
        """A relationship as a store read it back: checked when it was written."""
        return _read_back(cls, data, source=source, target=target, type=kind)


@dataclass(frozen=True, slots=True)
class Subgraph:
    """What `neighbors()` found: entities within reach, and the relationships walked.

    Attributes:
        entities: The start entity first, then the others by distance, then by id.
        relationships: Every relationship (of the types walked) with an end
            closer than `depth` to the start, so both ends are in `entities`;
            sorted by `(source, target, type)`.
        distances: Each entity's id to its hop count from the start (0 for it).
    """

    entities: list[Entity]
    relationships: list[Relationship]
    distances: dict[str, int]

    def entity_ids(self) -> list[str]:
        """The ids of `entities`, in order."""
        return [entity.id for entity in self.entities]


@injectable
@runtime_checkable
class GraphStore(Protocol):
    """A knowledge graph: entities, relationships, and breadth-first neighbourhoods.

    Implemented by `InMemoryGraphStore`, `SQLiteGraphStore` and
    `PostgresGraphStore`, which behave alike method for method. Every method
    checks all of its input before it changes anything: a batch is stored
    whole or not at all. A tool reaches the store of the agent that runs it
    by annotating a parameter `GraphStore`, when the agent was given
    `resources={GraphStore: store}`.
    """

    async def upsert_entities(self, entities: Iterable[Entity]) -> None:
        """Store `entities`, replacing the type and properties of ids already stored.

        Raises:
            TypeError: Something in `entities` is not an `Entity`.
            ValueError: An id appears twice in the batch.
        """
        ...

    async def upsert_relationships(self, relationships: Iterable[Relationship]) -> None:
        """Store `relationships`, replacing the properties of triples already stored.

        Raises:
            TypeError: Something in `relationships` is not a `Relationship`.
            ValueError: A `(source, target, type)` appears twice in the batch.
            EntityNotFoundError: An end is not in the graph (add it first).
        """
        ...

    async def get_entity(self, entity_id: str) -> Entity | None:
        """The entity stored under `entity_id`, or None."""
        ...

    async def entities(self, *, type: str | None = None) -> list[Entity]:
        """Every entity (of `type`, when given), sorted by id."""
        ...

    async def relationships(
        self, entity_id: str | None = None, *, types: Iterable[str] | None = None
    ) -> list[Relationship]:
        """Every relationship (touching `entity_id`, of `types`), sorted by key.

        Raises:
            EntityNotFoundError: `entity_id` is not in the graph.
        """
        ...

    async def delete_entity(self, entity_id: str) -> bool:
        """Remove an entity and every relationship touching it; whether it was there."""
        ...

    async def delete_relationship(self, source: str, target: str, type: str) -> bool:
        """Remove one relationship; whether it was there."""
        ...

    async def neighbors(
        self,
        entity_id: str,
        depth: int = 1,
        relationship_types: Iterable[str] | None = None,
    ) -> Subgraph:
        """The subgraph within `depth` hops of `entity_id`, walked breadth first both ways.

        Args:
            entity_id: Where to start.
            depth: How many hops to go (0: the entity alone).
            relationship_types: Walk only these types (None: all).

        Raises:
            EntityNotFoundError: `entity_id` is not in the graph.
            ValueError: `depth` is negative.
        """
        ...


class GraphStoreBase:
    """What every backend of `GraphStore` shares: the checks, before one call of its own.

    A backend implements the `_`-methods, which get checked arguments; the
    public methods (documented on `GraphStore`) check first, so a backend
    never sees bad input and never changes anything for it.
    """

    __slots__ = ()

    async def upsert_entities(self, entities: Iterable[Entity]) -> None:
        """Store `entities`, replacing ids already stored (see `GraphStore`)."""
        batch = check_entities(entities)
        if batch:
            await self._upsert_entities(batch)

    async def upsert_relationships(self, relationships: Iterable[Relationship]) -> None:
        """Store `relationships`, replacing triples already stored (see `GraphStore`)."""
        batch = check_relationships(relationships)
        if batch:
            await self._upsert_relationships(batch)

    async def get_entity(self, entity_id: str) -> Entity | None:
        """The entity stored under `entity_id`, or None."""
        return await self._get_entity(check_key("entity_id", entity_id))

    async def entities(self, *, type: str | None = None) -> list[Entity]:
        """Every entity (of `type`, when given), sorted by id."""
        return await self._entities(None if type is None else check_key("type", type))

    async def relationships(
        self, entity_id: str | None = None, *, types: Iterable[str] | None = None
    ) -> list[Relationship]:
        """Every relationship (touching `entity_id`, of `types`), sorted by key."""
        key = None if entity_id is None else check_key("entity_id", entity_id)
        return await self._relationships(key, check_types(types, "types"))

    async def delete_entity(self, entity_id: str) -> bool:
        """Remove an entity and every relationship touching it; whether it was there."""
        return await self._delete_entity(check_key("entity_id", entity_id))

    async def delete_relationship(self, source: str, target: str, type: str) -> bool:
        """Remove one relationship; whether it was there."""
        key = (check_key("source", source), check_key("target", target), check_key("type", type))
        return await self._delete_relationship(key)

    async def neighbors(
        self,
        entity_id: str,
        depth: int = 1,
        relationship_types: Iterable[str] | None = None,
    ) -> Subgraph:
        """The subgraph within `depth` hops of `entity_id` (see `GraphStore.neighbors`)."""
        start = check_key("entity_id", entity_id)
        hops = check_depth(depth)
        return await self._neighbors(start, hops, check_types(relationship_types))

    async def _upsert_entities(self, batch: list[Entity]) -> None:
        raise NotImplementedError

    async def _upsert_relationships(self, batch: list[Relationship]) -> None:
        raise NotImplementedError

    async def _get_entity(self, entity_id: str) -> Entity | None:
        raise NotImplementedError

    async def _entities(self, kind: str | None) -> list[Entity]:
        raise NotImplementedError

    async def _relationships(
        self, entity_id: str | None, types: list[str] | None
    ) -> list[Relationship]:
        raise NotImplementedError

    async def _delete_entity(self, entity_id: str) -> bool:
        raise NotImplementedError

    async def _delete_relationship(self, key: tuple[str, str, str]) -> bool:
        raise NotImplementedError

    async def _neighbors(self, start: str, depth: int, types: list[str] | None) -> Subgraph:
        raise NotImplementedError


def check_entities(entities: Iterable[Entity]) -> list[Entity]:
    """The batch as a list, after checking each item and that no id repeats.

    Raises:
        TypeError: An item is not an `Entity`, or `entities` is not iterable.
        ValueError: An id appears twice.
    """
    batch = instances(entities, Entity, "entities")
    return each_once(batch, attrgetter("id"), "entities", "pass each entity once in a call")


def check_relationships(relationships: Iterable[Relationship]) -> list[Relationship]:
    """The batch as a list, after checking each item and that no key repeats.

    Raises:
        TypeError: An item is not a `Relationship`, or the batch is not iterable.
        ValueError: A `(source, target, type)` appears twice.
    """
    batch = instances(relationships, Relationship, "relationships")
    return each_once(
        batch, attrgetter("key"), "relationships", "pass each relationship once in a call"
    )


class Walk:
    """A breadth-first walk from one entity, each entity reached once, at its distance.

    A backend hands `step` the other ends of the relationships of the
    `frontier` while the walk is `going`: it stops at `depth` hops, or sooner
    where the graph ends (counting hops alone would go round a cycle forever).
    """

    __slots__ = ("depth", "distances", "frontier", "hop")

    def __init__(self, start: str, depth: int) -> None:
        self.distances = {start: 0}  # the start first, then in the order reached
        self.frontier = [start]  # the entities reached at the last hop
        self.hop = 0
        self.depth = depth

    @property
    def going(self) -> bool:
        """Whether another hop is to be taken."""
        return bool(self.frontier) and self.hop < self.depth

    def step(self, others: Iterable[str]) -> None:
        """Take a hop: the entities of `others` not reached before are the new frontier."""
        self.hop += 1
        frontier = []
        for other in others:
            if other not in self.distances:
                self.distances[other] = self.hop
                frontier.append(other)
        self.frontier = frontier

    def inside(self) -> list[str]:
        """The entities closer than `depth`: those whose relationships the walk took."""
        return [node for node, hops in self.distances.items() if hops < self.depth]


def check_depth(depth: object) -> int:
    """Return `depth` if it is an int >= 0.

    Raises:
        TypeError: It is not an int.
        ValueError: It is negative.
    """
    return whole_number(depth, "depth", fix="a number of hops")


def check_types(types: Iterable[str] | None, what: str = "relationship_types") -> list[str] | None:
    """The relationship types to walk, sorted without repeats; None for all.

    Raises:
        TypeError: `types` is a single string, or holds something else.
    """
    if types is None:
        return None
    if isinstance(types, str) or not isinstance(types, Iterable):
        raise TypeError(
            f"{what} must be a collection of type names (e.g. [{types!r}]), not {types!r}"
        )
    return sorted({check_key(f"{what} item", kind) for kind in types})
