"""`pygents-ctx view` from the command line: its errors at start, a real process serving
pages, and pages read while another process writes the store."""

from __future__ import annotations

import contextlib
import html
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
import urllib.request
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from pygents_ctx.cli import main
from pygents_ctx.cli.viewer import PostgresSource, SQLiteSource, Viewer
from tests import postgres_server
from tests.viewer.conftest import get, serving

ROOT = Path(__file__).resolve().parents[2]


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().err


def test_a_missing_database_is_the_command_lines_error_before_anything_is_served(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nothing.db"
    code, err = run_main(capsys, "view", "--db", str(missing), "--port", "0")
    assert code == 1
    assert err == (
        f"pygents-ctx: error: no database at {str(missing)!r}; pass --db PATH (or set "
        "PYGENTS_CTX_DB) to point at a pygents_ctx SQLite file\n"
    )
    assert not missing.exists()  # looking did not create it


def test_another_programs_sqlite_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    foreign = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(foreign)) as db:
        db.execute("CREATE TABLE notes (body TEXT)")
        db.commit()
    before = foreign.read_bytes()
    code, err = run_main(capsys, "view", "--db", str(foreign), "--port", "0")
    assert code == 1
    assert "is a SQLite database, but not a pygents_ctx store (no sessions)" in err
    assert foreign.read_bytes() == before


def test_an_unreachable_postgresql_server_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = f"host={tmp_path} port=1 user=nobody dbname=none connect_timeout=2"
    code, err = run_main(capsys, "view", "--dsn", dsn, "--port", "0")
    assert code == 1
    assert err.startswith(f"pygents-ctx: error: cannot connect to {dsn!r}")


def test_a_database_without_sessions_on_postgresql_is_refused(
    postgres: postgres_server.PostgresServer, capsys: pytest.CaptureFixture[str]
) -> None:
    # A database of its own: the server's default one may hold other tests' sessions.
    name = f"empty_{uuid.uuid4().hex}"
    with psycopg.connect(postgres.dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        code, err = run_main(capsys, "view", "--dsn", postgres.dsn_for(name), "--port", "0")
    finally:
        with psycopg.connect(postgres.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
    assert code == 1
    assert "is not a pygents_ctx store (no sessions)" in err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--pricing", "gpt-4o"], "must be MODEL=INPUT,OUTPUT[,CACHED_INPUT[,CACHE_WRITE]]"),
        (["--pricing", "gpt-4o=a,b"], "the prices in 'gpt-4o=a,b' must be numbers"),
        (["--pricing", "gpt-4o=-1,2"], "Pricing.input must be a finite number of at least 0"),
        (["--port", "70000"], "must be a port from 0 to 65535"),
        (["--strategy", "fitt:3"], "unknown strategy 'fitt'"),
    ],
)
def test_bad_options_are_usage_errors(
    sqlite_db: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    code, err = run_main(capsys, "view", "--db", str(sqlite_db), *args)
    assert code == 2
    assert says in err


def test_a_port_in_use_says_to_choose_another(
    sqlite_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, err = run_main(capsys, "view", "--db", str(sqlite_db), "--port", str(port))
    assert code == 1
    assert f"cannot listen on 127.0.0.1:{port}" in err
    assert "choose another --port (0 picks a free one)" in err


def test_the_command_prints_its_address_serves_and_stops_on_ctrl_c(sqlite_db: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "pygents_ctx", "view", "--db", str(sqlite_db), "--port", "0",
         "--pricing", "scripted=3,15", "--pricing", "gpt-4o*=2.5,10", "--strategy", "fit:200"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        match = re.fullmatch(
            r"pygents-ctx view: (.+) \(read-only\) at (http://127\.0\.0\.1:\d+/)\n", first
        )
        assert match is not None, first
        assert match.group(1) == str(sqlite_db)
        with urllib.request.urlopen(match.group(2), timeout=30) as reply:
            page = reply.read().decode()
        assert 'href="/session/trip"' in page
        assert "$0.0" in page
        with urllib.request.urlopen(match.group(2) + "session/trip/window", timeout=30) as reply:
            assert "<code>fit:200</code>" in reply.read().decode()  # --strategy is the default
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
        code = process.returncode
    finally:
        process.kill()
        process.communicate()
    assert code == 130
    assert "Traceback" not in err


_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from pygents_ctx import Message
    from pygents_ctx.context.stores import SQLiteContextStore, connect

    async def main(path):
        async with connect(path) as conn:
            store = SQLiteContextStore(conn, session_id="busy")
            for n in range(100_000):
                await store.append_many([Message("user", f"q{n}"), Message("assistant", f"a{n}")])
                if n == 0:
                    print("ready", flush=True)

    asyncio.run(main(sys.argv[1]))
    """
)


def test_pages_read_while_another_process_writes_see_a_consistent_store(
    sqlite_db: Path, tmp_path: Path
) -> None:
    path = tmp_path / "busy.db"
    path.write_bytes(sqlite_db.read_bytes())
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline() == "ready\n"
        seen: list[int] = []
        with serving(Viewer(SQLiteSource(str(path)))) as server:
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                page = get(server, "/session/busy?size=1000")
                assert page.status == 200, page.body
                cards = re.search(r"<b>([\d,]+)</b><span class=muted>messages", page.body)
                assert cards is not None
                count = int(cards.group(1).replace(",", ""))
                shown = page.body.count("<article")
                # One snapshot per page: the count and the messages agree, in pairs.
                assert shown == min(count, 1000)
                assert count % 2 == 0
                seen.append(count)
    finally:
        writer.kill()
        writer.communicate()
    assert seen == sorted(seen)
    assert seen[-1] > seen[0]


def test_an_unknown_session_given_at_start_is_the_command_lines_error(
    sqlite_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run_main(capsys, "view", "nope", "--db", str(sqlite_db), "--port", "0")
    assert code == 1
    assert err == (
        f"pygents-ctx: error: no session 'nope' in {str(sqlite_db)!r}; "
        "`pygents-ctx sessions` lists them\n"
    )


def test_a_session_given_at_start_is_the_address_printed(sqlite_db: Path) -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "pygents_ctx", "view", "tr", "--db", str(sqlite_db), "--port", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as process:  # fmt: skip
        try:
            assert process.stdout is not None
            first = process.stdout.readline()
            assert re.search(r" at http://127\.0\.0\.1:\d+/session/trip\n$", first), first
        finally:
            process.kill()


def test_a_database_removed_while_served_is_a_503_page(sqlite_db: Path, tmp_path: Path) -> None:
    path = tmp_path / "gone.db"
    path.write_bytes(sqlite_db.read_bytes())
    with serving(Viewer(SQLiteSource(str(path)))) as server:
        assert get(server, "/").status == 200
        path.unlink()
        page = get(server, "/")
    assert page.status == 503
    assert html.escape(f"cannot read {str(path)!r}") in page.body


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://app:s3cret@127.0.0.1:1/agents?connect_timeout=2",
        "host=127.0.0.1 port=1 user=app password=s3cret dbname=agents connect_timeout=2",
    ],
)
def test_a_password_in_the_dsn_is_never_printed(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run_main(capsys, "view", "--dsn", dsn, "--port", "0")
    assert code == 1
    assert "s3cret" not in err
    assert "***" in err


def test_a_bad_agent_file_is_refused_at_start(
    sqlite_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run_main(
        capsys, "view", "--db", str(sqlite_db), "--agent", str(tmp_path / "no.json")
    )
    assert code == 1
    assert "no saved agent at" in err
    not_an_agent = tmp_path / "list.json"
    not_an_agent.write_text("[1, 2]")
    code, err = run_main(capsys, "view", "--db", str(sqlite_db), "--agent", str(not_an_agent))
    assert code == 1
    assert "is not a saved agent (an agent's to_json() has a 'name')" in err


def test_a_postgresql_connection_lost_while_served_is_a_503_page(postgres_dsn: str) -> None:
    source = PostgresSource(postgres_dsn)
    with serving(Viewer(source)) as server:
        assert get(server, "/").status == 200
        idle = source._idle.get_nowait()  # the connection the next page would use
        with psycopg.connect(postgres_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (idle.info.backend_pid,))
        source._idle.put(idle)
        page = get(server, "/")
        assert page.status == 503
        assert "cannot read" in page.body
        assert get(server, "/").status == 200  # the next page connects again
