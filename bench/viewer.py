"""`pygents-ctx view` on a large store: a session of 100,000 messages opens in under a second.

The viewer reads a page at a time, so opening a session (its first page, or
its last) costs about the same at 100 messages as at 100,000. Each row times
one whole HTTP GET of a page from a running `ViewerServer` (the read-only
SQLite connection, the queries, decoding the page's messages, the HTML). The
floor is the least any viewer does for that page: one SELECT of the same 100
rows on an open connection, each decoded with `from_dict`.

The goal is absolute: `GOAL_NS` (a second) per page; `python -m bench.viewer`
prints the rows and says whether each met it.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
import urllib.request
from pathlib import Path
from typing import Final

import orjson

from bench.harness import Result, compare
from pygents_ctx import Message, from_dict
from pygents_ctx.cli.viewer import SQLiteSource, Viewer, ViewerServer
from pygents_ctx.context.stores import SQLiteContextStore, connect

__all__ = ["GOAL_NS", "viewer"]

GOAL_NS: Final = 1e9
_SESSION: Final = "big"
_BATCH: Final = 5_000
_PAGE: Final = 100


async def _build(path: Path, count: int) -> None:
    async with connect(path) as conn:
        store = SQLiteContextStore(conn, session_id=_SESSION)
        for start in range(0, count, _BATCH):
            await store.append_many(
                [
                    Message("user" if n % 2 == 0 else "assistant", f"message {n} " + "lorem " * 30)
                    for n in range(start, min(start + _BATCH, count))
                ],
                run_id=f"run-{start // 1000}",
            )
        for n in range(50):  # other sessions for the list
            await SQLiteContextStore(conn, session_id=f"small-{n}").append(Message("user", "hi"))


def _fetch(url: str) -> None:
    with urllib.request.urlopen(url, timeout=60) as reply:
        reply.read()


def _floor_read(db: sqlite3.Connection, offset: int) -> None:
    rows = db.execute(
        "SELECT data FROM pygents_messages WHERE session_id = ? ORDER BY position LIMIT ? OFFSET ?",
        (_SESSION, _PAGE, offset),
    ).fetchall()
    for (data,) in rows:
        from_dict(orjson.loads(data))


async def viewer(scale: int = 1) -> list[Result]:
    """Time opening pages of a session of `100_000 // scale` messages."""
    count = 100_000 // scale
    last_offset = (count - 1) // _PAGE * _PAGE
    pages = {
        f"view: open a {count:,}-message session": f"session/{_SESSION}",
        f"view: its last page of {count:,}": f"session/{_SESSION}?page={last_offset // _PAGE + 1}",
        "view: the sessions list": "",
    }
    results = []
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "big.db"
        await _build(path, count)
        db = sqlite3.connect(path)
        server = ViewerServer(Viewer(SQLiteSource(str(path))), port=0)
        server.start()
        try:
            for (name, page), offset in zip(pages.items(), (0, last_offset, 0), strict=True):
                url = server.url + page

                async def ours(ops: int, url: str = url) -> None:
                    for _ in range(ops):
                        _fetch(url)

                async def floor(ops: int, offset: int = offset) -> None:
                    for _ in range(ops):
                        _floor_read(db, offset)

                results.append(await compare(name, ours, floor, 3, None))
        finally:
            server.shutdown()
            server.server_close()
            db.close()
    return results


def main() -> None:
    for result in asyncio.run(viewer()):
        verdict = "ok" if result.ours_ns < GOAL_NS else "MISSED"
        print(
            f"{result.name:<45} {result.ours_ns / 1e6:8.1f} ms  (floor {result.floor_ns / 1e6:.2f}"
            f" ms; goal < {GOAL_NS / 1e6:.0f} ms: {verdict})"
        )


if __name__ == "__main__":
    main()
