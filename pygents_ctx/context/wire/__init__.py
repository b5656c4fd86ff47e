"""Converters between `Message` lists and the OpenAI and Anthropic wire formats.

Both directions for each format: `to_openai` / `from_openai` for the OpenAI
Chat Completions messages, `to_anthropic` / `from_anthropic` for the Anthropic
Messages API (whose system prompt is a separate parameter); `to_gemini` for
the Gemini API's `contents` and `systemInstruction` (one direction: what
`GeminiModel` sends). Image bytes travel
as base64 text; tool inputs travel as JSON (a string in OpenAI's `arguments`).

What a format has no place for follows one rule: a flag it lacks degrades into
text (an OpenAI tool message has no `is_error`, so the result's text is
prefixed with `"Error: "`), and content it has no place for is a `ValueError`
naming where it is (an image in an OpenAI tool result, a system message in the
middle of an Anthropic conversation). A message's `name` (sent to OpenAI)
and a block's `cache_control` (sent to Anthropic) are kept on the `Message`;
other extra keys of a wire message or block that a `Message` has no field for
(`detail`, `citations`, ...) are not kept. The guide page "Wire formats" has
the full table.

Every malformed input is a `ValueError` whose message names the offending
field, such as `messages[3].tool_calls[0].function.arguments`. The converters
never change their input and never share mutable data with it.
"""

from __future__ import annotations

from pygents_ctx.context.wire._anthropic import from_anthropic, to_anthropic
from pygents_ctx.context.wire._gemini import to_gemini
from pygents_ctx.context.wire._openai import from_openai, to_openai

__all__ = ["from_anthropic", "from_openai", "to_anthropic", "to_gemini", "to_openai"]
