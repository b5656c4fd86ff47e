"""`ContextStore.search`: one contract, on the memory, SQLite and PostgreSQL stores alike."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pygents_ctx import (
    Agent,
    ContextConfig,
    ImageBlock,
    Message,
    ModelLoop,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    search_history,
    tool,
)
from pygents_ctx.context.stores import (
    AutoCompactStore,
    HistoryHit,
    SQLiteContextStore,
    connect,
)
from pygents_ctx.context.stores._common import encode_message
from pygents_ctx.context.stores._postgres_schema import MIGRATIONS, migrate
from pygents_ctx.context.stores._search_sql import POSTGRES_INDEX
from pygents_ctx.context.stores.postgres import PostgresContextStore, connect_postgres
from pygents_ctx.context.stores.search import (
    INDEXED_CHARACTERS,
    MAX_SEARCH_LIMIT,
    MAX_SEARCH_QUERY,
    offloaded_words,
    search_text,
    words,
)
from pygents_ctx.context.strategies.summarize import is_summary, summary_covers
from pygents_ctx.testing import ScriptedModel, ScriptedSummarizer, assistant, tool_call
from tests import postgres_server

from .conftest import MakeStore
from .helpers import ListStore
from .test_postgres import fresh_database
from .test_sqlite_archive import build_v4_file


def found(hits: list[HistoryHit]) -> list[str]:
    return [hit.message.text for hit in hits]


async def test_finds_archived_and_live_messages_with_where_they_are(make_store: MakeStore) -> None:
    store = await make_store(
        Message("user", "The gate code of the north depot is 4417."),
        Message("assistant", "Noted."),
    )
    await store.append(Message("user", "And the south depot?"), run_id="r1")
    await store.replace_prefix(2, [Message("user", "(we talked about the depot)")])
    await store.append(Message("assistant", "The south depot has no gate."), run_id="r2")

    hits = await store.search("gate code north depot")

    assert found(hits)[0] == "The gate code of the north depot is 4417."
    first = hits[0]
    assert (first.archived, first.run_id, first.score > 0) == (True, None, True)
    live = {hit.message.text: hit for hit in hits if not hit.archived}
    assert set(live) == {
        "And the south depot?",
        "The south depot has no gate.",
        "(we talked about the depot)",
    }
    assert live["The south depot has no gate."].run_id == "r2"
    assert live["And the south depot?"].run_id == "r1"
    # Positions order each part; ids are the store's, one per message.
    assert live["And the south depot?"].position < live["The south depot has no gate."].position
    assert len({hit.id for hit in hits}) == len(hits)
    assert all(isinstance(hit.id, int) for hit in hits)


async def test_ranks_by_relevance_then_newest_first(make_store: MakeStore) -> None:
    store = await make_store(
        Message("user", "apples"),
        Message("user", "pears and apples and apricots"),
        Message("user", "apricot jam"),
        Message("user", "pears and apples and apricots"),
        Message("user", "bananas"),
    )
    hits = await store.search("apples apricots pears")

    assert found(hits) == ["pears and apples and apricots"] * 2 + ["apples"]
    assert hits[0].score == pytest.approx(hits[1].score)
    assert hits[0].score > hits[2].score
    assert hits[0].position > hits[1].position  # the tie: the newer one first
    assert hits[0].id != hits[1].id


async def test_messages_with_every_word_come_first(make_store: MakeStore) -> None:
    store = await make_store(
        Message("user", "pears and green pears, the greenest pears"),
        Message("user", "green tea"),
        Message("user", "a long note that mentions green figs and, much later, one pear: pears"),
        Message("user", "pears pears pears pears"),
    )

    hits = await store.search("green pears")

    assert found(hits)[:2] == [
        "pears and green pears, the greenest pears",
        "a long note that mentions green figs and, much later, one pear: pears",
    ]
    assert set(found(hits)[2:]) == {"green tea", "pears pears pears pears"}


async def test_stop_words_are_looked_up_only_when_there_is_nothing_else(
    make_store: MakeStore,
) -> None:
    store = await make_store(Message("user", "what is this"), Message("user", "the red fox"))

    assert found(await store.search("What is the fox?")) == ["the red fox"]
    assert found(await store.search("what is")) == ["what is this"]


async def test_limit_caps_the_hits(make_store: MakeStore) -> None:
    store = await make_store(*(Message("user", f"note {i} about llamas") for i in range(12)))

    assert len(await store.search("llamas")) == 5
    assert len(await store.search("llamas", limit=8)) == 8
    assert len(await store.search("llamas", limit=MAX_SEARCH_LIMIT)) == 12
    assert await store.search("alpacas") == []


async def test_tool_calls_and_results_are_searched_thinking_and_images_are_not(
    make_store: MakeStore,
) -> None:
    store = await make_store(
        Message(
            "assistant",
            [
                ThinkingBlock("secretplan of the assistant"),
                ToolUseBlock("c1", "lookup_weather", {"city": "Reykjavik", "days": [{"k": "x"}]}),
            ],
        ),
        Message(
            "user",
            [
                ToolResultBlock("c1", "Reykjavik: sleet, 2C"),
                ToolResultBlock(
                    "c2", [TextBlock("nested windspeed"), ImageBlock("image/png", b"x")]
                ),
            ],
        ),
    )

    assert found(await store.search("lookup_weather"))[0] == ""  # the call has no text block
    assert len(await store.search("reykjavik")) == 2
    assert len(await store.search("windspeed")) == 1
    assert len(await store.search("sleet")) == 1
    assert await store.search("secretplan") == []
    assert await store.search("png") == []


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "'",
        "AND",
        "a OR",
        "NOT x",
        "NEAR(code gate, 2)",
        "text:gate",
        "gate*",
        "-gate +code",
        "^gate",
        "(gate",
        "!()&|:<>*'\\",
        "gate & code | !x <-> y",
        "\x00gate",
        "ga\u0301te",  # an accent combined: the same word
    ],
)
async def test_query_syntax_is_only_text(make_store: MakeStore, query: str) -> None:
    store = await make_store(Message("user", "the gate code is 4417"), Message("user", "nothing"))

    hits = await store.search(query)

    expected = ["the gate code is 4417"] if {"gate", "code", "text"} & set(words(query)) else []
    assert found(hits) == expected


async def test_a_query_without_words_finds_nothing(make_store: MakeStore) -> None:
    store = await make_store(Message("user", "?? !! -- what"))

    assert await store.search("?? !! --") == []


@pytest.mark.parametrize(
    ("query", "limit", "error", "names"),
    [
        ("", 5, ValueError, "empty"),
        ("   \n\t", 5, ValueError, "empty"),
        ("x" * (MAX_SEARCH_QUERY + 1), 5, ValueError, "MAX_SEARCH_QUERY"),
        ("gate", 0, ValueError, "limit"),
        ("gate", MAX_SEARCH_LIMIT + 1, ValueError, "limit"),
        ("gate", True, TypeError, "limit"),
        ("gate", 2.0, TypeError, "limit"),
        (b"gate", 5, TypeError, "query"),
        (None, 5, TypeError, "query"),
    ],
)
async def test_bad_input_is_refused_and_changes_nothing(
    make_store: MakeStore, query: object, limit: object, error: type[Exception], names: str
) -> None:
    store = await make_store(Message("user", "gate"))
    before = await store.snapshot()

    with pytest.raises(error, match=names):
        await store.search(query, limit=limit)  # type: ignore[arg-type]

    assert await store.snapshot() == before


async def test_a_query_of_the_longest_length_is_taken(make_store: MakeStore) -> None:
    store = await make_store(Message("user", "gate"))
    query = ("gate " * MAX_SEARCH_QUERY)[:MAX_SEARCH_QUERY]

    assert found(await store.search(query)) == ["gate"]


async def test_only_the_session_is_searched_and_removed_messages_are_gone(
    make_store: MakeStore,
) -> None:
    store = await make_store(Message("user", "otters in session one"), session_id="one")
    other = await make_store(Message("user", "otters in session two"), session_id="two")
    await store.append(Message("user", "otters of a run"), run_id="r1")
    await store.replace_prefix(1, [])

    assert sorted(found(await store.search("otters"))) == [
        "otters in session one",
        "otters of a run",
    ]
    assert found(await other.search("otters")) == ["otters in session two"]

    await store.clear_run("r1")
    assert found(await store.search("otters")) == ["otters in session one"]
    await store.clear()
    assert await store.search("otters") == []
    assert found(await other.search("otters")) == ["otters in session two"]


async def test_a_fork_searches_its_own_copy(make_store: MakeStore) -> None:
    store = await make_store(Message("user", "walrus facts"), Message("assistant", "ok"))
    await store.replace_prefix(1, [])
    fork = await store.fork()
    await fork.append(Message("user", "walrus news"))

    assert found(await store.search("walrus")) == ["walrus facts"]
    assert sorted(found(await fork.search("walrus"))) == ["walrus facts", "walrus news"]
    assert [hit.archived for hit in await fork.search("facts")] == [True]

    # A fork of the oldest messages only reads what it was cut at.
    await store.append(Message("user", "walrus later"))
    early = await store.fork(at=1)
    assert found(await early.search("walrus")) == ["walrus facts"]
    assert sorted(found(await store.search("walrus"))) == ["walrus facts", "walrus later"]
    # The parent compacting (its forks then copy what they read) changes no fork's search.
    await store.replace_prefix(2, [Message("user", "(walrus summary)")])
    assert sorted(found(await fork.search("walrus"))) == ["walrus facts", "walrus news"]
    assert found(await early.search("walrus")) == ["walrus facts"]


async def test_an_archived_hit_is_shown_in_place_of_the_summary_that_replaced_it(
    make_store: MakeStore,
) -> None:
    history = [
        Message("user" if i % 2 == 0 else "assistant", f"turn {i} " + "filler " * 20)
        for i in range(10)
    ]
    history[1] = Message("assistant", "The vault combination is 31-7-22. " + "filler " * 20)
    store = AutoCompactStore(
        await make_store(*history), ScriptedSummarizer(["We talked."]), keep_recent=4
    )
    assert await store.compact() is True

    [hit, *_] = await store.search("vault combination")

    assert hit.archived
    assert hit.id is not None
    live = await store.get_history()
    place = next(index for index, message in enumerate(live) if summary_covers(message, hit.id))
    assert place == 0
    assert is_summary(live[0])


async def test_a_store_of_your_own_gets_a_search_that_scans_its_history() -> None:
    store = ListStore()
    await store.append_many([Message("user", "heron sighting"), Message("user", "no birds")])

    hits = await store.search("a heron?")

    assert [(h.message.text, h.id, h.archived, h.position) for h in hits] == [
        ("heron sighting", None, False, 0)
    ]
    with pytest.raises(ValueError, match="empty"):
        await store.search(" ")


async def test_a_migrated_version_4_file_is_searchable(db_path: Path) -> None:
    build_v4_file(db_path)
    async with connect(db_path) as conn:
        store = SQLiteContextStore(conn, session_id="chat")
        hits = await store.search("how are you")
        assert "how are you" in found(hits)
        assert next(hit for hit in hits if hit.message.text == "how are you").archived
        await store.append(Message("user", "brand new words"))
        assert found(await store.search("brand")) == ["brand new words"]


@pytest.fixture
def fresh_dsn(postgres: postgres_server.PostgresServer) -> Iterator[str]:
    with fresh_database(postgres) as dsn:
        yield dsn


async def test_an_older_postgres_database_is_indexed_when_opened(fresh_dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(fresh_dsn, autocommit=True) as db:
        # What pygents_ctx wrote before search (later migrations come after it).
        await migrate(db, MIGRATIONS[: MIGRATIONS.index(POSTGRES_INDEX)])
        await db.execute("INSERT INTO pygents_sessions (session_id) VALUES ('old')")
        for table, key, text in (
            ("pygents_archive", "", "an archived heron"),
            ("pygents_messages", "position, ", "a live heron"),
        ):
            data = encode_message(Message("user", text))
            await db.execute(
                f"INSERT INTO {table} (session_id, {key}tokens, data) "
                f"VALUES ('old', {'0, ' if key else ''}3, %s)",
                (data,),
            )

    async with connect_postgres(fresh_dsn) as conn:
        store = PostgresContextStore(conn, session_id="old")
        hits = await store.search("heron")
        assert sorted((hit.message.text, hit.archived) for hit in hits) == [
            ("a live heron", False),
            ("an archived heron", True),
        ]
        assert len({hit.id for hit in hits}) == 2


# -- planted facts: what compaction archived comes back for a question about it ----------

THINGS = ["password", "door code", "budget", "deadline", "account number", "room", "supplier"]
PLACES = ["Lisbon", "Oslo", "Nairobi", "Osaka", "Denver", "Quito", "Tallinn", "Porto"]
OBJECTS = ["office", "warehouse", "lab", "server room", "archive", "studio"]
FILLER = [
    "Can you check the {thing} for the {place} team later today?",
    "I think the {obj} in {place} still needs a new {thing}.",
    "Let me look at the {obj} schedule and get back to you.",
    "Thanks, that helps. What about the {place} {obj}?",
    "Sure. I have updated the notes on the {thing} and the {obj}.",
    "The {place} meeting went fine; nothing new about the {thing}.",
]


def planted_history(rng: random.Random, length: int, facts: int) -> tuple[list[Message], list]:
    """A long chat with `facts` distinctive facts at random depths, and a question for each."""
    combos = rng.sample([(t, p, o) for t in THINGS for p in PLACES for o in OBJECTS], facts)
    depths = sorted(rng.sample(range(length - 20), facts))
    planted = {}
    history: list[Message] = []
    for index in range(length):
        role = "user" if index % 2 == 0 else "assistant"
        if depths and index == depths[0]:
            depths.pop(0)
            thing, place, obj = combos[len(planted)]
            value = f"{rng.choice(['amber', 'cobalt', 'saffron', 'teal'])}-{rng.randrange(10**5)}"
            text = f"For the record: the {thing} for the {place} {obj} is {value}."
            planted[text] = f"What is the {thing} for the {place} {obj}?"
            history.append(Message(role, text))
        else:
            template = rng.choice(FILLER)
            history.append(
                Message(
                    role,
                    template.format(
                        thing=rng.choice(THINGS), place=rng.choice(PLACES), obj=rng.choice(OBJECTS)
                    ),
                )
            )
    return history, list(planted.items())


async def test_planted_facts_come_back_in_the_top_5_after_compactions(
    make_store: MakeStore,
) -> None:
    rng = random.Random(39)
    history, planted = planted_history(rng, 600, 40)
    store = AutoCompactStore(
        await make_store(), ScriptedSummarizer(lambda messages, previous: "Summary."), keep_recent=6
    )
    for start in range(0, len(history), 50):
        await store.append_many(history[start : start + 50])
        await store.compact()
    live = await store.get_history()
    assert len(live) < 20  # nearly everything is archived

    recalled = 0
    for fact, question in planted:
        hits = await store.search(question)
        recalled += fact in found(hits)
    assert recalled / len(planted) >= 0.95, f"recall@5 {recalled}/{len(planted)}"


# -- offloaded tool results: their whole text is searched, the stub's message is returned ----

LOG_LINES = [f"{n:05d} GET /api/items/{n} 200 {n * 7 % 997}ms\n" for n in range(4000)]
FACT = "backup checksum of vault Zephyr is QX93-7741\n"
BIG_LOG = "".join([*LOG_LINES[:3000], FACT, *LOG_LINES[3000:]])  # the fact deep inside


async def test_a_fact_deep_inside_an_offloaded_result_is_found_by_search_and_the_tool(
    make_store: MakeStore,
) -> None:
    @tool
    async def read_backup_log() -> str:
        """Read the backup log."""
        return BIG_LOG

    store = await make_store()
    model = ScriptedModel(
        [
            assistant(tool_call("read_backup_log")),
            assistant(tool_call("search_history", query="vault Zephyr checksum")),
            assistant(tool_call("search_history", query="GET api items")),
            "It is QX93-7741.",
        ]
    )
    agent = Agent(
        "ops", "Reads logs", [read_backup_log, search_history], context=ContextConfig(store)
    )
    loop = ModelLoop(agent, model)
    assert (await loop.run("Which checksum did the backup log?")).text == "It is QX93-7741."

    # The history keeps the stub, which does not show the fact.
    [stub_message] = [m for m in await store.get_history() if m.tool_results][:1]
    stub = stub_message.tool_results[0].offloaded
    assert stub is not None
    stub_text = search_text(stub_message)
    assert stub_text == stub.stub_text()
    assert "Zephyr" not in stub_text
    # The model's search found it, said it matched inside the offloaded result, and the
    # model can read the fact there by the handle.
    hits = json.loads(model.calls[2].messages[-1].tool_results[0].text)["search_history"]
    assert hits[0]["offloaded"] == [stub.handle]
    # (The text is the stub's, cut as any long hit: `offloaded` still names the handle.)
    assert hits[0]["text"] == stub_text[: len(hits[0]["text"])]
    start = BIG_LOG.index(FACT)
    assert await loop.read_tool_result(stub.handle, start, len(FACT)) == FACT
    # A match in what the stub shows is not marked as one inside the blob.
    shown = json.loads(model.calls[3].messages[-1].tool_results[0].text)["search_history"]
    assert stub_text.startswith(shown[0]["text"])
    assert "offloaded" not in shown[0]

    # Python's search returns the stub's message, live, then archived, and in a fork.
    [live] = (await store.search("Zephyr QX93"))[:1]
    assert (live.message, live.archived) == (stub_message, False)
    await store.replace_prefix(await store.count() - 1, [Message("user", "(earlier: logs)")])
    fork = await store.fork()
    for searched in (store, fork):
        [archived] = (await searched.search("Zephyr QX93"))[:1]
        assert (archived.message, archived.archived) == (stub_message, True)
    # Deleting the session removes it from the index with everything else.
    await store.clear()
    assert await store.search("Zephyr QX93") == []


def test_an_offloaded_result_keeps_at_most_the_indexed_characters_of_its_distinct_words() -> None:
    many = " ".join(f"w{n}" for n in range(40_000))  # 238,890 characters of distinct words
    kept = offloaded_words(many + " " + many)

    assert len(kept) <= INDEXED_CHARACTERS < len(kept) + 8
    assert many.startswith(kept + " ")  # whole words, first seen first, each once
    assert offloaded_words("Disk FULL; disk full at 91%") == "disk full at 91"


async def test_an_archived_offloaded_result_that_search_history_finds_stays_readable(
    make_store: MakeStore,
) -> None:
    @tool
    async def read_backup_log() -> str:
        """Read the backup log."""
        return BIG_LOG

    store = await make_store()
    handle = "tool-results/" + hashlib.sha256(BIG_LOG.encode()).hexdigest()
    start = BIG_LOG.index(FACT)
    model = ScriptedModel(
        [
            assistant(tool_call("read_backup_log")),
            "Read.",
            assistant(tool_call("search_history", query="vault Zephyr")),
            assistant(tool_call("read_tool_result", handle=handle, offset=start, length=len(FACT))),
            "It is QX93-7741.",
        ]
    )
    agent = Agent(
        "ops", "Reads logs", [read_backup_log, search_history], context=ContextConfig(store)
    )
    loop = ModelLoop(agent, model)
    await loop.run("Read the backup log.")
    await store.replace_prefix(await store.count(), [Message("user", "(a log was read)")])
    await loop.run("Which checksum?")

    # No stub is in view; the search hit names it, so the read tool is offered and reads it.
    assert ["read_tool_result" in call.tools for call in model.calls[2:]] == [False, True, True]
    assert model.calls[4].messages[-1].tool_results[0].text.startswith(FACT)
    assert await loop.read_tool_result(handle, start, len(FACT)) == FACT
