"""The command line's commands: each takes the parsed arguments and an `Output`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from pygents_ctx._cli_db import (
    CliError,
    check_database,
    list_sessions,
    with_session,
)
from pygents_ctx._cli_render import (
    Output,
    one_line,
    plural,
    render_created,
    render_message,
)
from pygents_ctx._cli_spec import DEFAULT_SPEC, StrategySpec, parse_strategy
from pygents_ctx._cli_transfer import (
    SessionFile,
    load_session,
    parse_session_file,
    save_session,
)
from pygents_ctx.context.messages import Message, to_dict
from pygents_ctx.context.stores import SessionInfo, SQLiteContextStore, connect
from pygents_ctx.context.stores._common import new_session_id
from pygents_ctx.context.tokens import count_message_tokens

__all__ = ["export", "import_", "sessions", "show", "window"]


# -- sessions -----------------------------------------------------------------


def sessions(args: argparse.Namespace, out: Output) -> None:
    """`sessions`: one row per session, newest first."""
    found = list_sessions(args.db)
    if args.limit is not None:
        found = found[: args.limit]
    if out.as_json:
        out.json([asdict(info) for info in found])
        return
    if not found:
        out.lines([f"no sessions in {args.db}"])
        return
    rows = [
        [
            info.session_id,
            str(info.message_count),
            render_created(info.created_at),
            str(info.input_tokens),
            str(info.output_tokens),
            one_line(info.preview),
        ]
        for info in found
    ]
    headers = ["session", "messages", "created (UTC)", "input", "output", "preview"]
    out.table(headers, rows, right={1, 3, 4})


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


def show(args: argparse.Namespace, out: Output) -> None:
    """`show`: a session's messages, one per row, and their token total."""

    async def read(
        store: SQLiteContextStore, info: SessionInfo
    ) -> tuple[SessionInfo, list[_Entry], int]:
        return info, *await _entries(store, archived=args.archived, limit=args.limit)

    info, entries, total = with_session(args.db, args.session, read)
    counts = [count_message_tokens(entry.message) for entry in entries]
    if out.as_json:
        out.json(
            {
                **asdict(info),
                "total": total,
                "tokens": sum(counts),
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
        [entry.label, entry.message.role, str(tokens), render_message(entry.message)]
        for entry, tokens in zip(entries, counts, strict=True)
    ]
    out.table(["#", "role", "tokens", "content"], rows, right={0, 2})
    archived = sum(entry.archived for entry in entries) if args.archived else None
    out.lines([_summary(len(entries), total, sum(counts), archived)])


# -- window -------------------------------------------------------------------


def _history_indexes(history: list[Message], window: list[Message]) -> list[int | None]:
    """Where each window message sits in the history, None where it cannot be told.

    A message the strategy kept is the history's own object. An edited one is a
    new object; strategies keep the order, so a run of edited messages between
    two kept ones maps one to one when the history has exactly as many there.
    """
    where = {id(message): index for index, message in enumerate(history)}
    found = [where.get(id(message)) for message in window]
    indexes = list(found)
    before, run = -1, []  # the last known history index, and the unknown positions since
    for position, index in enumerate([*found, len(history)]):
        if index is None:
            run.append(position)
            continue
        if run and index - before - 1 == len(run):
            for offset, at in enumerate(run, start=1):
                indexes[at] = before + offset
        before, run = index, []
    return indexes


def _budget_note(tokens: int, budget: int | None) -> str:
    if budget is None:
        return ""
    if tokens <= budget:
        return f"; budget {budget}: {budget - tokens} left"
    return f"; budget {budget}: over by {tokens - budget}"


def window(args: argparse.Namespace, out: Output) -> None:
    """`window`: the window `--strategy` (else `DEFAULT_SPEC`) builds from the live history."""
    chosen: StrategySpec | None = args.strategy
    spec = parse_strategy(DEFAULT_SPEC) if chosen is None else chosen

    async def build(
        store: SQLiteContextStore, info: SessionInfo
    ) -> tuple[SessionInfo, list[Message], list[Message]]:
        history = await store.get_history()
        return info, history, await spec.strategy.compact(list(history))

    info, history, built = with_session(args.db, args.session, build)
    budget = args.budget if args.budget is not None else spec.budget
    kept = {id(message) for message in history}
    indexes = _history_indexes(history, built)
    counts = [count_message_tokens(message) for message in built]
    tokens, history_tokens = sum(counts), sum(map(count_message_tokens, history))
    if out.as_json:
        out.json(
            {
                "session_id": info.session_id,
                "strategy": spec.text,
                "default_strategy": chosen is None,
                "budget": budget,
                "tokens": tokens,
                "history_messages": len(history),
                "history_tokens": history_tokens,
                "messages": [
                    {
                        "history_index": index,
                        "edited": id(message) not in kept,
                        "tokens": count,
                        "message": to_dict(message),
                    }
                    for message, index, count in zip(built, indexes, counts, strict=True)
                ],
            }
        )
        return
    rows = [
        [
            "?" if index is None else str(index),
            message.role + ("" if id(message) in kept else "*"),
            str(count),
            render_message(message),
        ]
        for message, index, count in zip(built, indexes, counts, strict=True)
    ]
    out.table(["#", "role", "tokens", "content"], rows, right={0, 2})
    out.lines(
        [
            f"window: {len(built)} of {plural(len(history), 'message')}, "
            f"{plural(tokens, 'token')} (history {history_tokens})"
            f"{_budget_note(tokens, budget)}"
        ]
    )
    if any(id(message) not in kept for message in built):
        out.lines(["* edited by the strategy"])
    if chosen is None:
        out.lines(
            [
                f"strategy: {DEFAULT_SPEC} ({spec.strategy!r}), what ContextConfig uses when "
                "given none; --strategy SPEC builds another"
            ]
        )


# -- export and import ----------------------------------------------------------


def export(args: argparse.Namespace, out: Output) -> None:
    """`export`: a session as a session file, to stdout or `--output`."""

    async def read(store: SQLiteContextStore, info: SessionInfo) -> SessionFile:
        return await load_session(store)

    file = with_session(args.db, args.session, read)
    data = file.to_json()
    if args.output in (None, "-"):
        out.stream.write(data.decode())
        return
    Path(args.output).write_bytes(data)
    out.lines(
        [
            f"exported {plural(len(file.messages), 'message')} "
            f"({len(file.archived)} archived) of session {file.session_id} to {args.output}"
        ]
    )


def _read_input(name: str) -> tuple[bytes, str]:
    if name == "-":
        return sys.stdin.buffer.read(), "stdin"
    try:
        return Path(name).read_bytes(), name
    except FileNotFoundError:
        raise CliError(f"no file at {name!r} to import") from None
    except IsADirectoryError:
        raise CliError(f"{name!r} is a directory; import takes a file that export wrote") from None


def import_(args: argparse.Namespace, out: Output) -> None:
    """`import`: a new session (or an empty one) from a session file."""
    data, source = _read_input(args.file)
    file = parse_session_file(data, source)
    session_id = args.session or file.session_id or new_session_id()
    if Path(args.db).exists():  # a new database is fine, someone else's SQLite file is not
        check_database(args.db)

    async def write() -> None:
        async with connect(args.db) as conn:
            store = SQLiteContextStore(conn, session_id=session_id)
            if await store.get_history(include_archived=True, limit=1):
                raise CliError(
                    f"session {session_id!r} in {args.db!r} already holds messages; "
                    "import into a new session with --session NEW_ID"
                )
            await save_session(store, file)

    asyncio.run(write())
    if out.as_json:
        out.json(
            {
                "session_id": session_id,
                "messages": len(file.messages),
                "archived": len(file.archived),
            }
        )
        return
    out.lines(
        [
            f"imported {plural(len(file.messages), 'message')} ({len(file.archived)} archived) "
            f"into session {session_id}"
        ]
    )
