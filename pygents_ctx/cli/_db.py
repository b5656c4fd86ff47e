"""Where the command line finds its database and sessions, without creating either."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Final, TypeVar

from pygents_ctx.context.stores import SessionInfo, SQLiteConnection, SQLiteContextStore, connect
from pygents_ctx.context.stores._sqlite_schema import has_table

__all__ = [
    "DB_ENV",
    "DEFAULT_DB",
    "PROG",
    "CliError",
    "check_database",
    "erase_sessions",
    "find_session",
    "list_sessions",
    "pick_session",
    "with_session",
]

T = TypeVar("T")

PROG: Final = "pygents-ctx"
DEFAULT_DB: Final = "pygents_ctx.db"
DB_ENV: Final = "PYGENTS_CTX_DB"


class CliError(Exception):
    """A runtime error the command line reports in one line and exits 1 for."""


def check_database(path: str) -> None:
    """Fail unless `path` is an existing pygents_ctx database; opens it read-only to look."""
    target = Path(path)
    if not target.exists():
        raise CliError(
            f"no database at {path!r}; pass --db PATH (or set {DB_ENV}) to point at "
            "a pygents_ctx SQLite file"
        )
    if target.is_dir():
        raise CliError(f"{path!r} is a directory; --db takes a SQLite database file")
    try:
        db = sqlite3.connect(target.absolute().as_uri() + "?mode=ro", uri=True)
        try:
            found = has_table(db, "pygents_sessions")
        finally:
            db.close()
    except sqlite3.OperationalError as exc:
        raise CliError(f"cannot read {path!r}: {exc}") from None
    except sqlite3.DatabaseError as exc:
        raise CliError(f"{path!r} is not a SQLite database ({exc})") from None
    if not found:
        raise CliError(f"{path!r} is a SQLite database, but not a pygents_ctx store (no sessions)")


def list_sessions(path: str, owner: str | None = None) -> list[SessionInfo]:
    """The sessions in the existing database at `path` (only `owner`'s if given), newest first."""
    check_database(path)

    async def read() -> list[SessionInfo]:
        async with connect(path) as conn:
            return await SQLiteContextStore(conn).list_sessions(owner=owner)

    return asyncio.run(read())


def erase_sessions(
    path: str, owner: str | None, session: str | None, older_than: timedelta | None
) -> int:
    """Erase sessions of the existing database at `path` (see `ContextStore.erase`), with
    deleted content overwritten and the WAL emptied after; how many went."""
    check_database(path)

    async def erase() -> int:
        async with connect(path, secure_delete=True) as conn:
            erased = await SQLiteContextStore(conn).erase(
                owner=owner, session=session, older_than=older_than
            )
            await conn.run(lambda db: db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall())
            return erased

    return asyncio.run(erase())


def with_session(
    path: str, wanted: str, work: Callable[[SQLiteContextStore, SessionInfo], Awaitable[T]]
) -> T:
    """`work(store, info)` on the session `wanted` names, in an existing database."""
    check_database(path)

    async def run() -> T:
        async with connect(path) as conn:
            info = await find_session(conn, wanted, path)
            return await work(SQLiteContextStore(conn, session_id=info.session_id), info)

    return asyncio.run(run())


async def find_session(conn: SQLiteConnection, wanted: str, path: str) -> SessionInfo:
    """The session named `wanted`, or the only one whose id starts with it."""
    sessions = await SQLiteContextStore(conn).list_sessions()
    by_id = {info.session_id: info for info in sessions}
    return by_id[pick_session(wanted, list(by_id), path)]


def pick_session(wanted: str, session_ids: Sequence[str], path: str) -> str:
    """`wanted` if it is one of `session_ids`, else the only one of them that starts with it.

    `session_ids` may be every id in the database or only those that start
    with `wanted`; `path` names the database in the error.

    Raises:
        CliError: No id starts with `wanted`, or several do (and none is `wanted`).
    """
    if wanted in session_ids:
        return wanted
    matches = [session_id for session_id in session_ids if session_id.startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        shown = ", ".join(matches[:5])
        more = ", ..." if len(matches) > 5 else ""
        raise CliError(
            f"{wanted!r} is the start of {len(matches)} session ids ({shown}{more}); "
            "give more of the id"
        )
    raise CliError(f"no session {wanted!r} in {path!r}; `{PROG} sessions` lists them")
