"""How the command line prints: one-line renderings of messages, and aligned tables."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TextIO

import orjson

from pygents_ctx.context.messages import (
    ContentBlock,
    ImageBlock,
    Message,
    ReasoningBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

__all__ = [
    "CLIP",
    "Output",
    "clip",
    "one_line",
    "output",
    "plural",
    "render_block",
    "render_created",
    "render_message",
    "table",
]

CLIP: Final = 100  # characters of one block's text in a one-line rendering
_ELLIPSIS: Final = "…"
_GAP: Final = "  "  # between table columns


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, the last one `…` when something was cut.

    Examples:
        >>> clip("abcdef", 4)
        'abc…'
    """
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)] + _ELLIPSIS if limit > 0 else ""


def one_line(text: str, limit: int = CLIP) -> str:
    """`text` on one line (each run of whitespace becomes one space), clipped to `limit`.

    Examples:
        >>> one_line("first line\\n\\n  second line", 15)
        'first line sec…'
    """
    return clip(" ".join(text.split()), limit)


def plural(count: int, word: str) -> str:
    """`"1 message"`, `"2 messages"`."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _image(block: ImageBlock) -> str:
    return f"[image {block.media_type}, {plural(len(block.data), 'byte')}]"


def _result(block: ToolResultBlock) -> str:
    head = f"result id={block.tool_use_id}{' error' if block.is_error else ''}"
    if block.offloaded is not None:  # the stub's note names the handle
        head += f" offloaded ({plural(block.offloaded.chars, 'char')})"
    text = one_line(block.text)
    images = (
        0
        if isinstance(block.content, str)
        else sum(isinstance(part, ImageBlock) for part in block.content)
    )
    parts = [f"{head}:" if text else head]
    if text:
        parts.append(text)
    if images:
        parts.append(f"[+{plural(images, 'image')}]")
    return " ".join(parts)


def render_block(block: ContentBlock) -> str:
    """One block on one line: text as is, a call as `call name(args) id=...`, a result by id.

    Examples:
        >>> render_block(ToolUseBlock("c1", "weather", {"city": "Oslo"}))
        'call weather({"city":"Oslo"}) id=c1'
        >>> render_block(ToolResultBlock("c1", "boom", is_error=True))
        'result id=c1 error: boom'
        >>> render_block(ThinkingBlock("Oslo is the capital.", signature="sig"))
        'thinking: Oslo is the capital.'
        >>> render_block(ReasoningBlock("rs_1", ["Check the map."], "gAAAA...", model="o3"))
        'reasoning (encrypted, o3): Check the map. id=rs_1'
    """
    if isinstance(block, TextBlock):
        return one_line(block.text)
    if isinstance(block, ToolUseBlock):
        # A stored call's input is JSON: the store would not have taken it otherwise.
        arguments = orjson.dumps(block.input).decode()
        return f"call {block.name}({one_line(arguments)}) id={block.id}"
    if isinstance(block, ToolResultBlock):
        return _result(block)
    if isinstance(block, ThinkingBlock):
        return f"thinking: {one_line(block.thinking)}"
    if isinstance(block, RedactedThinkingBlock):
        return "thinking (redacted)"
    if isinstance(block, ReasoningBlock):
        return _reasoning(block)
    return _image(block)


def _reasoning(block: ReasoningBlock) -> str:
    sealed = "encrypted" if block.encrypted_content is not None else "not encrypted"
    made = f", {block.model}" if block.model else ""
    summary = one_line(" ".join(block.summary))
    return f"reasoning ({sealed}{made}){': ' + summary if summary else ''} id={block.id}"


def shown_role(message: Message) -> str:
    """The role to show: `tool` for a message of tool results only, else the message's own.

    The providers' formats carry tool results in a user message (Anthropic)
    or in messages of their own (OpenAI's `tool` role); a person reading a
    transcript wants to see them as tool output, not as something the user said.
    """
    blocks = message.content
    if message.role == "user" and blocks and all(isinstance(b, ToolResultBlock) for b in blocks):
        return "tool"
    return message.role


def render_message(message: Message) -> str:
    """A message's blocks on one line, joined by ` | ` (`(empty)` when it has none)."""
    if not message.content:
        return "(empty)"
    return " | ".join(render_block(block) for block in message.content)


def render_created(created_at: str) -> str:
    """An ISO 8601 UTC time as `YYYY-MM-DD HH:MM:SS`; `-` when the store recorded none.

    Examples:
        >>> render_created("2025-01-15T10:30:00.123456+00:00")
        '2025-01-15 10:30:00'
        >>> render_created("")
        '-'
    """
    if not created_at:
        return "-"
    return created_at[:19].replace("T", " ")


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: Collection[int] = (),
    width: int | None = None,
) -> list[str]:
    """Lines of an aligned table: a header, then one line per row.

    Columns are separated by two spaces; the last one is not padded, so lines
    carry no trailing spaces. With a `width`, each line is clipped to it (the
    last column, usually the free text, is what gets cut).

    Args:
        headers: The column titles.
        rows: The cells, one sequence per row, as strings.
        right: Indexes of the columns aligned right (numbers).
        width: The most characters per line, or None for no limit.

    Examples:
        >>> print("\\n".join(table(["#", "role"], [["0", "user"], ["10", "assistant"]], right={0})))
         #  role
         0  user
        10  assistant
    """
    sizes = [len(header) for header in headers]
    for row in rows:
        sizes = [max(size, len(cell)) for size, cell in zip(sizes, row, strict=True)]
    last = len(headers) - 1
    lines = []
    for row in [headers, *rows]:
        cells = [
            cell.rjust(size) if index in right else cell if index == last else cell.ljust(size)
            for index, (cell, size) in enumerate(zip(row, sizes, strict=True))
        ]
        line = _GAP.join(cells)
        lines.append(line if width is None else clip(line, width))
    return lines


@dataclass(frozen=True, slots=True)
class Output:
    """Where a command prints: a stream, the width to clip lines to, and JSON or text."""

    stream: TextIO
    width: int | None  # clip lines to this many characters (a terminal), or None
    as_json: bool

    def lines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.stream.write(line + "\n")

    def table(
        self, headers: Sequence[str], rows: Sequence[Sequence[str]], right: Collection[int]
    ) -> None:
        self.lines(table(headers, rows, right=right, width=self.width))

    def json(self, data: Any) -> None:
        self.stream.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")


def output(as_json: bool) -> Output:
    """Print to stdout: lines clipped to the terminal's width when it is one, else not clipped."""
    stream = sys.stdout
    width = shutil.get_terminal_size().columns if stream.isatty() else None
    return Output(stream, width, as_json)
