"""The memory pages: the vector, graph, blob and task stores kept in the same database.

Only the stores whose tables the database has are listed. A `ContextPool`
lives in an agent's memory (and its saved state), not in a table, so there is
no pool page. Everything is read a page at a time, like the sessions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from pygents_ctx.cli.viewer._agents import pool_page, pools_section
from pygents_ctx.cli.viewer._html import esc, href, image_html, number, pager, table_html, when
from pygents_ctx.cli.viewer._pages import NotFound, Viewer, page_number, whole_number
from pygents_ctx.cli.viewer._source import Reading, as_bytes, as_text

__all__ = ["blob", "blobs", "graph", "memory", "pool", "tasks", "vectors"]

PER_PAGE: Final = 50
_PAGE: Final = 64 << 10  # bytes of a text blob shown on one page
_PIECE: Final = 1 << 20  # the PostgreSQL blob store's pieces (pygents_blob_chunks rows)
_LARGEST_IMAGE: Final = 2 << 20  # bytes of an image blob shown inline
_STATUS_LOOK: Final = {"succeeded": "kept", "failed": "edited"}  # the state colours to use
_CLIP: Final = 400  # characters of a document's text in the list


def _json(value: Any) -> str:
    """A JSON column (text, bytes or already decoded) pretty-printed, escaped."""
    if isinstance(value, str | bytes | memoryview):
        try:
            value = orjson.loads(bytes(value) if isinstance(value, memoryview) else value)
        except orjson.JSONDecodeError:
            return esc(as_text(value))
    return esc(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode())


def _clip(text: str) -> str:
    return esc(text if len(text) <= _CLIP else text[: _CLIP - 1] + "…")


def _crumbs(*parts: tuple[str, str]) -> str:
    links = " &rsaquo; ".join(f"<a href='{link}'>{esc(name)}</a>" for name, link in parts)
    return f"<p class=muted><a href='/memory'>Memory</a> &rsaquo; {links}</p>" if parts else ""


def memory(viewer: Viewer, reading: Reading, query: Mapping[str, str]) -> str:
    """`/memory`: each memory store found in the database, with what it holds."""
    tables = reading.tables()
    sections = []
    if "pygents_vectors" in tables:
        rows = reading.rows(
            "SELECT c.name, c.dimension, (SELECT count(*) FROM pygents_vectors AS v "
            "WHERE v.collection = c.name) FROM pygents_vector_collections AS c ORDER BY c.name"
        )
        headers = ["collection", "dimension", "documents"]
        sections.append(("Vector store", _counts_table("vectors", headers, rows)))
    if "pygents_graph_entities" in tables:
        rows = reading.rows(
            "SELECT graph, count(*), (SELECT count(*) FROM pygents_graph_relationships AS r "
            "WHERE r.graph = e.graph) FROM pygents_graph_entities AS e "
            "GROUP BY graph ORDER BY graph"
        )
        headers = ["graph", "entities", "relationships"]
        sections.append(("Graph store", _counts_table("graph", headers, rows)))
    if "pygents_blobs" in tables:
        count, size = reading.rows("SELECT count(*), coalesce(sum(size), 0) FROM pygents_blobs")[0]
        sections.append(
            (
                "Blob store",
                f"<p><a href='/memory/blobs'>{number(int(count))} blobs</a>, "
                f"{number(int(size))} bytes</p>",
            )
        )
    if "pygents_tasks" in tables:
        rows = reading.rows(
            "SELECT b.conversation, b.agent, "
            + ", ".join(
                f"(SELECT count(*) FROM pygents_tasks AS t WHERE t.conversation = b.conversation "
                f"AND t.agent = b.agent AND t.status = '{status}')"
                for status in ("pending", "in_progress", "succeeded", "failed")
            )
            + " FROM pygents_task_boards AS b ORDER BY b.conversation, b.agent"
        )
        cells = [
            [
                f'<a href="{href(["memory", "tasks", conversation, agent])}">'
                f"{esc(conversation)}</a>",
                esc(agent),
                *(number(int(n)) for n in counts),
            ]
            for conversation, agent, *counts in rows
        ]
        headers = ["conversation", "agent", "pending", "in progress", "succeeded", "failed"]
        sections.append(("Task store", table_html(headers, cells, {2, 3, 4, 5})))
    body = "<h1>Memory</h1>" + (
        "".join(f"<h2>{esc(title)}</h2>{content}" for title, content in sections)
        or "<p class=muted>No memory store keeps its tables in this database (vector, graph, "
        "blob and task stores do when given the same file or DSN).</p>"
    )
    body += pools_section(viewer.agents) or (
        "<p class=note>A ContextPool is held by its agent and saved with it, not in a table: "
        "start the viewer with <code>--agent FILE</code> (an agent's saved JSON, such as "
        "<code>pygents_ctx.agent.json</code>) to browse its pool here.</p>"
    )
    return viewer.page("Memory", body, "memory")


def _counts_table(kind: str, headers: list[str], rows: list[tuple[Any, ...]]) -> str:
    """A table of `(name, count, count)` rows, each name linked to its page under `kind`."""
    cells = [
        [
            f'<a href="{href(["memory", kind, name])}">{esc(name)}</a>',
            number(int(a)),
            number(int(b)),
        ]
        for name, a, b in rows
    ]
    return table_html(headers, cells, {1, 2})


def _paged(
    reading: Reading, query: Mapping[str, str], total: int, path: list[str], sql: str, *params: Any
) -> tuple[list[tuple[Any, ...]], str]:
    """The rows of `sql` on the page asked for (`PER_PAGE` a page), and the pager to the others."""
    current, pages = page_number(query, total, PER_PAGE)
    rows = reading.rows(f"{sql} LIMIT ? OFFSET ?", [*params, PER_PAGE, (current - 1) * PER_PAGE])
    return rows, pager(path, {}, current, pages)


def _need(reading: Reading, table: str, what: str) -> None:
    if table not in reading.tables():
        raise NotFound(f"this database has no {what}; /memory lists what it has")


def vectors(viewer: Viewer, reading: Reading, collection: str, query: Mapping[str, str]) -> str:
    """`/memory/vectors/NAME`: a collection's documents, their text and metadata."""
    _need(reading, "pygents_vectors", "vector store")
    found = reading.rows(
        "SELECT dimension FROM pygents_vector_collections WHERE name = ?", [collection]
    )
    if not found:
        raise NotFound(f"no vector collection {collection!r}; /memory lists them")
    (total,) = reading.rows(
        "SELECT count(*) FROM pygents_vectors WHERE collection = ?", [collection]
    )[0]
    sql = "SELECT id, text, metadata FROM pygents_vectors WHERE collection = ? ORDER BY id"
    path = ["memory", "vectors", collection]
    rows, nav = _paged(reading, query, int(total), path, sql, collection)
    cells = [
        [esc(doc), _clip(as_text(text)), f"<pre>{_json(meta)}</pre>"] for doc, text, meta in rows
    ]
    body = (
        f"{_crumbs(('vectors', '/memory'))}<h1>{esc(collection)}</h1><p class=muted>"
        f"{number(int(total))} documents, {number(int(found[0][0]))} dimensions</p>"
        f"{nav}{table_html(['id', 'text', 'metadata'], cells)}{nav}"
    )
    return viewer.page(f"vectors: {collection}", body, "memory")


def graph(viewer: Viewer, reading: Reading, name: str, query: Mapping[str, str]) -> str:
    """`/memory/graph/NAME`: a graph's entities and the relationships leaving them."""
    _need(reading, "pygents_graph_entities", "graph store")
    (total,) = reading.rows("SELECT count(*) FROM pygents_graph_entities WHERE graph = ?", [name])[
        0
    ]
    if not total:
        raise NotFound(f"no graph {name!r}; /memory lists them")
    sql = "SELECT id, type, properties FROM pygents_graph_entities WHERE graph = ? ORDER BY id"
    entities, nav = _paged(reading, query, int(total), ["memory", "graph", name], sql, name)
    ids = [str(entity) for entity, _, _ in entities]
    relations: dict[str, list[str]] = {entity: [] for entity in ids}
    if ids:
        marks = ", ".join("?" for _ in ids)
        for source, target, kind in reading.rows(
            "SELECT source, target, type FROM pygents_graph_relationships "
            f"WHERE graph = ? AND source IN ({marks}) ORDER BY source, type, target",
            [name, *ids],
        ):
            relations[str(source)].append(
                f"<span class=tag>{esc(kind)}</span> → <a href='#e-{esc(target)}'>{esc(target)}</a>"
            )
    cells = [
        [
            f"<span id='e-{esc(entity)}'>{esc(entity)}</span>",
            esc(kind),
            f"<pre>{_json(as_bytes(props))}</pre>",
            "<br>".join(relations[str(entity)]) or "<span class=muted>-</span>",
        ]
        for entity, kind, props in entities
    ]
    body = (
        f"{_crumbs(('graphs', '/memory'))}<h1>{esc(name)}</h1>"
        f"<p class=muted>{number(int(total))} entities</p>{nav}"
        f"{table_html(['entity', 'type', 'properties', 'relationships'], cells)}{nav}"
    )
    return viewer.page(f"graph: {name}", body, "memory")


def blobs(viewer: Viewer, reading: Reading, query: Mapping[str, str]) -> str:
    """`/memory/blobs`: the blobs by name: size, type, checksum, times."""
    _need(reading, "pygents_blobs", "blob store")
    (total,) = reading.rows("SELECT count(*) FROM pygents_blobs")[0]
    sql = "SELECT name, size, content_type, sha256, updated_at FROM pygents_blobs ORDER BY name"
    rows, nav = _paged(reading, query, int(total), ["memory", "blobs"], sql)
    cells = [
        [
            f'<a href="{href(["memory", "blobs", name])}">{esc(name)}</a>',
            number(int(size)),
            esc(kind),
            f"<code>{esc(str(digest)[:16])}…</code>",
            when(as_text(updated)),
        ]
        for name, size, kind, digest, updated in rows
    ]
    headers = ["name", "bytes", "content type", "sha256", "updated (UTC)"]
    body = (
        f"{_crumbs()}<p class=muted><a href='/memory'>Memory</a> &rsaquo;</p><h1>Blobs</h1>"
        f"<p class=muted>{number(int(total))} blobs</p>{nav}{table_html(headers, cells, {1})}{nav}"
    )
    return viewer.page("blobs", body, "memory")


def _content(reading: Reading, content_id: int, limit: int, start: int = 0) -> bytes:
    """`limit` bytes of a blob from byte `start`, in either store's layout (one row, or pieces)."""
    if "pygents_blob_chunks" in reading.tables():
        first = start // _PIECE
        rows = reading.rows(
            "SELECT data FROM pygents_blob_chunks WHERE content_id = ? AND seq BETWEEN ? AND ? "
            "ORDER BY seq",
            [content_id, first, (start + limit - 1) // _PIECE],
        )
        skip = start - first * _PIECE
        return b"".join(as_bytes(data) for (data,) in rows)[skip : skip + limit]
    rows = reading.rows(
        "SELECT substr(data, ?, ?) FROM pygents_blob_contents WHERE id = ?",
        [start + 1, limit, content_id],
    )
    return as_bytes(rows[0][0]) if rows else b""


def _continued(data: bytes, end: int) -> int:
    """How many bytes past `end` finish the UTF-8 character that `end` cuts (0 to 3)."""
    extra = 0
    while end + extra < len(data) and extra < 3 and data[end + extra] & 0xC0 == 0x80:
        extra += 1
    return extra


def blob(viewer: Viewer, reading: Reading, name: str, query: Mapping[str, str]) -> str:
    """`/memory/blobs/NAME`: one blob's details, its text (a page at a time) or its image.

    A text blob is shown whole, 64 KiB a page (`?page=N`), so the full text of
    an offloaded tool result can be read here.
    """
    _need(reading, "pygents_blobs", "blob store")
    found = reading.rows(
        "SELECT content_id, size, content_type, sha256, created_at, updated_at FROM pygents_blobs "
        "WHERE name = ?",
        [name],
    )
    if not found:
        raise NotFound(f"no blob {name!r}; /memory/blobs lists them")
    content_id, size, kind, digest, created, updated = found[0]
    size, kind = int(size), str(kind)
    if kind.startswith("image/") and size <= _LARGEST_IMAGE:
        shown = image_html(kind.split(";")[0].strip(), _content(reading, int(content_id), size))
    else:
        current, pages = page_number(query, size, _PAGE)
        start = (current - 1) * _PAGE
        # A character the page's end cuts is finished on this page; the next page
        # starts with the rest of its bytes, shown as U+FFFD: nothing is skipped.
        part = _content(reading, int(content_id), _PAGE + 3, start)
        text = part[: _PAGE + _continued(part, _PAGE)].decode("utf-8", "replace")
        printable = sum(ch.isprintable() or ch in "\n\r\t" for ch in text) >= 0.9 * max(
            len(text), 1
        )
        end = min(size, start + _PAGE)
        more = (
            f"<p class=muted>bytes {number(start)} to {number(end)} of {number(size)}</p>"
            + pager(["memory", "blobs", name], query, current, pages)
            if pages > 1
            else ""
        )
        shown = (
            f"<pre>{esc(text)}</pre>{more}" if printable else "<p class=muted>binary content</p>"
        )
    facts = [
        ["bytes", number(size)],
        ["content type", esc(kind)],
        ["sha256", f"<code>{esc(digest)}</code>"],
        ["created (UTC)", when(as_text(created))],
        ["updated (UTC)", when(as_text(updated))],
    ]
    body = (
        "<p class=muted><a href='/memory'>Memory</a> &rsaquo; "
        "<a href='/memory/blobs'>Blobs</a> &rsaquo;</p>"
        f"<h1>{esc(name)}</h1>{table_html(['', ''], facts)}<h2>Content</h2>{shown}"
    )
    return viewer.page(f"blob: {name}", body, "memory")


def tasks(
    viewer: Viewer, reading: Reading, conversation: str, agent: str, query: Mapping[str, str]
) -> str:
    """`/memory/tasks/CONVERSATION/AGENT`: a task board, in id order."""
    _need(reading, "pygents_tasks", "task store")
    (total,) = reading.rows(
        "SELECT count(*) FROM pygents_tasks WHERE conversation = ? AND agent = ?",
        [conversation, agent],
    )[0]
    board = reading.rows(
        "SELECT 1 FROM pygents_task_boards WHERE conversation = ? AND agent = ?",
        [conversation, agent],
    )
    if not board:
        raise NotFound(f"no task board for agent {agent!r} in {conversation!r}; /memory lists them")
    sql = (
        "SELECT id, title, status, attempts, max_attempts, note, updated_at FROM pygents_tasks "
        "WHERE conversation = ? AND agent = ? ORDER BY id"
    )
    path = ["memory", "tasks", conversation, agent]
    rows, nav = _paged(reading, query, int(total), path, sql, conversation, agent)
    cells = [
        [
            str(task),
            esc(title),
            f"<span class='state {_STATUS_LOOK.get(status, 'dropped')}'>{esc(status)}</span>",
            f"{int(attempts)} / {int(most)}",
            esc(note or ""),
            when(as_text(updated)),
        ]
        for task, title, status, attempts, most, note, updated in rows
    ]
    headers = ["#", "title", "status", "attempts", "note", "updated (UTC)"]
    body = (
        "<p class=muted><a href='/memory'>Memory</a> &rsaquo; tasks &rsaquo;</p>"
        f"<h1>{esc(agent)}</h1>"
        f"<p class=muted>conversation {esc(conversation)}, {number(int(total))} tasks</p>"
        f"{nav}{table_html(headers, cells, {0})}{nav}"
    )
    return viewer.page(f"tasks: {agent}", body, "memory")


def pool(viewer: Viewer, which: str, query: Mapping[str, str]) -> str:
    """`/memory/pool/N`: the context pool of the N-th `--agent` file, read now."""
    current = whole_number(query, "page", 1)
    try:
        title, body, pages = pool_page(viewer.agents, which, current)
    except KeyError:
        raise NotFound(
            f"no saved agent {which!r}; /memory lists the --agent files the viewer was given"
        ) from None
    if current > pages:
        raise NotFound(f"page {current} does not exist; there are {pages}")
    return viewer.page(title, body, "memory")
