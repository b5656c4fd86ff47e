"""A throwaway PostgreSQL server for the tests, started from the distribution's binaries.

`start()` runs `initdb` into a new temporary directory and starts the server
with `pg_ctl`, listening only on a unix socket in that directory, with
`trust` authentication and durability off (the data is thrown away). `stop()`
stops it and deletes the directory.

The binaries are looked up on PATH, then under `/usr/lib/postgresql/*/bin`
(Debian and Ubuntu keep them there). PostgreSQL refuses to run as root: as
root, the server runs as the `postgres` user that the distribution's package
creates (through `runuser`, or `setpriv`).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PostgresServer", "ServerUnavailableError", "find_binaries", "running", "start"]

INSTALL_HINT = (
    "install the PostgreSQL server, e.g. `apt-get install postgresql` "
    "(Debian/Ubuntu), `dnf install postgresql-server` or `brew install postgresql`"
)
SEARCH_DIRS = ("/usr/lib/postgresql/*/bin", "/usr/local/pgsql/bin")
_SETTINGS = (
    "-c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off "
    "-c max_connections=40"
)


class ServerUnavailableError(RuntimeError):
    """No PostgreSQL server can be started here; the message says what to install or fix."""


def _version_key(directory: Path) -> tuple[int, ...]:
    # /usr/lib/postgresql/15/bin -> (15,): the newest installed version wins.
    return tuple(int(part) for part in directory.parent.name.split(".") if part.isdigit())


def find_binaries(
    path: str | None = None, search: Sequence[str] = SEARCH_DIRS
) -> tuple[Path, Path]:
    """Where `initdb` and `pg_ctl` are: on `path` (default PATH), else in `search` globs.

    Raises:
        ServerUnavailableError: Neither has them.
    """
    initdb, pg_ctl = shutil.which("initdb", path=path), shutil.which("pg_ctl", path=path)
    if initdb and pg_ctl:
        return Path(initdb), Path(pg_ctl)
    found = [
        directory
        for pattern in search
        for directory in Path("/").glob(pattern.lstrip("/"))
        if (directory / "initdb").is_file() and (directory / "pg_ctl").is_file()
    ]
    if not found:
        raise ServerUnavailableError(
            "the PostgreSQL store tests need a real PostgreSQL server, and no `initdb` "
            f"and `pg_ctl` were found on PATH or in {', '.join(search)}: {INSTALL_HINT}"
        )
    newest = max(found, key=_version_key)
    return newest / "initdb", newest / "pg_ctl"


def _as_server_user(directory: Path) -> list[str]:
    """The command prefix that runs a program as a user PostgreSQL accepts."""
    if os.geteuid() != 0:
        return []
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        raise ServerUnavailableError(
            "PostgreSQL refuses to run as root, and there is no `postgres` user to run it "
            f"as: run the tests as another user, or {INSTALL_HINT} (its package creates the user)"
        ) from None
    os.chown(directory, user.pw_uid, user.pw_gid)
    if shutil.which("runuser"):
        return ["runuser", "-u", "postgres", "--"]
    return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups"]


@dataclass(frozen=True)
class PostgresServer:
    """A running throwaway server: connect with `dsn` (superuser `postgres`, no password)."""

    directory: Path
    pg_ctl: Path
    prefix: tuple[str, ...]

    @property
    def dsn(self) -> str:
        return self.dsn_for("postgres")

    def dsn_for(self, dbname: str) -> str:
        return f"host={self.directory} port=5432 user=postgres dbname={dbname}"

    def stop(self) -> None:
        """Stop the server (immediately: its data is thrown away) and delete its directory."""
        try:
            subprocess.run(
                [*self.prefix, str(self.pg_ctl), "stop", "-D", str(self.directory / "data"),
                 "-m", "immediate", "-w"],
                cwd=self.directory,
                capture_output=True,
                check=False,
                timeout=30,
            )  # fmt: skip
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


def _run(command: list[str], directory: Path, what: str) -> None:
    done = subprocess.run(
        command, cwd=directory, capture_output=True, text=True, check=False, timeout=60
    )
    if done.returncode != 0:
        log = directory / "server.log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise ServerUnavailableError(
            f"{what} failed (exit {done.returncode}):\n{done.stdout}{done.stderr}{tail}"
        )


def start() -> PostgresServer:
    """Create and start a server in a new temporary directory.

    Raises:
        ServerUnavailableError: No server binaries, no user to run them as, or
            the server did not start (the message holds its output).
    """
    initdb, pg_ctl = find_binaries()
    # Under /tmp: a short path (a unix socket's is limited to ~100 bytes) that the
    # `postgres` user can reach, unlike a TMPDIR inside root's home.
    base = "/tmp" if os.path.isdir("/tmp") else None
    directory = Path(tempfile.mkdtemp(prefix="pygents-pg-", dir=base))
    try:
        prefix = _as_server_user(directory)
        data = directory / "data"
        _run(
            [*prefix, str(initdb), "-D", str(data), "-U", "postgres", "-A", "trust",
             "-E", "UTF8", "--locale=C", "--no-sync"],
            directory,
            "initdb",
        )  # fmt: skip
        _run(
            [*prefix, str(pg_ctl), "start", "-D", str(data), "-w", "-t", "30",
             "-l", str(directory / "server.log"), "-o", f"-k '{directory}' {_SETTINGS}"],
            directory,
            "pg_ctl start",
        )  # fmt: skip
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return PostgresServer(directory, pg_ctl, tuple(prefix))


@contextlib.contextmanager
def running() -> Iterator[PostgresServer]:
    """A server for the duration of the `with` block."""
    server = start()
    try:
        yield server
    finally:
        server.stop()
