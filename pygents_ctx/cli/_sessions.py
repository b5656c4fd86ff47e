"""The commands that read sessions: `sessions` lists them, `show` prints one's messages.

`show` marks the result of a call that ran a sub-agent with the session of the
sub-agent's transcript (`show` that session to read it), found as the viewer
finds it (`viewer._queries.subagent_calls`).

Each command takes the parsed arguments and an `Output`.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from datetime import timedelta

from pygents_ctx.cli._db import CliError, erase_sessions, list_sessions, with_session
from pygents_ctx.cli._render import (
    Output,
    one_line,
    plural,
    render_created,
    render_message,
    shown_role,
)
from pygents_ctx.cli.viewer import SQLiteSource
from pygents_ctx.cli.viewer._queries import subagent_calls
from pygents_ctx.context.messages import Message, ToolResultBlock, to_dict
from pygents_ctx.context.stores import SessionInfo, SQLiteContextStore
from pygents_ctx.context.tokens import count_message_tokens

__all__ = ["erase", "sessions", "show"]


# -- sessions -----------------------------------------------------------------


def sessions(args: argparse.Namespace, out: Output) -> None:
    """`sessions`: one row per session, newest first."""
    found = list_sessions(args.db, args.owner)
    if args.limit is not None:
        found = found[: args.limit]
    if out.as_json:
        out.json([asdict(info) for info in found])
        return
    if not found:
        whose = "" if args.owner is None else f" of owner {args.owner!r}"
        out.lines([f"no sessions{whose} in {args.db}"])
        return
    rows = [
        [
            info.session_id,
            str(info.message_count),
            render_created(info.created_at),
            str(info.input_tokens),
            str(info.output_tokens),
            info.owner or "",
            one_line(info.preview),
        ]
        for info in found
    ]
    headers = ["session", "messages", "created (UTC)", "input", "output", "owner", "preview"]
    out.table(headers, rows, right={1, 3, 4})


# -- erase --------------------------------------------------------------------


def erase(args: argparse.Namespace, out: Output) -> None:
    """`erase`: remove an owner's sessions, or one session, for good."""
    if args.owner is None and args.session is None:
        raise CliError(
            "erase needs --owner OWNER (every session of that owner) or --session ID "
            "(one session); nothing was erased"
        )
    older_than = None if args.older_than_days is None else timedelta(days=args.older_than_days)
    erased = erase_sessions(args.db, args.owner, args.session, older_than)
    if out.as_json:
        out.json({"erased": erased})
        return
    out.lines([f"erased {plural(erased, 'session')} from {args.db}"])


# -- show ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Entry:
    index: int  # in the live history, or in the archive
    archived: bool
    message: Message

    @property
    def label(self) -> str:
        return f"a{self.index}" if self.archived else str(self.index)


async def _entries(
    store: SQLiteContextStore, *, archived: bool, limit: int | None
) -> tuple[list[_Entry], int]:
    """The messages to show, and how many there are in all (live, plus archive if asked)."""
    if archived:
        everything = await store.get_history(include_archived=True)
        split = max(len(everything) - await store.count(), 0)
        entries = [
            _Entry(i if i < split else i - split, i < split, message)
            for i, message in enumerate(everything)
        ]
        total = len(entries)
        return (entries if limit is None else entries[-limit:]), total
    messages = await store.get_history(limit=limit)
    total = len(messages) if limit is None else max(await store.count(), len(messages))
    first = total - len(messages)
    return [_Entry(first + i, False, message) for i, message in enumerate(messages)], total


def _summary(shown: int, total: int, tokens: int, archived: int | None) -> str:
    counted = (
        plural(total, "message") if shown == total else f"{shown} of {plural(total, 'message')}"
    )
    if archived is not None:
        counted += f" ({archived} archived)"
    return f"{counted}, {plural(tokens, 'token')}"


def _subagent_calls(path: str, session_id: str, entries: list[_Entry]) -> dict[str, str | None]:
    """The shown results whose call ran a sub-agent, and its transcript's session (or None)."""
    results = {
        block.tool_use_id
        for entry in entries
        for block in entry.message.content
        if isinstance(block, ToolResultBlock)
    }
    if not results:
        return {}
    source = SQLiteSource(path)
    with source.reading() as reading:
        return subagent_calls(reading, session_id, results)


def _subagent_notes(message: Message, subagents: dict[str, str | None]) -> str:
    """` [sub-agent: SESSION]` for each result of `message` whose call ran a sub-agent."""
    notes = [
        subagents[block.tool_use_id] or "transcript not kept"
        for block in message.content
        if isinstance(block, ToolResultBlock) and block.tool_use_id in subagents
    ]
    return "".join(f" [sub-agent: {note}]" for note in notes)


def show(args: argparse.Namespace, out: Output) -> None:
    """`show`: a session's messages, one per row, and their token total."""

    async def read(
        store: SQLiteContextStore, info: SessionInfo
    ) -> tuple[SessionInfo, list[_Entry], int]:
        return info, *await _entries(store, archived=args.archived, limit=args.limit)

    info, entries, total = with_session(args.db, args.session, read)
    counts = [count_message_tokens(entry.message) for entry in entries]
    subagents = _subagent_calls(args.db, info.session_id, entries)
    if out.as_json:
        out.json(
            {
                **asdict(info),
                "total": total,
                "tokens": sum(counts),
                "subagents": subagents,
                "messages": [
                    {
                        "index": entry.index,
                        "archived": entry.archived,
                        "tokens": tokens,
                        "message": to_dict(entry.message),
                    }
                    for entry, tokens in zip(entries, counts, strict=True)
                ],
            }
        )
        return
    rows = [
        [
            entry.label,
            shown_role(entry.message),
            str(tokens),
            render_message(entry.message) + _subagent_notes(entry.message, subagents),
        ]
        for entry, tokens in zip(entries, counts, strict=True)
    ]
    out.table(["#", "role", "tokens", "content"], rows, right={0, 2})
    archived = sum(entry.archived for entry in entries) if args.archived else None
    out.lines([_summary(len(entries), total, sum(counts), archived)])
