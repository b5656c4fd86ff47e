"""The window page shows the window each call was sent, as its usage record names it."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from pygents_ctx import Agent, ContextConfig, Message, ModelLoop, Usage, UsageRecord
from pygents_ctx.cli.viewer import SQLiteSource, Viewer, ViewerServer
from pygents_ctx.context.stores import SQLiteContextStore, connect
from pygents_ctx.context.strategies.budget import FitTokens
from pygents_ctx.context.strategies.summarize import summary_message
from pygents_ctx.context.usage import WindowRecord
from pygents_ctx.testing import ScriptedModel
from tests.viewer.conftest import get, serving
from tests.viewer.test_pages import text_of


def _chat(count: int) -> list[Message]:
    return [
        Message("user" if n % 2 == 0 else "assistant", f"message {n} " + "word " * 40)
        for n in range(count)
    ]


async def _ask(store: SQLiteContextStore, strategy: Any, reply: str) -> None:
    agent = Agent("helper", "Helps", [], context=ContextConfig(store, strategy), replace=True)
    await ModelLoop(agent, ScriptedModel([reply]), instructions="Be brief.").run("And now?")


async def _fill(path: Path) -> list[WindowRecord]:
    async with connect(path) as conn:
        long = SQLiteContextStore(conn, session_id="long")
        await long.append_many(_chat(30))
        await _ask(long, FitTokens(500), "First.")
        await _ask(long, FitTokens(800), "Second.")
        fork = await long.fork(session_id="long-fork")
        await _ask(fork, FitTokens(300), "Forked.")

        old = SQLiteContextStore(conn, session_id="old")
        await old.append_many(_chat(4))
        await old.record_usage(UsageRecord(Usage(100, 10), model="m"))  # as before windows
        # A sub-agent's call, recorded in its caller's session: its window is of its own history.
        sub = WindowRecord("SubStrategy()", 1, ((0, 1),))
        await old.record_usage(
            UsageRecord(Usage(5, 1), call_id="c1", subagent_session="sub-1", window=sub)
        )

        compacted = SQLiteContextStore(conn, session_id="compacted")
        await compacted.append_many(_chat(6))
        await _ask(compacted, FitTokens(10_000), "Before.")
        await compacted.replace_prefix(6, [summary_message("They talked about words.")])
        await _ask(compacted, FitTokens(10_000), "After.")
        return [record.window for record in await long.get_usage() if record.window is not None]


def _shown(body: str) -> list[int]:
    """The history indexes the page shows in the window."""
    return [int(n) for n in re.findall(r"<tr class=(?:kept|edited)><td class=n>(\d+)</td>", body)]


def _serve(path: Path) -> Any:
    return serving(Viewer(SQLiteSource(str(path))))


def test_each_call_shows_the_messages_it_was_sent_and_the_strategy(tmp_path: Path) -> None:
    path = tmp_path / "windows.db"
    first, second = asyncio.run(_fill(path))
    server: ViewerServer
    with _serve(path) as server:
        # Steps count the history's assistant messages: the 30-message chat holds 15.
        for step, record in ((16, first), (17, second)):
            body = get(server, f"/session/long/window?step={step}").body
            shown = text_of(body)
            assert _shown(body) == record.indexes()
            assert f"built by {record.strategy}" in shown
            assert f"{len(record.indexes())} of {record.history} window messages" in shown
            assert "plus 1 message in no history position" in shown  # the instructions
        # The two calls had different budgets: the page shows each as it was, not one rebuild.
        assert first.strategy == "FitTokens(500)"
        assert second.strategy == "FitTokens(800)"
        assert len(first.indexes()) < len(second.indexes())
        # The next call has not been made: rebuilt, and the page says with what.
        nxt = text_of(get(server, "/session/long/window").body)
        assert "Rebuilt with stable (StableWindow(max_tokens=24000, low_water=0.5))" in nxt
        assert "the next call has not been made" in nxt
        # A strategy in the address rebuilds on purpose.
        asked = text_of(get(server, "/session/long/window?step=16&strategy=sliding:5").body)
        assert "Rebuilt with sliding:5" in asked
        assert "the address names the strategy" in asked


def test_a_fork_shows_the_calls_it_shares_and_its_own(tmp_path: Path) -> None:
    path = tmp_path / "windows.db"
    first, _ = asyncio.run(_fill(path))
    with _serve(path) as server:
        shared = get(server, "/session/long-fork/window?step=16").body
        assert _shown(shared) == first.indexes()
        # The call was made, and its usage counted, in the session the fork came from.
        assert "The call was made by long before this session was forked" in text_of(shared)
        assert 'href="/session/long/window?step=16"' in shared
        own = text_of(get(server, "/session/long-fork/window?step=18").body)
        assert "built by FitTokens(300)" in own
        assert "was forked" not in own


def test_a_session_without_records_says_so_and_names_the_strategy_used(tmp_path: Path) -> None:
    path = tmp_path / "windows.db"
    asyncio.run(_fill(path))
    with _serve(path) as server:
        shown = text_of(get(server, "/session/old/window?step=2").body)
        first = text_of(get(server, "/session/old/window?step=1").body)
    assert "As sent" not in shown
    assert "SubStrategy" not in first
    assert "this session's calls recorded no windows" in first
    assert "this session's calls recorded no windows" in shown
    assert "Rebuilt with stable (StableWindow(max_tokens=24000, low_water=0.5))" in shown


def test_a_window_recorded_before_a_compaction_is_not_placed_in_the_history_after_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "windows.db"
    asyncio.run(_fill(path))
    with _serve(path) as server:
        # Step 1 is the "Before." call: its positions counted a history the compaction rewrote.
        before = text_of(get(server, "/session/compacted/window?step=1").body)
        after = get(server, "/session/compacted/window?step=2").body
    assert "As sent" not in before
    assert "since the last compaction" in before
    # The call made after the compaction: its window, the summary first, exactly.
    assert "built by FitTokens(10000)" in text_of(after)
    assert _shown(after) == [0, 1, 2, 3]


def test_the_last_call_of_a_compacted_session_shows_its_window_on_both_databases(
    server: ViewerServer,
) -> None:
    steps = int(
        re.findall(
            r"name=step type=number min=1 max=(\d+)", get(server, "/session/trip/window").body
        )[0]
    )
    body = get(server, f"/session/trip/window?step={steps - 1}").body
    shown = text_of(body)
    # Recorded by the loop (no strategy given: the default), after both compactions.
    assert "As sent" in shown
    assert "built by StableWindow(max_tokens=24000, low_water=0.5)" in shown
    assert _shown(body)[:2] == [0, 1]  # the system message and the summary lead the window
