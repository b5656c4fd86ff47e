"""Queued turns that a branch borrows from its parent until it needs its own copies.

`Agent.branch()` does not copy the parent's queued turns. The child borrows
them: it keeps a `TurnLoan` (the parent's turns, as a tuple shared by every
branch taken while the parent's queue stays the same) and makes its copies the
first time it shows, runs, changes or saves its queue. Until then, neither side
may see the other's changes, and this is why it cannot:

- the child never changes a borrowed turn: it copies the turns first;
- the parent changes a turn's declaration (tool, arguments, timeout, tags) only
  through setters, which call `lent_turn_changing` before the change: every
  loan holding that turn has its borrowers copy first, so they copy it as it was;
- running a turn changes only its run state, which copies never take;
- a turn's `hooks` list can change in place, unseen, so a borrower keeps a
  snapshot of the borrowed turns' hooks, taken when it borrowed.

This module sits beside `turns.py` and knows nothing of agents: a borrower is
anything with `_repay()` (see `Borrower`).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pygents_ctx.hooks import Hook
    from pygents_ctx.turns import Turn

__all__ = ["Borrower", "TurnLoan", "hooks_snapshot", "lent_turn_changing"]


class Borrower(Protocol):
    """What holds a loan: it copies the borrowed turns when asked (and leaves the loan)."""

    def _repay(self) -> None: ...


class TurnLoan:
    """Queued turns lent, as they are, to borrowers that have not copied them yet.

    Args:
        turns: The lender's queued turns, next first.
    """

    __slots__ = ("__weakref__", "_borrowers", "_ids", "turns")

    def __init__(self, turns: tuple[Turn, ...]) -> None:
        self.turns = turns
        self._borrowers: weakref.WeakSet[Borrower] = weakref.WeakSet()
        self._ids: frozenset[int] | None = None  # the turns' ids, made when first asked

    def lend_to(self, borrower: Borrower) -> None:
        """Record a borrower: it is asked to copy the turns before one of them changes."""
        self._borrowers.add(borrower)
        _OPEN_LOANS.add(self)

    def leave(self, borrower: Borrower) -> None:
        """Forget a borrower that has made its copies."""
        self._borrowers.discard(borrower)
        if not self._borrowers:
            _OPEN_LOANS.discard(self)

    def holds(self, turn: Turn) -> bool:
        """Whether `turn` is one of the lent turns."""
        ids = self._ids
        if ids is None:
            ids = self._ids = frozenset(map(id, self.turns))
        return id(turn) in ids

    def call_in(self) -> None:
        """Have every borrower copy the turns now."""
        for borrower in list(self._borrowers):  # each one leaves as it repays
            borrower._repay()


# Loans with borrowers; weak, so that a loan whose borrowers are gone is forgotten.
_OPEN_LOANS: weakref.WeakSet[TurnLoan] = weakref.WeakSet()


def lent_turn_changing(turn: Turn) -> None:
    """Called before a turn's declaration changes: borrowers of it copy their turns first."""
    if not _OPEN_LOANS:
        return
    for loan in list(_OPEN_LOANS):  # calling a loan in removes it from the set
        if loan.holds(turn):
            loan.call_in()


def hooks_snapshot(turns: tuple[Turn, ...]) -> dict[int, list[Hook]]:
    """The hooks of those `turns` that have any, by position (most have none)."""
    if not [turn for turn in turns if turn.hooks]:  # in 3.12+, faster than any() of a generator
        return _NO_HOOKS
    return {index: list(turn.hooks) for index, turn in enumerate(turns) if turn.hooks}


_NO_HOOKS: dict[int, list[Hook]] = {}  # shared by every snapshot of unhooked turns, never changed
