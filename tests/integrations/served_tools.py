"""Tools the MCP serving tests serve (`pygents-ctx mcp serve tests.integrations.served_tools`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pygents_ctx import ImageBlock, TextBlock, tool
from tests.integrations.mcp_tools_server import PIXEL

__all__ = ["PUBLIC", "forecast", "picture", "refuse", "stats", "words"]


@dataclass
class Stats:
    """Counts of a text."""

    letters: int
    words: int


@tool
async def forecast(city: str, days: int = 3, unit: Literal["C", "F"] = "C") -> str:
    """The weather forecast for a city.

    Args:
        city: Where.
        days: How many days ahead.
        unit: Celsius or Fahrenheit.
    """
    return f"{city}: sunny for {days} days, 21{unit}"


@tool
async def stats(text: str) -> Stats:
    """Count the letters and words of a text."""
    return Stats(sum(c.isalpha() for c in text), len(text.split()))


@tool
async def picture() -> list[TextBlock | ImageBlock]:
    """A tiny picture."""
    return [TextBlock("one pixel"), ImageBlock("image/png", PIXEL)]


@tool
async def refuse(reason: str) -> str:
    """Always fails."""
    raise PermissionError(f"not allowed: {reason}")


@tool
async def words(text: str):  # type: ignore[no-untyped-def]
    """Each word of a text."""
    for word in text.split():
        yield word


PUBLIC = [forecast, stats]
