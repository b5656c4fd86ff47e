"""The store examples of seed 000, with our names, run as written.

The seed imports from `axio`; here it is `pygents_ctx`. Where the seed's code
calls `asyncio.run(main())`, the test awaits `main()`. The compaction examples
belong to the compaction module's tests.
"""

from __future__ import annotations

import pathlib
import tempfile

from pygents_ctx import Message, TextBlock, from_dict, to_dict
from pygents_ctx.context.stores import (
    ContextStore,
    MemoryContextStore,
    SessionInfo,
    SQLiteContextStore,
    connect,
)


def test_block_serialization_example() -> None:
    d = to_dict(TextBlock(text="hello"))
    assert d == {"type": "text", "text": "hello"}
    block = from_dict(d)
    assert block == TextBlock(text="hello")


class MyContextStore(ContextStore):
    """Exactly the seed's custom store: no run_id, no get_history arguments."""

    def __init__(self) -> None:
        self._messages: list[Message] = []

    async def append(self, message: Message) -> None:  # type: ignore[override]
        self._messages.append(message)

    async def get_history(self) -> list[Message]:  # type: ignore[override]
        return list(self._messages)


async def test_custom_store_example_and_the_defaults_it_inherits() -> None:
    store = MyContextStore()
    assert store.session_id  # auto-generated UUID hex

    await store.append_many([Message(role="user", content=[TextBlock(text="Hello")])])
    fork = await store.fork()
    await store.add_context_tokens(10, 5)

    assert isinstance(fork, MemoryContextStore)
    assert await fork.get_history() == await store.get_history()
    assert await store.count() == 1
    assert await store.get_context_tokens() == (10, 5)
    assert [i.preview for i in await store.list_sessions()] == ["Hello"]


async def test_memory_context_store_example() -> None:
    async def main() -> None:
        ctx = MemoryContextStore()
        await ctx.append(Message(role="user", content=[TextBlock(text="Hello")]))
        await ctx.append(Message(role="assistant", content=[TextBlock(text="Hi!")]))
        history = await ctx.get_history()
        assert len(history) == 2
        assert history[0].role == "user"
        # fork() creates an independent deep copy - useful for branching
        fork = await ctx.fork()
        await fork.append(Message(role="user", content=[TextBlock(text="(branch)")]))
        assert len(await ctx.get_history()) == 2  # original unchanged
        assert len(await fork.get_history()) == 3
        await ctx.close()

    await main()


async def test_sqlite_context_store_example() -> None:
    async def main() -> None:
        with tempfile.TemporaryDirectory() as directory:
            tmp = pathlib.Path(directory) / "ctx.db"
            conn = await connect(tmp)
            try:
                store = SQLiteContextStore(conn, session_id="my-session")
                await store.append(Message(role="user", content=[TextBlock(text="Hello")]))
                history = await store.get_history()
                assert len(history) == 1
                # fork() copies messages into a new session
                forked = await store.fork()
                assert len(await forked.get_history()) == 1
                assert forked.session_id != store.session_id
            finally:
                await conn.close()

    await main()


async def test_factory_methods_example() -> None:
    async def main() -> None:
        messages = [Message(role="user", content=[TextBlock(text="hello")])]
        # Create from existing messages
        ctx = await MemoryContextStore.from_history(messages)
        # Clone another context store
        ctx2 = await MemoryContextStore.from_context(ctx)
        assert await ctx2.get_history() == messages

    await main()


async def test_token_tracking_example() -> None:
    async def main() -> None:
        ctx = MemoryContextStore()
        await ctx.add_context_tokens(100, 50)
        await ctx.add_context_tokens(200, 80)
        in_tok, out_tok = await ctx.get_context_tokens()
        assert in_tok == 300
        assert out_tok == 130

    await main()


def test_session_info_example() -> None:
    info = SessionInfo(
        session_id="abc123",
        message_count=10,
        preview="What is the capital of France?",
        created_at="2024-01-15 10:30:00",
        input_tokens=1500,
        output_tokens=300,
    )
    assert info.session_id == "abc123"
    assert info.message_count == 10
