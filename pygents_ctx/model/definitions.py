"""Tool definitions for the OpenAI, Anthropic and Gemini APIs, from each tool's metadata.

A tool's `metadata` has its name, description (the docstring's text before
its `Args:` section) and `input_schema` (with each parameter's description
and default); these functions put them in the shape each API expects.

Strict mode asks the API to constrain the model's arguments to the schema.
Both APIs then need every object closed (`additionalProperties: false`), which
these functions add. OpenAI also needs every property listed in `required`:
an optional parameter becomes required but nullable (`anyOf: [its schema,
{"type": "null"}]`), and its default moves into its description. A model then
sends `null` for a parameter it leaves out; `ModelLoop` drops such a `null`
before calling the tool, so the tool's own default applies. What strict mode
cannot express (a parameter of any type, a free-form dict, a fixed-length
tuple) is a `ValueError` naming the tool and the parameter.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from pygents_ctx.model.base import OutputSchema
from pygents_ctx.tools import Tool

__all__ = ["to_anthropic_tools", "to_gemini_tools", "to_openai_tools"]

# Both APIs accept this for a tool's name.
_NAME: Final = re.compile(r"[a-zA-Z0-9_-]{1,64}")
# Keywords strict mode has no use for: a default is described instead, an encoding is
# text; a set's uniqueness is not one it enforces (the tool's own check and conversion do).
_DROPPED: Final = ("default", "contentEncoding", "uniqueItems")
# The string formats strict mode knows; another (a Path's "path") is left out.
_STRICT_FORMATS: Final = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)


def _checked(tools: Iterable[Tool[..., Any]]) -> list[Tool[..., Any]]:
    checked: list[Tool[..., Any]] = []
    seen: set[str] = set()
    for index, item in enumerate(tools):
        if not isinstance(item, Tool):
            raise TypeError(f"tools[{index}] must be a Tool made by @tool, not {item!r}")
        name = item.metadata.name
        if not _NAME.fullmatch(name):
            raise ValueError(
                f"tool {item.key!r} has the name {name!r}, which the model APIs refuse: "
                "use 1 to 64 letters, digits, '_' or '-'"
            )
        if name in seen:
            raise ValueError(
                f"two tools are named {name!r}; a model tells tools apart by name, so rename one"
            )
        seen.add(name)
        checked.append(item)
    return checked


def to_openai_tools(
    tools: Iterable[Tool[..., Any]], *, strict: bool = False
) -> list[dict[str, Any]]:
    """The Chat Completions `tools` parameter for `tools`.

    Args:
        tools: The tools the model may call.
        strict: Ask for strict mode: objects closed, every property required,
            optional ones nullable (see the module docstring).

    Raises:
        TypeError: Something is not a `Tool`.
        ValueError: Two tools share a name, a name is not one the API takes,
            or (with `strict`) a schema strict mode cannot express.

    Examples:
        >>> from pygents_ctx import tool
        >>> @tool
        ... async def forecast(city: str, days: int = 3) -> str:
        ...     "The weather forecast."
        ...     return "sunny"
        >>> [definition] = to_openai_tools([forecast], strict=True)
        >>> definition["function"]["parameters"]["required"]
        ['city', 'days']
    """
    return [
        {
            "type": "function",
            "function": _declaration(
                item, "parameters", _parameters(item, strict=strict, all_required=True), strict
            ),
        }
        for item in _checked(tools)
    ]


def to_anthropic_tools(
    tools: Iterable[Tool[..., Any]], *, strict: bool = False
) -> list[dict[str, Any]]:
    """The Messages API `tools` parameter for `tools`.

    Args:
        tools: The tools the model may call.
        strict: Ask for strict tool use: objects closed; optional properties
            stay optional (Anthropic does not need them required).

    Raises:
        TypeError: Something is not a `Tool`.
        ValueError: Two tools share a name, a name is not one the API takes,
            or (with `strict`) a schema strict mode cannot express.

    Examples:
        >>> from pygents_ctx import tool
        >>> @tool
        ... async def outlook(city: str) -> str:
        ...     "The weather outlook."
        ...     return "sunny"
        >>> to_anthropic_tools([outlook])[0]["input_schema"]["required"]
        ['city']
    """
    return [
        _declaration(
            item, "input_schema", _parameters(item, strict=strict, all_required=False), strict
        )
        for item in _checked(tools)
    ]


def to_gemini_tools(tools: Iterable[Tool[..., Any]]) -> list[dict[str, Any]]:
    """The Gemini API `tools` parameter for `tools`: one entry of `functionDeclarations`.

    Each declaration carries the tool's JSON schema as `parametersJsonSchema`
    (the full JSON Schema, not the OpenAPI subset of `parameters`).

    Raises:
        TypeError: Something is not a `Tool`.
        ValueError: Two tools share a name, or a name is not one the API takes.

    Examples:
        >>> from pygents_ctx import tool
        >>> @tool
        ... async def outlook(city: str) -> str:
        ...     "The weather outlook."
        ...     return "sunny"
        >>> to_gemini_tools([outlook])[0]["functionDeclarations"][0]["name"]
        'outlook'
    """
    declarations = [
        _declaration(item, "parametersJsonSchema", input_schema(item), strict=False)
        for item in _checked(tools)
    ]
    return [{"functionDeclarations": declarations}] if declarations else []


def _declaration(
    item: Tool[..., Any], schema_key: str, schema: dict[str, Any], strict: bool
) -> dict[str, Any]:
    """One tool as every provider declares it: its name, its description when it has
    one, `schema` under the provider's `schema_key`, and `"strict": True` when asked."""
    declaration: dict[str, Any] = {"name": item.metadata.name}
    if item.metadata.description:
        declaration["description"] = item.metadata.description
    declaration[schema_key] = schema
    if strict:
        declaration["strict"] = True
    return declaration


def input_schema(item: Tool[..., Any]) -> dict[str, Any]:
    """The tool's parameters schema (an empty object schema when its metadata has none).

    A decorated tool always has one; `ToolMetadata` built by hand may not.
    """
    schema = item.metadata.input_schema
    return {"type": "object", "properties": {}} if schema is None else schema


def strict_schema(schema: Mapping[str, Any], where: str, *, all_required: bool) -> dict[str, Any]:
    """`schema` in the form strict mode needs, as tools get it (a copy; `where` names it in errors).

    Raises:
        ValueError: A part strict mode cannot express (a free-form value or dict, a tuple).
    """
    converted: dict[str, Any] = _strict(copy.deepcopy(dict(schema)), where, all_required)
    return converted


def _parameters(item: Tool[..., Any], *, strict: bool, all_required: bool) -> dict[str, Any]:
    schema = input_schema(item)
    if not strict:
        return copy.deepcopy(schema)
    return strict_schema(schema, f"tool {item.metadata.name!r}", all_required=all_required)


def output_json_schema(output: OutputSchema) -> dict[str, Any]:
    """`output` as OpenAI's `json_schema` formats take it (Chat Completions and Responses).

    A strict schema is sent in the form strict mode needs (see `strict_schema`).

    Raises:
        ValueError: The schema is strict but holds what strict mode cannot express.
    """
    schema = dict(output.schema)
    if output.strict:
        schema = strict_schema(schema, f"output schema {output.name!r}", all_required=True)
    spec: dict[str, Any] = {"name": output.name, "schema": schema, "strict": output.strict}
    if output.description:
        spec["description"] = output.description
    return spec


def accepts_null(schema: Mapping[str, Any]) -> bool:
    """Whether `schema` accepts `null` (an empty schema, which accepts anything, does)."""
    if not schema:
        return True
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if None in schema.get("enum", ()):
        return True
    return any(accepts_null(option) for option in schema.get("anyOf", ()))


def _refuse(path: str, what: str) -> ValueError:
    return ValueError(
        f"{path} {what}, which strict mode cannot express; give it a precise type "
        "(a TypedDict, dataclass or list instead of a free-form value) or use strict=False"
    )


def _strict(schema: Any, path: str, all_required: bool) -> Any:
    if not isinstance(schema, dict):
        return schema
    if not schema:
        raise _refuse(path, "accepts any value")
    if "prefixItems" in schema:
        raise _refuse(path, "is a fixed-length tuple")
    out = {key: value for key, value in schema.items() if key not in _DROPPED}
    if out.get("format", "date") not in _STRICT_FORMATS:
        del out["format"]
    if "default" in schema:
        note = f"Default: {schema['default']!r}."
        out["description"] = f"{schema['description']} {note}" if "description" in schema else note
    if "$defs" in out:
        out["$defs"] = {
            name: _strict(definition, f"{path} ($defs.{name})", all_required)
            for name, definition in out["$defs"].items()
        }
    if "anyOf" in out:
        out["anyOf"] = [_strict(option, path, all_required) for option in out["anyOf"]]
    if "items" in out:
        out["items"] = _strict(out["items"], f"{path} items", all_required)
    if out.get("type") == "object" or "properties" in out:
        _close_object(out, path, all_required)
    return out


def _close_object(out: dict[str, Any], path: str, all_required: bool) -> None:
    extra = out.get("additionalProperties")
    if extra is not None and extra is not False:
        raise _refuse(path, "is a dict with free-form keys")
    properties: dict[str, Any] = out.get("properties", {})
    required = list(out.get("required", ()))
    converted = {}
    for name, prop in properties.items():
        where = f"{path} parameter {name!r}" if " parameter " not in path else f"{path}.{name}"
        strict_prop = _strict(prop, where, all_required)
        if all_required and name not in required:
            if not accepts_null(prop):
                strict_prop = _nullable(strict_prop)
            required.append(name)
        converted[name] = strict_prop
    out["properties"] = converted
    out["required"] = required
    out["additionalProperties"] = False


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    # The description stays outside the anyOf, where the model reads it.
    inner = {key: value for key, value in schema.items() if key != "description"}
    nullable: dict[str, Any] = {"anyOf": [inner, {"type": "null"}]}
    if "description" in schema:
        nullable["description"] = schema["description"]
    return nullable
