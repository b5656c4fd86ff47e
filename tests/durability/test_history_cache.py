"""A store's cached history against another process writing the same session.

The parent keeps one store whose history cache stays warm; a child process
changes the session every way a writer can, including deleting the session's
row behind the stores' backs and creating it again. After each change the
cached reads must equal what a store with no cache reads.
"""

from __future__ import annotations

import random

from pygents_ctx.context.stores import ContextStore

from .children import Child, Database
from .worker import message

# Appends are the common case; each kind of rewrite comes now and then.
OPS = ["append"] * 3 + ["parent", "clear", "clear_run", "replace", "recreate"]


async def fresh_reads(cached: ContextStore) -> tuple[list[str], list[str]]:
    """What a new store on the same connection reads: no cache involved."""
    fresh = type(cached)(cached.connection, session_id=cached.session_id)  # type: ignore[call-arg,attr-defined]
    return (
        [m.text for m in await fresh.get_history()],
        [m.text for m in await fresh.get_history(include_archived=True)],
    )


async def cached_reads(cached: ContextStore) -> tuple[list[str], list[str]]:
    return (
        [m.text for m in await cached.get_history()],
        [m.text for m in await cached.get_history(include_archived=True)],
    )


async def test_a_session_deleted_and_written_again_is_read_afresh(
    db: Database, session: str
) -> None:
    child = Child(db, session, "serve")
    child.expect("ready")
    async with db.store(session) as cached:
        assert child.send(op="append", texts=["old0", "old1"]) == {"ok": True}
        assert len(await cached.get_history()) == 2  # the cache now holds positions 0 and 1

        assert child.send(op="delete_session") == {"ok": True}
        assert child.send(op="append", texts=["new0", "new1", "new2"]) == {"ok": True}

        assert await cached_reads(cached) == await fresh_reads(cached)
        assert [m.text.split()[0] for m in await cached.get_history()] == ["new0", "new1", "new2"]
    child.finish()


async def test_random_changes_from_another_process_never_leave_the_cache_stale(
    db: Database, session: str
) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    child = Child(db, session, "serve")
    child.expect("ready")
    live = 0  # messages in the live history, as far as the parent knows
    async with db.store(session) as cached:
        for step in range(120):
            await cached.get_history()  # warm: the cache holds what is there now
            op = rng.choice(
                [
                    "append",
                    "append",
                    "append",
                    "parent",
                    "clear",
                    "clear_run",
                    "replace",
                    "recreate",
                ]
            )
            texts = [f"s{step}.{k}" for k in range(rng.randint(1, 3))]
            if op == "append":
                reply = child.send(op="append", texts=texts, run_id=rng.choice([None, "r1"]))
            elif op == "parent":  # the parent writes too, through its cached store
                await cached.append_many([message(text) for text in texts])
                reply = {"ok": True}
            elif op == "clear":
                reply = child.send(op="clear")
            elif op == "clear_run":
                reply = child.send(op="clear_run", run_id="r1")
            elif op == "replace":
                count = rng.randint(0, live)
                reply = child.send(op="replace_prefix", count=count, texts=texts[:1])
            else:
                assert child.send(op="delete_session") == {"ok": True}
                reply = child.send(op="append", texts=texts)
            assert reply == {"ok": True}, (reply, seed)
            cached_view, fresh_view = await cached_reads(cached), await fresh_reads(cached)
            assert cached_view == fresh_view, f"stale after {op} at step {step} (seed {seed})"
            live = len(fresh_view[0])
    child.finish()
