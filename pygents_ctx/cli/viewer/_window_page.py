"""The window page: what the model was sent at a step, beside the history it came from.

A step is a model call: step N's window is from the live history as it stood
before the N-th assistant message, and the step after the last one is the next
call (the whole history). When the call's usage record holds its window (a
`WindowRecord`, written by `ModelLoop`), the page shows exactly those history
messages and names the strategy that chose them. Otherwise (older sessions,
the next call, a call made before a later compaction), or when the address
names a strategy, the window is rebuilt: with any strategy the command line's
`--strategy` accepts; with a pin budget inside a `PinnedWindow`, replayed over
every step up to N, as an agent would have built it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from pygents_ctx.cli._window import STAGES, SpecError, StrategySpec, parse_strategy, spec_help
from pygents_ctx.cli.viewer import _queries as q
from pygents_ctx.cli.viewer._html import ToolLink, esc, href, message_html, number, pager
from pygents_ctx.cli.viewer._pages import (
    BadRequest,
    Viewer,
    find_row,
    page_number,
    session_header,
    tool_links,
    whole_number,
)
from pygents_ctx.cli.viewer._source import Reading
from pygents_ctx.context.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from pygents_ctx.context.strategies.pinned import PinnedWindow, Window
from pygents_ctx.context.strategies.summarize import summary_mark
from pygents_ctx.context.tokens import count_message_tokens
from pygents_ctx.context.usage import UsageRecord, WindowRecord, history_indexes

__all__ = ["Built", "build_window", "window"]

ROWS_PER_PAGE: Final = 100
_FOLD: Final = 4  # a run of more dropped messages than this shows as one row


@dataclass(frozen=True, slots=True)
class Built:
    """A window built at a step: its messages, and where each sits in the history."""

    history: list[Message]  # the live history before the step's call
    messages: list[Message]
    indexes: list[int | None]
    pinned: Window | None  # the PinnedWindow's last build, when pinned
    edited: frozenset[int] = frozenset()  # recorded: history indexes sent edited


def _recorded(history: list[Message], record: WindowRecord) -> Built:
    """The window a call recorded: the history messages at its positions."""
    prefix = history[: record.history]
    indexes = record.indexes()
    edited = frozenset(index for start, stop in record.edited for index in range(start, stop))
    return Built(prefix, [prefix[i] for i in indexes], list[int | None](indexes), None, edited)


def _record_of(
    records: list[UsageRecord], history: list[Message], cut: int
) -> tuple[UsageRecord | None, str]:
    """The latest record of a call made with the history's first `cut` messages, or why none.

    A record counts only if no compaction came after it (its summary mark is
    the history's): a compaction moves the live history's positions. A
    sub-agent's calls, recorded in its caller's session, never count.
    """
    # A sub-agent's calls are recorded here too (linked by call_id): their windows count
    # the sub-agent's own history, not this one.
    windows = [r for r in records if r.window is not None and r.call_id is None]
    if not windows:
        return None, "this session's calls recorded no windows (made before they were recorded)"
    mark = summary_mark(history)
    for record in reversed(windows):
        assert record.window is not None
        if record.window.history == cut and record.window.summary == mark:
            return record, ""
    if any(record.window is not None and record.window.summary != mark for record in windows):
        return None, (
            "no window recorded for this call since the last compaction (a compaction moves "
            "the history, so windows recorded before it cannot be placed in it)"
        )
    return None, "no window was recorded for this call"


def _inherited(
    reading: Reading, session_id: str, history: list[Message], cut: int
) -> tuple[str, UsageRecord | None]:
    """The session a fork came from that made this call, and its record (`session_id`, None: none).

    A call's usage is recorded once, in the session that made it, so a fork's
    calls from before it was made are its sources'. A source's call counts
    when the source's history then began with the very same `cut` messages.
    """
    for source in q.fork_sources(reading, session_id):
        theirs = [entry.message for entry in q.live_history(reading, source)[:cut]]
        if theirs != history[:cut]:
            continue
        record, _ = _record_of(q.usage_records(reading, source), theirs, cut)
        if record is not None:
            return source, record
    return session_id, None


def _cuts(history: list[Message]) -> list[int]:
    """Where each step's history ends: before each assistant message, then the whole."""
    return [i for i, message in enumerate(history) if message.role == "assistant"] + [len(history)]


async def _build(
    history: list[Message], cuts: list[int], step: int, spec: StrategySpec, pin: int | None
) -> Built:
    prefix = history[: cuts[step - 1]]
    if pin is None:
        built = await spec.strategy.compact(list(prefix))
        return Built(prefix, built, history_indexes(prefix, built), None)
    builder = PinnedWindow(spec.strategy, pin)
    last: Window | None = None
    grown: list[Message] = []  # the history as it grew, extended call by call (not re-sliced)
    for cut in cuts[:step]:  # replayed call by call: a pin depends on every earlier window
        grown.extend(history[len(grown) : cut])
        last = await builder.build(grown)
    assert last is not None
    return Built(prefix, last.messages, history_indexes(prefix, last.messages), last)


def build_window(history: list[Message], step: int, spec: StrategySpec, pin: int | None) -> Built:
    """The window `spec` (pinned at `pin` tokens, if given) builds at `step` (from 1)."""
    return asyncio.run(_build(history, _cuts(history), step, spec, pin))


def _change(before: Message, after: Message) -> str:
    """How the strategy changed a message: cleared (a result or input emptied) or edited."""
    for old, new in zip(before.content, after.content, strict=False):
        if type(old) is ToolResultBlock and type(new) is ToolResultBlock and new.text != old.text:
            kept = new.text.split("…")[0]
            return "truncated" if kept and old.text.startswith(kept) else "cleared"
        if type(old) is ToolUseBlock and type(new) is ToolUseBlock and new.input != old.input:
            return "cleared"
        if type(old) is TextBlock and type(new) is TextBlock and new.text != old.text:
            kept = new.text.split("…")[0]
            return "truncated" if kept and old.text.startswith(kept) else "edited"
    return "edited"


def _state(name: str, title: str = "") -> str:
    extra = f" title='{esc(title)}'" if title else ""
    return f"<span class='state {name}'{extra}>{name}</span>"


def _spec(viewer: Viewer, query: Mapping[str, str]) -> StrategySpec:
    text = query.get("strategy", "").strip()
    if not text:
        return viewer.strategy
    try:
        return parse_strategy(text)
    except SpecError as exc:
        raise BadRequest(f"strategy: {exc}") from None


def window(viewer: Viewer, reading: Reading, wanted: str, query: Mapping[str, str]) -> str:
    """`/session/ID/window?strategy=SPEC&step=N&pin=TOKENS&budget=TOKENS`."""
    row = find_row(reading, viewer, wanted)
    spec = _spec(viewer, query)
    entries = q.live_history(reading, row.session_id)
    history = [entry.message for entry in entries]
    cuts = _cuts(history)
    steps = len(cuts)
    step = whole_number(query, "step", steps)
    if step > steps:
        raise BadRequest(
            f"step must be at most {steps} (the next call of this session), not {step}"
        )
    pin = whole_number(query, "pin", 0) or None
    budget = whole_number(query, "budget", 0) or viewer.budget or spec.budget or pin
    asked = bool(query.get("strategy", "").strip()) or pin is not None
    record: UsageRecord | None = None
    why = "the address names the strategy"
    made_in = row.session_id
    if not asked and step < steps:
        record, why = _record_of(q.usage_records(reading, row.session_id), history, cuts[step - 1])
        if record is None:  # perhaps a call made before this session was forked
            made_in, record = _inherited(reading, row.session_id, history, cuts[step - 1])
    elif not asked:
        why = "the next call has not been made"
    if record is not None and record.window is not None:
        built = _recorded(history, record.window)
    else:
        built = build_window(history, step, spec, pin)
    tokens = [count_message_tokens(message) for message in built.messages]
    total = sum(tokens)
    rows = _rows(entries, built, tokens)
    current, pages = page_number(query, len(rows), ROWS_PER_PAGE)
    shown = rows[(current - 1) * ROWS_PER_PAGE : current * ROWS_PER_PAGE]
    on_page = [item.entry for item in shown if isinstance(item, _Pair) and item.entry is not None]
    link = tool_links(row.session_id, on_page)
    summarized = ""
    if row.archived:
        summarized = (
            f"<div class=note>{_state('summarized')} {number(row.archived)} archived messages "
            "were replaced by the history's summary "
            f'(<a href="{href(["session", row.session_id, "archive"])}">'
            "the archive</a>); no window includes them.</div>"
        )
    kept_query = {key: query.get(key, "") for key in ("strategy", "step", "pin", "budget")}
    nav = pager(["session", row.session_id, "window"], kept_query, current, pages)
    body = (
        session_header(viewer, row, "window")
        + _form(row.session_id, spec, asked, step, steps, pin, query.get("budget", ""))
        + _cards(built, total, budget, step, steps)
        + _source(record, spec, why, None if made_in == row.session_id else (made_in, step))
        + summarized
        + nav
        + "<table class=window><thead><tr><th class=n>#</th><th>state</th>"
        "<th>history (what the store holds)</th><th>window (what the model sees)</th></tr>"
        "</thead><tbody>" + "".join(render(link) for render in shown) + "</tbody></table>" + nav
    )
    return viewer.page(f"{row.session_id}: window", body)


def _rows(entries: list[q.Entry], built: Built, tokens: list[int]) -> list[Row]:
    """One row per history message (runs of dropped ones folded), window-only ones between."""
    by_index = {index: at for at, index in enumerate(built.indexes) if index is not None}
    pin = built.pinned.pin if built.pinned is not None else None
    rows: list[Row] = []
    placed = -1
    dropped: list[int] = []

    def flush() -> None:
        if len(dropped) > _FOLD:
            rows.append(_Gap(dropped[0], dropped[-1]))
        else:
            rows.extend(_Pair(entries[i], None, None, "dropped") for i in dropped)
        dropped.clear()

    def added_until(limit: int) -> None:
        nonlocal placed
        while placed + 1 < limit and built.indexes[placed + 1] is None:
            placed += 1
            rows.append(_Pair(None, built.messages[placed], tokens[placed], "added"))

    stable = built.pinned.stable_prefix if built.pinned is not None else 0
    for index in range(len(built.history)):
        if index == pin:
            flush()
            rows.append(_Pin(pin, stable))
        at = by_index.get(index)
        if at is None:
            dropped.append(index)
            continue
        flush()
        added_until(at)
        placed = at
        message = built.messages[at]
        original = built.history[index]
        if index in built.edited:
            state = "edited"
        else:
            state = "kept" if message is original else _change(original, message)
        rows.append(_Pair(entries[index], message, tokens[at], state))
    flush()
    added_until(len(built.messages))
    if pin is not None and pin >= len(built.history):  # pinned at the end: nothing after it yet
        rows.append(_Pin(pin, stable))
    return rows


def _no_link(call_id: str, to_result: bool) -> str:
    return ""  # the window's copy of a block: its links are on the history's


class _Pair:
    """A history message beside its version in the window (None: not in it)."""

    def __init__(
        self, entry: q.Entry | None, message: Message | None, tokens: int | None, state: str
    ) -> None:
        self.entry, self.message, self.tokens, self.state = entry, message, tokens, state

    def __call__(self, link: ToolLink) -> str:
        left = right = ""
        if self.entry is not None:
            left = message_html(
                self.entry.message,
                label=str(self.entry.index),
                anchor=f"h-{self.entry.index}",
                tokens=self.entry.tokens,
                link=link,
            )
        if self.message is not None and self.state == "kept":
            right = f"<span class=muted>as in the history, {number(self.tokens or 0)} tokens</span>"
        elif self.message is not None and self.entry is not None and self.state == "edited":
            right = (
                "<span class=muted>sent edited by the strategy (results cleared or cut); the "
                "call recorded which message, not the edit</span>"
            )
        elif self.message is not None:
            right = message_html(
                self.message,
                label="w",
                anchor="",
                tokens=self.tokens or 0,
                link=_no_link,
                ids=False,
            )
        index = "" if self.entry is None else str(self.entry.index)
        return (
            f"<tr class={self.state}><td class=n>{index}</td><td>{_state(self.state)}</td>"
            f"<td>{left}</td><td>{right}</td></tr>"
        )


class _Gap:
    """A folded run of dropped history messages."""

    def __init__(self, first: int, last: int) -> None:
        self.first, self.last = first, last

    def __call__(self, link: ToolLink) -> str:
        count = self.last - self.first + 1
        return (
            f"<tr class='dropped gap'><td class=n>{self.first}&ndash;{self.last}</td>"
            f"<td>{_state('dropped')}</td><td colspan=2>{number(count)} messages the strategy left "
            "out</td></tr>"
        )


class _Pin:
    """Where a PinnedWindow pinned: the strategy edited what is above, what follows is appended."""

    def __init__(self, pin: int, stable: int) -> None:
        self.pin, self.stable = pin, stable

    def __call__(self, link: ToolLink) -> str:
        return (
            f"<tr class=pin><td class=n>pin</td><td colspan=3><b>pin at {self.pin}</b>: the "
            f"strategy edited the history above; the messages below follow unedited. The first "
            f"{self.stable} window messages stay the same until the next re-pin.</td></tr>"
        )


Row = _Pair | _Gap | _Pin


def _source(
    record: UsageRecord | None, spec: StrategySpec, why: str, made_in: tuple[str, int] | None
) -> str:
    """Where the window comes from: the call's record (`made_in`: the session this one was
    forked from and the step, when that one made the call), or a rebuild (and why)."""
    if record is not None and record.window is not None:
        sent = record.window
        added = (
            f"; plus {number(sent.added)} message{'s' if sent.added != 1 else ''} in no history "
            "position (the loop's instructions, a strategy's notes), not shown"
            if sent.added
            else ""
        )
        estimated = record.estimated_input_tokens
        counted = "" if estimated is None else f", {number(estimated)} tokens as it counted them"
        where = ""
        if made_in is not None:
            source, step = made_in
            link = href(["session", source, "window"], {"step": str(step)})
            where = (
                f' The call was made by <a href="{link}">{esc(source)}</a> before this '
                "session was forked from it, and its usage counts there."
            )
        return (
            "<p class=note><b>As sent</b>: the window this call recorded, built by "
            f"<code>{esc(sent.strategy)}</code>{counted}{added}.{where}</p>"
        )
    return (
        f"<p class=note><b>Rebuilt</b> with <code>{esc(spec.text)}</code> "
        f"({esc(repr(spec.strategy))}): {esc(why)}.</p>"
    )


def _cards(built: Built, total: int, budget: int | None, step: int, steps: int) -> str:
    if budget is None:
        against = "no budget"
    elif total <= budget:
        against = f"{number(budget - total)} left of {number(budget)}"
    else:
        against = f"over {number(budget)} by {number(total - budget)}"
    cards = [
        ("window messages", f"{number(len(built.messages))} of {number(len(built.history))}"),
        ("window tokens", number(total)),
        ("budget", against),
        ("step", "next call" if step == steps else f"call {step} of {steps - 1}"),
    ]
    if built.pinned is not None:
        repin = "re-pinned at this step" if built.pinned.repinned else "appended since the pin"
        cards.append(("pin", f"{built.pinned.pin} ({repin})"))
    return (
        "<div class=cards>"
        + "".join(
            f"<div class=card><b>{esc(value)}</b><span class=muted>{name}</span></div>"
            for name, value in cards
        )
        + "</div>"
    )


def _form(
    session_id: str,
    spec: StrategySpec,
    asked: bool,
    step: int,
    steps: int,
    pin: int | None,
    budget: str,
) -> str:
    options = "".join(f"<option value='{esc(name)}'>" for name in STAGES)
    value = esc(spec.text) if asked else ""
    return (
        f'<form class=bar method=get action="{href(["session", session_id, "window"])}">'
        f"<label>strategy (as --strategy)<input name=strategy list=stages value='{value}' "
        "placeholder='as recorded'>"
        f"</label><datalist id=stages>{options}</datalist>"
        f"<label>step (1&ndash;{steps}; {steps} is the next call)"
        "<input name=step type=number min=1 "
        f"max={steps} value={step}></label>"
        f"<label>PinnedWindow max tokens<input name=pin type=number min=1 value='{pin or ''}' "
        "placeholder='not pinned'></label>"
        f"<label>budget<input name=budget type=number min=1 value='{esc(budget)}' "
        "placeholder='the spec&#39;s'></label><button>Build</button></form>"
        f"<details><summary>strategy names</summary><pre>{esc(spec_help())}</pre></details>"
    )
