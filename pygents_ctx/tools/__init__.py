"""Tools: the *how* of an agent, as decorated async functions.

`_tools` holds `@tool`, `Tool` and `ToolRegistry`; the rest is what a call
goes through: the schemas (`_schema`, `_docstrings`), checking and converting
the arguments (`_type_checks`, `_convert`, `_validation`, `_json_schema`,
`_content_types`) and `on_tool_error` (`_errors`).
"""

from pygents_ctx.tools._tools import IdempotencyKey, Tool, ToolMetadata, ToolRegistry, tool

__all__ = ["IdempotencyKey", "Tool", "ToolMetadata", "ToolRegistry", "tool"]
