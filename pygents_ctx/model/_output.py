"""Structured output: the schema a `ModelLoop` asks for, and the check of the answer.

`StructuredOutput(T)` is made once per loop from the output type (a
dataclass, a `TypedDict` or a pydantic model). Its `schema` is sent with every
model call (`ModelSettings.output_schema`); `parse(text)` reads an answer as
JSON and makes it a `T` with the converter tool arguments use (`_convert`),
or lists what is wrong, each problem with its path in the document.

The schema is made strict as strict tool definitions are (`definitions`):
every object closed and all its properties required, an optional one
nullable. The model then sends `null` for a field it leaves out; such a null
is dropped before the answer is checked, so the field's default applies. A
type strict mode cannot express (a free-form `dict`, a field of any type, a
fixed-length tuple) is sent as it is, with `strict=False`: the provider is
then guided rather than bound, and the answer is checked here all the same.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import orjson
from typing_extensions import is_typeddict

from pygents_ctx.context.messages import Message
from pygents_ctx.errors import ArgumentProblem
from pygents_ctx.model.base import ModelSettings, OutputSchema
from pygents_ctx.model.definitions import accepts_null, strict_schema
from pygents_ctx.tools._convert import Conversion
from pygents_ctx.tools._schema import schema_for, undescribable

__all__ = ["StructuredOutput"]


def _without_optional_nulls(
    document: Any, schema: Mapping[str, Any], defs: Mapping[str, Any]
) -> Any:
    """`document` less the nulls strict mode made the model send for optional fields.

    A null is dropped where the field is not required and its own schema does
    not take null, at any depth the schema describes.
    """
    ref = schema.get("$ref")
    if isinstance(ref, str):
        schema = defs.get(ref.rsplit("/", 1)[-1], {})
    if isinstance(document, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            return [_without_optional_nulls(item, items, defs) for item in document]
        return document
    if not isinstance(document, dict):
        return document
    for option in schema.get("anyOf", ()):
        if isinstance(option, Mapping) and ("properties" in option or "$ref" in option):
            return _without_optional_nulls(document, option, defs)
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    kept = {}
    for name, value in document.items():
        field = properties.get(name)
        if field is None:
            kept[name] = value
        elif value is None and name not in required and not accepts_null(field):
            continue  # left out: its default applies
        else:
            kept[name] = _without_optional_nulls(value, field, defs)
    return kept


def _schema_name(cls: type) -> str:
    name = "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "_" for c in cls.__name__)
    return name[:64] or "output"


class StructuredOutput:
    """An output type, its schema for the provider, and the check of an answer.

    Args:
        output_type: A dataclass, a `TypedDict` or a pydantic model (a class with
            `model_validate` and `model_json_schema`).

    Raises:
        TypeError: `output_type` is none of those, or holds a type that no JSON
            schema describes (a socket, say).
    """

    __slots__ = ("_conversion", "_described", "schema", "type")

    def __init__(self, output_type: Any) -> None:
        if not isinstance(output_type, type) or not (
            dataclasses.is_dataclass(output_type)
            or is_typeddict(output_type)
            or (
                callable(getattr(output_type, "model_validate", None))
                and callable(getattr(output_type, "model_json_schema", None))
            )
        ):
            raise TypeError(
                f"ModelLoop output_type must be a dataclass, a TypedDict or a pydantic model "
                f"class, not {output_type!r}; wrap a single value in a dataclass with one field"
            )
        missing = undescribable(output_type)
        if missing:
            raise TypeError(
                f"output type {output_type.__name__!r} holds {_type_name(missing[0])}, which no "
                "JSON schema describes, so a model cannot be asked to write it: give that field "
                "a type a model can write (str, int, float, bool, a list, a dict, an Enum, a "
                "dataclass, a TypedDict, a pydantic model) or Any"
            )
        described = schema_for(output_type)
        if "$ref" in described:  # a type that refers to itself: its definition is the root
            name = described["$ref"].rsplit("/", 1)[-1]
            defs = dict(described.get("$defs", {}))
            described = {**defs[name], "$defs": defs}
        name = _schema_name(output_type)
        try:
            schema, strict = (
                strict_schema(described, f"output type {name!r}", all_required=True),
                True,
            )
        except ValueError:  # something strict mode cannot express: a guide, not a bound
            schema, strict = dict(described), False
        self.type = output_type
        self.schema = OutputSchema(name, schema, described.get("description"), strict)
        self._described = described
        self._conversion = Conversion(output_type)

    @classmethod
    def of(cls, output_type: Any, settings: ModelSettings | None) -> StructuredOutput | None:
        """A `ModelLoop`'s output from its arguments (None without an output type).

        Raises:
            TypeError: `output_type` is not a dataclass, `TypedDict` or pydantic
                model.
            ValueError: `settings` has an `output_schema` of its own.
        """
        if output_type is None:
            return None
        made = cls(output_type)
        if settings is not None and settings.output_schema is not None:
            raise ValueError(
                "ModelLoop takes output_type or settings.output_schema, not both; "
                "drop output_schema (output_type sends its own)"
            )
        return made

    def settings(self, settings: ModelSettings | None) -> ModelSettings:
        """`settings` (or none) with this output's schema."""
        return (settings or ModelSettings()).merged(ModelSettings(output_schema=self.schema))

    def parse(self, text: str) -> tuple[Any, list[ArgumentProblem]]:
        """The answer as the output type, or what is wrong with it (`(None, problems)`)."""
        try:
            document = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            shown = text if len(text) <= 60 else text[:57] + "..."
            return None, [ArgumentProblem("", "invalid", f"not a JSON document ({exc}): {shown!r}")]
        if self.schema.strict:
            document = _without_optional_nulls(
                document, self._described, self._described.get("$defs", {})
            )
        value, problems = self._conversion.apply(document)
        if not problems:
            return value, []
        # Paths into the document read as its keys do: "place.city", "" for the document.
        return None, [dataclasses.replace(p, path=p.path.removeprefix(".")) for p in problems]

    def correction(self, problems: list[ArgumentProblem]) -> Message:
        """The user message that tells the model what was wrong and asks again."""
        listed = "".join(
            f"\n- {problem.path or '(the document)'}: {problem.message}" for problem in problems
        )
        return Message(
            "user",
            f"Your answer does not fit the required output schema {self.schema.name!r}:"
            f"{listed}\nAnswer again with one JSON document that fits the schema.",
        )


def _type_name(hint: Any) -> str:
    """`hint` as a reader writes it: `socket.socket` for a class, its repr otherwise."""
    if isinstance(hint, type):
        return f"{hint.__module__}.{hint.__qualname__}"
    return repr(hint)
