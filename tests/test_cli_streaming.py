"""Streaming import and export: the same files as before, in bounded memory, one transaction."""

from __future__ import annotations

import asyncio
import contextlib
import io
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pygents_ctx.cli._json_stream as json_stream
from pygents_ctx import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    UsageRecord,
)
from pygents_ctx.cli import main
from pygents_ctx.cli._json_stream import JsonStreamError, ObjectReader
from pygents_ctx.cli._transfer import SessionFile, load_session, parse_session_file, save_session
from pygents_ctx.context.stores import SQLiteContextStore, connect
from pygents_ctx.context.stores.base import StoredMessage


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(arg) for arg in args])
    return code, out.getvalue(), err.getvalue()


def rich_file() -> SessionFile:
    cache = {"type": "ephemeral"}
    call = ToolUseBlock("c1", "search", {"q": "café", "n": [1, 2.5, None]})
    return SessionFile(
        "rich",
        [
            StoredMessage(Message("user", [TextBlock("hi", cache_control=cache)], name="al"), "r1"),
            StoredMessage(Message("assistant", [ThinkingBlock("hm", "sig"), call]), "r1"),
            Message("user", [ToolResultBlock("c1", "none", is_error=True)], metadata={"k": 1}),
        ],
        [StoredMessage(Message("user", "old"), "r0"), Message("assistant", "older")],
        7,
        8,
        [UsageRecord(Usage(3, 4), run_id="r1", model="m")],
    )


async def stored(db: Path, session_id: str) -> SessionFile:
    async with connect(db) as conn:
        return await load_session(SQLiteContextStore(conn, session_id=session_id))


def test_export_writes_exactly_what_the_session_file_writes(tmp_path: Path) -> None:
    db, out = tmp_path / "ctx.db", tmp_path / "out.json"
    file = rich_file()

    async def fill() -> None:
        async with connect(db) as conn:
            await save_session(SQLiteContextStore(conn, session_id="rich"), file)

    asyncio.run(fill())

    assert cli("--db", db, "export", "rich", "-o", out)[0] == 0
    assert out.read_bytes() == file.to_json()
    code, printed, _ = cli("--db", db, "export", "rich")
    assert (code, printed.encode()) == (0, file.to_json())
    assert cli("--db", db, "import", out, "--session", "again")[0] == 0
    assert asyncio.run(stored(db, "again")).to_json() == file.to_json().replace(
        b'"rich"', b'"again"'
    )


def test_import_reads_any_layout_of_the_object(tmp_path: Path) -> None:
    """Keys in any order (run ids before their messages, the id last), compact, on stdin."""
    file = rich_file()
    document = file.to_dict()
    reordered = {key: document[key] for key in reversed(list(document))}
    db = tmp_path / "ctx.db"
    for name, data in [
        ("compact.json", orjson.dumps(reordered)),
        ("spaced.json", orjson.dumps(reordered, option=orjson.OPT_INDENT_2) + b"\n\n"),
    ]:
        (tmp_path / name).write_bytes(data)
        code, _, err = cli("--db", db, "import", tmp_path / name, "--session", name)
        assert (code, err) == (0, "")
        got = asyncio.run(stored(db, name))
        assert (got.messages, got.archived, got.usage) == (file.messages, file.archived, file.usage)
        assert (got.input_tokens, got.output_tokens) == (7, 8)
    # the id is found even when it comes last
    (tmp_path / "last.json").write_bytes(orjson.dumps(reordered))
    assert cli("--db", db, "import", tmp_path / "last.json")[0] == 0
    assert asyncio.run(stored(db, "rich")).messages == file.messages


@pytest.mark.parametrize(
    ("tail", "error"),
    [
        (b', "run_ids": [null]}', "run_ids must be a list with one run id (or null) for each"),
        (b', "version": 1, "run_ids": [null, null, null]}', "unknown keys 'run_ids'"),
        (b', "bogus": 1}', "unknown keys 'bogus'"),
        (b', "messages": []}', "has the key 'messages' twice"),
        (b"}  trailing", "is not valid JSON (unexpected data after the object"),
        (b', "usage": [}', "is not valid JSON"),
    ],
)
def test_a_file_refused_after_its_messages_were_read_leaves_nothing(
    tmp_path: Path, tail: bytes, error: str
) -> None:
    db, source = tmp_path / "ctx.db", tmp_path / "bad.json"
    messages = orjson.dumps([{"role": "user", "content": [{"type": "text", "text": "x"}]}] * 3000)
    source.write_bytes(b'{"messages": ' + messages + tail)

    code, _, err = cli("--db", db, "import", source, "--session", "s")

    assert code == 1
    assert error in err
    assert not db.exists()  # a new database is removed again
    stored_nothing_into(tmp_path / "existing.db", source)


def stored_nothing_into(db: Path, source: Path) -> None:
    async def fill() -> None:
        async with connect(db) as conn:
            await SQLiteContextStore(conn, session_id="keep").append(Message("user", "kept"))

    asyncio.run(fill())
    assert cli("--db", db, "import", source, "--session", "s")[0] == 1
    check = sqlite3.connect(db)
    try:
        counts = check.execute(
            "SELECT (SELECT count(*) FROM pygents_messages), "
            "(SELECT count(*) FROM pygents_archive), "
            "(SELECT count(*) FROM pygents_sessions WHERE session_id = 's')"
        ).fetchone()
    finally:
        check.close()
    assert counts == (1, 0, 0)  # the batches written before the error were rolled back


# -- the incremental reader against orjson ----------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(codec="utf-8"), max_size=8)
    | st.sampled_from(['"', "\\", "[", "]", "{", "}", '\\"', "é"]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    document=st.dictionaries(st.text(max_size=6), json_values, max_size=5),
    chunk=st.integers(1, 64),
    indent=st.booleans(),
)
def test_the_reader_reads_what_orjson_reads(
    document: dict[str, Any], chunk: int, indent: bool
) -> None:
    data = orjson.dumps(document, option=orjson.OPT_INDENT_2 if indent else 0)
    original, json_stream._CHUNK = json_stream._CHUNK, chunk  # buffer edges everywhere
    try:
        reader = ObjectReader(io.BytesIO(data))
        reader.start()
        read: dict[str, Any] = {}
        while (key := reader.key()) is not None:
            read[key] = list(reader.items()) if reader.is_list() else reader.value()
        reader.finish()
    finally:
        json_stream._CHUNK = original
    assert read == document


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=60) | st.builds(lambda d: orjson.dumps(d)[:-1], json_values))
def test_the_reader_refuses_what_orjson_refuses(data: bytes) -> None:
    try:
        expected: Any = orjson.loads(data)
    except orjson.JSONDecodeError:
        expected = JsonStreamError
    try:
        reader = ObjectReader(io.BytesIO(data))
        reader.start()
        read: Any = {}
        while (key := reader.key()) is not None:
            read[key] = list(reader.items()) if reader.is_list() else reader.value()
        reader.finish()
    except JsonStreamError:
        read = JsonStreamError
    if isinstance(expected, dict) or expected is JsonStreamError:
        assert read == expected
    else:  # valid JSON, but not an object
        assert read is JsonStreamError


def test_parse_session_file_and_import_share_the_rules() -> None:
    file = rich_file()
    assert parse_session_file(file.to_json(), "f").to_json() == file.to_json()
