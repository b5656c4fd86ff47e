"""An agent's queued turns, which it may hold before it has built them.

An agent's queue is a `PendingTurns`: its own `Turn` objects, or turns it has
not needed yet, built the first time it does (it runs, shows, changes or saves
its queue). Two kinds wait that way:

- a branch's turns: `Agent.branch()` does not copy the parent's queued turns.
  The child borrows them (`Borrowed`): it keeps a `TurnLoan`, the parent's turns
  as a tuple shared by every branch taken while the parent's queue stays the
  same, and makes its copies when it needs them. Until then, neither side may
  see the other's changes, and this is why it cannot:

  - the child never changes a borrowed turn: it copies the turns first;
  - the parent changes a turn's declaration (tool, arguments, timeout, tags)
    only through setters, which call `lent_turn_changing` first: every open
    loan holding that turn has its borrowers copy their turns, as they still are;
  - running a turn changes only its run state, which copies never take;
  - a turn's `hooks` list can change in place, unseen, so a borrower keeps a
    snapshot of the borrowed turns' hooks, taken when it borrowed;

- a loaded agent's turns, checked when loaded and built later (see `turns._loading`).

This module builds on the turns, and knows nothing of agents. The turns hold
the set of open loans (`turns._state.OPEN_LOANS`), which their setters consult
(`lent_turn_changing`) without knowing this module.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pygents_ctx.hooks._dispatch import TurnHookList
from pygents_ctx.turns._state import OPEN_LOANS

if TYPE_CHECKING:
    from pygents_ctx.hooks import Hook
    from pygents_ctx.tools import Tool
    from pygents_ctx.turns._turn import Turn

__all__ = ["Borrowed", "PendingTurns", "TurnLoan"]


class TurnLoan:
    """Queued turns lent, as they are, to the branches that have not copied them yet.

    Args:
        turns: The lender's queued turns, next first.
    """

    __slots__ = ("__weakref__", "_borrowers", "_ids", "turns")

    def __init__(self, turns: tuple[Turn, ...]) -> None:
        self.turns = turns
        self._borrowers: weakref.WeakSet[PendingTurns] = weakref.WeakSet()
        self._ids: frozenset[int] | None = None  # the turns' ids, made when first asked

    def lend_to(self, borrower: PendingTurns) -> None:
        """Record a borrower: it copies the turns before one of them changes."""
        self._borrowers.add(borrower)
        OPEN_LOANS.add(self)

    def leave(self, borrower: PendingTurns) -> None:
        """Forget a borrower that has made its copies."""
        self._borrowers.discard(borrower)
        if not self._borrowers:
            OPEN_LOANS.discard(self)

    def holds(self, turn: object) -> bool:
        """Whether `turn` is one of the lent turns."""
        ids = self._ids
        if ids is None:
            ids = self._ids = frozenset(map(id, self.turns))
        return id(turn) in ids

    def call_in(self) -> None:
        """Have every borrower copy the turns now."""
        for borrower in list(self._borrowers):  # each one leaves as it copies
            borrower.own()


class Borrowed:
    """A branch's share of a loan: the lent turns, with their hooks as they were then.

    Args:
        loan: The lent turns.
        hooks: The hooks of those lent turns that had any, by position.
    """

    __slots__ = ("hooks", "loan")

    def __init__(self, loan: TurnLoan, hooks: dict[int, list[Hook]]) -> None:
        self.loan = loan
        self.hooks = hooks

    def tools(self) -> Iterable[Tool[..., Any]]:
        """The lent turns' tools (declarations cannot change while lent)."""
        return {turn._tool for turn in self.loan.turns}

    def build(self) -> list[Turn]:
        """Fresh, unrun copies of the lent turns, each with its snapshot of hooks."""
        hooks = self.hooks
        return [
            turn._twin(TurnHookList(hooks.get(index, ())))
            for index, turn in enumerate(self.loan.turns)
        ]


def _hooks_snapshot(turns: tuple[Turn, ...]) -> dict[int, list[Hook]]:
    """The hooks of those `turns` that have any, by position (most have none)."""
    if not [turn for turn in turns if turn._hooks]:  # in 3.12+, faster than any() of a generator
        return _NO_HOOKS
    return {index: list(turn._hooks) for index, turn in enumerate(turns) if turn._hooks}


_NO_HOOKS: dict[int, list[Hook]] = {}  # shared by every snapshot of unhooked turns, never changed


class PendingTurns:
    """An agent's queued turns: its own (`queued`), or a branch's borrowed ones.

    While it borrows, `queued` is empty: `own()` builds its copies into it.
    """

    __slots__ = ("__weakref__", "_borrowed", "_lent", "queued")

    def __init__(self) -> None:
        self.queued: deque[Turn] = deque()
        self._borrowed: Borrowed | None = None
        self._lent: TurnLoan | None = None  # the loan last made of `queued`

    def own(self) -> deque[Turn]:
        """The queued turns, copied now if they were borrowed, for the agent to read or change."""
        self._lent = None  # they may change: the next branch makes a new loan
        borrowed = self._borrowed
        if borrowed is not None:
            self._borrowed = None
            borrowed.loan.leave(self)
            self.queued.extend(borrowed.build())
        return self.queued

    def borrow(self, turns: Borrowed) -> None:
        """Hold a parent's `turns` (in place of an empty queue) until they are needed."""
        self._borrowed = turns
        turns.loan.lend_to(self)

    def tools(self) -> set[Tool[..., Any]]:
        """The tools of the queued turns, borrowed ones included, without copying them."""
        if self._borrowed is not None:
            return set(self._borrowed.tools())
        return {turn._tool for turn in self.queued}

    def lend(self) -> Borrowed:
        """The queued turns, for a branch to borrow (see `borrow`)."""
        if self._borrowed is not None:  # borrowed, not copied: lent on as they are
            return self._borrowed
        # Branches of an unchanged queue share one loan, so their memory stays flat.
        # (`own()` forgets it, so that it keeps no turn alive the agent has let go of;
        # the comparison is what makes reusing it right: a run pops turns unseen.)
        turns, lent = tuple(self.queued), self._lent
        if lent is None or lent.turns != turns:
            lent = self._lent = TurnLoan(turns)
        return Borrowed(lent, _hooks_snapshot(turns))
