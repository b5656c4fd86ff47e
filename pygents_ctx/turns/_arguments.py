"""`turn.args` and `turn.kwargs`: a turn's arguments, handed out as pygents hands them out.

Reading either gives a list or a dict whose changes go to the turn through
the same checked setter as an assignment: `turn.kwargs["x"] = 1` changes the
call (and is refused, changing nothing, while the turn runs or when a key is
not a str). The turn itself never holds these objects: its declaration stays
the never-changed `Declared` that copies share, so a change made here reaches
this turn and no copy of it.

Once the turn's arguments are assigned anew (`turn.kwargs = {...}`), a list or
dict read before no longer writes to it, as pygents' old one, which the
assignment replaced, no longer does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Protocol, Self, SupportsIndex, TypeVar

from pygents_ctx.turns._state import Declared

__all__ = ["TurnArgs", "TurnKwargs"]

T = TypeVar("T")


class _Turn(Protocol):
    """What the views need of a `Turn`: its declaration, and its checked setters."""

    _declared: Declared
    args: Any
    kwargs: Any


class _Arguments:
    """What both views share: how an edit reaches the turn.

    It is made on a plain copy, given to the turn's setter (checked, and refused
    while the turn runs), then shown in the view.
    """

    __slots__ = ()  # the views hold `_turn` and `_source` in their own slots
    _field: ClassVar[str]  # the turn's property: "args" or "kwargs"
    _plain: ClassVar[type[Any]]  # list or dict: what a copy of the view is
    _turn: _Turn
    _source: object  # the turn's stored arguments the view was made from

    def _edit(self, change: Callable[[Any], T]) -> T:
        turn = self._turn
        if getattr(turn._declared, self._field) is not self._source:  # replaced since
            return change(self)  # only the view changes, as pygents' replaced one
        edited = self._plain(self)
        result = change(edited)
        setattr(turn, self._field, edited)
        self._source = getattr(turn._declared, self._field)  # type: ignore[misc]  # a view slot
        self._show(edited)
        return result

    def _show(self, edited: Any) -> None:
        raise NotImplementedError

    def __reduce__(self) -> tuple[Any, ...]:
        return self._plain, (self._plain(self),)  # a copy or a pickle: plain, its own


class TurnKwargs(_Arguments, dict[str, Any]):
    """`turn.kwargs`: a dict of the turn's keyword arguments that writes to the turn."""

    __slots__ = ("_source", "_turn")
    _field, _plain = "kwargs", dict

    def __init__(self, turn: _Turn, source: dict[str, Any]) -> None:
        dict.__init__(self, source)
        self._turn, self._source = turn, source

    def _show(self, edited: dict[str, Any]) -> None:
        dict.clear(self)
        dict.update(self, edited)

    def __setitem__(self, key: str, value: Any) -> None:
        self._edit(lambda d: dict.__setitem__(d, key, value))

    def __delitem__(self, key: str) -> None:
        self._edit(lambda d: dict.__delitem__(d, key))

    def __ior__(self, other: Any) -> Self:  # type: ignore[override,misc]
        self._edit(lambda d: dict.update(d, other))
        return self

    def clear(self) -> None:
        self._edit(dict.clear)

    def pop(self, key: str, *default: Any) -> Any:
        return self._edit(lambda d: dict.pop(d, key, *default))

    def popitem(self) -> tuple[str, Any]:
        return self._edit(dict.popitem)

    def setdefault(self, key: str, default: Any = None) -> Any:
        return self._edit(lambda d: dict.setdefault(d, key, default))

    def update(self, *others: Any, **values: Any) -> None:
        self._edit(lambda d: dict.update(d, *others, **values))


class TurnArgs(_Arguments, list[Any]):
    """`turn.args`: a list of the turn's positional arguments that writes to the turn."""

    __slots__ = ("_source", "_turn")
    _field, _plain = "args", list

    def __init__(self, turn: _Turn, source: tuple[Any, ...]) -> None:
        list.__init__(self, source)
        self._turn, self._source = turn, source

    def _show(self, edited: list[Any]) -> None:
        list.__init__(self, edited)

    def __setitem__(self, index: Any, value: Any) -> None:
        self._edit(lambda items: list.__setitem__(items, index, value))

    def __delitem__(self, index: SupportsIndex | slice) -> None:
        self._edit(lambda items: list.__delitem__(items, index))

    def __iadd__(self, other: Iterable[Any]) -> Self:  # type: ignore[misc]
        self._edit(lambda items: list.extend(items, other))
        return self

    def __imul__(self, times: SupportsIndex) -> Self:
        self._edit(lambda items: list.__imul__(items, times))
        return self

    def append(self, value: Any) -> None:
        self._edit(lambda items: list.append(items, value))

    def extend(self, values: Iterable[Any]) -> None:
        self._edit(lambda items: list.extend(items, values))

    def insert(self, index: SupportsIndex, value: Any) -> None:
        self._edit(lambda items: list.insert(items, index, value))

    def pop(self, index: SupportsIndex = -1) -> Any:
        return self._edit(lambda items: list.pop(items, index))

    def remove(self, value: Any) -> None:
        self._edit(lambda items: list.remove(items, value))

    def clear(self) -> None:
        self._edit(list.clear)

    def reverse(self) -> None:
        self._edit(list.reverse)

    def sort(self, *, key: Callable[[Any], Any] | None = None, reverse: bool = False) -> None:
        self._edit(lambda items: list.sort(items, key=key, reverse=reverse))
