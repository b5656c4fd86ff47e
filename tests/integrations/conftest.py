"""The local model API server (its fixtures), a new PostgreSQL database, and the test MCP server."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tests import postgres_server
from tests.model.conftest import anthropic_model, api, openai_model

__all__ = ["anthropic_model", "api", "free_port", "openai_model", "start_http_server"]

ROOT = Path(__file__).resolve().parents[2]
SERVER_MODULE = "tests.integrations.mcp_tools_server"


@pytest.fixture
def pg_dsn(postgres: postgres_server.PostgresServer) -> Iterator[str]:
    """A new, empty database on the session's server, dropped at the end."""
    name = f"lg_{uuid.uuid4().hex}"
    with psycopg.connect(postgres.dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield postgres.dsn_for(name)
        finally:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_http_server(port: int) -> subprocess.Popen[bytes]:
    """The test MCP server on 127.0.0.1:`port` (streamable HTTP), once it accepts connections."""
    process = subprocess.Popen(
        [sys.executable, "-m", SERVER_MODULE, "--http", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
        except OSError:
            if process.poll() is not None:
                raise RuntimeError("the test MCP server exited on start") from None
            time.sleep(0.05)
        else:
            return process
    process.kill()
    raise RuntimeError("the test MCP server did not start listening")
