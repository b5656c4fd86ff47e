"""The viewer's session pages: the sessions list, a transcript, the archive, the spend.

Each page function takes the `Viewer` (what the command was started with), a
`Reading` and the request's query, and returns the page's HTML. Bad input
raises `NotFound` (HTTP 404) or `BadRequest` (HTTP 400) with a message that
says what is wrong and what to do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from pygents_ctx.cli._db import CliError
from pygents_ctx.cli._window import DEFAULT_SPEC, StrategySpec, parse_strategy
from pygents_ctx.cli.viewer import _queries as q
from pygents_ctx.cli.viewer._charts import Series, bars_against, stacked_bars
from pygents_ctx.cli.viewer._html import (
    ToolLink,
    esc,
    href,
    message_html,
    number,
    page,
    pager,
    table_html,
    when,
)
from pygents_ctx.cli.viewer._source import Reading, Source
from pygents_ctx.context.messages import ToolResultBlock, ToolUseBlock
from pygents_ctx.context.strategies.compose import model_context_window
from pygents_ctx.context.usage import UsageRecord
from pygents_ctx.errors import UnknownModelError

__all__ = [
    "BadRequest",
    "NotFound",
    "Redirect",
    "Viewer",
    "archive",
    "checkpoints",
    "cost_text",
    "find_row",
    "page_number",
    "session_header",
    "session_tabs",
    "sessions",
    "spend",
    "tool",
    "tool_links",
    "transcript",
    "whole_number",
]

SESSIONS_PER_PAGE: Final = 50
MESSAGES_PER_PAGE: Final = 100
MOST_PER_PAGE: Final = 1000
CALLS_PER_PAGE: Final = 100
CHECKPOINTS_PER_PAGE: Final = 100


class NotFound(Exception):
    """A page that does not exist (an unknown session, say): HTTP 404 with the message."""


class BadRequest(Exception):
    """A request the viewer cannot read (a bad number, a bad strategy): HTTP 400."""


class Redirect(Exception):
    """Send the browser to `location` (HTTP 302)."""

    def __init__(self, location: str) -> None:
        super().__init__(location)
        self.location = location


@dataclass(frozen=True, slots=True)
class Viewer:
    """What `pygents-ctx view` was started with: the store, prices, the window's default.

    Attributes:
        source: The database, opened read-only.
        prices: `--pricing`; sessions show a cost only when every model they used has one.
        strategy: `--strategy`: the window page's strategy when the URL names none.
        budget: `--budget`: what windows and spend are measured against, if given.
        agents: `--agent` files: saved agents whose context pools the memory page shows.
    """

    source: Source
    prices: q.Prices = field(default_factory=q.Prices)
    strategy: StrategySpec = field(default_factory=lambda: parse_strategy(DEFAULT_SPEC))
    budget: int | None = None
    agents: tuple[str, ...] = ()

    def page(self, title: str, body: str, section: str = "") -> str:
        return page(title, body, source=self.source.name, section=section)


def whole_number(query: Mapping[str, str], name: str, default: int, least: int = 1) -> int:
    """The query's `name` as a whole number of at least `least`, or `default` when absent.

    Raises:
        BadRequest: It is there but not such a number.
    """
    text = query.get(name, "").strip()
    if not text:
        return default
    if not text.isdigit() or int(text) < least:
        raise BadRequest(f"{name} must be a whole number of at least {least}, not {text!r}")
    return int(text)


# No store holds this many pages; a larger number is refused before it reaches SQL,
# whose integers it would overflow.
_MOST_PAGES: Final = 10**12


def requested_page(query: Mapping[str, str]) -> int:
    """The query's `page` (default 1), before the number of pages is known.

    Raises:
        BadRequest: It is not a whole number of at least 1.
        NotFound: It is beyond any page a store can have.
    """
    current = whole_number(query, "page", 1)
    if current > _MOST_PAGES:
        raise NotFound(f"page {current} does not exist")
    return current


def page_number(query: Mapping[str, str], total: int, size: int) -> tuple[int, int]:
    """The page asked for (1 to the last) and the number of pages."""
    pages = max(1, math.ceil(total / size))
    current = requested_page(query)
    if current > pages:
        raise NotFound(f"page {current} does not exist; there are {pages}")
    return current, pages


def cost_text(viewer: Viewer, row: q.SessionRow) -> str:
    """The session's cost as a table cell: `$0.0123`, `?` (a model has no price) or `-`."""
    if not row.usage_by_model:
        return "<span class=muted title='no usage records'>-</span>"
    cost = viewer.prices.cost(row.usage_by_model)
    if cost is None:
        unpriced = [model for model in row.usage_by_model if viewer.prices.for_model(model) is None]
        return f"<span title='no --pricing for {esc(', '.join(unpriced))}'>?</span>"
    return f"${cost:,.4f}"


# -- sessions -------------------------------------------------------------------


def sessions(viewer: Viewer, reading: Reading, query: Mapping[str, str]) -> str:
    """`/`: the sessions, newest first, searchable by id and owner, a page at a time."""
    search = query.get("q", "").strip()
    owner = query.get("owner", "").strip()
    current = requested_page(query)
    rows, total = q.sessions_page(
        reading, search, (current - 1) * SESSIONS_PER_PAGE, SESSIONS_PER_PAGE, owner
    )
    current, pages = page_number(query, total, SESSIONS_PER_PAGE)
    owners = bool(owner) or q.has_owners(reading)
    headers = ["session", *(["owner"] if owners else [])]
    headers += ["created (UTC)", "messages", "archived", "tokens", "input", "output"]
    headers += ["runs", "calls", "last activity (UTC)"]
    if viewer.prices:
        headers.append("cost")
    headers.append("first message")
    cells = []
    for row in rows:
        cell = [
            f'<a class=session href="{href(["session", row.session_id])}">'
            f"{esc(row.session_id)}</a>",
            *([_owner_link(row.owner)] if owners else []),
            when(row.created_at),
            number(row.messages),
            number(row.archived),
            number(row.live_tokens),
            number(row.input_tokens),
            number(row.output_tokens),
            number(row.runs),
            number(row.model_calls),
            when(row.last_activity),
        ]
        if viewer.prices:
            cell.append(cost_text(viewer, row))
        cell.append(esc(row.preview))
        cells.append(cell)
    found = f"{number(total)} session{'s' if total != 1 else ''}"
    if search:
        found += f" whose id contains “{esc(search)}”"
    if owner:
        found += f" of owner “{esc(owner)}”"
    shift = 1 if owners else 0
    listing = (
        table_html(headers, cells, numeric={n + shift for n in (2, 3, 4, 5, 6, 7, 8)})
        if rows
        else f"<p class=muted>No sessions{' match' if search or owner else ''}.</p>"
    )
    nav = pager([], {"q": search, "owner": owner}, current, pages)
    pricing_note = (
        ""
        if viewer.prices
        else "<p class=note>Costs are left out: start the viewer with "
        "<code>--pricing MODEL=INPUT,OUTPUT</code> (prices per million tokens) to see them.</p>"
    )
    body = (
        f"<h1>Sessions</h1><p class=muted>{found}</p>"
        f"<form class=bar method=get action='/'><label>search by id"
        f"<input name=q value='{esc(search)}' placeholder='session id or part of it'></label>"
        + (
            f"<label>owner<input name=owner value='{esc(owner)}' placeholder='all'></label>"
            if owners
            else ""
        )
        + "<button>Search</button></form>"
        f"{nav}{listing}{nav}"
        f"{pricing_note}"
    )
    return viewer.page("Sessions", body, "sessions")


# -- one session -------------------------------------------------------------------


def session_tabs(session_id: str, on: str, archived: int) -> str:
    """The links between a session's pages, the current one marked."""
    tabs = [
        ("transcript", []),
        ("window", ["window"]),
        ("spend", ["spend"]),
        ("checkpoints", ["checkpoints"]),
    ]
    if archived:
        tabs.append(("archive", ["archive"]))
    return (
        "<nav class=tabs>"
        + "".join(
            f'<a href="{href(["session", session_id, *path])}"'
            f"{' class=on' if name == on else ''}>{name.capitalize()}</a>"
            for name, path in tabs
        )
        + "</nav>"
    )


def _owner_link(owner: str | None) -> str:
    """An owner as a table cell: a link to their sessions, or a dash."""
    if owner is None:
        return "<span class=muted>-</span>"
    return f'<a href="{href([], {"owner": owner})}">{esc(owner)}</a>'


def session_header(viewer: Viewer, row: q.SessionRow, on: str) -> str:
    cards = [
        ("messages", number(row.messages)),
        ("tokens in history", number(row.live_tokens)),
        ("input / output", f"{number(row.input_tokens)} / {number(row.output_tokens)}"),
        ("runs", number(row.runs)),
        ("model calls", number(row.model_calls)),
        ("archived", number(row.archived)),
        ("last activity (UTC)", when(row.last_activity)),
    ]
    if viewer.prices:
        cards.append(("cost", cost_text(viewer, row)))
    if row.owner is not None:
        cards.append(("owner", _owner_link(row.owner)))
    return (
        f"<p class=muted><a href='/'>Sessions</a> &rsaquo;</p><h1>{esc(row.session_id)}</h1>"
        "<div class=cards>"
        + "".join(
            f"<div class=card><b>{value}</b><span class=muted>{name}</span></div>"
            for name, value in cards
        )
        + "</div>"
        + session_tabs(row.session_id, on, row.archived)
    )


def find_row(reading: Reading, viewer: Viewer, wanted: str) -> q.SessionRow:
    """The session `wanted` names (an id or a unique prefix), or `NotFound` with the CLI's error."""
    try:
        session_id = q.find_session(reading, wanted, viewer.source.name)
    except CliError as exc:
        raise NotFound(str(exc)) from None
    return q.session_row(reading, session_id)


def tool_links(
    session_id: str, entries: list[q.Entry], *, size: int = MESSAGES_PER_PAGE, finder: bool = True
) -> ToolLink:
    """Links from calls to results and back: an anchor on the page, else the finder.

    The finder (`/session/ID/tool/CALL`) searches the live history and redirects
    to the page of `size` messages that holds the block; without `finder`, a
    block on another page gets no link (the archive's pages).
    """
    here: dict[tuple[str, bool], int] = {}
    for entry in entries:
        for block in entry.message.content:
            if isinstance(block, ToolUseBlock):
                here[(block.id, False)] = entry.position
            elif isinstance(block, ToolResultBlock):
                here[(block.tool_use_id, True)] = entry.position

    def link(call_id: str, to_result: bool) -> str:
        if (call_id, to_result) in here:
            return esc("#" + ("result-" if to_result else "call-") + call_id)
        if not finder:
            return ""
        near = here.get((call_id, not to_result), 0)
        kept = {"size": size} if size != MESSAGES_PER_PAGE else {}
        return href(
            ["session", session_id, "tool", call_id],
            {"to": "result" if to_result else "call", "near": near, **kept},
        )

    return link


def _run_divider(run_id: str | None) -> str:
    if run_id is None:
        return "<div class=run>outside any run</div>"
    return f"<div class=run>run {esc(run_id)}</div>"


def transcript(viewer: Viewer, reading: Reading, wanted: str, query: Mapping[str, str]) -> str:
    """`/session/ID`: the live history a page at a time, runs marked, summaries explained."""
    row = find_row(reading, viewer, wanted)
    size = min(whole_number(query, "size", MESSAGES_PER_PAGE), MOST_PER_PAGE)
    current, pages = page_number(query, row.messages, size)
    offset = (current - 1) * size
    # One message before the page tells whether the page opens a new run.
    before = q.messages_page(reading, row.session_id, offset - 1, 1) if offset else []
    entries = q.messages_page(reading, row.session_id, offset, size)
    # A compaction's summary sits at the head of the history: only the first page can hold it.
    found = q.summaries(reading, row.session_id) if offset < q.SUMMARY_HEAD else None
    link = tool_links(row.session_id, entries, size=size)
    results = {
        block.tool_use_id
        for entry in entries
        for block in entry.message.content
        if isinstance(block, ToolResultBlock)
    }
    subagents = q.subagent_calls(reading, row.session_id, results)
    previous_run = before[0].run_id if before else object()
    parts = []
    for entry in entries:
        if entry.run_id != previous_run:
            parts.append(_run_divider(entry.run_id))
            previous_run = entry.run_id
        covered = found.of_live(entry.index) if found else None
        badges = ""
        if covered is not None:
            badges = "<span class='state summary'>summary</span>" + _covers(row.session_id, covered)
        parts.append(
            message_html(
                entry.message,
                label=str(entry.index),
                anchor=f"m-{entry.index}",
                tokens=entry.tokens,
                link=link,
                badges=badges,
                summary=covered is not None,
                subagents=subagents,
            )
        )
    archived_note = ""
    if row.archived:
        archived_note = (
            f"<p class=note>{number(row.archived)} earlier messages were archived by compaction "
            f"and replaced by a summary: <a href='{href(['session', row.session_id, 'archive'])}'>"
            "browse the archive</a>.</p>"
        )
    query_kept = {"size": query.get("size", "")}
    nav = pager(["session", row.session_id], query_kept, current, pages)
    listing = "".join(parts) or "<p class=muted>This session has no messages.</p>"
    body = f"{session_header(viewer, row, 'transcript')}{archived_note}{nav}{listing}{nav}"
    return viewer.page(row.session_id, body)


def _covers(session_id: str, covered: q.Covered) -> str:
    if covered.last < covered.first:
        span = "no archived messages"
    else:
        first = href(
            ["session", session_id, "archive"], _archive_query(covered.first), f"a-{covered.first}"
        )
        span = (
            f'replaced <a href="{first}">a{covered.first}&ndash;a{covered.last}</a> '
            f"({number(covered.last - covered.first + 1)} messages)"
        )
    if covered.folded is not None:
        span += f", updating the summary a{covered.folded}"
    return f"<span class=covers>{span}</span>"


def _archive_query(index: int) -> dict[str, object]:
    return {"page": index // MESSAGES_PER_PAGE + 1}


def archive(viewer: Viewer, reading: Reading, wanted: str, query: Mapping[str, str]) -> str:
    """`/session/ID/archive`: what compaction took out, each message with its summary."""
    row = find_row(reading, viewer, wanted)
    current, pages = page_number(query, row.archived, MESSAGES_PER_PAGE)
    offset = (current - 1) * MESSAGES_PER_PAGE
    entries = q.archive_page(reading, row.session_id, offset, MESSAGES_PER_PAGE)
    found = q.summaries(reading, row.session_id)
    link = tool_links(row.session_id, entries, finder=False)
    parts = []
    for entry in entries:
        covered = found.covering(entry.index)
        own = next((c for c in found.covers if c.summary == ("archive", entry.index)), None)
        if own is not None:
            badges = "<span class='state summary'>earlier summary</span>" + _covers(
                row.session_id, own
            )
        elif q.is_carried(entry.message):
            badges = "<span class='state kept'>carried into the new history</span>"
        elif covered is None:
            badges = "<span class='state dropped'>removed without a summary</span>"
        else:
            place, index = covered.summary
            target = (
                href(
                    ["session", row.session_id],
                    {"page": index // MESSAGES_PER_PAGE + 1},
                    f"m-{index}",
                )
                if place == "live"
                else href(
                    ["session", row.session_id, "archive"], _archive_query(index), f"a-{index}"
                )
            )
            name = f"#{index}" if place == "live" else f"a{index}"
            badges = (
                "<span class='state summarized'>summarized</span> "
                f'<a href="{target}">by {name}</a>'
            )
        parts.append(
            message_html(
                entry.message,
                label=f"a{entry.index}",
                anchor=f"a-{entry.index}",
                tokens=entry.tokens,
                link=link,
                badges=badges,
                summary=own is not None,
            )
        )
    intro = (
        "<p class=note>Messages a compaction took out of the live history, in the order they "
        "left; each says which summary replaced it.</p>"
    )
    nav = pager(["session", row.session_id, "archive"], {}, current, pages)
    listing = "".join(parts) or "<p class=muted>Nothing was archived.</p>"
    body = f"{session_header(viewer, row, 'archive')}{intro}{nav}{listing}{nav}"
    return viewer.page(f"{row.session_id}: archive", body)


def tool(
    viewer: Viewer, reading: Reading, wanted: str, call_id: str, query: Mapping[str, str]
) -> str:
    """`/session/ID/tool/CALL?to=result|call`: redirect to the page holding that block."""
    row = find_row(reading, viewer, wanted)
    to = query.get("to", "result")
    if to not in ("result", "call"):
        raise BadRequest(f"to must be 'result' or 'call', not {to!r}")
    near_text = query.get("near", "0").strip() or "0"
    try:
        near = int(near_text)  # a store position: may be negative after a compaction
    except ValueError:
        raise BadRequest(f"near must be a whole number, not {near_text!r}") from None
    size = min(whole_number(query, "size", MESSAGES_PER_PAGE), MOST_PER_PAGE)
    index = q.find_tool_block(reading, row.session_id, call_id, result=to == "result", near=near)
    if index is None:
        raise NotFound(
            f"no tool {to} for call {call_id!r} in the live history of {row.session_id!r}"
        )
    kept = {"size": size} if size != MESSAGES_PER_PAGE else {}
    raise Redirect(
        href(["session", row.session_id], {"page": index // size + 1, **kept}, f"{to}-{call_id}")
    )


# -- spend -------------------------------------------------------------------------


def _budget(viewer: Viewer, query: Mapping[str, str], model: str) -> tuple[int | None, str]:
    """The budget to draw, and where it came from."""
    if query.get("budget"):
        return whole_number(query, "budget", 0), "from the address"
    if viewer.budget is not None:
        return viewer.budget, "--budget"
    if viewer.strategy.budget is not None:
        return viewer.strategy.budget, f"the strategy {viewer.strategy.text}"
    try:
        return model_context_window(model), f"{model}'s context window"
    except (UnknownModelError, TypeError):
        return None, ""


def _subagent_cell(record: UsageRecord) -> str:
    """A sub-agent's call: the call that ran it (at its result), and its transcript (if kept)."""
    if record.call_id is None or record.parent_session is None:
        return "-"
    call = href(
        ["session", record.parent_session, "tool", record.call_id], {"to": "result", "near": 0}
    )
    cell = f'<a class=subagent-call href="{call}">call {esc(record.call_id)}</a>'
    if record.subagent_session is None:
        return cell + " <span class=muted>(transcript not kept)</span>"
    transcript = href(["session", record.subagent_session])
    return cell + f' &middot; <a class=subagent href="{transcript}">transcript</a>'


def spend(viewer: Viewer, reading: Reading, wanted: str, query: Mapping[str, str]) -> str:
    """`/session/ID/spend`: tokens per model call, the window against the budget, the calls."""
    row = find_row(reading, viewer, wanted)
    records = q.usage_records(reading, row.session_id)
    header = session_header(viewer, row, "spend")
    if not records:
        body = (
            header
            + "<p class=muted>No usage records: no model call of this session was recorded.</p>"
        )
        return viewer.page(f"{row.session_id}: spend", body)
    labels = [f"call {n} ({record.model or 'model'})" for n, record in enumerate(records, start=1)]
    tokens = stacked_bars(
        "Input, cached and output tokens per model call",
        [
            Series("cached input", "#7a5af8", [r.usage.cached_tokens for r in records]),
            Series(
                "uncached input",
                "#4c8bf5",
                [r.usage.input_tokens - r.usage.cached_tokens for r in records],
            ),
            Series("output", "#16a34a", [r.usage.output_tokens for r in records]),
        ],
        labels,
    )
    budget, budget_from = _budget(viewer, query, records[-1].model)
    sizes = [
        r.usage.input_tokens if r.estimated_input_tokens is None else r.estimated_input_tokens
        for r in records
    ]
    window = bars_against("Window size against the budget", sizes, labels, budget, "#4c8bf5")
    current, pages = page_number(query, len(records), CALLS_PER_PAGE)
    first = (current - 1) * CALLS_PER_PAGE
    headers = ["call", "run", "model", "input", "cached", "output", "window (est.)", "time (UTC)"]
    linked = any(record.call_id is not None for record in records)
    if linked:
        headers.append("sub-agent")
    if viewer.prices:
        headers.append("cost")
    cells = []
    for n, record in enumerate(records[first : first + CALLS_PER_PAGE], start=first + 1):
        usage = record.usage
        cell = [
            str(n),
            esc(record.run_id or "-"),
            esc(record.model or "-"),
            number(usage.input_tokens),
            number(usage.cached_tokens),
            number(usage.output_tokens),
            "-" if record.estimated_input_tokens is None else number(record.estimated_input_tokens),
            when(record.created_at),
        ]
        if linked:
            cell.append(_subagent_cell(record))
        if viewer.prices:
            pricing = viewer.prices.for_model(record.model)
            cell.append("?" if pricing is None else f"${pricing.cost(usage):,.4f}")
        cells.append(cell)
    kept = {"budget": query.get("budget")}
    budget_note = (
        f"Budget {number(budget)} tokens ({esc(budget_from)}); add <code>?budget=N</code> to the "
        "address to draw another."
        if budget is not None
        else "No budget known: add <code>?budget=N</code> to the address, or start the viewer "
        "with --budget."
    )
    body = (
        f"{header}<h2>Tokens per model call</h2><div class=chart>{tokens}</div>"
        "<h2>Window size</h2><p class=note>The window each call sent: the estimate made before "
        f"the call where it was recorded, else the input tokens the provider counted. {budget_note}"
        f"</p><div class=chart>{window}</div><h2>Model calls</h2>"
        f"{pager(['session', row.session_id, 'spend'], kept, current, pages)}"
        f"{table_html(headers, cells, numeric={0, 3, 4, 5, 6})}"
    )
    return viewer.page(f"{row.session_id}: spend", body)


# -- checkpoints ----------------------------------------------------------------------


def _message_link(session_id: str, at: int, count: int) -> str:
    """Where checkpoint `at` was taken: before message `at`, on its transcript page."""
    if at == count:
        return "after the last message"
    where = href(["session", session_id], {"page": at // MESSAGES_PER_PAGE + 1}, f"m-{at}")
    return f'<a href="{where}">before message {at}</a>'


def checkpoints(viewer: Viewer, reading: Reading, wanted: str, query: Mapping[str, str]) -> str:
    """`/session/ID/checkpoints`: the agents' checkpoints, each at its message."""
    row = find_row(reading, viewer, wanted)
    found = q.checkpoints(reading, row.session_id, row.messages)
    header = session_header(viewer, row, "checkpoints")
    if not found:
        body = header + (
            "<p class=muted>No checkpoints: no agent saved its state in this session "
            "(<code>await agent.checkpoint()</code>, or <code>ContextConfig(store, "
            "checkpoints=True)</code> for a model loop).</p>"
        )
        return viewer.page(f"{row.session_id}: checkpoints", body)
    current, pages = page_number(query, len(found), CHECKPOINTS_PER_PAGE)
    first = (current - 1) * CHECKPOINTS_PER_PAGE
    cells = [
        [
            esc(info.agent),
            number(info.at),
            _message_link(row.session_id, info.at, row.messages),
            when(info.created_at),
            number(info.size),
        ]
        for info in found[first : first + CHECKPOINTS_PER_PAGE]
    ]
    headers = ["agent", "at", "where", "taken (UTC)", "state (bytes)"]
    body = (
        f"{header}<p class=note>Each agent's saved turns, queue and pool, one per agent and "
        "message: <code>await agent.rewind(at)</code> rewinds the conversation to that message "
        "and gives the agent of that name this state back.</p>"
        f"{pager(['session', row.session_id, 'checkpoints'], {}, current, pages)}"
        f"{table_html(headers, cells, numeric={1, 4})}"
    )
    return viewer.page(f"{row.session_id}: checkpoints", body)
