"""The viewer's pages over plain HTTP, on SQLite and on PostgreSQL: what each one shows."""

from __future__ import annotations

import asyncio
import hashlib
import html
import re
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pygents_ctx import Message
from pygents_ctx.cli.viewer import Prices, SQLiteSource, Viewer, ViewerServer, _pages, _queries
from pygents_ctx.context.stores import SQLiteContextStore, connect
from pygents_ctx.model.base import Pricing
from tests.viewer.conftest import PRICES, get, serving
from tests.viewer.store import PNG, XSS


def text_of(body: str) -> str:
    """The page's visible text, roughly: tags out, entities decoded, spaces squeezed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def test_the_sessions_page_lists_each_session_with_its_counts_and_cost(
    server: ViewerServer,
) -> None:
    page = get(server, "/")
    assert page.status == 200
    assert page.headers["Content-Type"] == "text/html; charset=utf-8"
    shown = text_of(page.body)
    assert "3 sessions" in shown
    trip = re.search(r'<tr><td><a class=session href="/session/trip">trip</a>.*?</tr>', page.body)
    assert trip is not None
    cells = [text_of(cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", trip.group(0))]
    # session, created, messages, archived, tokens, input, output, runs, calls, last, cost, first
    assert cells[2] == "11"
    assert cells[3] == "12"
    assert cells[7] == "3"  # three ModelLoop runs
    assert cells[8] == "9"  # eight scripted calls and one more usage row
    assert cells[10].startswith("$")
    assert cells[11] == "Here is the map."


def test_search_keeps_the_sessions_whose_id_contains_the_text(server: ViewerServer) -> None:
    page = get(server, "/?q=RI")
    assert "1 session whose id contains" in text_of(page.body)
    assert 'href="/session/trip"' in page.body
    assert 'href="/session/xss"' not in page.body
    assert "No sessions match" in get(server, "/?q=nothing-like-it").body


def test_markup_in_a_message_is_shown_as_text_and_never_runs(server: ViewerServer) -> None:
    for path in ("/", "/session/xss", "/session/xss/window", "/memory/graph/trips"):
        body = get(server, path).body
        assert "<script" not in body, path
    transcript = get(server, "/session/xss").body
    assert html.escape(XSS) in transcript
    assert 'id="call-c&lt;1&gt;"' in transcript
    assert "<b>t&lt;b&gt;</b>" in transcript
    assert "<span class=tag>thinking</span><span class=muted>signed</span>" in transcript
    assert "<span class=tag>redacted thinking</span>" in transcript
    assert (
        "<span class=tag>reasoning</span><span class=muted>id rs_&lt;1&gt; by o&lt;3&gt;, "
        "12 characters, encrypted</span>"
    ) in transcript
    policy = get(server, "/session/xss").headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy
    assert "script-src" not in policy


def test_a_transcript_shows_typed_blocks_runs_and_the_summary_with_what_it_replaced(
    server: ViewerServer,
) -> None:
    body = get(server, "/session/trip").body
    assert body.count("<div class=run>run ") == 2  # the runs still in the live history
    assert body.count("<article") == 11
    calls = re.findall(r'id="call-([^"]+)"', body)
    results = re.findall(r'id="result-([^"]+)"', body)
    assert len(calls) == 3
    assert sorted(calls) == sorted(results)
    for call in calls:  # each call links to its result on the page, and back
        assert f'href="#result-{call}"' in body
        assert f'href="#call-{call}"' in body
    assert body.count("class='block result error'") == 1  # Lima's station is offline
    # A message of tool results is shown as the tool's; the user's own text stays the user's.
    roles = re.findall(r'<article class="msg (\w+)', body)
    assert roles.count("tool") == len(results) == 3
    assert roles.count("user") == 2  # the summary, and the user's question
    summary = re.search(r'<article class="msg user summary".*?</article>', body, re.S)
    assert summary is not None
    said = text_of(summary.group(0))
    assert "replaced a6\u2013a11 (6 messages), updating the summary a5" in said
    assert 'href="/session/trip/archive?page=1#a-6"' in summary.group(0)


def test_the_archive_says_which_summary_replaced_each_message_and_shows_the_image(
    server: ViewerServer,
) -> None:
    body = get(server, "/session/trip/archive").body
    cards = re.findall(r"<article.*?</article>", body, re.S)
    assert len(cards) == 12
    alt = f"image/png, {len(PNG):,} bytes"
    assert f'<img class=inline alt="{alt}" src="data:image/png;base64,' in cards[1]
    assert "by a5" in text_of(cards[1])  # the first summary, itself archived later
    assert "carried into the new history" in text_of(cards[4])  # the system prompt, copied
    assert "earlier summary" in text_of(cards[5])
    assert "by #1" in text_of(cards[6])  # the live summary
    assert 'href="/session/trip?page=1#m-1"' in cards[6]


def test_a_link_to_a_result_on_another_page_redirects_to_it(server: ViewerServer) -> None:
    first = get(server, "/session/trip?size=3").body
    call = re.findall(r'id="call-([^"]+)"', first)[0]
    match = re.search(r'class=to-result href="([^"]+)"', first)
    assert match is not None
    link = html.unescape(match.group(1))
    assert link.startswith(f"/session/trip/tool/{call}?to=result")
    moved = get(server, link, follow=False)
    assert moved.status == 302
    assert moved.headers["Location"] == f"/session/trip?page=2&size=3#result-{call}"
    back = get(server, f"/session/trip/tool/{call}?to=call&near=100", follow=False)
    assert back.headers["Location"] == f"/session/trip?page=1#call-{call}"


def test_the_transcript_is_paged(server: ViewerServer) -> None:
    page = get(server, "/session/trip?size=4&page=3")
    assert page.body.count("<article") == 3  # 11 messages: 4, 4, 3
    assert "page 3 of 3" in text_of(page.body)
    assert get(server, "/session/trip?size=4&page=4").status == 404


def test_the_window_marks_what_the_strategy_kept_cleared_and_dropped(
    server: ViewerServer,
) -> None:
    body = get(server, "/session/trip/window?strategy=clear-results:1,fit:200").body
    states = re.findall(r"<tr class=(\w+)>", body)
    assert "kept" in states
    assert "cleared" in states
    assert "dropped" in states
    shown = text_of(body)
    assert "over 200 by" not in shown
    assert re.search(r"(\d+) left of 200", shown)
    # The window's own tokens are each message's, added up.
    counts = [
        int(n.replace(",", "")) for n in re.findall(r"as in the history, ([\d,]+) tokens", body)
    ]
    assert counts
    assert all(count > 0 for count in counts)


def test_a_window_at_an_earlier_step_is_built_from_the_history_before_that_call(
    server: ViewerServer,
) -> None:
    body = get(server, "/session/trip/window?strategy=sliding:100&step=1").body
    assert "call 1 of 5" in text_of(body)
    assert re.findall(r"<tr class=(\w+)>", body) == ["kept", "kept"]  # system and summary


def test_a_pinned_window_shows_its_pin(server: ViewerServer) -> None:
    body = get(server, "/session/trip/window?strategy=fit:200&pin=300").body
    assert "<tr class=pin>" in body
    assert re.search(r"pin at \d+", text_of(body))


def test_the_spend_page_draws_a_bar_per_call_and_the_budget(server: ViewerServer) -> None:
    body = get(server, "/session/trip/spend?budget=1000").body
    charts = re.findall(r"<svg.*?</svg>", body, re.S)
    assert len(charts) == 2
    tokens, window = charts
    bars = re.findall(r"<rect class=bar[^>]*>", tokens)
    assert len(bars) == 9 * 2 + 1  # input and output per call, and the one cached part
    assert len(re.findall(r"<rect class=bar", window)) == 9
    assert "class=budget" in window
    assert "budget 1,000 tokens" in window
    assert "#d92d20" in window  # the call over 1,000 tokens is drawn red
    assert "<td class=n>2,000</td><td class=n>1,500</td>" in body


def test_memory_pages_browse_each_store_in_the_database(server: ViewerServer) -> None:
    overview = text_of(get(server, "/memory").body)
    assert "Graph store" in overview
    assert "Blob store" in overview
    assert "Task store" in overview
    graph = get(server, "/memory/graph/trips").body
    assert "flight" in graph
    assert "href='#e-lima'" in graph
    assert html.escape(XSS) in graph
    blobs = get(server, "/memory/blobs").body
    assert 'href="/memory/blobs/notes.txt"' in blobs
    assert html.escape(XSS) in get(server, "/memory/blobs/notes.txt").body
    assert "data:image/png;base64," in get(server, "/memory/blobs/pixel.png").body
    tasks = text_of(get(server, "/memory/tasks/trip/planner").body)
    assert "book flights succeeded" in tasks
    assert "pack failed 1 / 2 no umbrella" in tasks


def test_the_vector_collection_lists_its_documents(server: ViewerServer) -> None:
    assert "Vector store" in text_of(get(server, "/memory").body)
    body = get(server, "/memory/vectors/notes").body
    assert "Oslo in May" in body
    assert "&quot;city&quot;: &quot;Oslo&quot;" in body


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        ("/session/nope", 404, "no session 'nope' in"),
        ("/session/trip?page=x", 400, "page must be a whole number of at least 1, not 'x'"),
        (
            "/session/trip/window?strategy=fitt:3",
            400,
            "unknown strategy 'fitt' (did you mean 'fit'?)",
        ),
        ("/session/trip/window?step=99", 400, "step must be at most 6"),
        ("/session/trip/tool/nope", 404, "no tool result for call 'nope'"),
        ("/nowhere", 404, "no page at '/nowhere'"),
        ("/session/a%00b", 400, "NUL character"),
        ("/?q=%00", 400, "NUL character"),
        ("/?page=99999999999999999999999", 404, "page 99999999999999999999999 does not exist"),
        ("/session/trip?page=99999999999999999999999", 404, "does not exist"),
        ("/memory/blobs/missing", 404, "no blob 'missing'"),
    ],
)
def test_a_bad_address_is_an_error_page_that_says_what_is_wrong(
    server: ViewerServer, path: str, status: int, says: str
) -> None:
    page = get(server, path)
    assert page.status == status
    assert says in text_of(page.body)
    assert "<div class=error-page>" in page.body


def test_a_prefix_of_a_session_id_finds_it_as_the_command_line_does(server: ViewerServer) -> None:
    assert "<h1>trip</h1>" in get(server, "/session/tr").body


def test_requests_to_another_host_name_and_other_methods_are_refused(
    sqlite_server: ViewerServer,
) -> None:
    request = urllib.request.Request(sqlite_server.url, headers={"Host": "evil.example:80"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    refused.value.close()
    assert refused.value.code == 400
    post = urllib.request.Request(sqlite_server.url, data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as unsupported:
        urllib.request.urlopen(post, timeout=10)
    unsupported.value.close()
    assert unsupported.value.code == 501


def _fingerprint(directory: Path) -> dict[str, str]:
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.iterdir())
    }


def test_browsing_every_page_changes_no_byte_of_the_database(
    sqlite_db: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy.db"
    copy.write_bytes(sqlite_db.read_bytes())
    before = _fingerprint(tmp_path)
    with serving(Viewer(SQLiteSource(str(copy)))) as server:
        for path in (
            "/", "/session/trip", "/session/trip/archive", "/session/trip/window?pin=500",
            "/session/trip/spend", "/session/trip/checkpoints", "/memory",
            "/memory/blobs/pixel.png", "/session/nope",
        ):  # fmt: skip
            get(server, path)
    after = _fingerprint(tmp_path)
    # Reading a WAL database makes SQLite create its index files (-shm, -wal): the
    # database itself is byte for byte the same, and nothing was written to the WAL.
    assert after["copy.db"] == before["copy.db"]
    assert (tmp_path / "copy.db-wal").read_bytes() == b""


async def _long_session(path: Path, count: int) -> None:
    async with connect(path) as conn:
        store = SQLiteContextStore(conn, session_id="long")
        await store.append_many(
            [Message("user" if n % 2 == 0 else "assistant", f"m{n}") for n in range(count)]
        )


def test_a_long_session_is_read_a_page_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """How fast a 100,000-message session opens is measured in bench/viewer.py; here, that
    opening one decodes a page of messages, not the history."""
    path = tmp_path / "long.db"
    asyncio.run(_long_session(path, 3_000))
    decoded: list[int] = []
    real = _queries.decode

    def counting(session_id: str, position: int, tokens: int, data: bytes) -> Message:
        decoded.append(position)
        return real(session_id, position, tokens, data)

    monkeypatch.setattr(_queries, "decode", counting)
    with serving(Viewer(SQLiteSource(str(path)))) as server:
        last = get(server, "/session/long?page=30")
        assert last.body.count("<article") == 100
        assert "page 30 of 30" in text_of(last.body)
    assert len(decoded) <= 100 + 1  # the page, and the message before it (a new run?)
    assert min(decoded) >= 2_899


def test_an_empty_session_has_pages_that_say_so(server: ViewerServer) -> None:
    assert "This session has no messages." in get(server, "/session/empty").body
    assert "No usage records" in get(server, "/session/empty/spend").body
    assert "No checkpoints" in get(server, "/session/empty/checkpoints").body
    window = text_of(get(server, "/session/empty/window").body)
    assert "0 of 0" in window
    assert "next call" in window
    assert "Nothing was archived." in get(server, "/session/empty/archive").body


def test_the_checkpoints_page_lists_each_agents_checkpoint_at_its_message(
    server: ViewerServer,
) -> None:
    page = get(server, "/session/trip/checkpoints")
    rows = re.findall(r"<tr><td>planner</td>.*?</tr>", page.body)
    cells = [[text_of(cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)] for row in rows]
    # The last run: before its prompt (7 messages then), before each of its two model calls.
    assert [row[:3] for row in cells] == [
        ["planner", "7", "before message 7"],
        ["planner", "8", "before message 8"],
        ["planner", "10", "before message 10"],
    ]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", row[3]) for row in cells)
    assert int(cells[2][4].replace(",", "")) > int(cells[0][4].replace(",", ""))  # more queued
    assert 'href="/session/trip?page=1#m-8"' in page.body
    assert "m-8" in get(server, "/session/trip").body  # where the link lands
    assert 'href="/session/trip/checkpoints" class=on>Checkpoints</a>' in page.body
    assert "No checkpoints" in get(server, "/session/xss/checkpoints").body


def test_a_forks_checkpoints_page_shows_those_up_to_its_point(tmp_path: Path) -> None:
    async def fill() -> None:
        async with connect(tmp_path / "fork.db") as conn:
            store = SQLiteContextStore(conn, session_id="main")
            await store.append_many([Message("user", f"m{n}") for n in range(3)])
            await store.save_checkpoint("writer", b'{"at": 3}')
            await store.append(Message("user", "m3"))
            await store.save_checkpoint("writer", b'{"at": 4}')
            await store.fork(session_id="branch", at=3)
            gaps = SQLiteContextStore(conn, session_id="gaps")
            for n, run in enumerate(["r1", "r1", "r2", "r1"]):
                if n == 2:
                    await gaps.save_checkpoint("writer", b"after g1")
                await gaps.append(Message("user", f"g{n}"), run_id=run)
            await gaps.save_checkpoint("writer", b"after g3")
            await gaps.clear_run("r2")  # g2 goes, and the checkpoint that saw it

    asyncio.run(fill())
    with serving(Viewer(SQLiteSource(str(tmp_path / "fork.db")))) as server:
        branch = text_of(get(server, "/session/branch/checkpoints").body)
        main = text_of(get(server, "/session/main/checkpoints").body)
        gaps = text_of(get(server, "/session/gaps/checkpoints").body)
    assert "writer 3 after the last message" in branch
    assert "writer 4" not in branch
    assert "writer 3 before message 3" in main
    assert "writer 4 after the last message" in main
    assert "writer 2 before message 2" in gaps  # positions 0, 1, 3: a gap after message 1
    assert "after the last message" not in gaps


def test_a_clipped_tool_result_is_marked_truncated(server: ViewerServer) -> None:
    body = get(server, "/session/trip/window?strategy=truncate-results:20").body
    assert "<tr class=truncated>" in body
    assert "[truncated" in body


def test_a_session_that_called_a_model_without_a_price_costs_unknown(
    sqlite_db: Path,
) -> None:
    only_scripted = Prices({"scripted": Pricing(3.0, 15.0)})
    with serving(Viewer(SQLiteSource(str(sqlite_db)), only_scripted)) as server:
        body = get(server, "/").body
        assert "<span title='no --pricing for gpt-4o'>?</span>" in body
        calls = get(server, "/session/trip/spend").body
        assert calls.count("<td>?</td>") == 1  # the gpt-4o call; the scripted ones are priced
    with serving(Viewer(SQLiteSource(str(sqlite_db)))) as server:
        unpriced = get(server, "/").body
        assert "<th>cost</th>" not in unpriced
        assert "--pricing MODEL=INPUT,OUTPUT" in unpriced


def test_a_page_that_fails_is_a_500_page_naming_the_error(
    sqlite_server: ViewerServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> str:
        raise RuntimeError("the disk is on fire")

    monkeypatch.setattr(_pages, "spend", broken)
    page = get(sqlite_server, "/session/trip/spend")
    assert page.status == 500
    assert "RuntimeError: the disk is on fire" in text_of(page.body)


def test_the_finder_keeps_the_page_size_and_the_window_repeats_no_anchor(
    server: ViewerServer,
) -> None:
    first = get(server, "/session/trip?size=3").body
    match = re.search(r'class=to-result href="([^"]+)"', first)
    assert match is not None
    assert "size=3" in html.unescape(match.group(1))
    moved = get(server, html.unescape(match.group(1)), follow=False)
    assert moved.headers["Location"].startswith("/session/trip?page=2&size=3#result-")
    window = get(server, "/session/trip/window?strategy=clear-results:1").body
    ids = re.findall(r' id="([^"]+)"', window)
    assert len(ids) == len(set(ids))
    assert any(i.startswith("result-") for i in ids)


def test_a_saved_agents_pool_is_browsable_beside_the_stores(
    sqlite_server: ViewerServer, agent_file: Path
) -> None:
    overview = get(sqlite_server, "/memory").body
    assert "Context pools (saved agents)" in overview
    assert 'href="/memory/pool/0">pool-keeper</a>' in overview
    assert 'href="/session/trip">trip</a>' in overview  # the agent's session
    pool = get(sqlite_server, "/memory/pool/0").body
    assert "2 items in the context pool" in text_of(pool)
    assert html.escape(XSS) in pool
    assert "<script" not in pool
    assert '<article class="msg user">' in pool
    assert "Pack light." in pool
    assert get(sqlite_server, "/memory/pool/1").status == 404


def test_without_agent_files_the_memory_page_says_how_to_see_a_pool(
    postgres_viewer: ViewerServer,
) -> None:
    assert "--agent FILE" in text_of(get(postgres_viewer, "/memory").body)


def test_a_window_pinned_at_its_last_message_still_shows_the_pin(server: ViewerServer) -> None:
    # Over budget at every call, the PinnedWindow re-pins each time, at the history's end.
    body = get(server, "/session/trip/window?strategy=fit:100&pin=100").body
    assert body.count("<tr class=pin>") == 1
    rows = re.findall(r"<tr class=['\"]?([\w ]+)['\"]?>", body)
    assert rows[-1] == "pin"  # after every history message
    shown = text_of(body)
    assert "re-pinned at this step" in shown


async def _owned_sessions(path: Path) -> None:
    async with connect(path) as conn:
        for session, owner in (("a-1", "ann"), ("a-2", "ann"), ("b-1", "bob"), ("open", None)):
            store = SQLiteContextStore(conn, session_id=session, owner=owner)
            await store.append(Message("user", f"hello from {session}"))


def test_the_sessions_page_shows_owners_and_lists_one_owners_sessions(tmp_path: Path) -> None:
    path = tmp_path / "owners.db"
    asyncio.run(_owned_sessions(path))
    with serving(Viewer(SQLiteSource(str(path)))) as server:
        everyone = get(server, "/").body
        anns = get(server, "/?owner=ann").body
        nobody = get(server, "/?owner=carol").body
        session = get(server, "/session/b-1").body

    assert "<th>owner</th>" in everyone
    row = re.search(r'<tr><td><a class=session href="/session/b-1">.*?</tr>', everyone)
    assert row is not None
    assert '<a href="/?owner=bob">bob</a>' in row.group(0)
    assert "4 sessions" in text_of(everyone)
    assert "2 sessions of owner “ann”" in text_of(anns)
    assert sorted(re.findall(r'href="/session/([^"]+)"', anns)) == ["a-1", "a-2"]
    assert "No sessions match" in nobody
    assert '<a href="/?owner=bob">bob</a>' in session  # the session's own page names its owner


def test_a_store_without_owners_shows_no_owner_column(server: ViewerServer) -> None:
    assert "<th>owner</th>" not in get(server, "/").body


def test_a_page_reads_the_databases_catalog_once(sqlite_db: Path) -> None:
    """A page is one snapshot: which tables and columns it has is read once per page,
    however many sessions the page lists or checks for owners, forks and usage."""
    source = SQLiteSource(str(sqlite_db))
    opened = source.reading
    catalog: list[str] = []

    @contextmanager
    def counted() -> Iterator[Any]:
        with opened() as reading:
            plain = reading.rows

            def rows(sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
                if "sqlite_master" in sql or "pragma_table_info" in sql:
                    catalog.append(f"{sql} {list(params)}")
                return plain(sql, params)

            reading.rows = rows
            yield reading

    source.reading = counted  # type: ignore[method-assign]
    server = ViewerServer(Viewer(source, PRICES), port=0)
    try:
        status, _, body = server.answer("/", server.url.split("//")[1].rstrip("/"))
    finally:
        server.server_close()
        source.close()

    assert status == 200
    assert body.count("<tr") > 3  # several sessions listed
    assert len(catalog) == len(set(catalog)) <= 3  # tables, and two tables' columns, once each
