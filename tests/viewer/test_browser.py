"""The viewer in a real browser: headless Chromium loads each page of a store the
tests built, and the tests check what a person would see; screenshots are saved.

Chromium comes from `.ci/chromium` (which `make test` runs); without it these
tests fail, saying so.
"""

from __future__ import annotations

import struct
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pygents_ctx.cli.viewer import ViewerServer
from tests.viewer.browser import Dom, find_chromium, load, screenshot
from tests.viewer.store import XSS

PAGES = {
    "sessions": "/",
    "transcript": "/session/trip",
    "archive": "/session/trip/archive",
    "window": "/session/trip/window?strategy=clear-results:1,fit:200",
    "pinned": "/session/trip/window?strategy=fit:200&pin=300",
    "spend": "/session/trip/spend?budget=1000",
    "memory": "/memory",
    "graph": "/memory/graph/trips",
    "xss": "/session/xss",
}


@pytest.fixture(scope="module")
def chromium() -> str:
    found = find_chromium()
    if found is None:
        pytest.fail("no Chromium here: run .ci/chromium (make test does)", pytrace=False)
    return found


@pytest.fixture(scope="module")
def pages(chromium: str, sqlite_server: ViewerServer) -> dict[str, Dom]:
    """Every page's DOM as Chromium built it (loaded a few at a time)."""
    base = sqlite_server.url.rstrip("/")
    with ThreadPoolExecutor(max_workers=3) as pool:
        loaded = pool.map(lambda path: load(chromium, base + path), PAGES.values())
        return dict(zip(PAGES, loaded, strict=True))


def test_the_sessions_page_links_to_each_session(
    pages: dict[str, Dom], chromium: str, sqlite_server: ViewerServer
) -> None:
    links = {a.text: a.attrs["href"] for a in pages["sessions"].all("a", "session")}
    assert links == {"trip": "/session/trip", "xss": "/session/xss", "empty": "/session/empty"}
    followed = load(chromium, sqlite_server.url.rstrip("/") + links["trip"])
    assert [h1.text for h1 in followed.all("h1")] == ["trip"]


def test_a_transcript_shows_messages_calls_linked_to_results_and_runs(
    pages: dict[str, Dom],
) -> None:
    dom = pages["transcript"]
    assert len(dom.all("article", "msg")) == 11
    marks = [div.text for div in dom.all("div", "run")]
    assert marks[0] == "outside any run"  # the system prompt and the summary
    assert len(marks) == 3
    assert all(mark.startswith("run ") for mark in marks[1:])
    for link in dom.all("a", "to-result"):
        target = link.attrs["href"]
        assert target.startswith("#result-")
        assert dom.by_id(target[1:]) is not None  # the anchor is on the page
    assert len(dom.all("a", "to-result")) == 3
    summary = dom.all("article", "summary")
    assert len(summary) == 1


def test_the_archive_shows_the_image_inline(pages: dict[str, Dom]) -> None:
    images = pages["archive"].all("img", "inline")
    assert len(images) == 1
    assert images[0].attrs["src"].startswith("data:image/png;base64,iVBOR")


def test_the_window_marks_kept_cleared_and_dropped_messages_and_the_pin(
    pages: dict[str, Dom],
) -> None:
    rows = [
        row for row in pages["window"].all("tr") if row.classes & {"kept", "cleared", "dropped"}
    ]
    assert {"kept", "cleared", "dropped"} <= set().union(*(row.classes for row in rows))
    assert pages["pinned"].all("tr", "pin")
    assert "pin at" in pages["pinned"].text


def test_the_spend_chart_is_drawn(pages: dict[str, Dom]) -> None:
    dom = pages["spend"]
    assert len(dom.all("svg")) == 2
    assert len(dom.all("rect", "bar")) == 19 + 9
    assert len(dom.all("line", "budget")) == 1


def test_memory_pages_show_the_stores(pages: dict[str, Dom]) -> None:
    assert {h2.text for h2 in pages["memory"].all("h2")} >= {
        "Vector store",
        "Graph store",
        "Blob store",
        "Task store",
    }
    assert len(pages["graph"].all("tr")) == 3  # the header and two entities


def test_markup_in_a_message_becomes_text_not_elements(pages: dict[str, Dom]) -> None:
    dom = pages["xss"]
    assert dom.all("script") == []
    assert XSS in dom.text


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_each_view_is_screenshotted(
    chromium: str, sqlite_server: ViewerServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.mktemp("screenshots")
    base = sqlite_server.url.rstrip("/")
    views = ("sessions", "transcript", "window", "spend")
    with ThreadPoolExecutor(max_workers=2) as pool:
        shots = list(
            pool.map(
                lambda view: screenshot(chromium, base + PAGES[view], folder / f"{view}.png"),
                views,
            )
        )
    for shot in shots:
        assert _png_size(shot) == (1280, 900)
        assert shot.stat().st_size > 10_000  # a page, not a blank window


def test_the_same_pages_from_postgresql_look_the_same(
    chromium: str, postgres_viewer: ViewerServer, pages: dict[str, Dom]
) -> None:
    base = postgres_viewer.url.rstrip("/")
    views = ("transcript", "window", "spend", "graph")
    with ThreadPoolExecutor(max_workers=3) as pool:
        loaded = dict(
            zip(views, pool.map(lambda v: load(chromium, base + PAGES[v]), views), strict=True)
        )

    def shape(dom: Dom) -> list[tuple[str, str]]:
        """The page's structure and classes, without ids and times that differ per store."""
        return [(e.tag, " ".join(sorted(e.classes))) for e in dom.elements]

    for view in views:
        assert shape(loaded[view]) == shape(pages[view]), view
