"""The viewer's HTTP server: the standard library's threading server, GET and HEAD only.

Each request reads in one read-only transaction of its own. A bad address is
an error page with HTTP 404 or 400 that says what is wrong; any other method
than GET or HEAD is refused (501) by `http.server` itself. Pages carry a
Content-Security-Policy that allows no script at all and images only as
`data:` URLs, and a server bound to a loopback address answers only requests
addressed to it by that name (a DNS-rebinding page elsewhere gets a 400).
"""

from __future__ import annotations

import html
import ipaddress
import logging
import threading
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final
from urllib.parse import parse_qs, unquote, urlsplit

from pygents_ctx.cli._db import CliError
from pygents_ctx.cli.viewer import _memory, _pages, _window_page
from pygents_ctx.cli.viewer._html import esc
from pygents_ctx.cli.viewer._pages import BadRequest, NotFound, Redirect, Viewer
from pygents_ctx.cli.viewer._source import Reading

__all__ = ["ViewerServer", "route"]

logger = logging.getLogger("pygents_ctx")

_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; "
        "base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def route(viewer: Viewer, reading: Reading, parts: list[str], query: Mapping[str, str]) -> str:
    """The page at the path `parts` (decoded segments), or `NotFound`."""
    match parts:
        case []:
            return _pages.sessions(viewer, reading, query)
        case ["session", wanted]:
            return _pages.transcript(viewer, reading, wanted, query)
        case ["session", wanted, "window"]:
            return _window_page.window(viewer, reading, wanted, query)
        case ["session", wanted, "spend"]:
            return _pages.spend(viewer, reading, wanted, query)
        case ["session", wanted, "checkpoints"]:
            return _pages.checkpoints(viewer, reading, wanted, query)
        case ["session", wanted, "archive"]:
            return _pages.archive(viewer, reading, wanted, query)
        case ["session", wanted, "tool", call_id]:
            return _pages.tool(viewer, reading, wanted, call_id, query)
        case ["memory"]:
            return _memory.memory(viewer, reading, query)
        case ["memory", "vectors", collection]:
            return _memory.vectors(viewer, reading, collection, query)
        case ["memory", "graph", name]:
            return _memory.graph(viewer, reading, name, query)
        case ["memory", "blobs"]:
            return _memory.blobs(viewer, reading, query)
        case ["memory", "blobs", name]:
            return _memory.blob(viewer, reading, name, query)
        case ["memory", "pool", which]:
            return _memory.pool(viewer, which, query)
        case ["memory", "tasks", conversation, agent]:
            return _memory.tasks(viewer, reading, conversation, agent, query)
    shown = "/" + "/".join(parts)
    raise NotFound(f"no page at {shown!r}; the sessions are at / and the memory stores at /memory")


def _error_page(viewer: Viewer, status: HTTPStatus, message: str) -> str:
    body = (
        f"<div class=error-page><h1>{status.value} {esc(status.phrase)}</h1>"
        f"<p class=message>{esc(message)}</p><p><a href='/'>All sessions</a></p></div>"
    )
    return viewer.page(f"{status.value} {status.phrase}", body)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class _Handler(BaseHTTPRequestHandler):
    server: ViewerServer
    server_version = "pygents-ctx-view"

    def do_GET(self) -> None:
        status, headers, body = self.server.answer(self.path, self.headers.get("Host", ""))
        payload = body.encode()
        self.send_response(status)
        for name, value in {**_HEADERS, **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_HEAD = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("view: " + format, *args)


class ViewerServer(ThreadingHTTPServer):
    """Serve a `Viewer`'s pages over HTTP, each request in its own thread.

    Args:
        viewer: The store and settings to show.
        host: The address to listen on (default `127.0.0.1`: this machine only).
        port: The port; 0 picks a free one (`url` says which).

    Raises:
        OSError: The address cannot be bound (the port is taken, say).

    Examples:
        >>> import pathlib, tempfile, urllib.request
        >>> from pygents_ctx.cli.viewer import SQLiteSource, Viewer
        >>> from pygents_ctx.context.stores import connect
        >>> import asyncio
        >>> async def create(path):
        ...     async with connect(path):
        ...         pass
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     db = str(pathlib.Path(tmp) / "ctx.db")
        ...     asyncio.run(create(db))
        ...     with ViewerServer(Viewer(SQLiteSource(db))) as server:
        ...         _ = server.start()
        ...         page = urllib.request.urlopen(server.url).read().decode()
        ...     "No sessions" in page
        True
    """

    daemon_threads = True

    def __init__(self, viewer: Viewer, host: str = "127.0.0.1", port: int = 0) -> None:
        self.viewer = viewer  # before binding: a failed bind closes the server, and the viewer
        super().__init__((host, port), _Handler)
        self.host = host
        bound = self.server_address[1]
        self.port = int(bound)
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.port}/"
        names = {f"{name}:{self.port}" for name in ("127.0.0.1", "localhost", "[::1]", shown)}
        self._hosts = names if _is_loopback(host) else None

    def start(self) -> threading.Thread:
        """Serve in a background (daemon) thread; `shutdown()` stops it."""
        thread = threading.Thread(target=self.serve_forever, name="pygents-ctx-view", daemon=True)
        thread.start()
        return thread

    def server_close(self) -> None:
        super().server_close()
        self.viewer.source.close()

    def answer(self, target: str, host: str) -> tuple[int, dict[str, str], str]:
        """The status, extra headers and HTML for a GET of `target` sent to `host`."""
        viewer = self.viewer
        if self._hosts is not None and host not in self._hosts:
            message = f"this viewer answers requests to {self.url}, not to host {host!r}"
            return HTTPStatus.BAD_REQUEST, {}, _error_page(viewer, HTTPStatus.BAD_REQUEST, message)
        address = urlsplit(target)
        parts = [unquote(part) for part in address.path.split("/") if part]
        query = {
            key: values[-1]
            for key, values in parse_qs(address.query, keep_blank_values=True).items()
        }
        headers = {"Content-Type": "text/html; charset=utf-8"}
        if any("\x00" in text for text in (*parts, *query, *query.values())):
            # No session id, name or search holds one, and PostgreSQL refuses it in text.
            message = "the address holds a NUL character (%00), which no id or search can"
            return HTTPStatus.BAD_REQUEST, {}, _error_page(viewer, HTTPStatus.BAD_REQUEST, message)
        try:
            with viewer.source.reading() as reading:
                return HTTPStatus.OK, headers, route(viewer, reading, parts, query)
        except Redirect as moved:
            return HTTPStatus.FOUND, {"Location": html.unescape(moved.location)}, ""
        except NotFound as exc:
            status, message = HTTPStatus.NOT_FOUND, str(exc)
        except BadRequest as exc:
            status, message = HTTPStatus.BAD_REQUEST, str(exc)
        except CliError as exc:  # the database or an --agent file went away, or cannot be read
            status, message = HTTPStatus.SERVICE_UNAVAILABLE, str(exc)
        except Exception as exc:
            logger.exception("view: %s failed", target)
            status, message = HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}"
        return status, headers, _error_page(viewer, status, message)
