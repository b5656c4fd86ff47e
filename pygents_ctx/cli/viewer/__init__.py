"""`pygents-ctx view`: a local, read-only web viewer of a context store.

    pygents-ctx view [--db PATH | --dsn URL] [--port N] [--pricing MODEL=IN,OUT] ...

It serves, on 127.0.0.1 by default, pages built on the server (no
JavaScript, no network): the sessions, a session's transcript with its runs,
tool calls linked to their results, images and the archive compaction left,
the window a strategy builds at any step beside the history, the spend per
model call as SVG charts, the agents' checkpoints, and the memory stores kept
in the same database.

From Python, `ViewerServer(Viewer(SQLiteSource(path)))` serves the same pages;
`start()` runs it in a background thread.

The package's modules: `_source` (reading SQLite or PostgreSQL read-only),
`_queries` (what the pages read), `_html` and `_charts` (the markup),
`_pages`, `_window_page`, `_memory` and `_agents` (the pages; `_agents` reads the
`--agent` files), `_server` (HTTP).
"""

from __future__ import annotations

from pygents_ctx.cli.viewer._pages import Viewer
from pygents_ctx.cli.viewer._queries import Prices
from pygents_ctx.cli.viewer._server import ViewerServer
from pygents_ctx.cli.viewer._source import PostgresSource, SQLiteSource, open_source

__all__ = ["PostgresSource", "Prices", "SQLiteSource", "Viewer", "ViewerServer", "open_source"]
