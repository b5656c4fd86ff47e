"""JSON Schemas of type hints, for tool definitions a model can use.

The shape is pygents': a parameter's `None` alternative is left out
(`limit: int | None = None` is `{"type": "integer"}`: a caller says None by
leaving it out), and fixed kwargs and context parameters are not listed. To
that shape these schemas add what a model needs to call a tool well (keys
pygents does not write):

- `description`: a parameter's text from the docstring's `Args` section
  (Google, NumPy or reST style) or from its `Annotated` metadata (a string, or
  an object with a `description`, such as pydantic's `Field`), which wins;
  also a nested dataclass's or `TypedDict`'s own and its fields', and the
  output's from the `Returns` section;
- `default`: a parameter's (or a dataclass field's) default, when JSON can
  hold it;
- `type` beside the `enum` of a `Literal` or `Enum` whose values share one;
- `$defs` at the root, where a pydantic model's definitions, and a type that
  refers to itself, are kept (`{"$ref": "#/$defs/Name"}`).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime
import decimal
import enum
import inspect
import math
import pathlib
import types
import typing
import uuid
from collections.abc import Mapping
from typing import Any, Literal, Union

from typing_extensions import is_typeddict

from pygents_ctx.tools._docstrings import Docstring, parse_docstring
from pygents_ctx.tools._type_checks import type_hints

__all__ = ["schema_for", "signature_schemas", "undescribable"]

_PRIMITIVES: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    bytes: {"type": "string", "contentEncoding": "base64"},
    datetime.datetime: {"type": "string", "format": "date-time"},
    datetime.date: {"type": "string", "format": "date"},
    datetime.time: {"type": "string", "format": "time"},
    uuid.UUID: {"type": "string", "format": "uuid"},
    # Its text, which is exact (a JSON number may not be); a number is accepted too.
    decimal.Decimal: {"type": "string", "pattern": r"^-?\d+(\.\d+)?$"},
}
_PATH: dict[str, Any] = {"type": "string", "format": "path"}
_ARRAYS = (list, tuple, set, frozenset, collections.abc.Sequence, collections.abc.Iterable)
_SETS = (set, frozenset, collections.abc.Set, collections.abc.MutableSet)
_MAPPINGS = (dict, collections.abc.Mapping)
_GENERATORS = (collections.abc.AsyncGenerator, collections.abc.AsyncIterator)
_REQUIRED_MARKS = {typing.Required: True, typing.NotRequired: False}
_JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"))
_NO_DEFAULT: Any = object()


def _json_value(value: object) -> Any:
    """`value` as JSON can hold it (an enum member as its value), or `_NO_DEFAULT`."""
    if isinstance(value, enum.Enum):
        return _json_value(value.value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else _NO_DEFAULT
    if isinstance(value, list | tuple):
        items = [_json_value(item) for item in value]
        return _NO_DEFAULT if any(item is _NO_DEFAULT for item in items) else items
    if isinstance(value, Mapping) and all(isinstance(key, str) for key in value):
        entries = {key: _json_value(item) for key, item in value.items()}
        return _NO_DEFAULT if any(item is _NO_DEFAULT for item in entries.values()) else entries
    return _NO_DEFAULT


def _annotated_description(metadata: tuple[Any, ...]) -> str | None:
    """The text an `Annotated` hint's metadata gives (the last one wins, as in pydantic)."""
    found = None
    for entry in metadata:
        if isinstance(entry, str):
            found = entry
            continue
        text = getattr(entry, "description", None) or getattr(entry, "documentation", None)
        if isinstance(text, str):
            found = text
    return found


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {}
    for kind, name in _JSON_TYPES:
        if values and all(type(v) is kind or (kind is str and isinstance(v, str)) for v in values):
            schema["type"] = name
            break
    schema["enum"] = values
    return schema


def _class_description(cls: type) -> Docstring:
    """A class's docstring, unless it is the one `dataclasses` writes (its signature)."""
    doc = cls.__doc__
    if not doc or doc.startswith(f"{cls.__name__}("):
        return Docstring()
    return parse_docstring(doc)


class _Builder:
    """Schemas of hints, with the `$defs` they need gathered for the root."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}
        self._building: set[type] = set()
        self._recursive: dict[type, str] = {}
        self.undescribed: list[Any] = []  # hints given `{}` for want of a schema, not as Any

    def schema(self, hint: Any) -> dict[str, Any]:
        """Describe one type hint; `{}` (anything) where it cannot be described."""
        if hint is Any or hint is object or hint is inspect.Parameter.empty:
            return {}
        if hint in _PRIMITIVES:
            return dict(_PRIMITIVES[hint])
        if isinstance(hint, typing.NewType):
            return self.schema(hint.__supertype__)
        origin = typing.get_origin(hint)
        args = typing.get_args(hint)
        if origin is typing.Annotated:
            schema = self.schema(args[0])
            description = _annotated_description(hint.__metadata__)
            return schema if description is None else {**schema, "description": description}
        if origin is Union or isinstance(hint, types.UnionType):
            return {"anyOf": [self.schema(a) for a in args]}
        if origin is Literal:
            return _enum_schema([_json_value(a) for a in args])
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return _enum_schema([_json_value(m.value) for m in hint])
        if isinstance(hint, type) and issubclass(hint, pathlib.PurePath):
            return dict(_PATH)
        if origin in _ARRAYS or hint in _ARRAYS:
            if origin is tuple and args and args[-1] is not Ellipsis:
                items = [self.schema(a) for a in args]
                n = len(items)
                return {"type": "array", "prefixItems": items, "minItems": n, "maxItems": n}
            array: dict[str, Any] = {"type": "array", "items": self.schema(args[0]) if args else {}}
            if (origin or hint) in _SETS:
                array["uniqueItems"] = True
            return array
        if origin in _MAPPINGS or hint in _MAPPINGS:
            return {"type": "object", "additionalProperties": self.schema(args[1]) if args else {}}
        if callable(getattr(hint, "model_json_schema", None)):
            return self._model(hint)
        if (is_typeddict(hint) or dataclasses.is_dataclass(hint)) and isinstance(hint, type):
            return self._object(hint)
        self.undescribed.append(hint)
        return {}

    def _model(self, model: Any) -> dict[str, Any]:
        """A pydantic model's own schema, its definitions moved to the root."""
        schema: dict[str, Any] = dict(model.model_json_schema())
        for name, definition in schema.pop("$defs", {}).items():
            self.defs.setdefault(name, definition)
        return schema

    def _object(self, cls: type) -> dict[str, Any]:
        name = self._recursive.get(cls)
        if name is not None and (cls in self._building or name in self.defs):
            return {"$ref": f"#/$defs/{name}"}
        if cls in self._building:  # it refers to itself: defined once, at the root
            name = self._recursive[cls] = self._def_name(cls)
            return {"$ref": f"#/$defs/{name}"}
        self._building.add(cls)
        try:
            schema = self._fields(cls)
        finally:
            self._building.discard(cls)
        name = self._recursive.get(cls)
        if name is None:
            return schema
        self.defs[name] = schema
        return {"$ref": f"#/$defs/{name}"}

    def _def_name(self, cls: type) -> str:
        name, number = cls.__name__, 2
        while name in self.defs or name in self._recursive.values():
            name, number = f"{cls.__name__}{number}", number + 1
        return name

    def _fields(self, cls: type) -> dict[str, Any]:
        hints = type_hints(cls)
        doc = _class_description(cls)
        properties: dict[str, Any] = {}
        required: list[str] = []
        if is_typeddict(cls):
            # __required_keys__ is computed before string annotations are resolved, so
            # with `from __future__ import annotations` it misses Required/NotRequired.
            total = getattr(cls, "__total__", True)
            for name, hint in hints.items():
                is_required = total
                while typing.get_origin(hint) in _REQUIRED_MARKS:
                    is_required = _REQUIRED_MARKS[typing.get_origin(hint)]
                    hint = typing.get_args(hint)[0]
                properties[name] = self.field(hint, doc.parameters.get(name))
                if is_required:
                    required.append(name)
        else:
            for f in dataclasses.fields(cls):
                # A default factory is not called here: it may do anything.
                properties[f.name] = self.field(
                    hints.get(f.name, Any), doc.parameters.get(f.name), f.default
                )
                if f.default is f.default_factory is dataclasses.MISSING:
                    required.append(f.name)
        schema: dict[str, Any] = {"type": "object", "title": cls.__name__}
        if doc.description:
            schema["description"] = doc.description
        schema["properties"] = properties
        if required:
            schema["required"] = required
        return schema

    def field(
        self, hint: Any, documented: str | None, default: object = dataclasses.MISSING
    ) -> dict[str, Any]:
        """A parameter's or field's schema: its type, description and default."""
        schema = self.schema(hint)
        if documented and "description" not in schema:
            schema = {**schema, "description": documented}
        # A None default says only that the value may be left out, which `required`
        # says: `{"type": "integer", "default": null}` would offer a value the type refuses.
        if (
            default is not None
            and default is not dataclasses.MISSING
            and default is not inspect.Parameter.empty
        ):
            value = _json_value(default)
            if value is not _NO_DEFAULT:
                schema = {**schema, "default": value}
        return schema

    def rooted(self, schema: dict[str, Any]) -> dict[str, Any]:
        """`schema` with the definitions it refers to, at its root."""
        return {**schema, "$defs": self.defs} if self.defs else schema


def schema_for(hint: Any) -> dict[str, Any]:
    """Describe one type hint; `{}` (anything) where it cannot be described."""
    builder = _Builder()
    return builder.rooted(builder.schema(hint))


def undescribable(hint: Any) -> list[Any]:
    """The hints inside `hint` that no JSON schema describes (`schema_for` gives them `{}`,
    as for `Any`, which is not among them), in the order met."""
    builder = _Builder()
    builder.schema(hint)
    return builder.undescribed


def signature_schemas(
    fn: Any,
    *,
    skip: frozenset[str],
    generator: bool,
    hints: Mapping[str, Any] | None = None,
    doc: Docstring | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """`(input_schema, output_schema)` of a tool function (see the module docstring).

    Parameters in `skip` (fixed kwargs, injected context) are left out of the
    input: the caller does not provide them. A parameter's `None` alternative
    is left out too. A generator's output schema is the schema of one yielded
    item; a function without a return hint, or returning None, has none
    (`None`). `hints` (`type_hints(fn)`) and `doc` (its parsed docstring) are
    worked out here when not given.
    """
    hints = type_hints(fn) if hints is None else hints
    doc = parse_docstring(fn.__doc__) if doc is None else doc
    builder = _Builder()
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, param in inspect.signature(fn).parameters.items():
        if name in skip or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        hint = _without_none(hints.get(name, Any))
        properties[name] = builder.field(hint, doc.parameters.get(name), param.default)
        if param.default is param.empty:
            required.append(name)
    input_schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        input_schema["required"] = required
    input_schema = builder.rooted(input_schema)
    returned = hints.get("return")
    if generator and returned is not None:
        returned = _without_annotated(returned)
        item_args = typing.get_args(returned)
        returned = item_args[0] if typing.get_origin(returned) in _GENERATORS and item_args else Any
    if returned is None or _without_annotated(returned) is type(None):
        return input_schema, None
    output = _Builder()
    output_schema = output.field(returned, doc.returns)
    return input_schema, output.rooted(output_schema)


def _without_annotated(hint: Any) -> Any:
    return typing.get_args(hint)[0] if typing.get_origin(hint) is typing.Annotated else hint


def _without_none(hint: Any) -> Any:
    """`hint` without its `None` alternative (`X | None` is `X`), `Annotated` kept."""
    if typing.get_origin(hint) is typing.Annotated:
        inner = _without_none(hint.__origin__)
        return typing.Annotated[(inner, *hint.__metadata__)]
    if typing.get_origin(hint) is Union or isinstance(hint, types.UnionType):
        kept = tuple(a for a in typing.get_args(hint) if a is not type(None))
        if len(kept) == 1:
            return kept[0]
        if kept and len(kept) < len(typing.get_args(hint)):
            return Union[kept]  # noqa: UP007 (built from a tuple at run time)
    return hint
