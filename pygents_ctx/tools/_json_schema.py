"""Checking a call's arguments against a JSON Schema: for tools defined by a schema.

A tool made from a function is checked against its signature (`_validation`);
a tool defined by a schema (`Tool.from_schema`, an MCP server's tool) has no
signature, so its calls are checked against the schema itself. This covers
the part of JSON Schema tool schemas use: `type` (one or a list), `properties`,
`required`, `additionalProperties` (false, or a schema), `enum`, `const`,
`items`, `anyOf` / `oneOf` / `allOf`, and `$ref` to the schema's own `$defs`
(or `definitions`). Other keywords (formats, bounds, patterns) are left to the
tool's owner, which checks them anyway.

Problems are reported as for a function tool: every one at once, in one
`ToolArgumentsError`, with paths into nested values (`address.city`,
`ids[2]`). Top-level names the schema does not know follow the runtime's rule:
dropped without a word (when the schema closes the object) unless something
required is missing, in which case each is reported with the name it
probably meant; an open object keeps them, but reports one that looks like a
misspelled missing name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from pygents_ctx._suggest import closest
from pygents_ctx.errors import ArgumentProblem, ToolArgumentsError
from pygents_ctx.tools._type_checks import _invalid, _one_of, _same, missing, unknown

__all__ = ["check_object_schema", "schema_check"]

Converted = tuple[tuple[Any, ...], dict[str, Any]]

_OBJECT_KEYWORDS: Final = frozenset({"properties", "required", "additionalProperties"})
# A JSON type's test on a Python value (`bool` is not a number; 3.0 is an integer).
_TYPES: Final[dict[str, Callable[[object], bool]]] = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and v.is_integer())
    ),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list | tuple),
    "object": lambda v: isinstance(v, Mapping),
}


def check_object_schema(schema: object, owner: str) -> dict[str, Any]:
    """`schema` as a tool's input schema: a JSON object schema (a copy), or a clear error.

    Raises:
        TypeError: `schema` is not a dict.
        ValueError: It describes something other than an object.
    """
    if not isinstance(schema, Mapping):
        raise TypeError(f"{owner}: the input schema must be a dict (a JSON Schema), not {schema!r}")
    kind = schema.get("type", "object")
    if kind != "object":
        raise ValueError(
            f"{owner}: the input schema must describe an object (its arguments by name), "
            f"not type {kind!r}"
        )
    return dict(schema)


class _Checker:
    """The problems of a value against one schema, `$ref`s resolved in the root's `$defs`."""

    __slots__ = ("_definitions",)

    def __init__(self, root: Mapping[str, Any]) -> None:
        self._definitions: dict[str, Any] = {}
        for key in ("$defs", "definitions"):
            for name, schema in (root.get(key) or {}).items():
                self._definitions[f"#/{key}/{name}"] = schema

    def problems(self, schema: object, value: object, path: str) -> list[ArgumentProblem]:
        if not isinstance(schema, Mapping):  # `true` or an unusable schema: anything goes
            return [] if schema is not False else [_invalid(path, "no value", value)]
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref in self._definitions:
            found = self.problems(self._definitions[ref], value, path)
            if found:
                return found
        kinds = schema.get("type")
        if kinds is not None:
            names = [kinds] if isinstance(kinds, str) else list(kinds)
            if not any(_TYPES.get(name, _anything)(value) for name in names):
                return [_invalid(path, " or ".join(names), value)]
        if "enum" in schema and not any(_same(value, a) for a in schema["enum"]):
            return [_invalid(path, _one_of(schema["enum"]), value)]
        if "const" in schema and not _same(value, schema["const"]):
            return [_invalid(path, _one_of([schema["const"]]), value)]
        found = self._choices(schema, value, path)
        if isinstance(value, Mapping) and _OBJECT_KEYWORDS.intersection(schema):
            found += self.members(schema, value, path, strict=True)
        elif isinstance(value, list | tuple) and "items" in schema:
            for index, item in enumerate(value):
                found += self.problems(schema["items"], item, f"{path}[{index}]")
        return found

    def _choices(
        self, schema: Mapping[str, Any], value: object, path: str
    ) -> list[ArgumentProblem]:
        found: list[ArgumentProblem] = []
        for schemas in (schema.get("anyOf"), schema.get("oneOf")):
            if schemas and all(self.problems(s, value, path) for s in schemas):
                kinds = [s.get("type", "value") for s in schemas if isinstance(s, Mapping)]
                shapes = " or ".join(str(k) for k in kinds) or "one of the allowed shapes"
                found.append(_invalid(path, shapes, value))
        for part in schema.get("allOf") or ():
            found += self.problems(part, value, path)
        return found

    def members(
        self, schema: Mapping[str, Any], value: Mapping[str, Any], path: str, *, strict: bool
    ) -> list[ArgumentProblem]:
        """The problems of an object's members; `strict`: report the names it does not take."""
        prefix = f"{path}." if path else ""
        properties: Mapping[str, Any] = schema.get("properties") or {}
        absent = [name for name in schema.get("required") or () if name not in value]
        found = [missing(prefix + name) for name in absent]
        extra = schema.get("additionalProperties", True)
        what = "a field of this object" if path else "a parameter of this tool"
        for name, item in value.items():
            if name in properties:
                found += self.problems(properties[name], item, prefix + name)
            elif extra is False:
                if strict or absent:
                    found.append(unknown(prefix, name, absent, properties, what))
            elif absent and closest(name, absent) is not None:
                # An open object takes any name, but this one most likely misspells a missing one.
                found.append(unknown(prefix, name, absent, properties, what))
            elif isinstance(extra, Mapping):
                found += self.problems(extra, item, prefix + name)
        return found


def _anything(value: object) -> bool:
    return True  # a type name JSON Schema does not have: not ours to refuse


def schema_check(
    owner: str, schema: Mapping[str, Any]
) -> Callable[[tuple[Any, ...], Mapping[str, Any]], Converted | None]:
    """The argument check of a tool defined by `schema` (see the module docstring).

    The check returns None when the call fits, or the call's arguments without
    the names a closed schema does not take (dropped, as for a function tool).

    Raises (from the check):
        ToolArgumentsError: Positional arguments, or arguments the schema refuses.
    """
    checker = _Checker(schema)
    properties: Mapping[str, Any] = schema.get("properties") or {}
    closed = schema.get("additionalProperties", True) is False

    def check(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Converted | None:
        found: list[ArgumentProblem] = []
        if args:
            found.append(
                ArgumentProblem(
                    "args", "invalid", "this tool takes its arguments by name, not by position"
                )
            )
        found += checker.members(schema, kwargs, "", strict=False)
        if found:
            raise ToolArgumentsError(owner, found)
        if closed and any(name not in properties for name in kwargs):
            return (), {k: v for k, v in kwargs.items() if k in properties}
        return None

    return check
