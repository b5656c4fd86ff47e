"""JSON-Schema-like descriptions of type hints, for tool definitions."""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime
import enum
import inspect
import types
import typing
from typing import Any, Literal, Union

from typing_extensions import is_typeddict

__all__ = ["schema_for", "signature_schemas"]

_PRIMITIVES: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    bytes: {"type": "string", "contentEncoding": "base64"},
    datetime.datetime: {"type": "string", "format": "date-time"},
    datetime.date: {"type": "string", "format": "date"},
}
_ARRAYS = (list, tuple, set, frozenset, collections.abc.Sequence, collections.abc.Iterable)
_MAPPINGS = (dict, collections.abc.Mapping)
_GENERATORS = (collections.abc.AsyncGenerator, collections.abc.AsyncIterator)


def schema_for(hint: Any) -> dict[str, Any]:
    """Describe one type hint; `{}` (anything) where it cannot be described."""
    if hint is Any or hint is inspect.Parameter.empty:
        return {}
    if hint in _PRIMITIVES:
        return dict(_PRIMITIVES[hint])
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        return schema_for(args[0])
    if origin is Union or isinstance(hint, types.UnionType):
        return {"anyOf": [schema_for(a) for a in args]}
    if origin is Literal:
        return {"enum": list(args)}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [m.value for m in hint]}
    if origin in _ARRAYS or hint in _ARRAYS:
        if origin is tuple and args and args[-1] is not Ellipsis:
            return {"type": "array", "prefixItems": [schema_for(a) for a in args]}
        return {"type": "array", "items": schema_for(args[0]) if args else {}}
    if origin in _MAPPINGS or hint in _MAPPINGS:
        return {"type": "object", "additionalProperties": schema_for(args[1]) if args else {}}
    if callable(getattr(hint, "model_json_schema", None)):
        schema: dict[str, Any] = hint.model_json_schema()
        return schema
    if is_typeddict(hint):
        return _typed_dict(hint)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        hints = typing.get_type_hints(hint)
        fields = dataclasses.fields(hint)
        required = [
            f.name
            for f in fields
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        return _object(hint.__name__, {f.name: hints.get(f.name, Any) for f in fields}, required)
    return {}


_REQUIRED_MARKS = {typing.Required: True, typing.NotRequired: False}


def _typed_dict(hint: Any) -> dict[str, Any]:
    # __required_keys__ is computed before string annotations are resolved, so
    # with `from __future__ import annotations` it misses Required/NotRequired.
    hints = typing.get_type_hints(hint, include_extras=True)
    total = getattr(hint, "__total__", True)
    properties, required = {}, []
    for name, annotation in hints.items():
        is_required = total
        while typing.get_origin(annotation) in _REQUIRED_MARKS:
            is_required = _REQUIRED_MARKS[typing.get_origin(annotation)]
            annotation = typing.get_args(annotation)[0]
        properties[name] = annotation
        if is_required:
            required.append(name)
    return _object(hint.__name__, properties, required)


def _object(title: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "title": title,
        "properties": {name: schema_for(h) for name, h in properties.items()},
    }
    if required:
        schema["required"] = required
    return schema


def signature_schemas(
    fn: Any, *, skip: frozenset[str], generator: bool
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """`(input_schema, output_schema)` of a tool function, as pygents writes them.

    Parameters in `skip` (fixed kwargs, injected context) are left out of the
    input: the caller does not provide them. A parameter's `None` alternative
    is left out too (`limit: int | None = None` is `{"type": "integer"}`): a
    caller says None by omitting it. A generator's output schema is the schema
    of one yielded item; a function without a return hint, or returning None,
    has none (`None`).
    """
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, param in inspect.signature(fn).parameters.items():
        if name in skip or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        properties[name] = schema_for(_without_none(hints.get(name, Any)))
        if param.default is param.empty:
            required.append(name)
    input_schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        input_schema["required"] = required
    returned = hints.get("return")
    if generator and returned is not None:
        item_args = typing.get_args(returned)
        returned = item_args[0] if typing.get_origin(returned) in _GENERATORS and item_args else Any
    if returned is None or returned is type(None):
        return input_schema, None
    return input_schema, schema_for(returned)


def _without_none(hint: Any) -> Any:
    """`hint` without its `None` alternative (`X | None` is `X`)."""
    if typing.get_origin(hint) is Union or isinstance(hint, types.UnionType):
        kept = tuple(a for a in typing.get_args(hint) if a is not type(None))
        if len(kept) == 1:
            return kept[0]
        if kept and len(kept) < len(typing.get_args(hint)):
            return Union[kept]  # noqa: UP007 (built from a tuple at run time)
    return hint
