"""User dataclasses and pydantic models as item contents: saved and loaded, or refused."""

from __future__ import annotations

import datetime
import enum
import uuid
from dataclasses import dataclass, field

import pydantic
import pytest

from pygents_ctx import (
    Agent,
    AgentRegistry,
    ContextItem,
    ContextPool,
    ContextQueue,
    content_type,
)


class Grade(enum.Enum):
    DRAFT = "draft"
    FINAL = "final"


@dataclass
class Author:
    name: str
    since: datetime.date


@content_type
@dataclass
class Filing:
    title: str
    author: Author
    grade: Grade
    id: uuid.UUID
    tags: frozenset[str] = field(default_factory=frozenset)


@content_type(name="Finding")
class Finding(pydantic.BaseModel):
    claim: str
    confidence: float
    seen: datetime.datetime


FILING = Filing(
    "Q3",
    Author("Ada", datetime.date(2025, 3, 4)),
    Grade.FINAL,
    uuid.UUID(int=7),
    frozenset({"finance", "q3"}),
)
FINDING = Finding(claim="tides follow the Moon", confidence=0.9, seen=datetime.datetime(2025, 1, 2))


async def test_a_pool_of_dataclasses_saves_and_loads_them_as_instances() -> None:
    pool: ContextPool[Filing] = ContextPool()
    await pool.add(ContextItem(FILING, description="the Q3 filing", id="q3"))

    loaded = ContextPool.from_json(pool.to_json())

    assert loaded.get("q3").content == FILING
    assert pool.to_dict()["items"][0]["content_type"] == "Filing"
    assert pool.to_dict()["items"][0]["content"]["author"] == {"name": "Ada", "since": "2025-03-04"}


async def test_a_queue_of_pydantic_models_saves_and_loads_them() -> None:
    queue: ContextQueue[Finding] = ContextQueue(limit=5)
    await queue.append(ContextItem(FINDING), ContextItem("plain text stays plain"))

    loaded = ContextQueue.from_dict(queue.to_dict())

    assert [item.content for item in loaded] == [FINDING, "plain text stays plain"]


async def test_an_agent_saves_and_loads_its_pool_of_registered_contents() -> None:
    agent = Agent("keeper", "Keeps reports", [])
    await agent.context_pool.add(ContextItem(FILING, description="Q3", id="q3"))
    saved = agent.to_json()
    AgentRegistry.unregister("keeper")  # as in a new process

    assert Agent.from_json(saved).context_pool.get("q3").content == FILING


async def test_an_unregistered_dataclass_is_refused_with_the_fix_when_saved() -> None:
    @dataclass
    class Note:
        text: str

    pool: ContextPool[Note] = ContextPool()
    await pool.add(ContextItem(Note("x"), description="a note", id="n"))

    with pytest.raises(TypeError, match=r"register Note with @content_type"):
        pool.to_json()


def test_an_unknown_content_type_is_refused_when_loaded_with_the_fix() -> None:
    saved = {"items": [{"id": "a", "description": "d", "content": {}, "content_type": "Unheard"}]}

    with pytest.raises(
        ValueError, match=r"'Unheard' is unknown .* register the class with @content"
    ):
        ContextPool.from_dict({**ContextPool().to_dict(), **saved})


def test_saved_content_that_does_not_fit_its_class_is_refused_naming_the_field() -> None:
    data = ContextItem(FILING, description="d", id="q3").to_dict()
    data["content"]["author"]["since"] = "yesterday"

    with pytest.raises(ValueError, match=r"saved Filing content does not fit.*author\.since"):
        ContextItem.from_dict(data)


def test_only_dataclasses_and_pydantic_models_can_be_registered() -> None:
    with pytest.raises(TypeError, match="dataclass or a pydantic model"):
        content_type(dict)


def test_a_name_taken_by_another_class_is_refused_and_a_new_definition_replaces() -> None:
    @dataclass
    class Other:
        text: str

    with pytest.raises(ValueError, match=r"content type 'Filing' is registered for .*Filing"):
        content_type(name="Filing")(Other)

    @content_type(name="Redefined")
    @dataclass
    class Redefined:
        text: str

    first = Redefined

    @content_type(name="Redefined")  # the same class defined again (a re-run cell)
    @dataclass
    class Redefined:  # type: ignore[no-redef]
        text: str

    assert Redefined is not first
    item = ContextItem.from_dict(ContextItem(Redefined("x")).to_dict())
    assert type(item.content) is Redefined
