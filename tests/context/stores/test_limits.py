"""One set of rules on every backend: the ids, texts and message sizes each store takes.

Memory, SQLite and PostgreSQL accept the same values and refuse the same ones,
with the same `ValueError` naming the field and the rule, before anything is
written.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pygents_ctx import (
    Message,
    StoreSchemaError,
    TextBlock,
    ToolUseBlock,
    Usage,
    UsageRecord,
)
from pygents_ctx.context.stores import (
    ApprovalDecision,
    SessionSnapshot,
    SQLiteContextStore,
    connect,
)
from pygents_ctx.context.stores import _common as common
from pygents_ctx.context.stores.base import StoredMessage
from tests.context.stores.conftest import MakeStore

NUL = "a\x00b"
SURROGATE = "a\ud800b"
# Text every store takes as an id, a run id, a model name or message text.
ACCEPTED = ["plain", "ünïcødé ☕ 日本", "emoji 🎉", "x" * 10_000, "tab\tnew\nline", "\u200b"]


@pytest.mark.parametrize("session_id", ACCEPTED)
async def test_every_backend_takes_the_same_ids(make_store: MakeStore, session_id: str) -> None:
    store = await make_store(Message("user", session_id), session_id=session_id)
    await store.append(Message("user", "more"), run_id=session_id)

    assert store.session_id == session_id
    assert [m.text for m in await store.get_history()] == [session_id, "more"]
    assert [info.session_id for info in await store.list_sessions()] == [session_id]


@pytest.mark.parametrize(
    ("value", "rule"),
    [(NUL, r"holds a NUL character .*PostgreSQL"), (SURROGATE, r"holds a lone surrogate")],
    ids=["nul", "surrogate"],
)
async def test_every_backend_refuses_the_same_ids(
    make_store: MakeStore, value: str, rule: str
) -> None:
    with pytest.raises(ValueError, match=f"^session_id .*{rule}"):
        await make_store(session_id=value)

    store = await make_store(Message("user", "kept"), session_id="s")
    with pytest.raises(ValueError, match=f"^run_id .*{rule}"):
        await store.append(Message("user", "never"), run_id=value)
    with pytest.raises(ValueError, match=f"^run_id .*{rule}"):
        await store.append_many([Message("user", "never")], run_id=value)
    with pytest.raises(ValueError, match=f"^run_id .*{rule}"):
        await store.clear_run(value)
    with pytest.raises(ValueError, match=f"^session_id .*{rule}"):
        await store.fork(session_id=value)
    with pytest.raises(ValueError, match=f"^UsageRecord.model .*{rule}"):
        await store.record_usage(UsageRecord(Usage(1, 1), model=value))
    with pytest.raises(ValueError, match=f"^UsageRecord.run_id .*{rule}"):
        await store.record_usage(UsageRecord(Usage(1, 1), run_id=value))
    with pytest.raises(ValueError, match=f"^lease owner .*{rule}"):
        async with store.lease(owner=value):
            pass
    with pytest.raises(ValueError, match=f"^a checkpoint's agent .*{rule}"):
        await store.save_checkpoint(value, b"state")
    with pytest.raises(ValueError, match=f"^a tool call id .*{rule}"):
        await store.journal_start(value)
    with pytest.raises(ValueError, match=f"^rejection reason .*{rule}"):
        await store.record_decision("call-1", ApprovalDecision(False, value))

    assert [m.text for m in await store.get_history()] == ["kept"]
    assert await store.get_usage() == []
    assert await store.list_checkpoints() == []
    assert await store.get_journal(["call-1"]) == {}
    assert await store.get_decisions() == {}


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (Message("user", SURROGATE), r"Message\.content\[0\]\.text"),
        (Message("user", "ok", name=SURROGATE), r"Message\.name"),
        (
            Message("assistant", [ToolUseBlock("c", "t", {"q": [SURROGATE]})]),
            r"Message\.content\[0\]\.input\.q\[0\]",
        ),
        (
            Message("assistant", [ToolUseBlock("c", "t", {SURROGATE: 1})]),
            r"Message\.content\[0\]\.input \(a key\)",
        ),
        # A message may hold NUL (every store keeps it): the surrogate is the fault.
        (Message("user", [TextBlock(NUL), TextBlock(SURROGATE)]), r"Message\.content\[1\]\.text"),
    ],
    ids=["text", "name", "tool-input", "tool-input-key", "after-a-nul"],
)
async def test_every_backend_refuses_a_message_utf8_cannot_encode(
    make_store: MakeStore, message: Message, field: str
) -> None:
    store = await make_store(Message("user", "kept"))
    for write in (
        lambda: store.append(message),
        lambda: store.append_many([Message("user", "never"), message]),
        lambda: store.replace_prefix(1, [message]),
    ):
        with pytest.raises(ValueError, match=f"^{field} .*holds a lone surrogate"):
            await write()

    assert [m.text for m in await store.get_history()] == ["kept"]


async def test_every_backend_takes_a_message_up_to_the_limit_and_refuses_one_over(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    size = len(common.encode_message(Message("user", "x" * 1000)))
    monkeypatch.setattr(common, "MAX_MESSAGE_BYTES", size)  # the real one is 256 MiB
    store = await make_store(Message("user", "kept"))

    await store.append(Message("user", "x" * 1000))  # exactly at the limit
    over = Message("user", "x" * 1001)
    expected = f"^Message is {size + 1:,} bytes as JSON, more than the {size:,} bytes"
    for write in (
        lambda: store.append(over),
        lambda: store.append_many([Message("user", "never"), over]),
        lambda: store.replace_prefix(1, [over]),
    ):
        with pytest.raises(ValueError, match=expected):
            await write()

    assert [len(m.text) for m in await store.get_history()] == [4, 1000]


async def test_restore_checks_every_message_before_it_writes(make_store: MakeStore) -> None:
    store = await make_store(session_id="target")
    snapshot = SessionSnapshot(
        "target",
        [StoredMessage(Message("user", "fine"))],
        [StoredMessage(Message("user", SURROGATE))],
    )

    with pytest.raises(ValueError, match="lone surrogate"):
        await store.restore(snapshot)

    assert await store.get_history(include_archived=True) == []


def test_the_limit_is_below_what_the_databases_hold() -> None:
    db = sqlite3.connect(":memory:")
    try:
        sqlite_limit = db.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
    finally:
        db.close()
    postgres_bytea_limit = 2**30 - 1  # one field of any type: 1 GB

    assert common.MAX_MESSAGE_BYTES == 256 * 2**20
    assert min(sqlite_limit, postgres_bytea_limit) > common.MAX_MESSAGE_BYTES


# -- connect() is as careful as the command line -------------------------------------------


async def test_connect_to_a_missing_directory_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "x.db"

    with pytest.raises(sqlite3.OperationalError, match=re.escape(f"{str(path)!r}")) as caught:
        await connect(path)

    assert "does not exist; create it first" in str(caught.value)
    assert not path.parent.exists()


async def test_connect_to_a_directory_says_so(tmp_path: Path) -> None:
    with pytest.raises(sqlite3.OperationalError, match="it is a directory"):
        await connect(tmp_path)


async def test_connect_refuses_another_programs_database_and_leaves_it_as_it_was(
    tmp_path: Path,
) -> None:
    path = tmp_path / "theirs.db"
    theirs = sqlite3.connect(path)
    theirs.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    theirs.execute("INSERT INTO users (name) VALUES ('ada')")
    theirs.commit()
    theirs.close()
    before = path.read_bytes()

    with pytest.raises(
        StoreSchemaError, match=r"another program's SQLite database \(tables users\)"
    ):
        await connect(path)

    assert path.read_bytes() == before  # no tables added, the journal mode unchanged
    check = sqlite3.connect(path)
    assert check.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    check.close()


async def test_connect_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 50)

    with pytest.raises(StoreSchemaError, match="is not a SQLite database"):
        await connect(path)

    assert path.read_bytes() == b"these are my notes, not a database\n" * 50


@pytest.mark.parametrize("existing", ["empty file", "pygents file", "new"])
async def test_connect_opens_new_empty_and_its_own_files(tmp_path: Path, existing: str) -> None:
    path = tmp_path / "ctx.db"
    if existing == "empty file":
        path.write_bytes(b"")
    elif existing == "pygents file":
        async with connect(path) as conn:
            await SQLiteContextStore(conn, session_id="s").append(Message("user", "hi"))

    async with connect(path) as conn:
        store = SQLiteContextStore(conn, session_id="s")
        await store.append(Message("user", [TextBlock("again")]))
        texts: list[Any] = [m.text for m in await store.get_history()]

    assert texts == (["hi", "again"] if existing == "pygents file" else ["again"])
