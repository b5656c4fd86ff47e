"""Checking a tool call's arguments before the tool runs: built once per tool, cheap per call.

`ArgumentValidator` reads a tool function's signature and type hints when the
tool is decorated and compiles a `TypeCheck` per annotated parameter (see
`_type_checks`). Each call goes through `problems()`, one loop over the
parameters that lists every problem; if there is any, one `ToolArgumentsError`
names them all.

Parameters without a hint (or `Any`) are not type-checked; a tool whose
parameters are all like that, none required, gets no validator at all.

Once a call passes, arguments whose hint names a type JSON does not have (a
dataclass, an enum, a date, ...) are converted to it (`_convert`): the check
then returns the call's `(args, kwargs)` with those values replaced, and None
when nothing was converted.

Unknown names follow the runtime's rule that a caller may pass a superset:
they are dropped without a word, unless something required is missing, in
which case they are most likely the missing names misspelled, and each is
reported with the parameter it probably meant.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pygents_ctx.errors import ArgumentProblem, ToolArgumentsError
from pygents_ctx.tools._convert import ConversionFailed, Convert, Converters
from pygents_ctx.tools._type_checks import TypeCheck, TypeChecks, missing, unknown

if TYPE_CHECKING:
    from pygents_ctx.hooks._calls import CallSpec

__all__ = ["ArgumentValidator", "Check"]

# What a tool calls with a call's own positional and keyword arguments: None, or the
# arguments to call the function with instead (some converted).
Converted = tuple[tuple[Any, ...], dict[str, Any]]
Check = Callable[[tuple[Any, ...], Mapping[str, Any]], Converted | None]


class _Parameter:
    """What the validator knows of one parameter."""

    __slots__ = ("check", "convert", "keyword", "name", "position", "required")

    def __init__(
        self,
        name: str,
        kind: Any,
        position: int | None,
        required: bool,
        check: TypeCheck | None,
        convert: Convert | None,
    ) -> None:
        self.name = name
        self.position = position  # where a positional argument lands in it, if one can
        self.keyword = kind is not inspect.Parameter.POSITIONAL_ONLY
        self.required = required
        self.check = check
        self.convert = convert  # None: a value that passes the check is already its type


class ArgumentValidator:
    """The argument check of one tool; see the module docstring.

    Args:
        owner: The tool's registry key, for the error.
        spec: The tool's `CallSpec` (parameters, fixed kwargs, injected context).
        hints: The function's type hints, `Annotated` kept.
    """

    __slots__ = (
        "_conversions",
        "_keywords",
        "_max_positional",
        "_owner",
        "_parameters",
    )

    def __init__(self, owner: str, spec: CallSpec, hints: Mapping[str, Any]) -> None:
        checks = TypeChecks()
        converters = Converters(checks)
        injected = spec.context_parameters
        where = {name: index for index, name in enumerate(spec.positional)}
        self._owner = owner
        self._parameters = [
            _Parameter(
                name,
                p.kind,
                where.get(name),
                p.default is p.empty and name not in injected and name not in spec.fixed_kwargs,
                None if name in injected else checks.check(hints.get(name, Any)),
                None if name in injected else converters.converter(hints.get(name, Any)),
            )
            for name, p in spec.parameters.items()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        self._conversions = [p for p in self._parameters if p.convert is not None]
        takes_more = any(p.kind is p.VAR_POSITIONAL for p in spec.parameters.values())
        self._max_positional = None if takes_more else len(spec.positional)
        # The names a keyword argument may give (None: any, the function takes **kwargs).
        self._keywords = (
            None if spec.accepted is None else [p.name for p in self._parameters if p.keyword]
        )

    @classmethod
    def build(cls, owner: str, spec: CallSpec, hints: Mapping[str, Any]) -> Check | None:
        """The check of the tool's calls, or None when no call could fail it (nothing to check)."""
        made = cls(owner, spec, hints)
        if any(
            p.required or p.check is not None or p.convert is not None for p in made._parameters
        ):
            return made.check
        return None

    def check(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Converted | None:
        """Check a call's own arguments; None, or the arguments with some converted.

        Raises:
            ToolArgumentsError: Any argument is wrong (every problem listed), or a
                value cannot be made into its type.
        """
        found = self.problems(args, kwargs)
        if found:
            raise ToolArgumentsError(self._owner, found)
        return self._converted(args, kwargs) if self._conversions else None

    def problems(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[ArgumentProblem]:
        """Every problem with a call's own arguments, in the order of the parameters."""
        found: list[ArgumentProblem] = []
        n = len(args)
        if self._max_positional is not None and n > self._max_positional:
            found.append(
                ArgumentProblem(
                    "args",
                    "unknown",
                    f"{n} positional arguments given, the tool takes at most "
                    f"{self._max_positional}",
                )
            )
        missed = []
        for parameter in self._parameters:
            name, position = parameter.name, parameter.position
            given_by_name = parameter.keyword and name in kwargs
            if position is not None and position < n:
                if given_by_name:
                    found.append(
                        ArgumentProblem(name, "invalid", "given twice: by position and by name")
                    )
                elif parameter.check is not None:
                    parameter.check.explain(args[position], name, found)
            elif given_by_name:
                if parameter.check is not None:
                    parameter.check.explain(kwargs[name], name, found)
            elif parameter.required:
                missed.append(name)
        found.extend(missing(name) for name in missed)
        if missed and self._keywords is not None:
            known = set(self._keywords)
            by_position = {p.name for p in self._parameters if not p.keyword}
            for name in kwargs:
                if name in by_position:
                    found.append(
                        ArgumentProblem(
                            name, "unknown", "can only be given by position, not by name"
                        )
                    )
                elif name not in known:
                    found.append(
                        unknown("", name, missed, self._keywords, "a parameter of this tool")
                    )
        return found

    # -- converting a call that passed ------------------------------------------------

    def _converted(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Converted | None:
        """The call's arguments with the values that need it converted; None if none changed.

        Raises:
            ToolArgumentsError: A value passed the check but cannot be made into its type
                (a dataclass's `__post_init__` refused it).
        """
        new_args: list[Any] | None = None
        new_kwargs: dict[str, Any] | None = None
        n = len(args)
        for parameter in self._conversions:
            position = parameter.position
            if position is not None and position < n:
                value = args[position]
            elif parameter.keyword and parameter.name in kwargs:
                value = kwargs[parameter.name]
                position = None
            else:
                continue
            try:
                made = parameter.convert(value)  # type: ignore[misc]  # set for these
            except ConversionFailed as failed:
                raise ToolArgumentsError(
                    self._owner, failed.within(parameter.name).problems
                ) from None
            if made is value:
                continue
            if position is not None:
                if new_args is None:
                    new_args = list(args)
                new_args[position] = made
            else:
                if new_kwargs is None:
                    new_kwargs = dict(kwargs)
                new_kwargs[parameter.name] = made
        if new_args is None and new_kwargs is None:
            return None
        return (
            args if new_args is None else tuple(new_args),
            new_kwargs if new_kwargs is not None else dict(kwargs),
        )
