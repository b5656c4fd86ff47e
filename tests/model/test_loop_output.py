"""ModelLoop(output_type=T): the schema sent with every call, the answer made a T, retries."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import pathlib
import socket
import uuid
from typing import Any, NewType, NotRequired, TypedDict

import orjson
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    Agent,
    AgentRegistry,
    ContextConfig,
    LoopFinished,
    LoopLimits,
    LoopStop,
    MemoryContextStore,
    Message,
    ModelLoop,
    ModelSettings,
    OutputSchema,
    OutputValidationError,
    TextDelta,
    ToolRegistry,
    Turn,
    tool,
)
from pygents_ctx.model._output import StructuredOutput
from pygents_ctx.testing import ScriptedModel, assistant, tool_call

UserId = NewType("UserId", int)


class Mood(enum.Enum):
    CALM = "calm"
    STORMY = "stormy"


@dataclasses.dataclass(frozen=True)
class Place:
    city: str
    country: str = "FR"


@dataclasses.dataclass(frozen=True)
class Forecast:
    """A day's weather."""

    place: Place
    day: datetime.date
    mood: Mood
    high: float
    notes: list[str] = dataclasses.field(default_factory=list)


class Summary(TypedDict):
    title: str
    words: int
    tag: NotRequired[str]


class Person(pydantic.BaseModel):
    name: str
    born: datetime.date


FORECAST = {
    "place": {"city": "Brest", "country": "FR"},
    "day": "2025-03-04",
    "mood": "stormy",
    "high": 11.5,
    "notes": ["wind"],
}
EXPECTED = Forecast(Place("Brest"), datetime.date(2025, 3, 4), Mood.STORMY, 11.5, ["wind"])


def json_text(data: Any) -> str:
    return orjson.dumps(data).decode()


@tool
async def look_up(city: str) -> str:
    """Look the weather up."""
    return f"{city}: wind, 11.5"


def make_loop(script: list[Any], output_type: Any, **options: Any) -> ModelLoop:
    ToolRegistry.register(look_up)  # each test starts with empty registries
    agent = Agent(
        options.pop("name", "forecaster"),
        "Forecasts",
        [look_up],
        context=options.pop("context", None) or ContextConfig(MemoryContextStore()),
    )
    return ModelLoop(agent, ScriptedModel(script), output_type=output_type, **options)


def calls(loop: ModelLoop) -> Any:
    model = loop.model
    assert isinstance(model, ScriptedModel)
    return model.calls


async def history(loop: ModelLoop) -> list[Message]:
    assert loop.agent.context is not None
    return await loop.agent.context.history()


async def test_a_dataclass_answer_arrives_as_the_dataclass_and_the_schema_is_sent() -> None:
    script = [assistant(tool_call("look_up", city="Brest")), json_text(FORECAST)]
    loop = make_loop(script, Forecast, settings=ModelSettings(temperature=0.0))

    finished = await loop.run("Weather in Brest tomorrow?")

    assert finished.reason is LoopStop.ANSWER
    assert finished.output == EXPECTED
    assert finished.text == json_text(FORECAST)
    sent = [call.settings for call in calls(loop)]
    assert all(s is not None and s.temperature == 0.0 for s in sent)  # merged over the loop's
    schema = sent[0].output_schema
    assert isinstance(schema, OutputSchema)
    assert sent[1].output_schema == schema  # on every call, the tool call's too
    assert (schema.name, schema.description, schema.strict) == (
        "Forecast",
        "A day's weather.",
        True,
    )
    body = schema.schema
    assert body["required"] == ["place", "day", "mood", "high", "notes"]  # strict: all of them
    assert body["additionalProperties"] is False
    assert body["properties"]["day"] == {"type": "string", "format": "date"}
    assert body["properties"]["mood"] == {"type": "string", "enum": ["calm", "stormy"]}
    place = body["properties"]["place"]
    assert (place["required"], place["additionalProperties"]) == (["city", "country"], False)
    # an optional field is nullable, its default told in words
    assert place["properties"]["country"] == {
        "anyOf": [{"type": "string"}, {"type": "null"}],
        "description": "Default: 'FR'.",
    }


async def test_nulls_sent_for_optional_fields_let_their_defaults_apply() -> None:
    strict_answer = {**FORECAST, "place": {"city": "Brest", "country": None}, "notes": None}
    loop = make_loop([json_text(strict_answer)], Forecast)
    finished = await loop.run("Weather?")
    assert finished.output == dataclasses.replace(EXPECTED, notes=[])
    assert finished.output.place.country == "FR"


async def test_a_typed_dict_answer_is_a_dict() -> None:
    loop = make_loop([json_text({"title": "Tides", "words": 3, "tag": "sea"})], Summary)
    finished = await loop.run("Summarize")
    assert finished.output == {"title": "Tides", "words": 3, "tag": "sea"}
    assert type(finished.output) is dict
    schema = calls(loop)[0].settings.output_schema.schema
    assert schema["required"] == ["title", "words", "tag"]


async def test_a_pydantic_answer_is_the_model() -> None:
    loop = make_loop([json_text({"name": "Ada", "born": "1815-12-10"})], Person)
    finished = await loop.run("Who?")
    assert finished.output == Person(name="Ada", born=datetime.date(1815, 12, 10))
    schema = calls(loop)[0].settings.output_schema
    assert schema.name == "Person"
    assert schema.schema["additionalProperties"] is False
    assert schema.schema["properties"]["born"]["format"] == "date"


async def test_an_answer_that_does_not_fit_is_sent_back_with_its_problems() -> None:
    wrong = {**FORECAST, "mood": "sunny", "place": {"city": 3}}
    script = ["It will be windy.", json_text(wrong), json_text(FORECAST)]
    loop = make_loop(script, Forecast)

    finished = await loop.run("Weather?")

    assert finished.output == EXPECTED
    assert finished.steps == 3
    stored = await history(loop)
    assert [m.role for m in stored] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    first, second = stored[2].text, stored[4].text
    assert "(the document): not a JSON document" in first
    assert "- place.city: expected string; got integer 3" in second
    assert "- mood: expected one of 'calm' | 'stormy'; got string 'sunny'" in second
    # the model was shown its refused answer and the correction before answering again
    assert calls(loop)[2].messages[-2:] == (stored[3], stored[4])


async def test_retries_exhausted_raise_with_the_last_answer_and_its_problems() -> None:
    loop = make_loop(
        ["nope", "{}", json_text({"title": 1})], Summary, limits=LoopLimits(output_retries=2)
    )

    with pytest.raises(OutputValidationError) as caught:
        await loop.run("Summarize")

    error = caught.value
    assert error.text == json_text({"title": 1})
    assert error.attempts == 3
    assert [(p.path, p.kind) for p in error.problems] == [
        ("title", "invalid"),
        ("words", "missing"),
    ]
    assert "output_retries" in str(error)
    assert len(calls(loop)) == 3  # the first answer and two retries


async def test_no_retries_raises_at_the_first_answer_that_does_not_fit() -> None:
    loop = make_loop(["nope", json_text(FORECAST)], Forecast, limits=LoopLimits(output_retries=0))
    with pytest.raises(OutputValidationError):
        await loop.run("Weather?")
    assert len(calls(loop)) == 1


async def test_stream_validates_too_and_the_finish_holds_the_output() -> None:
    script = [json_text({"title": "x"}), json_text({"title": "Tides", "words": 3})]
    loop = make_loop(script, Summary)

    events = [event async for event in loop.stream("Summarize")]

    finished = events[-1]
    assert isinstance(finished, LoopFinished)
    assert finished.output == {"title": "Tides", "words": 3}
    assert any(isinstance(e, TextDelta) for e in events)
    assert all(c.settings.output_schema is not None for c in calls(loop))


async def test_without_output_type_or_at_a_limit_there_is_no_output() -> None:
    loop = make_loop(["plain text"], None)
    assert (await loop.run("hi")).output is None
    assert calls(loop)[0].settings is None
    limited = make_loop(
        [assistant(tool_call("look_up", city="x"))],
        Forecast,
        limits=LoopLimits(max_steps=1),
        name="limited",
    )
    finished = await limited.run("go")
    assert (finished.reason, finished.output) == (LoopStop.MAX_STEPS, None)


async def test_an_agent_saved_mid_loop_continues_and_still_validates() -> None:
    store = MemoryContextStore(session_id="s1")
    script = [assistant(tool_call("look_up", city="Brest")), "windy", json_text(FORECAST)]
    loop = make_loop(script, Forecast, context=ContextConfig(store), name="saver")
    paused = asyncio.Event()

    @loop.agent.after_turn
    async def pause_after_the_first_think(agent: Agent, turn: Turn) -> None:
        if turn.tool_name == "model_think":
            agent.pause()
            paused.set()

    task = asyncio.create_task(loop.run("Weather?"))
    await paused.wait()
    saved = loop.agent.to_json()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    AgentRegistry.unregister("saver")

    restored = Agent.from_json(saved, context=ContextConfig(store))
    restored.hooks.clear()
    restored.resume()
    again = ModelLoop(restored, loop.model, output_type=Forecast)
    finished = await again.run()

    assert finished.output == EXPECTED
    stored = await store.get_history()
    assert "not a JSON document" in stored[-2].text  # "windy" was refused after the restore


def test_bad_output_options_are_refused_with_the_fix() -> None:
    with pytest.raises(TypeError, match="dataclass, a TypedDict or a pydantic model"):
        make_loop([], int)
    with pytest.raises(TypeError, match="dataclass, a TypedDict or a pydantic model"):
        make_loop([], list[Place], name="b")
    with pytest.raises(TypeError, match=r"LoopLimits\.output_retries must be an int"):
        LoopLimits(output_retries=True)
    with pytest.raises(ValueError, match="at least 0"):
        LoopLimits(output_retries=-1)
    own = OutputSchema("x", {"type": "object"})
    with pytest.raises(ValueError, match="not both"):
        make_loop([], Place, settings=ModelSettings(output_schema=own), name="e")


@dataclasses.dataclass
class Sent:
    channel: socket.socket  # nothing a model could write
    count: int


@dataclasses.dataclass
class Outbox:
    sent: list[Sent]


@dataclasses.dataclass
class Tagged:
    user: UserId
    extra: object
    notes: Any


def test_an_output_type_no_json_schema_describes_is_refused_before_any_call() -> None:
    with pytest.raises(TypeError, match=r"'Sent' holds socket\.socket, which no JSON schema"):
        StructuredOutput(Sent)
    with pytest.raises(TypeError, match=r"'Outbox' holds socket\.socket"):  # however deep
        StructuredOutput(Outbox)
    # What a model can write is kept: a NewType as its base type, object and Any as anything.
    schema = StructuredOutput(Tagged).schema.schema
    assert schema["properties"]["user"] == {"type": "integer"}
    assert schema["properties"]["extra"] == schema["properties"]["notes"] == {}


@dataclasses.dataclass
class Loose:
    labels: dict[str, int]
    pair: tuple[int, str]


@dataclasses.dataclass
class Tree:
    name: str
    children: list[Tree] = dataclasses.field(default_factory=list)


def test_types_strict_mode_cannot_describe_are_sent_not_strict() -> None:
    output = StructuredOutput(Loose)
    assert output.schema.strict is False
    assert output.parse(json_text({"labels": {"a": 1}, "pair": [1, "x"]})) == (
        Loose({"a": 1}, (1, "x")),
        [],
    )


def test_strict_schema_requires_every_property_and_keeps_refs() -> None:
    output = StructuredOutput(Tree)
    schema = output.schema.schema
    assert output.schema.strict
    assert schema["required"] == ["name", "children"]
    children = schema["properties"]["children"]["anyOf"][0]
    assert children["items"] == {"$ref": "#/$defs/Tree"}
    assert schema["$defs"]["Tree"]["additionalProperties"] is False
    value, problems = output.parse(
        json_text({"name": "a", "children": [{"name": "b", "children": None}]})
    )
    assert problems == []
    assert value == Tree("a", [Tree("b")])


@dataclasses.dataclass
class Files:
    paths: set[pathlib.Path]
    owner: uuid.UUID


def test_strict_schemas_leave_out_what_strict_mode_does_not_take() -> None:
    schema = StructuredOutput(Files).schema
    assert schema.strict
    assert schema.schema["properties"] == {
        "paths": {"type": "array", "items": {"type": "string"}},  # no uniqueItems, no "path"
        "owner": {"type": "string", "format": "uuid"},
    }
    answer = json_text({"paths": ["a", "a", "b"], "owner": str(uuid.UUID(int=1))})
    assert StructuredOutput(Files).parse(answer) == (
        Files({pathlib.Path("a"), pathlib.Path("b")}, uuid.UUID(int=1)),
        [],
    )


async def test_continuing_an_answered_conversation_checks_the_stored_answer() -> None:
    store = MemoryContextStore()
    await store.append(Message("user", "Summarize"))
    await store.append(Message("assistant", "A summary, in words."))
    loop = make_loop(
        [json_text({"title": "Tides", "words": 3})], Summary, context=ContextConfig(store)
    )

    finished = await loop.run()  # no prompt: the stored answer is checked, then asked again

    assert finished.output == {"title": "Tides", "words": 3}
    assert len(calls(loop)) == 1
    assert "not a JSON document" in (await history(loop))[2].text


@dataclasses.dataclass(frozen=True)
class Reading:
    place: Place
    day: datetime.date
    mood: Mood
    high: float
    notes: tuple[str, ...] = ()


readings = st.builds(
    Reading,
    place=st.builds(Place, city=st.text(max_size=5), country=st.sampled_from(["FR", "DE"])),
    day=st.dates(),
    mood=st.sampled_from(Mood),
    high=st.floats(allow_nan=False, allow_infinity=False),
    notes=st.lists(st.text(max_size=3), max_size=2).map(tuple),
)


@settings(max_examples=60, deadline=None)
@given(reading=readings, nulls=st.booleans())
def test_an_answer_in_strict_form_reads_back_as_the_value(reading: Reading, nulls: bool) -> None:
    # What a model in strict mode may send: every field, a null where the default is meant.
    place: dict[str, Any] = {"city": reading.place.city, "country": reading.place.country}
    document: dict[str, Any] = {
        "place": place,
        "day": reading.day.isoformat(),
        "mood": reading.mood.value,
        "high": reading.high,
        "notes": list(reading.notes),
    }
    if nulls and reading.place.country == "FR":
        place["country"] = None
    if nulls and not reading.notes:
        document["notes"] = None
    assert StructuredOutput(Reading).parse(json_text(document)) == (reading, [])
