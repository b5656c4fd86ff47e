"""Saved agents (`--agent FILE`): their context pools, which live in the agent's JSON, not
in a table.

An agent's `to_json()` (what `make demo` writes beside its database as
`pygents_ctx.agent.json`) holds its `ContextPool` under `context_pool`. The
viewer reads the file as JSON, fresh for each page and without building the
agent (no tool or hook needs to be registered), and shows the pool's items.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from pygents_ctx.cli._db import CliError
from pygents_ctx.cli.viewer._html import esc, href, message_html, number, pager, table_html
from pygents_ctx.context.messages import from_dict
from pygents_ctx.context.tokens import count_message_tokens

__all__ = ["SavedAgent", "check_agents", "pool_page", "pools_section", "read_agent"]

PER_PAGE: Final = 50


@dataclass(frozen=True, slots=True)
class SavedAgent:
    """What the viewer shows of a saved agent: its name, session, and pool."""

    path: str
    name: str
    session_id: str | None
    limit: int | None
    items: list[dict[str, Any]]


def read_agent(path: str) -> SavedAgent:
    """The saved agent at `path`, read as JSON.

    Raises:
        CliError: The file is missing or is not an agent's saved JSON.
    """
    target = Path(path)
    if not target.is_file():
        raise CliError(
            f"no saved agent at {path!r}; --agent takes a file an agent's to_json() wrote"
        )
    try:
        data = orjson.loads(target.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise CliError(f"cannot read the saved agent {path!r}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise CliError(f"{path!r} is not a saved agent (an agent's to_json() has a 'name')")
    pool = data.get("context_pool") or {}
    context = data.get("context") or {}
    items = pool.get("items") if isinstance(pool, dict) else None
    return SavedAgent(
        path,
        data["name"],
        context.get("session_id") if isinstance(context, dict) else None,
        pool.get("limit") if isinstance(pool, dict) else None,
        [item for item in items if isinstance(item, dict)] if isinstance(items, list) else [],
    )


def check_agents(paths: tuple[str, ...]) -> None:
    """Read each saved agent once, so a bad `--agent` fails at start."""
    for path in paths:
        read_agent(path)


def pools_section(paths: tuple[str, ...]) -> str:
    """The memory page's part on the `--agent` files' pools (empty when there are none)."""
    if not paths:
        return ""
    rows = []
    for number_, path in enumerate(paths):
        agent = read_agent(path)
        session = (
            f'<a href="{href(["session", agent.session_id])}">{esc(agent.session_id)}</a>'
            if agent.session_id
            else "-"
        )
        rows.append(
            [
                f'<a href="{href(["memory", "pool", str(number_)])}">{esc(agent.name)}</a>',
                esc(path),
                number(len(agent.items)),
                "-" if agent.limit is None else esc(agent.limit),
                session,
            ]
        )
    table = table_html(["agent", "file", "items", "limit", "session"], rows, {2})
    return f"<h2>Context pools (saved agents)</h2>{table}"


def _content(item: Mapping[str, Any]) -> str:
    content = item.get("content")
    if item.get("content_type") == "message" and isinstance(content, dict):
        try:
            message = from_dict(content)
        except (TypeError, ValueError):
            pass
        else:
            return message_html(
                message,
                label="item",
                anchor="",
                tokens=count_message_tokens(message),
                link=lambda call_id, to_result: "",
                ids=False,
            )
    if isinstance(content, str):
        return f"<pre>{esc(content)}</pre>"
    shown = orjson.dumps(content, option=orjson.OPT_INDENT_2, default=str).decode()
    return f"<pre>{esc(shown)}</pre>"


def pool_page(paths: tuple[str, ...], which: str, current: int) -> tuple[str, str, int]:
    """The title, body and page count of `/memory/pool/N`; `KeyError` for no such agent."""
    if not which.isdigit() or int(which) >= len(paths):
        raise KeyError(which)
    agent = read_agent(paths[int(which)])
    pages = max(1, -(-len(agent.items) // PER_PAGE))
    shown = agent.items[(current - 1) * PER_PAGE : current * PER_PAGE]
    rows = [
        [esc(item.get("id") or ""), esc(item.get("description") or ""), _content(item)]
        for item in shown
    ]
    nav = pager(["memory", "pool", which], {}, current, pages)
    body = (
        "<p class=muted><a href='/memory'>Memory</a> &rsaquo; pool &rsaquo;</p>"
        f"<h1>{esc(agent.name)}</h1><p class=muted>{number(len(agent.items))} items in the "
        f"context pool saved in {esc(agent.path)}</p>"
        f"{nav}{table_html(['id', 'description', 'content'], rows)}{nav}"
    )
    return f"pool: {agent.name}", body, pages
