"""`on_tool_error`: what an agent does with a turn whose tool fails, "raise" or "return"."""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

__all__ = ["ON_TOOL_ERROR", "OnToolError", "check_on_tool_error"]

OnToolError: TypeAlias = Literal["raise", "return"]
ON_TOOL_ERROR: Final = ("raise", "return")


def check_on_tool_error(value: object, owner: str) -> OnToolError:
    """`value` when it is `"raise"` or `"return"`.

    Raises:
        ValueError: It is anything else.
    """
    if value == "raise" or value == "return":
        return value
    raise ValueError(
        f"{owner} on_tool_error must be 'raise' (a failing turn ends the run) or 'return' "
        f"(its exception is the turn's value), not {value!r}"
    )
