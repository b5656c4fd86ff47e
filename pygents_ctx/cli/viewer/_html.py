"""The viewer's HTML: the page frame and its CSS, escaping, links, pagers and message blocks.

Everything a store holds reaches the page through `esc` (text) or `href`
(links): a message that says `<script>` shows those characters and runs nothing.
Images are inline `data:` URLs of the raster types a browser shows safely.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, urlencode

import orjson

from pygents_ctx.cli._render import shown_role
from pygents_ctx.context.messages import (
    ContentBlock,
    ImageBlock,
    Message,
    OffloadedResult,
    ReasoningBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

__all__ = [
    "Html",
    "ToolLink",
    "esc",
    "href",
    "image_html",
    "message_html",
    "number",
    "page",
    "pager",
    "table_html",
    "when",
]

_SHOWN_CHARS: Final = 20_000  # of one text block; the rest is said, not shown
_IMAGE_TYPES: Final = re.compile(r"image/(png|jpeg|gif|webp)")

_CSS: Final = """
:root { --fg:#1d2330; --muted:#667085; --line:#e4e7ec; --bg:#f8f9fb; --accent:#2f5bd3;
  --kept:#e7f6ec; --dropped:#f2f4f7; --edited:#fff4dc; --summary:#ece8fd; --error:#fde8e8; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, sans-serif; color:var(--fg); background:var(--bg); }
header { display:flex; gap:1.5em; align-items:baseline; padding:.7em 1.5em;
  background:#fff; border-bottom:1px solid var(--line); }
header .brand { font-weight:700; color:var(--fg); text-decoration:none; }
header .db { margin-left:auto; color:var(--muted); font-size:12px; }
main { padding:1em 1.5em 3em; max-width:1400px; }
a { color:var(--accent); }
h1 { font-size:20px; margin:.3em 0 .2em; word-break:break-all; }
h2 { font-size:16px; margin:1.4em 0 .5em; }
.muted, .note { color:var(--muted); }
table { border-collapse:collapse; background:#fff; width:100%; }
th, td { text-align:left; padding:.35em .6em; border-bottom:1px solid var(--line);
  vertical-align:top; }
th { font-weight:600; background:#fafbfc; }
td.n, th.n { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
.tabs { display:flex; gap:.3em; margin:.6em 0 1em; }
.tabs a { padding:.3em .8em; border:1px solid var(--line); border-radius:6px;
  background:#fff; text-decoration:none; }
.tabs a.on { background:var(--accent); color:#fff; border-color:var(--accent); }
.pager { margin:.8em 0; display:flex; gap:.8em; align-items:center; }
form.bar { display:flex; gap:.6em; align-items:end; flex-wrap:wrap; margin:.6em 0 1em; }
form.bar label { display:flex; flex-direction:column; font-size:12px; color:var(--muted); }
input, select, button { font:inherit; padding:.25em .4em; }
.msg { background:#fff; border:1px solid var(--line); border-radius:8px; margin:.5em 0;
  padding:.5em .8em; }
.msg > .head { display:flex; gap:.8em; color:var(--muted); font-size:12px; }
.msg > .head .role { font-weight:700; color:var(--fg); text-transform:uppercase; }
.msg.user { border-left:4px solid #4c8bf5; } .msg.assistant { border-left:4px solid #16a34a; }
.msg.system { border-left:4px solid #a3a3a3; } .msg.tool { border-left:4px solid #d97706; }
.msg.summary { background:var(--summary); }
.block { margin:.35em 0; }
.text { white-space:pre-wrap; word-wrap:break-word; }
pre { margin:.2em 0; padding:.4em .6em; background:#f4f5f7; border-radius:6px;
  white-space:pre-wrap; word-wrap:break-word; font-size:12.5px; }
.tag { display:inline-block; font-size:11px; font-weight:700; padding:0 .45em;
  border-radius:4px; background:#eef1f6; color:#344054; margin-right:.3em; }
.call .tag { background:#e0ebff; } .result .tag { background:#e3f5e9; }
.thinking .tag { background:#f1e8ff; }
.result.error .tag { background:var(--error); color:#b42318; }
img.inline { max-width:320px; max-height:240px; border:1px solid var(--line);
  border-radius:4px; display:block; margin:.3em 0; }
.run { margin:1em 0 .3em; padding:.2em .6em; border-left:3px solid var(--accent);
  color:var(--accent); font-size:12px; font-weight:600; background:#eef3ff; }
.state { font-size:11px; font-weight:700; padding:.05em .5em; border-radius:10px;
  white-space:nowrap; }
.state.kept { background:var(--kept); color:#067647; }
.state.dropped { background:var(--dropped); color:#667085; }
.state.edited, .state.cleared, .state.truncated { background:var(--edited); color:#93370d; }
.state.summarized, .state.summary, .state.added { background:var(--summary); color:#5925dc; }
tr.dropped td { color:#98a2b3; } tr.gap td { text-align:center; background:#fafbfc; }
table.window { table-layout:fixed; }
table.window th:nth-child(1) { width:5em; } table.window th:nth-child(2) { width:7em; }
table.window .msg { margin:0; } table.window pre { max-height:7.5em; overflow:auto; }
pre { max-height:30em; overflow:auto; }
.cards { display:flex; gap:1em; flex-wrap:wrap; margin:.6em 0 1em; }
.card { background:#fff; border:1px solid var(--line); border-radius:8px; padding:.6em 1em;
  min-width:150px; }
.card b { display:block; font-size:18px; }
.pin { border-top:3px dashed #7a5af8; }
.chart { background:#fff; border:1px solid var(--line); border-radius:8px; padding:.5em; }
.legend span { margin-right:1.2em; font-size:12px; }
.legend i { display:inline-block; width:10px; height:10px; margin-right:.3em; }
.error-page { background:#fff; border:1px solid #f4c7c3; border-left:4px solid #d92d20;
  border-radius:8px; padding:1em 1.2em; }
"""


@dataclass(frozen=True, slots=True)
class Html:
    """Markup that is already safe to put in a page (as opposed to text, which `esc` makes so)."""

    text: str


def esc(text: object) -> str:
    """`text` with `&`, `<`, `>` and quotes escaped for HTML text and attributes.

    Examples:
        >>> esc('<script>alert("x")</script>')
        '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;'
    """
    return html.escape(str(text), quote=True)


def href(path: Iterable[str], query: Mapping[str, object] | None = None, anchor: str = "") -> str:
    """A link to the viewer's page at the `path` segments, escaped for an attribute.

    Examples:
        >>> href(["session", "a/b"], {"page": 2}, "m-3")
        '/session/a%2Fb?page=2#m-3'
    """
    url = "/" + "/".join(quote(segment, safe="") for segment in path)
    kept = {key: value for key, value in (query or {}).items() if value not in (None, "")}
    if kept:
        url += "?" + urlencode(kept)
    if anchor:
        url += "#" + quote(anchor, safe="")
    return esc(url)


def number(value: int | float) -> str:
    """A count with thousands separators: `12,345`."""
    return f"{value:,}"


def when(iso: str) -> str:
    """An ISO 8601 time as `YYYY-MM-DD HH:MM:SS` (UTC, as stored); `-` for none."""
    return iso[:19].replace("T", " ") if iso else "-"


def page(title: str, body: str, *, source: str, section: str = "") -> str:
    """A whole page: the header (with the database's name), then `body`."""
    nav = " ".join(
        f'<a href="{link}"{" class=on" if name == section else ""}>{label}</a>'
        for name, link, label in (("sessions", "/", "Sessions"), ("memory", "/memory", "Memory"))
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)} · pygents-ctx view</title><style>{_CSS}</style></head><body>"
        f'<header><a class=brand href="/">pygents-ctx view</a><nav>{nav}</nav>'
        f"<span class=db>{esc(source)} · read-only</span></header>"
        f"<main>{body}</main></body></html>"
    )


def pager(path: list[str], query: Mapping[str, object], current: int, pages: int) -> str:
    """First / previous / `page N of M` / next / last links (pages count from 1)."""
    if pages <= 1:
        return ""

    def link(to: int, label: str) -> str:
        if to < 1 or to > pages or to == current:
            return f"<span class=muted>{label}</span>"
        return f'<a href="{href(path, {**query, "page": to})}" rel=nofollow>{label}</a>'

    return (
        "<nav class=pager>"
        f"{link(1, '« first')}{link(current - 1, '&lsaquo; previous')}"
        f"<span>page {current} of {number(pages)}</span>"
        f"{link(current + 1, 'next &rsaquo;')}{link(pages, 'last »')}</nav>"
    )


def table_html(headers: list[str], rows: Iterable[list[str]], numeric: Collection[int] = ()) -> str:
    """A table of cells that are already HTML; the `numeric` columns align right."""
    head = "".join(
        f"<th{' class=n' if index in numeric else ''}>{esc(title)}</th>"
        for index, title in enumerate(headers)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f"<td{' class=n' if index in numeric else ''}>{cell}</td>"
            for index, cell in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def image_html(media_type: str, data: bytes) -> str:
    """An inline `<img>` for the raster types browsers show; a note for anything else."""
    if _IMAGE_TYPES.fullmatch(media_type):
        encoded = base64.b64encode(data).decode()
        return (
            f'<img class=inline alt="{esc(media_type)}, {number(len(data))} bytes" '
            f'src="data:{media_type};base64,{encoded}">'
        )
    return f"<span class=tag>{esc(media_type)}</span> {number(len(data))} bytes (not shown)"


def _text_html(text: str) -> str:
    if len(text) <= _SHOWN_CHARS:
        return esc(text)
    hidden = len(text) - _SHOWN_CHARS
    return (
        esc(text[:_SHOWN_CHARS]) + f"<span class=muted> … {number(hidden)} more characters</span>"
    )


# (call id, to the result?) -> the link's href (already escaped), or "" for no link.
ToolLink = Callable[[str, bool], str]


def _block_html(
    block: ContentBlock, link: ToolLink, ids: bool, subagents: Mapping[str, str | None]
) -> str:
    if isinstance(block, TextBlock):
        return f"<div class='block text'>{_text_html(block.text)}</div>"
    if isinstance(block, ImageBlock):
        return f"<div class=block>{image_html(block.media_type, block.data)}</div>"
    if isinstance(block, ToolUseBlock):
        arguments = orjson.dumps(block.input, option=orjson.OPT_INDENT_2).decode()
        target = link(block.id, True)
        to_result = f' <a class=to-result href="{target}">result ↓</a>' if target else ""
        return (
            f"<div class='block call'{_id('call-' + block.id, ids)}><span class=tag>call</span>"
            f"<b>{esc(block.name)}</b> <span class=muted>id {esc(block.id)}</span>{to_result}"
            f"<pre>{_text_html(arguments)}</pre></div>"
        )
    if isinstance(block, ThinkingBlock):
        signed = "signed" if block.signature else "unsigned"
        return (
            f"<div class='block thinking'><span class=tag>thinking</span>"
            f"<span class=muted>{signed}</span><div class=text>{_text_html(block.thinking)}</div>"
            "</div>"
        )
    if isinstance(block, RedactedThinkingBlock):
        return (
            "<div class='block thinking'><span class=tag>redacted thinking</span>"
            f"<span class=muted>{number(len(block.data))} characters, encrypted</span></div>"
        )
    if isinstance(block, ReasoningBlock):
        return _reasoning_html(block)
    return _result_html(block, link, ids, subagents)


def _reasoning_html(block: ReasoningBlock) -> str:
    sealed = (
        "not encrypted"
        if block.encrypted_content is None
        else f"{number(len(block.encrypted_content))} characters, encrypted"
    )
    made = f" by {esc(block.model)}" if block.model else ""
    summary = "".join(f"<div class=text>{_text_html(text)}</div>" for text in block.summary)
    return (
        f"<div class='block thinking'><span class=tag>reasoning</span>"
        f"<span class=muted>id {esc(block.id)}{made}, {sealed}</span>{summary}</div>"
    )


def _id(anchor: str, ids: bool) -> str:
    return f' id="{esc(anchor)}"' if ids else ""


def _result_html(
    block: ToolResultBlock, link: ToolLink, ids: bool, subagents: Mapping[str, str | None]
) -> str:
    target = link(block.tool_use_id, False)
    to_call = f' <a class=to-call href="{target}">call ↑</a>' if target else ""
    if block.tool_use_id in subagents:
        to_call += _subagent_html(subagents[block.tool_use_id])
    error = " error" if block.is_error else ""
    parts = [TextBlock(block.content)] if isinstance(block.content, str) else list(block.content)
    inner = "".join(
        f"<pre>{_text_html(part.text)}</pre>"
        if isinstance(part, TextBlock)
        else image_html(part.media_type, part.data)
        for part in parts
    )
    return (
        f"<div class='block result{error}'{_id('result-' + block.tool_use_id, ids)}>"
        f"<span class=tag>result{error}</span><span class=muted>for {esc(block.tool_use_id)}"
        f"</span>{to_call}{_offloaded_html(block.offloaded)}{inner}</div>"
    )


def _subagent_html(session: str | None) -> str:
    """A sub-agent call's link to the sub-agent's transcript (or why there is none)."""
    if session is None:
        return " <span class=tag>sub-agent</span><span class=muted>transcript not kept</span>"
    return (
        f' <span class=tag>sub-agent</span><a class=subagent href="{href(["session", session])}">'
        f"its transcript &rarr;</a>"
    )


def _offloaded_html(stub: OffloadedResult | None) -> str:
    """What the viewer says of an offloaded result: its size, and a link to the whole text."""
    if stub is None:
        return ""
    return (
        f" <span class=tag>offloaded</span><span class=muted>{number(stub.chars)} characters, "
        f"~{number(stub.tokens)} tokens, {esc(stub.media_type)}</span> "
        f'<a class=offloaded href="{href(["memory", "blobs", stub.handle])}">'
        "the whole result &rarr;</a>"
    )


def message_html(
    message: Message,
    *,
    label: str,
    anchor: str,
    tokens: int,
    link: ToolLink,
    badges: str = "",
    summary: bool = False,
    ids: bool = True,
    subagents: Mapping[str, str | None] | None = None,
) -> str:
    """A message as a card: its role, its place and tokens, `badges`, then each typed block.

    With `ids`, the card and its calls and results carry ids (`anchor`,
    `call-ID`, `result-ID`) that links point at; a second copy of a message on
    the same page (the window's) leaves them out. The result of a call that ran
    a sub-agent (a key of `subagents`) links to the sub-agent's transcript.
    """
    ran = subagents or {}
    blocks = "".join(_block_html(block, link, ids, ran) for block in message.content) or (
        "<div class='block muted'>(empty)</div>"
    )
    role = shown_role(message)
    kind = f"msg {esc(role)}{' summary' if summary else ''}"
    return (
        f'<article class="{kind}"{_id(anchor, ids and bool(anchor))}><div class=head>'
        f"<span class=role>{esc(role)}</span><span>#{esc(label)}</span>"
        f"<span>{number(tokens)} tokens</span>{badges}</div>{blocks}</article>"
    )
