"""Session files carry the agents' checkpoints (format 5): a session exported and imported
elsewhere, into any backend, rewinds its agents' queue and pool as the original did."""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
import sqlite3
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    Agent,
    AgentScope,
    ContextConfig,
    ContextItem,
    Message,
    ModelLoop,
    Rewind,
    Tool,
    UnregisteredToolError,
    tool,
)
from pygents_ctx.cli import main
from pygents_ctx.cli._transfer import SessionFile, load_session, parse_session_file, save_session
from pygents_ctx.context.stores import (
    ContextStore,
    MemoryContextStore,
    SQLiteContextStore,
    StoredCheckpoint,
    StoredMessage,
    connect,
)
from pygents_ctx.context.stores.postgres import PostgresContextStore, connect_postgres
from pygents_ctx.registry import ToolRegistry
from pygents_ctx.testing import ScriptedModel, assistant, tool_call
from tests import postgres_server

SCRIPT = [
    assistant(tool_call("fetch", doc_id="d1")),
    "read d1",
    assistant(tool_call("fetch", doc_id="d2")),
    "read d2",
]
BEFORE_SECOND_PROMPT = 4  # the messages of the first exchange


def cli(*args: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(arg) for arg in args])
    return code, out.getvalue(), err.getvalue()


def fetch_tool() -> Tool[..., Any]:
    """The reader's tool, in the test's registry (an agent made again has the same one)."""
    try:
        return ToolRegistry.current().get("fetch")
    except UnregisteredToolError:

        @tool
        async def fetch(doc_id: str) -> ContextItem[str]:
            """Fetch a document."""
            return ContextItem(id=doc_id, description=f"doc {doc_id}", content=f"text of {doc_id}")

        return fetch


def reader(store: ContextStore) -> Agent:
    """The agent of the run, or the same agent made again over an imported session (in a
    scope of its own: another process, where the session was imported)."""
    context = ContextConfig(store, checkpoints=True)
    return Agent("reader", "Reads", [fetch_tool()], context=context)


def held(agent: Agent) -> tuple[list[Any], list[Any]]:
    """The agent's queue and pool, item by item."""
    return (
        [item.to_dict() for item in agent.context_queue],
        [item.to_dict() for item in agent.context_pool],
    )


StoreOf = Callable[[], Awaitable[ContextStore]]


@contextlib.asynccontextmanager
async def backend(kind: str, tmp_path: Path, dsn: str) -> AsyncIterator[StoreOf]:
    """`await make()`: a fresh session of the `kind` of store."""
    if kind == "memory":

        async def memory() -> ContextStore:
            return MemoryContextStore()

        yield memory
    elif kind == "sqlite":
        async with connect(tmp_path / f"{uuid.uuid4().hex}.db") as conn:

            async def sqlite() -> ContextStore:
                return SQLiteContextStore(conn, session_id=uuid.uuid4().hex)

            yield sqlite
    else:
        async with connect_postgres(dsn) as pg:

            async def postgres() -> ContextStore:
                return PostgresContextStore(pg, session_id=uuid.uuid4().hex)

            yield postgres


KINDS = ["memory", "sqlite", "postgres"]


@pytest.mark.parametrize("target", KINDS)
@pytest.mark.parametrize("source", KINDS)
async def test_an_exported_session_rewinds_its_agent_wherever_it_is_imported(
    source: str, target: str, tmp_path: Path, postgres: postgres_server.PostgresServer
) -> None:
    async with (
        backend(source, tmp_path, postgres.dsn) as make_source,
        backend(target, tmp_path, postgres.dsn) as make_target,
    ):
        loop = ModelLoop(reader(await make_source()), ScriptedModel(SCRIPT))
        await loop.run("fetch d1")
        then = held(loop.agent)
        await loop.run("fetch d2")
        original = loop.agent.context
        assert original is not None

        data = (await load_session(original.store)).to_json()
        imported = await make_target()
        await save_session(imported, parse_session_file(data, "session.json"))

        with AgentScope():
            elsewhere = reader(imported)
        assert await elsewhere.checkpoints() == await loop.agent.checkpoints()
        assert [c.at for c in await elsewhere.checkpoints()] == [0, 1, 3, 4, 5, 7]
        assert await elsewhere.rewind(BEFORE_SECOND_PROMPT) == Rewind(removed=4, restored=True)
        assert held(elsewhere) == then
        assert (await load_session(imported)).to_json() != data  # rewound: fewer messages
        assert await loop.agent.rewind(BEFORE_SECOND_PROMPT) == Rewind(4, True)
        assert held(loop.agent) == held(elsewhere)


async def run_in_sqlite(db: Path) -> tuple[tuple[list[Any], list[Any]], bytes, list[Any]]:
    """Two exchanges of a loop taking checkpoints, in session "chat" of `db`, and a fork
    "branch" at message 5: the queue and pool after the first, the session's file and
    its checkpoints."""
    async with connect(db) as conn:
        store = SQLiteContextStore(conn, session_id="chat")
        loop = ModelLoop(reader(store), ScriptedModel(SCRIPT))
        await loop.run("fetch d1")
        then = held(loop.agent)
        await loop.run("fetch d2")
        await store.fork(session_id="branch", at=5)
        return then, (await load_session(store)).to_json(), await store.list_checkpoints()


def test_the_cli_exports_and_imports_the_checkpoints_a_loop_took(tmp_path: Path) -> None:
    db, copy, out = tmp_path / "ctx.db", tmp_path / "copy.db", tmp_path / "session.json"
    then, expected, listed = asyncio.run(run_in_sqlite(db))

    assert cli("--db", db, "export", "chat", "-o", out)[0] == 0
    assert out.read_bytes() == expected
    document = orjson.loads(expected)
    assert document["version"] == 5
    assert [c["at"] for c in document["checkpoints"]] == [c.at for c in listed]
    states = {c["state"] for c in document["checkpoints"]}
    assert [s["digest"] for s in document["checkpoint_states"]] == sorted(
        states, key=[c["state"] for c in document["checkpoints"]].index
    )
    assert cli("--db", copy, "import", out)[0] == 0
    assert cli("--db", copy, "export", "chat")[1].encode() == expected
    assert cli("--db", db, "export", "branch", "-o", tmp_path / "branch.json")[0] == 0
    branch = orjson.loads((tmp_path / "branch.json").read_bytes())
    assert [c["at"] for c in branch["checkpoints"]] == [0, 1, 3, 4, 5]

    async def rewind_the_copy() -> None:
        async with connect(copy) as conn:
            with AgentScope():
                agent = reader(SQLiteContextStore(conn, session_id="chat"))
            assert await agent.checkpoints() == listed
            assert (await agent.rewind(BEFORE_SECOND_PROMPT)).restored
            assert held(agent) == then

    asyncio.run(rewind_the_copy())


def test_a_file_from_sqlite_imports_into_postgres_and_rewinds_there(
    tmp_path: Path, postgres: postgres_server.PostgresServer
) -> None:
    db, out = tmp_path / "ctx.db", tmp_path / "session.json"
    then, _, listed = asyncio.run(run_in_sqlite(db))
    assert cli("--db", db, "export", "chat", "-o", out)[0] == 0

    async def import_and_rewind() -> None:
        async with connect_postgres(postgres.dsn) as pg:
            store = PostgresContextStore(pg, session_id=uuid.uuid4().hex)
            await save_session(store, parse_session_file(out.read_bytes(), str(out)))
            with AgentScope():
                agent = reader(store)
            assert await agent.checkpoints() == listed
            assert (await agent.rewind(BEFORE_SECOND_PROMPT)).restored
            assert held(agent) == then
            assert [c.at for c in await agent.checkpoints()] == [0, 1, 3, 4]

    asyncio.run(import_and_rewind())


def test_a_version_4_file_without_checkpoints_still_imports(tmp_path: Path) -> None:
    file = tmp_path / "v4.json"
    document = SessionFile("old", [Message("user", "hi")], []).to_dict()
    del document["checkpoint_states"], document["checkpoints"]
    file.write_bytes(orjson.dumps({**document, "version": 4}))

    assert cli("--db", tmp_path / "new.db", "import", file)[:3:2] == (0, "")
    exported = orjson.loads(cli("--db", tmp_path / "new.db", "export", "old")[1])
    assert (exported["version"], exported["checkpoints"]) == (5, [])


# -- files the import refuses: nothing written ---------------------------------------------

NOW = "2026-01-15T10:30:00.123456+00:00"


def good_file() -> dict[str, Any]:
    return SessionFile(
        "s",
        [Message("user", "hi"), Message("assistant", "hello")],
        [],
        checkpoints=[
            StoredCheckpoint("a", 0, NOW, b"first"),
            StoredCheckpoint("a", 2, NOW, b"second"),
            StoredCheckpoint("b", 2, NOW, b"first"),
        ],
    ).to_dict()


def past_the_messages(document: dict[str, Any]) -> None:
    document["checkpoints"][2]["at"] = 3


def missing_state(document: dict[str, Any]) -> None:
    del document["checkpoint_states"][1]


def unnamed_state(document: dict[str, Any]) -> None:
    del document["checkpoints"][1]


def altered_state(document: dict[str, Any]) -> None:
    document["checkpoint_states"][0]["data"] = "b3RoZXI="


def out_of_order(document: dict[str, Any]) -> None:
    document["checkpoints"].reverse()


def twice(document: dict[str, Any]) -> None:
    document["checkpoint_states"].append(document["checkpoint_states"][0])


def naive_time(document: dict[str, Any]) -> None:
    document["checkpoints"][0]["created_at"] = "2026-01-15T10:30:00"


def bad_digest(document: dict[str, Any]) -> None:
    document["checkpoints"][0]["state"] = "ABC"


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (
            past_the_messages,
            "checkpoints[2] is at message 3, but the file holds 2 messages: a checkpoint is at "
            "a message from 0 to 2; remove it, or export the session again",
        ),
        (missing_state, "checkpoints[1] names the state "),
        (unnamed_state, "checkpoint_states[1] is named by no checkpoint; remove it"),
        (altered_state, "checkpoint_states[0]: the data is not the state its digest was made"),
        (out_of_order, "checkpoints[1] (agent 'a' at message 2) comes after agent 'b' at"),
        (twice, "checkpoint_states[2] is checkpoint_states[0] again"),
        (naive_time, "checkpoints[0]: created_at must be an ISO 8601 time with a time zone"),
        (bad_digest, "checkpoints[0].state must be a state's digest (40 lowercase hex digits)"),
    ],
)
def test_a_file_with_a_bad_checkpoint_is_refused_and_nothing_is_written(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], error: str
) -> None:
    db, file = tmp_path / "ctx.db", tmp_path / "bad.json"
    document = good_file()
    file.write_bytes(orjson.dumps(document))
    assert cli("--db", db, "import", file, "--session", "kept")[0] == 0
    change(document)
    file.write_bytes(orjson.dumps(document))

    code, _, err = cli("--db", db, "import", file, "--session", "refused")

    assert code == 1
    assert err.startswith(f"pygents-ctx: error: {file}: {error}"), err
    with pytest.raises(ValueError, match=re.escape(error)):
        parse_session_file(orjson.dumps(document), str(file))
    conn = sqlite3.connect(db)
    try:
        assert conn.execute(
            "SELECT count(*) FROM pygents_sessions WHERE session_id = 'refused'"
        ).fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM pygents_checkpoint_data").fetchone() == (2,)
        assert conn.execute("SELECT count(*) FROM pygents_checkpoints").fetchone() == (3,)
    finally:
        conn.close()


# -- any session with checkpoints: export, import, export gives the same file ----------------

_texts = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)
_times = st.datetimes(timezones=st.just(UTC)).map(
    lambda moment: moment.isoformat(timespec="microseconds")
)


@st.composite
def sessions(draw: st.DrawFn) -> SessionFile:
    live = draw(
        st.lists(
            st.builds(
                StoredMessage,
                st.builds(Message, st.sampled_from(["user", "assistant"]), _texts),
                st.none() | st.sampled_from(["r1", "r2"]),
            ),
            max_size=6,
        )
    )
    archived = draw(st.lists(st.builds(Message, st.just("user"), _texts), max_size=2))
    places = draw(
        st.dictionaries(
            st.tuples(st.sampled_from(["a", "b", "ü"]), st.integers(0, len(live))),
            st.tuples(
                st.binary(min_size=1, max_size=8) | st.sampled_from([b"{}", b"same"]), _times
            ),
            max_size=8,
        )
    )
    checkpoints = [
        StoredCheckpoint(agent, at, created_at, state)
        for (agent, at), (state, created_at) in places.items()
    ]
    return SessionFile(draw(st.sampled_from(["s", "t"])), live, archived, 3, 4, (), (), checkpoints)


@settings(max_examples=40, deadline=None)
@given(file=sessions())
def test_any_session_with_checkpoints_exports_again_as_it_was_imported(file: SessionFile) -> None:
    data = file.to_json()
    assert parse_session_file(data, "f") == file

    async def through_memory() -> bytes:
        store = MemoryContextStore(session_id=file.session_id)
        await save_session(store, parse_session_file(data, "f"))
        return (await load_session(store)).to_json()

    assert asyncio.run(through_memory()) == data
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        (tmp / "in.json").write_bytes(data)
        assert cli("--db", tmp / "ctx.db", "import", tmp / "in.json")[0] == 0
        code, printed, _ = cli("--db", tmp / "ctx.db", "export", file.session_id)
        assert (code, printed.encode()) == (0, data)
