"""Structured output: the schema a `ModelLoop` asks for, and the check of the answer.

`StructuredOutput(T)` is made once per loop from the output type (a
dataclass, a `TypedDict` or a pydantic model). Its `schema` is sent with every
model call (`ModelSettings.output_schema`); `parse(text)` reads an answer as
JSON and makes it a `T` with the converter tool arguments use (`_convert`),
or lists what is wrong, each problem with its path in the document.

The schema is made strict the way OpenAI's strict mode needs it: every
object lists all its properties as required and allows no others, and
keywords strict mode refuses are left out. A type strict mode cannot describe
(a free-form `dict`, a field of any type, a fixed-length tuple) is sent with
`strict=False`: the provider is then guided rather than bound, and the answer
is checked here all the same.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

import orjson
from typing_extensions import is_typeddict

from pygents_ctx._convert import Conversion
from pygents_ctx._schema import schema_for
from pygents_ctx.context.messages import Message
from pygents_ctx.errors import ArgumentProblem
from pygents_ctx.model.base import ModelSettings, OutputSchema

__all__ = ["StructuredOutput", "strict_schema"]

# What OpenAI's strict mode takes of `format`; other formats are left out (the check stays).
_STRICT_FORMATS: Final = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
# Keywords strict mode refuses, or that only narrow what our own check enforces anyway.
_DROPPED: Final = frozenset(
    {"default", "uniqueItems", "minItems", "maxItems", "contentEncoding", "examples"}
)


def strict_schema(schema: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """`schema` in the form OpenAI's strict mode takes, and whether it could be made so.

    Every object gets `additionalProperties: false` and all its properties
    required; `default`, `uniqueItems`, item counts and unknown formats are
    left out. It cannot be strict (False) when it holds a schema that allows
    anything (`{}`), a free-form object (`additionalProperties` a schema), or
    a fixed-length tuple (`prefixItems`).
    """
    strict = True

    def walk(node: Any) -> Any:
        nonlocal strict
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, Mapping):
            return node
        if not node:
            strict = False  # anything at all
            return {}
        made: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROPPED or (key == "format" and value not in _STRICT_FORMATS):
                continue
            if key == "prefixItems":
                strict = False
            if key in ("properties", "$defs"):
                made[key] = {name: walk(sub) for name, sub in value.items()}
            else:
                made[key] = walk(value)
        if made.get("type") == "object":
            extra = made.get("additionalProperties")
            if isinstance(extra, Mapping) or extra is True:
                strict = False  # a dict of anything: strict mode has no such object
            elif "properties" in made or extra is None:
                made["additionalProperties"] = False
                made["required"] = list(made.get("properties", {}))
                made.setdefault("properties", {})
        return made

    return walk(schema), strict


def _schema_name(cls: type) -> str:
    name = "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "_" for c in cls.__name__)
    return name[:64] or "output"


class StructuredOutput:
    """An output type, its schema for the provider, and the check of an answer.

    Args:
        output_type: A dataclass, a `TypedDict` or a pydantic model (a class with
            `model_validate` and `model_json_schema`).

    Raises:
        TypeError: `output_type` is none of those.
    """

    __slots__ = ("_conversion", "schema", "type")

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
        described = schema_for(output_type)
        if "$ref" in described:  # a type that refers to itself: its definition is the root
            name = described["$ref"].rsplit("/", 1)[-1]
            defs = dict(described.get("$defs", {}))
            described = {**defs[name], "$defs": defs}
        schema, strict = strict_schema(described)
        self.type = output_type
        self.schema = OutputSchema(
            _schema_name(output_type), schema, schema.get("description"), strict
        )
        self._conversion = Conversion(output_type)

    @classmethod
    def of(
        cls, output_type: Any, retries: object, settings: ModelSettings | None
    ) -> StructuredOutput | None:
        """A `ModelLoop`'s output from its arguments (None without an output type).

        Raises:
            TypeError: `output_type` is not a dataclass, `TypedDict` or pydantic
                model, or `retries` is not an int.
            ValueError: `retries` is negative, or `settings` has an
                `output_schema` of its own.
        """
        if isinstance(retries, bool) or not isinstance(retries, int):
            raise TypeError(f"ModelLoop output_retries must be an int, not {retries!r}")
        if retries < 0:
            raise ValueError(f"ModelLoop output_retries must be at least 0, not {retries}")
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
        value, problems = self._conversion.apply(document)
        return (None, problems) if problems else (value, [])

    def correction(self, problems: list[ArgumentProblem]) -> Message:
        """The user message that tells the model what was wrong and asks again."""
        listed = "".join(
            f"\n- {problem.path.removeprefix('.') or '(the document)'}: {problem.message}"
            for problem in problems
        )
        return Message(
            "user",
            f"Your answer does not fit the required output schema {self.schema.name!r}:"
            f"{listed}\nAnswer again with one JSON document that fits the schema.",
        )
