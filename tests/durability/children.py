"""The parent's side of the durability tests: child processes, and the database as stored.

`Child` runs `worker.py` in a new Python process. `Database` is one backend's
database as the tests see it: where a child connects, a store of the parent's
own, and the rows exactly as stored, read with the driver and no pygents_ctx
code in between.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import psycopg

import pygents_ctx
from pygents_ctx.context.stores import ContextStore, SQLiteContextStore, connect
from pygents_ctx.context.stores.postgres import PostgresContextStore, connect_postgres
from tests.context.stores.helpers import unaccounted

WORKER = Path(__file__).with_name("worker.py")
# The children import the pygents_ctx the parent tests, whatever the script's own directory.
_PACKAGE_ROOT = str(Path(pygents_ctx.__file__).resolve().parent.parent)
_ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")])),
}


class Child:
    """`worker.py` in its own process; see that module for the modes."""

    def __init__(self, db: Database, session: str, mode: str, *args: object) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), db.backend, db.target, session, mode, *map(str, args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_ENV,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def line(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:  # the child died: show why
            self.process.wait(timeout=10)
            assert self.process.stderr is not None
            raise AssertionError(f"the child exited: {self.process.stderr.read()}")
        return line.rstrip("\n")

    def expect(self, line: str) -> None:
        assert self.line() == line

    def tell(self, line: str = "go") -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def send(self, **command: Any) -> dict[str, Any]:
        """Send a `serve` command and return the reply."""
        self.tell(orjson.dumps(command).decode())
        return self.reply()

    def reply(self) -> dict[str, Any]:
        reply: dict[str, Any] = orjson.loads(self.line())
        return reply

    def finish(self) -> str:
        """Close stdin, wait for a clean exit, and return what the child printed."""
        out, err = self.process.communicate(timeout=30)
        assert self.process.returncode == 0, err
        assert err == "", err  # nothing reached the user: no "database is locked", no warning
        return out


@dataclass(frozen=True)
class Database:
    """One backend's database: `sqlite` (a file) or `postgres` (a DSN)."""

    backend: str
    target: str

    @contextlib.asynccontextmanager
    async def store(self, session: str) -> AsyncIterator[ContextStore]:
        """A store of the parent's own, on a connection of its own."""
        if self.backend == "sqlite":
            async with connect(self.target) as conn:
                yield SQLiteContextStore(conn, session_id=session)
        else:
            async with connect_postgres(self.target) as pg:
                yield PostgresContextStore(pg, session_id=session)

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Rows of `sql`, with `?` placeholders, read with the driver alone."""
        if self.backend == "sqlite":
            db = sqlite3.connect(self.target)
            try:
                return db.execute(sql, params).fetchall()
            finally:
                db.close()
        with psycopg.connect(self.target, autocommit=True) as pg:
            rows = pg.execute(sql.replace("?", "%s"), params).fetchall()  # type: ignore[call-overload]
            return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in rows]

    def stored(self, session: str) -> tuple[list[tuple[Any, ...]], ...]:
        """Everything stored for `session`, as stored: its row, the live messages, the archive."""
        return (
            self.query(
                "SELECT session_id, created_at, input_tokens, output_tokens, message_count, "
                "live_tokens, next_position, generation, preview FROM pygents_sessions "
                "WHERE session_id = ?",
                session,
            ),
            self.query(
                "SELECT position, run_id, tokens, preview, data FROM pygents_messages "
                "WHERE session_id = ? ORDER BY position",
                session,
            ),
            self.query(
                "SELECT id, run_id, tokens, preview, data FROM pygents_archive "
                "WHERE session_id = ? ORDER BY id",
                session,
            ),
        )

    def unaccounted(self) -> tuple[int, int, int]:
        """SQLite: data rows no row points at, rows pointing at no data, data pointed at twice."""
        db = sqlite3.connect(self.target)
        try:
            return unaccounted(db)
        finally:
            db.close()

    def positions(self, session: str) -> list[int]:
        rows = self.query(
            "SELECT position FROM pygents_messages WHERE session_id = ? ORDER BY position", session
        )
        return [position for (position,) in rows]
