"""The `GraphStore` contract, run against every backend."""

from __future__ import annotations

import asyncio
import math

import pytest

from pygents_ctx import EntityNotFoundError, PygentsError
from pygents_ctx.memory import Entity, GraphStore, Relationship

E = Entity
R = Relationship


async def cycle_graph(graph: GraphStore) -> None:
    """a - b - c - a (a triangle), c - d - e - f - c (a square), g alone.

    Relationship directions are mixed on purpose: the walk ignores them.
    """
    await graph.upsert_entities(E(name, "node", {"name": name.upper()}) for name in "abcdefg")
    await graph.upsert_relationships(
        [
            R("a", "b", "knows"),
            R("c", "b", "knows"),
            R("a", "c", "cites", {"year": 2020}),
            R("c", "d", "knows"),
            R("e", "d", "cites"),
            R("e", "f", "knows"),
            R("f", "c", "knows"),
        ]
    )


def keys(relationships: list[Relationship]) -> list[tuple[str, str, str]]:
    return [r.key for r in relationships]


async def test_entities_are_stored_replaced_and_read_back(graph: GraphStore) -> None:
    await graph.upsert_entities([E("ada", "person", {"born": 1815, "tags": ("math",)})])
    assert await graph.get_entity("ada") == E("ada", "person", {"born": 1815, "tags": ["math"]})

    await graph.upsert_entities([E("ada", "mathematician", {"born": 1815})])

    assert await graph.get_entity("ada") == E("ada", "mathematician", {"born": 1815})
    assert await graph.get_entity("nobody") is None


async def test_entities_list_sorted_by_id_and_filter_by_type(graph: GraphStore) -> None:
    await graph.upsert_entities([E("b", "paper"), E("é", "person"), E("a", "person"), E("B", "x")])

    assert [e.id for e in await graph.entities()] == ["B", "a", "b", "é"]
    assert [e.id for e in await graph.entities(type="person")] == ["a", "é"]
    assert await graph.entities(type="nothing") == []


async def test_relationships_are_stored_replaced_and_listed(graph: GraphStore) -> None:
    await cycle_graph(graph)
    await graph.upsert_relationships([R("a", "c", "cites", {"year": 2021})])

    everything = await graph.relationships()
    assert keys(everything) == sorted(keys(everything))
    assert len(everything) == 7
    touching_c = await graph.relationships("c")
    assert keys(touching_c) == [
        ("a", "c", "cites"),
        ("c", "b", "knows"),
        ("c", "d", "knows"),
        ("f", "c", "knows"),
    ]
    assert touching_c[0].properties == {"year": 2021}
    assert keys(await graph.relationships("c", types=["cites"])) == [("a", "c", "cites")]
    assert keys(await graph.relationships(types=["cites"])) == [
        ("a", "c", "cites"),
        ("e", "d", "cites"),
    ]
    assert await graph.relationships("g") == []


async def test_a_relationship_to_a_missing_entity_stores_nothing(graph: GraphStore) -> None:
    await graph.upsert_entities([E("a", "node"), E("b", "node")])
    batch = [R("a", "b", "knows"), R("b", "ghost", "knows")]

    with pytest.raises(EntityNotFoundError, match=r"'ghost'.*upsert_entities\(\) first") as info:
        await graph.upsert_relationships(batch)

    assert isinstance(info.value, KeyError)
    assert isinstance(info.value, PygentsError)
    assert await graph.relationships() == []


async def test_a_batch_that_repeats_itself_is_refused_whole(graph: GraphStore) -> None:
    with pytest.raises(ValueError, match=r"^entities holds 'a' twice"):
        await graph.upsert_entities([E("a", "x"), E("b", "x"), E("a", "y")])
    assert await graph.entities() == []

    await graph.upsert_entities([E("a", "x"), E("b", "x")])
    with pytest.raises(ValueError, match=r"^relationships holds \('a', 'b', 't'\) twice"):
        await graph.upsert_relationships([R("a", "b", "t"), R("a", "b", "t", {"n": 1})])
    assert await graph.relationships() == []


async def test_batches_must_hold_entities_and_relationships(graph: GraphStore) -> None:
    with pytest.raises(TypeError, match=r"entities\[1\] must be a Entity"):
        await graph.upsert_entities([E("a", "x"), R("a", "b", "t")])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="list of Entity objects"):
        await graph.upsert_entities(E("a", "x"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="list of Relationship objects"):
        await graph.upsert_relationships("ab")  # type: ignore[arg-type]
    assert await graph.entities() == []


def test_bad_values_are_refused_when_made() -> None:
    with pytest.raises(ValueError, match="to itself"):
        R("a", "a", "likes")
    with pytest.raises(TypeError, match=r"properties\.score holds nan"):
        E("a", "x", {"score": math.nan})
    with pytest.raises(TypeError, match="JSON cannot hold"):
        R("a", "b", "t", {"when": object()})
    with pytest.raises(TypeError, match="mapping"):
        E("a", "x", ["not", "a", "mapping"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"key 1"):
        E("a", "x", {1: "int key"})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="must not be empty"):
        E("", "x")
    with pytest.raises(ValueError, match="NUL"):
        E("a\x00b", "x")
    with pytest.raises(ValueError, match="surrogate"):
        E("\ud800", "x")
    with pytest.raises(TypeError, match="must be a str"):
        R("a", 2, "t")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keep it to 1024 at most"):
        E("x" * 1025, "x")


async def test_the_store_keeps_its_own_copy_of_properties(graph: GraphStore) -> None:
    facts = {"aliases": ["Ada"]}
    entity = E("ada", "person", facts)
    facts["aliases"].append("changed")
    await graph.upsert_entities([entity])

    stored = await graph.get_entity("ada")
    assert stored is not None
    stored.properties["aliases"].append("mutated after reading")

    assert await graph.get_entity("ada") == E("ada", "person", {"aliases": ["Ada"]})


async def test_neighbors_depth_zero_is_the_entity_alone(graph: GraphStore) -> None:
    await cycle_graph(graph)

    found = await graph.neighbors("a", depth=0)

    assert found.entity_ids() == ["a"]
    assert found.entities[0] == E("a", "node", {"name": "A"})
    assert found.relationships == []
    assert found.distances == {"a": 0}


async def test_neighbors_walks_relationships_both_ways(graph: GraphStore) -> None:
    await cycle_graph(graph)

    found = await graph.neighbors("b")

    assert found.entity_ids() == ["b", "a", "c"]
    assert keys(found.relationships) == [("a", "b", "knows"), ("c", "b", "knows")]
    assert found.distances == {"b": 0, "a": 1, "c": 1}


async def test_neighbors_through_cycles_lists_each_entity_once_at_its_distance(
    graph: GraphStore,
) -> None:
    await cycle_graph(graph)

    found = await graph.neighbors("a", depth=2)

    assert found.entity_ids() == ["a", "b", "c", "d", "f"]
    assert found.distances == {"a": 0, "b": 1, "c": 1, "d": 2, "f": 2}
    # Every relationship with an end closer than 2 hops; not e-d or e-f (ends at 2 and 3).
    assert keys(found.relationships) == [
        ("a", "b", "knows"),
        ("a", "c", "cites"),
        ("c", "b", "knows"),
        ("c", "d", "knows"),
        ("f", "c", "knows"),
    ]
    whole = await graph.neighbors("a", depth=50)
    assert whole.entity_ids() == ["a", "b", "c", "d", "f", "e"]
    assert len(whole.relationships) == 7


@pytest.mark.parametrize("depth", [10**6, 2**62, 2**70])
async def test_a_walk_deeper_than_the_graph_ends_where_the_graph_does(
    graph: GraphStore, depth: int
) -> None:
    # "Everything reachable": on a ring, a walk by hops would go round forever.
    ring = [E(f"n{i:02}", "stop") for i in range(40)]
    await graph.upsert_entities(ring)
    await graph.upsert_relationships(
        R(f"n{i:02}", f"n{(i + 1) % 40:02}", "next") for i in range(40)
    )

    found = await graph.neighbors("n00", depth=depth)

    assert found.distances == {f"n{i:02}": min(i, 40 - i) for i in range(40)}
    assert len(found.relationships) == 40


async def test_neighbors_follows_only_the_types_asked_for(graph: GraphStore) -> None:
    await cycle_graph(graph)

    found = await graph.neighbors("a", depth=3, relationship_types=["knows"])

    assert found.distances == {"a": 0, "b": 1, "c": 2, "d": 3, "f": 3}
    assert ("a", "c", "cites") not in keys(found.relationships)
    only_cites = await graph.neighbors("d", depth=5, relationship_types={"cites"})
    assert only_cites.entity_ids() == ["d", "e"]
    nothing = await graph.neighbors("a", depth=2, relationship_types=[])
    assert nothing.entity_ids() == ["a"]


async def test_neighbors_of_a_lone_entity(graph: GraphStore) -> None:
    await cycle_graph(graph)

    found = await graph.neighbors("g", depth=3)

    assert found.entity_ids() == ["g"]
    assert found.relationships == []


async def test_bad_neighbors_calls_say_what_is_wrong(graph: GraphStore) -> None:
    await cycle_graph(graph)

    with pytest.raises(EntityNotFoundError, match="no entity 'zed'"):
        await graph.neighbors("zed")
    with pytest.raises(EntityNotFoundError, match="no entity 'zed'"):
        await graph.relationships("zed")
    with pytest.raises(ValueError, match="depth must be at least 0"):
        await graph.neighbors("a", depth=-1)
    with pytest.raises(TypeError, match="depth must be an int"):
        await graph.neighbors("a", depth=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"collection of type names \(e\.g\. \['knows'\]\)"):
        await graph.neighbors("a", relationship_types="knows")


async def test_deleting_an_entity_takes_its_relationships(graph: GraphStore) -> None:
    await cycle_graph(graph)

    assert await graph.delete_entity("c") is True
    assert await graph.delete_entity("c") is False

    assert await graph.get_entity("c") is None
    assert keys(await graph.relationships()) == [
        ("a", "b", "knows"),
        ("e", "d", "cites"),
        ("e", "f", "knows"),
    ]
    assert (await graph.neighbors("a", depth=5)).entity_ids() == ["a", "b"]


async def test_deleting_a_relationship(graph: GraphStore) -> None:
    await cycle_graph(graph)

    assert await graph.delete_relationship("a", "b", "knows") is True
    assert await graph.delete_relationship("a", "b", "knows") is False
    assert await graph.delete_relationship("b", "a", "knows") is False  # the key is directed

    assert (await graph.neighbors("a")).entity_ids() == ["a", "c"]


async def test_ids_are_plain_text_whatever_they_hold(graph: GraphStore) -> None:
    odd = ["'); DROP TABLE x; --", "Ünïcødé ✓", "a%b_c", " spaced "]
    await graph.upsert_entities(E(name, "odd") for name in odd)
    await graph.upsert_relationships([R(odd[0], odd[1], "t"), R(odd[1], odd[2], "t")])

    found = await graph.neighbors(odd[2], depth=2)

    assert found.entity_ids() == [odd[2], odd[1], odd[0]]
    assert sorted(e.id for e in await graph.entities()) == sorted(odd)


async def test_concurrent_writers_leave_a_whole_graph(graph: GraphStore) -> None:
    await graph.upsert_entities([E("hub", "node")])

    async def spoke(index: int) -> None:
        await graph.upsert_entities([E(f"s{index}", "node")])
        await graph.upsert_relationships([R("hub", f"s{index}", "has")])

    await asyncio.gather(*(spoke(i) for i in range(20)))

    found = await graph.neighbors("hub")
    assert sorted(found.entity_ids()[1:]) == sorted(f"s{i}" for i in range(20))
    assert len(found.relationships) == 20


def test_entities_and_relationships_hash_by_what_they_are_known_by() -> None:
    entities = {E("a", "x", {"v": 1}), E("a", "x", {"v": 1}), E("b", "x")}
    relationships = {R("a", "b", "t"), R("a", "b", "t"), R("b", "a", "t")}

    assert len(entities) == 2
    assert len(relationships) == 2
    assert hash(E("a", "x", {"v": 1})) == hash(E("a", "x", {"v": 2}))
